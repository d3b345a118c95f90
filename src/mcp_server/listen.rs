//! `kin mcp --listen` / `--socket`: rmcp's streamable-HTTP service behind [`Gate`], served by
//! hyper's HTTP/1.1 connection loop on a loopback TCP address and/or a Unix socket (0600).
//! Bounded: at most [`MAX_CONNECTIONS`] connections (more are answered 503 and closed), a
//! connection that sends no complete request head for [`HEADER_TIMEOUT`] (from its start or
//! its last response) is closed, and accept errors (no file descriptor left) back off and warn
//! at most once per [`WARN_EVERY`]; the soft limit on open files is raised to the hard one.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::gate::Gate;
use super::handler::KinServer;
use super::peer;
use super::sessions::Sessions;
use super::ServeError;

/// The most connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 128;
/// How long a connection may take to send a request head, counted from when it opened or
/// from its last response: a half-sent request, or an idle keep-alive connection, is closed.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Accept errors are logged at most this often (with a count of those left unsaid).
const WARN_EVERY: Duration = Duration::from_secs(30);
/// The most of a refused connection's request read before it is closed.
const REFUSED_REQUEST_MAX: u64 = 64 * 1024;
/// The pause after an accept error: doubling from the first, up to the last.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const MAX_PAUSE: Duration = Duration::from_secs(1);

/// Where `kin mcp` listens.
#[derive(Debug, Clone, Default)]
pub struct ListenOptions {
    /// A TCP address (loopback unless the caller allowed otherwise).
    pub addr: Option<SocketAddr>,
    /// A Unix socket path, made 0600.
    pub socket: Option<PathBuf>,
    /// The user's own token file; `None`: `mcp-token` in kin's data directory, made when missing.
    pub token_file: Option<PathBuf>,
    /// Accept `/` and the home directory as a task's cwd.
    pub allow_broad_cwd: bool,
}

/// A byte stream a connection is served over.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Stream for T {}

pub(crate) enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Listener {
    /// The next connection, and why its peer is refused (a Unix socket's peer that kin's
    /// sandbox confines, see [`peer`]).
    async fn accept(&self) -> std::io::Result<(Box<dyn Stream>, Option<String>)> {
        Ok(match self {
            Self::Tcp(listener) => (Box::new(listener.accept().await?.0), None),
            Self::Unix(listener) => {
                let stream = listener.accept().await?.0;
                let refused = peer::refusal(&stream);
                (Box::new(stream), refused)
            }
        })
    }
}

/// Binds what `options` names, printing where on stderr.
pub(crate) async fn bind(options: &ListenOptions) -> Result<Vec<(Listener, String)>, ServeError> {
    let mut bound = Vec::new();
    if let Some(addr) = options.addr {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind {
                addr: addr.to_string(),
                source,
            })?;
        let local = listener.local_addr().unwrap_or(addr);
        eprintln!("kin: serving MCP on http://{local}/mcp");
        bound.push((Listener::Tcp(listener), local.to_string()));
    }
    if let Some(path) = &options.socket {
        let listener = bind_socket(path).map_err(|source| ServeError::Bind {
            addr: path.display().to_string(),
            source,
        })?;
        eprintln!("kin: serving MCP on unix:{} (path /mcp)", path.display());
        bound.push((Listener::Unix(listener), String::new()));
    }
    Ok(bound)
}

/// A Unix socket at `path` that only its owner may connect to, from the first instant: bound
/// in a private (0700) directory beside `path`, made 0600 there, then linked into place (a
/// link never replaces what is there). A socket file left by a kin that is gone is replaced;
/// one something listens on, or any other file, is not.
fn bind_socket(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{DirBuilderExt, FileTypeExt};
    if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_socket())
        && std::os::unix::net::UnixStream::connect(path).is_err()
    {
        std::fs::remove_file(path)?;
    }
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let private = parent.join(format!(".{name}.{}.kin-bind", std::process::id()));
    std::fs::DirBuilder::new().mode(0o700).create(&private)?;
    let bound = (|| {
        let inside = private.join("s");
        let listener = UnixListener::bind(&inside)?;
        std::fs::set_permissions(&inside, std::fs::Permissions::from_mode(0o600))?;
        std::fs::hard_link(&inside, path)?;
        std::fs::remove_file(&inside)?;
        Ok(listener)
    })();
    let _ = std::fs::remove_dir_all(&private);
    bound
}

/// rmcp's service for `bound` TCP addresses: only loopback `Host`s (and a bound non-loopback
/// address, asked for with `--allow-remote`) and browser `Origin`s of the server itself.
pub(crate) fn service(
    sessions: Arc<Sessions>,
    manager: Arc<LocalSessionManager>,
    bound: &[String],
    shutdown: &CancellationToken,
) -> StreamableHttpService<KinServer, LocalSessionManager> {
    let mut config =
        StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token());
    let mut origins = Vec::new();
    for addr in bound.iter().filter_map(|a| a.parse::<SocketAddr>().ok()) {
        let port = addr.port();
        origins.extend([
            format!("http://{addr}"),
            format!("http://localhost:{port}"),
            format!("http://127.0.0.1:{port}"),
            format!("http://[::1]:{port}"),
        ]);
        if !addr.ip().is_loopback() {
            config.allowed_hosts.push(addr.ip().to_string());
        }
    }
    // An empty list still checks: a request from a browser page is refused.
    config = config
        .with_allowed_origins(origins)
        .enforce_origin_validation();
    StreamableHttpService::new(
        move || Ok(KinServer::new(sessions.clone())),
        manager,
        config,
    )
}

