//! The parts of a user-role message as the log keeps them: text, links, images and attached
//! resources. Large payloads are not in the log line: a part names the file holding them in the
//! session's blob directory (see [`super::blobs`]).

use serde::{Deserialize, Serialize};

/// One part of a user message, as stored in the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase"
)]
pub enum UserPart {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// A link to a resource the model may read itself.
    ResourceLink {
        /// Where it is.
        uri: String,
        /// Its name.
        name: String,
        /// Its media type, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// A title, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// A description, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// Its size in bytes, if given.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<i64>,
    },
    /// An image; its base64 text, as the client sent it, is the blob `blob`.
    Image {
        /// Its media type.
        mime_type: String,
        /// The blob holding the base64 text (`sha256` in logs written before BLAKE3 names).
        #[serde(alias = "sha256")]
        blob: String,
        /// Length of the base64 text.
        size: u64,
        /// Where the image came from, if the client said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uri: Option<String>,
    },
    /// A resource given to the model as an attached file: one the client embedded, or a
    /// file kin read for the resource link before it (`fromLink`).
    Resource {
        /// Where it is.
        uri: String,
        /// Its media type, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// The text itself, when small.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// The blob holding the content otherwise (text, or base64 when `binary`).
        #[serde(default, alias = "sha256", skip_serializing_if = "Option::is_none")]
        blob: Option<String>,
        /// Length of the content in bytes (of the base64 text when `binary`).
        size: u64,
        /// Whether the blob holds base64 of binary content.
        #[serde(default, skip_serializing_if = "is_false")]
        binary: bool,
        /// Whether kin read the file for a resource link.
        #[serde(default, skip_serializing_if = "is_false")]
        from_link: bool,
        /// Set when only the first `cap` bytes of the file were attached.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cap: Option<u64>,
    },
}

impl UserPart {
    /// Bytes of text the model reads for this part (for token estimates).
    pub(crate) fn text_len(&self) -> usize {
        match self {
            Self::Text { text } => text.len(),
            Self::ResourceLink { uri, name, .. } => uri.len() + name.len(),
            Self::Resource { text, size, .. } => text.as_ref().map_or(*size as usize, String::len),
            // An image is counted by its stored size: an upper bound of what it costs.
            Self::Image { size, .. } => *size as usize,
        }
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl UserPart {
    /// A plain text part.
    pub(crate) fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_round_trip_and_small_fields_stay_out() {
        let part = UserPart::Resource {
            uri: "file:///w/a.md".into(),
            mime_type: None,
            text: Some("hi".into()),
            blob: None,
            size: 2,
            binary: false,
            from_link: true,
            cap: None,
        };
        let wire = serde_json::to_value(&part).unwrap();
        assert_eq!(
            wire,
            serde_json::json!({"type": "resource", "uri": "file:///w/a.md", "text": "hi", "size": 2, "fromLink": true})
        );
        assert_eq!(serde_json::from_value::<UserPart>(wire).unwrap(), part);
        let image: UserPart =
            serde_json::from_str(r#"{"type":"image","mimeType":"image/png","blob":"ab","size":4}"#)
                .unwrap();
        assert!(matches!(image, UserPart::Image { size: 4, .. }));
        // A line written before blobs were named by BLAKE3 reads the same.
        let old: UserPart = serde_json::from_str(
            r#"{"type":"image","mimeType":"image/png","sha256":"ab","size":4}"#,
        )
        .unwrap();
        assert!(matches!(old, UserPart::Image { ref blob, .. } if blob == "ab"));
        let old: UserPart =
            serde_json::from_str(r#"{"type":"resource","uri":"u","sha256":"cd","size":9}"#)
                .unwrap();
        assert!(matches!(old, UserPart::Resource { blob: Some(ref b), .. } if b == "cd"));
    }
}
