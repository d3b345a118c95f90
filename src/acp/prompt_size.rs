//! The caps on a `session/prompt`'s content (see `crate::limits`): checked before any of it is
//! kept or stored, and refused with `-32602` naming the cap.

use agent_client_protocol_schema::v1::{ContentBlock, EmbeddedResourceResource};

use crate::limits::Limits;
use crate::rpc::RpcError;

/// The bytes a content block brings: its text, a link's strings, a payload and its names,
/// read from the fields (a pasted image is not serialised again to be measured).
fn content_bytes(block: &ContentBlock) -> usize {
    match block {
        ContentBlock::Text(text) => text.text.len(),
        ContentBlock::ResourceLink(link) => {
            let optional = |text: &Option<String>| text.as_ref().map_or(0, String::len);
            link.uri.len()
                + link.name.len()
                + optional(&link.mime_type)
                + optional(&link.title)
                + optional(&link.description)
        }
        ContentBlock::Image(image) => {
            image.data.len() + image.mime_type.len() + image.uri.as_ref().map_or(0, String::len)
        }
        ContentBlock::Audio(audio) => audio.data.len() + audio.mime_type.len(),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            EmbeddedResourceResource::TextResourceContents(text) => {
                text.text.len() + text.uri.len()
            }
            EmbeddedResourceResource::BlobResourceContents(blob) => {
                blob.blob.len() + blob.uri.len()
            }
            other => serialized_len(other),
        },
        other => serialized_len(other),
    }
}

fn serialized_len(value: &impl serde::Serialize) -> usize {
    serde_json::to_vec(value).map_or(0, |bytes| bytes.len())
}

/// The block cap checked on the raw params, before they are turned into typed blocks (which
/// for a million blocks costs hundreds of megabytes).
pub(crate) fn check_raw(params: &serde_json::Value, limits: &Limits) -> Result<(), RpcError> {
    match params.get("prompt").and_then(serde_json::Value::as_array) {
        Some(blocks) if blocks.len() > limits.prompt_blocks => Err(too_many(blocks.len(), limits)),
        _ => Ok(()),
    }
}

fn too_many(blocks: usize, limits: &Limits) -> RpcError {
    RpcError::invalid_params(format!(
        "invalid params: the prompt has {blocks} content blocks, over kin's limit of {} \
         (max_prompt_blocks)",
        limits.prompt_blocks
    ))
}

/// Refuses a prompt over the caps (`max_prompt_blocks`, `max_prompt_bytes`) before any of it is
/// kept or stored.
pub(crate) fn check(blocks: &[ContentBlock], limits: &Limits) -> Result<(), RpcError> {
    if blocks.len() > limits.prompt_blocks {
        return Err(too_many(blocks.len(), limits));
    }
    let bytes: usize = blocks.iter().map(content_bytes).sum();
    if bytes > limits.prompt_bytes {
        return Err(RpcError::invalid_params(format!(
            "invalid params: the prompt's content is {bytes} bytes, over kin's limit of {} \
             bytes (max_prompt_bytes)",
            limits.prompt_bytes
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::RpcError;

    fn code_and_message(result: Result<(), RpcError>) -> (i32, String) {
        let error = result.unwrap_err();
        let value = serde_json::to_value(&error).unwrap();
        (
            value["code"].as_i64().unwrap() as i32,
            value["message"].as_str().unwrap().to_owned(),
        )
    }

    #[test]
    fn too_many_blocks_or_bytes_are_refused_naming_the_cap() {
        let limits = Limits {
            prompt_blocks: 3,
            prompt_bytes: 10,
            ..Limits::DEFAULT
        };
        let text = |t: &str| ContentBlock::from(t.to_owned());
        assert!(check(&[text("abc"), text("def")], &limits).is_ok());
        let raw = serde_json::json!({"prompt": vec![serde_json::json!({"type": "text", "text": "a"}); 4]});
        assert_eq!(
            code_and_message(check_raw(&raw, &limits)),
            code_and_message(check(&vec![text("a"); 4], &limits))
        );
        let (code, message) = code_and_message(check(&vec![text("a"); 4], &limits));
        assert_eq!(code, -32602);
        assert!(
            message.contains("4 content blocks") && message.contains("max_prompt_blocks"),
            "{message}"
        );
        let (code, message) = code_and_message(check(&[text("0123456789x")], &limits));
        assert_eq!(code, -32602);
        assert!(
            message.contains("11 bytes") && message.contains("max_prompt_bytes"),
            "{message}"
        );
    }
}
