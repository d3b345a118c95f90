#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
//! kin: an ACP agent that delegates.
//!
//! # Layout
//! - [`rpc`]: JSON-RPC 2.0 peer over any byte streams (editor on stdio, children on pipes).
//! - [`acp`]: the ACP boundary with the editor; requests in, `session/update`s out; the editor
//!   bridge over ACP.
//! - [`acp_client`]: kin as the ACP client of child agent processes (the other direction).
//! - [`headless`]: `kin run`, one turn without an editor.
//! - [`runtime`]: wiring only: puts the session host, background tasks and delegation together
//!   into the one process-wide [`runtime::Runtime`].
//! - [`agent`]: the turn loop of one live session, and [`agent::host`], the session host: live
//!   sessions, store, models, the one turn driver and the host event stream.
//! - [`subagent`]: delegation to child agents (`spawn`, `fork`), the `subagent` tools,
//!   continuable background children ([`subagent::SubagentControl`]: `send_message`,
//!   `list_agents`), and [`subagent::ChildHost`], the host as children see it.
//! - [`tasks`]: background tasks and the `task_*` tools.
//! - [`tools`]: the tool trait and registry; the coding tools (`read`, `write`, `edit`, `glob`,
//!   `grep`, `bash`) with confinement, permissions and the editor bridge trait.
//! - [`process`]: the processes kin starts (commands, child agents): process groups, the
//!   process guard, the scrubbed environment, output caps.
//! - [`model`]: the model trait; the OpenAI-compatible HTTP client; replay of recorded scenarios.
//! - [`config`]: where kin keeps its data; the model configuration (flags, env, config file).
//! - [`session`]: the durable JSONL session log and its folds.
//! - [`sync`]: the one mutex `lock` helper.
//! - [`scenario`]: drives `kin acp` through a recorded scenario (`kin demo`, tests, benches).
//!
//! Dependencies point down:
//! `{acp, headless} -> runtime -> subagent -> agent -> tools -> model -> session`, where
//! `subagent` also uses `tasks` (which uses `tools`) and `acp_client`; `acp` and `headless` also
//! use `agent` directly (`acp` also the depth keys of `acp_client`); `config` uses `model` (a
//! model is built from its configuration).
//! [`acp_client`] uses only `rpc`, `config` and `process`; `tools` and `config` use `process`,
//! which uses nothing else of kin. `session` and `rpc` use only `sync`; `time`, `sync`, `text` and
//! `limits` use nothing else of kin; `scenario` uses `rpc`, `session` and `process`.

pub mod acp;
pub mod acp_client;
pub mod agent;
pub mod config;
pub mod headless;
pub mod limits;
pub mod model;
pub mod process;
pub mod rpc;
pub mod runtime;
pub mod scenario;
pub mod session;
pub mod subagent;
pub mod sync;
pub mod tasks;
pub mod text;
pub mod time;
pub mod tools;
