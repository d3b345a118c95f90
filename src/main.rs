//! The `kin` command line: parses arguments, builds the runtime, hands over.

use std::backtrace::BacktraceStatus;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use kin::config::{self, Overrides};
use kin::headless::{self, HeadlessOptions};
use kin::model::{ModelCatalog, ReplayModel};
use kin::process::child_env::ChildEnv;
use kin::process::sandbox::Sandbox;
use kin::runtime::{Runtime, RuntimeOptions};
use kin::tools::private::PrivateFiles;
use kin::tools::PermissionMode;

#[derive(Parser)]
#[command(name = "kin", version, about = "An ACP agent that delegates")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Agent Client Protocol on stdin/stdout (what editors launch).
    Acp {
        /// Serve the model from the recorded session logs in DIR (session.jsonl, session.N.jsonl).
        #[arg(long, value_name = "DIR")]
        replay: Option<PathBuf>,
        #[command(flatten)]
        model: ModelFlags,
    },
    /// Run one prompt without an editor: the answer goes to stdout, tool activity to stderr.
    /// Exits 0 when the turn ends normally, 1 on errors, 3 on limits or refusals, 130 when
    /// interrupted.
    Run {
        /// The prompt.
        prompt: String,
        /// Write the session's events as JSON lines (the session log's format) to stdout.
        #[arg(long)]
        json: bool,
        /// Continue this stored session instead of starting a new one.
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Serve the model from the recorded session logs in DIR (no key needed).
        #[arg(long, value_name = "DIR")]
        replay: Option<PathBuf>,
        /// What tools may do: `ask` asks on the terminal before edits, commands and paths
        /// outside the directory (refused without a terminal), `allow` lets them run,
        /// `read-only` refuses edits and commands [default: ask, or a continued session's mode]
        #[arg(long, value_name = "MODE", value_parser = parse_mode)]
        mode: Option<PermissionMode>,
        #[command(flatten)]
        model: ModelFlags,
    },
    /// Print the effective model configuration (secrets masked) and where each value comes from.
    Config {
        #[command(flatten)]
        model: ModelFlags,
    },
    /// Play the bundled scenario through `kin acp` and print the transcript (no key needed).
    Demo,
    /// Serve kin as an MCP server on stdin/stdout (what a parent agent such as Claude Code or
    /// Codex CLI launches), or as streamable HTTP with `--listen`. Tools: kin, kin_reply,
    /// kin_output, kin_cancel, kin_list.
    #[command(args_conflicts_with_subcommands = true)]
    Mcp {
        #[command(subcommand)]
        action: Option<McpAction>,
        #[command(flatten)]
        listen: ListenFlags,
        /// The widest mode a call may ask for (`read-only`, `ask` or `allow`); a call's `mode`
        /// can only narrow it [default: ask]
        #[arg(long, value_name = "MODE", value_parser = parse_mode)]
        mode: Option<PermissionMode>,
        /// Serve the model from the recorded session logs in DIR (no key needed).
        #[arg(long, value_name = "DIR")]
        replay: Option<PathBuf>,
        #[command(flatten)]
        model: ModelFlags,
    },
    /// List the agent definitions the `subagent` tools can name here, with the file each came
    /// from (`.kin/agents/`, `.claude/agents/`, then `agents/` in kin's config directory).
    Agents,
    /// Sign in at the terminal: choose the endpoint and model, give the key (kept in the OS
    /// keyring, else in a file only you can read), checked with one request. Flags answer the
    /// questions for scripts.
    Login(LoginFlags),
    /// Remove the key `kin login` stored.
    Logout,
}

/// `kin mcp login` and `kin mcp logout`: the OAuth login to an HTTP server of the config file.
#[derive(Subcommand, Clone)]
enum McpAction {
    /// Log in to the configured HTTP MCP server NAME with OAuth: prints the address to open
    /// (and opens it with $BROWSER when set), waits for the browser to come back, and keeps
    /// the tokens (OS keyring, else a file only you can read).
    Login {
        /// The server's name (its `[mcp_servers.NAME]` table).
        name: String,
    },
    /// Remove the tokens `kin mcp login NAME` stored.
    Logout {
        /// The server's name.
        name: String,
    },
}

