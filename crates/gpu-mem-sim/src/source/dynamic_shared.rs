//! `extern __shared__ T name[];` — the launch's dynamic shared memory, as CUDA declares it — made
//! something the host compiler builds (it has no arrays whose storage a launch decides): inside
//! a function, `T* const name = gm_dynamic_shared<T>();`; at namespace scope,
//! `static gm_sim_dynamic_shared<T> name;`, an object that acts as the array
//! (`include/gm_sim/dynamic_shared.h`).
//!
//! Guarantees: only such declarations change (one declarator with `[]`, attributes such as
//! `__align__(16)` dropped: the memory is 16-byte aligned); each keeps its lines (the
//! replacement is followed by the declaration's line breaks); a source without one is returned
//! as it is; a declaration the rewrite does not understand is left for the compiler to refuse.

use gpu_mem_core::kernel::scan::tokens::{Token, tokens};
use std::borrow::Cow;

/// Words dropped from the type: the declaration's own, and attributes with their groups.
const DROPPED: [&str; 2] = ["extern", "__shared__"];
const ATTRIBUTES: [&str; 4] = ["__align__", "__attribute__", "alignas", "__declspec"];

/// `code` with every `extern __shared__` array declaration rewritten.
pub(crate) fn rewrite(code: &str) -> Cow<'_, str> {
    if !code.contains("__shared__") {
        return Cow::Borrowed(code);
    }
    let Some(toks) = tokens(code) else {
        return Cow::Borrowed(code);
    };
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    // Braces open around each token: `true` for a namespace or linkage block.
    let mut braces: Vec<bool> = Vec::new();
    let mut statement_start = 0;
    for k in 0..toks.len() {
        match text(k) {
            "{" => {
                let head: Vec<&str> = (statement_start..k).map(text).collect();
                let namespace = head.contains(&"namespace") || head == ["extern"];
                braces.push(namespace);
                statement_start = k + 1;
            }
            "}" => {
                braces.pop();
                statement_start = k + 1;
            }
            ";" => {
                let local = braces.iter().any(|namespace| !namespace);
                if let Some(edit) = declaration(code, &toks, statement_start, k, local) {
                    edits.push(edit);
                }
                statement_start = k + 1;
            }
            _ => {}
        }
    }
    if edits.is_empty() {
        return Cow::Borrowed(code);
    }
    let mut out = String::with_capacity(code.len() + 64 * edits.len());
    let mut at = 0;
    for (start, end, with) in edits {
        out.push_str(&code[at..start]);
        out.push_str(&with);
        at = end;
    }
    out.push_str(&code[at..]);
    Cow::Owned(out)
}

/// The edit of the declaration over tokens `start..end` (`end` its `;`), if it is an
/// `extern __shared__` array: (byte range, replacement).
fn declaration(
    code: &str,
    toks: &[Token],
    start: usize,
    end: usize,
    local: bool,
) -> Option<(usize, usize, String)> {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let words: Vec<&str> = (start..end).map(text).collect();
    if !(words.contains(&"extern") && words.contains(&"__shared__")) {
        return None;
    }
    // `... name [ ]` at the end.
    if end < start + 4 || text(end - 1) != "]" || text(end - 2) != "[" || !toks[end - 3].ident {
        return None;
    }
    let name = text(end - 3);
    let mut ty = Vec::new();
    let mut k = start;
    while k < end - 3 {
        let word = text(k);
        if ATTRIBUTES.contains(&word) {
            k = group_end(code, toks, k + 1, end)? + 1;
            continue;
        }
        if !DROPPED.contains(&word) {
            ty.push(&code[toks[k].start..toks[k].end]);
        }
        k += 1;
    }
    if ty.is_empty() || ty.contains(&",") {
        return None;
    }
    let ty = join_type(&ty);
    let (from, to) = (toks[start].start, toks[end].end);
    let breaks = "\n".repeat(code[from..to].matches('\n').count());
    let with = if local {
        format!("{ty}* const {name} = gm_dynamic_shared<{ty}>();{breaks}")
    } else {
        format!("static gm_sim_dynamic_shared<{ty}> {name};{breaks}")
    };
    Some((from, to, with))
}

/// The type's tokens as C++ reads them: words apart, punctuation (`::`, `<`, `*`) joined.
fn join_type(parts: &[&str]) -> String {
    let mut out = String::new();
    let word = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    for (i, part) in parts.iter().enumerate() {
        if i > 0 && word(part) && word(parts[i - 1]) {
            out.push(' ');
        }
        out.push_str(part);
    }
    out
}

/// The `)` closing the `(` at token `open`, before `end`.
fn group_end(code: &str, toks: &[Token], open: usize, end: usize) -> Option<usize> {
    if toks.get(open).map(|t| &code[t.start..t.end]) != Some("(") {
        return None;
    }
    let mut depth = 0i32;
    for (k, t) in toks.iter().enumerate().take(end).skip(open) {
        match &code[t.start..t.end] {
            "(" => depth += 1,
            ")" => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

// Safe code only, so nothing for Miri to check (and text-heavy tests take minutes under it).
#[cfg(all(test, not(miri)))]
mod tests {
    use super::rewrite;

    #[test]
    fn local_declarations_become_pointers_and_keep_their_lines() {
        let code = "__global__ void k(float* p) {\n\
                    \x20   extern __shared__ float sdata[];\n\
                    \x20   extern __shared__ __align__(16)\n   unsigned char raw[];\n\
                    \x20   sdata[0] = p[0];\n}\n";
        let out = rewrite(code);
        assert_eq!(
            out,
            "__global__ void k(float* p) {\n\
             \x20   float* const sdata = gm_dynamic_shared<float>();\n\
             \x20   unsigned char* const raw = gm_dynamic_shared<unsigned char>();\n\n\
             \x20   sdata[0] = p[0];\n}\n"
        );
        assert_eq!(out.lines().count(), code.lines().count());
    }

    #[test]
    fn templates_members_and_namespace_scope() {
        let code = "template <class T> struct SharedMemory {\n\
                    \x20 __device__ operator T*() { extern __shared__ int __smem[]; return (T*)__smem; }\n\
                    };\n\
                    namespace n { extern __shared__ float2 tile[]; }\n\
                    extern \"C\" { extern __shared__ ns::V<int> vs[]; }\n";
        let out = rewrite(code);
        assert!(
            out.contains("int* const __smem = gm_dynamic_shared<int>();"),
            "{out}"
        );
        assert!(
            out.contains("static gm_sim_dynamic_shared<float2> tile;"),
            "{out}"
        );
        assert!(
            out.contains("static gm_sim_dynamic_shared<ns::V<int>> vs;"),
            "{out}"
        );
    }

    #[test]
    fn other_sources_are_untouched() {
        for code in [
            "__global__ void k() { __shared__ float s[16]; }",
            "extern __device__ int x[];",
            "extern __shared__ float a[], b[];",
            "/* extern __shared__ float c[]; */",
        ] {
            assert_eq!(rewrite(code), code, "{code}");
        }
    }
}
