//! Explicit instantiations of kernel templates in a unit whose kernels are inline functions. A
//! unit of blocks run as regions reads `__global__` as `inline` (gpu_mem.h), so that a kernel
//! its block loop inlines is not compiled a second time on its own; C++ refuses `inline` in an
//! explicit instantiation (`template __global__ void k<float>(float*);`), so there the word is
//! dropped. The instantiation means the same without it: the template it names was declared
//! `__global__` (nvcc takes both spellings).
//!
//! Guarantees: only `__global__` words between a `template` that no `<` follows and the next
//! `;` change, each to spaces of its length (lines and columns stay); a source without such an
//! instantiation, or one the scan cannot read, is returned as it is.

use gpu_mem_core::kernel::scan::tokens::tokens;
use std::borrow::Cow;

/// `code` with `__global__` dropped from its explicit instantiations.
pub(crate) fn rewrite(code: &str) -> Cow<'_, str> {
    if !code.contains("__global__") {
        return Cow::Borrowed(code);
    }
    let Some(tokens) = tokens(code) else {
        return Cow::Borrowed(code);
    };
    let text = |i: usize| &code[tokens[i].start..tokens[i].end];
    let mut dropped = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let explicit =
            tokens[i].ident && text(i) == "template" && i + 1 < tokens.len() && text(i + 1) != "<";
        i += 1;
        if !explicit {
            continue;
        }
        while i < tokens.len() && text(i) != ";" {
            if text(i) == "__global__" {
                dropped.push(tokens[i].start..tokens[i].end);
            }
            i += 1;
        }
    }
    if dropped.is_empty() {
        return Cow::Borrowed(code);
    }
    let mut out = String::with_capacity(code.len());
    let mut copied = 0;
    for range in dropped {
        out.push_str(&code[copied..range.start]);
        out.extend(std::iter::repeat_n(' ', range.len()));
        copied = range.end;
    }
    out.push_str(&code[copied..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn an_explicit_instantiation_loses_the_word_in_place() {
        let code = "template <class T> __global__ void k(T* p) { *p = 1; }\n\
                    template __global__ void k<float>(float*);\n\
                    extern template void __global__ k<int>(int*);\n";
        let expected = "template <class T> __global__ void k(T* p) { *p = 1; }\n\
                        template            void k<float>(float*);\n\
                        extern template void            k<int>(int*);\n";
        assert_eq!(rewrite(code), expected);
    }

    #[test]
    fn definitions_specialisations_comments_and_strings_stay() {
        for code in [
            "template <class T> __global__ void k(T* p) { *p = 1; }",
            "template <> __global__ void k<int>(int* p) { *p = 2; }",
            "__global__ void plain(float* p) {}",
            "// template __global__ void k<float>(float*);\n__global__ void k() {}",
            "const char* s = \"template __global__\"; __global__ void k() {}",
            "template __device__ void helper<float>(float*);",
        ] {
            assert_eq!(rewrite(code), code);
        }
    }

    #[test]
    fn an_unreadable_source_is_left_as_it_is() {
        let code = "template __global__ void k<float>(float*); /* unterminated";
        assert_eq!(rewrite(code), code);
    }
}
