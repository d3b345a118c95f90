//! A user message's parts -> the `content` of a Chat Completions user message.
//!
//! Text, links and attached files become text; a message whose parts are all text is sent as
//! one string (as it always was). Images become `image_url` parts (base64 data URLs) when the
//! model takes images, else a one-line placeholder. Payloads are read from the session's blob
//! directory; one that is missing there becomes a placeholder too.

use std::path::Path;

use serde_json::{json, Value};

use crate::session::blobs;
use crate::session::UserPart;

/// How to encode: whether images go as images, and where the blobs are.
#[derive(Clone, Copy)]
pub(crate) struct UserEncoding<'a> {
    pub(crate) images: bool,
    pub(crate) blobs: Option<&'a Path>,
}

enum Piece {
    Text(String),
    Image {
        mime_type: String,
        /// Base64, normally, as read from the blobs.
        base64: String,
    },
}

/// Appends the user message `{"role":"user","content":…}` for `parts` to `out`. An image's
/// base64 is written into the body once, as it is (it needs no JSON escaping; text that would
/// is escaped), not built into a JSON value and serialised again.
pub(crate) fn write_message(parts: &[UserPart], how: UserEncoding<'_>, out: &mut Vec<u8>) {
    let pieces: Vec<Piece> = parts.iter().map(|part| piece(part, how)).collect();
    out.extend_from_slice(br#"{"role":"user","content":"#);
    if pieces.iter().all(|p| matches!(p, Piece::Text(_))) {
        let texts: Vec<&str> = pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Text(text) => Some(text.as_str()),
                Piece::Image { .. } => None,
            })
            .collect();
        push_json(out, &Value::String(texts.join("\n\n")));
    } else {
        out.push(b'[');
        for (at, piece) in pieces.iter().enumerate() {
            if at > 0 {
                out.push(b',');
            }
            match piece {
                Piece::Text(text) => push_json(out, &json!({"type": "text", "text": text})),
                Piece::Image { mime_type, base64 } => {
                    out.extend_from_slice(br#"{"type":"image_url","image_url":{"url":"#);
                    push_data_url(out, mime_type, base64);
                    out.extend_from_slice(b"}}");
                }
            }
        }
        out.push(b']');
    }
    out.push(b'}');
}

fn push_json(out: &mut Vec<u8>, value: &Value) {
    out.extend_from_slice(value.to_string().as_bytes());
}

/// `"data:<mime>;base64,<base64>"` as a JSON string.
fn push_data_url(out: &mut Vec<u8>, mime_type: &str, base64: &str) {
    if needs_escaping(mime_type.as_bytes()) || needs_escaping(base64.as_bytes()) {
        push_json(
            out,
            &Value::String(format!("data:{mime_type};base64,{base64}")),
        );
        return;
    }
    out.reserve(base64.len() + mime_type.len() + 16);
    out.extend_from_slice(b"\"data:");
    out.extend_from_slice(mime_type.as_bytes());
    out.extend_from_slice(b";base64,");
    out.extend_from_slice(base64.as_bytes());
    out.push(b'"');
}

/// Whether JSON needs any of `bytes` escaped (a control character, a quote or a backslash).
/// Checked a block at a time, without an early exit inside one, so it runs at memory speed.
fn needs_escaping(bytes: &[u8]) -> bool {
    bytes.chunks(64).any(|block| {
        block.iter().fold(false, |any, &b| {
            any | (b < 0x20) | (b == b'"') | (b == b'\\')
        })
    })
}

fn read_text(how: UserEncoding<'_>, blob: &str, size: u64) -> Option<String> {
    how.blobs.and_then(|dir| blobs::get_text(dir, blob, size))
}