/// `kin login`'s flags; each answers one question.
#[derive(Args, Clone, Default)]
struct LoginFlags {
    /// A known endpoint: deepseek, openai, llama-cpp (127.0.0.1:8080), ollama (127.0.0.1:11434)
    #[arg(long, value_name = "NAME", conflicts_with = "base_url")]
    provider: Option<String>,
    /// Any OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// The model to use
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// Read the API key from the first line of stdin
    #[arg(long, conflicts_with = "no_key")]
    api_key_stdin: bool,
    /// The endpoint takes no key
    #[arg(long)]
    no_key: bool,
    /// Where the key goes: `keyring` (the OS keyring, else a file if none answers) or `file`
    /// [default: keyring]
    #[arg(long, value_name = "STORE", env = config::ENV_KEY_STORE, value_parser = parse_store)]
    key_store: Option<config::KeyStore>,
    /// Skip the request that checks the key and the model
    #[arg(long)]
    no_check: bool,
}

/// A key store by name (`keyring`, `file`).
fn parse_store(id: &str) -> Result<config::KeyStore, String> {
    match config::KeyStore::from_id(id) {
        Some(store @ (config::KeyStore::Keyring | config::KeyStore::File)) => Ok(store),
        _ => Err(format!(
            "unknown key store {id:?}; expected keyring or file"
        )),
    }
}

/// Where `kin mcp` serves HTTP, and how it lets clients in.
#[derive(Args, Clone, Debug, Default, PartialEq)]
struct ListenFlags {
    /// Serve streamable HTTP on this address (path /mcp) instead of stdin/stdout, e.g.
    /// 127.0.0.1:8765; port 0 picks a free port (printed on stderr). Every request needs the
    /// bearer token whose file is printed on stderr
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// Serve streamable HTTP on this Unix socket (made 0600), alone or beside --listen
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Take the bearer token from this file (readable by you only) instead of `mcp-token` in
    /// kin's data directory, which is made on first use
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// Accept a --listen address that is not loopback (anyone who reaches it and holds the
    /// token can run tasks as you)
    #[arg(long)]
    allow_remote: bool,
    /// Over HTTP, accept `/` and your home directory as a task's cwd (refused by default)
    #[arg(long)]
    allow_broad_cwd: bool,
}

/// Model settings; each beats its environment variable and the config file.
#[derive(Args, Clone)]
struct ModelFlags {
    /// Model name [env: KIN_MODEL] [default: deepseek-chat]
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// API root that /chat/completions is appended to [env: KIN_BASE_URL]
    /// [default: https://api.deepseek.com]
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Read the API key from this environment variable instead of KIN_API_KEY
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// Give up connecting after this long, e.g. 10s [env: KIN_CONNECT_TIMEOUT]
    #[arg(long, value_name = "DURATION", value_parser = config::parse_duration)]
    connect_timeout: Option<Duration>,
    /// Fail a response that sends nothing for this long, e.g. 60s [env: KIN_STALL_TIMEOUT]
    #[arg(long, value_name = "DURATION", value_parser = config::parse_duration)]
    stall_timeout: Option<Duration>,
    /// Retries on connect errors, 429 and 5xx before any output [env: KIN_RETRIES] [default: 3]
    #[arg(long, value_name = "N")]
    retries: Option<u32>,
}

impl ModelFlags {
    fn overrides(&self) -> Overrides {
        Overrides {
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            api_key_env: self.api_key_env.clone(),
            connect_timeout: self.connect_timeout,
            stall_timeout: self.stall_timeout,
            retries: self.retries,
        }
    }
}

fn main() -> ExitCode {
    // `kin __guard ...` (how kin runs commands) guards one command and exits here.
    kin::process::guard::init();
    // `kin sandbox-exec ...` (how kin starts a confined process) confines itself and execs.
    kin::process::sandbox_exec::init();
    // Before any thread: may re-execute kin without the credentials in its environment.
    let hidden = kin::process::own_env::hide_secrets();
    // Colours only for a person watching a terminal, never in a file or an editor's log pane.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    if let kin::process::own_env::Outcome::Failed(why) = hidden {
        tracing::warn!("credentials stay in kin's environment block: {why}");
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Usage mistakes in kin's error style; help and version as clap prints them.
        Err(error) => match error.render().to_string().strip_prefix("error: ") {
            Some(message) => {
                eprint!("kin: {message}");
                return ExitCode::from(2);
            }
            None => error.exit(),
        },
    };
    match run_command(cli) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            report(&error);
            ExitCode::FAILURE
        }
    }
}

