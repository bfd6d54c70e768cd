//! Stackless threads: which kernels may run their threads as coroutines instead of on
//! stacks of their own, and the rewrite that makes their `__global__` functions coroutines (the
//! prelude's `GM_SIM_STACKLESS` section turns the barrier names into `co_await`s).
//!
//! Guarantees:
//! * only kernels whose threads wait at barriers and collectives, and let each other run at
//!   atomics and spin hints, called in the `__global__` function itself are chosen
//!   ([`why_not`] says why another is not); the test is on the source text and conservative;
//! * the rewrite keeps every line where it was (all edits stay within their line), so compile
//!   errors, fault and divergence reports name the user's lines;
//! * a source the rewrite cannot handle gives `None`, and a rewritten source the compiler refuses
//!   (a barrier inside a lambda, say; one inside a helper function is not even tried) is built
//!   the ordinary way instead (`super::program`): the choice changes speed, never behaviour.

/// Names the rewrite must not meet: the runtime table (through which a thread could wait
/// inside a function), raw strings (which the tokenizer does not read).
const NEEDS_A_STACK: [&str; 2] = ["gm_sim_", "R\""];

/// The user's own coroutines: a kernel that is one already is left as it is.
const COROUTINE_KEYWORDS: [&str; 3] = ["co_await", "co_yield", "co_return"];

/// The names the prelude turns into `co_await`s (function-like macros): barriers, warp
/// barriers, block and warp collectives, and the atomics and spin hint, which let the others
/// run at every 16th call of a thread (as they do from inside the function on a fiber). Called
/// in a helper function, they make the stackless form fail to compile (no coroutine there).
const SUSPENDING: [&str; 30] = [
    "__syncthreads",
    "syncthreads",
    "barrier",
    "__syncwarp",
    "wavebarrier",
    "__syncthreads_count",
    "__syncthreads_and",
    "__syncthreads_or",
    "syncthreads_count",
    "syncthreads_and",
    "syncthreads_or",
    "__shfl_sync",
    "__shfl_up_sync",
    "__shfl_down_sync",
    "__shfl_xor_sync",
    "__ballot_sync",
    "__all_sync",
    "__any_sync",
    "atomicAdd",
    "atomicSub",
    "atomicExch",
    "atomicMin",
    "atomicMax",
    "atomicInc",
    "atomicDec",
    "atomicCAS",
    "atomicAnd",
    "atomicOr",
    "atomicXor",
    "__nanosleep",
];

/// Why `code`'s threads may not run stackless, or `None` when they may: it must name something
/// that waits (see [`super::wrapper::may_wait`]), nothing of [`NEEDS_A_STACK`] or
/// [`COROUTINE_KEYWORDS`], and every name of [`SUSPENDING`] must be a plain call in the body of
/// a `__global__` function (`(syncthreads)()`, `&syncthreads` or `__shfl_sync<float>(...)` would
/// reach the function, which cannot suspend a coroutine; a call in an expression,
/// `while (atomicCAS(p, 0, 1) != 0)`, is one). The reason names the line.
pub(crate) fn why_not(code: &str) -> Option<String> {
    if !super::wrapper::may_wait(code) {
        return Some("its threads wait for nothing".into());
    }
    if let Some(word) = NEEDS_A_STACK.iter().find(|word| code.contains(*word)) {
        return Some(format!("it names `{word}`"));
    }
    if directive_names_suspending(code) {
        return Some("a preprocessor directive names a barrier, collective or atomic".into());
    }
    let Some(toks) = tokens(code) else {
        return Some("a comment or literal does not end".into());
    };
    let Some(bodies) = kernel_bodies(code, &toks) else {
        return Some("a kernel's body does not end".into());
    };
    // A call in a helper function cannot suspend (the compiler would refuse the stackless form:
    // not tried, which saves that compile).
    let in_a_kernel = |i: usize| bodies.iter().any(|&(open, close)| open < i && i < close);
    let text = |t: &Token| &code[t.start..t.end];
    let line = |t: &Token| code[..t.start].matches('\n').count() + 1;
    toks.iter().enumerate().find_map(|(i, t)| {
        if t.ident && COROUTINE_KEYWORDS.contains(&text(t)) {
            return Some(format!(
                "line {}: the kernel is a coroutine already",
                line(t)
            ));
        }
        if !(t.ident && SUSPENDING.contains(&text(t))) {
            return None;
        }
        let called = toks.get(i + 1).is_some_and(|next| text(next) == "(");
        // A member (`.barrier(`, `->barrier(`) or qualified (`::atomicAdd(`): the macro would
        // not apply cleanly. (A name in parentheses, `(syncthreads)()`, or taken by address,
        // `&syncthreads`, is not called: the next token is not `(`. A call after `&&`, `>` or a
        // `?:`'s `:` is a call.)
        let token = |back: usize| i.checked_sub(back).and_then(|p| toks.get(p));
        let pair = |first: &str, second: &str| {
            token(1).is_some_and(|b| text(b) == second)
                && token(2)
                    .is_some_and(|a| text(a) == first && a.end == token(1).map_or(0, |b| b.start))
        };
        let named =
            token(1).is_some_and(|prev| text(prev) == ".") || pair("-", ">") || pair(":", ":");
        if !called || named {
            Some(format!(
                "line {}: `{}` is not a plain call",
                line(t),
                text(t)
            ))
        } else if !in_a_kernel(i) {
            Some(format!(
                "line {}: `{}` is called outside a `__global__` function (a helper cannot suspend)",
                line(t),
                text(t)
            ))
        } else {
            None
        }
    })
}

