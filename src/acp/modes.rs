//! The permission mode as the editor sees it: ACP session modes (`modes`, `session/set_mode`,
//! `current_mode_update`) and, kept in step with them, a `mode` select config option
//! (`configOptions`, `session/set_config_option`; `config_option_update` is sent through
//! `models`, which adds the model option).

use agent_client_protocol_schema::v1::{
    CurrentModeUpdate, SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
    SessionMode, SessionModeState, SessionUpdate,
};

use crate::tools::PermissionMode;

/// The id of the config option that holds the permission mode.
pub(crate) const MODE_OPTION: &str = "mode";

pub(crate) fn mode_state(current: PermissionMode) -> SessionModeState {
    let modes = PermissionMode::ALL
        .iter()
        .map(|mode| {
            SessionMode::new(mode.id(), mode.name()).description(mode.description().to_owned())
        })
        .collect();
    SessionModeState::new(current.id(), modes)
}

pub(crate) fn config_options(current: PermissionMode) -> Vec<SessionConfigOption> {
    let options: Vec<SessionConfigSelectOption> = PermissionMode::ALL
        .iter()
        .map(|mode| {
            SessionConfigSelectOption::new(mode.id(), mode.name())
                .description(mode.description().to_owned())
        })
        .collect();
    vec![
        SessionConfigOption::select(MODE_OPTION, "Permissions", current.id(), options)
            .description("When kin asks before editing files and running commands".to_owned())
            .category(SessionConfigOptionCategory::Mode),
    ]
}

pub(crate) fn current_mode_update(current: PermissionMode) -> SessionUpdate {
    SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(current.id()))
}