/// Serves `listener` until `shutdown` trips; connections are tracked by `connections`.
pub(crate) async fn accept_loop(
    listener: Listener,
    gate: Arc<Gate>,
    slots: Arc<Semaphore>,
    connections: TaskTracker,
    shutdown: CancellationToken,
) {
    let mut warn = Warnings::default();
    let mut pause = FIRST_PAUSE;
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, None)) => {
                pause = FIRST_PAUSE;
                stream
            }
            Ok((stream, Some(why))) => {
                pause = FIRST_PAUSE;
                tracing::warn!(%why, "refused a connection to kin mcp");
                connections.spawn(refuse(stream, Refusal::Peer(why)));
                continue;
            }
            Err(error) => {
                // Out of file descriptors, most likely: the pending connection stays queued,
                // so trying again at once would spin.
                warn.note(|skipped| {
                    tracing::warn!(%error, skipped, "accepting an MCP connection failed; pausing")
                });
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(MAX_PAUSE);
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            warn.note(|skipped| {
                tracing::warn!(
                    skipped,
                    "{MAX_CONNECTIONS} MCP connections are open; refusing more"
                )
            });
            connections.spawn(refuse(stream, Refusal::Full));
            continue;
        };
        let gate = gate.clone();
        let stop = shutdown.clone();
        connections.spawn(async move {
            let handle = hyper::service::service_fn(move |request| {
                let gate = gate.clone();
                async move { Ok::<_, std::convert::Infallible>(gate.handle(request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), handle);
            tokio::select! {
                served = connection => {
                    if let Err(error) = served {
                        tracing::debug!(%error, "an MCP connection ended with an error");
                    }
                }
                () = stop.cancelled() => {}
            }
            drop(slot);
        });
    }
}

/// Why a connection is answered at once and closed.
enum Refusal {
    /// Over [`MAX_CONNECTIONS`].
    Full,
    /// Its peer may not drive kin mcp.
    Peer(String),
}

/// Answers a refused connection (503 over the cap, 403 for its peer) and closes it.
async fn refuse(mut stream: Box<dyn Stream>, why: Refusal) {
    let (status, message) = match why {
        Refusal::Full => (
            "503 Service Unavailable",
            format!("kin mcp has {MAX_CONNECTIONS} connections open, its most\n"),
        ),
        Refusal::Peer(why) => (
            "403 Forbidden",
            format!("kin mcp refused this client: {why}\n"),
        ),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{message}",
        message.len()
    );
    // The request is read (and thrown away) until the client closes: a socket closed with
    // unread bytes resets the connection, and the client would see that, not the answer.
    let answered = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        let mut unread = (&mut stream).take(REFUSED_REQUEST_MAX);
        tokio::io::copy(&mut unread, &mut tokio::io::sink()).await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), answered).await;
}

/// At most one warning per [`WARN_EVERY`], saying how many were left out since the last.
#[derive(Default)]
struct Warnings {
    last: Option<Instant>,
    skipped: u64,
}

impl Warnings {
    fn note(&mut self, log: impl FnOnce(u64)) {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|last| now.duration_since(last) < WARN_EVERY)
        {
            self.skipped += 1;
            return;
        }
        log(self.skipped);
        self.last = Some(now);
        self.skipped = 0;
    }
}

/// Raises the soft limit on open files to the hard limit, so a server with many clients
/// does not run out long before the system would let it.
pub(crate) fn raise_file_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if let Err(error) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::debug!(%error, soft, hard, "raising the open-file limit failed");
            }
        }
        Ok(_) => {}
        Err(error) => tracing::debug!(%error, "reading the open-file limit failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_socket_is_private_from_its_first_instant_and_replaces_only_a_dead_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kin.sock");
        let listener = bind_socket(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "no private directory is left behind");
        assert!(bind_socket(&path).is_err(), "a live socket is not replaced");
        drop(listener);
        assert!(bind_socket(&path).is_ok(), "a dead one is");
        let file = dir.path().join("file");
        std::fs::write(&file, "keep").unwrap();
        assert!(bind_socket(&file).is_err());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    }

    #[test]
    fn warnings_are_rate_limited_and_count_what_they_left_out() {
        let mut warn = Warnings::default();
        let mut said = Vec::new();
        for _ in 0..1000 {
            warn.note(|skipped| said.push(skipped));
        }
        assert_eq!(said, [0]);
        warn.last = Some(Instant::now() - WARN_EVERY);
        warn.note(|skipped| said.push(skipped));
        assert_eq!(said, [0, 999]);
    }
}