/// Whether a preprocessor directive names one of [`SUSPENDING`]: a macro could then reach the
/// function without a plain call in the kernel (`#define CAS (atomicCAS)`), which the token test
/// (it skips directives) cannot see.
fn directive_names_suspending(code: &str) -> bool {
    let mut continued = false;
    for line in code.lines() {
        let directive = continued || line.trim_start().starts_with('#');
        if directive && SUSPENDING.iter().any(|name| line.contains(name)) {
            return true;
        }
        continued = directive && line.trim_end().ends_with('\\');
    }
    false
}

/// A token of the source: an identifier, a number or one punctuation character, by byte range.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Token {
    start: usize,
    end: usize,
    ident: bool,
}

/// The identifiers, numbers and punctuation of `code`, skipping whitespace, comments, string
/// and character literals and preprocessor lines. `None` for an unterminated comment or
/// literal.
fn tokens(code: &str) -> Option<Vec<Token>> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    // Only whitespace since the last newline: a `#` here starts a directive.
    let mut line_start = true;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line_start = true;
                i += 1;
            }
            c if c.is_ascii_whitespace() => i += 1,
            b'#' if line_start => {
                // To the end of the line, following backslash continuations.
                while i < b.len() && b[i] != b'\n' {
                    if b[i] == b'\\' && i + 1 < b.len() {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let close = code[i + 2..].find("*/")?;
                i += 2 + close + 2;
                line_start = false;
            }
            b'"' | b'\'' => {
                i += 1;
                loop {
                    match b.get(i)? {
                        b'\\' => i += 2,
                        b'\n' => return None,
                        &q if q == c => break,
                        _ => i += 1,
                    }
                }
                i += 1;
                line_start = false;
            }
            c if c.is_ascii_digit()
                || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) =>
            {
                // A preprocessing number: digits, letters, `.`, `'` separators, signed exponents.
                let start = i;
                i += 1;
                while i < b.len() {
                    let d = b[i];
                    let part = d.is_ascii_alphanumeric()
                        || d == b'_'
                        || d == b'.'
                        || (d == b'\'' && b.get(i + 1).is_some_and(u8::is_ascii_alphanumeric))
                        || ((d == b'+' || d == b'-')
                            && matches!(b[i - 1], b'e' | b'E' | b'p' | b'P'));
                    if !part {
                        break;
                    }
                    i += 1;
                }
                out.push(Token {
                    start,
                    end: i,
                    ident: false,
                });
                line_start = false;
            }
            // Bytes of multi-byte characters count as identifier characters, so that every
            // token starts and ends on a character boundary (and `größe` is one name).
            c if c.is_ascii_alphabetic() || c == b'_' || !c.is_ascii() => {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || !b[i].is_ascii())
                {
                    i += 1;
                }
                out.push(Token {
                    start,
                    end: i,
                    ident: true,
                });
                line_start = false;
            }
            _ => {
                // One byte of ASCII punctuation.
                out.push(Token {
                    start: i,
                    end: i + 1,
                    ident: false,
                });
                i += 1;
                line_start = false;
            }
        }
    }
    Some(out)
}

