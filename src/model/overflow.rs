//! How endpoints say a request is too long for the model's context window: the one list of
//! error types, codes and wordings kin recognises, and the token counts some of them carry.
//! Knows nothing of HTTP; the caller hands over the error type or code and the message.
//!
//! Each wording comes from the server that sends it (see the tests): the error type or code is
//! checked first (stable across versions), then the message.

/// Error types and codes that mean "too long" whatever the message says.
const OVERFLOW_CODES: &[&str] = &[
    // OpenAI and the APIs that copy it (DeepSeek, gateways): `error.code`.
    "context_length_exceeded",
    // llama.cpp's llama-server: `error.type`.
    "exceed_context_size_error",
];

/// Lower-cased phrases of overflow messages, for endpoints whose type or code says nothing
/// specific (vLLM's `BadRequestError`, Anthropic's `invalid_request_error`, Ollama's bare
/// `error` string).
const OVERFLOW_PHRASES: &[&str] = &[
    // The OpenAI code, when a gateway puts it in the message text.
    "context_length_exceeded",
    // OpenAI, DeepSeek and vLLM: "This model's maximum context length is 4096 tokens. ..."
    "maximum context length is",
    // Anthropic: "prompt is too long: 208310 tokens > 200000 maximum"
    "prompt is too long",
    // llama.cpp: "request (6711 tokens) exceeds the available context size (4096 tokens), ..."
    "exceeds the available context size",
    // Ollama (with truncation off, and its embedding API): "the input length exceeds the
    // context length", "input length exceeds maximum context length".
    "exceeds the context length",
    "exceeds maximum context length",
    // Ollama's runner, when the prompt is over `num_ctx` and truncation is off: "prompt too
    // long; exceeded max context length by 12 tokens".
    "exceeded max context length",
    // vLLM's input checks: "The prompt (total length 25938) is too long to fit into the model
    // (context length 4096)", "The decoder prompt (length 5951) is longer than the maximum
    // model length of 4096".
    "is too long to fit into the model",
    "longer than the maximum model length",
    // LM Studio: "Trying to keep the first 5000 tokens when context the overflows. However,
    // the model is loaded with context length of only 4096 tokens, which is not enough."
    "context length of only",
    // llama-cpp-python's server: "Requested tokens (5000) exceed context window of 4096"
    "exceed context window of",
];

/// Whether an error with type or code `code` (if any) and message `message` says the request
/// did not fit the context window.
pub(crate) fn is_overflow(code: Option<&str>, message: &str) -> bool {
    if code.is_some_and(|code| OVERFLOW_CODES.contains(&code)) {
        return true;
    }
    let message = message.to_ascii_lowercase();
    OVERFLOW_PHRASES
        .iter()
        .any(|phrase| message.contains(phrase))
}

/// The request's size and the window, in tokens, when the message gives both (llama.cpp's
/// `request (N tokens) exceeds the available context size (M tokens)`, Anthropic's `N tokens
/// > M maximum`, vLLM's `maximum context length is M tokens ... your request has N`).
pub(crate) fn reported_sizes(message: &str) -> Option<(u64, u64)> {
    let numbers: Vec<u64> = message
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|digits| digits.parse().ok())
        .collect();
    let lower = message.to_ascii_lowercase();
    match numbers.as_slice() {
        [request, window, ..] if lower.contains("exceeds the available context size") => {
            Some((*request, *window))
        }
        [request, window, ..] if lower.contains("prompt is too long") => Some((*request, *window)),
        [window, request, ..] if lower.contains("maximum context length is") => {
            Some((*request, *window))
        }
        [request, window, ..]
            if lower.contains("is too long to fit into the model")
                || lower.contains("longer than the maximum model length") =>
        {
            Some((*request, *window))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each server's own words, as its sources produce them.
    #[test]
    fn openai_context_length_exceeded() {
        let message = "This model's maximum context length is 8192 tokens. However, your messages \
                       resulted in 9000 tokens. Please reduce the length of the messages.";
        assert!(is_overflow(Some("context_length_exceeded"), "anything"));
        assert!(is_overflow(None, message));
        assert_eq!(reported_sizes(message), Some((9000, 8192)));
    }

    #[test]
    fn deepseek_uses_the_openai_wording() {
        let message = "This model's maximum context length is 65536 tokens. However, you \
                       requested 70123 tokens (70123 in the messages, 0 in the completion).";
        assert!(is_overflow(Some("invalid_request_error"), message));
        assert_eq!(reported_sizes(message), Some((70123, 65536)));
    }

    #[test]
    fn anthropic_prompt_is_too_long() {
        let message = "prompt is too long: 208310 tokens > 200000 maximum";
        assert!(is_overflow(Some("invalid_request_error"), message));
        assert_eq!(reported_sizes(message), Some((208310, 200000)));
    }

    #[test]
    fn llama_cpp_exceed_context_size_error() {
        let message = "request (6711 tokens) exceeds the available context size (4096 tokens), \
                       try increasing it";
        assert!(is_overflow(Some("exceed_context_size_error"), message));
        assert!(is_overflow(None, message));
        assert_eq!(reported_sizes(message), Some((6711, 4096)));
    }

    #[test]
    fn vllm_bad_request_wordings() {
        let new = "This model's maximum context length is 4096 tokens. However, your request \
                   has 5120 input tokens. Please reduce the length of the input messages.";
        let old = "This model's maximum context length is 2048 tokens. However, you requested \
                   2100 tokens (2000 in the messages, 100 in the completion).";
        assert!(is_overflow(Some("BadRequestError"), new));
        assert!(is_overflow(Some("BadRequestError"), old));
        assert_eq!(reported_sizes(new), Some((5120, 4096)));
    }

    #[test]
    fn ollama_input_length_wordings() {
        assert!(is_overflow(
            None,
            "the input length exceeds the context length"
        ));
        assert!(is_overflow(
            None,
            "input length exceeds maximum context length"
        ));
    }

    #[test]
    fn ollama_vllm_and_lm_studio_overflow_answers() {
        let ollama = "prompt too long; exceeded max context length by 12 tokens";
        let vllm = "The prompt (total length 25938) is too long to fit into the model (context \
                    length 4096). Make sure that `max_model_len` is no smaller than the number \
                    of text tokens plus multimodal tokens.";
        let decoder = "The decoder prompt (length 5951) is longer than the maximum model length \
                       of 4096. Make sure that `max_model_len` is no smaller than the number of \
                       text tokens.";
        let lm_studio = "Trying to keep the first 5000 tokens when context the overflows. \
                         However, the model is loaded with context length of only 4096 tokens, \
                         which is not enough. Try to load the model with a larger context length, \
                         or provide a shorter input";
        for message in [ollama, vllm, decoder, lm_studio] {
            assert!(is_overflow(None, message), "{message}");
        }
        assert_eq!(reported_sizes(vllm), Some((25938, 4096)));
        assert_eq!(reported_sizes(decoder), Some((5951, 4096)));
        assert_eq!(reported_sizes(ollama), None, "no window in it");
    }

    #[test]
    fn llama_cpp_python_requested_tokens() {
        assert!(is_overflow(
            None,
            "Requested tokens (5000) exceed context window of 4096"
        ));
    }

    #[test]
    fn other_errors_are_not_overflows() {
        assert!(!is_overflow(
            Some("invalid_request_error"),
            "invalid tool schema"
        ));
        assert!(!is_overflow(None, "Model Not Exist"));
        assert!(!is_overflow(
            Some("mock_error"),
            "Conversation roles must alternate user/assistant/user/assistant/..."
        ));
        assert_eq!(reported_sizes("Model Not Exist"), None);
    }
}
