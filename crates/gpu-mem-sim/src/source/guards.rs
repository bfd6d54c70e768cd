//! Leading guards of kernels run as plain calls: `if (i >= n) return;` at the top of a kernel,
//! where `i` is the thread's index along one axis (`threadIdx.x`, or `blockIdx.x * blockDim.x +
//! threadIdx.x`, or a variable declared as one of those) and `n` is the same in every thread of
//! the block. Along that axis such a guard refuses a suffix of the block's threads: once it
//! refuses a thread, it refuses every thread further along the axis, whatever the other axes. The
//! program's loop over a block's threads (`gm_sim_thread_loop` in the prelude) then need not call
//! them: each guard's `return` is written `{ gm_sim_refuse_rest(axis); return; }`, and the loop
//! stops that axis there for the rest of the block. A Rodinia Gaussian elimination launches its
//! kernels over the whole matrix at every step, and most of its threads return at such guards.
//!
//! What is a guard, read from the tokens alone:
//! * the kernel's body starts with guards and declarations only, each declaration `T name =
//!   expression;` with `T` made of integer type words and an expression that reads no memory
//!   and calls nothing; the first other statement ends them;
//! * a guard is `if (condition) return;` or `if (condition) { return; }`, not followed by
//!   `else`; its condition is disjuncts joined by `||`, each one uniform (reads only the
//!   kernel's parameters, `blockIdx`, `blockDim`, `gridDim`, numbers and macros that are
//!   numbers) or one comparison `index >= uniform`, `index > uniform`, `uniform <= index`,
//!   `uniform < index`. A uniform disjunct refuses every thread or none.
//!
//! The returning path learns which disjunct refused by asking them again (they change nothing
//! and read no memory). The loop trusts these guards only where an index along an axis cannot
//! wrap (the grid's threads along it fit an `int`: the prelude checks that once per launch), so
//! that a larger index never compares as a smaller one.

use super::expression::{INDEX_TYPES, operator, unwrapped};
use gpu_mem_core::kernel::scan::functions::{Kind, call_end, functions};
use gpu_mem_core::kernel::scan::tokens::{Token, tokens};
use std::borrow::Cow;

/// The prelude's function a guard's `return` calls first (`gm_sim_refuse_rest`), with the axis
/// it refuses along: 1 for x, 2 for y, 3 for z.
pub(crate) const REFUSE: &str = "gm_sim_refuse_rest";

/// Names every thread of a block reads alike, and the words of casts.
const UNIFORM_WORDS: [&str; 12] = [
    "blockIdx", "blockDim", "gridDim", "warpSize", "unsigned", "int", "long", "signed", "float",
    "double", "size_t", "const",
];

/// Words that may stand before `(` without a call: casts' type words.
const CAST_WORDS: [&str; 7] = [
    "unsigned", "int", "long", "signed", "float", "double", "size_t",
];

/// Operators a guard may use: none of them writes or reads memory.
const PURE_OPERATORS: [&str; 25] = [
    "(", ")", "+", "-", "*", "/", "%", "<", ">", "<=", ">=", "==", "!=", "&&", "||", "!", "~", "^",
    "|", "&", "<<", ">>", ".", "?", ":",
];

/// `code` with the `return` of every leading guard of its kernels telling the loop over threads
/// the axis it refuses along (see the module's notes); `code` itself where no kernel has one.
pub(crate) fn rewrite(code: &str) -> Cow<'_, str> {
    if !code.contains("return") {
        return Cow::Borrowed(code);
    }
    let Some(toks) = tokens(code) else {
        return Cow::Borrowed(code);
    };
    let Some(fns) = functions(code, &toks) else {
        return Cow::Borrowed(code);
    };
    let source = Source {
        code,
        toks: &toks,
        numbers: super::defines::numbers(code),
    };
    // (position, text to insert), in source order.
    let mut inserts: Vec<(usize, String)> = Vec::new();
    for f in fns.iter().filter(|f| f.kind == Kind::Kernel) {
        let Some((open, close)) = f.body else {
            continue;
        };
        let params = crate::source::atomics::parameter_names(code, &toks, f);
        inserts.extend(source.guards(open, close, &params));
    }
    with_inserts(code, inserts)
}

