//! A server's questions to the user (MCP elicitation). kin's client declares form and URL
//! elicitation; a question goes to whoever runs the server's tool call in flight (the newest,
//! when several are): through the editor's own `elicitation/create` when it advertises the
//! question's mode, else as a permission-style choice for a yes/no or a choice of enum
//! values (on the terminal in `kin run`), else it is declined with a log line saying why.
//! A call has one question open at a time (another meanwhile is declined) and at most
//! [`MAX_QUESTIONS_PER_CALL`]; the server's message is shown escaped and cut to
//! [`MAX_MESSAGE_BYTES`]; a URL is shown only when it is `https:` (or `http:` to this machine).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, InputRequest, InputRequests,
    InputResponses,
};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::sync::lock;
use crate::tools::client::{ClientBridge, Question, QuestionMode, Reply};

/// Who can answer for one tool call: its session's editor (or terminal) and the call.
#[derive(Clone)]
pub(crate) struct Asker {
    pub(crate) client: Option<Arc<dyn ClientBridge>>,
    pub(crate) call_id: String,
    pub(crate) cancel: CancellationToken,
    /// The call's questions so far, and whether one is open now.
    pub(crate) asked: Arc<Mutex<Asked>>,
}

/// The most questions one tool call may put to the user.
pub(crate) const MAX_QUESTIONS_PER_CALL: usize = 8;
/// The most of a server's message shown with its question.
const MAX_MESSAGE_BYTES: usize = 2000;

/// What one call has asked.
#[derive(Debug, Default)]
pub(crate) struct Asked {
    count: usize,
    open: bool,
}

/// Holds a call's one open question; closes it when dropped.
struct OpenQuestion(Arc<Mutex<Asked>>);

impl Drop for OpenQuestion {
    fn drop(&mut self) {
        lock(&self.0).open = false;
    }
}

impl Asker {
    /// The call's place to ask a question, or why it may not ask one now.
    fn open_question(&self) -> Result<OpenQuestion, String> {
        let mut asked = lock(&self.asked);
        if asked.open {
            return Err("another of its questions in this tool call is still open".into());
        }
        if asked.count >= MAX_QUESTIONS_PER_CALL {
            return Err(format!(
                "it already asked {MAX_QUESTIONS_PER_CALL} questions in this tool call, the most \
                 kin passes on"
            ));
        }
        asked.count += 1;
        asked.open = true;
        Ok(OpenQuestion(self.asked.clone()))
    }
}

/// The most URL questions of one server whose completion kin still waits to pass on: a
/// server that never says it is done with them cannot grow the list.
const MAX_WAITING_URLS: usize = 16;

/// A URL question the user accepted: its elicitation id, and the editor that showed it.
type Accepted = (String, Arc<dyn ClientBridge>);

/// The askers of a server's calls in flight.
#[derive(Clone, Default)]
pub(crate) struct Askers {
    open: Arc<Mutex<Vec<(u64, Asker)>>>,
    next: Arc<AtomicU64>,
    /// URL questions the user accepted, by elicitation id, oldest first: where the server's
    /// `notifications/elicitation/complete` goes.
    waiting: Arc<Mutex<VecDeque<Accepted>>>,
}

/// Keeps an asker open while its call runs.
pub(crate) struct AskerGuard {
    askers: Askers,
    id: u64,
}

impl Drop for AskerGuard {
    fn drop(&mut self) {
        lock(&self.askers.open).retain(|(id, _)| *id != self.id);
    }
}

impl Askers {
    pub(crate) fn open(&self, asker: Asker) -> AskerGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.open).push((id, asker));
        AskerGuard {
            askers: self.clone(),
            id,
        }
    }

    fn newest(&self) -> Option<Asker> {
        lock(&self.open).last().map(|(_, asker)| asker.clone())
    }

    /// Remembers that `client`'s user accepted URL question `id`.
    fn wait_for_completion(&self, id: String, client: Arc<dyn ClientBridge>) {
        let mut waiting = lock(&self.waiting);
        if waiting.len() == MAX_WAITING_URLS {
            waiting.pop_front();
        }
        waiting.push_back((id, client));
    }

    /// The server says URL question `id` is done: the editor that showed it is told so.
    pub(crate) fn completed(&self, server: &str, id: &str) {
        let found = {
            let mut waiting = lock(&self.waiting);
            let at = waiting.iter().position(|(waiting, _)| waiting == id);
            at.and_then(|at| waiting.remove(at))
        };
        match found {
            Some((id, client)) => client.elicitation_done(&id),
            None => tracing::debug!(
                server,
                id,
                "completion of a URL question kin did not pass on"
            ),
        }
    }
}

