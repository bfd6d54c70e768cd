//! Conditions that admit a prefix of a block's threads: `if (tid < s)` of a tree reduction,
//! `if (threadIdx.x == 0)` of a block's last step. Taken in the order of `threadIdx.x`, the
//! threads such a condition admits come first and the ones it refuses after, so a region that
//! is one such `if` stops its walk over a block of one row at the first thread refused (the
//! prelude's `gm_sim_cursor::run_while`) instead of visiting every thread.
//!
//! A guard is conjuncts joined by `&&` (each may be parenthesised), each either uniform (the
//! same in every thread of the block) or a comparison of the thread's index with a uniform
//! value: `index < value`, `index <= value`, `value > index`, `value >= index`, or
//! `index == 0`. The index is `threadIdx.x` or a variable that holds it
//! ([`index_variables`]). Any other operator at the top of a conjunct (`||`, `?:`, bit
//! operations, `!=`, assignments, commas) refuses the guard.

use super::parse::Statements;
use crate::source::expression::{INDEX_TYPES, operator, unwrapped};

/// The variables of the kernel body between tokens `open` and `close` that hold one of the
/// thread's indices throughout, each with its field (`x`, `y`, `z`): declared once, as `T name =
/// threadIdx.x;` with `T` one of [`INDEX_TYPES`], keeping that value
/// (`Statements::keeps_first_value`; `changeable`: whether a name may change where it is not
/// assigned, e.g. through a helper's reference), and not a parameter's name (`params`).
pub(super) fn index_variables<'c>(
    s: &Statements<'c>,
    (open, close): (usize, usize),
    params: &[&str],
    changeable: impl Fn(&str) -> bool,
) -> Vec<(&'c str, &'c str)> {
    let mut found = Vec::new();
    for k in open + 1..close {
        let name = s.text(k);
        let holds_index = s.toks[k].ident
            && s.text(k + 1) == "="
            && s.text(k + 2) == "threadIdx"
            && s.text(k + 3) == "."
            && matches!(s.text(k + 4), "x" | "y" | "z")
            && s.text(k + 5) == ";";
        if !holds_index || params.contains(&name) || changeable(name) {
            continue;
        }
        // The type before the name, back to the statement's start.
        let mut first = k;
        while first > open + 1 && !matches!(s.text(first - 1), ";" | "{" | "}" | ")" | ":") {
            first -= 1;
        }
        let typed = first < k && (first..k).all(|t| INDEX_TYPES.contains(&s.text(t)));
        // (Declared once: a guard in another scope may name another variable of the name.)
        let once = !(open + 1..close).any(|t| t != k && s.text(t) == name && s.declares(t));
        if typed && once && s.keeps_first_value(k, (open + 1, close)) {
            found.push((name, s.text(k + 4)));
        }
    }
    found
}

/// Whether the condition between the `(` at `open` and its `)` at `close` admits a prefix of
/// the block's threads (see the module's notes). `index(k)`: the token after an index
/// expression starting at token `k` (`None`: none starts there); `uniform(k)`: whether token
/// `k` keeps an expression the same in every thread.
pub(super) fn admits_a_prefix(
    s: &Statements<'_>,
    (open, close): (usize, usize),
    index: impl Fn(usize) -> Option<usize>,
    uniform: impl Fn(usize) -> bool,
) -> bool {
    let mut comparisons = 0;
    for (first, end) in conjuncts(s, open + 1, close) {
        let (first, end) = unwrapped(s.code, s.toks, first, end);
        if first < end && (first..end).all(&uniform) {
            continue;
        }
        if !prefix_comparison(s, (first, end), &index, &uniform) {
            return false;
        }
        comparisons += 1;
    }
    comparisons > 0
}

/// The operators among tokens `first..end` that stand outside brackets, each with its first
/// token and how many tokens it takes (see [`operator`]).
fn outside_brackets<'c>(
    s: &Statements<'c>,
    first: usize,
    end: usize,
) -> Vec<(usize, &'c str, usize)> {
    let mut out = Vec::new();
    let (mut depth, mut k) = (0i32, first);
    while k < end {
        let (op, len) = operator(s.code, s.toks, k);
        match op {
            "(" | "[" => depth += 1,
            ")" | "]" => depth -= 1,
            _ if depth == 0 => out.push((k, op, len)),
            _ => {}
        }
        k += len;
    }
    out
}

