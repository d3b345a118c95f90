//! Permission asks of a `kin mcp` task in mode `ask`: put to the calling client's user through
//! MCP elicitation when the client declared it, else refused with a message naming `mode`.
//! Files and commands stay local: this bridge offers no other client service.

use std::sync::Arc;

use futures::FutureExt;
use rmcp::service::{ElicitationError, ElicitationMode};
use rmcp::{Peer, RoleServer};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::tools::client::{
    ClientError, ClientFeatures, ClientResult, PermissionAnswer, PermissionPrompt,
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