fn declined(server: &str, why: &str) -> ElicitResult {
    tracing::warn!(server, "declined an MCP server's question: {why}");
    ElicitResult::new(ElicitationAction::Decline)
}

/// Puts server `server`'s question (sent mid-call) to the user of its call in flight (the
/// newest, when several are); the answer for it.
pub(crate) async fn ask_newest(
    server: &str,
    askers: &Askers,
    request: ElicitRequestParams,
) -> ElicitResult {
    match askers.newest() {
        Some(asker) => {
            let url_id = match &request {
                ElicitRequestParams::UrlElicitationParams { elicitation_id, .. } => {
                    Some(elicitation_id.clone())
                }
                _ => None,
            };
            let answer = ask(server, &asker, request).await;
            if let (Some(id), Some(client), ElicitationAction::Accept) =
                (url_id, asker.client, &answer.action)
            {
                askers.wait_for_completion(id, client);
            }
            answer
        }
        None => declined(
            server,
            "none of its tool calls is running, so no user is at hand",
        ),
    }
}

/// The answers to the questions of an `input_required` result (stateless revision), by key;
/// `Err` for input kin does not give (kin declares neither sampling nor roots).
pub(crate) async fn fulfil(
    server: &str,
    asker: &Asker,
    requests: InputRequests,
) -> Result<InputResponses, String> {
    let mut answers = InputResponses::new();
    for (key, request) in requests {
        let InputRequest::Elicitation(question) = request else {
            return Err("it asked for input kin does not give (sampling or roots)".into());
        };
        let answer = ask(server, asker, question.params).await;
        let answer = serde_json::to_value(answer).map_err(|error| error.to_string())?;
        answers.insert(key, answer);
    }
    Ok(answers)
}

/// Puts server `server`'s question to `asker`'s user; the answer for it.
async fn ask(server: &str, asker: &Asker, request: ElicitRequestParams) -> ElicitResult {
    let Some(client) = asker.client.clone() else {
        return declined(server, "its session has no editor or terminal to ask");
    };
    let _open = match asker.open_question() {
        Ok(open) => open,
        Err(why) => return declined(server, &why),
    };
    let features = client.features();
    let (message, mode, offered) = match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => {
            let schema = serde_json::to_value(&requested_schema).unwrap_or(Value::Null);
            (
                message,
                QuestionMode::Form { schema },
                features.elicitation_form,
            )
        }
        ElicitRequestParams::UrlElicitationParams {
            message,
            url,
            elicitation_id,
            ..
        } => {
            if let Err(why) = super::links::openable(&url) {
                return declined(server, &why);
            }
            (
                message,
                QuestionMode::Url {
                    id: elicitation_id,
                    url,
                },
                features.elicitation_url,
            )
        }
        _ => return declined(server, "it asked in a mode kin does not know"),
    };
    let message = format!(
        "MCP server `{server}` asks: {}",
        crate::text::visible_capped(&message, MAX_MESSAGE_BYTES)
    );
    let defaults = match &mode {
        QuestionMode::Form { schema } => defaults(schema),
        QuestionMode::Url { .. } => Map::new(),
    };
    if offered {
        let question = Question {
            call_id: Some(asker.call_id.clone()),
            message,
            mode,
        };
        return match client.elicit(question, asker.cancel.clone()).await {
            Ok(reply) => answer(reply, defaults),
            Err(error) => declined(server, &format!("the editor could not ask it: {error}")),
        };
    }
    let QuestionMode::Form { schema } = mode else {
        return declined(
            server,
            "the editor takes no URL questions (elicitation.url)",
        );
    };
    let Some(choice) = Choice::of(&schema) else {
        return declined(
            server,
            "the editor takes no forms (elicitation.form), and the form is not a yes/no or a \
             choice of values",
        );
    };
    let choices = choice.labels();
    let picked = client
        .choose(
            asker.call_id.clone(),
            message,
            choices,
            asker.cancel.clone(),
        )
        .await;
    match picked {
        Ok(Some(n)) => match choice.content(n) {
            Some(content) => ElicitResult::new(ElicitationAction::Accept).with_content(content),
            None => ElicitResult::new(ElicitationAction::Decline),
        },
        Ok(None) => ElicitResult::new(ElicitationAction::Cancel),
        Err(error) => declined(server, &format!("nobody could be asked: {error}")),
    }
}

/// The `default` of each property of a form's schema that has one.
fn defaults(schema: &Value) -> Map<String, Value> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Map::new();
    };
    properties
        .iter()
        .filter_map(|(name, property)| Some((name.clone(), property.get("default")?.clone())))
        .collect()
}

