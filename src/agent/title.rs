//! The fallback session title: the first words of the first prompt.

const MAX_WORDS: usize = 5;
const MAX_BYTES: usize = 80;

pub(crate) fn fallback_title(text: &str) -> String {
    let mut title = String::new();
    for word in text.split_whitespace().take(MAX_WORDS) {
        let extra = usize::from(!title.is_empty()) + word.len();
        if title.len() + extra > MAX_BYTES {
            if title.is_empty() {
                let mut end = MAX_BYTES;
                while !word.is_char_boundary(end) {
                    end -= 1;
                }
                title.push_str(&word[..end]);
            }
            break;
        }
        if !title.is_empty() {
            title.push(' ');
        }
        title.push_str(word);
    }
    title
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_five_words_within_a_byte_cap() {
        assert_eq!(
            fallback_title("Reply with exactly the word: PONG. Do not use any tools."),
            "Reply with exactly the word:"
        );
        assert_eq!(fallback_title("  one\ntwo  "), "one two");
        let long = "é".repeat(100);
        let title = fallback_title(&long);
        assert!(title.len() <= MAX_BYTES && !title.is_empty());
    }
}
