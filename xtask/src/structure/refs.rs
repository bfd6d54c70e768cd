//! The module paths one file refers to, resolved against the file's own module.
//!
//! Read from the tokens: every `use` tree (groups, `self` in groups, `as` aliases, globs) and
//! every inline path that starts with `crate::`, `super::` or `self::`. Paths rooted anywhere
//! else (`std::…`, another crate, a bare child module) are not sibling dependencies and are
//! dropped; so are `$crate::…` in macros (the dependency is the expansion site's) and the path of
//! `pub(in …)`. Test code does not count: an item under `#[cfg(test)]` (or `#[cfg(all(test, …))]`)
//! and an inline `mod tests { … }` are skipped, and a `#[cfg(test)] mod name;` is reported so its
//! file can be left out. Inline modules (`mod inner { … }`) move `self` and `super` the way
//! rustc does.

use super::tokens::{Tok, Token};

/// One reference: where it is written and the absolute module path it names (crate-relative,
/// possibly ending in an item name, which the graph trims off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub line: usize,
    /// The path as written, `::`-joined (`crate::memory::Pool`).
    pub written: String,
    pub target: Vec<String>,
}

/// What one file contributes.
#[derive(Debug, Default)]
pub struct FileRefs {
    pub references: Vec<Reference>,
    /// Children declared `#[cfg(test)] mod name;`: test-only files.
    pub test_children: Vec<String>,
}

/// Reads the references of a file whose module path is `module`.
pub fn references(tokens: &[Token], module: &[String]) -> FileRefs {
    let mut parser = Parser {
        tokens,
        at: 0,
        depth: 0,
        scopes: Vec::new(),
        module,
        out: FileRefs::default(),
    };
    parser.items();
    parser.out
}

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    /// Brace depth, to know when an inline module ends.
    depth: usize,
    /// Open inline modules: name and the depth inside their braces.
    scopes: Vec<(String, usize)>,
    module: &'a [String],
    out: FileRefs,
}

