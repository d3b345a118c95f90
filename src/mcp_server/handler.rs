//! The MCP side of `kin mcp`: rmcp's [`ServerHandler`] for the five tools. Every call settles
//! to a definite result: the answer, or `isError` with the reason.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::ask::ElicitAsk;
use super::clients::Seat;
use super::logged::LoggedTurn;
use super::progress::Forwarder;
use super::sessions::{state, CallError, Delivery, Output, Sessions};
use super::tools::{self, CancelArgs, ListArgs, OutputArgs, ReplyArgs, StartArgs};
use crate::tasks::{TaskId, TaskSnapshot, TaskStatus};
use crate::tools::ClientBridge;

/// `kin_output` waits this long unless told otherwise, and never longer than [`MAX_WAIT`].
const DEFAULT_WAIT: Duration = Duration::from_secs(60);
const MAX_WAIT: Duration = Duration::from_secs(600);

const INSTRUCTIONS: &str = "kin runs coding tasks as durable sessions: `kin` starts one, \
    `kin_reply` continues it, `kin_output`, `kin_cancel` and `kin_list` manage background ones.";

/// One client's view of the server's sessions (the HTTP transport makes one per client):
/// it sees the sessions it holds, and those no connected client holds (`clients`).
#[derive(Clone)]
pub(crate) struct KinServer {
    sessions: Arc<Sessions>,
    seat: Arc<Seat>,
}

impl KinServer {
    pub(crate) fn new(sessions: Arc<Sessions>) -> Self {
        let seat = Arc::new(sessions.owners.seat());
        Self { sessions, seat }
    }

    fn client(&self) -> u64 {
        self.seat.id
    }

    async fn start(&self, args: StartArgs, context: &RequestContext<RoleServer>) -> CallToolResult {
        let (agent, mode) = match self
            .sessions
            .create(&args, &context.ct, self.client())
            .await
        {
            Ok(created) => created,
            Err(error) => return refused(&error),
        };
        let session = agent.id.clone();
        let forwarder = self.forwarder(&session, context, args.background);
        let bridge: Arc<dyn ClientBridge> = Arc::new(ElicitAsk::new(context.peer.clone()));
        let task = match self.sessions.run(agent, mode, args.prompt, bridge) {
            Ok(task) => task,
            Err(error) => return refused(&error),
        };
        if args.background {
            return started(&session, &task);
        }
        self.settle(&session, &task, forwarder, context).await
    }

    async fn reply(&self, args: ReplyArgs, context: &RequestContext<RoleServer>) -> CallToolResult {
        let forwarder = self.forwarder(&args.session_id, context, args.background);
        let bridge: Arc<dyn ClientBridge> = Arc::new(ElicitAsk::new(context.peer.clone()));
        let replied = self
            .sessions
            .reply(&args, bridge, &context.ct, self.client());
        let (task, steered, notice) = match replied.await {
            Ok((Delivery::Steered(task), notice)) => (task, true, notice),
            Ok((Delivery::Started(task), notice)) => (task, false, notice),
            Err(error) => return refused(&error),
        };
        let mut result = if args.background {
            let mut result = json!({
                "sessionId": args.session_id,
                "taskId": task.as_str(),
                "state": "running",
                "delivered": if steered { "into the running task" } else { "as a new task" },
            });
            result["next"] = "collect the answer with kin_output".into();
            CallToolResult::structured(result)
        } else {
            self.settle(&args.session_id, &task, forwarder, context)
                .await
        };
        if let Some(notice) = notice {
            noted(&mut result, notice);
        }
        result
    }

    /// Progress for a foreground call whose client asked for it.
    fn forwarder(
        &self,
        session: &str,
        context: &RequestContext<RoleServer>,
        background: bool,
    ) -> Option<Forwarder> {
        let token = context.meta.get_progress_token().filter(|_| !background)?;
        Some(Forwarder::start(
            self.sessions.runtime().host().events(),
            session.to_owned(),
            context.peer.clone(),
            token,
        ))
    }

    /// Waits for a foreground task (the call's cancellation cancels it) and reports it.
    async fn settle(
        &self,
        session: &str,
        task: &TaskId,
        forwarder: Option<Forwarder>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let waited = self.sessions.wait(task, None, &context.ct).await;
        if let Some(forwarder) = forwarder {
            forwarder.finish().await;
        }
        match waited {
            Ok(snapshot) => report(session, &snapshot),
            Err(error) => refused(&error),
        }
    }

    async fn output(
        &self,
        args: OutputArgs,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResult {
        let wait = args.wait.then(|| {
            args.timeout_seconds
                .map_or(DEFAULT_WAIT, Duration::from_secs)
                .min(MAX_WAIT)
        });
        match self
            .sessions
            .output(&args.session_id, wait, &context.ct, self.client())
            .await
        {
            Ok(Output::Task(snapshot)) => report(&args.session_id, &snapshot),
            Ok(Output::Logged(turn)) => report_logged(&args.session_id, &turn),
            Err(error) => refused(&error),
        }
    }

    async fn cancel(&self, args: CancelArgs) -> CallToolResult {
        match self.sessions.cancel(&args.session_id, self.client()).await {
            Ok(Output::Task(snapshot)) => {
                let mut result = described(&args.session_id, &snapshot);
                result["cancelled"] = Value::Bool(snapshot.status == TaskStatus::Killed);
                CallToolResult::structured(result)
            }
            // Nothing of it runs here (its tasks ran in an earlier server): nothing to stop.
            Ok(Output::Logged(turn)) => {
                let mut result = json!({"sessionId": args.session_id, "turn": turn.turn,
                    "fromLog": true, "cancelled": false});
                settled(&mut result, turn.status, &turn.answer, &turn.detail);
                CallToolResult::structured(result)
            }
            Err(error) => refused(&error),
        }
    }
}

/// The arguments of a call, or what is wrong with them.
fn parse<A: DeserializeOwned>(tool: &str, arguments: Value) -> Result<A, String> {
    serde_json::from_value(arguments)
        .map_err(|error| format!("invalid arguments for `{tool}`: {error}"))
}

/// The result of a call whose arguments did not parse.
fn invalid(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

fn refused(error: &CallError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(error.to_string())])
}

