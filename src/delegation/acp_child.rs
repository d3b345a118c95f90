//! The `acp` provider: a named child agent from the config file (`[acp_agents.<name>]`), run
//! as an ACP subprocess through [`crate::acp_client`]. Each activation launches the child,
//! opens a session, sends one prompt and tears the child down. A message steered into a
//! running activation goes to the child as one more `session/prompt`; it is delivered only if
//! the child does not refuse it (kin itself refuses a prompt while one runs).
//!
//! Background children are continuable when the child's `initialize` answer advertises
//! `sessionCapabilities.resume` or `loadSession` (config `continuable = true|false` forces it).
//! The route is chosen before the child runs, so the answer is learned once per agent and kept:
//! from any earlier launch, else from a probe (launch, `initialize`, teardown) made by the
//! first background delegation. A continuable start also writes a local record of the child
//! (a session file with the parent in its header) holding a descriptor whose `providerData` is
//! the child's own session id and cwd. A resume launches the child again and continues that
//! session (see [`AcpChild::reopen`]).
//!
//! The child's cwd is the configured one, else the delegating session's. Its delegation depth
//! (the parent's plus one) goes to it on `session/new` and in its environment, so a kin child
//! enforces the depth limit across the process boundary.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use serde_json::{json, Value};

use super::acp_record::ChildRecord;
use super::acp_tree;
use super::acp_watch;
use super::provider::{
    Capabilities, Continuable, Provider, ProviderKind, Run, RunControl, SteerRefusal,
};
use super::request::{child_depth, Continuation, ResumeRequest, StartRequest};
use super::{diagnostic, DelegationError, SubagentResult};
use crate::acp_client::{AcpChild, ChildCommand, ChildError, ChildSandbox, PromptOutcome, Steer};
use crate::agent::host::AgentHost;
use crate::agent::remote_children::RemoteChildren;
use crate::agent::{Agent, StopReason, Watch};
use crate::config::{AcpAgentConfig, KnownAgent};
use crate::process::sandbox::Sandbox;
use crate::session::{AssistantBlock, EventBody, Header, SessionStore, UserPart};
use crate::sync::lock;
use agent_client_protocol_schema::v1::StopReason as AcpStopReason;

/// One configured child agent.
pub(crate) struct AcpProvider {
    name: String,
    config: AcpAgentConfig,
    /// The sandbox its children run in, and where kin keeps its sessions (a kin child's state).
    sandbox: Arc<Sandbox>,
    kin_home: PathBuf,
    /// Whether the child can continue sessions, as its last `initialize` answer said.
    learned: Arc<Mutex<Option<bool>>>,
}

impl AcpProvider {
    /// The provider is named `acp:<name>`.
    pub(crate) fn new(config: AcpAgentConfig, sandbox: Arc<Sandbox>, kin_home: PathBuf) -> Self {
        Self {
            name: format!("{}{}", super::provider::ACP_PREFIX, config.name),
            config,
            sandbox,
            kin_home,
            learned: Arc::default(),
        }
    }

    /// Whether background children are continuable, if known: configured, else learned.
    fn known_continuable(&self) -> Option<bool> {
        self.config.continuable.or(*lock(&self.learned))
    }

    fn command(
        &self,
        host: &AgentHost,
        request: &StartRequest,
        depth: u32,
    ) -> Result<ChildCommand, DelegationError> {
        let cwd = match &self.config.cwd {
            Some(cwd) => cwd.clone(),
            None => request
                .parent
                .header()
                .cwd
                .as_deref()
                .map(PathBuf::from)
                .ok_or_else(|| {
                    DelegationError::Setup(
                        "no working directory for the ACP child: configure `cwd` or delegate \
                         from a session that has one"
                            .into(),
                    )
                })?,
        };
        self.command_in(host, cwd, depth, &request.parent)
    }

