//! The log's records of a session's model and context: which configured model it runs on
//! (`model/set`), what its turns used and cost (`turn/end`'s `usage`), and the compactions
//! that replaced the start of its conversation with a summary (`compaction/start`, `/end`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The session switched to configured model `model` (an id); it runs there from its next
/// model call. The last one in the log is the session's model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSet {
    pub(crate) model: String,
    /// Who switched it, e.g. `{"kind":"client"}`.
    pub(crate) source: Value,
}

/// What a turn used: the sums of its model calls, and their cost (with the costs of the
/// children that settled during it) when prices are configured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TurnUsage {
    pub(crate) input_tokens: u64,
    pub(crate) output_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cache_read_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cost: Option<f64>,
    /// Tokens of the calls whose endpoint reported no usage, estimated from their text: they
    /// count against budgets as reported ones do, also once the session is reopened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) estimated_tokens: Option<u64>,
}

impl TurnUsage {
    /// Every token the turn counts against budgets: reported and estimated.
    pub(crate) fn tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.estimated_tokens.unwrap_or(0))
    }
}

/// Why a compaction ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum CompactionTrigger {
    /// The next request would pass the configured share of the context window.
    Threshold,
    /// The endpoint answered that the request is too long.
    Overflow,
    /// Asked for (`/compact`).
    Request,
}

/// A compaction began: the conversation through turn `throughTurn` is being summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionStart {
    pub(crate) compaction_id: String,
    pub(crate) through_turn: u32,
    pub(crate) trigger: CompactionTrigger,
    /// Within the running turn: its steps 1..=`throughStep` are summarised too (the turn's
    /// prompt and its later steps are kept), so one long turn can go on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) through_step: Option<u32>,
}

/// A compaction ended: with `summary`, which replaces the summarised part of the conversation
/// in later requests; or with `error`, and the conversation stays as it was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionEnd {
    pub(crate) compaction_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<super::Usage>,
    /// The call's tokens estimated from its text, when the endpoint reported no usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) estimated_tokens: Option<u64>,
}

impl CompactionEnd {
    /// The tokens the compaction's call counts against budgets: reported, else estimated.
    pub(crate) fn tokens(&self) -> u64 {
        match &self.usage {
            Some(usage) => usage.input_tokens.saturating_add(usage.output_tokens),
            None => self.estimated_tokens.unwrap_or(0),
        }
    }
}
