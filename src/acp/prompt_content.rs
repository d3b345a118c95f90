//! A prompt's ACP content blocks -> the user parts kin logs and gives the model.
//!
//! Images and large resources are stored in the session's blob directory and named by hash.
//! A `resource_link` to a local file is kept as a link and listed in [`Converted::links`],
//! nothing at the path looked at: `prompt_links` reads it afterwards with [`read_linked`] (up
//! to [`LINK_CAP`] bytes, attached after the link), asking the permission rules first when it
//! is outside the roots.

use std::path::{Path, PathBuf};

use agent_client_protocol_schema::v1::{ContentBlock, EmbeddedResourceResource};
use serde_json::Value;

use crate::rpc::RpcError;
use crate::session::blobs;
use crate::session::UserPart;
use crate::tools::private::PrivateFiles;
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
    /// Links to local files, read afterwards (off the runtime's workers; outside the roots
    /// only if the permission rules allow), see `prompt_links`.
    pub(crate) links: Vec<FileLink>,
}

/// A `resource_link` to a local file, resolved but not looked at yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileLink {
    /// The index in [`Converted::parts`] of the link; its attachment goes right after it.
    pub(crate) at: usize,
    pub(crate) uri: String,
    pub(crate) path: PathBuf,
    /// Outside the session's roots: the user's permission comes first.
    pub(crate) outside: bool,
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
                if let Some((path, outside)) = local_file(&link.uri, cx.roots) {
                    out.links.push(FileLink {
                        at: out.parts.len(),
                        uri: link.uri.clone(),
                        path,
                        outside,
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
            }
            other => return Err(unsupported(&other)),
        }
    }
    Ok(out)
}

/// The file a `file://` link names, resolved, and whether it is outside the roots (resolving
/// looks at nothing outside them); `None` for another scheme or a path that does not resolve.
fn local_file(uri: &str, roots: &Roots) -> Option<(PathBuf, bool)> {
    let resolved = roots.resolve(&file_path(uri)?).ok()?;
    Some((resolved.path, !resolved.inside))
}

/// The text of the linked file at `path` as an attachment (cut at [`LINK_CAP`] bytes), read as
/// the tools read (confined beneath `confine`, the roots, for a link inside them; never
/// blocking on a FIFO; regular files only; none of kin's own files); else why it is not
/// attached. Blocking.
pub(crate) fn read_linked(
    confine: Option<&Roots>,
    private: &PrivateFiles,
    path: &Path,
    uri: &str,
    blob_dir: &Path,
) -> Result<Result<UserPart, String>, RpcError> {
    let (bytes, cut) = match crate::tools::fs::read_capped(confine, private, path, LINK_CAP) {
        Ok(read) => read,
        Err(error) => return Ok(Err(error.to_string())),
    };
    let cap = cut.then_some(LINK_CAP);
    // NUL bytes (`/proc/*/environ`, binaries) are not text, as for `read`.
    if bytes.contains(&0) {
        return Ok(Err("it is not a text file (it contains NUL bytes)".into()));
    }
    // A cut may split a character: keep the valid prefix; a binary file is not attached.
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(error) if cut && error.utf8_error().error_len().is_none() => {
            let valid = error.utf8_error().valid_up_to();
            let mut bytes = error.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
        Err(_) => return Ok(Err("it is not a text file (it is not UTF-8)".into())),
    };
    let size = text.len() as u64;
    let (inline, stored) = if text.len() <= INLINE_MAX {
        (Some(text), None)
    } else {
        (None, Some(store(blob_dir, text.as_bytes())?))
    };
    Ok(Ok(UserPart::Resource {
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
    fn linked_files_are_read_capped_confined_and_as_text_only() {
        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let none = PrivateFiles::default();
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
        let read = |name: &str| {
            let path = work.path().join(name);
            read_linked(Some(&roots), &none, &path, &uri(&path), &blobs).unwrap()
        };
        assert!(
            matches!(read("small.md"), Ok(UserPart::Resource { text: Some(t), cap: None, .. }) if t == "hi")
        );
        assert!(
            matches!(read("big.txt"), Ok(UserPart::Resource { blob: Some(_), cap: Some(c), .. }) if c == LINK_CAP)
        );
        std::fs::write(work.path().join("env"), "A=1\0B=2\0").unwrap();
        assert!(read("env").unwrap_err().contains("NUL"));
        nix::unistd::mkfifo(&work.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(read("fifo").unwrap_err().contains("not a regular file"));
        std::os::unix::fs::symlink(outside.path().join("secret.md"), work.path().join("out"))
            .unwrap();
        let escaped = read_linked(Some(&roots), &none, &work.path().join("out"), "x", &blobs);
        assert!(
            escaped.unwrap().is_err(),
            "a resolved path is opened confined"
        );
        let secret_path = outside.path().join("secret.md");
        assert_eq!(
            local_file(&uri(&secret_path), &roots),
            Some((secret_path.clone(), true))
        );
        let link = |path: &Path| {
            ContentBlock::ResourceLink(agent_client_protocol_schema::v1::ResourceLink::new(
                "x",
                uri(path),
            ))
        };
        let converted = convert(vec![link(&secret_path), link(&secret_path)], &cx).unwrap();
        let ats: Vec<usize> = converted.links.iter().map(|o| o.at).collect();
        assert_eq!(
            ats,
            [0, 1],
            "each outside link is named, after its own link part"
        );
        assert_eq!(converted.parts.len(), 2, "nothing of it is attached yet");
    }
}
