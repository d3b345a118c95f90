//! Warnings the user should see about a session: a `notice` session update when the client
//! advertised `session.notices`, and always a log line on stderr. A client without notices gets
//! only the log line: a notice is live information, not conversation, and making it agent text
//! would put words in the agent's mouth that the session log and its replay do not have.

use agent_client_protocol_schema::v1::{
    ClientCapabilities, Notice, NoticeSeverity, SessionNotification, SessionUpdate,
};

use crate::rpc::Peer;

/// How important a notice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Info,
    Warning,
}

/// Whether the client takes `notice` updates.
pub fn supported(client: &ClientCapabilities) -> bool {
    client
        .session
        .as_ref()
        .is_some_and(|session| session.notices.is_some())
}

/// The `notice` update for `title` (one line) and its optional `detail`.
pub fn update(severity: Severity, title: &str, detail: Option<&str>) -> SessionUpdate {
    let severity = match severity {
        Severity::Info => NoticeSeverity::Info,
        Severity::Warning => NoticeSeverity::Warning,
    };
    SessionUpdate::Notice(Notice::new(severity, title).description(detail.map(str::to_owned)))
}

/// Tells the user `title` about `session`: logged, and sent as a notice when the client on
/// `peer` takes them.
pub fn send(
    peer: &Peer,
    client: &ClientCapabilities,
    session: &str,
    severity: Severity,
    title: &str,
    detail: Option<&str>,
) {
    match severity {
        Severity::Info => tracing::info!(session, detail, "{title}"),
        Severity::Warning => tracing::warn!(session, detail, "{title}"),
    }
    if supported(client) {
        let update = update(severity, title, detail);
        peer.notify(
            "session/update",
            &SessionNotification::new(session.to_owned(), update),
        );
    }
}

#[cfg(test)]
mod tests {
    use agent_client_protocol_schema::v1::{ClientSessionCapabilities, NoticeCapabilities};

    use super::*;

    #[test]
    fn only_clients_that_advertise_notices_take_them() {
        assert!(!supported(&ClientCapabilities::new()));
        let with = ClientCapabilities::new()
            .session(ClientSessionCapabilities::new().notices(NoticeCapabilities::new()));
        assert!(supported(&with));
        let wire = serde_json::to_value(update(Severity::Warning, "T", Some("D"))).unwrap();
        assert_eq!(wire["sessionUpdate"], "notice");
        assert_eq!(wire["severity"], "warning");
        assert_eq!(wire["title"], "T");
        assert_eq!(wire["description"], "D");
    }
}