    /// The launch of a child working for `parent`, whose permissions bound the child's answers,
    /// under `host`'s environment scrub and private files.
    fn command_in(
        &self,
        host: &AgentHost,
        cwd: PathBuf,
        depth: u32,
        parent: &Agent,
    ) -> Result<ChildCommand, DelegationError> {
        if !cwd.is_dir() {
            return Err(DelegationError::Setup(format!(
                "the ACP child's working directory is not an accessible directory: {}",
                cwd.display()
            )));
        }
        let config = &self.config;
        Ok(ChildCommand {
            program: config.command.clone(),
            args: config.args.clone(),
            env: config.env.clone(),
            child_env: host.child_env().clone(),
            private: host.private().clone(),
            cwd,
            remote_cwd: config.remote_cwd.clone(),
            permission: config.permission,
            ceiling: Some(parent.permissions().clone()),
            depth,
            initialize_timeout: config.initialize_timeout,
            eof_grace: config.eof_grace,
            term_grace: config.term_grace,
            link: None,
            mcp_servers: parent.mcp().map_or_else(Vec::new, |view| {
                view.servers.specs().iter().map(|s| s.to_acp()).collect()
            }),
            sandbox: Some(self.child_sandbox(&parent.id)),
        })
    }
}

impl AcpProvider {
    /// How the child of session `parent` is confined: as its table says, a kin child also
    /// writing its own `KIN_HOME` (the one its `env` sets, else this kin's).
    fn child_sandbox(&self, parent: &str) -> ChildSandbox {
        let confinement = &self.config.confinement;
        let mut state = confinement.writable.clone();
        if confinement.known == Some(KnownAgent::Kin) {
            let set = self.config.env.iter().find(|(key, _)| key == "KIN_HOME");
            let home = set.map_or_else(|| self.kin_home.clone(), |(_, home)| home.into());
            state.push(home);
        }
        ChildSandbox {
            sandbox: self.sandbox.clone(),
            session: parent.to_owned(),
            state,
            confined: confinement.confined,
            env: confinement.env.clone(),
            agent: self.config.name.clone(),
        }
    }
}

/// A delegation's prompt for an ACP child: its text parts (what the record and the editor
/// show) and the content blocks the child gets (see [`super::acp_prompt`]).
struct ChildPrompt {
    text: String,
    content: Vec<Value>,
}

impl ChildPrompt {
    fn new(prompt: &[UserPart], child: &AcpChild, parent: &crate::agent::Agent) -> Self {
        Self {
            text: prompt_text(prompt),
            content: super::acp_prompt::blocks(prompt, &child.capabilities, &parent.blob_dir()),
        }
    }
}

/// The prompt's text parts, one paragraph each (steered messages go as this text).
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

/// The ACP stop reason in kin's terms; anything else (a child out of turn requests: it did
/// not answer) is a failure.
fn stop_reason(acp: AcpStopReason) -> StopReason {
    match acp {
        AcpStopReason::EndTurn => StopReason::Completed,
        AcpStopReason::MaxTokens => StopReason::MaxTokens,
        AcpStopReason::Refusal => StopReason::Refusal,
        AcpStopReason::Cancelled => StopReason::Cancelled,
        _ => StopReason::Error,
    }
}

