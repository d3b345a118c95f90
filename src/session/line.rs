//! The line codec of the session log: an [`Event`] written as one JSON line, and a line read
//! back into events ([`parse_event_line`]; packed rows of deltas expand into several).
//!
//! The fast path ([`read_delta_line`]) reads the line most of a long log is made of: a text or
//! reasoning delta in the exact layout kin writes it (`{"type":"assistant/chunk","seq":…,
//! "time":…,"data":{"turn":…,"step":…,"chunk":{"type":"text-delta","index":…,"text":"…"}}}`).
//! Reading it field by field in that order skips serde's generic map walk, which made loading a
//! long session several times slower. Any other layout (other key order, extra fields, odd
//! numbers) is left to the general parser, so what is accepted and every error message stay
//! the same.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use super::event::{AssistantChunk, BlockType, Chunk, Event, EventBody};

#[derive(Serialize)]
struct EventOut<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    seq: u64,
    time: u64,
    data: &'a EventBody,
    #[serde(rename = "sourceEventSeqs", skip_serializing_if = "Option::is_none")]
    source_event_seqs: &'a Option<Vec<u64>>,
    #[serde(rename = "surfaceOp", skip_serializing_if = "Option::is_none")]
    surface_op: &'a Option<Box<Value>>,
}

impl Serialize for Event {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        EventOut {
            kind: self.body.kind(),
            seq: self.seq,
            time: self.time,
            data: &self.body,
            source_event_seqs: &self.source_event_seqs,
            surface_op: &self.surface_op,
        }
        .serialize(serializer)
    }
}

/// One parsed line: a plain event, or a packed run of deltas (read-only storage encoding).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawLine<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    seq: Option<u64>,
    time: Option<u64>,
    seq0: Option<u64>,
    time0: Option<u64>,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
    source_event_seqs: Option<Vec<u64>>,
    surface_op: Option<Box<Value>>,
}

#[derive(Deserialize)]
struct PackedDeltas {
    turn: u32,
    step: u32,
    index: u32,
    #[serde(default)]
    texts: Vec<String>,
    #[serde(default)]
    args: Vec<String>,
    id: Option<String>,
    name: Option<String>,
}

/// Why a line could not be read as an event.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LineError {
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// An `assistant/chunk` line, read in one pass (the general path reads `data` twice).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChunkLine {
    seq: Option<u64>,
    #[serde(default)]
    time: u64,
    data: AssistantChunk,
    source_event_seqs: Option<Vec<u64>>,
    surface_op: Option<Box<Value>>,
}

/// How kin (and the reference) start a chunk line: most lines of a long log.
const CHUNK_LINE_START: &str = r#"{"type":"assistant/chunk","#;

/// The `type` of an event line as kin writes it (`{"type":"…"` first), without parsing the
/// line; `None` for a line that does not start so.
pub(crate) fn line_kind(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(b"{\"type\":\"")?;
    std::str::from_utf8(&rest[..memchr::memchr(b'"', rest)?]).ok()
}

/// Parses one event line; packed rows expand into several events. A line without `seq` (or
/// a packed row without `seq0`) is numbered from 0 (see [`parse_event_line_from`]).
pub(crate) fn parse_event_line(line: &str, out: &mut Vec<Event>) -> Result<(), LineError> {
    parse_event_line_from(line, 0, out)
}

