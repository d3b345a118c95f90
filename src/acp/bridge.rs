//! The editor bridge over ACP: [`ClientBridge`] calls become `fs/*`, `terminal/*` and
//! `session/request_permission` requests to the client, for one session. Cancelling a call sends
//! `$/cancel_request`; the client still answers, and a cancelled answer becomes
//! [`ClientError::Cancelled`].
//!
//! `fs/*` requests carry paths the tools have already decided on (see
//! [`ClientBridge::read_text_file`]); the bridge adds no lookups of its own.

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    ClientCapabilities, CompleteElicitationNotification, CreateElicitationResponse,
    CreateTerminalRequest, CreateTerminalResponse, EnvVariable, KillTerminalRequest,
    PermissionOption, PermissionOptionKind, ReadTextFileRequest, ReadTextFileResponse,
    ReleaseTerminalRequest, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SessionNotification, TerminalExitStatus, TerminalOutputRequest,
    TerminalOutputResponse, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    WaitForTerminalExitRequest, WaitForTerminalExitResponse, WriteTextFileRequest,
};
use futures::FutureExt;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::updates;
use crate::rpc::{Peer, RpcError};
use crate::tools::client::{
    ClientBridge, ClientError, ClientFeatures, ClientResult, PermissionAnswer, PermissionPrompt,
    Question, Reply, TerminalExit, TerminalOutput, TerminalSpec,
};

/// Option ids offered in permission prompts.
const ALLOW_ONCE: &str = "allow-once";
const ALLOW_ALWAYS: &str = "allow-always";
const REJECT_ONCE: &str = "reject-once";
const REJECT_ALWAYS: &str = "reject-always";

/// The editor of one session.
pub(crate) struct AcpBridge {
    peer: Peer,
    session_id: String,
    features: ClientFeatures,
    /// The client shows children as sessions of their own (`clientCapabilities.subagents`).
    child_sessions: bool,
    /// What the client said it takes (whether warnings go as `notice` updates).
    capabilities: Arc<ClientCapabilities>,
}

impl AcpBridge {
    pub(crate) fn new(peer: Peer, session_id: String, capabilities: &ClientCapabilities) -> Self {
        Self {
            peer,
            session_id,
            features: ClientFeatures {
                read_text_file: capabilities.fs.read_text_file,
                write_text_file: capabilities.fs.write_text_file,
                terminal: capabilities.terminal,
                elicitation_form: capabilities
                    .elicitation
                    .as_ref()
                    .is_some_and(|e| e.form.is_some()),
                elicitation_url: capabilities
                    .elicitation
                    .as_ref()
                    .is_some_and(|e| e.url.is_some()),
            },
            child_sessions: capabilities.subagents.is_some(),
            capabilities: Arc::new(capabilities.clone()),
        }
    }

    fn call<P, R>(
        &self,
        method: &'static str,
        params: P,
        cancel: CancellationToken,
    ) -> ClientResult<R>
    where
        P: Serialize + Send + Sync + 'static,
        R: DeserializeOwned + Send + 'static,
    {
        let peer = self.peer.clone();
        async move {
            let answer = peer.request_cancellable(method, &params, &cancel).await;
            let failed = |message: String| ClientError::Failed {
                method: method.into(),
                message,
            };
            match answer {
                Ok(value) => serde_json::from_value(value)
                    .map_err(|e| failed(format!("unexpected answer: {e}"))),
                Err(error)
                    if error.code == RpcError::REQUEST_CANCELLED || cancel.is_cancelled() =>
                {
                    Err(ClientError::Cancelled)
                }
                Err(error) => Err(failed(error.message)),
            }
        }
        .boxed()
    }
}

fn option(id: &'static str, name: String, kind: PermissionOptionKind) -> PermissionOption {
    PermissionOption::new(id, name, kind)
}

impl ClientBridge for AcpBridge {
    fn features(&self) -> ClientFeatures {
        self.features
    }

    fn for_child(self: Arc<Self>, child_session: &str) -> Arc<dyn ClientBridge> {
        if !self.child_sessions {
            return self;
        }
        Arc::new(Self {
            peer: self.peer.clone(),
            session_id: child_session.to_owned(),
            features: self.features,
            child_sessions: true,
            capabilities: self.capabilities.clone(),
        })
    }

