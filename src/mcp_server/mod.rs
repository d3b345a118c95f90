//! `kin mcp`: kin as an MCP server, so a parent agent that speaks MCP (Claude Code, Codex CLI,
//! gemini-cli, ...) can delegate to it. A front end beside `acp/` and `headless/`: it opens
//! and runs ordinary top-level sessions through [`Runtime`], marked `startedOver: "mcp"`.
//! Served on stdin/stdout, or as streamable HTTP on a loopback address (`--listen`) or a Unix
//! socket (`--socket`), where every request needs the server's bearer token.
//! The wire contract is `protocol/mcp-server.md`.

mod ask;
mod body;
mod clients;
mod cwd;
mod gate;
mod handler;
mod isolation;
mod listen;
mod logged;
mod outcome;
mod peer;
mod progress;
mod sessions;
mod token;
mod tools;

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::ServiceExt;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::runtime::Runtime;
use crate::tools::PermissionMode;
use cwd::CwdPolicy;
use gate::Gate;
use handler::KinServer;
pub use listen::ListenOptions;
use sessions::Sessions;
use token::Token;
pub use token::TokenError;

/// Settings of `kin mcp`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The widest mode a call may ask for (a call's `mode` can only narrow it).
    pub ceiling: PermissionMode,
    /// The working directory of sessions whose call names none.
    pub cwd: PathBuf,
}

/// Why `kin mcp` could not serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The MCP handshake on stdin/stdout failed.
    #[error("the MCP client did not complete initialization: {0}")]
    Handshake(String),
    /// `--listen` (or `--socket`) could not bind its address.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address (or socket path) asked for.
        addr: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The bearer token could not be read or made.
    #[error(transparent)]
    Token(#[from] TokenError),
}

/// Serves MCP on stdin/stdout until the client hangs up or `shutdown` trips; then every
/// task the server started is cancelled and has settled.
pub async fn serve_stdio(
    runtime: Arc<Runtime>,
    options: ServeOptions,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    serve_io(
        runtime,
        options,
        tokio::io::stdin(),
        tokio::io::stdout(),
        shutdown,
    )
    .await
}

/// [`serve_stdio`] on any pair of pipes (benches serve an in-process client this way).
pub async fn serve_io<R, W>(
    runtime: Arc<Runtime>,
    options: ServeOptions,
    read: R,
    write: W,
    shutdown: CancellationToken,
) -> Result<(), ServeError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let policy = CwdPolicy::default().within(runtime.sandbox().ceiling());
    let sessions = Sessions::new(runtime.clone(), options.ceiling, options.cwd);
    let sessions = Arc::new(sessions.with_cwd_policy(policy));
    let served = KinServer::new(sessions.clone()).serve((read, write)).await;
    let result = match served {
        Ok(running) => {
            let stop = running.cancellation_token();
            tokio::select! {
                _ = running.waiting() => {}
                () = shutdown.cancelled() => stop.cancel(),
            }
            Ok(())
        }
        Err(error) => Err(ServeError::Handshake(error.to_string())),
    };
    sessions.finish().await;
    runtime.shutdown().await;
    result
}

/// Serves MCP as streamable HTTP (path `/mcp`) where `listen` says, until `shutdown` trips.
/// Every request needs the bearer token; where it is and where the server listens are
/// printed on stderr (`kin: serving MCP on http://ADDR/mcp` first, so port 0 works).
pub async fn serve_http(
    runtime: Arc<Runtime>,
    options: ServeOptions,
    listen: ListenOptions,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    listen::raise_file_limit();
    let token = match &listen.token_file {
        Some(path) => Token::load(path, false)?,
        None => Token::load(&crate::config::kin_home().join(token::FILE_NAME), true)?,
    };
    let listeners = listen::bind(&listen).await?;
    eprintln!(
        "kin: the bearer token is in {} (send `Authorization: Bearer <token>`)",
        token.path().display()
    );
    let policy = if listen.allow_broad_cwd {
        CwdPolicy::default()
    } else {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        CwdPolicy::refusing_broad(home)
    };
    let policy = policy.within(runtime.sandbox().ceiling());
    let sessions = Sessions::new(runtime.clone(), options.ceiling, options.cwd);
    let sessions = Arc::new(sessions.with_cwd_policy(policy));
    let manager = Arc::new(LocalSessionManager::default());
    let addrs: Vec<String> = listeners.iter().map(|(_, addr)| addr.clone()).collect();
    let gate = Arc::new(Gate {
        token,
        service: listen::service(sessions.clone(), manager.clone(), &addrs, &shutdown),
        manager,
    });
    let slots = Arc::new(Semaphore::new(listen::MAX_CONNECTIONS));
    let connections = TaskTracker::new();
    let loops: Vec<_> = listeners
        .into_iter()
        .map(|(listener, _)| {
            let accepting = listen::accept_loop(
                listener,
                gate.clone(),
                slots.clone(),
                connections.clone(),
                shutdown.clone(),
            );
            tokio::spawn(accepting)
        })
        .collect();
    for accepting in loops {
        let _ = accepting.await;
    }
    connections.close();
    connections.wait().await;
    if let Some(path) = &listen.socket {
        let _ = std::fs::remove_file(path);
    }
    sessions.finish().await;
    runtime.shutdown().await;
    Ok(())
}
