//! kin: an ACP agent that delegates.
//!
//! # Layout
//! - [`rpc`]: JSON-RPC 2.0 peer over any byte streams (editor on stdio, children on pipes).
//! - [`acp`]: the ACP boundary with the editor; requests in, `session/update`s out; the editor
//!   bridge over ACP.
//! - [`acp_client`]: kin as the ACP client of child agent processes (the other direction).
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
//! - [`mcp`]: MCP servers (the editor's and the configured ones), client side through `rmcp`:
//!   each session's servers started in the background, their tools offered as
//!   `mcp__<server>__<tool>`, shared by in-process children.
//! - [`process`]: the processes kin starts (commands, child agents): process groups, the
//!   process guard, the scrubbed environment, output caps.
//! - [`model`]: the model trait; the OpenAI-compatible HTTP client; replay of recorded scenarios.
//! - [`config`]: where kin keeps its data; the model configuration (flags, env, config file);
//!   agent definitions ([`config::agents`]); the key `kin login` stores (OS keyring or a 0600
//!   file).
//! - [`login`]: `kin login` and `kin logout`, the terminal sign-in (endpoint, key, model, one
//!   checking request) that ACP's terminal auth method runs.
//! - [`session`]: the durable JSONL session log, its records and its folds.
//! - [`sync`]: the one mutex `lock` helper. `background`: a low-priority thread for work beside
//!   answering the client (the HTTP client's early build).
//! - [`memory`]: giving the heap of a huge message back to the system.
//! - [`scenario`]: drives `kin acp` through a recorded scenario (`kin demo`, tests, benches).
//!
//! Dependencies point down:
//! `{acp, headless, mcp_server} -> runtime -> delegation -> agent -> tools -> model -> session`,
//! where `delegation` also uses `tasks` (which uses `tools`), `acp_client`, `config` (agent
//! definitions, `[delegation]`) and `process` (git worktrees); `acp` and `headless` also use
//! `agent` directly (`acp` also the depth keys of `acp_client`); `config` uses `model` (a model
//! is built from its configuration) and, for agent definitions, `agent` (the host's models and
//! tools, the session's shape). `mcp` uses `tools`, `model` and `process`; `agent` holds a
//! session's MCP servers (`agent::mcp_view`), `runtime` starts and stops them, `acp` and
//! `config` turn the editor's and the file's entries into `mcp` specs.
//! [`acp_client`] uses `rpc`, `config`, `process` and, to serve a child's requests, `tools`
//! (the editor bridge, permissions, confined file access); `tools` and `config` use `process`,
//! which uses only `sync`. `rpc` uses `sync` and `memory`, `session` uses `sync`; `time`, `text`,
//! `memory`, `background` and `limits` use nothing else of kin; `scenario` uses `rpc`, `session`
//! and `process`; `login` uses `config` and `model`.

pub mod acp;
pub mod acp_client;
pub mod agent;
mod background;
// Unit tests share the integration tests' fixtures, which name the crate `kin`.
#[cfg(test)]
extern crate self as kin;
pub mod config;
pub mod delegation;
pub mod headless;
pub mod limits;
pub mod login;
pub mod mcp;
pub mod mcp_server;
pub mod memory;
pub mod model;
pub mod process;
pub mod rpc;
pub mod runtime;
pub mod scenario;
pub mod session;
pub mod sync;
pub mod tasks;
pub mod text;
pub mod time;
pub mod tools;
