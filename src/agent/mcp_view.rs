//! The MCP servers an agent offers tools from: its session's own, or, for an in-process child,
//! its parent's (the same connections), narrowed by the child's tool filter. Set when the
//! session opens (and again on load or resume), read at every model call, so a server's
//! changed tool list is offered from the next step on.

use std::sync::Arc;

use super::Agent;
use crate::mcp::SessionServers;
use crate::sync::{read_lock, write_lock};
use crate::tools::ToolRegistry;

/// Which of the servers' tools an agent may call, given the tool's model-facing name and its
/// server's name as that name carries it.
pub(crate) type ToolKeep = Arc<dyn Fn(&str, Option<&str>) -> bool + Send + Sync>;

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
    /// definition's `tools`, see [`granted`]). Once, before its servers start.
    pub(crate) fn limit_mcp_tools(&self, allow: Vec<String>) {
        if self.mcp_allow.set(allow).is_err() {
            tracing::debug!(session = %self.id, "MCP tools already limited");
        }
    }

    /// What the session's own MCP servers may offer: `None` is every tool.
    pub(crate) fn own_mcp_keep(&self) -> Option<ToolKeep> {
        let allow = self.mcp_allow.get()?.clone();
        Some(Arc::new(move |name: &str, server: Option<&str>| {
            granted(&allow, name, server)
        }))
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
                let servers: Vec<String> = view
                    .servers
                    .specs()
                    .iter()
                    .map(|spec| crate::mcp::sanitize(&spec.name))
                    .collect();
                let mut kept = (*registry).clone();
                kept.retain(|name| keep(name, server_of(name, &servers)));
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
        let keep: ToolKeep = Arc::new(move |name: &str, server: Option<&str>| {
            inherited.as_ref().is_none_or(|keep| keep(name, server))
                && allow.as_ref().is_none_or(|a| granted(a, name, server))
                && deny.as_ref().is_none_or(|d| !granted(d, name, server))
        });
        Some(Self {
            servers: view.servers,
            keep: Some(keep),
            owned: false,
        })
    }
}

/// The server of the MCP tool `name` among `servers` (model-facing names): the longest one
/// its name starts with, since `mcp__git__admin__x` is a tool of `git__admin` when there is
/// such a server.
fn server_of<'a>(name: &str, servers: &'a [String]) -> Option<&'a str> {
    let rest = name.strip_prefix(crate::mcp::MCP_PREFIX)?;
    servers
        .iter()
        .filter(|server| {
            rest.strip_prefix(server.as_str())
                .is_some_and(|tool| tool.starts_with("__"))
        })
        .max_by_key(|server| server.len())
        .map(String::as_str)
}

/// Whether a tool list (an agent definition's `tools`) grants the MCP tool `name` of
/// `server`: by its exact name, or by `mcp__<server>` naming exactly its server, never a
/// server whose name merely starts the same (`mcp__git` does not grant `git__admin`'s tools).
fn granted(entries: &[String], name: &str, server: Option<&str>) -> bool {
    crate::mcp::listed(entries, name)
        && entries.iter().any(|entry| {
            entry == name
                || server.is_some_and(|server| {
                    entry.strip_prefix(crate::mcp::MCP_PREFIX) == Some(server)
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_grant_is_exact_on_the_server_name() {
        let servers = vec!["git".to_owned(), "git__admin".to_owned()];
        let grant = vec!["mcp__git".to_owned()];
        let admin_tool = "mcp__git__admin__status";
        assert_eq!(server_of(admin_tool, &servers), Some("git__admin"));
        assert!(!granted(
            &grant,
            admin_tool,
            server_of(admin_tool, &servers)
        ));
        let git_tool = "mcp__git__status";
        assert!(granted(&grant, git_tool, server_of(git_tool, &servers)));
        // By its exact name, any tool can be granted.
        let exact = vec![admin_tool.to_owned()];
        assert!(granted(&exact, admin_tool, server_of(admin_tool, &servers)));
    }
}
