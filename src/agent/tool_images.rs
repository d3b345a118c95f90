//! Images a tool returned, stored beside the log like prompt images: the `tool/result` event
//! names each by the SHA-256 of its base64 text, so the JSONL line stays small.

use std::path::{Path, PathBuf};

use crate::session::{blobs, ToolResultContent};
use crate::tools::ToolImage;

/// The result's image parts for `images`, stored on the blocking pool before the result that
/// names them is logged; one that cannot be stored is left out (the result's text still names
/// it) with a log line.
pub(super) async fn store(blob_dir: PathBuf, images: Vec<ToolImage>) -> Vec<ToolResultContent> {
    if images.is_empty() {
        return Vec::new();
    }
    tokio::task::spawn_blocking(move || store_now(&blob_dir, images))
        .await
        .unwrap_or_else(|_| {
            tracing::warn!("storing a tool's images panicked; they are left out");
            Vec::new()
        })
}

fn store_now(blob_dir: &Path, images: Vec<ToolImage>) -> Vec<ToolResultContent> {
    images
        .into_iter()
        .filter_map(
            |image| match blobs::put(blob_dir, image.base64.as_bytes()) {
                Ok(blob) => Some(ToolResultContent::Image {
                    size: image.base64.len() as u64,
                    mime_type: image.mime_type,
                    blob,
                }),
                Err(error) => {
                    tracing::warn!(%error, "a tool's image could not be stored; it is left out");
                    None
                }
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_become_blob_parts() {
        let dir = tempfile::tempdir().unwrap();
        let image = ToolImage {
            mime_type: "image/png".into(),
            base64: "iVBO".into(),
        };
        let parts = store_now(dir.path(), vec![image]);
        let [ToolResultContent::Image { blob, size, .. }] = parts.as_slice() else {
            panic!("one image part: {parts:?}");
        };
        assert_eq!(*size, 4);
        assert_eq!(
            blobs::get_text(dir.path(), blob, 4).as_deref(),
            Some("iVBO")
        );
    }
}
