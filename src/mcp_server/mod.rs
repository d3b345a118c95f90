//! `kin mcp`: kin as an MCP server, so a parent agent that speaks MCP (Claude Code, Codex CLI,
//! gemini-cli, ...) can delegate to it. A front end beside `acp/` and `headless/`: it opens
//! and runs ordinary top-level sessions through [`Runtime`], marked `startedOver: "mcp"`.
//! Served on stdin/stdout, or as streamable HTTP on a loopback address (`--listen`).
//! The wire contract is `protocol/mcp-server.md`.

mod ask;
mod handler;
mod isolation;
mod logged;
mod progress;
mod sessions;
mod tools;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::runtime::Runtime;
use crate::tools::PermissionMode;
use handler::KinServer;
use sessions::Sessions;

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
    /// `--listen` could not bind its address.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        source: std::io::Error,
    },
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
    let sessions = Arc::new(Sessions::new(runtime.clone(), options.ceiling, options.cwd));
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

/// Serves MCP as streamable HTTP on `addr` (path `/mcp`) until `shutdown` trips. The bound
/// address is printed on stderr (`kin: serving MCP on http://ADDR/mcp`), so port 0 works.
pub async fn serve_http(
    runtime: Arc<Runtime>,
    options: ServeOptions,
    addr: SocketAddr,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    let bound = listener.local_addr().unwrap_or(addr);
    eprintln!("kin: serving MCP on http://{bound}/mcp");
    let sessions = Arc::new(Sessions::new(runtime.clone(), options.ceiling, options.cwd));
    let served = sessions.clone();
    let mut config =
        StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token());
    if !bound.ip().is_loopback() {
        // Asked for explicitly (`--allow-remote`): accept requests naming this address.
        config.allowed_hosts.push(bound.ip().to_string());
    }
    let service = StreamableHttpService::new(
        move || Ok(KinServer::new(sessions.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let connections = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "accepting an MCP connection failed");
                continue;
            }
        };
        let service = service.clone();
        let stop = shutdown.clone();
        connections.spawn(async move {
            let handle = hyper::service::service_fn(move |request| {
                let service = service.clone();
                async move { Ok::<_, Infallible>(service.handle(request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handle);
            tokio::select! {
                served = connection => {
                    if let Err(error) = served {
                        tracing::debug!(%error, "an MCP connection ended with an error");
                    }
                }
                () = stop.cancelled() => {}
            }
        });
    }
    connections.close();
    connections.wait().await;
    served.finish().await;
    runtime.shutdown().await;
    Ok(())
}