/// Prints an error the one way kin prints errors: `kin: <message>: <cause>: ...` on one line
/// (a cause whose text the message already holds is not repeated). A backtrace follows only
/// when `RUST_LIB_BACKTRACE` asks for one: `RUST_BACKTRACE` alone is for panics, and an error
/// here is a condition to explain, not a bug to trace.
fn report(error: &anyhow::Error) {
    let mut message = format!("kin: {error}");
    for cause in error.chain().skip(1) {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    eprintln!("{message}");
    let asked = std::env::var_os("RUST_LIB_BACKTRACE").is_some_and(|v| v != "0");
    if asked && error.backtrace().status() == BacktraceStatus::Captured {
        eprintln!("backtrace:\n{}", error.backtrace());
    }
}

fn run_command(cli: Cli) -> anyhow::Result<u8> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // Each command's future is built on the heap: on the stack, the largest of them made this
    // frame large, and the stack probe faults in every page of it at start.
    let result = match cli.command {
        Command::Acp { replay, model } => runtime.block_on(Box::pin(acp(replay, model))),
        Command::Run {
            prompt,
            json,
            session,
            replay,
            mode,
            model,
        } => {
            let options = RunArgs {
                prompt,
                json,
                session,
                mode,
            };
            runtime.block_on(Box::pin(run(options, replay, model)))
        }
        Command::Mcp {
            action: Some(action),
            ..
        } => runtime.block_on(Box::pin(mcp_login(action))),
        Command::Mcp {
            action: None,
            listen,
            mode,
            replay,
            model,
        } => {
            let options = McpArgs { listen, mode };
            runtime.block_on(Box::pin(mcp(options, replay, model)))
        }
        Command::Config { model } => runtime.block_on(Box::pin(show_config(model))),
        Command::Agents => list_agents(),
        Command::Login(flags) => {
            let options = kin::login::LoginOptions {
                provider: flags.provider,
                base_url: flags.base_url,
                model: flags.model,
                api_key_stdin: flags.api_key_stdin,
                no_key: flags.no_key,
                key_store: flags.key_store,
                no_check: flags.no_check,
            };
            runtime
                .block_on(Box::pin(kin::login::login(options)))
                .map_err(anyhow::Error::from)
        }
        Command::Logout => runtime
            .block_on(Box::pin(kin::login::logout()))
            .map_err(anyhow::Error::from),
        Command::Demo => runtime
            .block_on(Box::pin(kin::scenario::demo::run()))
            .map(|()| 0),
    };
    // When stdin is a file or terminal, its reader thread may still be parked in a read.
    runtime.shutdown_timeout(Duration::from_millis(100));
    result
}

/// The runtime on the model to serve: the replay of `replay`, else the configured
/// OpenAI-compatible one. The config file is read once for all of it.
async fn start_runtime(
    replay: Option<&PathBuf>,
    flags: &ModelFlags,
) -> anyhow::Result<Arc<Runtime>> {
    let file = config::ConfigFile::read(&config::process_env)?;
    let model = model(replay, flags, &file).await?;
    open_runtime(model, &file)
}

/// The models to serve and what the configuration says around them.
struct Configured {
    models: ModelCatalog,
    limits: kin::limits::Limits,
    /// The environment scrub of every process kin starts; the models hide the keys they load
    /// (now and on a reload) through it.
    child_env: ChildEnv,
}

async fn model(
    replay: Option<&PathBuf>,
    flags: &ModelFlags,
    file: &config::ConfigFile,
) -> anyhow::Result<Configured> {
    let overrides = flags.overrides();
    // Resolved once here: the tool environment needs it even when a replay is the model.
    let config = config::resolve_in(&overrides, &config::process_env, file);
    let child_env = config::child_env(&overrides, config.as_ref());
    let limits = config::limits(config.as_ref());
    let models = match replay {
        Some(dir) => {
            ModelCatalog::single(Arc::new(ReplayModel::from_dir(dir).with_context(|| {
                format!("loading the replay scenario in {}", dir.display())
            })?))
        }
        None => {
            let models = async { config::build_models(&overrides, config?, &child_env).await };
            models.await.context("configuring the model")?
        }
    };
    Ok(Configured {
        models,
        limits,
        child_env,
    })
}

