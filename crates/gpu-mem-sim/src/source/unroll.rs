//! CUDA's `#pragma unroll [n]` as the host compiler reads it. nvcc unrolls a loop so marked
//! (wholly when its trip count is known and no `n` is given); GCC ignores the pragma, and a
//! kernel's innermost loops, such as a tiled matmul's product over a tile, then pay a compare
//! and a branch per step. Each becomes `#pragma GCC unroll m` (which clang reads too): `m` is
//! `n` when `n` is a plain number, else [`UNROLL`], which unrolls a short loop of known trip
//! count wholly and a long one by that factor.
//!
//! Guarantees: only such directives change, each on its own lines (a continued one keeps its
//! line breaks); `#pragma unroll 1` stays "do not unroll"; other pragmas, and a source without
//! one, are left as they are.

use gpu_mem_core::kernel::scan::tokens::directives;
use std::borrow::Cow;

/// The factor of a `#pragma unroll` without a plain number.
pub(crate) const UNROLL: u32 = 32;

/// The most a factor may be (GCC's limit).
const MOST: u32 = 65_534;

/// `code` with every `#pragma unroll` made GCC's.
pub(crate) fn rewrite(code: &str) -> Cow<'_, str> {
    if !code.contains("unroll") {
        return Cow::Borrowed(code);
    }
    let mut out = String::new();
    let mut copied = 0;
    for range in directives(code) {
        let text = &code[range.clone()];
        let Some(factor) = factor(text) else {
            continue;
        };
        out.push_str(&code[copied..range.start]);
        out.push_str(&format!("#pragma GCC unroll {factor}"));
        out.extend(std::iter::repeat_n('\n', text.matches('\n').count()));
        copied = range.end;
    }
    if copied == 0 {
        return Cow::Borrowed(code);
    }
    out.push_str(&code[copied..]);
    Cow::Owned(out)
}

/// The factor of a directive that is CUDA's `#pragma unroll [n]`, else `None`.
fn factor(directive: &str) -> Option<u32> {
    let joined = directive.replace("\\\n", " ");
    let rest = joined.trim_start().strip_prefix('#')?.trim_start();
    let rest = rest.strip_prefix("pragma")?;
    let rest = rest.trim_start().strip_prefix("unroll")?;
    if rest.starts_with(|c: char| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let count = rest
        .trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .trim();
    Some(match count.parse::<u32>() {
        Ok(0) | Err(_) => UNROLL,
        Ok(n) => n.min(MOST),
    })
}

#[cfg(test)]
mod tests {
    use super::{UNROLL, rewrite};

    #[test]
    fn cuda_unroll_pragmas_become_gcc_ones_on_their_lines() {
        let code = "a;\n#pragma unroll\nfor (;;) {}\n  #  pragma unroll 4\n#pragma unroll (2)\n#pragma unroll N\n#pragma unroll 1\nb;\n";
        let expected = format!(
            "a;\n#pragma GCC unroll {UNROLL}\nfor (;;) {{}}\n#pragma GCC unroll 4\n#pragma GCC unroll 2\n#pragma GCC unroll {UNROLL}\n#pragma GCC unroll 1\nb;\n"
        );
        assert_eq!(rewrite(code), expected);
    }

    #[test]
    fn other_pragmas_and_words_stay() {
        for code in [
            "#pragma once\nint unroll = 1;\n",
            "#pragma unroll_completely\n",
            "#pragma GCC unroll 8\n",
            "// #pragma unroll\n",
        ] {
            assert_eq!(rewrite(code), code);
        }
    }

    #[test]
    fn a_continued_directive_keeps_its_lines() {
        let code = "#pragma \\\nunroll 8\nx;\n";
        assert_eq!(rewrite(code), "#pragma GCC unroll 8\n\nx;\n");
    }
}
