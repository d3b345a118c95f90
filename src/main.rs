#![deny(clippy::unwrap_used, clippy::expect_used)]
//! The `kin` command line: parses arguments, builds the runtime, hands over.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use kin::model::{Model, ReplayModel, UnconfiguredModel};
use kin::runtime::Runtime;

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
    },
    /// Play the bundled scenario through `kin acp` and print the transcript (no key needed).
    Demo,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = match cli.command {
        Command::Acp { replay } => runtime.block_on(acp(replay)),
        Command::Demo => runtime.block_on(kin::scenario::demo::run()),
    };
    // stdin's reader thread may still be parked in a read; do not wait for it.
    runtime.shutdown_timeout(Duration::from_millis(100));
    result
}

async fn acp(replay: Option<PathBuf>) -> anyhow::Result<()> {
    let model: Arc<dyn Model> = match &replay {
        Some(dir) => Arc::new(
            ReplayModel::from_dir(dir)
                .with_context(|| format!("loading the replay scenario in {}", dir.display()))?,
        ),
        None => Arc::new(UnconfiguredModel::new(
            "this build has no HTTP model client yet; run `kin acp --replay DIR` with a recorded scenario",
        )),
    };
    let home = kin::config::kin_home();
    let runtime = Runtime::new(&home, model, kin::tools::builtin())
        .with_context(|| format!("opening the session store in {}", home.display()))?;
    let shutdown = CancellationToken::new();
    tokio::spawn(stop_on_signal(shutdown.clone()));
    kin::acp::serve_stdio(runtime, shutdown).await;
    Ok(())
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
