//! kin as the client of an ACP agent subprocess (a child agent): launch, handshake, one prompt
//! at a time, and a teardown that leaves no process behind. Below `acp` (the editor-facing
//! server) and the delegation code that uses it; uses `rpc`, `config`, `process` and `tools`.
//!
//! - [`command`]: what to launch and the limits of a run;
//! - [`content`]: kin's stored prompt payloads as typed ACP content blocks (also for replay);
//! - [`process`]: the OS process, its stderr tail and its teardown;
//! - [`inbound`]: the child's notifications and requests, decoded with the ACP schema types;
//! - [`forward`]: the child's place in kin's tree: its updates passed on under kin's ids;
//! - [`permission`]: its permission requests, decided by policy and mode or asked of the editor;
//! - [`services`]: the file services kin offers it, confined to its working directory;
//! - [`terminals`]: the terminals kin offers it, in the editor or local, within its mode;
//! - [`shown_terminals`]: the terminals its tool calls name, as the editor can show them;
//! - [`session`]: [`AcpChild`], the ACP session (`initialize`, new or continued session,
//!   steered prompts);
//! - [`error`]: [`ChildError`]: a start failure, no answer to `initialize` in time, an exit
//!   (status and last stderr lines), output that is not JSON-RPC or not ACP, or output beyond
//!   [`MAX_OUTPUT_BYTES`].
//!
//! The child speaks JSON-RPC on its stdin/stdout through the same [`crate::rpc::Peer`] that
//! serves the editor. Only `agent_message_chunk` text collected during a prompt is the answer.

mod command;
pub(crate) mod content;
mod error;
mod forward;
mod inbound;
mod permission;
mod process;
mod services;
mod session;
mod shown_terminals;
mod terminals;

pub use command::{
    ChildCommand, ChildSandbox, DEPTH_ENV, DEPTH_META_KEY, MAX_OUTPUT_BYTES, PARENT_META_KEY,
};
pub use error::{ChildError, StderrTail};
pub(crate) use forward::child_session_id;
pub use forward::{ChildLink, ChildSink};
pub use session::{continuation_method, AcpChild, PromptOutcome, Steer};
