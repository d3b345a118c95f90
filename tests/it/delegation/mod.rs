//! The delegation test catalogue, ported (and the session host children run on): the subagent service, the in-process driver, spawn
//! and fork, structured output, background tasks and the model-facing tools — against the real
//! agent loop and session store, with a scripted model.

mod budget;
mod compaction;
mod control;
mod definitions;
mod host;
mod inprocess;
mod limits;
mod queue;
mod service;
mod structured;
mod support;
mod tasks;
mod tools;
mod worktree;
