//! The MCP servers of one session: started together in the background when it opens, waited
//! for (up to a startup timeout) by its first prompt, their tools offered as one registry that
//! is rebuilt only when a server's tools change (at most `mcp_max_tools` of them), and stopped
//! with the session. In-process children hold the same [`SessionServers`] (no server process
//! per child).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::naming::Names;
use super::server::{Server, State};
use super::spec::ServerSpec;
use super::stdio::StdioStart;
use super::tool::McpTool;
use crate::process::child_env::ChildEnv;
use crate::sync::lock;
use crate::tools::client::ClientBridge;
use crate::tools::ToolRegistry;

/// How long a prompt waits for tool lists a server said had changed.
const RELIST_WAIT: Duration = Duration::from_secs(5);

/// How long the first prompt waits for servers still starting, unless configured.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The most MCP tools offered to the model, unless configured: model APIs take about 128
/// tools in all, and every tool's schema is sent with every request.
pub const DEFAULT_MAX_TOOLS: usize = 100;
/// How many of the tools left out a notice names.
const NAMED: usize = 5;

/// The MCP servers of one session: started in the background, their tools offered once they are up, stopped with the session.
pub struct SessionServers {
    specs: Vec<ServerSpec>,
    servers: Vec<Arc<Server>>,
    cancel: CancellationToken,
    startup_timeout: Duration,
    waited: AtomicBool,
    max_tools: usize,
    /// The registry last built, the server generations it was built from, and what it left
    /// out (see [`SessionServers::registry`]).
    cache: Mutex<Built>,
    /// The notices given already (each is given once).
    told: Mutex<HashSet<String>>,
}

struct Built {
    generations: Vec<u64>,
    registry: Arc<ToolRegistry>,
    left_out: Option<String>,
}

impl SessionServers {
    /// Starts every server in the background; returns at once. `client` (the session's editor
    /// or terminal) is told at once when a server waits for a login. Stdio servers start in
    /// `cwd`, in the environment `env` scrubs.
    pub fn start(
        specs: Vec<ServerSpec>,
        cwd: PathBuf,
        startup_timeout: Duration,
        max_tools: usize,
        env: ChildEnv,
        client: Option<Arc<dyn ClientBridge>>,
    ) -> Arc<Self> {
        let start = StdioStart { cwd, env };
        let cancel = CancellationToken::new();
        let servers = specs
            .iter()
            .map(|spec| {
                let cancel = cancel.child_token();
                Server::start(spec.clone(), start.clone(), cancel, client.clone())
            })
            .collect();
        Arc::new(Self {
            specs,
            servers,
            cancel,
            startup_timeout,
            waited: AtomicBool::new(false),
            max_tools,
            cache: Mutex::new(Built {
                generations: vec![u64::MAX],
                registry: Arc::new(ToolRegistry::new()),
                left_out: None,
            }),
            told: Mutex::default(),
        })
    }

    pub(crate) fn specs(&self) -> &[ServerSpec] {
        &self.specs
    }

    /// On the first call: waits until every server has started or failed, at most the
    /// startup timeout; returns a line for each server not ready (`name: why`). Later calls
    /// wait only for tool lists being read (after a server said they changed, or by a server
    /// just reconnected; a few seconds at most), so the prompt's model sees them. Every call
    /// also returns, once each, the servers kin has stopped using since (refused credentials,
    /// a tool listing past its bounds) and the tools left out over `mcp_max_tools`.
    pub async fn wait_started(&self) -> Vec<String> {
        let first = !self.waited.swap(true, Ordering::SeqCst);
        if first {
            let all = futures::future::join_all(self.servers.iter().map(|s| s.started()));
            let _ = tokio::time::timeout(self.startup_timeout, all).await;
        } else {
            let relisted = futures::future::join_all(self.servers.iter().map(|s| s.relisted()));
            let _ = tokio::time::timeout(RELIST_WAIT, relisted).await;
        }
        // A server still waiting for a login someone finished elsewhere connects with it now.
        let elsewhere = self.servers.iter().map(|s| s.take_login_from_elsewhere());
        let elsewhere = futures::future::join_all(elsewhere);
        let _ = tokio::time::timeout(self.startup_timeout, elsewhere).await;
        let mut lines = Vec::new();
        let mut told = lock(&self.told);
        for server in &self.servers {
            let why = match server.state() {
                State::Ready(_) => continue,
                State::Starting if first => format!(
                    "it did not start within {} s; kin goes on without it",
                    self.startup_timeout.as_secs_f64()
                ),
                State::Down { reason, .. } if first => reason,
                State::Starting | State::Down { .. } => continue,
                State::Refused { reason } => reason,
                State::Login { address } => format!(
                    "it needs a login: open {address} to log in (or run `kin mcp login {}`); \
                     kin connects once it is done",
                    server.name
                ),
            };
            let line = format!("MCP server `{}` is not available: {why}", server.name);
            if told.insert(line.clone()) {
                lines.push(line);
            }
        }
        drop(told);
        self.registry();
        let left_out = lock(&self.cache).left_out.clone();
        if let Some(line) = left_out.filter(|line| lock(&self.told).insert(line.clone())) {
            lines.push(line);
        }
        lines
    }

    /// The tools of every server as last listed (a server that is down keeps its tools; their
    /// calls answer an error naming it), the first `mcp_max_tools` of them in server order.
    /// Rebuilt only when some server's list changed.
    pub fn registry(&self) -> Arc<ToolRegistry> {
        let listed: Vec<_> = self.servers.iter().map(|s| s.listed()).collect();
        let generations: Vec<u64> = listed.iter().map(|l| l.generation).collect();
        let mut cache = lock(&self.cache);
        if cache.generations == generations {
            return cache.registry.clone();
        }
        let mut names = Names::default();
        let mut registry = ToolRegistry::new();
        let mut offered = 0;
        let mut left_out: Vec<(&str, usize, Vec<String>)> = Vec::new();
        for (server, listed) in self.servers.iter().zip(&listed) {
            for tool in listed.tools.iter() {
                if offered == self.max_tools {
                    match left_out
                        .last_mut()
                        .filter(|(name, _, _)| *name == server.name)
                    {
                        Some((_, count, named)) => {
                            *count += 1;
                            if named.len() < NAMED {
                                named.push(tool.name.to_string());
                            }
                        }
                        None => left_out.push((&server.name, 1, vec![tool.name.to_string()])),
                    }
                    continue;
                }
                offered += 1;
                let name = names.assign(&server.name, &tool.name);
                registry.register(Arc::new(McpTool::new(server.clone(), name, tool)));
            }
        }
        *cache = Built {
            generations,
            registry: Arc::new(registry),
            left_out: left_out_notice(self.max_tools, &left_out),
        };
        cache.registry.clone()
    }

    /// Stops every server and waits until their processes are gone.
    pub async fn stop(&self) {
        self.cancel.cancel();
        futures::future::join_all(self.servers.iter().map(|s| s.stopped())).await;
    }
}

/// The notice naming the tools over the cap, by server.
fn left_out_notice(max: usize, left_out: &[(&str, usize, Vec<String>)]) -> Option<String> {
    if left_out.is_empty() {
        return None;
    }
    let servers: Vec<String> = left_out
        .iter()
        .map(|(server, count, named)| {
            let more = if *count > named.len() { ", ..." } else { "" };
            format!("`{server}`: {count} ({}{more})", named.join(", "))
        })
        .collect();
    Some(format!(
        "the model is offered at most {max} MCP tools (`mcp_max_tools` in the config file); \
         left out: {}",
        servers.join("; ")
    ))
}

impl Drop for SessionServers {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