    fn shows_children(&self) -> bool {
        self.child_sessions
    }

    fn read_text_file(&self, path: PathBuf, cancel: CancellationToken) -> ClientResult<String> {
        let request = ReadTextFileRequest::new(self.session_id.clone(), path);
        self.call::<_, ReadTextFileResponse>("fs/read_text_file", request, cancel)
            .map(|answer| answer.map(|a| a.content))
            .boxed()
    }

    fn write_text_file(
        &self,
        path: PathBuf,
        content: String,
        cancel: CancellationToken,
    ) -> ClientResult<()> {
        let request = WriteTextFileRequest::new(self.session_id.clone(), path, content);
        self.call::<_, serde_json::Value>("fs/write_text_file", request, cancel)
            .map(|answer| answer.map(drop))
            .boxed()
    }

    fn request_permission(
        &self,
        prompt: PermissionPrompt,
        cancel: CancellationToken,
    ) -> ClientResult<PermissionAnswer> {
        let words = prompt.always_words();
        let mut fields = ToolCallUpdateFields::new()
            .title(updates::field(&prompt.title))
            .kind(updates::acp_kind(prompt.kind))
            .status(ToolCallStatus::Pending);
        let content = updates::diff_content(&prompt.display);
        if !content.is_empty() {
            fields = fields.content(content);
        }
        if !prompt.display.locations.is_empty() {
            fields = fields.locations(updates::locations(&prompt.display));
        }
        if let Some(raw) = prompt.raw_input.clone() {
            fields = fields.raw_input(updates::bounded_value(raw));
        }
        let options = vec![
            option(ALLOW_ONCE, "Allow".into(), PermissionOptionKind::AllowOnce),
            option(
                ALLOW_ALWAYS,
                format!("Always allow {words} this session"),
                PermissionOptionKind::AllowAlways,
            ),
            option(
                REJECT_ONCE,
                "Reject".into(),
                PermissionOptionKind::RejectOnce,
            ),
            option(
                REJECT_ALWAYS,
                format!("Always reject {words} this session"),
                PermissionOptionKind::RejectAlways,
            ),
        ];
        let request = RequestPermissionRequest::new(
            self.session_id.clone(),
            ToolCallUpdate::new(prompt.call_id.clone(), fields),
            options,
        );
        self.call::<_, RequestPermissionResponse>("session/request_permission", request, cancel)
            .map(|answer| {
                let outcome = match answer {
                    Ok(answer) => answer.outcome,
                    Err(ClientError::Cancelled) => return Ok(PermissionAnswer::Cancelled),
                    Err(error) => return Err(error),
                };
                Ok(match outcome {
                    RequestPermissionOutcome::Selected(selected) => {
                        match &*selected.option_id.0 {
                            ALLOW_ONCE => PermissionAnswer::AllowOnce,
                            ALLOW_ALWAYS => PermissionAnswer::AllowAlways,
                            REJECT_ALWAYS => PermissionAnswer::RejectAlways,
                            // An option we did not offer: the safe reading is "no".
                            _ => PermissionAnswer::RejectOnce,
                        }
                    }
                    _ => PermissionAnswer::Cancelled,
                })
            })
            .boxed()
    }

    fn elicit(&self, question: Question, cancel: CancellationToken) -> ClientResult<Reply> {
        let request = match super::elicit::request(&self.session_id, question) {
            Ok(request) => request,
            Err(error) => return futures::future::ready(Err(error)).boxed(),
        };
        self.call::<_, CreateElicitationResponse>("elicitation/create", request, cancel)
            .map(super::elicit::reply)
            .boxed()
    }

    fn elicitation_done(&self, id: &str) {
        let done = CompleteElicitationNotification::new(id.to_owned());
        self.peer.notify("elicitation/complete", &done);
    }

