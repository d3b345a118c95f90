//! `kin demo` (the real binary): the transcript shows a child's whole answer and both
//! activations of a continued background child, and the session logs it lists are still there
//! after it exits.

use crate::common;

use std::path::PathBuf;
use std::process::Command;

use common::{kin_binary, MODEL_ENV};

#[test]
fn demo_shows_whole_child_answers_a_follow_up_and_keeps_the_logs_it_lists() {
    // The demo keeps its files under the temporary directory; this one goes away with the test.
    let tmp = tempfile::tempdir().unwrap();
    let mut command = Command::new(kin_binary());
    command.arg("demo");
    for name in MODEL_ENV {
        command.env_remove(name);
    }
    let output = command.env("TMPDIR", tmp.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();

    // The first child's answer is three lines; its tool result shows all of them.
    let result = lines
        .iter()
        .position(|l| l.trim_start() == "↳ completed: - Work that silently stalls")
        .unwrap_or_else(|| panic!("no tool result line for the first child:\n{stdout}"));
    let rest: Vec<&str> = lines[result + 1..=result + 2]
        .iter()
        .map(|l| l.trim())
        .collect();
    assert_eq!(
        rest,
        [
            "- Results nobody collects",
            "- Processes left running after the parent stops"
        ],
        "{stdout}"
    );

    // The background child answers twice: started, then continued by send_message, one session.
    let activations: Vec<&str> = lines
        .iter()
        .filter_map(|l| {
            l.trim_start()
                .strip_prefix("┌ child “Pick the worst risk” ")
        })
        .collect();
    assert_eq!(activations.len(), 2, "{stdout}");
    let child_id = activations[0]
        .strip_prefix("started (session ")
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("first activation is not a start:\n{stdout}"));
    assert_eq!(
        activations[1],
        format!("continued (session {child_id})"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "message started task subagent-2 continuing subagent {child_id}"
        )),
        "{stdout}"
    );
    // Each activation's answer, collected whole by task_output (the child's own streamed
    // lines may be interleaved with the parent's, its collected result is printed at once).
    for answer in [
        "Work that silently stalls: nobody notices until the result is needed.",
        "Give every background task a definite end and have the parent collect or cancel it.",
    ] {
        assert!(
            lines
                .iter()
                .any(|l| l.trim_start() == format!("↳ completed: {answer}")),
            "{stdout}"
        );
    }

    // Every log it lists (the parent and the three children) exists after it exited.
    let heading = lines
        .iter()
        .position(|l| l.starts_with("Session logs"))
        .unwrap_or_else(|| panic!("no list of session logs:\n{stdout}"));
    let logs: Vec<PathBuf> = lines[heading + 1..]
        .iter()
        .filter_map(|l| l.split_whitespace().last())
        .map(PathBuf::from)
        .collect();
    assert_eq!(logs.len(), 4, "{stdout}");
    for log in &logs {
        assert!(log.starts_with(tmp.path()), "{}", log.display());
        assert!(log.is_file(), "{} is gone", log.display());
    }
    let child = std::fs::read_to_string(&logs[1]).unwrap();
    assert!(child.contains("Processes left running after the parent stops"));
}
