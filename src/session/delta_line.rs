//! A fast reader for the line most of a long log is made of: a text or reasoning delta in the
//! exact layout kin writes it (`{"type":"assistant/chunk","seq":…,"time":…,"data":{"turn":…,
//! "step":…,"chunk":{"type":"text-delta","index":…,"text":"…"}}}`). Reading it field by field
//! in that order skips serde's generic map walk, which made loading a long session several
//! times slower. Any other layout (other key order, extra fields, odd numbers) is left to the
//! general parser, so what is accepted and every error message stay the same.

use super::event::{AssistantChunk, Chunk, Event, EventBody};

/// The event of `line` if it is a delta line in kin's layout; `None` for any other line.
pub(super) fn read_delta_line(line: &str) -> Option<Event> {
    let mut rest = Rest(line);
    rest.tag(r#"{"type":"assistant/chunk","seq":"#)?;
    let seq = rest.number()?;
    rest.tag(r#","time":"#)?;
    let time = rest.number()?;
    rest.tag(r#","data":{"turn":"#)?;
    let turn = rest.number()?;
    rest.tag(r#","step":"#)?;
    let step = rest.number()?;
    rest.tag(r#","chunk":{"type":""#)?;
    let reasoning = if rest.tag(r#"text-delta""#).is_some() {
        false
    } else {
        rest.tag(r#"reasoning-delta""#)?;
        true
    };
    rest.tag(r#","index":"#)?;
    let index = rest.number()?;
    rest.tag(r#","text":"#)?;
    let text = rest.string()?;
    if rest.0 != "}}}" {
        return None;
    }
    let chunk = if reasoning {
        Chunk::ReasoningDelta { index, text }
    } else {
        Chunk::TextDelta { index, text }
    };
    let body = EventBody::AssistantChunk(AssistantChunk { turn, step, chunk });
    Some(Event::new(seq, time, body))
}

/// The part of a line not read yet.
struct Rest<'a>(&'a str);

impl Rest<'_> {
    fn tag(&mut self, tag: &str) -> Option<()> {
        self.0 = self.0.strip_prefix(tag)?;
        Some(())
    }

    /// A JSON non-negative integer that fits `T` (no sign, fraction, exponent or leading zero).
    fn number<T: TryFrom<u64>>(&mut self) -> Option<T> {
        let digits = self.0.bytes().take_while(u8::is_ascii_digit).count();
        let text = &self.0.as_bytes()[..digits];
        if digits == 0 || (digits > 1 && text[0] == b'0') {
            return None;
        }
        let mut value = 0u64;
        for digit in text {
            value = value
                .checked_mul(10)?
                .checked_add(u64::from(digit - b'0'))?;
        }
        let number = T::try_from(value).ok()?;
        self.0 = &self.0[digits..];
        Some(number)
    }

    /// A JSON string; escapes are decoded by serde_json.
    fn string(&mut self) -> Option<String> {
        let bytes = self.0.as_bytes();
        if bytes.first() != Some(&b'"') {
            return None;
        }
        let (mut end, mut escaped) = (1, false);
        loop {
            match *bytes.get(end)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    end += 2;
                }
                // Not allowed unescaped in JSON: the general parser reports it.
                0..=0x1f => return None,
                _ => end += 1,
            }
        }
        // `end` is at an ASCII quote, so on a character boundary.
        let text = if escaped {
            serde_json::from_str(&self.0[..=end]).ok()?
        } else {
            self.0[1..end].to_owned()
        };
        self.0 = &self.0[end + 1..];
        Some(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::event::parse_event_line;

    fn line(chunk: &str) -> String {
        format!(
            r#"{{"type":"assistant/chunk","seq":12,"time":1767225600000,"data":{{"turn":3,"step":2,"chunk":{chunk}}}}}"#
        )
    }

    /// The same event with its keys in another order: only serde reads it.
    fn reordered(chunk: &str) -> String {
        format!(
            r#"{{"seq":12,"time":1767225600000,"data":{{"chunk":{chunk},"turn":3,"step":2}},"type":"assistant/chunk"}}"#
        )
    }

    #[test]
    fn reads_deltas_as_the_general_parser_does() {
        for chunk in [
            r#"{"type":"text-delta","index":0,"text":"token1 of turn 2; "}"#,
            r#"{"type":"reasoning-delta","index":4,"text":"hm"}"#,
            r#"{"type":"text-delta","index":0,"text":""}"#,
            r#"{"type":"text-delta","index":0,"text":"a \"quoted\" line\nand \\ \u00e9 é \ud83d\ude00"}"#,
        ] {
            let fast = read_delta_line(&line(chunk)).expect("kin's own layout");
            let mut general = Vec::new();
            parse_event_line(&reordered(chunk), &mut general).unwrap();
            assert_eq!(general, [fast], "{chunk}");
        }
    }

    #[test]
    fn leaves_every_other_line_to_the_general_parser() {
        for chunk in [
            r#"{"type":"text-delta","text":"x","index":0}"#,
            r#"{"type":"text-delta","index":01,"text":"x"}"#,
            r#"{"type":"text-delta","index":-1,"text":"x"}"#,
            r#"{"type":"text-delta","index":4294967296,"text":"x"}"#,
            r#"{"type":"text-delta","index":99999999999999999999,"text":"x"}"#,
            r#"{"type":"text-delta","index":1.0,"text":"x"}"#,
            r#"{"type":"text-delta","index":0,"text":"tab	raw"}"#,
            r#"{"type":"text-delta","index":0,"text":"bad \q escape"}"#,
            r#"{"type":"text-delta","index":0,"text":"x","extra":1}"#,
            r#"{"type":"block-start","index":0,"blockType":"text"}"#,
            r#"{"type":"text-delta","index":0,"text":"unterminated}"#,
        ] {
            assert!(read_delta_line(&line(chunk)).is_none(), "{chunk}");
        }
        let with_seqs = r#"{"type":"assistant/chunk","seq":1,"time":2,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"x"}},"surfaceOp":"append"}"#;
        assert!(read_delta_line(with_seqs).is_none());
        let trailing = format!("{} ", line(r#"{"type":"text-delta","index":0,"text":"x"}"#));
        assert!(read_delta_line(&trailing).is_none());
    }
}