impl<'a> Parser<'a> {
    fn tok(&self, ahead: usize) -> Option<&'a Tok> {
        self.tokens.get(self.at + ahead).map(|t| &t.tok)
    }

    fn ident(&self, ahead: usize) -> Option<&'a str> {
        match self.tok(ahead) {
            Some(Tok::Ident(name)) => Some(name),
            _ => None,
        }
    }

    fn punct(&self, ahead: usize, c: char) -> bool {
        self.tok(ahead) == Some(&Tok::Punct(c))
    }

    fn behind(&self, back: usize) -> Option<&'a Tok> {
        self.at
            .checked_sub(back)
            .and_then(|i| self.tokens.get(i))
            .map(|t| &t.tok)
    }

    fn items(&mut self) {
        while let Some(tok) = self.tok(0) {
            match tok {
                Tok::Punct('#') if self.punct(1, '[') => {
                    self.at += 1;
                    if self.attribute_is_test() {
                        self.test_item();
                    }
                }
                Tok::Punct('{') => {
                    self.depth += 1;
                    self.at += 1;
                }
                Tok::Punct('}') => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.scopes.last().is_some_and(|s| s.1 > self.depth) {
                        self.scopes.pop();
                    }
                    self.at += 1;
                }
                Tok::Ident(word) if word == "mod" && self.punct(2, '{') => {
                    let name = self.ident(1).unwrap_or_default().to_string();
                    if name == "tests" {
                        self.at += 2;
                        self.skip_group();
                    } else {
                        self.at += 3;
                        self.depth += 1;
                        self.scopes.push((name, self.depth));
                    }
                }
                Tok::Ident(word) if word == "use" => {
                    self.at += 1;
                    let mut found = Vec::new();
                    self.use_tree(Vec::new(), &mut found);
                    for (line, path) in found {
                        self.push(line, &path);
                    }
                }
                Tok::Ident(word)
                    if matches!(word.as_str(), "crate" | "super" | "self")
                        && self.tok(1) == Some(&Tok::PathSep)
                        && self.inline_path_counts() =>
                {
                    let line = self.tokens[self.at].line;
                    let mut path = vec![word.clone()];
                    self.at += 1;
                    while self.tok(0) == Some(&Tok::PathSep) {
                        let Some(next) = self.ident(1) else { break };
                        path.push(next.to_string());
                        self.at += 2;
                    }
                    self.push(line, &path);
                }
                _ => self.at += 1,
            }
        }
    }

    /// Not `$crate::`, not the tail of a longer path, not `pub(in crate::…)`.
    fn inline_path_counts(&self) -> bool {
        let prev = self.behind(1);
        let in_visibility = matches!(prev, Some(Tok::Ident(w)) if w == "in")
            && self.behind(2) == Some(&Tok::Punct('('))
            && matches!(self.behind(3), Some(Tok::Ident(w)) if w == "pub");
        !matches!(prev, Some(Tok::PathSep | Tok::Punct('$'))) && !in_visibility
    }

    /// At the `[` of an attribute: consumes it and says whether it is `cfg(test)` or
    /// `cfg(all(test, …))`.
    fn attribute_is_test(&mut self) -> bool {
        let start = self.at;
        self.skip_group();
        let inner: Vec<&Tok> = self.tokens[start + 1..self.at.saturating_sub(1)]
            .iter()
            .map(|t| &t.tok)
            .collect();
        let word = |i: usize, w: &str| matches!(inner.get(i), Some(Tok::Ident(x)) if x == w);
        let open = |i: usize| inner.get(i) == Some(&&Tok::Punct('('));
        word(0, "cfg")
            && open(1)
            && ((word(2, "test") && inner.len() == 4)
                || (word(2, "all") && open(3) && word(4, "test")))
    }

    /// Skips the item after a test attribute (and any further attributes), noting a test-only
    /// child module declared `mod name;`.
    fn test_item(&mut self) {
        while self.punct(0, '#') && self.punct(1, '[') {
            self.at += 1;
            self.skip_group();
        }
        if self.ident(0) == Some("pub") {
            self.at += 1;
            if self.punct(0, '(') {
                self.skip_group();
            }
        }
        if self.ident(0) == Some("mod") && self.punct(2, ';') {
            if self.scopes.is_empty() {
                let name = self.ident(1).unwrap_or_default().to_string();
                self.out.test_children.push(name);
            }
            self.at += 3;
            return;
        }
        // An item ends at `;` or its closing brace; a field, variant or expression also at `,`.
        let is_item = matches!(
            self.ident(0),
            Some(
                "fn" | "impl"
                    | "mod"
                    | "struct"
                    | "enum"
                    | "union"
                    | "use"
                    | "const"
                    | "static"
                    | "type"
                    | "trait"
                    | "extern"
                    | "unsafe"
                    | "async"
                    | "macro_rules"
                    | "let"
            )
        );
        while let Some(tok) = self.tok(0) {
            match tok {
                Tok::Punct('(' | '[' | '{') => {
                    let was_brace = self.punct(0, '{');
                    self.skip_group();
                    if was_brace && !self.punct(0, ';') {
                        return;
                    }
                }
                Tok::Punct(')' | ']' | '}') => return,
                Tok::Punct(';') => {
                    self.at += 1;
                    return;
                }
                Tok::Punct(',') if !is_item => {
                    self.at += 1;
                    return;
                }
                _ => self.at += 1,
            }
        }
    }

    /// At an opening bracket: moves past its matching close.
    fn skip_group(&mut self) {
        let mut depth = 0usize;
        while let Some(tok) = self.tok(0) {
            self.at += 1;
            match tok {
                Tok::Punct('(' | '[' | '{') => depth += 1,
                Tok::Punct(')' | ']' | '}') => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return;
                    }
                }
                _ => {}
            }
        }
    }

    /// One use tree after `prefix`; pushes `(line, full path)` for each leaf.
    fn use_tree(&mut self, mut prefix: Vec<String>, found: &mut Vec<(usize, Vec<String>)>) {
        if self.tok(0) == Some(&Tok::PathSep) {
            // `use ::name`: an external crate, never a module of this one.
            prefix.push(String::new());
            self.at += 1;
        }
        loop {
            let line = self.tokens.get(self.at).map_or(0, |t| t.line);
            match self.tok(0) {
                Some(Tok::Ident(name)) => {
                    // `{self, …}` names the prefix itself.
                    if name != "self" || prefix.is_empty() {
                        prefix.push(name.clone());
                    }
                    self.at += 1;
                    if self.tok(0) == Some(&Tok::PathSep) {
                        self.at += 1;
                        continue;
                    }
                    if self.ident(0) == Some("as") {
                        self.at += 2;
                    }
                    found.push((line, prefix));
                    return;
                }
                Some(Tok::Punct('*')) => {
                    self.at += 1;
                    found.push((line, prefix));
                    return;
                }
                Some(Tok::Punct('{')) => {
                    self.at += 1;
                    while !self.punct(0, '}') && self.tok(0).is_some() {
                        let before = self.at;
                        self.use_tree(prefix.clone(), found);
                        if self.punct(0, ',') {
                            self.at += 1;
                        } else if self.at == before {
                            self.at += 1; // malformed: never loop in place
                        }
                    }
                    self.at += 1;
                    return;
                }
                _ => return,
            }
        }
    }

    fn push(&mut self, line: usize, written: &[String]) {
        let mut scope = self.module.to_vec();
        scope.extend(self.scopes.iter().map(|s| s.0.clone()));
        if let Some(target) = absolute(&scope, written) {
            self.out.references.push(Reference {
                line,
                written: written.join("::"),
                target,
            });
        }
    }
}

