//! A prompt's ACP content blocks -> the user parts kin logs and gives the model.
//!
//! Images and large resources are stored in the session's blob directory and named by hash;
//! a `resource_link` to a file inside the roots is read and attached after the link (up to
//! [`LINK_CAP`] bytes). A link to a file outside the roots is kept as a link and listed in
//! [`Converted::outside`], nothing there looked at: the caller asks the permission rules first
//! (`prompt_links`) and attaches it with [`read_linked`] only when allowed.

use std::io::Read;
use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1::{ContentBlock, EmbeddedResourceResource};
use serde_json::Value;

use crate::rpc::RpcError;
use crate::session::blobs;
use crate::session::UserPart;
use crate::tools::Roots;

/// Text resources longer than this go to the blob directory instead of the log line.
pub(crate) const INLINE_MAX: usize = 4 * 1024;
/// Most bytes of a linked file attached to the prompt.
pub(crate) const LINK_CAP: u64 = 256 * 1024;

/// What converting needs: where blobs go, the roots, whether the model takes images.
pub(crate) struct PromptContext<'a> {
    pub(crate) blob_dir: &'a Path,
    pub(crate) roots: &'a Roots,
    pub(crate) images: bool,
}

/// The parts, and what the user should be told about them.
#[derive(Debug, Default)]
pub(crate) struct Converted {
    pub(crate) parts: Vec<UserPart>,
    pub(crate) notices: Vec<String>,
    /// Links to files outside the roots, attached only if the permission rules allow.
    pub(crate) outside: Vec<OutsideLink>,
}

/// A `resource_link` to a path outside the session's roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutsideLink {
    /// The index in [`Converted::parts`] of the link; its attachment goes right after it.
    pub(crate) at: usize,
    pub(crate) uri: String,
    pub(crate) path: PathBuf,
}

/// What a `resource_link` comes to.
enum Linked {
    Attached(UserPart),
    Outside(PathBuf),
    /// Not a readable text file (or not a file URI): the link alone.
    Nothing,
}

fn unsupported(block: &ContentBlock) -> RpcError {
    RpcError::invalid_params(format!(
        "invalid params: prompt content of type {:?} is not supported (see promptCapabilities)",
        serde_json::to_value(block)
            .ok()
            .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| "unknown".into())
    ))
}

fn store(dir: &Path, bytes: &[u8]) -> Result<String, RpcError> {
    blobs::put(dir, bytes).map_err(|e| store_failed(dir, e))
}

fn store_failed(dir: &Path, error: std::io::Error) -> RpcError {
    RpcError::internal(format!(
        "could not store a prompt attachment in {}: {error}",
        dir.display()
    ))
}

/// Converts `blocks`, storing their payloads (blocking: run it off the runtime's workers);
/// audio (not advertised) is refused with `-32602`.
pub(crate) fn convert(
    blocks: Vec<ContentBlock>,
    cx: &PromptContext<'_>,
) -> Result<Converted, RpcError> {
    let mut out = Converted::default();
    for block in blocks {
        match block {
            ContentBlock::Text(text) => out.parts.push(UserPart::Text { text: text.text }),
            ContentBlock::Image(image) => {
                let size = image.data.len() as u64;
                let name = store(cx.blob_dir, image.data.as_bytes())?;
                if !cx.images {
                    out.notices.push(format!(
                        "The model does not take images: an image ({}) was replaced by a placeholder",
                        image.mime_type
                    ));
                }
                out.parts.push(UserPart::Image {
                    size,
                    mime_type: image.mime_type,
                    blob: name,
                    uri: image.uri,
                });
            }
            ContentBlock::Resource(embedded) => {
                match embedded.resource {
                    EmbeddedResourceResource::TextResourceContents(text) => {
                        let size = text.text.len() as u64;
                        let (inline, stored) = if text.text.len() <= INLINE_MAX {
                            (Some(text.text), None)
                        } else {
                            (None, Some(store(cx.blob_dir, text.text.as_bytes())?))
                        };
                        out.parts.push(UserPart::Resource {
                            uri: text.uri,
                            mime_type: text.mime_type,
                            text: inline,
                            blob: stored,
                            size,
                            binary: false,
                            from_link: false,
                            cap: None,
                        });
                    }
                    EmbeddedResourceResource::BlobResourceContents(blob) => {
                        let size = blob.blob.len() as u64;
                        let mime = blob.mime_type.clone().unwrap_or_default();
                        let name = store(cx.blob_dir, blob.blob.as_bytes())?;
                        if mime.starts_with("image/") {
                            if !cx.images {
                                out.notices.push(format!(
                                "The model does not take images: {} was replaced by a placeholder",
                                blob.uri
                            ));
                            }
                            out.parts.push(UserPart::Image {
                                mime_type: mime,
                                blob: name,
                                size,
                                uri: Some(blob.uri),
                            });
                        } else {
                            out.parts.push(UserPart::Resource {
                                uri: blob.uri,
                                mime_type: blob.mime_type,
                                text: None,
                                blob: Some(name),
                                size,
                                binary: true,
                                from_link: false,
                                cap: None,
                            });
                        }
                    }
                    _ => return Err(RpcError::invalid_params(
                        "invalid params: an embedded resource must have `text` or `blob` contents",
                    )),
                }
            }
            ContentBlock::ResourceLink(link) => {
                let linked = attach_link(&link.uri, cx)?;
                if let Linked::Outside(path) = &linked {
                    out.outside.push(OutsideLink {
                        at: out.parts.len(),
                        uri: link.uri.clone(),
                        path: path.clone(),
                    });
                }
                out.parts.push(UserPart::ResourceLink {
                    uri: link.uri,
                    name: link.name,
                    mime_type: link.mime_type,
                    title: link.title,
                    description: link.description,
                    size: link.size,
                });
                if let Linked::Attached(part) = linked {
                    out.parts.push(part);
                }
            }
            other => return Err(unsupported(&other)),
        }
    }
    Ok(out)
}

