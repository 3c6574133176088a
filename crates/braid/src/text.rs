//! Text from the peer, made safe to print: a file name or a close reason
//! may carry terminal escapes, line breaks or bidirectional overrides.

/// Escapes control characters (C0, DEL, C1), Unicode characters that
/// reorder, hide or break text, and the backslash itself (so an escape in
/// the output is always ours), as `\u{..}`; everything else is kept.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || c == '\\' || is_invisible_format(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Bidirectional marks, overrides and isolates, zero-width and invisible
/// characters, line and paragraph separators, variation selectors, tags.
fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{200B}'..='\u{200F}'
        | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{FE00}'..='\u{FE0F}'
        | '\u{FEFF}' | '\u{E0000}'..='\u{E007F}' | '\u{E0100}'..='\u{E01EF}')
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn control_and_reordering_characters_are_escaped() {
        assert_eq!(escape("report.pdf"), "report.pdf");
        assert_eq!(escape("naïve café.txt"), "naïve café.txt");
        assert_eq!(escape("a\x1b[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(escape("line\nbreak\r"), "line\\u{a}break\\u{d}");
        assert_eq!(escape("gpj.\u{202E}exe"), "gpj.\\u{202e}exe");
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escape("a\u{2028}b\u{2066}c"), "a\\u{2028}b\\u{2066}c");
        // A backslash in the text cannot pass for one of our escapes.
        assert_eq!(escape("\\u{1b}"), "\\u{5c}u{1b}");
    }
}