/// The crate-relative path `written` names from module `scope`; `None` when it is not rooted at
/// `crate`, `self` or `super`, or climbs above the crate root.
pub fn absolute(scope: &[String], written: &[String]) -> Option<Vec<String>> {
    let (first, rest) = written.split_first()?;
    let mut base = match first.as_str() {
        "crate" => Vec::new(),
        "self" => scope.to_vec(),
        "super" => scope.get(..scope.len().checked_sub(1)?)?.to_vec(),
        _ => return None,
    };
    let mut rest = rest.iter().peekable();
    while rest.peek().is_some_and(|s| *s == "super") {
        base.pop()?;
        rest.next();
    }
    base.extend(rest.cloned());
    Some(base)
}

#[cfg(test)]
mod tests {
    use super::super::tokens::tokenize;
    use super::*;

    fn targets(source: &str, module: &[&str]) -> Vec<(usize, String)> {
        let module: Vec<String> = module.iter().map(|s| s.to_string()).collect();
        references(&tokenize(source), &module)
            .references
            .into_iter()
            .map(|r| (r.line, r.target.join("::")))
            .collect()
    }

    #[test]
    fn use_trees_and_groups() {
        let source = "use crate::a::b;\n\
                      pub use super::{c, d::{self, e as f}, *};\n\
                      use self::g::h;\nuse std::fmt;\nuse ::other::x;\n";
        assert_eq!(
            targets(source, &["m", "n"]),
            [
                (1, "a::b".to_string()),
                (2, "m::c".to_string()),
                (2, "m::d".to_string()),
                (2, "m::d::e".to_string()),
                (2, "m".to_string()),
                (3, "m::n::g::h".to_string()),
            ]
        );
    }

    #[test]
    fn inline_paths_but_not_macros_or_visibility() {
        let source = "fn f() { crate::a::b::f(); super::super::c::D::new() }\n\
                      macro_rules! m { () => { $crate::x::y } }\n\
                      pub(in crate::z) fn g() {}\n\
                      let s = \"crate::q\"; // crate::r\n";
        assert_eq!(
            targets(source, &["m", "n"]),
            [(1, "a::b::f".to_string()), (1, "c::D::new".to_string())]
        );
    }

    #[test]
    fn test_code_is_skipped() {
        let source = "#[cfg(test)]\nmod support;\n\
                      #[cfg(test)]\n#[allow(unused)]\nfn helper() { crate::t1::x() }\n\
                      #[cfg(all(test, unix))]\nimpl<A, B> X for Y { fn f() { crate::t2::x() } }\n\
                      mod tests { use crate::t3; }\n\
                      struct S { #[cfg(test)] probe: crate::t4::P, real: crate::kept::R }\n\
                      #[cfg(any(test, feature = \"x\"))]\nuse crate::also_kept;\n";
        let module: Vec<String> = Vec::new();
        let refs = references(&tokenize(source), &module);
        let found: Vec<String> = refs
            .references
            .iter()
            .map(|r| r.target.join("::"))
            .collect();
        assert_eq!(found, ["kept::R", "also_kept"]);
        assert_eq!(refs.test_children, ["support"]);
    }

    #[test]
    fn inline_modules_move_self_and_super() {
        let source = "mod inner { use super::a; fn f() { self::b::g() } }\nuse self::c;\n";
        assert_eq!(
            targets(source, &["m"]),
            [
                (1, "m::a".to_string()),
                (1, "m::inner::b::g".to_string()),
                (2, "m::c".to_string()),
            ]
        );
    }

    #[test]
    fn absolute_paths() {
        let scope = ["a".to_string(), "b".to_string()];
        let path = |s: &str| s.split("::").map(str::to_string).collect::<Vec<_>>();
        assert_eq!(absolute(&scope, &path("super::super::c")), Some(path("c")));
        assert_eq!(absolute(&scope, &path("super::super::super::c")), None);
        assert_eq!(absolute(&[], &path("super::c")), None);
        assert_eq!(absolute(&scope, &path("std::c")), None);
    }
}
