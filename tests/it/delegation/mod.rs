//! The delegation test catalogue, ported (and the session host children run on): the subagent service, the in-process driver, spawn
//! and fork, structured output, background tasks and the model-facing tools — against the real
//! agent loop and session store, with a scripted model. The providers' own tests (a run held, steered and disposed; structured
//! output; the capability checks) sit beside the code, in `src/delegation/tests/`.

mod budget;
mod compaction;
mod control;
mod definitions;
mod host;
mod limits;
mod queue;
mod service;
mod support;
mod tasks;
mod tools;
mod worktree;
