//! The statement structure of a kernel body as the regions rewrite sees it: a list of items per
//! scope (the body, and the body of each loop that holds a barrier), each a statement the
//! threads run one by one, a declaration left at block level, a barrier, or such a loop. Read
//! from the tokens alone; anything the rewrite could get wrong is an `Err` naming its line.

use crate::source::stackless::TILE_LANES;
use gpu_mem_core::kernel::scan::functions::{body_end, bracket_end, call_end};
use gpu_mem_core::kernel::scan::tokens::Token;

/// The block barriers the rewrite splits regions at.
pub(super) const BLOCK_BARRIERS: [&str; 3] = ["__syncthreads", "syncthreads", "barrier"];

/// The words of a type a C-style cast may name.
pub(super) const CAST_WORDS: [&str; 12] = [
    "int", "unsigned", "float", "double", "long", "short", "char", "bool", "signed", "size_t",
    "const", "*",
];

/// Words that start a statement which declares nothing.
const STATEMENT_WORDS: [&str; 20] = [
    "return", "goto", "delete", "throw", "break", "continue", "case", "default", "new", "else",
    "do", "sizeof", "operator", "template", "if", "for", "while", "switch", "using", "typedef",
];

/// One statement of a scope.
#[derive(Debug)]
pub(super) enum Item {
    /// Statements each thread runs: tokens `first..=last`; `decl` when it declares one variable
    /// of the scope.
    Stmt {
        first: usize,
        last: usize,
        decl: Option<Decl>,
        /// The warp collective it calls (its threads wait there for their warp's).
        call: Option<Call>,
    },
    /// A declaration the block shares (`__shared__`, `static`, types, constants), left in place
    /// between the regions: tokens `first..=last`.
    Block { first: usize, last: usize },
    /// A block barrier statement, tokens `first..=last`.
    Barrier { first: usize, last: usize },
    /// A loop that holds barriers.
    Loop(Loop),
    /// An `if` that holds barriers.
    Branch(Branch),
    /// A block `{ ... }` that holds barriers: its `{`, `}` and items.
    Compound(usize, usize, Vec<Item>),
}

/// A warp collective's call in a statement: its name's token and the `)` that closes it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Call {
    pub(super) name: usize,
    pub(super) close: usize,
}

/// `if (condition) { ... } else { ... }` with barriers or warp collectives inside (`else`
/// optional).
#[derive(Debug)]
pub(super) struct Branch {
    /// Whether a block barrier is inside (else only warp collectives are: the threads that do
    /// not enter a block wait, masked, at the `if`'s end).
    pub(super) barriers: bool,
    /// `if`, its `(` and the `)` that closes it.
    pub(super) keyword: usize,
    pub(super) open: usize,
    pub(super) close: usize,
    /// Each block's `{` and `}` (or, when not braced, its statement's first and last
    /// tokens), its items, and whether it is braced: the `if`'s, then the `else`'s. (Only an
    /// `if` without barriers may have a single statement for a block.)
    pub(super) blocks: Vec<(usize, usize, Vec<Item>, bool)>,
}

impl Item {
    /// Its first token.
    pub(super) fn first(&self) -> usize {
        match self {
            Item::Stmt { first, .. } | Item::Block { first, .. } | Item::Barrier { first, .. } => {
                *first
            }
            Item::Loop(l) => l.keyword,
            Item::Branch(b) => b.keyword,
            Item::Compound(open, _, _) => *open,
        }
    }
}

/// A declaration of variables: `type name;`, `type name = init;`, or several declarators.
#[derive(Debug, Clone)]
pub(super) struct Decl {
    /// Its first token (the type's).
    pub(super) first: usize,
    /// One past the base type's last token (each declarator's `*`s follow).
    pub(super) base_end: usize,
    pub(super) declarators: Vec<Declarator>,
    /// The `;` that ends it.
    pub(super) end: usize,
}

/// One variable of a declaration: `*`s, its name, an initialiser.
#[derive(Debug, Clone, Copy)]
pub(super) struct Declarator {
    /// Its first token (its first `*`, or its name).
    pub(super) start: usize,
    /// The name's token.
    pub(super) name: usize,
    /// The `=`, if it has an initialiser.
    pub(super) eq: Option<usize>,
}

