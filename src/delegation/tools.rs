//! The model-facing delegation tools: `subagent` (a fresh child) and `subagent_fork` (a child
//! that inherits this conversation), `send_message` (a follow-up to a background child) and
//! `list_agents` (this session's background children). Each parses its arguments, calls one
//! entry of [`Delegation`], and words the result. Names, parameters and result texts are a
//! wire contract; the descriptions are kin's own.

use std::sync::{Arc, OnceLock};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::outcome;
use super::provider::ProviderKind;
use super::{
    Continuable, Delegated, Delegation, DelegationError, Delivery, Mode, Provider, Request,
};
use crate::agent::DEFAULT_PERSONA;
use crate::config::agents::{self, AgentDefinition};
use crate::session::UserPart;
use crate::tasks::{TaskId, TaskStatus};
use crate::tools::typed::{parameters, TypedTool};
use crate::tools::{SpecScope, ToolContext, ToolKind, ToolOutput};

/// The arguments of a delegation tool call. The texts are optional to serde so that a missing
/// or empty one gets the tool's own error, as before typed arguments.
#[derive(Deserialize, JsonSchema)]
pub(super) struct SubagentArgs {
    /// A short (3-5 word) label for the task, for display.
    #[schemars(required)]
    description: Option<String>,
    /// The complete task for the child, with everything it needs: it does not see this conversation.
    #[schemars(required)]
    prompt: Option<String>,
    /// Run in the background and return its subagent id and a task id at once; collect the answer with task_output, stop it with task_kill, follow up with send_message.
    #[serde(default)]
    run_in_background: Option<bool>,
    /// The id of a configured model to run the child on (default: the model you run on).
    #[serde(default)]
    model: Option<String>,
    /// The most seconds the child may run (default: the configured `[delegation] timeout`, else no limit). At 80% it is asked to wrap up; at the limit it stops as `timed_out`.
    #[serde(default)]
    timeout: Option<f64>,
    /// The most tokens the child may spend (default: the configured `[delegation] child_budget_tokens`, else no limit). It stops as `budget_exhausted` after the step that reaches it.
    #[serde(default)]
    #[schemars(range(min = 1))]
    budget_tokens: Option<u64>,
    /// The name of an agent definition to run the child as: its instructions, tools, model, permission and limits (the arguments above win over its model and limits).
    #[serde(default)]
    agent: Option<String>,
    /// "worktree": run the child in a fresh git worktree of this repository, on its own branch `kin/<subagent id>`; the result reports the branch, changed files and a diffstat (a worktree without changes is removed). Default: the agent definition's, else "none".
    #[serde(default)]
    isolation: Option<String>,
}

/// One delegation tool, bound to one provider.
#[derive(Clone)]
pub(super) struct SubagentTool {
    provider: Arc<dyn Provider>,
    delegation: Arc<Delegation>,
}

impl SubagentTool {
    pub(super) fn new(provider: Arc<dyn Provider>, delegation: Arc<Delegation>) -> Self {
        Self {
            provider,
            delegation,
        }
    }

    /// Whether background children of this tool can be messaged again, if known yet (an ACP
    /// child agent says so only once it has been launched).
    fn continuable(&self) -> Option<bool> {
        match self.provider.continuable() {
            Continuable::Known(known) => Some(known),
            Continuable::AskChild => None,
        }
    }

    fn inherits_context(&self) -> bool {
        self.provider.inherits_parent_context()
    }

