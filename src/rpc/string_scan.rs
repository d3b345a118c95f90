//! Finds the long plain strings of a line while the line is still being read, and hashes
//! each as its bytes arrive. A pasted image is megabytes of base64 that come through the pipe
//! a megabyte at a time: scanned and hashed between two reads, that work is done by the time
//! the line ends, instead of after it (see `long_strings`).

/// Lines and strings shorter than this (in bytes) are not looked at.
pub(crate) const LONG: usize = 64 * 1024;

/// A string of the line (its text, between the quotes) that is at least [`LONG`] bytes of
/// printable ASCII without `\`: the same text in JSON and out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// The BLAKE3 hash of the text.
    pub(crate) hash: blake3::Hash,
}

/// The scan of one line, fed the line as it grows.
#[derive(Default)]
pub(crate) struct Scanner {
    /// Where the scan goes on (an offset in the line; past its end after a `\` that ends it).
    at: usize,
    open: Option<Open>,
    found: Vec<Found>,
}

/// The string the scan is in.
struct Open {
    start: usize,
    /// Printable ASCII without `\` so far.
    plain: bool,
    /// Once it is [`LONG`] and plain: the hash of its text up to `hashed`.
    hasher: Option<(blake3::Hasher, usize)>,
}

impl Scanner {
    /// Scans what `line` (the line read so far, whose start it was fed before) adds.
    pub(crate) fn feed(&mut self, line: &[u8]) {
        if line.len() < LONG {
            return;
        }
        while self.at < line.len() {
            let Some(open) = &mut self.open else {
                match memchr::memchr(b'"', &line[self.at..]) {
                    Some(quote) => {
                        let start = self.at + quote + 1;
                        self.open = Some(Open {
                            start,
                            plain: true,
                            hasher: None,
                        });
                        self.at = start;
                    }
                    None => self.at = line.len(),
                }
                continue;
            };
            let rest = &line[self.at..];
            let stop = match open.plain {
                true => first_not_plain(rest),
                false => memchr::memchr2(b'"', b'\\', rest),
            };
            let Some(stop) = stop.map(|at| self.at + at) else {
                if open.plain {
                    open.hash_up_to(line, line.len());
                }
                self.at = line.len();
                break;
            };
            match line[stop] {
                b'"' => {
                    if open.plain && stop - open.start >= LONG {
                        open.hash_up_to(line, stop);
                        if let Some((hasher, _)) = &open.hasher {
                            self.found.push(Found {
                                start: open.start,
                                end: stop,
                                hash: hasher.finalize(),
                            });
                        }
                    }
                    self.open = None;
                    self.at = stop + 1;
                }
                byte => {
                    open.plain = false;
                    open.hasher = None;
                    // An escape covers the byte after the `\` (which may not be read yet).
                    self.at = stop + if byte == b'\\' { 2 } else { 1 };
                }
            }
        }
    }

    /// What the scan found; the scanner starts afresh for the next line.
    pub(crate) fn finish(&mut self) -> Vec<Found> {
        std::mem::take(self).found
    }
}

impl Open {
    /// Hashes the text up to `end` once the string is long enough to be worth it.
    fn hash_up_to(&mut self, line: &[u8], end: usize) {
        if end - self.start < LONG {
            return;
        }
        let (hasher, hashed) = self
            .hasher
            .get_or_insert_with(|| (blake3::Hasher::new(), self.start));
        hasher.update(&line[*hashed..end]);
        *hashed = end;
    }
}

/// The first byte of `text` that is a quote, a backslash or not printable ASCII. Checked a
/// block at a time without an early exit inside one, so it runs at memory speed.
fn first_not_plain(text: &[u8]) -> Option<usize> {
    let special = |b: u8| (b.wrapping_sub(0x20) >= 0x5f) | (b == b'"') | (b == b'\\');
    let mut at = 0;
    for block in text.chunks(64) {
        if block.iter().fold(false, |any, &b| any | special(b)) {
            return block.iter().position(|&b| special(b)).map(|i| at + i);
        }
        at += block.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `line` in pieces of `step` bytes, as reads would.
    fn scan(line: &[u8], step: usize) -> Vec<Found> {
        let mut scanner = Scanner::default();
        let mut end = 0;
        while end < line.len() {
            end = (end + step).min(line.len());
            scanner.feed(&line[..end]);
        }
        scanner.finish()
    }

    #[test]
    fn long_plain_strings_are_found_with_their_hash_however_the_line_is_read() {
        let plain = "Ab+/".repeat(LONG / 2);
        let escaped = format!("{}\\\"{}", "x".repeat(LONG), "y".repeat(LONG));
        let unicode = "é".repeat(LONG);
        let line = format!(
            r#"{{"a":"{plain}","b":"{escaped}","c":"short","d":"{unicode}","e":["{plain}"]}}"#
        );
        let line = line.as_bytes();
        let first = line
            .windows(plain.len())
            .position(|w| w == plain.as_bytes())
            .unwrap();
        let expected = scan(line, line.len());
        assert_eq!(expected.len(), 2, "the plain strings alone");
        assert_eq!(expected[0].start, first);
        assert_eq!(expected[0].end, first + plain.len());
        assert_eq!(expected[0].hash, blake3::hash(plain.as_bytes()));
        assert_eq!(&line[expected[1].start..expected[1].end], plain.as_bytes());
        for step in [1000, 4096, 65_536, 100_003] {
            assert_eq!(scan(line, step), expected, "read {step} bytes at a time");
        }
    }

    #[test]
    fn short_lines_unterminated_strings_and_escapes_at_a_read_end_find_nothing() {
        let short = format!(r#"{{"a":"{}"}}"#, "x".repeat(LONG - 10));
        assert!(scan(short.as_bytes(), 7).is_empty());
        let unterminated = format!(r#"{{"a":"{}"#, "x".repeat(2 * LONG));
        assert!(scan(unterminated.as_bytes(), 999).is_empty());
        // A `\` that ends one read escapes the first byte of the next: `\"` does not end it.
        let mut line = format!(r#"{{"a":"{}\"#, "x".repeat(LONG)).into_bytes();
        let cut = line.len();
        line.extend_from_slice(format!("\"{}\"}}", "z".repeat(LONG)).as_bytes());
        let mut scanner = Scanner::default();
        scanner.feed(&line[..cut]);
        scanner.feed(&line);
        assert!(scanner.finish().is_empty(), "one escaped string, not plain");
    }
}