/// `code` with every `__global__` function made a coroutine: it loses an `extern "C"` before
/// `__global__`, its `void` return type becomes `gm_sim_task`, each `return` in its body `co_return`, and its body starts with a `co_await`
/// that never suspends (so that a kernel without a barrier is a coroutine too). `None` when a
/// `__global__` function has no `void` return type, or the source does not tokenize.
pub(crate) fn rewrite(code: &str) -> Option<String> {
    let toks = tokens(code)?;
    let text = |t: &Token| &code[t.start..t.end];
    // A linkage block (`extern "C" { ... }`: the literal is not a token) would keep its kernels'
    // C linkage, which coroutines cannot have.
    if toks
        .windows(2)
        .any(|w| w[0].ident && text(&w[0]) == "extern" && text(&w[1]) == "{")
    {
        return None;
    }
    // (byte range replaced, replacement), in source order.
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if !(toks[i].ident && text(&toks[i]) == "__global__") {
            i += 1;
            continue;
        }
        // `extern "C"` goes: the compiler names a coroutine's parts after the function, which
        // collide under C linkage. The wrapper refers to the entry from the same unit. Only the
        // two words go, so line breaks between them stay.
        if i > 0 && toks[i - 1].ident && text(&toks[i - 1]) == "extern" {
            let between = &code[toks[i - 1].end..toks[i].start];
            if between.trim() == "\"C\"" {
                let literal = toks[i - 1].end + between.find('"')?;
                edits.push((toks[i - 1].start, toks[i - 1].end, String::new()));
                edits.push((literal, literal + 3, String::new()));
            }
        }
        let (end, void_at) = kernel_head(code, &toks, i)?;
        let void_at = void_at?;
        edits.push((toks[void_at].start, toks[void_at].end, "gm_sim_task".into()));
        if text(&toks[end]) == ";" {
            i = end + 1;
            continue;
        }
        let open = toks[end];
        edits.push((open.end, open.end, " co_await std::suspend_never{};".into()));
        let bind_shared = !may_observe_references(code, &toks[end..]);
        let close = body_end(code, &toks, end)?;
        let mut k = end;
        while k < close {
            let t = toks[k];
            match text(&t) {
                "return" if t.ident => edits.push((t.start, t.end, "co_return".into())),
                "__shared__" | "GM_SHARED" if t.ident && bind_shared => {
                    if let Some((name, semicolon)) = shared_declaration(code, &toks, k) {
                        let alias = format!("gm_sim_shared_{}", text(&toks[name]));
                        edits.push((toks[name].start, toks[name].end, alias.clone()));
                        let bind = format!(" auto& {} = {alias};", text(&toks[name]));
                        edits.push((toks[semicolon].end, toks[semicolon].end, bind));
                        k = semicolon;
                    }
                }
                _ => {}
            }
            k += 1;
        }
        i = close + 1;
    }
    if edits.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(code.len() + 64);
    let mut at = 0;
    for (start, end, with) in edits {
        out.push_str(&code[at..start]);
        out.push_str(&with);
        at = end;
    }
    out.push_str(&code[at..]);
    Some(out)
}

/// The declaration of the `__global__` function whose keyword is token `at`: the token that
/// ends it (its body's `{`, or the `;` of a declaration), outside parentheses, and its first
/// `void` there (the return type). `None` when the source ends first.
fn kernel_head(code: &str, toks: &[Token], at: usize) -> Option<(usize, Option<usize>)> {
    let mut depth = 0i32;
    let mut void_at = None;
    for (j, t) in toks.iter().enumerate().skip(at + 1) {
        match &code[t.start..t.end] {
            "(" => depth += 1,
            ")" => depth -= 1,
            "{" | ";" if depth == 0 => return Some((j, void_at)),
            "void" if depth == 0 && void_at.is_none() => void_at = Some(j),
            _ => {}
        }
    }
    None
}