/// Parses one event line whose event, when the line does not number it, is number `next`.
///
/// The reference's newer recordings leave out `seq` and `time` (`seq0` and `time0` in packed
/// rows): they read as the running count and 0, as the reference's own reader reads them.
/// kin always writes both.
pub(crate) fn parse_event_line_from(
    line: &str,
    next: u64,
    out: &mut Vec<Event>,
) -> Result<(), LineError> {
    if line.starts_with(CHUNK_LINE_START) {
        if let Some(event) = read_delta_line(line) {
            out.push(event);
            return Ok(());
        }
        let chunk: ChunkLine = serde_json::from_str(line)?;
        out.push(Event {
            seq: chunk.seq.unwrap_or(next),
            time: chunk.time,
            body: EventBody::AssistantChunk(chunk.data),
            source_event_seqs: chunk.source_event_seqs,
            surface_op: chunk.surface_op,
        });
        return Ok(());
    }
    let raw: RawLine<'_> = serde_json::from_str(line)?;
    let data = raw.data.map(RawValue::get).unwrap_or("{}");
    let packed_kind = match raw.kind.as_ref() {
        "text-chunks" => Some(BlockType::Text),
        "reasoning-chunks" => Some(BlockType::Reasoning),
        "tool-call-chunks" => Some(BlockType::ToolCall),
        _ => None,
    };
    if let Some(block_type) = packed_kind {
        let seq0 = raw.seq0.unwrap_or(next);
        let time = raw.time0.unwrap_or_default();
        let packed: PackedDeltas = serde_json::from_str(data)?;
        let mut push = |k: usize, chunk: Chunk| {
            let body = EventBody::AssistantChunk(AssistantChunk {
                turn: packed.turn,
                step: packed.step,
                chunk,
            });
            out.push(Event::new(seq0 + k as u64, time, body))
        };
        match block_type {
            BlockType::Text | BlockType::Reasoning => {
                for (k, text) in packed.texts.iter().enumerate() {
                    let (index, text) = (packed.index, text.clone());
                    push(
                        k,
                        match block_type {
                            BlockType::Text => Chunk::TextDelta { index, text },
                            _ => Chunk::ReasoningDelta { index, text },
                        },
                    );
                }
            }
            BlockType::ToolCall => {
                let id = packed.id.clone().unwrap_or_default();
                for (k, arg) in packed.args.iter().enumerate() {
                    push(
                        k,
                        Chunk::ToolCallDelta {
                            index: packed.index,
                            id: id.clone(),
                            name: if k == 0 { packed.name.clone() } else { None },
                            arguments_delta: arg.clone(),
                        },
                    );
                }
            }
        }
        return Ok(());
    }
    out.push(Event {
        seq: raw.seq.unwrap_or(next),
        time: raw.time.unwrap_or_default(),
        body: EventBody::decode(&raw.kind, data)?,
        source_event_seqs: raw.source_event_seqs,
        surface_op: raw.surface_op,
    });
    Ok(())
}

