//! The `[delegation]` table: the limits every delegated child and delegation tree runs under
//! unless an agent definition or a call says otherwise.

use std::time::Duration;

use serde::Deserialize;

use super::duration::{duration_value, DurationValue};

/// The concurrency caps kin applies when the config file says nothing.
pub const DEFAULT_MAX_RUNNING: usize = 8;
/// Background activations running at once per process, by default.
pub const DEFAULT_MAX_RUNNING_PER_PROCESS: usize = 64;

/// `[delegation]` as written (checked as it is read).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DelegationEntry {
    pub(crate) timeout: Option<DurationValue>,
    pub(crate) idle_timeout: Option<DurationValue>,
    pub(crate) max_running: Option<usize>,
    pub(crate) max_running_per_process: Option<usize>,
    pub(crate) budget_tokens: Option<u64>,
    pub(crate) budget_cost: Option<f64>,
    pub(crate) child_budget_tokens: Option<u64>,
    pub(crate) child_budget_cost: Option<f64>,
}

/// The delegation limits in force; `None` is no limit.
#[derive(Debug, Clone, PartialEq)]
pub struct DelegationSettings {
    /// Wall-clock limit of one child activation.
    pub timeout: Option<Duration>,
    /// How long a child may go without model output or tool progress.
    pub idle_timeout: Option<Duration>,
    /// Background activations running at once per root session, and per process.
    pub max_running: usize,
    /// Background activations running at once in this process.
    pub max_running_per_process: usize,
    /// What one delegation tree (a root session and all its descendants) may spend.
    pub budget_tokens: Option<u64>,
    /// Cost the whole tree may spend.
    pub budget_cost: Option<f64>,
    /// What one child activation may spend.
    pub child_budget_tokens: Option<u64>,
    /// Cost one child activation may spend.
    pub child_budget_cost: Option<f64>,
}

impl Default for DelegationSettings {
    fn default() -> Self {
        Self {
            timeout: None,
            idle_timeout: None,
            max_running: DEFAULT_MAX_RUNNING,
            max_running_per_process: DEFAULT_MAX_RUNNING_PER_PROCESS,
            budget_tokens: None,
            budget_cost: None,
            child_budget_tokens: None,
            child_budget_cost: None,
        }
    }
}

impl DelegationSettings {
    /// The settings of a `[delegation]` table (defaults where it is silent). A cap of 0 is
    /// read as 1: a cap that runs nothing would queue every child forever.
    pub(crate) fn from_entry(entry: &DelegationEntry) -> Self {
        let duration =
            |value: &Option<DurationValue>| value.as_ref().and_then(|v| duration_value(v).ok());
        Self {
            timeout: duration(&entry.timeout),
            idle_timeout: duration(&entry.idle_timeout),
            max_running: entry.max_running.unwrap_or(DEFAULT_MAX_RUNNING).max(1),
            max_running_per_process: entry
                .max_running_per_process
                .unwrap_or(DEFAULT_MAX_RUNNING_PER_PROCESS)
                .max(1),
            budget_tokens: entry.budget_tokens,
            budget_cost: entry.budget_cost.filter(|c| c.is_finite() && *c >= 0.0),
            child_budget_tokens: entry.child_budget_tokens,
            child_budget_cost: entry
                .child_budget_cost
                .filter(|c| c.is_finite() && *c >= 0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_reads_with_units_and_defaults() {
        let entry: DelegationEntry = toml::from_str(
            "timeout = \"2m\"\nidle_timeout = 30\nmax_running = 0\nbudget_tokens = 1000",
        )
        .unwrap();
        let settings = DelegationSettings::from_entry(&entry);
        assert_eq!(settings.timeout, Some(Duration::from_secs(120)));
        assert_eq!(settings.idle_timeout, Some(Duration::from_secs(30)));
        assert_eq!(settings.max_running, 1);
        assert_eq!(
            settings.max_running_per_process,
            DEFAULT_MAX_RUNNING_PER_PROCESS
        );
        assert_eq!(settings.budget_tokens, Some(1000));
        assert!(toml::from_str::<DelegationEntry>("timeout = \"soon\"").is_err());
        assert!(toml::from_str::<DelegationEntry>("max_runing = 3").is_err());
    }
}
