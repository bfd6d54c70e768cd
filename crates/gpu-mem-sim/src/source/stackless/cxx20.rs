//! What a kernel may compute differently as C++20, the language clang's coroutines come with,
//! than as C++17, the language it is written in (and the one its ordinary build uses).
//!
//! Guarantee: [`why_not_as_cxx20`] names every kernel that uses what C++20 gave another meaning
//! among the changes a review found to compile both ways and print different results with clang
//! 14 and 16 (except those listed below); such a kernel runs on stacks when clang builds it. The
//! test is on the source text and conservative: a name in a comment keeps a kernel on stacks
//! too, which costs speed, never a result. `u8` literals, whose type C++20 changed, are kept
//! C++17's by `-fno-char8_t` (`compiler::standard`).
//!
//! Left to the documentation (`docs/src/backends/sim.md`): aggregates with a defaulted
//! constructor told apart by a detection template (`decltype(T{1, 2})`), a negative number
//! shifted left in a template argument, and a function template found by argument-dependent
//! lookup after an explicit template argument list.

use super::tokens::{Token, tokens};

/// Names whose meaning C++20 changed for a kernel, whole words anywhere in the source
/// (directives included): the language version and feature tests; constant evaluation (a
/// negative number shifted left became a constant expression); `std::pair` and `std::tuple`,
/// whose comparisons go through `<=>` in C++20 (a NaN, or an element type that converts to a
/// built-in one, compares differently).
const CHANGED_NAMES: [&str; 11] = [
    "__cplusplus",
    "__has_include",
    "__has_cpp_attribute",
    "is_constant_evaluated",
    "__builtin_is_constant_evaluated",
    "pair",
    "make_pair",
    "tuple",
    "make_tuple",
    "tie",
    "forward_as_tuple",
];

/// Prefixes of names whose value C++20 changed: feature-test macros, and the traits that
/// answer differently (aggregates with declared constructors are no longer aggregates; an
/// aggregate can be built with parentheses; a lambda without captures can be default-built and
/// assigned).
const CHANGED_PREFIXES: [&str; 9] = [
    "__cpp_",
    "is_aggregate",
    "is_constructible",
    "is_nothrow_constructible",
    "is_trivially_constructible",
    "is_default_constructible",
    "is_copy_assignable",
    "is_move_assignable",
    "is_assignable",
];

/// Why `code` might compute something else as C++20 than as C++17, naming the line, or `None`.
pub(crate) fn why_not_as_cxx20(code: &str) -> Option<String> {
    let line = |at: usize| code[..at].matches('\n').count() + 1;
    if let Some((at, word)) = words(code).find(|(_, w)| {
        CHANGED_NAMES.contains(w) || CHANGED_PREFIXES.iter().any(|p| w.starts_with(p))
    }) {
        return Some(format!(
            "line {}: `{word}` may mean something else in C++20",
            line(at)
        ));
    }
    let Some(toks) = tokens(code) else {
        return Some("a comment or literal does not end".into());
    };
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let adjacent = |k: usize| k + 1 < toks.len() && toks[k].end == toks[k + 1].start;
    for k in 0..toks.len() {
        // A comparison operator of the kernel's own: C++20 also tries `b == a` for `a == b`,
        // and `!(a == b)` for `a != b`, and may pick another overload.
        if toks[k].ident && text(k) == "operator" && k + 1 < toks.len() {
            let comparison = match text(k + 1) {
                "=" | "!" => adjacent(k + 1) && text(k + 2) == "=",
                // (`<<` and `>>` are shifts.)
                "<" | ">" => !(adjacent(k + 1) && text(k + 2) == text(k + 1)),
                _ => false,
            };
            if comparison {
                return Some(format!(
                    "line {}: a comparison operator is declared (C++20 rewrites comparisons)",
                    line(toks[k].start)
                ));
            }
        }
        // A reference to an array of unknown bound, `T (&a)[]`: in C++20 a sized array binds
        // to it, and overload resolution may pick it over a template.
        let unknown_bound = text(k) == "["
            && k + 1 < toks.len()
            && text(k + 1) == "]"
            && k > 0
            && text(k - 1) == ")"
            && opening(&toks, code, k - 1)
                .is_some_and(|open| open + 1 < toks.len() && text(open + 1) == "&");
        if unknown_bound {
            return Some(format!(
                "line {}: a reference to an array of unknown bound",
                line(toks[k].start)
            ));
        }
    }
    None
}

/// The `(` that the `)` at token `close` closes.
fn opening(toks: &[Token], code: &str, close: usize) -> Option<usize> {
    let mut depth = 0i32;
    (0..=close).rev().find(|&k| {
        match &code[toks[k].start..toks[k].end] {
            ")" => depth += 1,
            "(" => depth -= 1,
            _ => {}
        }
        depth == 0
    })
}

/// The whole words of `code` (runs of letters, digits and `_`) with their byte offsets.
fn words(code: &str) -> impl Iterator<Item = (usize, &str)> {
    let b = code.as_bytes();
    let name = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    (0..b.len())
        .filter(move |&i| name(b[i]) && (i == 0 || !name(b[i - 1])))
        .map(move |i| {
            let end = (i..b.len()).find(|&j| !name(b[j])).unwrap_or(b.len());
            (i, &code[i..end])
        })
}

#[cfg(test)]
mod tests {
    use super::why_not_as_cxx20;

    #[test]
    fn kernels_c_plus_plus_20_reads_otherwise_are_named() {
        let named = [
            // Rewritten comparisons.
            "bool operator==(const float3& a, float s) { return a.x == s; }",
            "bool operator !=(A a, long b);",
            "struct K { bool operator<(const K& o) const; };",
            "bool operator>=(A, A);",
            // Library comparisons through `<=>`, traits, constant evaluation, versions.
            "std::pair<float, int> a{x, 1};",
            "auto t = std::make_tuple(1, 2);",
            "if (std::is_constructible_v<T, A...>) {}",
            "static_assert(std::is_aggregate<S>::value);",
            "constexpr int f() { return __builtin_is_constant_evaluated() ? 1 : 2; }",
            "#if __cplusplus >= 202002L\n#endif",
            "#ifdef __cpp_concepts\n#endif",
            // A reference to an array of unknown bound.
            "void process(float (&a)[]);",
            "void f(int(&)[]);",
        ];
        for code in named {
            assert!(why_not_as_cxx20(code).is_some(), "{code}");
        }
        let plain = [
            "extern \"C\" __global__ void k(gm_array<float, 1> a) { a(0) = a(1) == a(2); }",
            "struct S { S& operator=(const S&) = default; S& operator+=(int); };",
            "int operator<<(A, int); int operator>>(A, int);",
            "extern __shared__ float dynamic[]; auto f = [](int i) { return i; };",
            "float (*p)[4] = nullptr; int pairs = 0; int tuples[3];",
            "syncthreads(); v = a[i] < b[j] ? 1 : 0;",
        ];
        for code in plain {
            assert_eq!(why_not_as_cxx20(code), None, "{code}");
        }
        assert_eq!(
            why_not_as_cxx20("int x;\nbool operator==(A, A);").as_deref(),
            Some("line 2: a comparison operator is declared (C++20 rewrites comparisons)")
        );
    }
}