fn started(session: &str, task: &TaskId) -> CallToolResult {
    CallToolResult::structured(json!({
        "sessionId": session,
        "taskId": task.as_str(),
        "state": "running",
        "next": "collect the answer with kin_output; continue the session with kin_reply",
    }))
}

/// Adds `notice` to a call's result: a `notice` field and a text block.
fn noted(result: &mut CallToolResult, notice: String) {
    if let Some(Value::Object(structured)) = &mut result.structured_content {
        structured.insert("notice".into(), notice.clone().into());
    }
    result
        .content
        .push(ContentBlock::text(format!("notice: {notice}")));
}

/// A task's state as the calls report it.
fn described(session: &str, snapshot: &TaskSnapshot) -> Value {
    let mut result = json!({
        "sessionId": session,
        "taskId": snapshot.id.as_str(),
    });
    settled(
        &mut result,
        snapshot.status,
        &snapshot.output,
        &snapshot.detail,
    );
    result
}

/// Adds a task's `state`, `answer` and `error` to `result`.
fn settled(
    result: &mut Value,
    status: TaskStatus,
    answer: &Option<String>,
    error: &Option<String>,
) {
    result["state"] = state(status).into();
    // A task that did not complete may still have produced some of its answer.
    let key = match status {
        TaskStatus::Completed => "answer",
        _ => "partialOutput",
    };
    if let Some(answer) = answer {
        result[key] = answer.clone().into();
    }
    if let Some(error) = error {
        result["error"] = error.clone().into();
    }
}

/// The result of a task: the answer when it completed, `isError` with the reason when it
/// failed or was cancelled, the state while it runs.
fn report(session: &str, snapshot: &TaskSnapshot) -> CallToolResult {
    let structured = described(session, snapshot);
    reported(
        session,
        structured,
        snapshot.status,
        &snapshot.output,
        &snapshot.detail,
    )
}

/// `kin_output` of a session whose tasks ran in an earlier server: its last turn, from the log.
fn report_logged(session: &str, turn: &LoggedTurn) -> CallToolResult {
    let mut structured = json!({"sessionId": session, "turn": turn.turn, "fromLog": true});
    settled(&mut structured, turn.status, &turn.answer, &turn.detail);
    reported(session, structured, turn.status, &turn.answer, &turn.detail)
}

fn reported(
    session: &str,
    structured: Value,
    status: TaskStatus,
    answer: &Option<String>,
    detail: &Option<String>,
) -> CallToolResult {
    let failed = matches!(
        status,
        TaskStatus::Failed | TaskStatus::Killed | TaskStatus::Interrupted
    );
    let text = match (answer, status) {
        (Some(answer), TaskStatus::Completed) => {
            format!("{answer}\n\n[kin session {session}; continue it with kin_reply]")
        }
        (_, TaskStatus::Killed) => match detail {
            // What became of its worktree.
            Some(detail) => format!("the kin task was cancelled [session {session}]\n{detail}"),
            None => format!("the kin task was cancelled [session {session}]"),
        },
        (partial, status) if failed => {
            let mut text = format!(
                "the kin task {}: {} [session {session}]",
                state(status),
                detail.as_deref().unwrap_or("no reason given")
            );
            if let Some(partial) = partial {
                text.push_str("\nPartial output before the run ended:\n");
                text.push_str(partial);
            }
            text
        }
        (_, status) => format!(
            "the kin task is {} [session {session}]; wait for it with kin_output",
            state(status)
        ),
    };
    let mut result = if failed {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    result.structured_content = Some(structured);
    result
}

impl ServerHandler for KinServer {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("kin", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let name = request.name.as_ref();
        let result = match name {
            "kin" => match parse::<StartArgs>(name, arguments) {
                Ok(args) => self.start(args, &context).await,
                Err(message) => invalid(message),
            },
            "kin_reply" => match parse::<ReplyArgs>(name, arguments) {
                Ok(args) => self.reply(args, &context).await,
                Err(message) => invalid(message),
            },
            "kin_output" => match parse::<OutputArgs>(name, arguments) {
                Ok(args) => self.output(args, &context).await,
                Err(message) => invalid(message),
            },
            "kin_cancel" => match parse::<CancelArgs>(name, arguments) {
                Ok(args) => self.cancel(args).await,
                Err(message) => invalid(message),
            },
            "kin_list" => match parse::<ListArgs>(name, arguments) {
                Ok(ListArgs {}) => CallToolResult::structured(self.sessions.list(self.client())),
                Err(message) => invalid(message),
            },
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool {other:?}; kin mcp offers {}",
                        tools::NAMES.join(", ")
                    ),
                    None,
                ))
            }
        };
        Ok(result.into())
    }
}
