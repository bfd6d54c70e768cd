//! A tokenizer just deep enough to find module paths in Rust source.
//!
//! It yields identifiers, `::` and single punctuation characters, each with its line number, and
//! drops what cannot hold a module path: whitespace, `//` and (nested) `/* */` comments, doc
//! comments, string, byte-string, C-string and raw-string literals, char and byte literals, and
//! number literals. A lifetime `'a` leaves only its name, which no path starts with.

/// What a token is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// A token and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub tok: Tok,
    pub line: usize,
}

/// Tokens of `source`; malformed input (an unterminated literal) ends the stream early.
pub fn tokenize(source: &str) -> Vec<Token> {
    let chars: Vec<char> = source.chars().collect();
    let mut lexer = Lexer {
        chars: &chars,
        at: 0,
        line: 1,
    };
    let mut tokens = Vec::new();
    while let Some(c) = lexer.peek(0) {
        let line = lexer.line;
        if c.is_whitespace() {
            lexer.bump();
        } else if c == '/' && lexer.peek(1) == Some('/') {
            while lexer.peek(0).is_some_and(|c| c != '\n') {
                lexer.bump();
            }
        } else if c == '/' && lexer.peek(1) == Some('*') {
            lexer.block_comment();
        } else if c == '"' {
            lexer.bump();
            lexer.quoted('"');
        } else if c == '\'' {
            lexer.char_or_lifetime();
        } else if c.is_ascii_digit() {
            lexer.word();
        } else if c.is_alphabetic() || c == '_' {
            let word = lexer.word();
            if let Some(ident) = lexer.after_word(&word) {
                tokens.push(Token {
                    tok: Tok::Ident(ident),
                    line,
                });
            }
        } else if c == ':' && lexer.peek(1) == Some(':') {
            lexer.bump();
            lexer.bump();
            tokens.push(Token {
                tok: Tok::PathSep,
                line,
            });
        } else {
            lexer.bump();
            tokens.push(Token {
                tok: Tok::Punct(c),
                line,
            });
        }
    }
    tokens
}

struct Lexer<'a> {
    chars: &'a [char],
    at: usize,
    line: usize,
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn bump(&mut self) {
        if self.peek(0) == Some('\n') {
            self.line += 1;
        }
        self.at += 1;
    }

    fn word(&mut self) -> String {
        let mut word = String::new();
        while let Some(c) = self.peek(0).filter(|c| c.is_alphanumeric() || *c == '_') {
            word.push(c);
            self.bump();
        }
        word
    }

    /// Block comments nest in Rust: `/* a /* b */ c */` is one comment.
    fn block_comment(&mut self) {
        let mut depth = 0usize;
        while let Some(c) = self.peek(0) {
            if c == '/' && self.peek(1) == Some('*') {
                depth += 1;
                self.bump();
            } else if c == '*' && self.peek(1) == Some('/') {
                depth -= 1;
                self.bump();
                if depth == 0 {
                    self.bump();
                    return;
                }
            }
            self.bump();
        }
    }

    /// Skips to the unescaped `close`; the opening quote is already consumed.
    fn quoted(&mut self, close: char) {
        while let Some(c) = self.peek(0) {
            self.bump();
            if c == '\\' {
                self.bump();
            } else if c == close {
                return;
            }
        }
    }

    /// Skips `"…"#…#` with `hashes` hashes; the `r` and the hashes are already consumed.
    fn raw_string(&mut self, hashes: usize) {
        self.bump(); // the opening quote
        while let Some(c) = self.peek(0) {
            self.bump();
            if c == '"' && (0..hashes).all(|k| self.peek(k) == Some('#')) {
                for _ in 0..hashes {
                    self.bump();
                }
                return;
            }
        }
    }

    /// `'x'` and `'\n'` are literals; `'a` (no closing quote after one char) is a lifetime.
    fn char_or_lifetime(&mut self) {
        self.bump();
        if self.peek(0) == Some('\\') || self.peek(1) == Some('\'') {
            self.quoted('\'');
        }
    }

    /// After a word: a literal prefix (`b"…"`, `r#"…"#`, `b'x'`, `c"…"`) swallows its literal and
    /// yields nothing; `r#name` yields `name`; any other word is an identifier.
    fn after_word(&mut self, word: &str) -> Option<String> {
        let literal_prefix = matches!(word, "b" | "r" | "br" | "c" | "cr");
        let raw = word.contains('r') && literal_prefix;
        match self.peek(0) {
            Some('"') if literal_prefix => {
                if raw {
                    self.raw_string(0);
                } else {
                    self.bump();
                    self.quoted('"');
                }
                None
            }
            Some('\'') if word == "b" => {
                self.bump();
                self.quoted('\'');
                None
            }
            Some('#') if raw => {
                let hashes = (0..).take_while(|&k| self.peek(k) == Some('#')).count();
                if self.peek(hashes) == Some('"') {
                    for _ in 0..hashes {
                        self.bump();
                    }
                    self.raw_string(hashes);
                    None
                } else if word == "r" && hashes == 1 {
                    self.bump();
                    Some(self.word())
                } else {
                    Some(word.to_string())
                }
            }
            _ => Some(word.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idents(source: &str) -> Vec<String> {
        tokenize(source)
            .into_iter()
            .filter_map(|t| match t.tok {
                Tok::Ident(name) => Some(name),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn drops_comments_and_literals() {
        let source = "a // crate::x\n/* b /* nested */ crate::y */ c\n/// doc crate::z\n\
                      \"crate::s \\\" q\" r#\"crate::\"# \"#\" br##\"x\"## b'\\'' c\"t\" '\\n' 'x' d";
        assert_eq!(idents(source), ["a", "c", "d"]);
    }

    #[test]
    fn keeps_lifetimes_raw_idents_and_lines() {
        assert_eq!(
            idents("fn f<'a>(x: &'a r#type)"),
            ["fn", "f", "a", "x", "a", "type"]
        );
        let tokens = tokenize("a\n\"two\nlines\"\ncrate::b");
        let crate_token = tokens.iter().find(|t| t.tok == Tok::PathSep);
        assert_eq!(crate_token.map(|t| t.line), Some(4));
    }
}
