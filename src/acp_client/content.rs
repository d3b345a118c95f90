//! kin's stored prompt payloads as typed ACP content blocks, for both directions: what a child
//! agent is prompted with, and what an editor is shown when a session is replayed.

use agent_client_protocol_schema::v1::{
    BlobResourceContents, ContentBlock, EmbeddedResource, EmbeddedResourceResource, ImageContent,
    ResourceLink, TextResourceContents,
};

/// An `image` block of base64 `data`.
pub(crate) fn image(data: String, mime_type: &str, uri: Option<&String>) -> ContentBlock {
    let mut image = ImageContent::new(data, mime_type.to_owned());
    image.uri = uri.cloned();
    ContentBlock::Image(image)
}

/// A `resource` block holding `content`: base64 when `binary`, else text.
pub(crate) fn resource(
    uri: &str,
    mime_type: Option<&String>,
    content: String,
    binary: bool,
) -> ContentBlock {
    let resource = if binary {
        let mut blob = BlobResourceContents::new(content, uri.to_owned());
        blob.mime_type = mime_type.cloned();
        EmbeddedResourceResource::BlobResourceContents(blob)
    } else {
        let mut text = TextResourceContents::new(content, uri.to_owned());
        text.mime_type = mime_type.cloned();
        EmbeddedResourceResource::TextResourceContents(text)
    };
    ContentBlock::Resource(EmbeddedResource::new(resource))
}

/// What a `resource_link` block carries besides its name and URI.
#[derive(Default)]
pub(crate) struct LinkDetails<'a> {
    pub(crate) mime_type: Option<&'a String>,
    pub(crate) title: Option<&'a String>,
    pub(crate) description: Option<&'a String>,
    pub(crate) size: Option<i64>,
}

/// A `resource_link` block.
pub(crate) fn link(name: &str, uri: &str, details: LinkDetails<'_>) -> ContentBlock {
    let mut link = ResourceLink::new(name.to_owned(), uri.to_owned());
    link.mime_type = details.mime_type.cloned();
    link.title = details.title.cloned();
    link.description = details.description.cloned();
    link.size = details.size;
    ContentBlock::ResourceLink(link)
}
