//! Accessor calls: calls whose value is the same in every thread of a block and that read no
//! memory, so that a variable a kernel initialises from one is the block's (one variable, not a
//! slot per thread) and a region that makes one may still be flat. They are:
//! * the prelude's `this_thread_block()` (as `cg::`, `cooperative_groups::` or bare), an empty
//!   object whose members ask the simulator, and `gm_dynamic_shared<T>()`, the launch's
//!   dynamic shared memory;
//! * a call `Name()` or `Name<...>()` of a `struct` or `class` of the source every definition
//!   of which (the template and its specialisations) names only type words, its own template
//!   parameters, its own local variables and `gm_dynamic_shared`, and neither indexes nor reads
//!   through a pointer: cuda-samples' `SharedMemory<T>`, whose conversion to `T*` hands out the
//!   dynamic shared memory (its `extern __shared__` array already rewritten by
//!   `source::dynamic_shared`). Whatever such a struct does, it can call nothing else, so it
//!   cannot read the thread's index or memory another thread writes.

use super::parse::{CAST_WORDS, Statements};
use gpu_mem_core::kernel::scan::functions::body_end;

/// Words an accessor struct's definition may name besides its own (and the type words of
/// casts, `CAST_WORDS`).
const ACCESSOR_WORDS: [&str; 19] = [
    "struct",
    "class",
    "template",
    "typename",
    "public",
    "private",
    "protected",
    "operator",
    "return",
    "const",
    "inline",
    "static",
    "__device__",
    "__host__",
    "__forceinline__",
    "__inline__",
    "gm_dynamic_shared",
    "void",
    "uint",
];

/// The prelude's accessor functions (see the module's notes).
const PRELUDE_ACCESSORS: [&str; 2] = ["this_thread_block", "gm_dynamic_shared"];

/// Qualifiers a prelude accessor may be named with.
const QUALIFIERS: [&str; 2] = ["cg", "cooperative_groups"];

/// The names of the source's accessor structs (see the module's notes).
pub(super) fn accessor_structs<'c>(s: &Statements<'c>) -> Vec<&'c str> {
    let mut seen: Vec<(&'c str, bool)> = Vec::new();
    for k in 0..s.toks.len() {
        if !matches!(s.text(k), "struct" | "class") || !s.toks.get(k + 1).is_some_and(|t| t.ident) {
            continue;
        }
        let name = s.text(k + 1);
        let Some(open) = (k + 2..s.toks.len()).find(|&j| matches!(s.text(j), "{" | ";")) else {
            continue;
        };
        if s.text(open) == ";" {
            // A declaration only (`struct S;`), or a variable of the type (`struct S s;`).
            continue;
        }
        let ok = definition_is_accessor(s, k, open, name);
        match seen.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 &= ok,
            None => seen.push((name, ok)),
        }
    }
    seen.into_iter()
        .filter(|&(_, ok)| ok)
        .map(|(n, _)| n)
        .collect()
}

/// Whether the definition of `name` from token `at` (`struct` or `class`), its body opened at
/// `open`, is an accessor's (see the module's notes).
fn definition_is_accessor(s: &Statements<'_>, at: usize, open: usize, name: &str) -> bool {
    let Some(close) = body_end(s.code, s.toks, open) else {
        return false;
    };
    // Its own template parameters: `template <class T>` right before it.
    let mut params: Vec<&str> = Vec::new();
    if at >= 2 && s.text(at - 1) == ">" {
        let mut j = at - 1;
        while j > 0 && s.text(j) != "<" {
            if s.toks[j].ident && matches!(s.text(j - 1), "class" | "typename") {
                params.push(s.text(j));
            }
            j -= 1;
        }
        if j == 0 || s.text(j - 1) != "template" {
            return false;
        }
    }
    // Its own locals: a name declared `... const name =` or `... * name =`.
    let locals: Vec<&str> = (open + 1..close)
        .filter(|&j| {
            s.toks[j].ident
                && s.text(j + 1) == "="
                && s.text(j + 2) != "="
                && (matches!(s.text(j - 1), "const" | "*") || s.toks[j - 1].ident)
        })
        .map(|j| s.text(j))
        .collect();
    (at + 1..close).all(|j| {
        let word = s.text(j);
        if s.toks[j].ident {
            return word == name
                || ACCESSOR_WORDS.contains(&word)
                || CAST_WORDS.contains(&word)
                || params.contains(&word)
                || locals.contains(&word);
        }
        match word {
            "[" | "." => false,
            "-" => s.text(j + 1) != ">",
            // A unary `*` reads through a pointer; one after a type's word or `(` of a cast's
            // type is part of a type.
            "*" => {
                let before = s.text(j - 1);
                let reads = matches!(before, "return" | "=" | "," | "(" | "{" | ";" | "}")
                    || (before == ")" && s.text(j + 1) != "(");
                !reads
            }
            _ => true,
        }
    })
}

/// Whether tokens `first..end` are one accessor call and nothing else: `Name()`, `Name<...>()`
/// of a struct among `structs`, or a prelude accessor (qualified or not).
pub(super) fn is_accessor_call(
    s: &Statements<'_>,
    (first, end): (usize, usize),
    structs: &[&str],
) -> bool {
    let mut k = first;
    // `cg::` and `cooperative_groups::` before a prelude accessor.
    while k + 2 < end
        && QUALIFIERS.contains(&s.text(k))
        && s.text(k + 1) == ":"
        && s.text(k + 2) == ":"
    {
        k += 3;
    }
    let qualified = k > first;
    let name = s.text(k);
    let known = PRELUDE_ACCESSORS.contains(&name) || (!qualified && structs.contains(&name));
    if !known || !s.toks.get(k).is_some_and(|t| t.ident) {
        return false;
    }
    k += 1;
    if s.text(k) == "<" {
        // Template arguments: type words and names, no call and no bracket.
        let mut depth = 0i32;
        loop {
            match s.text(k) {
                "<" => depth += 1,
                ">" => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                "(" | ")" | "[" | "]" | "{" | "}" | ";" | "" => return false,
                _ => {}
            }
            k += 1;
            if k >= end {
                return false;
            }
        }
        k += 1;
    }
    k + 2 == end && s.text(k) == "(" && s.text(k + 1) == ")"
}
