//! JSON-RPC 2.0 over newline-delimited streams, role-agnostic.
//!
//! The same [`Peer`] serves the editor on stdin/stdout and drives child agents over their pipes.
//! It knows framing, classification, ids, cancellation and ordering; it knows nothing of ACP:
//! what a method means is up to the [`Handler`] it is given.

mod error;
mod framing;
mod message;
mod peer;
mod stdio;

pub use error::RpcError;
pub use framing::{Frame, LineReader, MAX_LINE_BYTES};
pub use message::{classify, Incoming, Rejected};
pub use peer::{Handler, Peer, Reply, RequestContext};
pub use stdio::{stdio, StdioFlags};
