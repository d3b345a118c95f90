//! A `tools/call` result as the model sees it: text blocks as they are; images as a short
//! line in the text plus the image itself beside it (given to a model that takes images, see
//! `model::openai::tool_images`), and so are embedded `image/*` blobs; audio and other binary
//! resources as placeholders; embedded text
//! resources with their URI; resource links; `structuredContent` when no text says it; and
//! `isError` as an error result. Long results keep their head and tail, like the shell's.

use serde_json::Value;

use crate::process::truncate::head_tail;
use crate::tools::{ToolImage, ToolOutput};

/// The most of a result the model gets (as the shell tool).
pub(crate) const MAX_RESULT: usize = 30 * 1024;

pub(crate) fn to_output(server: &str, result: &Value) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    let blocks = result.get("content").and_then(Value::as_array);
    for block in blocks.into_iter().flatten() {
        if let Some(image) = image(block) {
            parts.push(format!(
                "[image from the tool: {}, about {} bytes]",
                image.mime_type,
                image.base64.len() / 4 * 3
            ));
            images.push(image);
        } else if let Some(part) = block_text(block) {
            parts.push(part);
        }
    }
    let has_text = blocks
        .into_iter()
        .flatten()
        .any(|b| b.get("type").and_then(Value::as_str) == Some("text"));
    if let Some(structured) = result.get("structuredContent").filter(|_| !has_text) {
        parts.push(structured.to_string());
    }
    let text = head_tail(&parts.join("\n"), MAX_RESULT);
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let text = if text.is_empty() {
            format!("Error: the MCP server `{server}` reported an error")
        } else {
            format!("Error from the MCP server `{server}`: {text}")
        };
        return ToolOutput::error("McpToolError", "MCP_TOOL_ERROR", text);
    }
    let mut output = ToolOutput::ok(text);
    output.images = images;
    output
}

/// An `image` block with data and a type, or an embedded resource whose blob is an image
/// (`image/*`): both reach an image model the same way.
fn image(block: &Value) -> Option<ToolImage> {
    let field = |name: &str| block.get(name).and_then(Value::as_str);
    let (mime_type, base64) = match field("type")? {
        "image" => (field("mimeType").unwrap_or("image/png"), field("data")?),
        "resource" => {
            let resource = block.get("resource")?;
            let get = |name: &str| resource.get(name).and_then(Value::as_str);
            let mime_type = get("mimeType").filter(|mime| mime.starts_with("image/"))?;
            (mime_type, get("blob")?)
        }
        _ => return None,
    };
    (!base64.is_empty()).then(|| ToolImage {
        mime_type: mime_type.to_owned(),
        base64: base64.to_owned(),
    })
}

fn block_text(block: &Value) -> Option<String> {
    let field = |name: &str| block.get(name).and_then(Value::as_str);
    let size = |name: &str| field(name).map_or(0, |data| data.len() / 4 * 3);
    match field("type")? {
        "text" => field("text").map(str::to_owned),
        "image" | "audio" => Some(format!(
            "[{} from the tool: {}, about {} bytes, not shown]",
            field("type").unwrap_or("media"),
            field("mimeType").unwrap_or("unknown type"),
            size("data")
        )),
        "resource" => {
            let resource = block.get("resource")?;
            let get = |name: &str| resource.get(name).and_then(Value::as_str);
            let uri = get("uri").unwrap_or("?");
            match get("text") {
                Some(text) => Some(format!("[resource {uri}]\n{text}")),
                None => Some(format!(
                    "[resource {uri}: {}, binary, not shown]",
                    get("mimeType").unwrap_or("unknown type")
                )),
            }
        }
        "resource_link" => Some(format!(
            "[resource link: {} {}]",
            field("name").unwrap_or(""),
            field("uri").unwrap_or("?")
        )),
        other => Some(format!("[{other} content, not shown]")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn maps_each_kind_of_content() {
        let result = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "A"}},
            {"type": "resource", "resource": {"uri": "file:///b", "blob": "AA", "mimeType": "x/y"}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"},
            {"type": "resource", "resource": {"uri": "file:///d.jpg", "blob": "BBBB",
                "mimeType": "image/jpeg"}}
        ]});
        let output = to_output("s", &result);
        assert!(!output.is_error);
        assert_eq!(
            output.text,
            "hello\n[image from the tool: image/png, about 3 bytes]\n\
             [resource file:///a]\nA\n[resource file:///b: x/y, binary, not shown]\n\
             [resource link: c file:///c]\n[image from the tool: image/jpeg, about 3 bytes]"
        );
        let image = |mime: &str, base64: &str| ToolImage {
            mime_type: mime.into(),
            base64: base64.into(),
        };
        assert_eq!(
            output.images,
            [image("image/png", "AAAA"), image("image/jpeg", "BBBB")]
        );
    }

    #[test]
    fn structured_content_shows_when_no_text_does() {
        let output = to_output("s", &json!({"content": [], "structuredContent": {"n": 1}}));
        assert_eq!(output.text, r#"{"n":1}"#);
        let both =
            json!({"content": [{"type": "text", "text": "1"}], "structuredContent": {"n": 1}});
        assert_eq!(to_output("s", &both).text, "1");
    }

    #[test]
    fn errors_name_the_server_and_long_results_are_cut() {
        let output = to_output(
            "db",
            &json!({"content": [{"type": "text", "text": "no"}], "isError": true}),
        );
        assert!(output.is_error);
        assert_eq!(output.text, "Error from the MCP server `db`: no");
        let long = "x".repeat(MAX_RESULT * 2);
        let output = to_output("s", &json!({"content": [{"type": "text", "text": long}]}));
        assert!(output.text.len() < MAX_RESULT + 200);
        assert!(output.text.contains("bytes cut"));
    }
}