/// `code` with each text of `inserts` (positions in source order) inserted; `code` itself
/// where there is none.
pub(crate) fn with_inserts(code: &str, inserts: Vec<(usize, String)>) -> Cow<'_, str> {
    if inserts.is_empty() {
        return Cow::Borrowed(code);
    }
    let mut out =
        String::with_capacity(code.len() + inserts.iter().map(|i| i.1.len()).sum::<usize>());
    let mut copied = 0;
    for (at, text) in inserts {
        out.push_str(&code[copied..at]);
        out.push_str(&text);
        copied = at;
    }
    out.push_str(&code[copied..]);
    Cow::Owned(out)
}

/// A kernel source's tokens, and what its guards may name.
struct Source<'c> {
    code: &'c str,
    toks: &'c [Token],
    numbers: Vec<&'c str>,
}

/// An axis of the block: 1 (x), 2 (y), 3 (z).
type Axis = u8;

impl<'c> Source<'c> {
    fn text(&self, k: usize) -> &'c str {
        self.toks.get(k).map_or("", |t| &self.code[t.start..t.end])
    }

    /// The operator at token `k` and how many tokens it takes (`expression::operator`).
    fn operator(&self, k: usize) -> (&'c str, usize) {
        operator(self.code, self.toks, k)
    }

    /// The insertions that mark the leading guards of the body between `open` and `close`.
    fn guards(&self, open: usize, close: usize, params: &[&str]) -> Vec<(usize, String)> {
        self.prologue(open, close, params)
            .0
            .into_iter()
            .flat_map(|item| match item {
                Leading::Guard { inserts, .. } => inserts,
                Leading::Declaration(..) => Vec::new(),
            })
            .collect()
    }

    /// The leading declarations and guards of the body between `open` and `close`, in order,
    /// the first token after them, and what they declared.
    fn prologue<'p>(
        &self,
        open: usize,
        close: usize,
        params: &'p [&'c str],
    ) -> (Vec<Leading>, usize, Names<'p, 'c>) {
        let mut names = Names {
            params,
            indices: Vec::new(),
            uniform: Vec::new(),
            others: Vec::new(),
        };
        let mut out = Vec::new();
        let mut k = open + 1;
        while k < close {
            if self.text(k) == "if" {
                let Some(found) = self.guard(k, &names) else {
                    break;
                };
                k = match &found {
                    Leading::Guard { after, .. } => *after,
                    Leading::Declaration(_, end) => *end,
                };
                out.push(found);
            } else {
                let Some(next) = self.declaration(k, close, &mut names) else {
                    break;
                };
                out.push(Leading::Declaration(k, next));
                k = next;
            }
        }
        (out, k, names)
    }

    /// The guard `if (...) return;` at token `at`: its insertions, its condition and the token
    /// after it.
    fn guard(&self, at: usize, names: &Names<'_, 'c>) -> Option<Leading> {
        let open = at + 1;
        if self.text(open) != "(" {
            return None;
        }
        let close = call_end(self.code, self.toks, open)?;
        let braced = self.text(close + 1) == "{";
        let ret = close + 1 + usize::from(braced);
        if self.text(ret) != "return" || self.text(ret + 1) != ";" {
            return None;
        }
        let after = if braced {
            (self.text(ret + 2) == "}").then_some(ret + 3)?
        } else {
            ret + 2
        };
        if self.text(after) == "else" {
            return None;
        }
        let disjuncts = self.disjuncts(open + 1, close)?;
        let mut axes = Vec::with_capacity(disjuncts.len());
        for &(first, end) in &disjuncts {
            axes.push(self.refuses_along(first, end, names)?);
        }
        // Which disjunct refused: each asked again, in order, the last one without asking.
        let mut axis = axes.last().copied().unwrap_or(1).to_string();
        for (&(first, end), a) in disjuncts.iter().zip(&axes).rev().skip(1) {
            if axes.iter().all(|b| b == a) {
                continue;
            }
            axis = format!("({}) ? {a} : {axis}", self.one_line(first, end));
        }
        let call = format!("{REFUSE}({axis}); ");
        let start = self.toks[ret].start;
        let inserts = if braced {
            vec![(start, call)]
        } else {
            vec![
                (start, format!("{{ {call}")),
                (self.toks[ret + 1].end, " }".to_string()),
            ]
        };
        Some(Leading::Guard {
            inserts,
            condition: (open + 1, close),
            after,
        })
    }

    /// Tokens `first..end` on one line, without the comments between them (a guard's line
    /// numbers stay the source's), a space only where the source had something between two.
    fn one_line(&self, first: usize, end: usize) -> String {
        one_line(self.code, self.toks, (first, end), |word| word)
    }

    /// The disjuncts of tokens `first..end` joined by `||` outside brackets, each without the
    /// parentheses around all of it; `None` where an operator that writes stands there.
    fn disjuncts(&self, first: usize, end: usize) -> Option<Vec<(usize, usize)>> {
        self.operands(first, end, "||")
    }

    /// The operands of `joiner` (`||`, `&&`) outside brackets in tokens `first..end`, each
    /// without the parentheses around all of it; `None` where one is empty.
    fn operands(&self, first: usize, end: usize, joiner: &str) -> Option<Vec<(usize, usize)>> {
        let mut out = Vec::new();
        let (mut depth, mut k, mut start) = (0i32, first, first);
        while k < end {
            let (op, len) = self.operator(k);
            match op {
                "(" | "[" => depth += 1,
                ")" | "]" => depth -= 1,
                _ if op == joiner && depth == 0 => {
                    out.push(self.unwrapped(start, k)?);
                    start = k + len;
                }
                _ => {}
            }
            k += len;
        }
        out.push(self.unwrapped(start, end)?);
        Some(out)
    }

    /// The body's last statement `if (condition) statement` from token `at` to the body's
    /// `close`, without `else`, whose condition admits a prefix of each row's threads
    /// ([`Self::admits_along`] for each `&&` operand): the condition's tokens and the
    /// statement's.
    fn wrapping_if(
        &self,
        at: usize,
        close: usize,
        names: &Names<'_, 'c>,
    ) -> Option<((usize, usize), (usize, usize))> {
        if self.text(at) != "if" || self.text(at + 1) != "(" {
            return None;
        }
        let cond_close = call_end(self.code, self.toks, at + 1)?;
        let first = cond_close + 1;
        let end = if self.text(first) == "{" {
            gpu_mem_core::kernel::scan::functions::body_end(self.code, self.toks, first)?
        } else if matches!(self.text(first), "if" | "for" | "while" | "do" | "switch") {
            return None;
        } else {
            (first..close).find(|&k| self.text(k) == ";")?
        };
        if end + 1 != close {
            return None;
        }
        let admits = self
            .conjuncts(at + 2, cond_close)?
            .iter()
            .all(|&(first, end)| self.admits_along(first, end, names).is_some());
        admits.then_some(((at + 2, cond_close), (first, close)))
    }

    /// The operands of `&&` outside brackets in tokens `first..end` (itself without the
    /// parentheses around all of it).
    fn conjuncts(&self, first: usize, end: usize) -> Option<Vec<(usize, usize)>> {
        let (first, end) = self.unwrapped(first, end)?;
        self.operands(first, end, "&&")
    }

    /// The axis along which the operand `first..end` of a condition admits a prefix of the
    /// threads (`index < uniform`, `index <= uniform`, `uniform > index`, `uniform >=
    /// index`; a uniform one admits all or none: x, as any); `None` when it is no such operand.
    fn admits_along(&self, first: usize, end: usize, names: &Names<'_, 'c>) -> Option<Axis> {
        self.compared_along(first, end, names, false)
    }

    /// Tokens `first..end` without parentheses that enclose all of them; `None` when empty.
    fn unwrapped(&self, first: usize, end: usize) -> Option<(usize, usize)> {
        let (first, end) = unwrapped(self.code, self.toks, first, end);
        (first < end).then_some((first, end))
    }

    /// The axis along which the disjunct `first..end` refuses a suffix of the threads (a
    /// uniform one refuses all or none: x, as any); `None` when it is no such disjunct.
    fn refuses_along(&self, first: usize, end: usize, names: &Names<'_, 'c>) -> Option<Axis> {
        self.compared_along(first, end, names, true)
    }

    /// [`Self::refuses_along`] (`refuses`: a disjunct of a guard, the index on the greater
    /// side) or [`Self::admits_along`] (an operand of `&&`, the index on the smaller side).
    fn compared_along(
        &self,
        first: usize,
        end: usize,
        names: &Names<'_, 'c>,
        refuses: bool,
    ) -> Option<Axis> {
        if self.uniform(first, end, names) {
            return Some(1);
        }
        // The one comparison outside brackets (nor joined with the other logical operator).
        let other = if refuses { "&&" } else { "||" };
        let mut comparison = None;
        let (mut depth, mut k) = (0i32, first);
        while k < end {
            let (op, len) = self.operator(k);
            match op {
                "(" | "[" => depth += 1,
                ")" | "]" => depth -= 1,
                "<" | "<=" | ">" | ">=" if depth == 0 => {
                    if comparison.is_some() {
                        return None;
                    }
                    comparison = Some((k, op, len));
                }
                "?" | ":" | "==" | "!=" | "&" | "|" | "^" if depth == 0 => return None,
                _ if op == other && depth == 0 => return None,
                _ => {}
            }
            k += len;
        }
        let (k, op, len) = comparison?;
        let index_first = matches!(op, ">" | ">=") == refuses;
        let (index, bound) = if index_first {
            ((first, k), (k + len, end))
        } else {
            ((k + len, end), (first, k))
        };
        let axis = self.index(index.0, index.1, names)?;
        self.uniform(bound.0, bound.1, names).then_some(axis)
    }

    /// Whether tokens `first..end` read the same in every thread of the block and change
    /// nothing: no memory, no call, no assignment.
    fn uniform(&self, first: usize, end: usize, names: &Names<'_, 'c>) -> bool {
        self.pure(first, end, |w| names.uniform_name(w, &self.numbers))
    }

    /// Whether tokens `first..end` change nothing, read no memory and call nothing, naming only
    /// what `allowed` admits (and numbers, and `x`, `y`, `z` as members).
    fn pure(&self, first: usize, end: usize, allowed: impl Fn(&str) -> bool) -> bool {
        if first >= end {
            return false;
        }
        let mut k = first;
        while k < end {
            let (op, len) = self.operator(k);
            let word = self.text(k);
            let ok = if self.toks[k].ident {
                let member =
                    matches!(word, "x" | "y" | "z") && k > first && self.text(k - 1) == ".";
                // A name followed by `(` is a call (a cast's type word is followed by `)`).
                let call = self.text(k + 1) == "(" && !CAST_WORDS.contains(&word);
                (member || allowed(word)) && !call
            } else if word.starts_with(|c: char| c.is_ascii_digit()) {
                true
            } else {
                // Not a unary `*` or `&` (a read through a pointer, an address).
                let binary_before = k > first && {
                    let before = self.text(k - 1);
                    self.toks[k - 1].ident
                        || before == ")"
                        || before.starts_with(|c: char| c.is_ascii_digit())
                };
                PURE_OPERATORS.contains(&op) && (binary_before || !matches!(op, "*" | "&"))
            };
            if !ok {
                return false;
            }
            k += len;
        }
        true
    }

    /// The axis whose thread index tokens `first..end` are: `threadIdx.a`, `blockIdx.a *
    /// blockDim.a + threadIdx.a` (the product's factors and the sum's terms in either order),
    /// or a variable declared as one (parentheses around it allowed).
    fn index(&self, first: usize, end: usize, names: &Names<'_, 'c>) -> Option<Axis> {
        let (first, end) = self.unwrapped(first, end)?;
        let w: Vec<&str> = (first..end).map(|t| self.text(t)).collect();
        let member = |i: usize, base: &str| -> Option<Axis> {
            (*w.get(i)? == base && *w.get(i + 1)? == ".")
                .then(|| axis_of(w.get(i + 2)?))
                .flatten()
        };
        match w.len() {
            1 => names
                .indices
                .iter()
                .find(|(n, _)| *n == w[0])
                .map(|&(_, a)| a),
            3 => member(0, "threadIdx"),
            11 => {
                let (own, p) = if w[3] == "+" {
                    (member(0, "threadIdx")?, 4)
                } else if w[7] == "+" {
                    (member(8, "threadIdx")?, 0)
                } else {
                    return None;
                };
                if w[p + 3] != "*" {
                    return None;
                }
                let (a, b) = member(p, "blockIdx")
                    .zip(member(p + 4, "blockDim"))
                    .or_else(|| member(p, "blockDim").zip(member(p + 4, "blockIdx")))?;
                (a == b && a == own).then_some(own)
            }
            _ => None,
        }
    }

    /// The declaration `T name = expression;` at token `at` (up to `close`): records `name` as
    /// an index variable or a uniform one, and gives the token after it; `None` when the
    /// statement is anything else.
    fn declaration(&self, at: usize, close: usize, names: &mut Names<'_, 'c>) -> Option<usize> {
        let mut k = at;
        while k < close && INDEX_TYPES.contains(&self.text(k)) {
            k += 1;
        }
        let name = self.text(k);
        if k == at || !self.toks.get(k)?.ident || self.text(k + 1) != "=" {
            return None;
        }
        let first = k + 2;
        let mut end = first;
        while end < close && !matches!(self.text(end), ";" | "," | "{" | "}") {
            end += 1;
        }
        if self.text(end) != ";" || first == end {
            return None;
        }
        if let Some(axis) = self.index(first, end, names) {
            names.indices.push((name, axis));
        } else if self.uniform(first, end, names) {
            names.uniform.push(name);
        } else if self.pure(first, end, |w| {
            w == "threadIdx" || names.uniform_name(w, &self.numbers) || names.own(w)
        }) {
            names.others.push(name);
        } else {
            return None;
        }
        Some(end + 1)
    }
}

