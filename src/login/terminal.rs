//! The terminal side of `kin login`: questions on stderr, answers read a line at a time from
//! stdin on a blocking thread (so Ctrl-C can end the wait), a key read with the echo off. The
//! terminal's settings are put back however the sign-in ends.

use std::io::{BufRead, IsTerminal, Write};

use nix::sys::termios::{self, LocalFlags, SetArg, Termios};

/// Why no answer came.
#[derive(Debug, thiserror::Error)]
pub enum NoAnswer {
    /// Ctrl-D or the end of stdin.
    #[error("stdin closed before the sign-in was complete")]
    Closed,
    /// Reading the terminal failed.
    #[error("reading the terminal failed: {0}")]
    Broken(std::io::Error),
}

/// The terminal of one sign-in; dropping it restores the settings it found.
pub(crate) struct Terminal {
    saved: Option<Termios>,
}

impl Terminal {
    /// Takes note of stdin's settings when it is a terminal.
    pub(crate) fn open() -> Self {
        let stdin = std::io::stdin();
        let saved = stdin
            .is_terminal()
            .then(|| termios::tcgetattr(&stdin).ok())
            .flatten();
        Self { saved }
    }

    /// Whether stdin is a terminal a person answers at.
    pub(crate) fn interactive(&self) -> bool {
        self.saved.is_some()
    }

    /// Prints `text` (a question or a note) on stderr.
    pub(crate) fn say(&self, text: &str) {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
    }

    /// Asks `question` and returns the answer, trimmed.
    pub(crate) async fn ask(&self, question: &str) -> Result<String, NoAnswer> {
        self.say(question);
        read_line().await
    }

    /// Asks `question` and reads the answer with the echo off (nothing typed is shown).
    pub(crate) async fn ask_hidden(&self, question: &str) -> Result<String, NoAnswer> {
        // The echo goes off before the question shows: a key typed (or pasted) the moment
        // the prompt appears must not reach the screen.
        let echo_off = self.saved.as_ref().map(|saved| {
            let mut quiet = saved.clone();
            quiet.local_flags.remove(LocalFlags::ECHO);
            // The newline the user types still shows, so the next line starts afresh.
            quiet.local_flags.insert(LocalFlags::ECHONL);
            quiet
        });
        if let Some(quiet) = &echo_off {
            set(quiet);
        }
        self.say(question);
        let answer = read_line().await;
        if let Some(saved) = &self.saved {
            set(saved);
        }
        answer
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            set(saved);
        }
    }
}

fn set(settings: &Termios) {
    if let Err(error) = termios::tcsetattr(std::io::stdin(), SetArg::TCSANOW, settings) {
        tracing::debug!(%error, "could not set the terminal");
    }
}

/// One line of stdin without its line end, read on a blocking thread.
async fn read_line() -> Result<String, NoAnswer> {
    let read = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map(|n| (n, line))
    });
    match read.await {
        Ok(Ok((0, _))) => Err(NoAnswer::Closed),
        Ok(Ok((_, line))) => Ok(line.trim().to_owned()),
        Ok(Err(error)) => Err(NoAnswer::Broken(error)),
        Err(error) => Err(NoAnswer::Broken(std::io::Error::other(error))),
    }
}
