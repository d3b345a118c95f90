//! Permission asks of `kin run` in mode `ask`: on the terminal when stdin and stderr are one,
//! with the choices an editor offers; refused, naming `--mode`, when there is nobody to ask.
//! This is the only editor service `kin run` has: files and commands stay local.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use crate::tools::client::{
    ClientError, ClientFeatures, ClientResult, PermissionAnswer, PermissionPrompt,
};
use crate::tools::ClientBridge;

/// What a refused ask tells the model and the user.
pub(crate) const NO_TERMINAL: &str =
    "there is no terminal to ask on (kin run's stdin or stderr is not \
     a terminal); choose what it may do with `kin run --mode allow` or `--mode read-only`";

/// Asks on the terminal, one question at a time (parallel tool calls wait their turn).
pub(crate) struct TerminalAsk {
    interactive: bool,
    one_at_a_time: Arc<tokio::sync::Mutex<()>>,
}

impl TerminalAsk {
    /// Asks on the terminal if stdin and stderr are both one, else refuses every ask.
    pub(crate) fn new() -> Self {
        Self {
            interactive: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
            one_at_a_time: Arc::default(),
        }
    }
}

impl Default for TerminalAsk {
    fn default() -> Self {
        Self::new()
    }
}

/// The question for `prompt`, with the options an editor shows for it.
fn question(prompt: &PermissionPrompt) -> String {
    let words = prompt.always_words();
    format!(
        "kin: permission needed: {title}\n\
         kin:   [y] Allow  [a] Always allow {words} this session  \
         [n] Reject  [never] Always reject {words} this session\n\
         kin: allow? [y/a/n/never] ",
        title = prompt.title
    )
}

/// Reads a typed answer; `None` asks again. An empty line is no.
fn parse_answer(line: &str) -> Option<PermissionAnswer> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(PermissionAnswer::AllowOnce),
        "a" | "always" => Some(PermissionAnswer::AllowAlways),
        "" | "n" | "no" => Some(PermissionAnswer::RejectOnce),
        "never" => Some(PermissionAnswer::RejectAlways),
        _ => None,
    }
}

/// The question for a choice among `choices` (an MCP server's), numbered from 1.
fn choice_question(title: &str, choices: &[String]) -> String {
    let mut text = format!("kin: {title}\n");
    for (n, choice) in choices.iter().enumerate() {
        text.push_str(&format!("kin:   [{}] {choice}\n", n + 1));
    }
    text.push_str(&format!("kin: choose [1-{}] (empty: none) ", choices.len()));
    text
}

/// Reads a typed choice of `count`: `Some(None)` for none (an empty line), `None` asks again.
fn parse_choice(line: &str, count: usize) -> Option<Option<usize>> {
    let line = line.trim();
    if line.is_empty() {
        return Some(None);
    }
    match line.parse::<usize>() {
        Ok(n) if (1..=count).contains(&n) => Some(Some(n - 1)),
        _ => None,
    }
}

/// Asks until `parse` takes the line typed; the end of input gives `at_end`.
fn ask_blocking<T>(question: &str, parse: impl Fn(&str) -> Option<T>, at_end: T) -> T {
    let stdin = std::io::stdin();
    loop {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(question.as_bytes());
        let _ = err.flush();
        drop(err);
        let mut line = String::new();
        match stdin.lock().read_line(&mut line) {
            Ok(0) | Err(_) => return at_end,
            Ok(_) => {
                if let Some(answer) = parse(&line) {
                    return answer;
                }
            }
        }
    }
}

impl ClientBridge for TerminalAsk {
    fn features(&self) -> ClientFeatures {
        ClientFeatures::default()
    }

    fn for_child(self: Arc<Self>, _child_session: &str) -> Arc<dyn ClientBridge> {
        self
    }

    fn request_permission(
        &self,
        prompt: PermissionPrompt,
        cancel: CancellationToken,
    ) -> ClientResult<PermissionAnswer> {
        let reply = Reply {
            at_end: PermissionAnswer::RejectOnce,
            cancelled: PermissionAnswer::Cancelled,
        };
        self.ask(question(&prompt), parse_answer, reply, cancel)
    }