    fn what_it_does(&self) -> String {
        let what = if self.inherits_context() {
            "Hand a task to a child agent that starts from this conversation: it sees every \
             completed turn so far (not the turn in progress) and returns only its final answer. \
             Use it for work that builds on what was already said — a review, a follow-up \
             analysis, a continuation — without spending this conversation's context on the \
             intermediate steps."
        } else {
            "Hand a self-contained task to a child agent with a context of its own, and get back \
             only its final answer. Use it for focused, independent work — research, a scoped \
             change, an analysis — so the steps do not fill this conversation. The child does \
             not see this conversation: give it a complete prompt."
        };
        let what = format!(
            "{what} Several foreground calls in one message run side by side in this working \
             directory: give children that write files separate files, or `isolation: \
             \"worktree\"` each; a write to a file changed since the writer last read it fails."
        );
        match self.continuable() {
            Some(true) => format!(
                "{what} Set `run_in_background: true` to start it in the background instead: you \
                 get its subagent id and a task id at once; collect the answer with \
                 `task_output`, stop it with `task_kill`, and ask it more with `send_message`."
            ),
            Some(false) => format!(
                "{what} Set `run_in_background: true` to get a task id at once instead; collect \
                 the answer with `task_output` and stop it with `task_kill`."
            ),
            None => format!(
                "{what} Set `run_in_background: true` to get a task id at once instead; collect \
                 the answer with `task_output` and stop it with `task_kill`. Whether you can ask \
                 it more with `send_message` depends on the child agent: the start result says."
            ),
        }
    }
}

/// A text argument that says something.
fn non_empty(text: Option<&String>) -> Option<String> {
    text.filter(|s| !s.trim().is_empty()).cloned()
}

/// The subagent tool's parameters, their wording fitted to a child that `inherits` the
/// conversation and to one that runs `one_shot` in the background.
fn worded(inherits: bool, one_shot: bool) -> Value {
    let mut schema = (*parameters::<SubagentArgs>()).clone();
    if inherits {
        describe(
            &mut schema,
            "prompt",
            "The task for the child. It already knows this conversation's completed turns, \
             so state only what is new.",
        );
    }
    if one_shot {
        describe(
            &mut schema,
            "run_in_background",
            "Run in the background and return a task id at once; collect the answer with \
             task_output, stop it with task_kill.",
        );
    }
    schema
}

/// Rewords the description of one property of a generated schema.
fn describe(schema: &mut Value, property: &str, description: &str) {
    if let Some(slot) = schema.pointer_mut(&format!("/properties/{property}/description")) {
        *slot = Value::String(description.to_owned());
    }
}

fn failure(error: &DelegationError) -> ToolOutput {
    ToolOutput::error(error.name(), error.code(), format!("Error: {error}"))
}

impl SubagentTool {
    /// A second line for a background start that waits for a slot, else nothing.
    fn queued_note(&self, task: &TaskId, caller: &str) -> String {
        match self.delegation.tasks().peek(task, caller) {
            Ok(snapshot) if snapshot.status == TaskStatus::Queued => format!(
                "\n(queued: {} background subagents already run in this session's tree; it \
                 starts when one finishes)",
                self.delegation.activations.cap()
            ),
            _ => String::new(),
        }
    }
}

impl SubagentTool {
    /// The definition `name` for a session in `cwd`, its tools narrowed to the ones kin has
    /// (Claude Code's `Read` is kin's `read`); the notices say what was dropped or ignored.
    fn definition(
        &self,
        name: &str,
        cwd: &std::path::Path,
    ) -> Result<(AgentDefinition, Vec<String>), ToolOutput> {
        let catalog = self
            .delegation
            .catalog(cwd, None)
            .map_err(|e| failure(&e))?;
        let Some(found) = catalog.get(name) else {
            let broken: Vec<&String> = catalog
                .notices
                .iter()
                .filter(|notice| notice.contains(&format!("{name}.md")))
                .collect();
            let why = match broken.first() {
                Some(notice) => format!("; its file cannot be used: {notice}"),
                None => String::new(),
            };
            return Err(ToolOutput::error(
                "ToolArgsError",
                "UNKNOWN_AGENT",
                format!(
                    "Error: unknown agent \"{name}\" (available: {}){why}",
                    catalog.names()
                ),
            ));
        };
        let mut definition = found.clone();
        let shown = definition.source.display().to_string();
        let mut notices: Vec<String> = catalog
            .notices
            .iter()
            .filter(|notice| notice.starts_with(&shown))
            .cloned()
            .collect();
        // Claude Code's `sonnet` or a typo is no reason to fail: the child runs on the caller's.
        if let Ok(host) = self.delegation.host() {
            notices.extend(agents::fit(
                &mut definition,
                |model| host.models().lookup(model).is_ok(),
                |tool| host.tools().get(tool).is_some(),
            ));
        }
        for notice in &notices {
            tracing::warn!(agent = name, "{notice}");
        }
        Ok((definition, notices))
    }
}

