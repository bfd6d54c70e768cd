//! A kernel's own macros for a wait: CUDA code often names a shuffle or a barrier through a
//! function-like macro of its own (HeCBench's shuffle: `#define __shfl(v, d) __shfl_sync(0xffffffff,
//! v, d)`). In the kernel such a macro expands to the prelude's macro for the wait, which makes it
//! a `co_await` a coroutine suspends at; so for the stackless check and rewrite its name is one more
//! name that waits, called like the others ([`aliases`]), and its definition is no directive that
//! hides a wait from them (`super::directive_names`).
//!
//! Guarantees: only `#define NAME(params) replacement` counts, whose replacement names a wait
//! (or another such macro) and uses neither `#` nor `##`; every other directive naming a wait
//! still keeps the kernel on stacks. Object-like macros are not aliases (`SYNC;` is no call).

use gpu_mem_core::kernel::scan::tokens::{directives, is_name_byte};
use std::ops::Range;

/// The function-like macros of `code` whose replacement names one of `waits`, directly or
/// through another such macro, with the byte range of each one's definition.
pub(crate) fn aliases<'c>(code: &'c str, waits: &[&str]) -> Vec<(&'c str, Range<usize>)> {
    let defines: Vec<(&str, &str, Range<usize>)> = directives(code)
        .into_iter()
        .filter_map(|range| {
            let (name, replacement) = function_like(&code[range.clone()])?;
            Some((name, replacement, range))
        })
        .collect();
    let mut found: Vec<(&str, Range<usize>)> = Vec::new();
    loop {
        let before = found.len();
        for (name, replacement, range) in &defines {
            if found.iter().any(|(n, _)| n == name) || replacement.contains('#') {
                continue;
            }
            if words(replacement).any(|w| waits.contains(&w) || found.iter().any(|(n, _)| *n == w))
            {
                found.push((name, range.clone()));
            }
        }
        if found.len() == before {
            return found;
        }
    }
}

/// `(name, replacement)` of a function-like `#define` (its `(` right after the name).
fn function_like(directive: &str) -> Option<(&str, &str)> {
    let rest = directive.trim_start().strip_prefix('#')?.trim_start();
    let rest = rest.strip_prefix("define")?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim_start();
    let end = rest.bytes().take_while(|&b| is_name_byte(b)).count();
    let (name, after) = rest.split_at(end);
    let params = after.strip_prefix('(')?;
    let close = params.find(')')?;
    (!name.is_empty()).then_some((name, &params[close + 1..]))
}

/// The identifiers of `text`.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

// Text only, so nothing for Miri to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::aliases;

    #[test]
    fn function_like_macros_naming_a_wait_are_aliases() {
        let code = "#define __shfl(v, d)  __shfl_sync(0xffffffff, v, d)\n\
                    #define REDUCE(v) (__shfl(v, 1) + \\\n    v)\n\
                    #define N 32\n\
                    #define SYNC __syncthreads()\n\
                    #define PASTE(a, b) __shfl_##a(b)\n\
                    #define SQ(x) ((x) * (x))\n\
                    #define  SPACED(x) __syncthreads()\n\
                    __global__ void k() {}\n";
        let found = aliases(code, &["__shfl_sync", "__syncthreads"]);
        let names: Vec<&str> = found.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["__shfl", "REDUCE", "SPACED"]);
        // Each with its whole definition, continuation lines included.
        let (_, range) = &found[1];
        assert_eq!(
            &code[range.clone()],
            "#define REDUCE(v) (__shfl(v, 1) + \\\n    v)\n"
        );
    }
}