    fn choose(
        &self,
        call_id: String,
        title: String,
        choices: Vec<String>,
        cancel: CancellationToken,
    ) -> ClientResult<Option<usize>> {
        let fields = ToolCallUpdateFields::new()
            .title(updates::field(&title))
            .status(ToolCallStatus::Pending);
        let request = RequestPermissionRequest::new(
            self.session_id.clone(),
            ToolCallUpdate::new(call_id, fields),
            super::elicit::options(&choices),
        );
        self.call::<_, RequestPermissionResponse>("session/request_permission", request, cancel)
            .map(move |answer| match answer {
                Ok(answer) => Ok(super::elicit::picked(answer.outcome, choices.len())),
                Err(ClientError::Cancelled) => Ok(None),
                Err(error) => Err(error),
            })
            .boxed()
    }

    fn create_terminal(
        &self,
        call_id: String,
        spec: TerminalSpec,
        cancel: CancellationToken,
    ) -> ClientResult<String> {
        let request = CreateTerminalRequest::new(self.session_id.clone(), spec.command)
            .args(spec.args)
            .cwd(spec.cwd)
            .env(
                spec.env
                    .into_iter()
                    .map(|(name, value)| EnvVariable::new(name, value))
                    .collect(),
            )
            .output_byte_limit(spec.output_byte_limit);
        let created = self.call::<_, CreateTerminalResponse>("terminal/create", request, cancel);
        let (peer, session_id) = (self.peer.clone(), self.session_id.clone());
        async move {
            let id = created.await?.terminal_id.0.to_string();
            // The tool call shows the terminal while the command runs.
            peer.notify(
                "session/update",
                &SessionNotification::new(session_id, updates::terminal_attached(&call_id, &id)),
            );
            Ok(id)
        }
        .boxed()
    }

    fn show_progress(&self, call_id: &str, text: &str) {
        self.peer.notify(
            "session/update",
            &SessionNotification::new(
                self.session_id.clone(),
                updates::progress_shown(call_id, text),
            ),
        );
    }

    fn warn_user(&self, text: &str) {
        let (severity, session) = (super::notice::Severity::Warning, &self.session_id);
        super::notice::send(
            &self.peer,
            &self.capabilities,
            session,
            severity,
            text,
            None,
        );
    }

    fn note_user(&self, title: &str, description: &str) {
        // An info line is not worth a chunk of the agent's message in an editor without notices.
        if !super::notice::supported(&self.capabilities) {
            tracing::info!(description, "{title}");
            return;
        }
        super::notice::send(
            &self.peer,
            &self.capabilities,
            &self.session_id,
            super::notice::Severity::Info,
            title,
            Some(description),
        );
    }

    fn terminal_output(&self, terminal_id: String) -> ClientResult<TerminalOutput> {
        let request = TerminalOutputRequest::new(self.session_id.clone(), terminal_id);
        self.call::<_, TerminalOutputResponse>("terminal/output", request, CancellationToken::new())
            .map(|answer| {
                answer.map(|a| TerminalOutput {
                    output: a.output,
                    truncated: a.truncated,
                    exit: a.exit_status.map(exit),
                })
            })
            .boxed()
    }

    fn wait_for_terminal_exit(
        &self,
        terminal_id: String,
        cancel: CancellationToken,
    ) -> ClientResult<TerminalExit> {
        let request = WaitForTerminalExitRequest::new(self.session_id.clone(), terminal_id);
        self.call::<_, WaitForTerminalExitResponse>("terminal/wait_for_exit", request, cancel)
            .map(|answer| answer.map(|a| exit(a.exit_status)))
            .boxed()
    }

    fn kill_terminal(&self, terminal_id: String) -> ClientResult<()> {
        let request = KillTerminalRequest::new(self.session_id.clone(), terminal_id);
        self.call::<_, serde_json::Value>("terminal/kill", request, CancellationToken::new())
            .map(|answer| answer.map(drop))
            .boxed()
    }

    fn release_terminal(&self, terminal_id: String) -> ClientResult<()> {
        let request = ReleaseTerminalRequest::new(self.session_id.clone(), terminal_id);
        self.call::<_, serde_json::Value>("terminal/release", request, CancellationToken::new())
            .map(|answer| answer.map(drop))
            .boxed()
    }
}

fn exit(status: TerminalExitStatus) -> TerminalExit {
    TerminalExit {
        exit_code: status.exit_code,
        signal: status.signal,
    }
}
