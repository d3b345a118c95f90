//! Interop with a client written by someone else: the official ACP Python SDK
//! (`agent-client-protocol`, see tests/interop/requirements.txt) drives `kin acp` through a
//! session's whole life (tests/interop/python_sdk_client.py, which also writes the replay
//! model script it expects).
//!
//! The interpreter is `$KIN_PYTHON` (`.ci/run` points it at the virtual environment it
//! installs the SDK into), else `python3`. Without the SDK this test is skipped with a
//! message, unless `KIN_PYTHON` is set: an interpreter chosen for the test must have it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The whole walk takes about a second; this only stops a stuck run from stalling the suite.
const DEADLINE: Duration = Duration::from_secs(180);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Python interpreter to run the SDK with, and whether it was chosen explicitly.
fn python() -> (String, bool) {
    match std::env::var("KIN_PYTHON") {
        Ok(path) if !path.is_empty() => (path, true),
        _ => ("python3".to_owned(), false),
    }
}

/// Whether the interpreter can import the SDK; `Err` says why not.
fn sdk_available(python: &str) -> Result<(), String> {
    match Command::new(python)
        .args(["-c", "import acp"])
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "`{python} -c \"import acp\"` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(error) => Err(format!("could not run {python}: {error}")),
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| format!("<reading {}: {e}>", path.display()))
}

#[tokio::test]
async fn official_python_sdk_drives_a_session_through_its_life() {
    let (python, chosen) = python();
    if let Err(why) = sdk_available(&python) {
        const HOW: &str = "python3 -m venv target/ci-venv && \
            target/ci-venv/bin/pip install -r tests/interop/requirements.txt, \
            then set KIN_PYTHON=target/ci-venv/bin/python (.ci/run does all this)";
        if chosen {
            panic!("the ACP Python SDK is required when KIN_PYTHON is set: {why}\nto install it: {HOW}");
        }
        let line = format!(
            "SKIPPED sdk_interop: the ACP Python SDK is not installed ({why}).\n\
             To run this test: {HOW}\n"
        );
        // Straight to the stderr handle: libtest captures eprintln!, hiding the notice.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        return;
    }

    let temp = tempfile::tempdir().unwrap();
    let replay = temp.path().join("replay");
    let workspace = temp.path().join("workspace");
    let home = temp.path().join("kin-home");
    for dir in [&replay, &workspace, &home] {
        std::fs::create_dir(dir).unwrap();
    }
    // The workspace is compared with what kin reports, so no symlinks in its path.
    let workspace = workspace.canonicalize().unwrap();
    let stdout_path = temp.path().join("stdout.txt");
    let stderr_path = temp.path().join("stderr.txt");

    let script = repo().join("tests/interop/python_sdk_client.py");
    let mut child = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_kin"))
        .arg(&replay)
        .arg(&workspace)
        .arg(&home)
        .current_dir(repo())
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(File::create(&stdout_path).unwrap())
        .stderr(File::create(&stderr_path).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("running {python} {}: {e}", script.display()));

    // Waits on the exit itself; the deadline only turns a hang into a readable failure.
    let status = match tokio::time::timeout(DEADLINE, child.wait()).await {
        Ok(status) => Some(status.unwrap()),
        Err(_) => {
            let _ = child.kill().await;
            None
        }
    };
    let stdout = read(&stdout_path);
    let stderr = read(&stderr_path);
    let report = format!("--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}");

    let Some(status) = status else {
        panic!("the Python SDK client did not finish within {DEADLINE:?} (killed)\n{report}");
    };
    assert!(
        status.success(),
        "the Python SDK client failed ({status})\n{report}"
    );
    assert!(
        stdout.contains("python sdk interop: ok"),
        "the Python SDK client exited 0 but did not report success\n{report}"
    );
    if !stderr.trim().is_empty() {
        // kin's own stderr (logs) passes through here; show it, it is not a failure.
        eprintln!("{report}");
    }
}