/// An answer with the definition's notices after it.
fn with_notices(text: String, notices: &[String]) -> String {
    if notices.is_empty() {
        return text;
    }
    let lines: Vec<String> = notices.iter().map(|n| format!("(notice: {n})")).collect();
    format!("{text}\n{}", lines.join("\n"))
}

impl TypedTool for SubagentTool {
    const NAME: &'static str = "subagent";
    const DESCRIPTION: &'static str = "";
    type Args = SubagentArgs;

    fn name(&self) -> &str {
        self.provider.tool()
    }

    fn description(&self) -> String {
        self.what_it_does()
    }

    fn workspace_note(&self, scope: SpecScope<'_>) -> Option<String> {
        let catalog = self.delegation.catalog(scope.cwd, scope.fresh_since).ok()?;
        if catalog.agents.is_empty() {
            return None;
        }
        let listed: Vec<String> = catalog
            .agents
            .iter()
            .map(|agent| format!("- {}: {}", agent.name, agent.description))
            .collect();
        Some(format!(
            "Agents you can name in `agent`:\n{}",
            listed.join("\n")
        ))
    }

    fn parameters(&self) -> Arc<Value> {
        let (inherits, one_shot) = (self.inherits_context(), self.continuable() != Some(true));
        // Four wordings in all, each made once: every step of every turn offers the tool.
        static WORDED: [OnceLock<Arc<Value>>; 4] = [const { OnceLock::new() }; 4];
        WORDED[usize::from(inherits) * 2 + usize::from(one_shot)]
            .get_or_init(|| Arc::new(worded(inherits, one_shot)))
            .clone()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    /// A foreground child only answers: siblings run side by side. A background start
    /// creates a task a later call of the step may read, so it runs alone.
    fn overlaps(&self, args: &SubagentArgs) -> bool {
        args.run_in_background != Some(true)
    }

    fn title(&self, args: Option<&SubagentArgs>) -> String {
        let label = non_empty(args.and_then(|args| args.description.as_ref()))
            .unwrap_or_else(|| "delegated task".into());
        format!("{}: {label}", self.provider.tool())
    }

    async fn run(&self, args: SubagentArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
        let (Some(label), Some(prompt)) = (
            non_empty(args.description.as_ref()),
            non_empty(args.prompt.as_ref()),
        ) else {
            return Err(ToolOutput::error(
                "ToolArgsError",
                "INVALID_ARGS",
                "Error: `description` and `prompt` must be non-empty strings",
            ));
        };
        let timeout = match args.timeout {
            None => None,
            Some(seconds) if seconds.is_finite() && seconds > 0.0 && seconds < 1e9 => {
                Some(std::time::Duration::from_secs_f64(seconds))
            }
            Some(_) => {
                return Err(ToolOutput::error(
                    "ToolArgsError",
                    "INVALID_ARGS",
                    "Error: `timeout` must be a positive number of seconds",
                ))
            }
        };
        let mode = match args.run_in_background {
            Some(true) => Mode::Background,
            _ => Mode::Foreground,
        };
        let chosen = match non_empty(args.agent.as_ref()) {
            Some(name) => Some(self.definition(&name, &cx.cwd)?),
            None => None,
        };
        let (definition, notices) = chosen.unzip();
        let definition = definition.as_ref();
        let worktree = match args.isolation.as_deref().map(str::trim) {
            Some("worktree") => true,
            Some("none") => false,
            None => definition.is_some_and(|d| d.isolation.is_some()),
            Some(_) => {
                return Err(ToolOutput::error(
                    "ToolArgsError",
                    "INVALID_ARGS",
                    "Error: `isolation` must be \"worktree\" or \"none\"",
                ))
            }
        };
        if worktree && self.provider.kind() != ProviderKind::InProcess {
            return Err(ToolOutput::error(
                "ToolArgsError",
                "UNSUPPORTED_ISOLATION",
                "Error: isolation \"worktree\" runs only in-process children (subagent, \
                 subagent_fork); nothing was started",
            ));
        }
        let request = Request {
            provider: self.provider.name().to_owned(),
            prompt: vec![UserPart::Text { text: prompt }],
            label,
            client: cx.client.clone(),
            cancel: cx.cancel.clone(),
            model: non_empty(args.model.as_ref())
                .or_else(|| definition.and_then(|d| d.model.clone())),
            timeout: timeout.or_else(|| definition.and_then(|d| d.timeout)),
            budget_tokens: args
                .budget_tokens
                .or_else(|| definition.and_then(|d| d.budget_tokens)),
            call_id: Some(cx.call_id.clone()),
            persona: definition
                .filter(|d| !d.instructions.is_empty())
                .map(|d| format!("{DEFAULT_PERSONA}\n\n{}", d.instructions)),
            tools: definition.and_then(|d| d.tools.clone()),
            permission: definition.and_then(|d| d.permission),
            worktree,
        };
        let notices = notices.unwrap_or_default();
        Ok(
            match self
                .delegation
                .delegate(&cx.session_id, request, mode)
                .await
            {
                Ok(Delegated::Continuable { child, task }) => ToolOutput::ok(with_notices(
                    format!(
                        "started subagent {child} as task {task}{}",
                        self.queued_note(&task, &cx.session_id)
                    ),
                    &notices,
                )),
                Ok(Delegated::OneShot(task)) => ToolOutput::ok(format!(
                    "started background subagent task {task}\n(one-shot: this child cannot \
                     be continued, send_message cannot reach it){}",
                    self.queued_note(&task, &cx.session_id)
                )),
                Ok(Delegated::Answer(result)) => match outcome::failure_text(&result) {
                    None => ToolOutput::ok(with_notices(result.text(), &notices)),
                    Some(text) => ToolOutput::error(
                        "SubagentError",
                        outcome::failure_code(result.stop_reason),
                        text,
                    ),
                },
                Err(DelegationError::NoCaller) => ToolOutput::error(
                    "SubagentError",
                    "NO_CALLER",
                    "Error: subagent tool requires a calling agent",
                ),
                Err(error) => failure(&error),
            },
        )
    }
}

/// The arguments of a `send_message` call; optional to serde so that a missing one gets the
/// tool's own error (which says the message was not delivered).
#[derive(Deserialize, JsonSchema)]
pub(super) struct SendMessageArgs {
    /// The subagent id returned when the background subagent was started.
    #[schemars(required)]
    subagent_id: Option<String>,
    /// What to tell the subagent.
    #[schemars(required)]
    message: Option<String>,
}

/// `send_message`: a follow-up to a background child of this session, by its subagent id.
#[derive(Clone)]
pub(super) struct SendMessageTool(pub(super) Arc<Delegation>);

impl TypedTool for SendMessageTool {
    const NAME: &'static str = "send_message";
    const DESCRIPTION: &'static str = "Send a follow-up message to one of your continuable \
        background subagents, by the subagent id you got when you started it (`list_agents` \
        lists them). A subagent that is still working gets the message in its current task; \
        one that has finished continues its own conversation in a new task. Either way, read \
        the reply through the task id this returns, with `task_output`: an id that names no \
        subagent of yours gives a task that fails as unavailable. A foreground subagent or a \
        one-shot background task cannot be continued. An error means the message was NOT \
        delivered.";
    type Args = SendMessageArgs;

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    fn title(&self, args: Option<&SendMessageArgs>) -> String {
        match non_empty(args.and_then(|args| args.subagent_id.as_ref())) {
            Some(id) => format!("send_message: {id}"),
            None => "send_message".into(),
        }
    }

