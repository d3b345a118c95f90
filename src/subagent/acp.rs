//! The `acp` provider: a named child agent from the config file (`[acp_agents.<name>]`), run
//! as an ACP subprocess through [`crate::acp::client`]. One-shot: each start launches the
//! child, opens one session, sends one prompt and tears the child down; no resume, no steering.
//!
//! The child's cwd is the configured one, else the delegating session's. Its delegation depth
//! (the parent's plus one) goes to it on `session/new` and in its environment, so a kin child
//! enforces the depth limit across the process boundary.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::{
    child_depth, Capabilities, Provider, Run, RunControl, StartRequest, StopReason, SubagentError,
    SubagentResult,
};
use crate::acp::client::{AcpChild, ChildCommand, ChildError, PromptOutcome};
use crate::agent::NotRunning;
use crate::config::AcpAgentConfig;
use crate::session::{AssistantBlock, UserPart};

/// One configured child agent.
pub struct AcpProvider {
    name: String,
    config: AcpAgentConfig,
}

impl AcpProvider {
    /// The provider is named `acp:<name>`.
    pub fn new(config: AcpAgentConfig) -> Self {
        Self {
            name: format!("acp:{}", config.name),
            config,
        }
    }

    fn command(&self, request: &StartRequest, depth: u32) -> Result<ChildCommand, SubagentError> {
        let cwd = match &self.config.cwd {
            Some(cwd) => cwd.clone(),
            None => request
                .parent
                .header()
                .cwd
                .as_deref()
                .map(PathBuf::from)
                .ok_or_else(|| {
                    SubagentError::Setup(
                        "no working directory for the ACP child: configure `cwd` or delegate \
                         from a session that has one"
                            .into(),
                    )
                })?,
        };
        if !cwd.is_dir() {
            return Err(SubagentError::Setup(format!(
                "the ACP child's working directory is not an accessible directory: {}",
                cwd.display()
            )));
        }
        let config = &self.config;
        Ok(ChildCommand {
            program: config.command.clone(),
            args: config.args.clone(),
            env: config.env.clone(),
            cwd,
            permission: config.permission,
            depth,
            initialize_timeout: config.initialize_timeout,
            eof_grace: config.eof_grace,
            term_grace: config.term_grace,
        })
    }
}

/// The prompt's text parts, one paragraph each (ACP children get text only).
fn prompt_text(prompt: &[UserPart]) -> String {
    prompt
        .iter()
        .filter_map(|part| match part {
            UserPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The ACP stop reason in kin's terms; anything unknown is a failure.
fn stop_reason(acp: &str) -> StopReason {
    match acp {
        "end_turn" => StopReason::Completed,
        "max_tokens" => StopReason::MaxTokens,
        "refusal" => StopReason::Refusal,
        "cancelled" => StopReason::Aborted,
        _ => StopReason::Error,
    }
}

fn result_of(name: &str, outcome: Result<PromptOutcome, ChildError>) -> SubagentResult {
    match outcome {
        Ok(outcome) => {
            let stop = stop_reason(&outcome.stop_reason);
            SubagentResult {
                output: if outcome.text.is_empty() {
                    Vec::new()
                } else {
                    vec![AssistantBlock::Text { text: outcome.text }]
                },
                structured: None,
                stop_reason: stop,
                error: (stop == StopReason::Error)
                    .then(|| format!("the ACP child stopped with {:?}", outcome.stop_reason)),
            }
        }
        Err(error) => {
            tracing::warn!(%error, "subagent-acp {name:?}: child run failed");
            SubagentResult {
                output: Vec::new(),
                structured: None,
                stop_reason: StopReason::Error,
                error: Some(error.to_string()),
            }
        }
    }
}

impl Provider for AcpProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        // The depth limit is checked here and by a kin child; the rest needs the child's help.
        Capabilities {
            depth_limit: true,
            ..Capabilities::default()
        }
    }

    fn inherits_parent_context(&self) -> bool {
        false
    }

    fn start(&self, request: StartRequest) -> BoxFuture<'static, Result<Run, SubagentError>> {
        let prepared = (|| {
            if request.cancel.is_cancelled() {
                return Err(SubagentError::AbortedBeforePublication);
            }
            let depth = child_depth(&request.parent, request.max_depth)?;
            self.command(&request, depth)
        })();
        let name = self.config.name.clone();
        async move {
            let command = prepared?;
            let child =
                AcpChild::start(command, &request.cancel)
                    .await
                    .map_err(|error| match error {
                        ChildError::Cancelled => SubagentError::AbortedBeforePublication,
                        other => SubagentError::Setup(other.to_string()),
                    })?;
            let text = prompt_text(&request.prompt);
            // Cancelled with the request, or by dispose.
            let stop = request.cancel.child_token();
            let (result_tx, result_rx) = tokio::sync::oneshot::channel();
            let running = stop.clone();
            let task = tokio::spawn(async move {
                let mut child = child;
                let outcome = child.prompt(&text, &running).await;
                let _ = result_tx.send(result_of(&name, outcome));
                child.shutdown().await;
            });
            let result = async move {
                result_rx.await.unwrap_or_else(|_| SubagentResult {
                    output: Vec::new(),
                    structured: None,
                    stop_reason: StopReason::Error,
                    error: Some("the ACP child's run ended without a result".into()),
                })
            };
            let done = async move {
                let _ = task.await;
            }
            .boxed()
            .shared();
            Ok(Run::new(
                uuid::Uuid::new_v4().to_string(),
                None,
                result.boxed(),
                Arc::new(AcpControl { stop, done }),
            ))
        }
        .boxed()
    }
}

/// Cancels the child's run and waits for its teardown.
struct AcpControl {
    stop: CancellationToken,
    done: Shared<BoxFuture<'static, ()>>,
}

impl RunControl for AcpControl {
    fn dispose(&self) -> BoxFuture<'static, ()> {
        self.stop.cancel();
        self.done.clone().boxed()
    }

    fn steer(&self, _content: Vec<UserPart>) -> Option<Result<(), NotRunning>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_acp_stop_reasons() {
        for (acp, ours) in [
            ("end_turn", StopReason::Completed),
            ("max_tokens", StopReason::MaxTokens),
            ("refusal", StopReason::Refusal),
            ("cancelled", StopReason::Aborted),
            ("max_turn_requests", StopReason::Error),
            ("something_new", StopReason::Error),
        ] {
            assert_eq!(stop_reason(acp), ours, "{acp}");
        }
    }

    #[test]
    fn prompts_carry_text_parts_only() {
        let parts = vec![
            UserPart::Text { text: "a".into() },
            UserPart::Text { text: "b".into() },
        ];
        assert_eq!(prompt_text(&parts), "a\n\nb");
    }

    #[test]
    fn failures_carry_their_cause_and_no_output() {
        let result = result_of(
            "x",
            Err(ChildError::Flood {
                limit: crate::acp::client::MAX_OUTPUT_BYTES,
            }),
        );
        assert_eq!(result.stop_reason, StopReason::Error);
        assert!(result.output.is_empty());
        assert!(result.error.unwrap().contains("flooded"));
        let partial = result_of(
            "x",
            Ok(PromptOutcome {
                stop_reason: "cancelled".into(),
                text: "part".into(),
                updates: Vec::new(),
            }),
        );
        assert_eq!(partial.stop_reason, StopReason::Aborted);
        assert_eq!(partial.text(), "part");
    }
}