/// The stop reason as the child wrote it (`max_turn_requests`), for error messages.
fn wire_name(acp: AcpStopReason) -> String {
    serde_json::to_value(acp)
        .ok()
        .and_then(|name| name.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The result of one prompt; `partial` is the text the child streamed before a failed one
/// ended (it is the run's partial output).
fn result_of(
    name: &str,
    outcome: Result<PromptOutcome, ChildError>,
    partial: String,
) -> SubagentResult {
    let text_output = |text: String| match text.is_empty() {
        true => Vec::new(),
        false => vec![AssistantBlock::Text { text }],
    };
    match outcome {
        Ok(outcome) => {
            let stop = stop_reason(outcome.stop_reason);
            // A stop reason kin has no word for: the run ended abnormally.
            let abnormal = (stop == StopReason::Error).then(|| wire_name(outcome.stop_reason));
            SubagentResult {
                output: text_output(outcome.text),
                structured: None,
                stop_reason: stop,
                diagnostic: abnormal
                    .as_ref()
                    .map(|reason| format!("the ACP child stopped with {reason:?}")),
                abnormal,
            }
        }
        Err(error) => {
            tracing::warn!(%error, "subagent-acp {name:?}: child run failed");
            SubagentResult {
                output: text_output(partial),
                ..SubagentResult::failed(diagnostic::of_child_error(&error))
            }
        }
    }
}

impl Provider for AcpProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn tool(&self) -> &str {
        &self.config.tool
    }

    fn kind(&self) -> ProviderKind {
        ProviderKind::Acp
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

    fn start(
        &self,
        host: &Arc<AgentHost>,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<Run, DelegationError>> {
        let prepared = (|| {
            if request.cancel.is_cancelled() {
                return Err(DelegationError::AbortedBeforePublication);
            }
            let depth = request.child_depth()?;
            self.command(host, &request, depth)
        })();
        let name = self.config.name.clone();
        // Where the record of a continuable child goes.
        let store = host.store().clone();
        let created_in = host.clone();
        let learned = self.learned.clone();
        let children = host.remote_children().clone();
        let id = match &request.continuation {
            Some(continuation) => continuation.session_id.clone(),
            None => uuid::Uuid::new_v4().to_string(),
        };
        let mut link = acp_tree::link(
            host.events(),
            &request.parent.id,
            &id,
            request.call_id.clone(),
            request.label.clone(),
            request.client.clone(),
        );
        let stop = request.cancel.child_token();
        let watch = acp_watch::watch(&mut link, request.budget.clone(), stop.clone());
        async move {
            let mut command = prepared?;
            command.link = Some(link);
            let depth = command.depth;
            let child = AcpChild::start(command, &request.cancel)
                .await
                .map_err(setup_error)?;
            learn(&learned, &child.capabilities);
            let mut turns = None;
            if request.continuation.is_none() {
                let cwd = child.command_cwd();
                let created = ChildRecord::create(&store, &id, &request.parent.id, depth, &cwd);
                if created.is_some() {
                    created_in.note_created(&id);
                }
                turns = created.map(|created| (created, request.label.clone()));
            }
            if let Some(continuation) = &request.continuation {
                let recorded = record(&store, continuation, &request, depth, &child);
                if let Err(error) = recorded {
                    child.shutdown().await;
                    return Err(error);
                }
                created_in.note_created(&continuation.session_id);
                let opened = ChildRecord::open(&store, &id);
                turns = opened.map(|opened| (opened, request.label.clone()));
            }
            let prompt = ChildPrompt::new(&request.prompt, &child, &request.parent);
            let activation = Activation { stop, watch };
            Ok(run(id, name, child, prompt, activation, children, turns))
        }
        .boxed()
    }

    /// Configured, else learned from an earlier launch, else only a launched child can tell.
    /// A stored child is resumed unless the agent is known not to continue sessions: its
    /// descriptor exists only if it advertised it, and the relaunch checks again.
    fn continuable(&self) -> Continuable {
        match self.known_continuable() {
            Some(known) => Continuable::Known(known),
            None => Continuable::AskChild,
        }
    }

    fn probe(&self, host: &AgentHost, request: &StartRequest) -> BoxFuture<'static, bool> {
        let command = request
            .child_depth()
            .and_then(|depth| self.command(host, request, depth));
        let learned = self.learned.clone();
        let cancel = request.cancel.clone();
        let name = self.config.name.clone();
        async move {
            // Whatever stops the probe routes to the one-shot task, whose run reports it.
            let Ok(command) = command else {
                return false;
            };
            match AcpChild::probe(command, &cancel).await {
                Ok(capabilities) => learn(&learned, &capabilities),
                Err(error) => {
                    tracing::warn!(%error, "subagent-acp {name:?}: capability probe failed");
                    false
                }
            }
        }
        .boxed()
    }

    fn resume(
        &self,
        host: &Arc<AgentHost>,
        request: ResumeRequest,
    ) -> BoxFuture<'static, Result<Run, DelegationError>> {
        let prepared = (|| {
            let data = request.descriptor.provider_data.as_ref();
            let field = |key: &str| data.and_then(|d| d.get(key)).and_then(Value::as_str);
            let (Some(remote), Some(cwd)) = (field("sessionId"), field("cwd")) else {
                return Err(DelegationError::NoDescriptor(request.session_id.clone()));
            };
            let depth = child_depth(&request.parent, None)?;
            Ok((
                remote.to_owned(),
                self.command_in(host, PathBuf::from(cwd), depth, &request.parent)?,
            ))
        })();
        let name = self.config.name.clone();
        let learned = self.learned.clone();
        let children = host.remote_children().clone();
        let store = host.store().clone();
        // The title it was started with is kept in its descriptor (across restarts).
        let title = request
            .descriptor
            .provider_data
            .as_ref()
            .and_then(|data| data.get("title"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut link = acp_tree::link(
            host.events(),
            &request.parent.id,
            &request.session_id,
            None,
            title,
            request.client.clone(),
        );
        let stop = request.cancel.child_token();
        let watch = acp_watch::watch(&mut link, request.budget.clone(), stop.clone());
        async move {
            let (remote, mut command) = prepared?;
            command.link = Some(link);
            let child = AcpChild::reopen(command, &remote, &request.cancel)
                .await
                .map_err(setup_error)?;
            learn(&learned, &child.capabilities);
            let prompt = ChildPrompt::new(&request.prompt, &child, &request.parent);
            let id = request.session_id;
            let turns = ChildRecord::open(&store, &id).map(|opened| (opened, None));
            let activation = Activation { stop, watch };
            Ok(run(id, name, child, prompt, activation, children, turns))
        }
        .boxed()
    }
}

/// Keeps what the child's `agentCapabilities` say about continuing sessions, and returns it.
fn learn(learned: &Mutex<Option<bool>>, capabilities: &Value) -> bool {
    let continuable = crate::acp_client::continuation_method(capabilities).is_some();
    *lock(learned) = Some(continuable);
    continuable
}

fn setup_error(error: ChildError) -> DelegationError {
    match error {
        ChildError::Cancelled => DelegationError::AbortedBeforePublication,
        other => DelegationError::Setup(other.to_string()),
    }
}

/// Writes the local record of a continuable child: a session file named by the continuation
/// id, with the parent in its header and, when the child can continue sessions, the
/// descriptor a resume needs.
fn record(
    store: &SessionStore,
    continuation: &Continuation,
    request: &StartRequest,
    depth: u32,
    child: &AcpChild,
) -> Result<(), DelegationError> {
    let cwd = child.cwd().to_string_lossy().into_owned();
    let mut header = Header::new(
        continuation.session_id.clone(),
        crate::time::now_ms(),
        cwd.clone(),
        Vec::new(),
    );
    header.parent_session = Some(request.parent.id.clone());
    header.delegation_depth = depth;
    let setup = |error: &dyn std::fmt::Display| DelegationError::Setup(error.to_string());
    let mut log = store.create(&header).map_err(|e| setup(&e))?;
    if child.continuation_method().is_none() {
        tracing::warn!(
            child = continuation.session_id,
            "this ACP child can neither resume nor load sessions: it cannot be continued"
        );
        return Ok(());
    }
    let mut descriptor = continuation.descriptor.clone();
    let mut data = json!({"sessionId": child.session_id, "cwd": cwd});
    if let Some(label) = &request.label {
        data["title"] = label.as_str().into();
    }
    descriptor.provider_data = Some(data);
    log.append(
        EventBody::SubagentDescriptor(descriptor),
        crate::time::now_ms(),
    )
    .and_then(|_| log.sync())
    .map_err(|e| setup(&e))
}

/// What one activation runs under: its stop (a child token of the request's cancel, also
/// tripped by the budget) and the clock and spending its limits read.
struct Activation {
    stop: CancellationToken,
    watch: Arc<Watch>,
}

/// Publishes one activation: the prompt runs on its own task, which tears the child down
/// once the result is in or the run is cancelled (with the request, by dispose, or at the
/// child's budget).
fn run(
    id: String,
    name: String,
    child: AcpChild,
    prompt: ChildPrompt,
    activation: Activation,
    remote: Arc<RemoteChildren>,
    record: Option<(ChildRecord, Option<String>)>,
) -> Run {
    let Activation { stop, watch } = activation;
    let spent = watch.clone();
    // The editor may cancel this activation alone (`session/cancel` on the child's id).
    remote.insert(&id, stop.clone());
    let key = id.clone();
    let (result_tx, result_rx) = tokio::sync::oneshot::channel();
    let (steer_tx, mut steers) = tokio::sync::mpsc::unbounded_channel();
    let running = stop.clone();
    let task = tokio::spawn(async move {
        let mut child = child;
        let mut record = record;
        let ChildPrompt { text, content } = prompt;
        if let Some((record, title)) = &mut record {
            record.begin(&text, title.as_deref());
        }
        let outcome = child
            .prompt_content_steered(&text, content, &running, &mut steers)
            .await;
        remote.remove(&key);
        let partial = match outcome {
            Ok(_) => String::new(),
            Err(_) => child.partial_text(),
        };
        let mut result = result_of(&name, outcome, partial);
        // Stopped at its budget (the cost it reported), not by a user.
        if spent.over_budget() && result.stop_reason != StopReason::Completed {
            result.stop_reason = StopReason::BudgetExhausted;
            result.diagnostic = spent.budget_reached();
            result.abnormal = None;
        }
        if let Some((record, _)) = record {
            let reported = Some(spent.spent().cost()).filter(|cost| *cost > 0.0);
            let why = result.diagnostic.as_deref();
            record.end(result.stop_reason, why, reported);
        }
        let _ = result_tx.send(result);
        child.shutdown().await
    });
    let result = async move {
        result_rx.await.unwrap_or_else(|_| {
            SubagentResult::failed("the ACP child's run ended without a result")
        })
    };
    let done = async move {
        task.await
            .unwrap_or_else(|_| Some("the ACP child's teardown stopped unexpectedly".into()))
    }
    .boxed()
    .shared();
    let control = AcpControl {
        stop,
        done,
        steers: steer_tx,
    };
    Run::new(id, None, result.boxed().shared(), Arc::new(control)).with_progress(watch)
}

/// Cancels the child's run and waits for its teardown; passes steered messages to it.
struct AcpControl {
    stop: CancellationToken,
    /// The child's teardown, and what went wrong in it.
    done: Shared<BoxFuture<'static, Option<String>>>,
    steers: tokio::sync::mpsc::UnboundedSender<Steer>,
}

impl RunControl for AcpControl {
    fn dispose(&self) -> BoxFuture<'static, Option<String>> {
        self.stop.cancel();
        self.done.clone().boxed()
    }

    fn steer(
        &self,
        content: Vec<UserPart>,
    ) -> Option<BoxFuture<'static, Result<(), SteerRefusal>>> {
        let (verdict, taken) = tokio::sync::oneshot::channel();
        let steer = Steer {
            text: prompt_text(&content),
            verdict,
        };
        // A closed channel: the prompt loop is over, and the verdict was dropped with it.
        let _ = self.steers.send(steer);
        Some(
            async move {
                match taken.await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(reason)) => Err(SteerRefusal::Refused(reason)),
                    Err(_) => Err(SteerRefusal::Stopped),
                }
            }
            .boxed(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_acp_stop_reasons() {
        for (acp, ours) in [
            (AcpStopReason::EndTurn, StopReason::Completed),
            (AcpStopReason::MaxTokens, StopReason::MaxTokens),
            (AcpStopReason::Refusal, StopReason::Refusal),
            (AcpStopReason::Cancelled, StopReason::Cancelled),
            (AcpStopReason::MaxTurnRequests, StopReason::Error),
        ] {
            assert_eq!(stop_reason(acp), ours, "{acp:?}");
        }
        let stopped = result_of(
            "x",
            Ok(PromptOutcome {
                stop_reason: AcpStopReason::MaxTurnRequests,
                text: String::new(),
            }),
            String::new(),
        );
        assert_eq!(
            stopped.diagnostic.as_deref(),
            Some("the ACP child stopped with \"max_turn_requests\"")
        );
        assert_eq!(
            super::super::outcome::headline(&stopped).as_deref(),
            Some("subagent run ended abnormally (max_turn_requests)")
        );
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
    fn failures_carry_their_cause_and_what_was_streamed() {
        let result = result_of(
            "x",
            Err(ChildError::Flood {
                limit: crate::acp_client::MAX_OUTPUT_BYTES,
            }),
            String::new(),
        );
        assert_eq!(result.stop_reason, StopReason::Error);
        assert!(result.output.is_empty());
        assert!(result.diagnostic.unwrap().contains("flooded"));
        let exited = result_of(
            "x",
            Err(ChildError::Exited {
                stage: "session/prompt".into(),
                status: "exit status: 3".into(),
                stderr: crate::acp_client::StderrTail(vec!["panic: out of memory".into()]),
            }),
            "Half an answer".into(),
        );
        assert_eq!(exited.text(), "Half an answer");
        assert_eq!(
            exited.diagnostic.as_deref(),
            Some(
                "the ACP child exited during session/prompt (exit status: 3); last stderr \
                 line: panic: out of memory"
            )
        );
        let partial = result_of(
            "x",
            Ok(PromptOutcome {
                stop_reason: AcpStopReason::Cancelled,
                text: "part".into(),
            }),
            String::new(),
        );
        assert_eq!(partial.stop_reason, StopReason::Cancelled);
        assert_eq!(partial.text(), "part");
    }
}
