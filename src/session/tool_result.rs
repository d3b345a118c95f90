//! The pieces of a `tool/result`'s content: its text and the images the tool returned.

use serde::{Deserialize, Serialize};

/// One piece of a tool's result: its text, or an image whose base64 text is blob `blob`
/// (`size` its length), as a user message's image part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub(crate) enum ToolResultContent {
    Text {
        text: String,
    },
    Image {
        mime_type: String,
        #[serde(alias = "sha256")]
        blob: String,
        size: u64,
    },
}
