//! Text from the peer, made safe to print: a file name or a close reason
//! may carry terminal escapes, line breaks or bidirectional overrides.

/// Escapes control characters (C0, DEL, C1) and Unicode format characters
/// that reorder or hide text, as `\u{..}`; everything else is kept.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() || is_invisible_format(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Bidirectional overrides and isolates, zero-width characters and the BOM.
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
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
    }
}