fn piece(part: &UserPart, how: UserEncoding<'_>) -> Piece {
    match part {
        UserPart::Text { text } => Piece::Text(text.clone()),
        UserPart::ResourceLink { uri, name, .. } => Piece::Text(format!("[{name}]({uri})")),
        UserPart::Image {
            mime_type,
            blob,
            size,
            ..
        } => {
            let data = how.images.then(|| read_text(how, blob, *size)).flatten();
            match data {
                Some(base64) => Piece::Image {
                    mime_type: mime_type.clone(),
                    base64,
                },
                None if how.images => Piece::Text(format!(
                    "[image ({mime_type}, {size} bytes of base64) not shown: its data is missing]"
                )),
                None => Piece::Text(image_placeholder(mime_type, *size)),
            }
        }
        UserPart::Resource {
            uri,
            mime_type,
            text,
            blob,
            size,
            binary,
            cap,
            ..
        } => {
            let mime = mime_type.as_deref().unwrap_or("application/octet-stream");
            if *binary {
                return Piece::Text(format!(
                    "[attached file {uri} ({mime}, {size} bytes of base64): binary content not shown]"
                ));
            }
            let body = match (text, blob) {
                (Some(text), _) => Some(text.clone()),
                (None, Some(blob)) => read_text(how, blob, *size),
                (None, None) => None,
            };
            let Some(body) = body else {
                return Piece::Text(format!("[attached file {uri}: its content is missing]"));
            };
            let capped = match cap {
                Some(cap) => format!(" (only its first {cap} bytes are attached)"),
                None => String::new(),
            };
            Piece::Text(format!(
                "Attached file {uri}{capped}:\n<attached-file uri=\"{uri}\">\n{body}\n</attached-file>"
            ))
        }
    }
}

/// What a model that does not take images gets for one.
pub(crate) fn image_placeholder(mime_type: &str, size: u64) -> String {
    format!(
        "[an image ({mime_type}, {size} bytes of base64) was attached here; this model does not take images]"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `content` of the message written for `parts`.
    fn content(parts: &[UserPart], how: UserEncoding<'_>) -> Value {
        let mut out = Vec::new();
        write_message(parts, how, &mut out);
        let message: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(message["role"], "user");
        message["content"].clone()
    }

    fn image(blob: &str) -> UserPart {
        UserPart::Image {
            mime_type: "image/png".into(),
            blob: blob.into(),
            size: 4,
            uri: None,
        }
    }

    #[test]
    fn all_text_stays_one_string_and_images_become_parts_only_when_taken() {
        let home = tempfile::tempdir().unwrap();
        let sha = blobs::put(home.path(), b"iVBO").unwrap();
        let parts = vec![UserPart::text("look"), image(&sha)];
        let with = UserEncoding {
            images: true,
            blobs: Some(home.path()),
        };
        assert_eq!(
            content(&parts, with),
            json!([{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}])
        );
        let without = UserEncoding {
            images: false,
            ..with
        };
        let text = content(&parts, without);
        assert!(text.as_str().unwrap().contains("does not take images"));
        let missing = content(&[image(&"0".repeat(64))], with);
        assert!(missing.as_str().unwrap().contains("missing"));
    }

    #[test]
    fn base64_goes_in_as_it_is_and_anything_else_is_escaped() {
        let home = tempfile::tempdir().unwrap();
        let odd = blobs::put(home.path(), b"a\"b\\c\n").unwrap();
        let with = UserEncoding {
            images: true,
            blobs: Some(home.path()),
        };
        // Its record gives its true size: a blob larger than its record says is not read.
        let part = UserPart::Image {
            mime_type: "image/png".into(),
            blob: odd,
            size: 6,
            uri: None,
        };
        let url = &content(&[part], with)[0]["image_url"]["url"];
        assert_eq!(url, "data:image/png;base64,a\"b\\c\n");
        assert!(!needs_escaping(b"iVBORw0KGgo+/="));
        assert!(needs_escaping(
            &[b'A'; 200].iter().chain(b"\"").copied().collect::<Vec<_>>()
        ));
    }

    #[test]
    fn an_attached_text_file_carries_its_uri_and_cap() {
        let part = UserPart::Resource {
            uri: "file:///w/a.md".into(),
            mime_type: None,
            text: Some("hello".into()),
            blob: None,
            size: 5,
            binary: false,
            from_link: false,
            cap: Some(5),
        };
        let how = UserEncoding {
            images: false,
            blobs: None,
        };
        let text = content(&[part], how);
        let text = text.as_str().unwrap();
        assert!(text.contains("<attached-file uri=\"file:///w/a.md\">\nhello\n</attached-file>"));
        assert!(text.contains("first 5 bytes"));
    }
}
