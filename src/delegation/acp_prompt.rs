//! A delegation's prompt as the ACP content blocks an ACP child gets. Text and resource links
//! go as they are (every ACP agent takes them); images and embedded resources go as `image`
//! and `resource` blocks when the child's `initialize` advertised `promptCapabilities.image`
//! / `embeddedContext`, else as text: a resource's contents as an attached file, an image as a
//! one-line placeholder. Payloads are read from the delegating session's blob directory.

use std::path::Path;

use agent_client_protocol_schema::v1::ContentBlock;
use serde_json::Value;

use crate::acp_client::content::{self, LinkDetails};
use crate::session::{blobs, UserPart};

/// The content blocks for `prompt`, for a child with these `agentCapabilities`.
pub(crate) fn blocks(prompt: &[UserPart], capabilities: &Value, blob_dir: &Path) -> Vec<Value> {
    let takes = |what: &str| {
        capabilities
            .pointer(&format!("/promptCapabilities/{what}"))
            .and_then(Value::as_bool)
            == Some(true)
    };
    let (images, embedded) = (takes("image"), takes("embeddedContext"));
    let read = |blob: &str, size: u64| blobs::get_text(blob_dir, blob, size);
    let mut out = Vec::new();
    for part in prompt {
        let block = match part {
            UserPart::Text { text } => ContentBlock::from(text.clone()),
            UserPart::ResourceLink {
                uri,
                name,
                mime_type,
                title,
                description,
                size,
            } => content::link(
                name,
                uri,
                LinkDetails {
                    mime_type: mime_type.as_ref(),
                    title: title.as_ref(),
                    description: description.as_ref(),
                    size: *size,
                },
            ),
            UserPart::Image {
                mime_type,
                blob,
                size,
                uri,
            } => match read(blob, *size).filter(|_| images) {
                Some(data) => content::image(data, mime_type, uri.as_ref()),
                None if images => ContentBlock::from(format!(
                    "[an image ({mime_type}) was attached here; its data is missing]"
                )),
                None => ContentBlock::from(format!(
                    "[an image ({mime_type}, {size} bytes of base64) was attached here; this \
                     agent does not take images]"
                )),
            },
            UserPart::Resource {
                uri,
                mime_type,
                text: inline,
                blob,
                binary,
                from_link,
                size,
                ..
            } => {
                let contents = inline
                    .clone()
                    .or_else(|| blob.as_deref().and_then(|blob| read(blob, *size)));
                match contents {
                    None => ContentBlock::from(format!(
                        "[attached file {uri}: its content is missing]"
                    )),
                    Some(data) if embedded => {
                        content::resource(uri, mime_type.as_ref(), data, *binary)
                    }
                    // The link before it is sent: the child can read the file itself.
                    Some(_) if *from_link => continue,
                    Some(_) if *binary => {
                        let mime = mime_type.as_deref().unwrap_or("application/octet-stream");
                        ContentBlock::from(format!(
                            "[attached file {uri} ({mime}): binary content not shown]"
                        ))
                    }
                    Some(data) => ContentBlock::from(format!(
                        "Attached file {uri}:\n<attached-file uri=\"{uri}\">\n{data}\n</attached-file>"
                    )),
                }
            }
        };
        // Serialising a schema type into a JSON value cannot fail.
        out.push(serde_json::to_value(block).unwrap_or_default());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prompt(dir: &Path) -> Vec<UserPart> {
        let image = blobs::put(dir, b"iVBO").unwrap();
        vec![
            UserPart::text("look"),
            UserPart::Image {
                mime_type: "image/png".into(),
                blob: image,
                size: 4,
                uri: None,
            },
            UserPart::Resource {
                uri: "file:///w/a.md".into(),
                mime_type: Some("text/markdown".into()),
                text: Some("hello".into()),
                blob: None,
                size: 5,
                binary: false,
                from_link: false,
                cap: None,
            },
            UserPart::ResourceLink {
                uri: "file:///w/b.rs".into(),
                name: "b.rs".into(),
                mime_type: None,
                title: None,
                description: None,
                size: Some(3),
            },
        ]
    }

    #[test]
    fn a_child_that_takes_images_and_resources_gets_them_as_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let caps = json!({"promptCapabilities": {"image": true, "embeddedContext": true}});
        let blocks = blocks(&prompt(dir.path()), &caps, dir.path());
        assert_eq!(
            blocks,
            [
                json!({"type": "text", "text": "look"}),
                json!({"type": "image", "mimeType": "image/png", "data": "iVBO"}),
                json!({"type": "resource", "resource":
                    {"uri": "file:///w/a.md", "text": "hello", "mimeType": "text/markdown"}}),
                json!({"type": "resource_link", "uri": "file:///w/b.rs", "name": "b.rs", "size": 3}),
            ]
        );
    }

    #[test]
    fn a_child_without_those_capabilities_gets_text() {
        let dir = tempfile::tempdir().unwrap();
        let blocks = blocks(&prompt(dir.path()), &Value::Null, dir.path());
        let kinds: Vec<&str> = blocks.iter().filter_map(|b| b["type"].as_str()).collect();
        assert_eq!(kinds, ["text", "text", "text", "resource_link"]);
        assert!(blocks[1]["text"]
            .as_str()
            .unwrap()
            .contains("does not take images"));
        assert!(blocks[2]["text"]
            .as_str()
            .unwrap()
            .contains("<attached-file uri=\"file:///w/a.md\">\nhello\n</attached-file>"));
    }
}
