//! Flat regions: a region whose threads may run as counted loops over a block's rows and `x`
//! (the prelude's `gm_sim_walk_flat`), its `threadIdx` a value of the loop (`gm_sim_tidx`) and
//! nothing stored per thread, which the host compiler can vectorise across threads. The walk
//! does not keep the prelude's `threadIdx` up to date, so a flat region must read the index
//! through its own `threadIdx` tokens only: it never returns nor jumps out, and calls nothing,
//! and names no macro, that could read the index behind its back.
//!
//! What may stand in one: control words, casts, the math library's pure functions and the warp
//! intrinsics ([`FLAT_CALLS`], unless the source declares a function of the name), macros made
//! of those, of numbers and of the block's indices ([`flat_macros`]); a source that includes a
//! header of the user's (whose macros cannot be read here) has no flat region.

use super::parse::{CAST_WORDS, Statements};
use gpu_mem_core::kernel::scan::functions::Function;
use gpu_mem_core::kernel::scan::tokens::tokens;

/// What a flat region may call (see [`Flat::region`]): control words, casts, arithmetic that
/// reads nothing of the running thread's, and the warp intrinsics, which a region records and
/// delivers by the thread's number alone (`collect`).
const FLAT_CALLS: [&str; 75] = [
    "__shfl_sync",
    "__shfl_up_sync",
    "__shfl_down_sync",
    "__shfl_xor_sync",
    "__shfl",
    "__shfl_up",
    "__shfl_down",
    "__shfl_xor",
    "__ballot_sync",
    "__any_sync",
    "__all_sync",
    "__activemask",
    "this_thread_block",
    "if",
    "for",
    "while",
    "switch",
    "sizeof",
    "int",
    "unsigned",
    "float",
    "double",
    "long",
    "short",
    "char",
    "bool",
    "signed",
    "size_t",
    "min",
    "max",
    "fminf",
    "fmaxf",
    "fmin",
    "fmax",
    "sqrtf",
    "sqrt",
    "rsqrtf",
    "cbrtf",
    "expf",
    "exp",
    "exp2f",
    "logf",
    "log",
    "log2f",
    "log10f",
    "fabsf",
    "fabs",
    "abs",
    "sinf",
    "cosf",
    "tanf",
    "sin",
    "cos",
    "powf",
    "pow",
    "floorf",
    "floor",
    "ceilf",
    "ceil",
    "roundf",
    "truncf",
    "fmodf",
    "fmaf",
    "fma",
    "__fdividef",
    "__expf",
    "__logf",
    "__sinf",
    "__cosf",
    "__powf",
    "__saturatef",
    "__mul24",
    "__umul24",
    "__popc",
    "__clz",
];

/// What a flat region may name and call in one source.
pub(super) struct Flat<'c> {
    /// Whether any region may be flat: the source includes only headers whose macros are
    /// known (`includes::only_known_headers`).
    allowed: bool,
    /// The source's macros that are not numbers: a flat region names none but `flat_macros`.
    macros: Vec<&'c str>,
    flat_macros: Vec<&'c str>,
    /// The names of the functions the source declares (one named as one of [`FLAT_CALLS`]
    /// may read anything).
    own_functions: Vec<&'c str>,
    /// The source's accessor structs (`super::accessors`): calls of them read nothing of the
    /// thread's.
    accessors: Vec<&'c str>,
}

impl<'c> Flat<'c> {
    /// The rules for `code` (tokens `s`, file-scope functions `fns`, number macros `numbers`).
    pub(super) fn of(
        code: &'c str,
        s: &Statements<'c>,
        fns: &[Function],
        numbers: &[&str],
    ) -> Flat<'c> {
        Flat {
            allowed: crate::source::includes::only_known_headers(code),
            macros: crate::source::defines::defines(code)
                .into_iter()
                .map(|d| d.name)
                .filter(|name| !numbers.contains(name))
                .collect(),
            flat_macros: flat_macros(code, numbers),
            own_functions: fns
                .iter()
                .filter_map(|f| f.name.map(|n| s.text(n)))
                .collect(),
            accessors: super::accessors::accessor_structs(s),
        }
    }

    /// Whether tokens `first..end` are one accessor call (`super::accessors`), whose value is
    /// the same in every thread of the block.
    pub(super) fn accessor_call(&self, s: &Statements<'_>, span: (usize, usize)) -> bool {
        super::accessors::is_accessor_call(s, span, &self.accessors)
    }

    /// The `open` bracket (`(`, `<`) that token `closed`, a `close` one, closes, looking back
    /// no further than token `first`.
    fn opening(
        s: &Statements<'_>,
        (first, closed): (usize, usize),
        (open, close): (&str, &str),
    ) -> Option<usize> {
        let mut depth = 0i32;
        (first..closed).rev().find(|&j| {
            let t = s.text(j);
            if t == close {
                depth += 1;
            } else if t == open {
                if depth == 0 {
                    return true;
                }
                depth -= 1;
            }
            false
        })
    }

    /// Whether the statements of tokens `first..=last` (of `s`) make a flat region (the prelude's
    /// `gm_sim_walk_flat`): they never return nor leave by `goto`, and call nothing but what
    /// cannot read the thread's index behind their back ([`FLAT_CALLS`], casts, the control
    /// words' parentheses), so that their own `threadIdx`, a value of the loop, is all the
    /// index they read.
    pub(super) fn region(&self, s: &Statements<'_>, first: usize, last: usize) -> bool {
        self.allowed
            && (first..=last).all(|k| {
                let word = s.text(k);
                !s.toks[k].ident || !self.macros.contains(&word) || self.flat_macros.contains(&word)
            })
            && (first..=last).all(|k| match s.text(k) {
                "return" | "goto" | "throw" | "new" | "delete" | "asm" | "__asm__" | "operator" => {
                    false
                }
                "(" if k > first => {
                    let before = s.text(k - 1);
                    if s.toks[k - 1].ident {
                        (FLAT_CALLS.contains(&before) && !self.own_functions.contains(&before))
                            || self.flat_macros.contains(&before)
                            || self.accessors.contains(&before)
                    } else if before == ">" {
                        // `name<...>(`: a call of a template unless a cast; `a > (b)` compares.
                        let open = Self::opening(s, (first, k - 1), ("<", ">"));
                        open.is_none_or(|j| {
                            j > first
                                && (matches!(
                                    s.text(j - 1),
                                    "static_cast"
                                        | "reinterpret_cast"
                                        | "const_cast"
                                        | "gm_dynamic_shared"
                                ) || self.accessors.contains(&s.text(j - 1)))
                        })
                    } else if before == ")" {
                        // `(float)(x)`: a cast; anything else calls what an expression gave.
                        let open = Self::opening(s, (first, k - 1), ("(", ")"));
                        open.is_some_and(|j| {
                            j + 1 < k - 1 && (j + 1..k - 1).all(|t| CAST_WORDS.contains(&s.text(t)))
                        })
                    } else {
                        before != "]"
                    }
                }
                _ => true,
            })
    }
}