/// The `}` that closes the `{` at token `open`; `None` when the source ends first.
fn body_end(code: &str, toks: &[Token], open: usize) -> Option<usize> {
    let mut braces = 0i32;
    for (k, t) in toks.iter().enumerate().skip(open) {
        match &code[t.start..t.end] {
            "{" => braces += 1,
            "}" => {
                braces -= 1;
                if braces == 0 {
                    return Some(k);
                }
            }
            _ => {}
        }
    }
    None
}

/// The token ranges (`{` to `}`) of the bodies of `code`'s `__global__` functions; `None` when
/// one does not end.
fn kernel_bodies(code: &str, toks: &[Token]) -> Option<Vec<(usize, usize)>> {
    let mut bodies = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i];
        if !(t.ident && &code[t.start..t.end] == "__global__") {
            i += 1;
            continue;
        }
        let (end, _) = kernel_head(code, toks, i)?;
        if &code[toks[end].start..toks[end].end] == ";" {
            i = end + 1;
            continue;
        }
        let close = body_end(code, toks, end)?;
        bodies.push((end, close));
        i = close + 1;
    }
    Some(bodies)
}

/// Whether code from `toks` on (a kernel body and what follows) might tell a `__shared__`
/// variable from a reference bound to it: `decltype` names the reference type, and a lambda
/// capturing by copy copies the referenced value where a static variable is not captured at all.
/// (A lambda: `[=`, or a capture list's `]` followed by `(`, `{` or `mutable`; an occasional
/// subscript caught as well only costs speed.)
fn may_observe_references(code: &str, toks: &[Token]) -> bool {
    let text = |t: &Token| &code[t.start..t.end];
    toks.windows(2).any(|w| {
        let (a, b) = (text(&w[0]), text(&w[1]));
        a == "decltype"
            || (a == "[" && b == "=")
            || (a == "]" && matches!(b, "(" | "{" | "mutable"))
    })
}

