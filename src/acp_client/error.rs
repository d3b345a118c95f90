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
    #[error("could not start the ACP child `{program}`: {reason}")]
    Spawn { program: String, reason: String },
    #[error("the ACP child did not answer initialize within {}ms{stderr}", timeout.as_millis())]
    InitializeTimeout {
        timeout: Duration,
        stderr: StderrTail,
    },
    #[error("the ACP child exited during {stage} ({status}){stderr}")]
    Exited {
        stage: String,
        status: String,
        stderr: StderrTail,
    },
    #[error("the connection to the remote ACP child broke during {stage} ({status}){stderr}")]
    ConnectionLost {
        stage: String,
        status: String,
        stderr: StderrTail,
    },
    #[error("the ACP child wrote output that is not JSON-RPC ({detail}){stderr}")]
    Garbage { detail: String, stderr: StderrTail },
    #[error("the ACP child flooded its output: more than {limit} bytes in one run")]
    Flood { limit: usize },
    #[error("the ACP child answered {method} with an error: {message}")]
    Refused { method: String, message: String },
    #[error("the ACP child answered {method} with a result that is not ACP: {detail}")]
    BadAnswer { method: String, detail: String },
    #[error("the ACP child answered session/new without a session id")]
    NoSessionId,
    #[error("the ACP child cannot continue a session (it advertises neither session/resume nor session/load)")]
    NotContinuable,
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
