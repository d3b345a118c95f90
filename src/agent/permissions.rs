//! Permission state and the session log: queued [`PermissionRecord`]s become `permission/mode`
//! and `permission/decision` events, and those events restore the state when a session opens.

use crate::session::{Event, EventBody, PermissionDecision, PermissionModeSet};
use crate::tools::client::ServerTool;
use crate::tools::permission::{Decision, PermissionRecord, Scope};
use crate::tools::{PermissionMode, SessionPermissions, ToolKind};

fn name_of<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn parse<T: serde::de::DeserializeOwned>(name: &str) -> Option<T> {
    serde_json::from_value(serde_json::Value::from(name)).ok()
}

/// The log event of a record; `at` is the (turn, step) of the call a decision was made in.
pub(super) fn event(record: PermissionRecord, at: Option<(u32, u32)>) -> EventBody {
    match record {
        PermissionRecord::Mode(mode) => EventBody::PermissionMode(PermissionModeSet {
            mode: mode.id().into(),
            source: serde_json::json!({"kind": "client"}),
        }),
        PermissionRecord::Decision(decision) => {
            let (server, tool) = decision
                .server_tool
                .map(|one| (one.server, one.tool))
                .unzip();
            EventBody::PermissionDecision(PermissionDecision {
                turn: at.map(|(turn, _)| turn),
                step: at.map(|(_, step)| step),
                call_id: decision.call_id,
                kind: name_of(&decision.kind),
                scope: name_of(&decision.scope),
                decision: if decision.allow { "allow" } else { "reject" }.into(),
                remember: if decision.always { "always" } else { "once" }.into(),
                server,
                tool,
            })
        }
    }
}

/// The permission state a log leaves behind: the last mode set, and the last "always" answer
/// per kind and scope. Records kin cannot read (from a newer version) are skipped.
pub(super) fn restore(events: &[Event]) -> SessionPermissions {
    let permissions = SessionPermissions::new(PermissionMode::default());
    for event in events {
        let record = match &event.body {
            EventBody::PermissionMode(set) => {
                PermissionMode::from_id(&set.mode).map(PermissionRecord::Mode)
            }
            EventBody::PermissionDecision(d) => {
                let kind: Option<ToolKind> = parse(&d.kind);
                let scope: Option<Scope> = parse(&d.scope);
                kind.zip(scope).map(|(kind, scope)| {
                    PermissionRecord::Decision(Decision {
                        call_id: d.call_id.clone(),
                        kind,
                        scope,
                        allow: d.decision == "allow",
                        always: d.remember == "always",
                        server_tool: d
                            .server
                            .clone()
                            .zip(d.tool.clone())
                            .map(|(server, tool)| ServerTool { server, tool }),
                    })
                })
            }
            _ => None,
        };
        if let Some(record) = record {
            permissions.restore(&record);
        }
    }
    permissions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logged(record: PermissionRecord) -> Event {
        Event::new(0, 0, event(record, Some((1, 2))))
    }

    #[test]
    fn the_log_restores_mode_and_always_answers_but_not_once_answers() {
        let decision = |kind, allow, always| {
            PermissionRecord::Decision(Decision {
                call_id: "c".into(),
                kind,
                scope: Scope::Workspace,
                allow,
                always,
                server_tool: None,
            })
        };
        let events = vec![
            logged(PermissionRecord::Mode(PermissionMode::ReadOnly)),
            logged(decision(ToolKind::Edit, true, true)),
            logged(decision(ToolKind::Execute, true, false)),
            logged(decision(ToolKind::Delete, false, true)),
        ];
        let EventBody::PermissionDecision(first) = &events[1].body else {
            panic!("not a decision")
        };
        assert_eq!((first.turn, first.step), (Some(1), Some(2)));
        assert_eq!(
            (first.kind.as_str(), first.scope.as_str()),
            ("edit", "workspace")
        );
        let restored = restore(&events);
        assert_eq!(restored.mode(), PermissionMode::ReadOnly);
        assert_eq!(
            restored.remembered(ToolKind::Edit, Scope::Workspace),
            Some(true)
        );
        assert_eq!(
            restored.remembered(ToolKind::Execute, Scope::Workspace),
            None
        );
        assert_eq!(
            restored.remembered(ToolKind::Delete, Scope::Workspace),
            Some(false)
        );
        assert_eq!(restored.remembered(ToolKind::Edit, Scope::Outside), None);
        assert!(restored.take_unlogged().is_empty());
    }

    #[test]
    fn an_always_answer_about_a_server_tool_is_logged_with_it_and_restored() {
        let one = ServerTool {
            server: "db".into(),
            tool: "query".into(),
        };
        let events = vec![logged(PermissionRecord::Decision(Decision {
            call_id: "c".into(),
            kind: ToolKind::Execute,
            scope: Scope::Workspace,
            allow: true,
            always: true,
            server_tool: Some(one.clone()),
        }))];
        let EventBody::PermissionDecision(logged) = &events[0].body else {
            panic!("not a decision")
        };
        assert_eq!(
            (logged.server.as_deref(), logged.tool.as_deref()),
            (Some("db"), Some("query"))
        );
        let restored = restore(&events);
        assert_eq!(restored.remembered_tool(&one), Some(true));
        assert_eq!(
            restored.remembered(ToolKind::Execute, Scope::Workspace),
            None,
            "an answer about one server tool allows no other command"
        );
    }
}