/// The editor's answer for the server. An accepted form gets the schema's default for each
/// field the user left out (SEP-1034: a server may count on its defaults being filled in).
fn answer(reply: Reply, defaults: Map<String, Value>) -> ElicitResult {
    match reply {
        Reply::Accept(content) if content.is_some() || !defaults.is_empty() => {
            let mut content = content.unwrap_or_default();
            for (name, value) in defaults {
                content.entry(name).or_insert(value);
            }
            ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
        }
        Reply::Accept(_) => ElicitResult::new(ElicitationAction::Accept),
        Reply::Decline => ElicitResult::new(ElicitationAction::Decline),
        Reply::Cancel => ElicitResult::new(ElicitationAction::Cancel),
    }
}

/// A form a permission-style question can carry: nothing to fill in (a confirmation), one
/// boolean, or one property with enumerated values.
#[derive(Debug, PartialEq)]
enum Choice {
    Confirm,
    YesNo(String),
    OneOf(String, Vec<String>),
}

impl Choice {
    fn of(schema: &Value) -> Option<Self> {
        let properties = match schema.get("properties") {
            None => return Some(Self::Confirm),
            Some(properties) => properties.as_object()?,
        };
        let mut properties = properties.iter();
        let Some((name, property)) = properties.next() else {
            return Some(Self::Confirm);
        };
        if properties.next().is_some() {
            return None;
        }
        if property.get("type").and_then(Value::as_str) == Some("boolean") {
            return Some(Self::YesNo(name.clone()));
        }
        let values: Vec<String> = match (property.get("enum"), property.get("oneOf")) {
            (Some(Value::Array(values)), _) => values
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            (_, Some(Value::Array(options))) => options
                .iter()
                .filter_map(|o| o.get("const").and_then(Value::as_str).map(str::to_owned))
                .collect(),
            _ => return None,
        };
        (!values.is_empty()).then(|| Self::OneOf(name.clone(), values))
    }

    fn labels(&self) -> Vec<String> {
        match self {
            Self::Confirm | Self::YesNo(_) => vec!["Yes".into(), "No".into()],
            Self::OneOf(_, values) => values.clone(),
        }
    }

    /// The content for choice `n`; `None` when it means no (a confirmation's "No").
    fn content(&self, n: usize) -> Option<Value> {
        match self {
            Self::Confirm => (n == 0).then(|| json!({})),
            Self::YesNo(name) => Some(json!({ name: n == 0 })),
            Self::OneOf(name, values) => values.get(n).map(|value| json!({ name: value })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_a_permission_question_can_carry() {
        let yes_no = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
        assert_eq!(Choice::of(&yes_no), Some(Choice::YesNo("ok".into())));
        assert_eq!(
            Choice::of(&yes_no).unwrap().content(1),
            Some(json!({"ok": false}))
        );
        let colour = json!({"type": "object", "properties": {"c": {"type": "string", "enum": ["red", "blue"]}}});
        let choice = Choice::of(&colour).unwrap();
        assert_eq!(choice.labels(), ["red", "blue"]);
        assert_eq!(choice.content(1), Some(json!({"c": "blue"})));
        assert_eq!(
            Choice::of(&json!({"type": "object"})),
            Some(Choice::Confirm)
        );
        let two = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}});
        assert_eq!(Choice::of(&two), None);
        let text = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        assert_eq!(Choice::of(&text), None);
    }

    #[test]
    fn a_call_asks_one_question_at_a_time_and_a_few_in_all() {
        let asker = Asker {
            client: None,
            call_id: "c".into(),
            cancel: CancellationToken::new(),
            asked: Arc::default(),
        };
        let open = asker.open_question().unwrap();
        let error = asker.open_question().err().unwrap();
        assert!(error.contains("still open"), "{error}");
        drop(open);
        for _ in 1..MAX_QUESTIONS_PER_CALL {
            drop(asker.open_question().unwrap());
        }
        let error = asker.open_question().err().unwrap();
        assert!(error.contains("already asked"), "{error}");
    }

    #[test]
    fn an_accepted_form_gets_the_defaults_of_the_fields_left_out() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "Ada"},
            "age": {"type": "integer", "default": 30},
            "note": {"type": "string"}}});
        let given = Map::from_iter([("name".to_owned(), json!("Grace"))]);
        let result = answer(Reply::Accept(Some(given)), defaults(&schema));
        assert_eq!(result.content, Some(json!({"name": "Grace", "age": 30})));
        let result = answer(Reply::Accept(None), defaults(&schema));
        assert_eq!(result.content, Some(json!({"name": "Ada", "age": 30})));
        let result = answer(Reply::Decline, defaults(&schema));
        assert_eq!(result.content, None);
        let empty = answer(Reply::Accept(None), Map::new());
        assert_eq!(empty.content, None);
    }
}