/// The conjuncts of tokens `first..end` joined by `&&` outside brackets, each `(first, end)`;
/// one empty conjunct (which refuses the guard) where another operator that binds less than a
/// comparison stands outside brackets.
fn conjuncts(s: &Statements<'_>, first: usize, end: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = first;
    for (k, op, len) in outside_brackets(s, first, end) {
        let binds_less = matches!(op, "||" | "?" | ":" | "," | "=" | "&" | "|" | "^" | "!=")
            || (len == 2 && op.ends_with('=') && op != "==" && !op.starts_with(['<', '>']));
        if binds_less {
            return vec![(first, first)];
        }
        if op == "&&" {
            out.push((start, k));
            start = k + len;
        }
    }
    out.push((start, end));
    out
}

/// Whether tokens `first..end` compare the thread's index with a uniform value so that the
/// threads admitted come first.
fn prefix_comparison(
    s: &Statements<'_>,
    (first, end): (usize, usize),
    index: &impl Fn(usize) -> Option<usize>,
    uniform: &impl Fn(usize) -> bool,
) -> bool {
    // The one comparison outside brackets.
    let comparisons: Vec<_> = outside_brackets(s, first, end)
        .into_iter()
        .filter(|(_, op, _)| matches!(*op, "<" | "<=" | ">" | ">=" | "=="))
        .collect();
    let [(k, op, len)] = comparisons[..] else {
        return false;
    };
    let is_index = |from: usize, to: usize| index(from) == Some(to);
    let is_uniform = |from: usize, to: usize| from < to && (from..to).all(uniform);
    let is_zero =
        |from: usize, to: usize| to == from + 1 && matches!(s.text(from), "0" | "0u" | "0U");
    let (left, right) = ((first, k), (k + len, end));
    match op {
        "<" | "<=" => is_index(left.0, left.1) && is_uniform(right.0, right.1),
        ">" | ">=" => is_uniform(left.0, left.1) && is_index(right.0, right.1),
        _ => {
            is_index(left.0, left.1) && is_zero(right.0, right.1)
                || is_zero(left.0, left.1) && is_index(right.0, right.1)
        }
    }
}

// Safe code only, so nothing for Miri to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;
    use gpu_mem_core::kernel::scan::tokens::tokens;

    /// Whether `condition` admits a prefix, `tid` holding the index and `s`, `n` uniform
    /// (`None`: it does not parse).
    fn admits(condition: &str) -> Option<bool> {
        let code = format!("if ({condition}) x = 1;");
        let toks = tokens(&code)?;
        let s = Statements {
            code: &code,
            toks: &toks,
            warp_calls: Vec::new(),
        };
        let close = gpu_mem_core::kernel::scan::functions::call_end(&code, &toks, 1)?;
        let index = |k: usize| match s.text(k) {
            "tid" => Some(k + 1),
            "threadIdx" if s.text(k + 1) == "." && s.text(k + 2) == "x" => Some(k + 3),
            _ => None,
        };
        let uniform = |k: usize| {
            let t = s.text(k);
            // (As the rewrite's: no memory read.)
            (!s.toks[k].ident && t != "[")
                || matches!(t, "s" | "n" | "blockDim" | "x")
                || t.starts_with(|c: char| c.is_ascii_digit())
        };
        Some(admits_a_prefix(&s, (1, close), index, uniform))
    }

    #[test]
    fn comparisons_of_the_index_with_uniform_values_admit_a_prefix() {
        for condition in [
            "tid < s",
            "tid <= s - 1",
            "s > tid",
            "blockDim.x / 2 >= threadIdx.x",
            "tid == 0",
            "0 == threadIdx.x",
            "(tid < s)",
            "n >= 64 && tid < 32",
            "(n >= 64) && (tid < 32) && s > 1",
            "tid < (s << 1)",
        ] {
            assert_eq!(admits(condition), Some(true), "{condition}");
        }
    }

    #[test]
    fn other_conditions_are_refused() {
        for condition in [
            "tid > s",
            "tid >= s",
            "s < tid",
            "tid == 1",
            "tid != 0",
            "tid < s || n > 2",
            "tid < s & 1",
            "tid < s == 1",
            "tid < s ? 1 : 0",
            "tid % 2 == 0",
            "tid + 1 < s",
            "tid < v",
            "tid < s[0]",
            "n > 2",
            "tid < s && tid > 2",
            "(tid = 3) < s",
            "tid < f(s)",
        ] {
            assert_eq!(admits(condition), Some(false), "{condition}");
        }
    }
}
