//! The model used when none is configured: every call fails with a message that says what to do.

use futures::stream;

use super::{ChunkStream, Model, ModelError, ModelRequest};

pub struct UnconfiguredModel {
    reason: String,
}

impl UnconfiguredModel {
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

impl Model for UnconfiguredModel {
    fn provider(&self) -> &str {
        "none"
    }

    fn name(&self) -> &str {
        "none"
    }

    fn stream(&self, _request: ModelRequest) -> ChunkStream {
        Box::pin(stream::once(std::future::ready(Err(
            ModelError::Unconfigured(self.reason.clone()),
        ))))
    }
}
