//! MCP servers, the client side: the editor's (`mcpServers` of `session/new`, `load`,
//! `resume`) and the configured ones (`[mcp_servers.<name>]`), their tools offered to the
//! session's model and its in-process children. Speaks MCP through the official SDK (`rmcp`).
//!
//! - [`spec`]: a server's transport (stdio, streamable HTTP; SSE refused), merging by name;
//! - [`session`]: one session's servers: started in the background, waited for once, stopped;
//! - `server`: one server's task: connect, list tools, relist on change, reconnect with backoff
//!   (not after refused credentials or a listing past its bounds), each call within a time limit;
//! - `call`: one call of a server's tool (progress, cancellation, `input_required` rounds);
//! - `changes`: hearing that its tools changed (a subscription on the stateless revision);
//! - `listing`: a server's tools, page by page within bounds;
//! - `stdio`: a stdio server's supervised process; `frames`: its messages, an oversized answer
//!   turned into an error for its call; `http`: the HTTP transport, refused credentials;
//! - [`oauth`]: OAuth logins to configured HTTP servers (`kin mcp login`), their tokens;
//!   `signin`: those run within a session (on the server's challenge; a wider scope's step-up);
//! - `tool`: a server tool as a kin tool (permissions); `result`: its results for the model;
//! - `elicit`: a server's questions, put to the user of its call in flight;
//! - `progress`: a call's progress notifications, routed to it and throttled for the editor;
//! - `naming`: `mcp__<server>__<tool>` names within the model API's rules, and how a tool
//!   list (an agent definition's) names them.
//!
//! Uses `tools`, `model` (tool specs), `process` and `sync`.

mod call;
mod changes;
mod elicit;
mod frames;
mod http;
mod links;
mod listing;
mod naming;
pub mod oauth;
mod progress;
mod result;
mod server;
pub(crate) mod session;
mod signin;
pub(crate) mod spec;
mod stdio;
mod tool;

pub(crate) use naming::{listed, sanitize, PREFIX as MCP_PREFIX};
pub use server::DEFAULT_CALL_TIMEOUT;
pub use session::{SessionServers, DEFAULT_MAX_TOOLS, DEFAULT_STARTUP_TIMEOUT};
pub use spec::{merge, ClientSecret, EnterpriseIdp, Grant, OAuthSettings, ServerSpec, Transport};
