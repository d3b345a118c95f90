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

pub(crate) use error::RpcError;
pub(crate) use framing::{Frame, LineReader, MAX_LINE_BYTES};
pub(crate) use message::{classify, Incoming};
pub(crate) use peer::{Handler, Peer, Reply, RequestContext};
pub(crate) use stdio::stdio;