/// Tokens `first..end` of `code` on one line, without the comments between them, each word as
/// `word` gives it, a space only where the source had something between two.
pub(crate) fn one_line<'c>(
    code: &'c str,
    toks: &[Token],
    (first, end): (usize, usize),
    word: impl Fn(&'c str) -> &'c str,
) -> String {
    let mut out = String::new();
    for k in first..end {
        if k > first && toks[k].start != toks[k - 1].end {
            out.push(' ');
        }
        out.push_str(word(&code[toks[k].start..toks[k].end]));
    }
    out
}

/// A leading statement of a kernel's body.
enum Leading {
    /// A declaration, tokens `first..end`.
    Declaration(usize, usize),
    /// A guard: what marks its `return`, its condition's tokens and the token after it.
    Guard {
        inserts: Vec<(usize, String)>,
        condition: (usize, usize),
        after: usize,
    },
}

/// The shape of a kernel run as plain calls whose threads a flat loop may run (the prelude's
/// `gm_sim_flat_loop`, written by `super::flat_calls`): its body's leading declarations and
/// guards, then either the rest of the body, or one `if` without `else` whose condition
/// admits, in each row of a block, a prefix of its threads in `threadIdx.x` order.
pub(crate) struct FlatShape {
    /// The leading declarations and guards' conditions, in order, as token spans
    /// (`first..end`), each with whether it is a guard's condition.
    pub(crate) leading: Vec<((usize, usize), bool)>,
    /// The wrapping `if`'s condition (`first..end`), if the body is one.
    pub(crate) condition: Option<(usize, usize)>,
    /// The statements the admitted threads run (`first..end`): the rest of the body, or the
    /// wrapping `if`'s statement.
    pub(crate) run: (usize, usize),
}

