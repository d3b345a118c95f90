//! A model that answers every request at once with "OK": the in-process benchmarks measure
//! kin's own work, not a model's.

use futures::stream;
use kin::model::{ChunkStream, Model, ModelRequest};
use kin::session::{AssistantBlock, BlockType, Chunk, FinishKind, FinishReason};

pub struct InstantModel;

impl Model for InstantModel {
    fn provider(&self) -> &str {
        "instant"
    }
    fn name(&self) -> &str {
        "instant"
    }
    fn stream(&self, _request: ModelRequest) -> ChunkStream {
        answer_ok()
    }
}

/// The instant answer: one text block, "OK", then a normal stop.
pub fn answer_ok() -> ChunkStream {
    let text = "OK".to_owned();
    Box::pin(stream::iter(
        [
            Chunk::BlockStart {
                index: 0,
                block_type: BlockType::Text,
            },
            Chunk::TextDelta {
                index: 0,
                text: text.clone(),
            },
            Chunk::BlockEnd {
                index: 0,
                block: AssistantBlock::Text { text },
            },
            Chunk::Finish {
                reason: FinishReason {
                    kind: FinishKind::Stop,
                    failure: None,
                },
            },
        ]
        .into_iter()
        .map(Ok),
    ))
}
