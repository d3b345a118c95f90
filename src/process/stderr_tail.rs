//! The last lines a child process wrote to stderr, kept for the error that names its failure
//! (ACP children, MCP servers). The pipe is read to its end so the child never blocks on it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};

use crate::sync::lock;

/// The longest line read in one piece: a line without end must not grow without end.
const READ_LIMIT: u64 = 64 * 1024;

/// Reads `pipe` to its end, keeping in `kept` the last `lines` non-empty lines, each cut to
/// `chars` characters (a cut line ends in `…`).
pub(crate) async fn keep_last_lines(
    pipe: impl AsyncRead + Unpin,
    kept: Arc<Mutex<VecDeque<String>>>,
    lines: usize,
    chars: usize,
) {
    let mut reader = BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader)
            .take(READ_LIMIT)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end();
                if text.is_empty() {
                    continue;
                }
                let mut cut: String = text.chars().take(chars).collect();
                if cut.len() < text.len() {
                    cut.push('…');
                }
                let mut kept = lock(&kept);
                if kept.len() == lines {
                    kept.pop_front();
                }
                kept.push_back(cut);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_the_last_lines_are_kept_and_long_ones_are_cut() {
        let kept = Arc::new(Mutex::new(VecDeque::new()));
        let input = b"one\n\ntwo\nthree\nfourfourfour\n".as_slice();
        keep_last_lines(input, kept.clone(), 2, 5).await;
        assert_eq!(*lock(&kept), ["three", "fourf…"]);
    }
}
