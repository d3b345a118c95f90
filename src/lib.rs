#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
//! kin: an ACP agent that delegates.
//!
//! # Layout
//! - [`rpc`]: JSON-RPC 2.0 peer over any byte streams (editor on stdio, children on pipes).
//! - [`acp`]: the ACP boundary; requests in, `session/update`s out; the editor bridge over ACP.
//! - [`runtime`]: the one process-wide [`runtime::Runtime`] (store, model, tools, live agents).
//! - [`agent`]: the turn loop of one live session.
//! - [`tools`]: the tool trait and registry; the coding tools (`read`, `write`, `edit`, `glob`,
//!   `grep`, `bash`) with confinement, permissions and the editor bridge trait.
//! - [`subagent`]: delegation to child agents (`spawn`, `fork`) and the `subagent` tools.
//! - [`tasks`]: background tasks and the `task_*` tools.
//! - [`model`]: the model trait; the OpenAI-compatible HTTP client; replay of recorded scenarios.
//! - [`session`]: the durable JSONL session log and its folds.
//! - [`scenario`]: drives `kin acp` through a recorded scenario (tests, `kin demo`, benches).
//! - [`config`]: where kin keeps its data; the model configuration (flags, env, config file).
//! - [`headless`]: `kin run`, one turn without an editor.
//!
//! Dependencies point down: `acp -> agent -> {tools, model, session} -> rpc`.

pub mod acp;
pub mod agent;
pub mod config;
pub mod headless;
pub mod model;
pub mod rpc;
pub mod runtime;
pub mod scenario;
pub mod session;
pub mod subagent;
pub mod tasks;
pub mod time;
pub mod tools;
