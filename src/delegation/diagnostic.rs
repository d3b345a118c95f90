//! Why a child's run did not complete, in one line a model can act on: the model endpoint's
//! status and message, a stalled or cut stream, a full disk, a lost session lock, an ACP
//! child's exit status and its last stderr line. Every line is scrubbed of what looks like a
//! secret and capped at [`MAX_CHARS`]; the limits' own lines (time, budget) come from there.

use std::io;

use crate::acp_client::{ChildError, StderrTail};
use crate::agent::TurnError;
use crate::model::ModelError;
use crate::session::StoreError;

/// The longest diagnostic, in characters (a cut one ends in `…`).
pub(crate) const MAX_CHARS: usize = 300;

/// What replaces a secret.
const REDACTED: &str = "[redacted]";

/// The cause of a turn that ended in an error.
pub(crate) fn of_turn_error(error: &TurnError) -> String {
    match error {
        TurnError::Model { error, .. } => of_model_error(error),
        TurnError::Store(error) => of_store_error(error),
        other => one_line(&other.to_string()),
    }
}

/// A model call's failure: what the endpoint said (the client already quotes an error body's
/// message), or what became of the stream.
pub(crate) fn of_model_error(error: &ModelError) -> String {
    one_line(&error.to_string())
}

/// A session log that could not be written: a full disk and a lost lock say so first.
pub(crate) fn of_store_error(error: &StoreError) -> String {
    match error {
        StoreError::Io { path, source, .. } if is_disk_full(source) => one_line(&format!(
            "the disk is full: could not write the child's session log {}",
            path.display()
        )),
        StoreError::Locked { .. } => one_line(&format!("the session lock was lost: {error}")),
        other => one_line(&format!("could not write the child's session log: {other}")),
    }
}

fn is_disk_full(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::StorageFull || error.raw_os_error() == Some(libc::ENOSPC)
}

/// An ACP child's failure: how its process ended and the last line it wrote to stderr.
pub(crate) fn of_child_error(error: &ChildError) -> String {
    let line = match error {
        ChildError::Exited {
            stage,
            status,
            stderr,
        } => format!(
            "the ACP child exited during {stage} ({status}){}",
            last_stderr_line(stderr)
        ),
        ChildError::ConnectionLost {
            stage,
            status,
            stderr,
        } => format!(
            "the connection to the ACP child broke during {stage} ({status}){}",
            last_stderr_line(stderr)
        ),
        other => other.to_string(),
    };
    one_line(&line)
}

fn last_stderr_line(stderr: &StderrTail) -> String {
    match stderr.0.last() {
        Some(line) => format!("; last stderr line: {}", scrub_secrets(line)),
        None => String::new(),
    }
}

/// `text` on one line: runs of whitespace (line breaks included) become one space, other
/// control characters show escaped, secrets are redacted, and it is cut to [`MAX_CHARS`].
pub(crate) fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let scrubbed = scrub_secrets(&crate::text::visible(&flat));
    match scrubbed.char_indices().nth(MAX_CHARS) {
        Some((at, _)) => format!("{}…", &scrubbed[..at]),
        None => scrubbed,
    }
}