/// The file a `file://` link names: read and attached when it is a text file inside the roots;
/// outside them, only named (resolving looks at nothing outside the roots).
fn attach_link(uri: &str, cx: &PromptContext<'_>) -> Result<Linked, RpcError> {
    let Some(path) = file_path(uri) else {
        return Ok(Linked::Nothing);
    };
    let Ok(resolved) = cx.roots.resolve(&path) else {
        return Ok(Linked::Nothing);
    };
    if !resolved.inside {
        return Ok(Linked::Outside(resolved.path));
    }
    Ok(read_linked(&resolved.path, uri, cx.blob_dir)?.map_or(Linked::Nothing, Linked::Attached))
}

/// The text of the linked file at `path` as an attachment (cut at [`LINK_CAP`] bytes); `None`
/// when it is not a readable text file.
pub(crate) fn read_linked(
    path: &Path,
    uri: &str,
    blob_dir: &Path,
) -> Result<Option<UserPart>, RpcError> {
    let Ok(file) = std::fs::File::open(path) else {
        return Ok(None);
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    if file.take(LINK_CAP + 1).read_to_end(&mut bytes).is_err() {
        return Ok(None);
    }
    let cap = (bytes.len() as u64 > LINK_CAP).then_some(LINK_CAP);
    bytes.truncate(LINK_CAP as usize);
    // A cut may split a character: keep the valid prefix; a binary file is not attached.
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) if cap.is_some() && error.utf8_error().error_len().is_none() => {
            let valid = error.utf8_error().valid_up_to();
            let mut bytes = error.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
        Err(_) => return Ok(None),
    };
    let size = text.len() as u64;
    let (inline, stored) = if text.len() <= INLINE_MAX {
        (Some(text), None)
    } else {
        (None, Some(store(blob_dir, text.as_bytes())?))
    };
    Ok(Some(UserPart::Resource {
        uri: uri.to_owned(),
        mime_type: None,
        text: inline,
        blob: stored,
        size,
        binary: false,
        from_link: true,
        cap,
    }))
}

/// The path of a `file://` URI, percent-decoded; `None` for other schemes or a remote host.
fn file_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let raw = rest.split(['?', '#']).next()?.as_bytes();
    let mut out = Vec::with_capacity(raw.len());
    let mut at = 0;
    while at < raw.len() {
        let hex = raw
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (raw[at], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                at += 3;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_become_paths() {
        assert_eq!(
            file_path("file:///w/a%20b.md").as_deref(),
            Some("/w/a b.md")
        );
        assert_eq!(file_path("file://localhost/w/x").as_deref(), Some("/w/x"));
        assert_eq!(file_path("https://example.com/x"), None);
        assert_eq!(file_path("file://host/x"), None);
    }

    #[test]
    fn a_linked_file_inside_the_roots_is_attached_capped_and_one_outside_is_not() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let roots = Roots::new(work.path().to_owned(), Vec::new());
        let blobs = work.path().join(".blobs");
        std::fs::write(work.path().join("small.md"), "hi").unwrap();
        std::fs::write(
            work.path().join("big.txt"),
            "x".repeat(LINK_CAP as usize + 10),
        )
        .unwrap();
        std::fs::write(outside.path().join("secret.md"), "no").unwrap();
        let cx = PromptContext {
            blob_dir: &blobs,
            roots: &roots,
            images: false,
        };
        let uri = |p: &Path| format!("file://{}", p.display());
        let small = attach_link(&uri(&work.path().join("small.md")), &cx).unwrap();
        assert!(
            matches!(small, Linked::Attached(UserPart::Resource { text: Some(t), cap: None, .. }) if t == "hi")
        );
        let big = attach_link(&uri(&work.path().join("big.txt")), &cx).unwrap();
        assert!(
            matches!(big, Linked::Attached(UserPart::Resource { blob: Some(_), cap: Some(c), .. }) if c == LINK_CAP)
        );
        let secret_path = outside.path().join("secret.md");
        let secret = attach_link(&uri(&secret_path), &cx).unwrap();
        assert!(matches!(&secret, Linked::Outside(path) if path == &secret_path));
        let link = |path: &Path| {
            ContentBlock::ResourceLink(agent_client_protocol_schema::v1::ResourceLink::new(
                "x",
                uri(path),
            ))
        };
        let converted = convert(vec![link(&secret_path), link(&secret_path)], &cx).unwrap();
        let ats: Vec<usize> = converted.outside.iter().map(|o| o.at).collect();
        assert_eq!(
            ats,
            [0, 1],
            "each outside link is named, after its own link part"
        );
        assert_eq!(converted.parts.len(), 2, "nothing of it is attached yet");
    }
}