    async fn run(&self, args: SendMessageArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
        let (Some(child), Some(message)) = (args.subagent_id, args.message) else {
            return Err(ToolOutput::error(
                "ToolArgsError",
                "INVALID_ARGS",
                "Error: `subagent_id` and `message` must be strings; the message was not \
                 delivered",
            ));
        };
        let content = vec![UserPart::Text { text: message }];
        Ok(
            match self
                .0
                .send_message(&cx.session_id, &child, content, cx.client.clone())
                .await
            {
                Ok(Delivery::Steered(task)) => {
                    ToolOutput::ok(format!("message delivered to running task {task}"))
                }
                Ok(Delivery::Started(task)) => ToolOutput::ok(format!(
                    "message started task {task} continuing subagent {child}"
                )),
                Err(DelegationError::NoCaller) => ToolOutput::error(
                    "SubagentError",
                    "NO_CALLER",
                    "Error: send_message requires a calling agent; the message was not delivered",
                ),
                Err(error) => failure(&error),
            },
        )
    }
}

/// `list_agents` takes no arguments (and ignores any it is given).
#[derive(Deserialize, JsonSchema)]
pub(super) struct ListAgentsArgs {}

/// `list_agents`: this session's continuable background children and what each is doing.
#[derive(Clone)]
pub(super) struct ListAgentsTool(pub(super) Arc<Delegation>);

impl TypedTool for ListAgentsTool {
    const NAME: &'static str = "list_agents";
    const DESCRIPTION: &'static str = "List the subagents this session can continue with \
        `send_message` (its continuable background subagents), oldest first: subagent id, how \
        it was made, whether a task of it is running, how its last turn ended, how many turns \
        it has run, and its model. Foreground subagents and one-shot background tasks are not \
        listed: they cannot be continued.";
    type Args = ListAgentsArgs;

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn title(&self, _args: Option<&ListAgentsArgs>) -> String {
        Self::NAME.into()
    }

