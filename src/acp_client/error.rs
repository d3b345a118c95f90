//! How a child run fails: [`ChildError`], each variant naming its cause.

use std::fmt;
use std::time::Duration;

/// The last stderr lines of a child, as an error detail (`; stderr: a | b`, or nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StderrTail(pub Vec<String>);

impl fmt::Display for StderrTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        write!(f, "; last stderr lines: {}", self.0.join(" | "))
    }
}

/// Why a child run failed; the message names the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChildError {
    /// The process could not be started.
    #[error("could not start the ACP child `{program}`: {reason}")]
    Spawn {
        /// The program kin tried to run.
        program: String,
        /// Why the start failed (the OS error).
        reason: String,
    },
    /// No answer to `initialize` in time.
    #[error("the ACP child did not answer initialize within {}ms{stderr}", timeout.as_millis())]
    InitializeTimeout {
        /// The limit that ran out.
        timeout: Duration,
        /// The child's last stderr lines.
        stderr: StderrTail,
    },
    /// The process exited before the run was over.
    #[error("the ACP child exited during {stage} ({status}){stderr}")]
    Exited {
        /// The step it exited in (`initialize`, `session/new`, `session/prompt`, ...).
        stage: String,
        /// Its exit status, as text.
        status: String,
        /// The child's last stderr lines.
        stderr: StderrTail,
    },
    /// The channel to a remote child (`ssh`, `docker exec`) broke before the run was over.
    #[error("the connection to the remote ACP child broke during {stage} ({status}){stderr}")]
    ConnectionLost {
        /// The step it broke in.
        stage: String,
        /// The exit status of the local end of the channel, as text.
        status: String,
        /// The child's last stderr lines.
        stderr: StderrTail,
    },
    /// The child wrote a line that is not JSON-RPC.
    #[error("the ACP child wrote output that is not JSON-RPC ({detail}){stderr}")]
    Garbage {
        /// What was wrong with it.
        detail: String,
        /// The child's last stderr lines.
        stderr: StderrTail,
    },
    /// The child wrote more than kin reads from one run.
    #[error("the ACP child flooded its output: more than {limit} bytes in one run")]
    Flood {
        /// The cap, in bytes.
        limit: usize,
    },
    /// The child answered a request with a JSON-RPC error.
    #[error("the ACP child answered {method} with an error: {message}")]
    Refused {
        /// The request it refused.
        method: String,
        /// The error's message.
        message: String,
    },
    /// The child answered a request with a result ACP does not allow.
    #[error("the ACP child answered {method} with a result that is not ACP: {detail}")]
    BadAnswer {
        /// The request it answered.
        method: String,
        /// What did not decode.
        detail: String,
    },
    /// `session/new` succeeded without a session id.
    #[error("the ACP child answered session/new without a session id")]
    NoSessionId,
    /// A continuation was asked of a child that offers neither resume nor load.
    #[error("the ACP child cannot continue a session (it advertises neither session/resume nor session/load)")]
    NotContinuable,
    /// The run's token was cancelled.
    #[error("the ACP child run was cancelled")]
    Cancelled,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_tail_reads_as_a_detail() {
        assert_eq!(StderrTail::default().to_string(), "");
        assert_eq!(
            StderrTail(vec!["a".into(), "b".into()]).to_string(),
            "; last stderr lines: a | b"
        );
    }
}