/// Whether tokens `first..=last` of `code` (tokens `toks`, file-scope functions `fns`) would
/// make a flat region by these rules: what a flat clone of a kernel run as plain calls
/// (`source::flat_calls`) may hold.
pub(crate) fn is_flat_code(
    code: &str,
    toks: &[gpu_mem_core::kernel::scan::tokens::Token],
    fns: &[Function],
    (first, last): (usize, usize),
) -> bool {
    let s = Statements {
        code,
        toks,
        warp_calls: Vec::new(),
    };
    let numbers = crate::source::defines::numbers(code);
    Flat::of(code, &s, fns, &numbers).region(&s, first, last)
}

/// The macros of `code` a flat region may name ([`Flat::region`]): every definition of one
/// (the branches of an `#if` may each define it) calls only its parameters' arguments' values
/// and what a flat region may call ([`FLAT_CALLS`], [`CAST_WORDS`], other such macros), and
/// names without calling them anything but `threadIdx` and other macros (a name is then a
/// variable where the macro is used, which reads no index behind the region's back), numbers
/// and such macros: `#define __shfl(v, d) __shfl_sync(0xffffffff, v, d)` of a port of legacy
/// code, PolyBench's `#define _PB_N POLYBENCH_LOOP_BOUND(N, n)`.
fn flat_macros<'c>(code: &'c str, numbers: &[&str]) -> Vec<&'c str> {
    let defines = crate::source::defines::defines(code);
    let is_macro = |name: &str| defines.iter().any(|d| d.name == name);
    // Undefined somewhere, or pasting names the rewrite cannot see.
    let refused = |name: &str| {
        defines
            .iter()
            .any(|d| d.name == name && (d.undef || d.body.contains("##")))
    };
    // Each definition's name, parameters and the names of its replacement, each with whether
    // it is called (a parameter called may be any function).
    let macros: Vec<_> = defines
        .iter()
        .filter(|d| !refused(d.name))
        .map(|d| {
            let words: Vec<(&str, bool)> = tokens(d.body)
                .map(|toks| {
                    toks.iter()
                        .enumerate()
                        .filter(|(_, t)| t.ident)
                        .map(|(k, t)| {
                            let called = toks
                                .get(k + 1)
                                .is_some_and(|n| &d.body[n.start..n.end] == "(");
                            (&d.body[t.start..t.end], called)
                        })
                        .collect()
                })
                .unwrap_or_else(|| vec![("threadIdx", false)]);
            (d.name, d.params.clone().unwrap_or_default(), words)
        })
        .collect();
    // (Until no macro is added: one may name another defined after it.)
    let mut safe: Vec<&str> = Vec::new();
    loop {
        let before = safe.len();
        let known = |params: &[&str], &(w, called): &(&str, bool), safe: &[&str]| {
            if called {
                FLAT_CALLS.contains(&w) || CAST_WORDS.contains(&w) || safe.contains(&w)
            } else {
                params.contains(&w)
                    || numbers.contains(&w)
                    || safe.contains(&w)
                    || (w != "threadIdx" && !is_macro(w))
            }
        };
        for name in macros.iter().map(|m| m.0) {
            if safe.contains(&name) {
                continue;
            }
            let all = macros
                .iter()
                .filter(|m| m.0 == name)
                .all(|(_, params, words)| words.iter().all(|w| known(params, w, &safe)));
            if all {
                safe.push(name);
            }
        }
        if safe.len() == before {
            return safe;
        }
    }
}
