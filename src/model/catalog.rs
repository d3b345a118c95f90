//! The models a process can serve, by id: each with what the agent needs to know about it
//! besides how to call it (context window, output cap, whether it takes images, prices). The
//! first is the default; `[models.<id>]` config tables add the others. Knows nothing of config
//! files or ACP.

use std::sync::Arc;

use super::Model;
use crate::session::Usage;

/// The id of the model the flat settings (flags, environment, top-level config keys) describe.
pub const DEFAULT_MODEL_ID: &str = "default";

/// Share of the context window at which a session is compacted unless configured otherwise.
pub const DEFAULT_COMPACT_AT: f64 = 0.8;

/// The output cap sent when none is configured and the model's own limit is unknown.
pub const DEFAULT_MAX_OUTPUT: u32 = 4096;

/// The output limits of the hosted models kin knows by name.
const KNOWN_OUTPUT_LIMITS: &[(&str, u32)] =
    &[("deepseek-chat", 8192), ("deepseek-reasoner", 65536)];

/// Prices per million tokens, in `currency`.
#[derive(Debug, Clone, PartialEq)]
pub struct Prices {
    /// Input tokens.
    pub input: f64,
    /// Input tokens served from the endpoint's cache (defaults to `input`).
    pub cached_input: f64,
    /// Output tokens.
    pub output: f64,
    /// The currency the prices are in (shown beside a cost).
    pub currency: String,
}

impl Prices {
    /// What one call's `usage` cost.
    pub(crate) fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cache_read_tokens.unwrap_or(0).min(usage.input_tokens);
        let fresh = usage.input_tokens - cached;
        (fresh as f64 * self.input
            + cached as f64 * self.cached_input
            + usage.output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// What is known about a model besides how to call it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelProfile {
    /// The id sessions and the editor name the model by.
    pub id: String,
    /// Shown in the editor's model selector.
    pub display_name: String,
    /// Tokens the model takes in one request; unknown: no usage updates, no compaction.
    pub context_window: Option<u64>,
    /// Output-token cap of each call.
    pub max_output: Option<u32>,
    /// Whether prompts may carry images to this model.
    pub images: bool,
    /// Prices per token, when known (for cost budgets and usage).
    pub prices: Option<Prices>,
}

/// One servable model.
#[derive(Clone)]
pub struct ModelChoice {
    /// What is known about the model.
    pub profile: ModelProfile,
    /// The model to call.
    pub model: Arc<dyn Model>,
}

impl ModelChoice {
    /// The output cap of each call and what sets it: `max_output` when configured, else the
    /// model's known limit, else [`DEFAULT_MAX_OUTPUT`] (at most a quarter of a known window,
    /// so a small local window keeps room for the prompt).
    pub fn output_cap(&self, window: Option<u64>) -> (u32, &'static str) {
        if let Some(max) = self.profile.max_output {
            return (max, "the configured `max_output`");
        }
        let name = self.model.name();
        if let Some((_, limit)) = KNOWN_OUTPUT_LIMITS.iter().find(|(n, _)| *n == name) {
            return (
                *limit,
                "the model's own limit; `max_output` in kin's config sets another",
            );
        }
        let quarter = window.map_or(u32::MAX, |w| u32::try_from(w / 4).unwrap_or(u32::MAX));
        (
            DEFAULT_MAX_OUTPUT.min(quarter).max(256),
            "kin's default; `max_output` in kin's config raises it",
        )
    }
}

/// The models of this process; never empty (the default is first).
#[derive(Clone)]
pub struct ModelCatalog {
    choices: Vec<ModelChoice>,
    /// Share of the context window at which sessions are compacted.
    compact_at: f64,
}

/// A model id the catalog does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown model {id:?}; the configured models are {}", .known.join(", "))]
pub struct UnknownModel {
    pub(crate) id: String,
    pub(crate) known: Vec<String>,
}

impl std::fmt::Debug for ModelCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelCatalog")
            .field("ids", &self.ids())
            .field("compact_at", &self.compact_at)
            .finish()
    }
}

impl ModelCatalog {
    /// Only `model`, with nothing known about it (replay, tests).
    pub fn single(model: Arc<dyn Model>) -> Self {
        let profile = ModelProfile {
            id: DEFAULT_MODEL_ID.into(),
            display_name: model.name(),
            ..ModelProfile::default()
        };
        Self::new(
            ModelChoice { profile, model },
            Vec::new(),
            DEFAULT_COMPACT_AT,
        )
    }

    /// The default model first, then `others` (an id given twice keeps its first entry).
    pub fn new(default: ModelChoice, others: Vec<ModelChoice>, compact_at: f64) -> Self {
        let mut choices = vec![default];
        for choice in others {
            if !choices.iter().any(|c| c.profile.id == choice.profile.id) {
                choices.push(choice);
            }
        }
        Self {
            choices,
            compact_at,
        }
    }

    /// The default model (the first).
    pub fn default_choice(&self) -> &ModelChoice {
        &self.choices[0]
    }

    pub(crate) fn choices(&self) -> &[ModelChoice] {
        &self.choices
    }

    pub(crate) fn get(&self, id: &str) -> Option<&ModelChoice> {
        self.choices.iter().find(|choice| choice.profile.id == id)
    }

    /// The choice `id` names, or why there is none (a message listing the known ids).
    pub(crate) fn lookup(&self, id: &str) -> Result<&ModelChoice, UnknownModel> {
        self.get(id).ok_or_else(|| UnknownModel {
            id: id.to_owned(),
            known: self.ids(),
        })
    }

    /// The choice `id` names, else the default.
    pub(crate) fn get_or_default(&self, id: Option<&str>) -> &ModelChoice {
        id.and_then(|id| self.get(id))
            .unwrap_or_else(|| self.default_choice())
    }

    pub(crate) fn ids(&self) -> Vec<String> {
        self.choices.iter().map(|c| c.profile.id.clone()).collect()
    }

    /// Whether prompts to model `id` may carry images (unknown ids: no).
    pub(crate) fn accepts_images(&self, id: &str) -> bool {
        self.get(id).is_some_and(|choice| choice.profile.images)
    }

    pub(crate) fn compact_at(&self) -> f64 {
        self.compact_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ReplayModel;

    fn usage(input: u64, cached: Option<u64>, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: cached,
            ..Usage::default()
        }
    }

    #[test]
    fn cost_prices_cached_input_apart() {
        let prices = Prices {
            input: 2.0,
            cached_input: 0.5,
            output: 8.0,
            currency: "USD".into(),
        };
        let cost = prices.cost(&usage(1_000_000, Some(400_000), 250_000));
        assert!((cost - (1.2 + 0.2 + 2.0)).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn unknown_ids_list_the_known_ones() {
        let model: Arc<dyn Model> = Arc::new(ReplayModel::from_logs(&[]));
        let mut cheap = ModelCatalog::single(model.clone()).default_choice().clone();
        cheap.profile.id = "cheap".into();
        cheap.profile.images = true;
        let catalog = ModelCatalog::new(
            ModelCatalog::single(model).default_choice().clone(),
            vec![cheap],
            0.8,
        );
        let error = catalog.lookup("big").err().unwrap().to_string();
        assert_eq!(
            error,
            "unknown model \"big\"; the configured models are default, cheap"
        );
        assert!(catalog.accepts_images("cheap"));
        assert!(!catalog.accepts_images("default"));
    }
}
