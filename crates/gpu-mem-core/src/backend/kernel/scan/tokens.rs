//! The tokens of a kernel source, as far as the stackless test and rewrite need them:
//! identifiers, numbers and single punctuation characters by byte range, with comments,
//! string and character literals and preprocessor lines skipped.

/// A token of the source: an identifier, a number or one punctuation character, by byte range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Token {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// Whether it is an identifier (or keyword).
    pub ident: bool,
}

/// Whether `b` may be part of an identifier: ASCII letters, digits and `_`, and the bytes of
/// multi-byte characters.
pub fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || !b.is_ascii()
}

/// The identifiers, numbers and punctuation of `code`, skipping whitespace, comments, string
/// and character literals and preprocessor lines. `None` for an unterminated comment or
/// literal.
pub fn tokens(code: &str) -> Option<Vec<Token>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    // Only whitespace since the last newline: a `#` here starts a directive.
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line_start = true;
                i += 1;
            }
            c if c.is_ascii_whitespace() => i += 1,
            b'#' if line_start => {
                // To the end of the line, following backslash continuations.
                while i < b.len() && b[i] != b'\n' {
                    if b[i] == b'\\' && i + 1 < b.len() {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let close = code[i + 2..].find("*/")?;
                i += 2 + close + 2;
                line_start = false;
            }
            b'"' | b'\'' => {
                i += 1;
                loop {
                    match b.get(i)? {
                        b'\\' => i += 2,
                        b'\n' => return None,
                        &q if q == c => break,
                        _ => i += 1,
                    }
                }
                i += 1;
                line_start = false;
            }
            c if c.is_ascii_digit()
                || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) =>
            {
                // A preprocessing number: digits, letters, `.`, `'` separators, signed exponents.
                let start = i;
                i += 1;
                while i < b.len() {
                    let d = b[i];
                    let part = d.is_ascii_alphanumeric()
                        || d == b'_'
                        || d == b'.'
                        || (d == b'\'' && b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric))
                        || ((d == b'+' || d == b'-')
                            && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P'));
                    if !part {
                        break;
                    }
                    i += 1;
                }
                out.push(Token {
                    start,
                    end: i,
                    ident: false,
                });
                line_start = false;
            }
            // Bytes of multi-byte characters count as identifier characters, so that every
            // token starts and ends on a character boundary (and `größe` is one name).
            c if c.is_ascii_alphabetic() || c == b'_' || !c.is_ascii() => {
                let start = i;
                while i < b.len() && is_name_byte(b[i]) {
                    i += 1;
                }
                out.push(Token {
                    start,
                    end: i,
                    ident: true,
                });
                line_start = false;
            }
            _ => {
                // One byte of ASCII punctuation.
                out.push(Token {
                    start: i,
                    end: i + 1,
                    ident: false,
                });
                i += 1;
                line_start = false;
            }
        }
    }
    Some(out)
}

/// The byte ranges of `code`'s preprocessor directives (with their continuation lines), which
/// [`tokens`] skips.
pub fn directives(code: &str) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    let mut continued: Option<usize> = None;
    for line in code.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let first = continued
            .take()
            .or_else(|| line.trim_start().starts_with('#').then_some(start));
        if let Some(first) = first {
            if line.trim_end().ends_with('\\') {
                continued = Some(first);
            } else {
                out.push(first..at);
            }
        }
    }
    out.extend(continued.map(|first| first..at));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_characters_are_not_identifiers() {
        let t = tokens("x = 1'000 + 'r' + 2e+5 + .5f; return").unwrap();
        let idents: Vec<&str> = t
            .iter()
            .filter(|t| t.ident)
            .map(|t| &"x = 1'000 + 'r' + 2e+5 + .5f; return"[t.start..t.end])
            .collect();
        assert_eq!(idents, ["x", "return"]);
    }

    #[test]
    fn directives_are_found_with_their_continuations() {
        let code = "#include <a>\nint x;\n  # define F(x) \\\n  x + 1\nint y; // #no\n#if 1";
        let found: Vec<&str> = directives(code).into_iter().map(|r| &code[r]).collect();
        assert_eq!(
            found,
            ["#include <a>\n", "  # define F(x) \\\n  x + 1\n", "#if 1"]
        );
    }
}
