//! The MCP servers an agent offers tools from: its session's own, or, for an in-process child,
//! its parent's (the same connections), narrowed by the child's tool filter. Set when the
//! session opens (and again on load or resume), read at every model call, so a server's
//! changed tool list is offered from the next step on.

use std::sync::Arc;

use super::Agent;
use crate::mcp::SessionServers;
use crate::sync::{read_lock, write_lock};
use crate::tools::ToolRegistry;

/// Which of the servers' tools an agent may call.
pub(crate) type ToolKeep = Arc<dyn Fn(&str) -> bool + Send + Sync>;

#[derive(Clone)]
pub(crate) struct McpView {
    pub(crate) servers: Arc<SessionServers>,
    /// `None`: every tool.
    pub(crate) keep: Option<ToolKeep>,
    /// Whether this agent's session owns the servers (a child's view borrows its parent's).
    pub(crate) owned: bool,
}

impl Agent {
    /// Makes `view` the agent's MCP servers; returns the servers it owned before, to stop
    /// (a child's borrowed view is never returned: the parent's servers are not its to stop).
    pub(crate) fn set_mcp(&self, view: Option<McpView>) -> Option<Arc<SessionServers>> {
        let mut slot = write_lock(&self.mcp);
        std::mem::replace(&mut *slot, view)
            .filter(|old| old.owned)
            .map(|old| old.servers)
    }

    pub(crate) fn mcp(&self) -> Option<McpView> {
        read_lock(&self.mcp).clone()
    }

    /// Limits the tools of the session's own MCP servers to those `allow` names (an agent
    /// definition's `tools`, see [`crate::mcp::listed`]). Once, before its servers start.
    pub(crate) fn limit_mcp_tools(&self, allow: Vec<String>) {
        if self.mcp_allow.set(allow).is_err() {
            tracing::debug!(session = %self.id, "MCP tools already limited");
        }
    }

    /// What the session's own MCP servers may offer: `None` is every tool.
    pub(crate) fn own_mcp_keep(&self) -> Option<ToolKeep> {
        let allow = self.mcp_allow.get()?.clone();
        Some(Arc::new(move |name: &str| crate::mcp::listed(&allow, name)))
    }

    /// The registry holding the tool `name`: the built-ins, else the MCP tools (a built-in
    /// keeps a name both have).
    pub(crate) fn tools_for(&self, name: &str) -> Arc<ToolRegistry> {
        match self.mcp_tools() {
            Some(mcp) if self.tools.get(name).is_none() && mcp.get(name).is_some() => mcp,
            _ => self.tools.clone(),
        }
    }

    /// The MCP tools this agent offers now (filtered for a child); `None` without servers.
    pub(crate) fn mcp_tools(&self) -> Option<Arc<ToolRegistry>> {
        let view = self.mcp()?;
        let registry = view.servers.registry();
        match view.keep {
            None => Some(registry),
            Some(keep) => {
                let mut kept = (*registry).clone();
                kept.retain(|name| keep(name));
                Some(Arc::new(kept))
            }
        }
    }
}

impl McpView {
    /// A delegated child's view: its parent's servers (the same connections), narrowed by the
    /// child's tool filter (`allow`: only these names; `deny`: never these; a server's prefix
    /// `mcp__<server>` names all its tools) on top of the parent's own narrowing.
    pub(crate) fn for_child(
        parent: &Agent,
        allow: Option<Vec<String>>,
        deny: Option<Vec<String>>,
    ) -> Option<Self> {
        let view = parent.mcp()?;
        let inherited = view.keep.clone();
        let keep: ToolKeep = Arc::new(move |name: &str| {
            inherited.as_ref().is_none_or(|keep| keep(name))
                && allow.as_ref().is_none_or(|a| crate::mcp::listed(a, name))
                && deny.as_ref().is_none_or(|d| !crate::mcp::listed(d, name))
        });
        Some(Self {
            servers: view.servers,
            keep: Some(keep),
            owned: false,
        })
    }
}
