//! The model used when none is configured: every call fails with a message that says what to do.

use futures::stream;

use super::{ChunkStream, Model, ModelError, ModelRequest};

/// The stand-in model of a process with no model configured.
pub struct UnconfiguredModel {
    reason: String,
}

impl UnconfiguredModel {
    /// A stand-in whose calls fail with `reason`.
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

impl Model for UnconfiguredModel {
    fn provider(&self) -> String {
        "none".into()
    }

    fn name(&self) -> String {
        "none".into()
    }

    fn stream(&self, _request: ModelRequest) -> ChunkStream {
        Box::pin(stream::once(std::future::ready(Err(
            ModelError::Unconfigured(self.reason.clone()),
        ))))
    }
}
