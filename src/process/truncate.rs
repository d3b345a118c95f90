//! Keeping large outputs small for the model: the head and the tail are kept, the middle is
//! replaced by a note saying how much was cut. [`HeadTail`] does it on a stream of bytes without
//! holding the whole output.

use std::collections::VecDeque;

/// The note put where bytes were cut.
fn cut_note(cut: usize) -> String {
    format!("\n[... {cut} bytes cut from the middle of the output ...]\n")
}

/// `text` itself if it has at most `max` bytes, else its head and tail (about `max / 2` bytes
/// each, on character boundaries) around a note.
pub(crate) fn head_tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut sink = HeadTail::new(max / 2, max - max / 2);
    sink.push(text.as_bytes());
    sink.finish()
}

/// Collects a byte stream, keeping its first `head` and last `tail` bytes.
#[derive(Debug, Clone)]
pub struct HeadTail {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_max: usize,
    tail_max: usize,
    total: usize,
}

impl HeadTail {
    pub(crate) fn new(head_max: usize, tail_max: usize) -> Self {
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_max,
            tail_max,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let room = self.head_max.saturating_sub(self.head.len());
        let to_head = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..to_head]);
        bytes = &bytes[to_head..];
        if self.tail_max == 0 {
            return;
        }
        if bytes.len() >= self.tail_max {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_max..]);
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_max);
            self.tail.drain(..overflow);
            self.tail.extend(bytes);
        }
    }

    /// Bytes seen in total.
    #[cfg(test)]
    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// Bytes dropped from the middle.
    pub(crate) fn cut(&self) -> usize {
        self.total - self.head.len() - self.tail.len()
    }

    /// The kept text (lossy UTF-8), with the note when something was cut.
    pub(crate) fn finish(self) -> String {
        self.snapshot()
    }

    /// What [`HeadTail::finish`] would return now.
    pub(crate) fn snapshot(&self) -> String {
        let cut = self.cut();
        let tail_bytes: Vec<u8> = self.tail.iter().copied().collect();
        if cut == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail_bytes);
            return String::from_utf8_lossy(&all).into_owned();
        }
        if self.head.is_empty() {
            // Tail only (an editor-style terminal buffer): no note, the caller reports the cut.
            return String::from_utf8_lossy(trim_start_partial(&tail_bytes)).into_owned();
        }
        // Cut on character boundaries: drop a partial character at the seams.
        let head = trim_end_partial(&self.head);
        let tail = trim_start_partial(&tail_bytes);
        let dropped = (self.head.len() - head.len()) + (tail_bytes.len() - tail.len());
        format!(
            "{}{}{}",
            String::from_utf8_lossy(head),
            cut_note(cut + dropped),
            String::from_utf8_lossy(tail)
        )
    }
}

fn trim_end_partial(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes,
        Err(error) if error.error_len().is_none() => &bytes[..error.valid_up_to()],
        Err(_) => bytes,
    }
}

fn trim_start_partial(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
        .count();
    &bytes[skip..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged_and_long_text_keeps_both_ends() {
        assert_eq!(head_tail("hello", 10), "hello");
        let text: String = (0..1000).map(|i| format!("{i}\n")).collect();
        let out = head_tail(&text, 100);
        assert!(out.starts_with("0\n1\n"));
        assert!(out.ends_with("998\n999\n"));
        let cut = text.len() - 100;
        assert!(out.contains(&format!("[... {cut} bytes cut")), "{out}");
    }

    #[test]
    fn streaming_keeps_the_last_bytes_and_never_splits_characters() {
        let mut sink = HeadTail::new(4, 4);
        for chunk in ["ab", "cdef", "ghij", "kl"] {
            sink.push(chunk.as_bytes());
        }
        assert_eq!(sink.total(), 12);
        assert_eq!(sink.cut(), 4);
        assert!(sink.finish().ends_with("ijkl"));

        let mut sink = HeadTail::new(3, 3);
        sink.push("ééééé".as_bytes());
        let out = sink.finish();
        assert!(out.starts_with('é'));
        assert!(out.ends_with('é'));
        assert!(!out.contains('\u{fffd}'), "{out}");
    }
}