/// For a `__shared__` (or `GM_SHARED`) at token `at` that starts a declaration of one variable
/// without initializer (`__shared__ float tile[16][16];`), the tokens of its name and of its `;`.
///
/// Such a variable is a thread-local of the loaded library (one per block: a block's threads
/// share an OS thread), which costs a call to find after every barrier in a coroutine; the
/// rewrite renames it and binds the old name to it once per thread (`auto& tile = ...;`, kept
/// in the frame). `None` for anything else (`extern` dynamic arrays, several declarators,
/// initializers), which stays as written.
fn shared_declaration(code: &str, toks: &[Token], at: usize) -> Option<(usize, usize)> {
    let text = |t: &Token| &code[t.start..t.end];
    let before = text(toks.get(at.checked_sub(1)?)?);
    if !matches!(before, ";" | "{" | "}") {
        return None;
    }
    // Parentheses and brackets nest; a `,` outside them (several declarators, or a template's
    // arguments: not worth telling apart) and initializers leave the declaration as it is.
    let mut depth = 0i32;
    let mut name = None;
    let mut dimensions = false;
    let mut k = at + 1;
    loop {
        let t = toks.get(k)?;
        let word = text(t);
        if word == "[" && depth == 0 {
            dimensions = true;
        }
        match word {
            "(" | "[" => depth += 1,
            ")" | "]" => depth -= 1,
            ";" if depth == 0 => break,
            "," | "=" | "{" | "}" if depth == 0 => return None,
            _ if t.ident && depth == 0 && !dimensions => name = Some(k),
            _ => {}
        }
        k += 1;
    }
    let name = name?;
    // The name is not the type: something comes before it.
    (name > at + 1).then_some((name, k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eligible(code: &str) -> bool {
        why_not(code).is_none()
    }

    const TILED: &str = r#"#include "gpu_mem.h"
#define TPB 16
// a __global__ in a comment, "__global__ void" in a string
extern "C" __global__ void tiled(gm_array<float, 2> a, int n) {
    __shared__ float s[TPB];
    if (threadIdx.x >= n) { return; }
    s[threadIdx.x] = a(0, threadIdx.x) * 1e-3f + 0x1p-2f;
    __syncthreads();
    a(0, threadIdx.x) = s[TPB - 1 - threadIdx.x];
}
"#;

    #[test]
    fn kernels_become_coroutines_on_the_same_lines() {
        let out = rewrite(TILED).unwrap();
        assert!(out.contains(
            "  __global__ gm_sim_task tiled(gm_array<float, 2> a, int n) { co_await std::suspend_never{};"
        ));
        assert!(!out.contains("extern"));
        assert!(out.contains("{ co_return; }"));
        assert!(out.contains("// a __global__ in a comment, \"__global__ void\" in a string"));
        assert_eq!(out.lines().count(), TILED.lines().count());
        for (before, after) in TILED.lines().zip(out.lines()) {
            if !before.contains("return")
                && !before.contains("__global__ void")
                && !before.contains("__shared__")
            {
                assert_eq!(before, after);
            }
        }
    }

    #[test]
    fn shared_arrays_are_bound_once_per_thread() {
        let code = "__global__ void k(int n) {\n\
                    \x20   GM_SHARED float tile[16][TPB + 1];\n\
                    \x20   __shared__ volatile int count; extern __shared__ float dynamic[];\n\
                    \x20   __shared__ int a[4], b[4];\n\
                    \x20   __shared__ gm_pair<int, int> pair;\n\
                    }\n";
        let out = rewrite(code).unwrap();
        assert!(out.contains(
            "GM_SHARED float gm_sim_shared_tile[16][TPB + 1]; auto& tile = gm_sim_shared_tile;\n"
        ));
        assert!(out.contains(
            "__shared__ volatile int gm_sim_shared_count; auto& count = gm_sim_shared_count; extern __shared__ float dynamic[];\n"
        ));
        // Left as written: two declarators; a comma (of a template) outside brackets.
        assert!(out.contains("    __shared__ int a[4], b[4];\n"));
        assert!(out.contains("    __shared__ gm_pair<int, int> pair;\n"));
        assert_eq!(out.lines().count(), code.lines().count());
    }

    #[test]
    fn helpers_and_declarations() {
        let code = "__device__ float twice(float x) { return 2 * x; }\n\
                    __global__ void k(float* p);\n\
                    __global__ void __launch_bounds__(256) k(float* p) { p[0] = twice(p[0]); syncthreads(); }\n";
        let out = rewrite(code).unwrap();
        // The helper keeps its plain `return`.
        assert!(out.contains("__device__ float twice(float x) { return 2 * x; }"));
        assert!(out.contains("__global__ gm_sim_task k(float* p);"));
        assert!(out.contains(
            "__global__ gm_sim_task __launch_bounds__(256) k(float* p) { co_await std::suspend_never{}; p[0]"
        ));
    }

    #[test]
    fn references_stay_out_where_code_could_tell() {
        for body in [
            "auto show = [=](int i) { a(i) = flag; };",
            "auto show = [flag](int i) { a(i) = flag; };",
            "decltype(flag) mine = flag;",
        ] {
            let code =
                format!("__global__ void k(gm_array<int, 1> a) {{ __shared__ int flag; {body} }}");
            let out = rewrite(&code).unwrap();
            assert!(out.contains("__shared__ int flag;"), "{body}: {out}");
            assert!(!out.contains("gm_sim_shared_flag"), "{body}");
        }
        // A subscript is not a lambda.
        let code = "__global__ void k(gm_array<int, 1> a) { __shared__ int s[4]; s[a(0)] = 1; }";
        assert!(
            rewrite(code)
                .unwrap()
                .contains("auto& s = gm_sim_shared_s;")
        );
    }

    #[test]
    fn linkage_and_characters() {
        // `extern "C"` on its own line: both words go, the line break stays.
        let code = "extern \"C\"\n__global__ void k() { syncthreads(); }\n";
        let out = rewrite(code).unwrap();
        assert_eq!(out.lines().count(), code.lines().count());
        assert!(!out.contains("extern") && !out.contains("\"C\""), "{out}");
        // A linkage block keeps C linkage: not rewritten.
        assert_eq!(
            rewrite("extern \"C\" {\n__global__ void k() { syncthreads(); }\n}\n"),
            None
        );
        // Non-ASCII names and text never split a character.
        let out = rewrite(
            "__global__ void k(gm_array<int, 1> a) { int größe = 1; /* ½ */ syncthreads(); a(0) = größe; }",
        )
        .unwrap();
        assert!(out.contains("int größe = 1; /* ½ */"));
        assert!(eligible(
            "__global__ void k() { int größe = 1; syncthreads(); }"
        ));
    }

    #[test]
    fn what_the_rewrite_refuses() {
        assert_eq!(rewrite("__device__ void f() {}"), None);
        assert_eq!(rewrite("__global__ int k() { return 1; }"), None);
        assert_eq!(rewrite("__global__ void k() { /* unterminated"), None);
        assert_eq!(rewrite("__global__ void k() { { }"), None);
        // A directive is not code: the kernel behind the macro is not found.
        assert_eq!(rewrite("#define K __global__ void \\\n  k()\nK {}"), None);
    }

    #[test]
    fn numbers_and_characters_are_not_identifiers() {
        let t = tokens("x = 1'000 + 'r' + 2e+5 + .5f; return").unwrap();
        let idents: Vec<&str> = t
            .iter()
            .filter(|t| t.ident)
            .map(|t| &"x = 1'000 + 'r' + 2e+5 + .5f; return"[t.start..t.end])
            .collect();
        assert_eq!(idents, ["x", "return"]);
    }

    #[test]
    fn barriers_and_collectives_called_directly_are_stackless() {
        assert!(eligible(TILED));
        for call in [
            "barrier(GM_FENCE_GLOBAL)",
            "p[0] = __shfl_down_sync(~0ull, p[0], 1)",
            "p[0] = __ballot_sync(~0ull, 1)",
            "p[0] = syncthreads_count(1)",
            "wavebarrier()",
            "__syncwarp()",
            "atomicAdd(p, 1)",
            "while (atomicCAS(p, 0, 1) != 0) __nanosleep(10)",
            "p[1] = atomicMax(&p[0], 3) + atomicInc((unsigned*)p, 9u)",
            "if (p[0] > 0 && atomicAdd(p, 1) == 0) p[1] = 1",
            "p[1] = p[0] > atomicMax(p, 2)",
            "p[1] = p[0] ? 1 : atomicAdd(p, 1)",
            "switch (p[0]) { case 0: atomicAdd(p, 1); }",
        ] {
            let code = format!("__global__ void k(int* p) {{ {call}; }}");
            assert!(eligible(&code), "{call}");
        }
        // Names that only contain a keyword's letters are names.
        assert!(eligible(
            "__global__ void k(int* p) { int co_ord = 1; syncthreads(); }"
        ));
        // No barrier at all: plain calls, not coroutines.
        assert!(!eligible("__global__ void k(float* p) { p[0] = 1; }"));
        for word in [
            "auto add = &atomicAdd",
            "(atomicAdd)(p, 1)",
            "gm_sim_rt.progress()",
            "p[0] = __shfl_sync<int>(~0ull, 1, 0)",
            "co_yield 1",
            "(syncthreads)()",
            "auto f = &syncthreads",
            "int barrier = 1",
            "q->barrier(1)",
            "q.atomicAdd(p, 1)",
            "::atomicAdd(p, 1)",
        ] {
            let code = format!("__global__ void k(int* p) {{ syncthreads(); {word}; }}");
            assert!(!eligible(&code), "{word}");
        }
        // In a helper function (declared before or after the kernel): not tried.
        for code in [
            "__device__ void add(int* p) { atomicAdd(p, 1); }\n__global__ void k(int* p) { syncthreads(); add(p); }",
            "__device__ void add(int* p);\n__global__ void k(int* p) { syncthreads(); add(p); }\n__device__ void add(int* p) { __syncwarp(); }",
        ] {
            assert!(!eligible(code), "{code}");
        }
        assert_eq!(
            why_not("__device__ void add(int* p) {\n atomicAdd(p, 1); }\n__global__ void k(int* p) { add(p); }")
                .as_deref(),
            Some("line 2: `atomicAdd` is called outside a `__global__` function (a helper cannot suspend)")
        );
        // A kernel declared first and defined later is still a kernel.
        assert!(eligible(
            "__global__ void k(int* p);\n__global__ void k(int* p) { atomicAdd(p, 1); }"
        ));
        // A macro could reach a function without a call the test sees.
        for define in ["#define CAS (atomicCAS)", "#define WAIT \\\n  syncthreads"] {
            let code =
                format!("{define}\n__global__ void k(int* p) {{ syncthreads(); CAS(p, 0, 1); }}");
            assert!(!eligible(&code), "{define}");
        }
    }
}