/// The flat shape of the kernel whose body is `open..=close` (see [`FlatShape`]), where every
/// guard and condition is one the bisection of a row may trust: each guard's as this module
/// reads guards, and each `&&` operand of a wrapping `if`'s condition uniform or a comparison
/// `index < uniform` (`<=`, or mirrored).
pub(crate) fn flat_shape(
    code: &str,
    toks: &[Token],
    (open, close): (usize, usize),
    params: &[&str],
) -> FlatShape {
    let source = Source {
        code,
        toks,
        numbers: super::defines::numbers(code),
    };
    let (items, rest, names) = source.prologue(open, close, params);
    let leading = items
        .iter()
        .map(|item| match *item {
            Leading::Declaration(first, end) => ((first, end), false),
            Leading::Guard { condition, .. } => (condition, true),
        })
        .collect();
    let mut shape = FlatShape {
        leading,
        condition: None,
        run: (rest, close),
    };
    if let Some((condition, run)) = source.wrapping_if(rest, close, &names) {
        shape.condition = Some(condition);
        shape.run = run;
    }
    shape
}

/// What the leading statements of a kernel name.
struct Names<'p, 'c> {
    params: &'p [&'c str],
    /// Variables that hold the thread's index along an axis.
    indices: Vec<(&'c str, Axis)>,
    /// Variables declared from uniform names only.
    uniform: Vec<&'c str>,
    /// Other variables declared among the guards (from the thread's index).
    others: Vec<&'c str>,
}

