//! Caps on sizes the model and the client choose: a tool call's arguments, a prompt's content.
//! Read from the configuration (`config`) into the runtime, which hands them to the turns and
//! the ACP boundary; tests and embedders that set nothing get the defaults. Uses nothing else
//! of kin.

/// Tool-call arguments longer than this are refused (the model gets an error result).
pub(crate) const DEFAULT_TOOL_ARGUMENT_BYTES: usize = 1024 * 1024;
/// A `session/prompt` whose content is longer in total is refused.
pub(crate) const DEFAULT_PROMPT_BYTES: usize = 32 * 1024 * 1024;
/// A `session/prompt` with more content blocks is refused.
pub(crate) const DEFAULT_PROMPT_BLOCKS: usize = 10_000;

/// The size caps in force for one runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub(crate) tool_argument_bytes: usize,
    pub(crate) prompt_bytes: usize,
    pub(crate) prompt_blocks: usize,
}

impl Limits {
    pub(crate) const DEFAULT: Self = Self {
        tool_argument_bytes: DEFAULT_TOOL_ARGUMENT_BYTES,
        prompt_bytes: DEFAULT_PROMPT_BYTES,
        prompt_blocks: DEFAULT_PROMPT_BLOCKS,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}
