#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
//! kin: an ACP agent that delegates.
//!
//! # Layout
//! - [`rpc`]: JSON-RPC 2.0 peer over any byte streams (editor on stdio, children on pipes).
//! - [`acp`]: the ACP boundary; requests in, `session/update`s out; the editor bridge over ACP;
//!   [`acp::client`], kin as the ACP client of child agents.
//! - [`headless`]: `kin run`, one turn without an editor.
//! - [`runtime`]: wiring: puts the session host, background tasks and delegation together
//!   into the one process-wide [`runtime::Runtime`], and opens, closes and deletes sessions
//!   for the front ends.
//! - [`delegation`]: the one front door for delegation, [`delegation::Delegation`], with an
//!   entry per model verb (`delegate`, `send_message`, `list`, `restore`); its providers
//!   (`spawn`/`fork` in process, `acp:<name>` child processes), one task per background
//!   activation, the task records, and the tools that call it.
//! - [`agent`]: the turn loop of one live session and the one [`agent::StopReason`], and
//!   [`agent::host`], the session host: live sessions, store, models, the one turn driver and
//!   the host event stream.
//! - [`tasks`]: background tasks and the `task_*` tools.
//! - [`tools`]: the tool trait and registry; the coding tools (`read`, `write`, `edit`, `glob`,
//!   `grep`, `bash`) with confinement, permissions and the editor bridge trait.
//! - [`model`]: the model trait; the OpenAI-compatible HTTP client; replay of recorded scenarios.
//! - [`config`]: where kin keeps its data; the model configuration (flags, env, config file).
//! - [`session`]: the durable JSONL session log, its records and its folds.
//! - [`scenario`]: drives `kin acp` through a recorded scenario (`kin demo`, tests, benches).
//!
//! Dependencies point down:
//! `{acp, headless} -> runtime -> delegation -> agent -> tools -> model -> session`, where
//! `delegation` also uses `tasks` (which uses `tools`), `acp` and `headless` also use `agent`
//! directly, and `model` and `config` use each other (a model is built from its configuration).
//! `session`, `rpc` and `time` use nothing else of kin; `scenario` uses `rpc` and `tools`.
//! [`acp::client`] uses only `rpc`, `config` and `tools`; the `acp` provider in `delegation`
//! uses it.

pub mod acp;
pub mod agent;
pub mod config;
pub mod delegation;
pub mod headless;
pub mod model;
pub mod rpc;
pub mod runtime;
pub mod scenario;
pub mod session;
pub mod tasks;
pub mod time;
pub mod tools;
