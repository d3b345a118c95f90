//! Models besides the default: the config file's `[models.<id>]` tables, and what kin knows of
//! each model (context window, output cap, images, prices), the default's from top-level keys.
//! An entry names its endpoint model and, optionally, its own base URL and key source; what it
//! leaves out comes from the default model's settings.

use std::path::{Path, PathBuf};

use super::file::{ModelEntry, ProfileEntry};
use super::key::KeyPlan;
use super::{ConfigError, EnvLookup};
use crate::model::openai::ApiKey;
use crate::model::{ModelProfile, Prices};

/// What a `[models.<id>]` table changes of the default model's settings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EntrySettings {
    pub(crate) profile: ModelProfile,
    /// The endpoint's model name.
    pub(crate) model: String,
    pub(crate) base_url: Option<String>,
    /// The table's own key source, if it names one.
    pub(crate) key: Option<KeyPlan>,
}

fn invalid(origin: &str, reason: String) -> ConfigError {
    ConfigError::Invalid {
        origin: origin.to_owned(),
        reason,
    }
}

/// The profile `entry` describes for model `id`.
pub(crate) fn profile(
    id: &str,
    display_name: &str,
    entry: &ProfileEntry,
    origin: &str,
) -> Result<ModelProfile, ConfigError> {
    if entry.context_window == Some(0) {
        return Err(invalid(origin, "context_window must be above 0".into()));
    }
    let prices = match (entry.input_price, entry.output_price) {
        (None, None) if entry.cached_input_price.is_none() => None,
        (Some(input), Some(output)) => {
            let cached_input = entry.cached_input_price.unwrap_or(input);
            if [input, output, cached_input]
                .iter()
                .any(|p| !p.is_finite() || *p < 0.0)
            {
                return Err(invalid(origin, "prices must be 0 or more".into()));
            }
            Some(Prices {
                input,
                cached_input,
                output,
                currency: entry.currency.clone().unwrap_or_else(|| "USD".into()),
            })
        }
        _ => {
            return Err(invalid(
                origin,
                "give both input_price and output_price (per million tokens), or neither".into(),
            ))
        }
    };
    Ok(ModelProfile {
        id: id.to_owned(),
        display_name: display_name.to_owned(),
        context_window: entry.context_window,
        max_output: entry.max_output,
        images: entry.images.unwrap_or(false),
        prices,
    })
}

/// The share of the window at which to compact, checked.
pub(crate) fn compact_at(value: Option<f64>, path: Option<&Path>) -> Result<f64, ConfigError> {
    match value {
        None => Ok(crate::model::DEFAULT_COMPACT_AT),
        Some(share) if share > 0.0 && share <= 1.0 => Ok(share),
        Some(share) => Err(invalid(
            &origin_in(path, "compact_at"),
            format!("{share} is not a share of the context window (0 < compact_at <= 1)"),
        )),
    }
}

fn origin_in(path: Option<&Path>, key: &str) -> String {
    match path {
        Some(path) => format!("{key} in config file {}", path.display()),
        None => key.to_owned(),
    }
}

/// The `[models.<id>]` tables of the file at `path`.
pub(crate) fn entries(
    entries: &std::collections::BTreeMap<String, ModelEntry>,
    path: Option<&PathBuf>,
    env: EnvLookup<'_>,
) -> Result<Vec<EntrySettings>, ConfigError> {
    let mut models = Vec::new();
    for (id, entry) in entries {
        let origin = origin_in(path.map(PathBuf::as_path), &format!("[models.{id}]"));
        if id == crate::model::DEFAULT_MODEL_ID || id.is_empty() {
            return Err(invalid(
                &origin,
                format!("the id {id:?} is taken by the default model; choose another"),
            ));
        }
        let name = entry.name.clone().unwrap_or_else(|| id.clone());
        models.push(EntrySettings {
            profile: profile(id, &name, &entry.profile_entry(), &origin)?,
            model: entry.model.clone().unwrap_or_else(|| id.clone()),
            base_url: entry.base_url.clone(),
            key: key_plan(entry, &origin, env),
        });
    }
    Ok(models)
}

/// The entry's own key source, if it names one.
fn key_plan(entry: &ModelEntry, origin: &str, env: EnvLookup<'_>) -> Option<KeyPlan> {
    if let Some(command) = &entry.api_key_command {
        return Some(KeyPlan::Command {
            command: command.clone(),
            source: format!("api_key_command of {origin}"),
        });
    }
    if let Some(name) = &entry.api_key_env {
        return Some(match env(name) {
            Some(value) => KeyPlan::Found(ApiKey::new(value, name.clone())),
            None => KeyPlan::Missing {
                hint: format!("api_key_env of {origin} names {name}, which is not set"),
            },
        });
    }
    entry
        .api_key
        .as_ref()
        .filter(|key| !key.is_empty())
        .map(|key| KeyPlan::Found(ApiKey::new(key.clone(), format!("api_key of {origin}"))))
}
