//! What an agent definition makes of a top-level session (`kin mcp`'s `kin` tool with
//! `agent`): its persona, the tools it may use (kin's own and its MCP servers'), and the
//! widest permission mode its calls are decided under. Applied when the session is created
//! and again each time it is opened, so a restarted server does not lose it.

use std::sync::Arc;

use super::Agent;
use crate::tools::{PermissionMode, SessionPermissions, ToolRegistry};

/// How a top-level session is narrowed; the default narrows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SessionShape {
    /// Replaces kin's persona.
    pub(crate) persona: Option<String>,
    /// The only tools it may use: kin's by name, MCP tools as the model sees them
    /// (`mcp__server__tool`) or by server (`mcp__server`).
    pub(crate) tools: Option<Vec<String>>,
    /// Its calls are decided under at most this mode, whatever mode it is switched to.
    pub(crate) ceiling: Option<PermissionMode>,
}

impl SessionShape {
    /// `base` narrowed to the listed tools.
    pub(crate) fn registry(&self, base: &Arc<ToolRegistry>) -> Arc<ToolRegistry> {
        match &self.tools {
            None => base.clone(),
            Some(allowed) => {
                let mut narrowed = (**base).clone();
                narrowed.retain(|name| allowed.iter().any(|a| a == name));
                Arc::new(narrowed)
            }
        }
    }

    /// Puts on `agent` what it holds itself: the limit of its MCP tools and the ceiling of
    /// its permission mode (before it runs or its servers start).
    pub(crate) fn bind(&self, agent: &Agent) {
        if let Some(tools) = &self.tools {
            agent.limit_mcp_tools(tools.clone());
        }
        if let Some(ceiling) = self.ceiling {
            agent.cap_permissions(ceiling);
        }
    }
}

impl Agent {
    /// Decides this session's calls under at most `ceiling` from now on (once per session;
    /// a delegated child is bound to its parent instead).
    pub(crate) fn cap_permissions(&self, ceiling: PermissionMode) {
        let cap = Arc::new(SessionPermissions::new(ceiling));
        if !self.permissions().bind_to_parent(cap) {
            tracing::debug!(session = %self.id, "permissions already bound");
        }
    }
}
