//! An MCP server's question as ACP: `elicitation/create` (form or URL mode, scoped to the
//! session and the tool call that caused it) and its answer; or, for an editor that takes no
//! elicitation, a choice as `session/request_permission` options.

use agent_client_protocol_schema::v1::{
    CreateElicitationRequest, CreateElicitationResponse, ElicitationAction, ElicitationFormMode,
    ElicitationMode, ElicitationSchema, ElicitationSessionScope, ElicitationUrlMode,
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, ToolCallId,
};

use crate::tools::client::{ClientError, Question, QuestionMode, Reply};

/// The option id of choice `n` in a permission-style question, and of declining it.
const CHOICE: &str = "choice-";
const DECLINE: &str = "decline";

/// The `elicitation/create` request for `question` in session `session_id`.
pub(crate) fn request(
    session_id: &str,
    question: Question,
) -> Result<CreateElicitationRequest, ClientError> {
    let scope = ElicitationSessionScope::new(session_id.to_owned())
        .tool_call_id(question.call_id.map(ToolCallId::new));
    let mode: ElicitationMode = match question.mode {
        QuestionMode::Form { schema } => {
            let schema: ElicitationSchema =
                serde_json::from_value(schema).map_err(|error| ClientError::Failed {
                    method: "elicitation/create".into(),
                    message: format!("the server's form is not one ACP can carry: {error}"),
                })?;
            ElicitationFormMode::new(scope, schema).into()
        }
        QuestionMode::Url { id, url } => ElicitationUrlMode::new(scope, id, url).into(),
    };
    Ok(CreateElicitationRequest::new(mode, question.message))
}

/// The user's answer, from the editor's.
pub(crate) fn reply(
    answer: Result<CreateElicitationResponse, ClientError>,
) -> Result<Reply, ClientError> {
    let answer = match answer {
        Ok(answer) => answer,
        Err(ClientError::Cancelled) => return Ok(Reply::Cancel),
        Err(error) => return Err(error),
    };
    Ok(match answer.action {
        ElicitationAction::Accept(accepted) => {
            let content = accepted.content.map(|values| {
                values
                    .into_iter()
                    .filter_map(|(name, value)| Some((name, serde_json::to_value(value).ok()?)))
                    .collect()
            });
            Reply::Accept(content)
        }
        ElicitationAction::Decline => Reply::Decline,
        // Cancelled, or an action this kin does not know: nothing was agreed to.
        _ => Reply::Cancel,
    })
}

/// The options of a permission-style question: each choice, then declining.
pub(crate) fn options(choices: &[String]) -> Vec<PermissionOption> {
    let mut options: Vec<PermissionOption> = choices
        .iter()
        .enumerate()
        .map(|(n, choice)| {
            PermissionOption::new(
                format!("{CHOICE}{n}"),
                choice.clone(),
                PermissionOptionKind::AllowOnce,
            )
        })
        .collect();
    options.push(PermissionOption::new(
        DECLINE,
        "Decline".to_owned(),
        PermissionOptionKind::RejectOnce,
    ));
    options
}

/// The choice picked (`None`: declined, dismissed, or an option kin did not offer).
pub(crate) fn picked(outcome: RequestPermissionOutcome, choices: usize) -> Option<usize> {
    let RequestPermissionOutcome::Selected(selected) = outcome else {
        return None;
    };
    let n: usize = selected.option_id.0.strip_prefix(CHOICE)?.parse().ok()?;
    (n < choices).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_form_question_is_scoped_to_its_session_and_call() {
        let question = Question {
            call_id: Some("c1".into()),
            message: "MCP server `db` asks: your name?".into(),
            mode: QuestionMode::Form {
                schema: json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            },
        };
        let sent = serde_json::to_value(request("s1", question).unwrap()).unwrap();
        assert_eq!(sent["mode"], "form");
        assert_eq!(sent["sessionId"], "s1");
        assert_eq!(sent["toolCallId"], "c1");
        assert_eq!(
            sent["requestedSchema"]["properties"]["name"]["type"],
            "string"
        );
        let answer: CreateElicitationResponse =
            serde_json::from_value(json!({"action": "accept", "content": {"name": "Ada"}}))
                .unwrap();
        let Reply::Accept(Some(content)) = reply(Ok(answer)).unwrap() else {
            panic!("not accepted");
        };
        assert_eq!(content["name"], "Ada");
    }

    #[test]
    fn a_choice_maps_back_and_foreign_options_are_none() {
        let options = options(&["red".into(), "blue".into()]);
        assert_eq!(options.len(), 3);
        let outcome = |id: &str| {
            serde_json::from_value(json!({"outcome": "selected", "optionId": id})).unwrap()
        };
        assert_eq!(picked(outcome("choice-1"), 2), Some(1));
        assert_eq!(picked(outcome("decline"), 2), None);
        assert_eq!(picked(outcome("choice-7"), 2), None);
    }
}