/// The event of `line` if it is a delta line in kin's layout; `None` for any other line.
fn read_delta_line(line: &str) -> Option<Event> {
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

    #[test]
    fn round_trips_known_and_unknown_events() {
        let lines = [
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#,
            r#"{"type":"assistant/chunk","seq":1,"time":5,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c1","name":"bash","argumentsDelta":"{"}}}"#,
            r#"{"type":"assistant/chunk","seq":2,"time":5,"data":{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"tool-calls"}}}}"#,
            r#"{"type":"request/header","seq":3,"time":5,"data":{"reason":"initial"}}"#,
            r#"{"type":"turn/end","seq":4,"time":5,"data":{"turn":1,"reason":{"kind":"error","step":1,"message":"boom"}}}"#,
            r#"{"type":"session/end-seed","seq":5,"time":5,"data":{}}"#,
        ];
        for line in lines {
            let mut events = Vec::new();
            parse_event_line(line, &mut events).unwrap();
            assert_eq!(events.len(), 1);
            assert_eq!(serde_json::to_string(&events[0]).unwrap(), line);
        }
    }

    #[test]
    fn chunk_lines_read_the_same_whatever_the_key_order() {
        let chunks = [
            r#"{"type":"block-start","index":0,"blockType":"reasoning"}"#,
            r#"{"type":"text-delta","index":1,"text":"hi"}"#,
            r#"{"type":"reasoning-delta","index":0,"text":"hm"}"#,
            r#"{"type":"tool-call-delta","index":2,"id":"c","argumentsDelta":"{"}"#,
            r#"{"type":"block-end","index":1,"block":{"type":"text","text":"hi"}}"#,
            r#"{"type":"usage","usage":{"inputTokens":3,"outputTokens":4,"reasoningTokens":1}}"#,
            r#"{"type":"finish","reason":{"kind":"error","failure":{"x":1}}}"#,
        ];
        for chunk in chunks {
            let line = format!(
                r#"{{"type":"assistant/chunk","seq":7,"time":5,"data":{{"turn":1,"step":2,"chunk":{chunk}}}}}"#
            );
            let reordered = format!(
                r#"{{"seq":7,"time":5,"data":{{"chunk":{chunk},"turn":1,"step":2}},"type":"assistant/chunk"}}"#
            );
            let (mut fast, mut general) = (Vec::new(), Vec::new());
            parse_event_line(&line, &mut fast).unwrap();
            parse_event_line(&reordered, &mut general).unwrap();
            assert_eq!(fast, general);
            assert_eq!(serde_json::to_string(&fast[0]).unwrap(), line);
        }
        for bad in [
            r#"{"type":"text-delta","index":1}"#,
            r#"{"type":"no-such-chunk","index":1}"#,
            r#"{"index":1,"text":"x"}"#,
        ] {
            let line = format!(
                r#"{{"type":"assistant/chunk","seq":7,"time":5,"data":{{"turn":1,"step":2,"chunk":{bad}}}}}"#
            );
            assert!(parse_event_line(&line, &mut Vec::new()).is_err(), "{bad}");
        }
    }

    #[test]
    fn expands_packed_rows() {
        let line = r#"{"type":"tool-call-chunks","seq0":26,"time0":9,"data":{"turn":1,"step":1,"index":1,"dt":[0,1],"id":"c","name":"bash","args":["","{","}"]}}"#;
        let mut events = Vec::new();
        parse_event_line(line, &mut events).unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events[2].seq, 28);
        let EventBody::AssistantChunk(first) = &events[0].body else {
            panic!("not a chunk")
        };
        assert!(matches!(&first.chunk, Chunk::ToolCallDelta { name: Some(n), .. } if n == "bash"));
    }
}

#[cfg(test)]
mod newer_layout_tests {
    use super::super::loaded::parse_log;
    use super::*;

    /// A log in the reference's newer layout: no `seq`/`time`, no `seq0`/`time0`.
    const NEWER: &str = concat!(
        r#"{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":0}"#,
        "\n",
        r#"{"type":"turn/start","data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#,
        "\n",
        r#"{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}"#,
        "\n",
        r#"{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[0,0,0],"texts":["a","b","c"]}}"#,
        "\n",
        r#"{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"stop"}}}}"#,
        "\n",
    );

    #[test]
    fn lines_without_seq_and_time_are_numbered_by_the_running_count() {
        let log = parse_log(std::path::Path::new("newer.jsonl"), NEWER.as_bytes()).unwrap();
        assert!(log.set_aside.is_empty(), "{:?}", log.set_aside);
        let seqs: Vec<(u64, u64)> = log.events.iter().map(|e| (e.seq, e.time)).collect();
        assert_eq!(seqs, [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]);
        assert!(matches!(
            &log.events[3].body,
            EventBody::AssistantChunk(AssistantChunk { chunk: Chunk::TextDelta { text, .. }, .. }) if text == "b"
        ));
    }

    #[test]
    fn kin_still_writes_seq_and_time() {
        let event = Event::new(
            7,
            5,
            EventBody::SessionEndSeed(super::super::event::Empty {}),
        );
        let line = serde_json::to_string(&event).unwrap();
        assert_eq!(
            line,
            r#"{"type":"session/end-seed","seq":7,"time":5,"data":{}}"#
        );
        let mut read = Vec::new();
        parse_event_line_from(&line, 99, &mut read).unwrap();
        assert_eq!((read[0].seq, read[0].time), (7, 5));
    }
}
