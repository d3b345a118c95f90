//! Telling the user something about a session through the editor: an ACP `notice` update when
//! the client advertised `session.notices`, else an agent message chunk, which every editor
//! shows; stderr always gets a log line. A notice is live only: nothing is stored in the
//! session log.

use agent_client_protocol_schema::v1::{
    ClientCapabilities, ContentBlock, ContentChunk, Notice, NoticeSeverity, SessionNotification,
    SessionUpdate,
};

use crate::rpc::Peer;

/// How important a notice is (ACP's three severities; kin itself sends only warnings so far).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code, reason = "the mapping covers every ACP severity")]
pub(crate) enum Severity {
    Info,
    Warning,
    Error,
}

/// Whether the client takes `notice` updates.
pub(crate) fn supported(client: &ClientCapabilities) -> bool {
    client
        .session
        .as_ref()
        .is_some_and(|session| session.notices.is_some())
}

/// The update that carries the notice to this client.
pub(crate) fn update(
    client: &ClientCapabilities,
    severity: Severity,
    title: &str,
    description: Option<&str>,
) -> SessionUpdate {
    if supported(client) {
        let severity = match severity {
            Severity::Info => NoticeSeverity::Info,
            Severity::Warning => NoticeSeverity::Warning,
            Severity::Error => NoticeSeverity::Error,
        };
        return SessionUpdate::Notice(
            Notice::new(severity, title).description(description.map(str::to_owned)),
        );
    }
    let label = match severity {
        Severity::Info => "Note",
        Severity::Warning => "Warning",
        Severity::Error => "Error",
    };
    let text = match description {
        Some(description) => format!("[kin] {label}: {title}. {description}\n\n"),
        None => format!("[kin] {label}: {title}\n\n"),
    };
    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::from(text)))
}

/// Sends a notice about `session` to the client on `peer`.
pub(crate) fn send(
    peer: &Peer,
    client: &ClientCapabilities,
    session: &str,
    severity: Severity,
    title: &str,
    description: Option<&str>,
) {
    // The log keeps a line of it whatever the client shows.
    match severity {
        Severity::Info => tracing::info!(session, description, "{title}"),
        Severity::Warning => tracing::warn!(session, description, "{title}"),
        Severity::Error => tracing::error!(session, description, "{title}"),
    }
    let update = update(client, severity, title, description);
    peer.notify(
        "session/update",
        &SessionNotification::new(session.to_owned(), update),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol_schema::v1::{ClientSessionCapabilities, NoticeCapabilities};

    #[test]
    fn notices_go_as_notices_only_to_clients_that_take_them() {
        let plain = ClientCapabilities::new();
        let with_notices = ClientCapabilities::new()
            .session(ClientSessionCapabilities::new().notices(NoticeCapabilities::new()));
        let wire = |client: &ClientCapabilities| {
            serde_json::to_value(update(client, Severity::Warning, "T", Some("D"))).unwrap()
        };
        let notice = wire(&with_notices);
        assert_eq!(notice["sessionUpdate"], "notice");
        assert_eq!(notice["severity"], "warning");
        assert_eq!(notice["title"], "T");
        assert_eq!(notice["description"], "D");
        let chunk = wire(&plain);
        assert_eq!(chunk["sessionUpdate"], "agent_message_chunk");
        assert_eq!(chunk["content"]["text"], "[kin] Warning: T. D\n\n");
    }
}