/// Whether a name (an environment variable, a `key=value` key) says its value is a secret.
fn names_a_secret(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "AUTHORIZATION",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// `text` with secrets replaced by `[redacted]`: the values of kin's own secret-named
/// environment variables, a token after `Bearer`, the value of a `key=value` or `key: value`
/// whose key names a secret, and `sk-` style API keys.
pub(crate) fn scrub_secrets(text: &str) -> String {
    let mut out = text.to_owned();
    for (name, value) in std::env::vars_os() {
        let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else {
            continue;
        };
        if value.len() >= 8 && names_a_secret(name) && out.contains(value) {
            out = out.replace(value, REDACTED);
        }
    }
    let mut words: Vec<String> = Vec::new();
    let mut redact_next = false;
    for word in out.split(' ') {
        let bare = word.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        if bare.eq_ignore_ascii_case("bearer") {
            redact_next = true;
            words.push(word.to_owned());
        } else if std::mem::take(&mut redact_next) && !word.is_empty() {
            words.push(REDACTED.to_owned());
        } else if let Some(kept) = secret_value_cut(word) {
            // `api_key=...`, `...?token=...`: the value goes.
            words.push(format!("{kept}{REDACTED}"));
        } else if word.ends_with(':') && names_a_secret(&word[..word.len() - 1]) {
            // `token: ...`: the next word goes.
            redact_next = true;
            words.push(word.to_owned());
        } else if bare.starts_with("sk-") && bare.len() >= 20 {
            words.push(word.replace(bare, REDACTED));
        } else {
            words.push(word.to_owned());
        }
    }
    words.join(" ")
}

/// For a word holding `<secret name>=<value>` (or `:`), also inside a URL's query: the word up
/// to and with that separator (what follows it goes).
fn secret_value_cut(word: &str) -> Option<&str> {
    word.match_indices(['=', ':']).find_map(|(at, _)| {
        let name_start = word[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .map_or(0, |before| before + 1);
        let has_value = at + 1 < word.len();
        (has_value && names_a_secret(&word[name_start..at])).then(|| &word[..=at])
    })
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_endpoint_error_names_its_status_and_message() {
        let error = ModelError::Http {
            status: 500,
            body: "upstream overloaded".into(),
            attempts: 1,
        };
        let turn = TurnError::Model {
            turn: 1,
            step: 2,
            error,
        };
        assert_eq!(
            of_turn_error(&turn),
            "model endpoint answered HTTP 500: upstream overloaded"
        );
        let plain = ModelError::Http {
            status: 429,
            body: "slow down\nplease".into(),
            attempts: 1,
        };
        assert_eq!(
            of_model_error(&plain),
            "model endpoint answered HTTP 429: slow down please"
        );
    }

    #[test]
    fn a_stalled_or_cut_stream_says_so() {
        let stalled = ModelError::Stalled {
            after: "60s".into(),
        };
        assert_eq!(
            of_model_error(&stalled),
            "model stream stalled: no data for 60s"
        );
        let cut = ModelError::Cut("connection reset by peer".into());
        assert_eq!(
            of_model_error(&cut),
            "model stream was cut after output began: connection reset by peer"
        );
    }

    #[test]
    fn a_full_disk_and_a_lost_lock_say_so() {
        let full = StoreError::Io {
            op: "appending to",
            path: PathBuf::from("/s/child.jsonl"),
            source: io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert_eq!(
            of_turn_error(&TurnError::Store(full)),
            "the disk is full: could not write the child's session log /s/child.jsonl"
        );
        let locked = StoreError::Locked {
            id: "c1".into(),
            pid: Some(7),
        };
        assert!(of_store_error(&locked).starts_with("the session lock was lost: session c1"));
        let other = StoreError::Io {
            op: "appending to",
            path: PathBuf::from("/s/child.jsonl"),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        };
        assert!(of_store_error(&other).starts_with("could not write the child's session log:"));
    }

    #[test]
    fn an_acp_child_exit_names_its_status_and_last_stderr_line_scrubbed() {
        let exited = ChildError::Exited {
            stage: "session/prompt".into(),
            status: "exit status: 3".into(),
            stderr: StderrTail(vec![
                "starting".into(),
                "fatal: request failed with Authorization: Bearer abcdefghijklmnop".into(),
            ]),
        };
        assert_eq!(
            of_child_error(&exited),
            "the ACP child exited during session/prompt (exit status: 3); last stderr line: \
             fatal: request failed with Authorization: Bearer [redacted]"
        );
        let lost = ChildError::ConnectionLost {
            stage: "session/prompt".into(),
            status: "exit status: 255".into(),
            stderr: StderrTail::default(),
        };
        assert_eq!(
            of_child_error(&lost),
            "the connection to the ACP child broke during session/prompt (exit status: 255)"
        );
        let timeout = ChildError::InitializeTimeout {
            timeout: Duration::from_millis(500),
            stderr: StderrTail::default(),
        };
        assert!(of_child_error(&timeout).contains("did not answer initialize within 500ms"));
    }

    #[test]
    fn secrets_are_redacted() {
        assert_eq!(
            scrub_secrets("api_key=abc123 token: xyz OPENAI_API_KEY=sk-proj-aaaaaaaaaaaaaaaaaaaa"),
            "api_key=[redacted] token: [redacted] OPENAI_API_KEY=[redacted]"
        );
        assert_eq!(
            scrub_secrets("using key sk-abcdefghijklmnopqrstuvwx, then"),
            "using key [redacted], then"
        );
        assert_eq!(
            scrub_secrets("GET https://h/v1?api_key=abc123&x=1 failed"),
            "GET https://h/v1?api_key=[redacted] failed"
        );
        assert_eq!(scrub_secrets("nothing: to see"), "nothing: to see");
    }

    #[test]
    fn a_diagnostic_is_one_capped_line() {
        let long = "word ".repeat(200);
        let line = one_line(&long);
        assert_eq!(line.chars().count(), MAX_CHARS + 1);
        assert!(line.ends_with('…'));
        assert_eq!(one_line("a\n\n  b\tc"), "a b c");
    }
}