fn open_runtime(configured: Configured, file: &config::ConfigFile) -> anyhow::Result<Arc<Runtime>> {
    let Configured {
        models,
        limits,
        child_env,
    } = configured;
    let home = config::kin_home();
    let mcp = config::mcp_servers(file)?;
    // kin's own files, and the MCP clients' signing keys, are refused to its tools.
    let own = config::own_files(&home).into_iter().chain(mcp.key_files());
    let mut options = RuntimeOptions {
        limits,
        child_env,
        private: PrivateFiles::new(own).unwritten(config::own_dirs(&home)),
        ..RuntimeOptions::default()
    };
    if let Some(depth) = std::env::var("KIN_SUBAGENT_MAX_DEPTH")
        .ok()
        .filter(|v| !v.is_empty())
    {
        options.subagent_max_depth = depth.parse().with_context(|| {
            format!("KIN_SUBAGENT_MAX_DEPTH must be a non-negative integer, got {depth:?}")
        })?;
    }
    options.acp_agents = config::acp_agents(file)?;
    options.delegation = config::delegation_settings(file);
    options.max_parallel = config::max_parallel(file)?.value();
    options.lean = config::lean_mode(file).value();
    for secret in mcp.client_secrets() {
        options.child_env.hide_value(secret);
    }
    options.mcp_servers = mcp.servers;
    if let Some(timeout) = mcp.startup_timeout {
        options.mcp_startup_timeout = timeout;
    }
    if let Some(max) = mcp.max_tools {
        options.mcp_max_tools = max;
    }
    options.mcp_sandboxed = mcp.sandboxed;
    let sandbox = Sandbox::for_this_process(config::sandbox_settings(file)?)
        .protecting(config::own_dirs(&home));
    let sandbox = Arc::new(sandbox);
    options.sandbox = sandbox.clone();
    let model = models.default_choice().model.clone();
    options.models = Some(models);
    Runtime::new(&home, model, kin::tools::builtin_confined(sandbox), options)
        .with_context(|| format!("opening the session store in {}", home.display()))
}

async fn acp(replay: Option<PathBuf>, flags: ModelFlags) -> anyhow::Result<u8> {
    // Somebody typed `kin acp` by hand: say what it waits for (stdout stays the protocol's).
    if std::io::stdin().is_terminal() {
        eprintln!(
            "kin: `kin acp` serves the Agent Client Protocol (JSON-RPC) on stdin/stdout for an \
             editor; to try kin by hand run `kin demo` or `kin run \"PROMPT\"` (Ctrl-D ends)"
        );
    }
    let runtime = start_runtime(replay.as_ref(), &flags).await?;
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    kin::acp::serve_stdio(runtime, shutdown).await;
    Ok(0)
}

/// `kin mcp`'s own arguments.
struct McpArgs {
    listen: ListenFlags,
    mode: Option<PermissionMode>,
}

async fn mcp(args: McpArgs, replay: Option<PathBuf>, flags: ModelFlags) -> anyhow::Result<u8> {
    let http = args.listen;
    if let Some(addr) = http.listen {
        if !addr.ip().is_loopback() && !http.allow_remote {
            anyhow::bail!(
                "--listen {addr} is not a loopback address; anyone who reaches it could run \
                 tasks as you (add --allow-remote if that is what you want)"
            );
        }
    }
    let runtime = start_runtime(replay.as_ref(), &flags).await?;
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    let options = kin::mcp_server::ServeOptions {
        ceiling: args.mode.unwrap_or(PermissionMode::Ask),
        cwd: std::env::current_dir().context("reading the current directory")?,
    };
    if http.listen.is_none() && http.socket.is_none() {
        kin::mcp_server::serve_stdio(runtime, options, shutdown).await?;
        return Ok(0);
    }
    let listen = kin::mcp_server::ListenOptions {
        addr: http.listen,
        socket: http.socket,
        token_file: http.token_file,
        allow_broad_cwd: http.allow_broad_cwd,
    };
    kin::mcp_server::serve_http(runtime, options, listen, shutdown).await?;
    Ok(0)
}