    fn choose(
        &self,
        _call_id: String,
        title: String,
        choices: Vec<String>,
        cancel: CancellationToken,
    ) -> ClientResult<Option<usize>> {
        let count = choices.len();
        let parse = move |line: &str| parse_choice(line, count);
        let reply = Reply {
            at_end: None,
            cancelled: None,
        };
        self.ask(choice_question(&title, &choices), parse, reply, cancel)
    }
}

/// What an ask gives without an answer typed.
struct Reply<T> {
    /// At the end of input (or a failed read).
    at_end: T,
    /// When the call is cancelled first.
    cancelled: T,
}

impl TerminalAsk {
    /// Asks `question` once the earlier asks are answered, reading what is typed with `parse`.
    fn ask<T: Clone + Send + 'static>(
        &self,
        question: String,
        parse: impl Fn(&str) -> Option<T> + Send + 'static,
        reply: Reply<T>,
        cancel: CancellationToken,
    ) -> ClientResult<T> {
        if !self.interactive {
            let error = ClientError::NobodyToAsk(NO_TERMINAL.into());
            return futures::future::ready(Err(error)).boxed();
        }
        let one_at_a_time = self.one_at_a_time.clone();
        async move {
            let _turn = tokio::select! {
                turn = one_at_a_time.lock_owned() => turn,
                () = cancel.cancelled() => return Ok(reply.cancelled),
            };
            let at_end = reply.at_end.clone();
            // A blocked read cannot be interrupted; on cancel it is left to the process exit.
            let answer =
                tokio::task::spawn_blocking(move || ask_blocking(&question, parse, at_end));
            tokio::select! {
                answer = answer => Ok(answer.unwrap_or(reply.at_end)),
                () = cancel.cancelled() => Ok(reply.cancelled),
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{ToolDisplay, ToolKind};

    #[test]
    fn answers_parse_as_typed_and_anything_else_asks_again() {
        use PermissionAnswer::*;
        for (typed, answer) in [
            ("y\n", Some(AllowOnce)),
            ("YES\n", Some(AllowOnce)),
            ("a\n", Some(AllowAlways)),
            (" always \n", Some(AllowAlways)),
            ("n\n", Some(RejectOnce)),
            ("\n", Some(RejectOnce)),
            ("never\n", Some(RejectAlways)),
            ("sure\n", None),
        ] {
            assert_eq!(parse_answer(typed), answer, "{typed:?}");
        }
    }

    #[test]
    fn a_choice_is_its_number_an_empty_line_is_none_and_anything_else_asks_again() {
        for (typed, picked) in [
            ("1\n", Some(Some(0))),
            (" 3 \n", Some(Some(2))),
            ("\n", Some(None)),
            ("0\n", None),
            ("4\n", None),
            ("red\n", None),
        ] {
            assert_eq!(parse_choice(typed, 3), picked, "{typed:?}");
        }
        let choices = ["red".to_owned(), "green".to_owned()];
        let text = choice_question("MCP server `paint` asks: Which colour?", &choices);
        assert!(
            text.contains("Which colour?\nkin:   [1] red\nkin:   [2] green\n"),
            "{text}"
        );
        assert!(text.ends_with("choose [1-2] (empty: none) "), "{text}");
    }

    #[test]
    fn the_question_shows_the_title_and_the_editor_options() {
        let prompt = PermissionPrompt {
            call_id: "c1".into(),
            title: "Run `ls -la`".into(),
            kind: ToolKind::Execute,
            display: ToolDisplay::default(),
            raw_input: None,
            server_tool: None,
        };
        let text = question(&prompt);
        assert!(text.contains("Run `ls -la`"), "{text}");
        assert!(
            text.contains("Always allow commands this session"),
            "{text}"
        );
        assert!(text.contains("[y/a/n/never]"), "{text}");
    }

    #[tokio::test]
    async fn without_a_terminal_asks_are_refused_naming_the_mode_flag() {
        let ask = TerminalAsk {
            interactive: false,
            one_at_a_time: Arc::default(),
        };
        let prompt = PermissionPrompt {
            call_id: "c1".into(),
            title: "Run `true`".into(),
            kind: ToolKind::Execute,
            display: ToolDisplay::default(),
            raw_input: None,
            server_tool: None,
        };
        let error = ask
            .request_permission(prompt, CancellationToken::new())
            .await
            .unwrap_err();
        assert!(error.to_string().contains("--mode allow"), "{error}");
    }
}
