//! The MCP servers of one session: started together in the background when it opens, waited
//! for (up to a startup timeout) by its first prompt, their tools offered as one registry that
//! is rebuilt only when a server's tools change, and stopped with the session. In-process
//! children hold the same [`SessionServers`] (no server process per child).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::naming::Names;
use super::server::{Server, State};
use super::spec::ServerSpec;
use super::tool::McpTool;
use crate::sync::lock;
use crate::tools::ToolRegistry;

/// How long a prompt waits for tool lists a server said had changed.
const RELIST_WAIT: Duration = Duration::from_secs(5);

/// How long the first prompt waits for servers still starting, unless configured.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The MCP servers of one session: started in the background, their tools offered once they are up, stopped with the session.
pub struct SessionServers {
    specs: Vec<ServerSpec>,
    servers: Vec<Arc<Server>>,
    cancel: CancellationToken,
    startup_timeout: Duration,
    waited: AtomicBool,
    /// The registry last built, and the server generations it was built from.
    cache: Mutex<(Vec<u64>, Arc<ToolRegistry>)>,
}

impl SessionServers {
    /// Starts every server in the background; returns at once.
    pub fn start(specs: Vec<ServerSpec>, cwd: PathBuf, startup_timeout: Duration) -> Arc<Self> {
        let cancel = CancellationToken::new();
        let servers = specs
            .iter()
            .map(|spec| Server::start(spec.clone(), cwd.clone(), cancel.child_token()))
            .collect();
        Arc::new(Self {
            specs,
            servers,
            cancel,
            startup_timeout,
            waited: AtomicBool::new(false),
            cache: Mutex::new((vec![u64::MAX], Arc::new(ToolRegistry::new()))),
        })
    }

    pub(crate) fn specs(&self) -> &[ServerSpec] {
        &self.specs
    }

    /// On the first call: waits until every server has started or failed, at most the
    /// startup timeout; returns a line for each server not ready (`name: why`). Later calls
    /// wait only for tool lists being read (after a server said they changed, or by a server
    /// just reconnected; a few seconds at most), so the prompt's model sees them, and return
    /// nothing.
    pub async fn wait_started(&self) -> Vec<String> {
        if self.waited.swap(true, Ordering::SeqCst) {
            let relisted = futures::future::join_all(self.servers.iter().map(|s| s.relisted()));
            let _ = tokio::time::timeout(RELIST_WAIT, relisted).await;
            return Vec::new();
        }
        let all = futures::future::join_all(self.servers.iter().map(|s| s.started()));
        let _ = tokio::time::timeout(self.startup_timeout, all).await;
        self.servers
            .iter()
            .filter_map(|server| {
                let why = match server.state() {
                    State::Ready(_) => return None,
                    State::Starting => format!(
                        "it did not start within {} s; kin goes on without it",
                        self.startup_timeout.as_secs_f64()
                    ),
                    State::Down { reason, .. } | State::Refused { reason } => reason,
                };
                Some(format!(
                    "MCP server `{}` is not available: {why}",
                    server.name
                ))
            })
            .collect()
    }

    /// The tools of every server as last listed (a server that is down keeps its tools; their
    /// calls answer an error naming it). Rebuilt only when some server's list changed.
    pub fn registry(&self) -> Arc<ToolRegistry> {
        let listed: Vec<_> = self.servers.iter().map(|s| s.listed()).collect();
        let generations: Vec<u64> = listed.iter().map(|l| l.generation).collect();
        let mut cache = lock(&self.cache);
        if cache.0 == generations {
            return cache.1.clone();
        }
        let mut names = Names::default();
        let mut registry = ToolRegistry::new();
        for (server, listed) in self.servers.iter().zip(&listed) {
            for tool in listed.tools.iter() {
                let name = names.assign(&server.name, &tool.name);
                registry.register(Arc::new(McpTool::new(server.clone(), name, tool)));
            }
        }
        *cache = (generations, Arc::new(registry));
        cache.1.clone()
    }

    /// Stops every server and waits until their processes are gone.
    pub async fn stop(&self) {
        self.cancel.cancel();
        futures::future::join_all(self.servers.iter().map(|s| s.stopped())).await;
    }
}

impl Drop for SessionServers {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
