//! Assembling streamed chunks into the blocks of one assistant message.

use std::collections::BTreeMap;

use crate::session::{AssistantBlock, BlockType, Chunk, FinishReason, Usage};

#[derive(Debug)]
enum Partial {
    Text(String),
    Reasoning(String),
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
    Done(AssistantBlock),
}

/// Collects one model call's chunks; blocks are ordered by their stream index.
#[derive(Debug, Default)]
pub(crate) struct MessageAssembler {
    blocks: BTreeMap<u32, Partial>,
    pub(crate) usage: Option<Usage>,
    pub(crate) finish: Option<FinishReason>,
}

impl MessageAssembler {
    pub(crate) fn push(&mut self, chunk: &Chunk) {
        match chunk {
            Chunk::BlockStart { index, block_type } => {
                self.blocks.entry(*index).or_insert(match block_type {
                    BlockType::Text => Partial::Text(String::new()),
                    BlockType::Reasoning => Partial::Reasoning(String::new()),
                    BlockType::ToolCall => Partial::ToolCall {
                        id: String::new(),
                        name: String::new(),
                        arguments: String::new(),
                    },
                });
            }
            Chunk::TextDelta { index, text } => {
                if let Partial::Text(acc) = self
                    .blocks
                    .entry(*index)
                    .or_insert_with(|| Partial::Text(String::new()))
                {
                    acc.push_str(text);
                }
            }
            Chunk::ReasoningDelta { index, text } => {
                if let Partial::Reasoning(acc) = self
                    .blocks
                    .entry(*index)
                    .or_insert_with(|| Partial::Reasoning(String::new()))
                {
                    acc.push_str(text);
                }
            }
            Chunk::ToolCallDelta {
                index,
                id,
                name,
                arguments_delta,
            } => {
                let entry = self
                    .blocks
                    .entry(*index)
                    .or_insert_with(|| Partial::ToolCall {
                        id: String::new(),
                        name: String::new(),
                        arguments: String::new(),
                    });
                if let Partial::ToolCall {
                    id: acc_id,
                    name: acc_name,
                    arguments,
                } = entry
                {
                    if acc_id.is_empty() {
                        acc_id.clone_from(id);
                    }
                    if let Some(name) = name {
                        if acc_name.is_empty() {
                            acc_name.clone_from(name);
                        }
                    }
                    arguments.push_str(arguments_delta);
                }
            }
            Chunk::BlockEnd { index, block } => {
                self.blocks.insert(*index, Partial::Done(block.clone()));
            }
            Chunk::Usage { usage } => self.usage = Some(usage.clone()),
            Chunk::Finish { reason } => self.finish = Some(reason.clone()),
        }
    }

    /// The finished blocks, empty text and reasoning blocks left out.
    pub(crate) fn blocks(&self) -> Vec<AssistantBlock> {
        self.blocks
            .values()
            .map(|partial| match partial {
                Partial::Text(text) => AssistantBlock::Text { text: text.clone() },
                Partial::Reasoning(text) => AssistantBlock::Reasoning { text: text.clone() },
                Partial::ToolCall {
                    id,
                    name,
                    arguments,
                } => AssistantBlock::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: arguments.clone(),
                },
                Partial::Done(block) => block.clone(),
            })
            .filter(|block| match block {
                AssistantBlock::Text { text } | AssistantBlock::Reasoning { text } => {
                    !text.is_empty()
                }
                AssistantBlock::ToolCall { .. } => true,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reassembles_interleaved_blocks_by_index() {
        let mut asm = MessageAssembler::default();
        let chunks = [
            Chunk::BlockStart {
                index: 1,
                block_type: BlockType::ToolCall,
            },
            Chunk::TextDelta {
                index: 0,
                text: "he".into(),
            },
            Chunk::ToolCallDelta {
                index: 1,
                id: "c".into(),
                name: Some("grep".into()),
                arguments_delta: "{\"a\"".into(),
            },
            Chunk::TextDelta {
                index: 0,
                text: "llo".into(),
            },
            Chunk::ToolCallDelta {
                index: 1,
                id: "c".into(),
                name: None,
                arguments_delta: ":1}".into(),
            },
        ];
        for chunk in &chunks {
            asm.push(chunk);
        }
        assert_eq!(
            asm.blocks(),
            vec![
                AssistantBlock::Text {
                    text: "hello".into()
                },
                AssistantBlock::ToolCall {
                    id: "c".into(),
                    name: "grep".into(),
                    arguments: "{\"a\":1}".into()
                }
            ]
        );
    }
}