    async fn run(&self, _args: ListAgentsArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
        let delegation = self.0.clone();
        let parent = cx.session_id.clone();
        let budgeted = self.0.has_budget();
        let listed = tokio::task::spawn_blocking(move || {
            let children = delegation.list(&parent);
            // An ACP child spends what it reports: read from its record, only under a budget.
            let reported: Vec<Option<f64>> = children
                .iter()
                .map(
                    |child| match budgeted && ProviderKind::of(&child.kind) == ProviderKind::Acp {
                        true => delegation.last_reported_cost(&child.id),
                        false => None,
                    },
                )
                .collect();
            (children, reported)
        });
        let (children, reported) = listed.await.unwrap_or_default();
        if children.is_empty() {
            return Ok(ToolOutput::ok("(no background subagents)"));
        }
        let max_cost = self.0.settings.child_budget_cost;
        let lines: Vec<String> = children
            .iter()
            .zip(reported)
            .map(|(child, reported)| {
                let state = match &child.task {
                    Some(task) => format!("running task {task}"),
                    None => "idle".into(),
                };
                let model = match (&child.provider, &child.model) {
                    (Some(provider), Some(model)) => format!("{provider}/{model}"),
                    (None, Some(model)) => model.clone(),
                    (Some(provider), None) => provider.clone(),
                    (None, None) => "default".into(),
                };
                // What kin cannot count, it says: an ACP child spends what it reports.
                let usage = match ProviderKind::of(&child.kind) == ProviderKind::Acp && budgeted {
                    true => format!(", {}", super::budget::acp_child_line(reported, max_cost)),
                    false => String::new(),
                };
                format!(
                    "{} [{}] {state}, turns: {}, last stop: {}, model: {model}{usage} — {}",
                    child.id,
                    child.kind,
                    child.turns,
                    child.last_stop.as_deref().unwrap_or("none"),
                    child.description.as_deref().unwrap_or("(untitled)")
                )
            })
            .collect();
        let mut lines = lines;
        lines.extend(self.0.budget_summary(&cx.session_id));
        Ok(ToolOutput::ok(lines.join("\n")))
    }
}