/// A permission mode by its id (`ask`, `allow`, `read-only`).
fn parse_mode(id: &str) -> Result<PermissionMode, String> {
    PermissionMode::from_id(id).ok_or_else(|| {
        let known: Vec<&str> = PermissionMode::ALL.iter().map(|m| m.id()).collect();
        format!("unknown mode {id:?}; expected one of {}", known.join(", "))
    })
}

/// `kin run`'s own arguments.
struct RunArgs {
    prompt: String,
    json: bool,
    session: Option<String>,
    mode: Option<PermissionMode>,
}

async fn run(args: RunArgs, replay: Option<PathBuf>, flags: ModelFlags) -> anyhow::Result<u8> {
    let runtime = start_runtime(replay.as_ref(), &flags).await?;
    let cancel = CancellationToken::new();
    tokio::spawn(stop_on_signal(cancel.clone()));
    let options = HeadlessOptions {
        prompt: args.prompt,
        session: args.session,
        cwd: std::env::current_dir().context("reading the current directory")?,
        json: args.json,
        mode: args.mode,
    };
    let result = headless::run(&runtime, &options, cancel).await;
    // Background children the turn started are cancelled and settle (their logs end cleanly).
    runtime.shutdown().await;
    let (code, message) = headless::exit_status(&result, runtime.host().max_steps());
    if let Some(message) = message {
        eprintln!("kin: {message}");
    }
    Ok(code)
}

/// What the fixed part of a top-level session's request costs: the tools of a runtime as
/// `kin acp` would build it (no session is opened, nothing is written).
fn fixed_cost(file: &config::ConfigFile) -> anyhow::Result<kin::agent::lean::FixedCost> {
    let model = Arc::new(kin::model::UnconfiguredModel::new("kin config"));
    let options = RuntimeOptions {
        acp_agents: config::acp_agents(file)?,
        ..RuntimeOptions::default()
    };
    let runtime = Runtime::new(&config::kin_home(), model, kin::tools::builtin(), options)?;
    Ok(kin::agent::fixed_cost(runtime.host().tools()))
}

async fn show_config(flags: ModelFlags) -> anyhow::Result<u8> {
    let file = config::ConfigFile::read(&config::process_env)?;
    let config = config::resolve_in(&flags.overrides(), &config::process_env, &file)?;
    let key = config::load_key(&config.key).await;
    let agents = config::acp_agents(&file)?;
    print!("{}", config::render(&config, &key));
    let cost = fixed_cost(&file)?;
    let tools = config::render_tools(
        &config::max_parallel(&file)?,
        &config::lean_mode(&file),
        cost,
    );
    print!("{tools}");
    print!("{}", config::render_agents(&agents));
    let servers = config::mcp_servers(&file)?;
    print!("{}", config::render_mcp_servers(&servers));
    print!("{}", kin::mcp::oauth::render_logins(&servers.servers).await);
    let sandbox = Sandbox::for_this_process(config::sandbox_settings(&file)?)
        .protecting(config::own_dirs(&config::kin_home()));
    print!("{}", config::render_sandbox(&sandbox));
    Ok(0)
}

/// `kin mcp login NAME` and `kin mcp logout NAME`.
async fn mcp_login(action: McpAction) -> anyhow::Result<u8> {
    let file = config::ConfigFile::read(&config::process_env)?;
    let servers = config::mcp_servers(&file)?.servers;
    let (login, name) = match action {
        McpAction::Login { name } => (true, name),
        McpAction::Logout { name } => (false, name),
    };
    Ok(kin::mcp::oauth::command(login, &name, &servers).await?)
}

fn list_agents() -> anyhow::Result<u8> {
    let cwd = std::env::current_dir()?;
    // Listed for the user, not read for a model: none of kin's files is withheld.
    let catalog = kin::config::agents::load_for(&cwd, &PrivateFiles::default());
    print!("{}", catalog.render());
    Ok(0)
}

async fn stop_on_signal(shutdown: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!("could not install signal handlers; only stdin EOF stops kin");
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    shutdown.cancel();
}
