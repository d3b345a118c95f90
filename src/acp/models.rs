//! The session's model and context as the editor sees them: the `model` select config option
//! (`category: "model"`) over the configured models, `usage_update` after each model call,
//! and a compaction's `compaction_update` / `compaction_summary_chunk` updates.

use agent_client_protocol_schema::v1::{
    CompactionStatus, CompactionSummaryChunk, CompactionUpdate, ConfigOptionUpdate, ContentBlock,
    Cost, SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption,
    SessionUpdate, SetSessionConfigOptionRequest, UsageUpdate,
};

use crate::agent::host::{AgentHost, SwitchModelError};
use crate::agent::Agent;
use crate::model::ModelCatalog;
use crate::rpc::RpcError;
use crate::session::{Event, EventBody};
use crate::tools::PermissionMode;

/// The id of the config option that holds the session's model.
pub(crate) const MODEL_OPTION: &str = "model";

/// The session's config options: the permission mode, and the model when there is a choice.
pub(crate) fn config_options(
    models: &ModelCatalog,
    mode: PermissionMode,
    model_id: &str,
) -> Vec<SessionConfigOption> {
    let mut options = super::modes::config_options(mode);
    if models.choices().len() > 1 {
        let choices: Vec<SessionConfigSelectOption> = models
            .choices()
            .iter()
            .map(|choice| {
                let profile = &choice.profile;
                SessionConfigSelectOption::new(profile.id.clone(), profile.display_name.clone())
                    .description(choice.model.name())
            })
            .collect();
        let current = models.get_or_default(Some(model_id)).profile.id.clone();
        options.push(
            SessionConfigOption::select(MODEL_OPTION, "Model", current, choices)
                .description("The model the session's next calls go to".to_owned())
                .category(SessionConfigOptionCategory::Model),
        );
    }
    options
}

/// [`config_options`] of a live session.
pub(crate) fn options_of(host: &AgentHost, agent: &Agent) -> Vec<SessionConfigOption> {
    config_options(
        host.models(),
        agent.permission_mode(),
        &host.model_id(agent),
    )
}

/// The `config_option_update` that shows a live session's options as they are now.
pub(crate) fn options_update(host: &AgentHost, agent: &Agent) -> SessionUpdate {
    SessionUpdate::ConfigOptionUpdate(ConfigOptionUpdate::new(options_of(host, agent)))
}

/// [`config_options`] of a stored session's `events` (opened read-only).
pub(crate) fn options_of_log(host: &AgentHost, events: &[Event]) -> Vec<SessionConfigOption> {
    let selected = crate::agent::SessionContext::restore(events).selected();
    let id = host
        .models()
        .get_or_default(selected.as_deref())
        .profile
        .id
        .clone();
    config_options(host.models(), crate::agent::restored_mode(events), &id)
}

/// `session/set_config_option` of `model`: switches the session from its next model call.
pub(crate) fn set_model(
    host: &AgentHost,
    agent: &Agent,
    req: &SetSessionConfigOptionRequest,
) -> Result<(), RpcError> {
    let value = req.value.as_value_id().ok_or_else(|| {
        RpcError::invalid_params(
            "invalid params: the `model` option takes a value id, not a boolean",
        )
    })?;
    host.switch_model(agent, &value.0)
        .map_err(|error| match error {
            SwitchModelError::Unknown(unknown) => {
                RpcError::invalid_params(format!("invalid params: {unknown}"))
            }
            SwitchModelError::Store(_) => RpcError::internal(error.to_string()),
        })
}

/// The `_meta` key of a root session's `usage_update` that holds its tree's budget.
pub(crate) const BUDGET_META_KEY: &str = "kin.budget";

/// The `usage_update` after a model call of `agent`: only for a model whose context window
/// is known, configured or reported by its server (the update needs its size). `budget` is its tree's spent, limit and
/// remaining (`_meta["kin.budget"]`), for a root session under a budget.
pub(crate) fn usage_update(
    models: &ModelCatalog,
    agent: &Agent,
    budget: Option<serde_json::Value>,
) -> Option<SessionUpdate> {
    let choice = agent
        .model_choice(models)
        .unwrap_or_else(|| models.default_choice());
    let size = agent.context.window(choice.profile.context_window)?;
    let usage = agent.context.usage();
    let mut update = UsageUpdate::new(usage.used, size);
    if let Some(prices) = &choice.profile.prices {
        update = update.cost(Cost::new(usage.cost, prices.currency.clone()));
    }
    if let Some(budget) = budget {
        update = update.meta(serde_json::Map::from_iter([(
            BUDGET_META_KEY.to_owned(),
            budget,
        )]));
    }
    Some(SessionUpdate::UsageUpdate(update))
}

/// The updates of a compaction event (live and on `session/load`).
pub(crate) fn compaction_updates(event: &Event) -> Vec<SessionUpdate> {
    match &event.body {
        EventBody::CompactionStart(start) => vec![SessionUpdate::CompactionUpdate(
            CompactionUpdate::new(start.compaction_id.clone(), CompactionStatus::InProgress),
        )],
        EventBody::CompactionEnd(end) => match (&end.summary, &end.error) {
            (Some(summary), _) => vec![
                SessionUpdate::CompactionSummaryChunk(CompactionSummaryChunk::new(
                    end.compaction_id.clone(),
                    ContentBlock::from(summary.clone()),
                )),
                SessionUpdate::CompactionUpdate(CompactionUpdate::new(
                    end.compaction_id.clone(),
                    CompactionStatus::Completed,
                )),
            ],
            (None, error) => {
                let mut update =
                    CompactionUpdate::new(end.compaction_id.clone(), CompactionStatus::Failed);
                if let Some(error) = error {
                    update = update.error(error.clone());
                }
                vec![SessionUpdate::CompactionUpdate(update)]
            }
        },
        _ => Vec::new(),
    }
}

/// Whether `update` belongs to a compaction (sent only to clients that advertised
/// `session.compaction`).
pub fn is_compaction(update: &SessionUpdate) -> bool {
    matches!(
        update,
        SessionUpdate::CompactionUpdate(_) | SessionUpdate::CompactionSummaryChunk(_)
    )
}