/// `for (init; condition; step) { body }` or `while (condition) { body }` with barriers or warp
/// collectives inside.
#[derive(Debug)]
pub(super) struct Loop {
    /// Whether a block barrier is inside (else only warp collectives are: a thread that leaves
    /// it waits, masked, at its end).
    pub(super) barriers: bool,
    /// `for` or `while`.
    pub(super) keyword: usize,
    /// The `(`, and the `)` that closes it.
    pub(super) open: usize,
    pub(super) close: usize,
    /// A `for`'s two `;`.
    pub(super) semis: Option<(usize, usize)>,
    /// A `for`'s initialiser when it declares a variable.
    pub(super) init: Option<Decl>,
    /// The body's `{` and `}` (or, when not braced, its statement's first and last tokens:
    /// only a loop without barriers may have a single statement for a body).
    pub(super) body: (usize, usize),
    pub(super) braced: bool,
    pub(super) items: Vec<Item>,
}

/// The tokens of one source, read as statements.
pub(super) struct Statements<'c> {
    pub(super) code: &'c str,
    pub(super) toks: &'c [Token],
    /// The names a warp collective is called by: the prelude's, and the source's function-like
    /// macros that call one.
    pub(super) warp_calls: Vec<&'c str>,
}

impl<'c> Statements<'c> {
    pub(super) fn text(&self, k: usize) -> &'c str {
        self.toks.get(k).map_or("", |t| &self.code[t.start..t.end])
    }

    pub(super) fn line(&self, k: usize) -> usize {
        let at = self.toks.get(k).map_or(self.code.len(), |t| t.start);
        self.code[..at].matches('\n').count() + 1
    }

    fn is_name(&self, k: usize) -> bool {
        self.toks.get(k).is_some_and(|t| t.ident)
            && !self.text(k).starts_with(|c: char| c.is_ascii_digit())
    }

    /// Whether token `k` names a block barrier (not a member or a name of another namespace or
    /// class): called, in parentheses, taken by address.
    pub(super) fn names_barrier(&self, k: usize) -> bool {
        BLOCK_BARRIERS.contains(&self.text(k)) && !self.elsewhere(k)
    }

    /// Whether token `k` calls a warp collective (not a member or a name of another namespace
    /// or class).
    pub(super) fn names_collective(&self, k: usize) -> bool {
        self.warp_calls.contains(&self.text(k)) && !self.elsewhere(k)
    }

    /// Whether the name of token `k` is a member's (`.`, `->`) or qualified by a namespace or
    /// class: the prelude's functions are the global namespace's, `::__syncthreads()` too.
    fn elsewhere(&self, k: usize) -> bool {
        let before = |back: usize| if k >= back { self.text(k - back) } else { "" };
        match before(1) {
            "." | ">" => true,
            ":" => {
                before(2) != ":"
                    || self.toks.get(k.wrapping_sub(3)).is_some_and(|t| t.ident)
                    || before(3) == ">"
            }
            _ => false,
        }
    }

    /// Whether token `k` makes a thread wait: a block barrier or a warp collective.
    pub(super) fn waits(&self, k: usize) -> bool {
        self.names_barrier(k) || self.names_collective(k)
    }

    /// The warp collective statement `first..=last` calls, or why the rewrite cannot split the
    /// regions at it: one call, made whenever the statement runs (not behind `?:`, `&&`, `||`),
    /// whose operands can be evaluated twice (recorded before the split, the statement run
    /// after it): names, literals and operators, no assignment or call.
    fn collective_call(&self, first: usize, last: usize) -> Result<Call, String> {
        let line = self.line(first);
        let calls: Vec<usize> = (first..=last)
            .filter(|&k| self.names_collective(k))
            .collect();
        let [name] = calls[..] else {
            return Err(format!(
                "line {line}: two warp collectives in one statement"
            ));
        };
        let close = (self.text(name + 1) == "(")
            .then(|| call_end(self.code, self.toks, name + 1))
            .flatten()
            .ok_or_else(|| format!("line {line}: a warp collective that is not called"))?;
        // Whether token `j` and the next touch (`&&`, `++`, `+=`).
        let touching = |j: usize| {
            self.toks
                .get(j + 1)
                .is_some_and(|n| self.toks[j].end == n.start)
        };
        for k in first..=last {
            let t = self.text(k);
            let next = if touching(k) { self.text(k + 1) } else { "" };
            if !(name..=close).contains(&k) {
                if t == "?" || (matches!(t, "&" | "|") && next == t) {
                    return Err(format!(
                        "line {line}: a warp collective behind a condition in its statement"
                    ));
                }
                continue;
            }
            let before = if k > 0 && touching(k - 1) {
                self.text(k - 1)
            } else {
                ""
            };
            let compares = next == "="
                || matches!(before, "=" | "!")
                || (matches!(before, "<" | ">")
                    && !(k >= 2 && touching(k - 2) && self.text(k - 2) == before));
            // (A lowered tile's lanes, `tile.gm_tile_lanes()`, read a value, as a name does.)
            let calls = k > name + 1
                && self.is_name(k)
                && self.text(k + 1) == "("
                && t != "sizeof"
                && t != TILE_LANES;
            if calls || (matches!(t, "+" | "-") && next == t) || (t == "=" && !compares) {
                return Err(format!(
                    "line {line}: a warp collective whose operands call or assign"
                ));
            }
        }
        Ok(Call { name, close })
    }

    fn closing_paren(&self, open: usize) -> Result<usize, String> {
        if self.text(open) != "(" {
            return Err(format!("line {}: `(` expected", self.line(open)));
        }
        call_end(self.code, self.toks, open)
            .ok_or_else(|| format!("line {}: a parenthesis does not close", self.line(open)))
    }

    /// The last token of the statement that starts at `i`.
    fn statement_end(&self, i: usize) -> Result<usize, String> {
        let unclosed = || format!("line {}: a statement does not end", self.line(i));
        match self.text(i) {
            "{" => body_end(self.code, self.toks, i).ok_or_else(unclosed),
            "if" => {
                let close = self.closing_paren(i + 1)?;
                let mut last = self.statement_end(close + 1)?;
                if self.text(last + 1) == "else" {
                    last = self.statement_end(last + 2)?;
                }
                Ok(last)
            }
            "for" | "while" | "switch" => {
                let close = self.closing_paren(i + 1)?;
                self.statement_end(close + 1)
            }
            "do" => {
                let body = self.statement_end(i + 1)?;
                if self.text(body + 1) != "while" {
                    return Err(unclosed());
                }
                let close = self.closing_paren(body + 2)?;
                (self.text(close + 1) == ";")
                    .then_some(close + 1)
                    .ok_or_else(unclosed)
            }
            "try" | "asm" | "__asm__" | "__asm" => Err(format!(
                "line {}: `{}` in a kernel's body",
                self.line(i),
                self.text(i)
            )),
            _ => {
                let mut depth = 0i32;
                for k in i..self.toks.len() {
                    match self.text(k) {
                        "(" | "[" | "{" => depth += 1,
                        ")" | "]" | "}" => {
                            depth -= 1;
                            if depth < 0 {
                                return Err(unclosed());
                            }
                        }
                        ";" if depth == 0 => return Ok(k),
                        _ => {}
                    }
                }
                Err(unclosed())
            }
        }
    }

    /// The parameters of the function whose parameter list opens at token `open`: each as
    /// (its first token, its name's token).
    pub(super) fn parameters(&self, open: usize) -> Result<Vec<(usize, usize)>, String> {
        let close = self.closing_paren(open)?;
        let mut out = Vec::new();
        let mut start = open + 1;
        let mut depth = 0i32;
        for k in open + 1..=close {
            match self.text(k) {
                "(" | "[" | "{" | "<" => depth += 1,
                ")" | "]" | "}" | ">" if k < close => depth -= 1,
                "," | ")" if depth == 0 && k > start => {
                    let name = k - 1;
                    if !self.is_name(name) || name == start {
                        if self.text(start) == "void" && k == close && name == start {
                            break;
                        }
                        return Err(format!(
                            "line {}: a kernel parameter without a plain name",
                            self.line(start)
                        ));
                    }
                    out.push((start, name));
                    start = k + 1;
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// Whether the `&` at token `k` may take the address of what follows: not the second of
    /// `&&` nor a bitwise and (an operand before it: a name, a number or `]`; after `)` it may
    /// be a cast's, and counts). (A name after `int &` counts as after a bitwise and: what the
    /// rewrite needs is a variable whose address no pointer holds, and a reference declared so
    /// aliases the variable it is bound to, not this name.)
    pub(super) fn takes_address(&self, k: usize) -> bool {
        const KEYWORDS: [&str; 6] = ["return", "case", "sizeof", "else", "do", "throw"];
        if self.text(k) != "&" {
            return false;
        }
        let Some(before) = k.checked_sub(1) else {
            return true;
        };
        let b = self.text(before);
        if b == "&" && self.toks[before].end == self.toks[k].start {
            return false;
        }
        // (After `)` it may be a cast's: `(int*)&x` takes the address.)
        let operand = b == "]"
            || (b.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
                && !KEYWORDS.contains(&b));
        !operand
    }

    /// Whether the name at token `k` is changed there: assigned (`=`, `+=`, ...), stepped
    /// (`++`, `--`), its address taken (`&`, not the second of `&&`: [`Self::takes_address`]),
    /// or a member of it assigned (`name.field = `).
    pub(super) fn changes(&self, k: usize) -> bool {
        let before = |back: usize| k.checked_sub(back).map_or("", |b| self.text(b));
        if (k > 0 && self.takes_address(k - 1))
            || (matches!(before(1), "+" | "-") && before(2) == before(1))
        {
            return true;
        }
        // Past `.field`, `->field` and `[...]` (through a member only: `p[i] = ` writes memory
        // the parameter points to, `s.a[i] = ` the parameter's own copy).
        let mut at = k + 1;
        let mut member = false;
        loop {
            match self.text(at) {
                "." => {
                    member = true;
                    at += 2;
                }
                "-" if self.text(at + 1) == ">" => return false,
                "[" => match bracket_end(self.code, self.toks, at) {
                    Some(end) => at = end + 1,
                    None => return true,
                },
                _ => break,
            }
        }
        let direct = at == k + 1 || member;
        let op = self.text(at);
        let next = self.text(at + 1);
        direct
            && match op {
                "=" => next != "=",
                "+" | "-" => next == op || next == "=",
                "*" | "/" | "%" | "&" | "|" | "^" => next == "=",
                "<" | ">" => next == op && self.text(at + 2) == "=",
                _ => false,
            }
    }

    /// Whether the variable declared at token `at` (its name) keeps its first value: among
    /// tokens `first..end` (a kernel's body) its name stands nowhere before the declaration (a
    /// name there is another variable, which a variable declared earlier for the block would
    /// hide) and is never changed after it (assigned, stepped, its address taken; a variable
    /// of an inner scope that hides it counts, and refuses it, but not that variable's
    /// declaration). Another declaration of the name is its scope's: the rewrite's scopes (and
    /// C++'s) tell them apart.
    pub(super) fn keeps_first_value(&self, at: usize, (first, end): (usize, usize)) -> bool {
        let name = self.text(at);
        (first..end)
            .filter(|&t| self.text(t) == name && t != at)
            .all(|t| t > at && (self.declares(t) || !self.changes(t)))
    }

    /// Whether the name at token `t` is declared there (after a type's word, before `=`, `;`,
    /// `,` or `[`): `int mask = ...;` a second time in a kernel, in a scope of its own.
    pub(super) fn declares(&self, t: usize) -> bool {
        const NOT_TYPES: [&str; 7] = ["return", "case", "else", "do", "throw", "sizeof", "goto"];
        t > 0
            && self.toks[t - 1].ident
            && !NOT_TYPES.contains(&self.text(t - 1))
            && matches!(self.text(t + 1), "=" | ";" | "," | "[")
            && self.text(t + 2) != "="
    }

    /// The `break`s and `continue`s among tokens `first..=last` that leave (or go round) the
    /// loop around the statement, not one inside it.
    pub(super) fn loose_jumps(&self, first: usize, last: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut k = first;
        while k <= last {
            match self.text(k) {
                "for" | "while" | "switch" | "do" => {
                    k = self.statement_end(k).unwrap_or(last) + 1;
                    continue;
                }
                "break" | "continue" => out.push(k),
                _ => {}
            }
            k += 1;
        }
        out
    }

    /// The items of the scope whose tokens are `first..end` (`end`: its closing `}`).
    pub(super) fn scope(&self, first: usize, end: usize) -> Result<Vec<Item>, String> {
        let mut items = Vec::new();
        let mut i = first;
        while i < end {
            let last = self.statement_end(i)?;
            if last >= end {
                return Err(format!("line {}: a statement does not end", self.line(i)));
            }
            let waits = (i..=last).any(|k| self.waits(k));
            let barriers = (i..=last).any(|k| self.names_barrier(k));
            let item = if !waits {
                self.plain(i, last)?
            } else if let Some(call) = self.vote_in_condition(i, last, barriers)? {
                Item::Stmt {
                    first: i,
                    last,
                    decl: None,
                    call: Some(call),
                }
            } else if !barriers
                && !matches!(self.text(i), "for" | "while" | "if" | "{" | "do" | "switch")
            {
                match self.plain(i, last)? {
                    Item::Stmt {
                        first, last, decl, ..
                    } => Item::Stmt {
                        first,
                        last,
                        decl,
                        call: Some(self.collective_call(first, last)?),
                    },
                    _ => {
                        return Err(format!(
                            "line {}: a warp collective in a declaration the block shares",
                            self.line(i)
                        ));
                    }
                }
            } else if self.names_barrier(i)
                && self.text(i + 1) == "("
                && call_end(self.code, self.toks, i + 1).is_some_and(|c| c + 1 == last)
                && self.text(last) == ";"
            {
                Item::Barrier { first: i, last }
            } else if matches!(self.text(i), "for" | "while") {
                Item::Loop(self.barrier_loop(i, last)?)
            } else if self.text(i) == "if" {
                Item::Branch(self.branch(i, last)?)
            } else if self.text(i) == "{" {
                Item::Compound(i, last, self.scope(i + 1, last)?)
            } else {
                return Err(format!(
                    "line {}: a barrier or warp collective inside a statement other than a loop",
                    self.line(i)
                ));
            };
            items.push(item);
            i = last + 1;
        }
        Ok(items)
    }

    /// A statement without barriers: left at block level, or run by each thread.
    fn plain(&self, first: usize, last: usize) -> Result<Item, String> {
        let shared = match self.text(first) {
            "__shared__" | "GM_SHARED" | "static" | "constexpr" | "typedef" | "using"
            | "static_assert" => true,
            "extern" => self.text(first + 1) == "__shared__",
            "const" => self.is_constant(first, last),
            _ => false,
        };
        if shared {
            return Ok(Item::Block { first, last });
        }
        if self.text(first) == "{" || self.text(last) != ";" {
            return Ok(Item::Stmt {
                first,
                last,
                decl: None,
                call: None,
            });
        }
        Ok(Item::Stmt {
            first,
            last,
            decl: self.declaration(first, last)?,
            call: None,
        })
    }

    /// The name `__shared__ type name[...]...;` (tokens `first..=last`) declares, when it
    /// declares one.
    pub(super) fn shared_name(&self, first: usize, last: usize) -> Option<usize> {
        if !matches!(self.text(first), "__shared__" | "GM_SHARED") {
            return None;
        }
        let mut depth = 0i32;
        let mut end = last;
        for k in first..last {
            match self.text(k) {
                "(" | "{" => depth += 1,
                ")" | "}" => depth -= 1,
                "," if depth == 0 => return None,
                "[" | "=" if depth == 0 && end == last => end = k,
                _ => {}
            }
        }
        (end > first + 1 && self.is_name(end - 1)).then_some(end - 1)
    }

    /// `const type name = literal-expression;`: the same in every thread, so shared.
    fn is_constant(&self, first: usize, last: usize) -> bool {
        let Some(eq) = self.assignment(first, last) else {
            return false;
        };
        (first + 1..eq).all(|k| self.toks[k].ident)
            && (eq + 1..last).all(|k| !self.toks[k].ident || self.text(k) == "sizeof")
    }

    /// The first `=` at depth 0 of `first..end` that is an assignment (not `==`, `<=`, `+=`).
    fn assignment(&self, first: usize, end: usize) -> Option<usize> {
        let mut depth = 0i32;
        for k in first..end {
            match self.text(k) {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" | "}" => depth -= 1,
                "=" if depth == 0 => {
                    let joined_before = k > 0
                        && self.toks[k - 1].end == self.toks[k].start
                        && "=<>!+-*/%&|^".contains(self.text(k - 1));
                    let joined_after = self
                        .toks
                        .get(k + 1)
                        .is_some_and(|n| n.start == self.toks[k].end && self.text(k + 1) == "=");
                    if !joined_before && !joined_after {
                        return Some(k);
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// `type name;`, `type name = init;` or several such declarators (`int a = 1, *b;`) over
    /// `first..end` (`end`: its `;`), the type made of names, `*`, `::` and template
    /// arguments (names and literal numbers); `None` for any other statement.
    pub(super) fn declaration(&self, first: usize, end: usize) -> Result<Option<Decl>, String> {
        if !self.is_name(first) || STATEMENT_WORDS.contains(&self.text(first)) {
            return Ok(None);
        }
        // The type and the first name: up to an `=`, or a `,` outside template arguments.
        let mut angles = 0i32;
        let mut k = first;
        while k < end {
            match self.text(k) {
                "<" => angles += 1,
                ">" => angles -= 1,
                "=" | "," if angles == 0 => break,
                "*" | ":" => {}
                "," => {}
                _ if self.toks[k].ident => {}
                // A literal template argument (`thread_block_tile<32> t`).
                t if angles > 0 && t.starts_with(|c: char| c.is_ascii_digit()) => {}
                _ => return Ok(None),
            }
            k += 1;
        }
        let name = k.wrapping_sub(1);
        if k < first + 2 || !self.is_name(name) || STATEMENT_WORDS.contains(&self.text(name)) {
            return Ok(None);
        }
        let line = self.line(first);
        if let Some(word) = (first..name).map(|k| self.text(k)).find(|w| {
            matches!(
                *w,
                "auto" | "decltype" | "struct" | "class" | "enum" | "union" | "extern"
            )
        }) {
            return Err(format!(
                "line {line}: a variable declared with `{word}` in a kernel run as regions"
            ));
        }
        // The base type: the first declarator's own `*`s are its declarator's.
        let mut base_end = name;
        while base_end > first && self.text(base_end - 1) == "*" {
            base_end -= 1;
        }
        let mut declarators = Vec::new();
        let mut start = base_end;
        let mut name = name;
        loop {
            // After the name: `=` and an initialiser up to a `,` or the end at depth 0.
            let mut at = name + 1;
            let eq = (self.text(at) == "=").then_some(at);
            if eq.is_some() {
                let mut depth = 0i32;
                while at < end {
                    match self.text(at) {
                        "(" | "[" | "{" => depth += 1,
                        ")" | "]" | "}" => depth -= 1,
                        "," if depth == 0 => break,
                        _ => {}
                    }
                    at += 1;
                }
            }
            if at != end && self.text(at) != "," {
                return Ok(None);
            }
            declarators.push(Declarator { start, name, eq });
            if at == end {
                break;
            }
            // The next declarator: `*`s and a name.
            start = at + 1;
            let mut n = start;
            while self.text(n) == "*" {
                n += 1;
            }
            if !self.is_name(n) || n >= end {
                return Err(format!("line {line}: a declarator the rewrite cannot read"));
            }
            name = n;
        }
        Ok(Some(Decl {
            first,
            base_end,
            declarators,
            end,
        }))
    }

    /// The `if` at `keyword`, whose statement ends at `last`: its blocks must be braced.
    fn branch(&self, keyword: usize, last: usize) -> Result<Branch, String> {
        let open = keyword + 1;
        let close = self.closing_paren(open)?;
        self.plain_header(keyword, open, close)?;
        let barriers = (close..=last).any(|k| self.names_barrier(k));
        if !barriers && !self.loose_jumps(close, last).is_empty() {
            return Err(format!(
                "line {}: a `break` or `continue` inside an `if` with warp collectives",
                self.line(keyword)
            ));
        }
        let unbraced = || {
            format!(
                "line {}: an `if` with barriers whose branches are not blocks",
                self.line(keyword)
            )
        };
        let mut blocks = Vec::new();
        let mut at = close + 1;
        loop {
            let braced = self.text(at) == "{";
            let (end, items) = if braced {
                let end = body_end(self.code, self.toks, at).ok_or_else(unbraced)?;
                (end, self.scope(at + 1, end)?)
            } else {
                // A single statement, as a block of its own (warp collectives only).
                let end = self.statement_end(at)?;
                if barriers || end > last {
                    return Err(unbraced());
                }
                (end, self.scope(at, end + 1)?)
            };
            blocks.push((at, end, items, braced));
            if end == last {
                return Ok(Branch {
                    barriers,
                    keyword,
                    open,
                    close,
                    blocks,
                });
            }
            if self.text(end + 1) != "else" || blocks.len() == 2 {
                return Err(unbraced());
            }
            at = end + 2;
        }
    }

    /// The warp collective of an `if` statement `i..=last` (with its `else`) that calls one in
    /// its condition and waits nowhere else (`if (__any_sync(m, p)) x = 1;`): it is a
    /// statement like any other with a collective, recorded before the split and the whole
    /// `if` run after it, its call handing out the result. `None` for any other statement.
    fn vote_in_condition(
        &self,
        i: usize,
        last: usize,
        barriers: bool,
    ) -> Result<Option<Call>, String> {
        if barriers || self.text(i) != "if" {
            return Ok(None);
        }
        let open = i + 1;
        let close = self.closing_paren(open)?;
        if (close + 1..=last).any(|k| self.waits(k)) || !(open..=close).any(|k| self.waits(k)) {
            return Ok(None);
        }
        self.collective_call(open + 1, close - 1).map(Some)
    }

    /// A loop's or `if`'s parentheses `open..=close` wait at nothing (a condition is asked of
    /// every thread in one pass, where no thread can wait for another).
    fn plain_header(&self, keyword: usize, open: usize, close: usize) -> Result<(), String> {
        if (open..=close).any(|k| self.waits(k)) {
            return Err(format!(
                "line {}: a barrier or warp collective in a condition",
                self.line(keyword)
            ));
        }
        Ok(())
    }

    /// The loop at `keyword` (`for` or `while`), whose statement ends at `last`.
    fn barrier_loop(&self, keyword: usize, last: usize) -> Result<Loop, String> {
        let open = keyword + 1;
        let close = self.closing_paren(open)?;
        self.plain_header(keyword, open, close)?;
        let body_open = close + 1;
        let barriers = (body_open..=last).any(|k| self.names_barrier(k));
        let braced = self.text(body_open) == "{";
        if !barriers && !self.loose_jumps(body_open + 1, last).is_empty() {
            return Err(format!(
                "line {}: a `break` or `continue` in a loop with warp collectives",
                self.line(keyword)
            ));
        }
        if braced && body_end(self.code, self.toks, body_open) != Some(last) || !braced && barriers
        {
            return Err(format!(
                "line {}: a loop with barriers whose body is not a block",
                self.line(keyword)
            ));
        }
        let (semis, init) = if self.text(keyword) == "for" {
            let mut depth = 0i32;
            let mut found = Vec::new();
            for k in open + 1..close {
                match self.text(k) {
                    "(" | "[" | "{" => depth += 1,
                    ")" | "]" | "}" => depth -= 1,
                    ";" if depth == 0 => found.push(k),
                    _ => {}
                }
            }
            let [s1, s2] = found[..] else {
                return Err(format!(
                    "line {}: a `for` header the rewrite cannot read",
                    self.line(keyword)
                ));
            };
            let init = if s1 > open + 1 {
                self.declaration(open + 1, s1)?
            } else {
                None
            };
            (Some((s1, s2)), init)
        } else {
            (None, None)
        };
        Ok(Loop {
            barriers,
            keyword,
            open,
            close,
            semis,
            init,
            body: (body_open, last),
            braced,
            items: if braced {
                self.scope(body_open + 1, last)?
            } else {
                self.scope(body_open, last + 1)?
            },
        })
    }
}