impl Names<'_, '_> {
    /// Whether `word` is the same in every thread of the block.
    fn uniform_name(&self, word: &str, numbers: &[&str]) -> bool {
        self.params.contains(&word)
            || self.uniform.contains(&word)
            || numbers.contains(&word)
            || UNIFORM_WORDS.contains(&word)
    }

    /// Whether `word` is a variable declared among the guards.
    fn own(&self, word: &str) -> bool {
        self.indices.iter().any(|(n, _)| *n == word) || self.others.contains(&word)
    }
}

fn axis_of(member: &str) -> Option<Axis> {
    match member {
        "x" => Some(1),
        "y" => Some(2),
        "z" => Some(3),
        _ => None,
    }
}

// Safe code only, so nothing for Miri to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::rewrite;

    fn kernel(body: &str) -> String {
        format!("__global__ void k(float* a, int n, int m) {{\n{body}\n    a[0] = 1;\n}}\n")
    }

    #[test]
    fn guards_on_each_axis_name_it() {
        for (guard, axis) in [
            ("if (threadIdx.x >= n) return;", "1"),
            (
                "if (threadIdx.x + blockIdx.x * blockDim.x >= n - 1) return;",
                "1",
            ),
            (
                "if (blockDim.y * blockIdx.y + threadIdx.y > n) return;",
                "2",
            ),
            ("if (n <= threadIdx.z) { return; }", "3"),
            ("if ((n - 1) < (threadIdx.x)) return;", "1"),
            (
                "int i = blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;",
                "1",
            ),
            (
                "unsigned int row = threadIdx.y; const int h = m * 2; if (row >= h) return;",
                "2",
            ),
            ("if (n > 4) return;", "1"),
        ] {
            let code = kernel(guard);
            let out = rewrite(&code);
            assert!(
                out.contains(&format!("gm_sim_refuse_rest({axis}); return;")),
                "{guard}: {out}"
            );
            assert_eq!(out.lines().count(), code.lines().count(), "{guard}");
        }
    }

    #[test]
    fn disjuncts_along_two_axes_ask_again() {
        let code = kernel(
            "int c = blockIdx.x * blockDim.x + threadIdx.x;\nint r = blockIdx.y * blockDim.y + threadIdx.y;\nif (c >= n || r >= m) return;",
        );
        let out = rewrite(&code);
        assert!(
            out.contains("{ gm_sim_refuse_rest((c >= n) ? 1 : 2); return; }"),
            "{out}"
        );
    }

    #[test]
    fn two_guards_in_a_row_are_both_marked() {
        let code = kernel(
            "if (threadIdx.x + blockIdx.x * blockDim.x >= n - 1 - m) return;\nif (threadIdx.y + blockIdx.y * blockDim.y >= n - m) return;",
        );
        let out = rewrite(&code);
        assert!(out.contains("gm_sim_refuse_rest(1)"), "{out}");
        assert!(out.contains("gm_sim_refuse_rest(2)"), "{out}");
    }

    #[test]
    fn other_conditions_and_positions_are_left_alone() {
        for body in [
            "if (threadIdx.x < n) return;",
            "if (threadIdx.x % 2 == 1) return;",
            "if (threadIdx.x + 1 >= n) return;",
            "if (threadIdx.x >= a[0]) return;",
            "if (threadIdx.x >= *a) return;",
            "if (threadIdx.x >= f(n)) return;",
            "if (threadIdx.x >= n && m > 2) return;",
            "if (threadIdx.x >= threadIdx.y) return;",
            "if (threadIdx.x >= n) return; else a[1] = 2;",
            "if (threadIdx.x >= n) { a[2] = 1; return; }",
            "a[3] = 4; if (threadIdx.x >= n) return;",
            "int v = a[threadIdx.x]; if (threadIdx.x >= n) return;",
            "int i = threadIdx.x; i++; if (i >= n) return;",
            "if (blockIdx.x * blockDim.y + threadIdx.x >= n) return;",
            "short i = threadIdx.x; if (i >= n) return;",
            "if ((n = 2) < threadIdx.x) return;",
        ] {
            let code = kernel(body);
            assert_eq!(rewrite(&code), code, "{body}");
        }
    }

    #[test]
    fn number_macros_are_uniform_and_others_are_not() {
        let code = format!(
            "#define N 64\n#define M (N * 2)\n#define F g()\n{}",
            kernel("if (threadIdx.x >= N) return;")
        );
        assert!(rewrite(&code).contains("gm_sim_refuse_rest(1)"));
        let code = format!("#define F g()\n{}", kernel("if (threadIdx.x >= F) return;"));
        assert_eq!(rewrite(&code), code);
    }
}
