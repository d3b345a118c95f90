//! Permission asks of a `kin mcp` task in mode `ask`: put to the calling client's user through
//! MCP elicitation when the client declared it, else refused with a message naming `mode`.
//! Files and commands stay local: this bridge offers no other client service.

use std::path::PathBuf;
use std::sync::Arc;

use futures::FutureExt;
use rmcp::service::{ElicitationError, ElicitationMode};
use rmcp::{Peer, RoleServer};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::tools::client::{
    ClientError, ClientFeatures, ClientResult, PermissionAnswer, PermissionPrompt, TerminalExit,
    TerminalOutput, TerminalSpec,
};
use crate::tools::ClientBridge;

/// What a refused ask tells the model (and, through the answer, the calling agent).
pub(crate) const NO_ELICITATION: &str = "the MCP client cannot ask its user (it did not \
     declare elicitation); call kin with `mode` \"allow\" to let edits and commands run, or \
     \"read-only\" to refuse them";

/// The form the client's user fills in.
#[derive(Debug, Deserialize, JsonSchema)]
struct Approval {
    /// Allow this action?
    allow: bool,
}

rmcp::elicit_safe!(Approval);

/// Asks the MCP client that made the call.
pub(crate) struct ElicitAsk {
    peer: Peer<RoleServer>,
}

impl ElicitAsk {
    pub(crate) fn new(peer: Peer<RoleServer>) -> Self {
        Self { peer }
    }

    fn can_elicit(&self) -> bool {
        self.peer
            .supported_elicitation_modes()
            .contains(&ElicitationMode::Form)
    }
}

fn no_service<T: Send + 'static>(what: &str) -> ClientResult<T> {
    let error = ClientError::Failed {
        method: what.to_owned(),
        message: "kin mcp offers no editor services".into(),
    };
    futures::future::ready(Err(error)).boxed()
}

/// The answer for what the client's user said.
fn answer_of(reply: Result<Option<Approval>, ElicitationError>) -> PermissionAnswer {
    match reply {
        Ok(Some(Approval { allow: true })) => PermissionAnswer::AllowOnce,
        Err(ElicitationError::UserCancelled) => PermissionAnswer::Cancelled,
        _ => PermissionAnswer::RejectOnce,
    }
}

impl ClientBridge for ElicitAsk {
    fn features(&self) -> ClientFeatures {
        ClientFeatures::default()
    }

    fn for_child(self: Arc<Self>, _child_session: &str) -> Arc<dyn ClientBridge> {
        self
    }

    fn read_text_file(&self, _path: PathBuf, _cancel: CancellationToken) -> ClientResult<String> {
        no_service("fs/read_text_file")
    }

    fn write_text_file(
        &self,
        _path: PathBuf,
        _content: String,
        _cancel: CancellationToken,
    ) -> ClientResult<()> {
        no_service("fs/write_text_file")
    }

    fn request_permission(
        &self,
        prompt: PermissionPrompt,
        cancel: CancellationToken,
    ) -> ClientResult<PermissionAnswer> {
        if !self.can_elicit() {
            let error = ClientError::NobodyToAsk(NO_ELICITATION.into());
            return futures::future::ready(Err(error)).boxed();
        }
        let peer = self.peer.clone();
        async move {
            let message = format!("kin asks permission: {}", prompt.title);
            tokio::select! {
                reply = peer.elicit::<Approval>(message) => Ok(answer_of(reply)),
                () = cancel.cancelled() => Ok(PermissionAnswer::Cancelled),
            }
        }
        .boxed()
    }

    fn create_terminal(
        &self,
        _call_id: String,
        _spec: TerminalSpec,
        _cancel: CancellationToken,
    ) -> ClientResult<String> {
        no_service("terminal/create")
    }

    fn terminal_output(&self, _terminal_id: String) -> ClientResult<TerminalOutput> {
        no_service("terminal/output")
    }

    fn wait_for_terminal_exit(
        &self,
        _terminal_id: String,
        _cancel: CancellationToken,
    ) -> ClientResult<TerminalExit> {
        no_service("terminal/wait_for_exit")
    }

    fn kill_terminal(&self, _terminal_id: String) -> ClientResult<()> {
        no_service("terminal/kill")
    }

    fn release_terminal(&self, _terminal_id: String) -> ClientResult<()> {
        no_service("terminal/release")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_explicit_yes_allows() {
        assert_eq!(
            answer_of(Ok(Some(Approval { allow: true }))),
            PermissionAnswer::AllowOnce
        );
        assert_eq!(
            answer_of(Ok(Some(Approval { allow: false }))),
            PermissionAnswer::RejectOnce
        );
        assert_eq!(answer_of(Ok(None)), PermissionAnswer::RejectOnce);
        assert_eq!(
            answer_of(Err(ElicitationError::UserDeclined)),
            PermissionAnswer::RejectOnce
        );
    }

    #[test]
    fn the_refusal_names_the_mode_argument() {
        assert!(NO_ELICITATION.contains("`mode`"));
        assert!(NO_ELICITATION.contains("allow"));
    }
}
