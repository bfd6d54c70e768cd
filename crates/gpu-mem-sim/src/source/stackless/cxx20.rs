//! What a kernel may compute differently as C++20, the language clang's coroutines come with,
//! than as C++17, the language it is written in (and the one its ordinary build uses).
//!
//! Guarantee: [`why_not_as_cxx20`] names every kernel that uses what C++20 gave another meaning
//! among the changes two reviews found to compile both ways and print different results with
//! clang 14 and 16 (except those listed below); such a kernel runs on stacks when clang builds
//! it. The test is on the source text (code and directives, not comments or literals) and
//! conservative: a kernel merely naming `pair` or a trait stays on stacks too, which costs
//! speed, never a result. `u8` literals, whose type C++20 changed, are kept C++17's by
//! `-fno-char8_t` (`compiler::standard`).
//!
//! Left to the documentation (`docs/src/backends/sim.md`): aggregates with a defaulted
//! constructor told apart by a detection template (`decltype(T{1, 2})`), a negative number
//! shifted left in a template argument, and a function template found by argument-dependent
//! lookup after an explicit template argument list.

use gpu_mem_core::kernel::scan::tokens::{directives, tokens};

/// Names whose meaning C++20 changed for a kernel, as identifiers in code or words in
/// directives: the language version and feature tests; constant evaluation (a
/// negative number shifted left became a constant expression); `std::pair` and `std::tuple`,
/// which the prelude's headers declare and whose comparisons go through `<=>` in C++20 (a NaN,
/// or an element type that converts to a built-in one, compares differently); `not_eq`, which
/// spells `!=`; and functions C++20 added to `<cmath>` and `<numeric>` that a kernel's own
/// could lose to.
const CHANGED_NAMES: [&str; 17] = [
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
    "minmax",
    "not_eq",
    "is_pod",
    "is_pod_v",
    "lerp",
    "midpoint",
];

/// Parts of names whose value C++20 changed: feature-test macros (a prefix), and the traits and
/// compiler builtins that answer differently (aggregates with declared constructors are no
/// longer aggregates; an aggregate can be built with parentheses; a lambda without captures can
/// be default-built and assigned).
const CHANGED_PARTS: [&str; 4] = ["constructible", "assignable", "aggregate", "trivial"];

/// The library headers a kernel may include and still be built as C++20: the C library's, and
/// the parts of C++'s without comparisons or algorithms that C++20 changed. Any other (`<array>`,
/// `<algorithm>`, `<numeric>`, containers compared through `<=>`, algorithms that move their
/// accumulator) keeps a kernel on stacks.
const UNCHANGED_HEADERS: [&str; 14] = [
    "cstdint",
    "cstddef",
    "cmath",
    "cstring",
    "climits",
    "cfloat",
    "cstdio",
    "cstdlib",
    "cassert",
    "cinttypes",
    "limits",
    "type_traits",
    "new",
    "utility",
];

/// Why `code` might compute something else as C++20 than as C++17, naming the line, or `None`.
/// Names and operators count in code and in directives (a macro may declare an operator), not
/// in comments or literals.
pub(crate) fn why_not_as_cxx20(code: &str) -> Option<String> {
    let line = |at: usize| code[..at].matches('\n').count() + 1;
    let Some(toks) = tokens(code) else {
        return Some("a comment or literal does not end".into());
    };
    let directives = directives(code);
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let changed = |w: &str| {
        CHANGED_NAMES.contains(&w)
            || w.starts_with("__cpp_")
            || CHANGED_PARTS.iter().any(|part| w.contains(part))
    };
    let in_code = toks
        .iter()
        .filter(|t| t.ident)
        .map(|t| (t.start, &code[t.start..t.end]));
    let in_directives = directives
        .iter()
        .flat_map(|r| words(&code[r.clone()]).map(move |(at, w)| (r.start + at, w)));
    if let Some((at, word)) = in_code.chain(in_directives).find(|(_, w)| changed(w)) {
        return Some(format!(
            "line {}: `{word}` may mean something else in C++20",
            line(at)
        ));
    }
    // `operator` and what follows it, in code (tokens) and in directives (text).
    let after_operator = toks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.ident && &code[t.start..t.end] == "operator")
        .map(|(k, t)| (t.start, &code[toks.get(k + 1).map_or(t.end, |n| n.start)..]))
        .chain(directives.iter().flat_map(|r| {
            words(&code[r.clone()])
                .filter(|(_, w)| *w == "operator")
                .map(move |(at, w)| {
                    (
                        r.start + at,
                        code[r.start + at + w.len()..r.end].trim_start(),
                    )
                })
        }));
    for (at, rest) in after_operator {
        if is_comparison(rest) {
            return Some(format!(
                "line {}: a comparison operator is declared (C++20 rewrites comparisons)",
                line(at)
            ));
        }
    }
    if let Some((at, header)) = directives
        .iter()
        .find_map(|r| library_header(&code[r.clone()]).map(|h| (r.start, h)))
    {
        return Some(format!(
            "line {}: `<{header}>` may compare or compute otherwise in C++20",
            line(at)
        ));
    }
    // An array of unknown bound in a reference or pointer type (`T (&a)[]`, `int (*)[]`) or
    // named by a type alias (`typedef int U[];`): in C++20 a sized array binds to it, and
    // overload resolution may pick it over another function.
    let mut statement_start = 0;
    for k in 0..toks.len() {
        if matches!(text(k), ";" | "{" | "}") {
            statement_start = k + 1;
        }
        let empty = text(k) == "[" && k + 1 < toks.len() && text(k + 1) == "]";
        let alias = || {
            toks.get(statement_start)
                .is_some_and(|_| matches!(text(statement_start), "typedef" | "using"))
        };
        if empty && (k > 0 && text(k - 1) == ")" || alias()) {
            return Some(format!(
                "line {}: an array of unknown bound in a reference, pointer or alias",
                line(toks[k].start)
            ));
        }
    }
    None
}

/// Whether `rest`, what follows the word `operator`, names a comparison: `==`, `!=`, `<`, `<=`,
/// `>`, `>=` or `<=>` (not `<<` or `>>`), or `not_eq`.
fn is_comparison(rest: &str) -> bool {
    let b = rest.as_bytes();
    match b.first() {
        Some(b'=' | b'!') => b.get(1) == Some(&b'='),
        Some(&c @ (b'<' | b'>')) => b.get(1) != Some(&c),
        _ => {
            rest.starts_with("not_eq")
                && !rest[6..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
        }
    }
}

/// The header of a directive `#include <header>` that is not one of [`UNCHANGED_HEADERS`] or a
/// C header (`<math.h>`).
fn library_header(directive: &str) -> Option<&str> {
    let rest = directive.trim_start().strip_prefix('#')?;
    let rest = rest.trim_start().strip_prefix("include")?;
    let name = rest
        .trim_start()
        .strip_prefix('<')?
        .split('>')
        .next()?
        .trim();
    (!UNCHANGED_HEADERS.contains(&name) && !name.ends_with(".h")).then_some(name)
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

// Safe code only, so nothing for Miri to check (and text-heavy tests take minutes under it).
#[cfg(all(test, not(miri)))]
mod tests {
    use super::why_not_as_cxx20;

    #[test]
    fn kernels_c_plus_plus_20_reads_otherwise_are_named() {
        let named = [
            // Rewritten comparisons, in code or in a macro's body.
            "bool operator==(const float3& a, float s) { return a.x == s; }",
            "bool operator !=(A a, long b);",
            "struct K { bool operator<(const K& o) const; };",
            "bool operator>=(A, A);",
            "auto operator<=>(const A&) const = default;",
            "bool operator\n<(A, A);",
            "#define OPS(T) \\\n  friend bool operator==(const T& a, const T& b) { return a.x == b.x; }\nstruct V { OPS(V) };",
            "bool operator not_eq(A, A);",
            // Library comparisons through `<=>`, headers, traits, constant evaluation, versions.
            "std::pair<float, int> a{x, 1};",
            "auto t = std::make_tuple(1, 2);",
            "auto m = std::minmax(a, b);",
            "#include <array>\n",
            "#include <algorithm>\n",
            "  #  include < numeric >\n",
            "if (std::is_constructible_v<T, A...>) {}",
            "static_assert(std::is_aggregate<S>::value);",
            "static_assert(std::is_trivially_default_constructible_v<L>);",
            "static_assert(std::is_nothrow_move_assignable<L>::value);",
            "static_assert(__is_aggregate(A));",
            "static_assert(std::is_pod<A>::value);",
            "constexpr int f() { return __builtin_is_constant_evaluated() ? 1 : 2; }",
            "#if __cplusplus >= 202002L\n#endif",
            "#ifdef __cpp_concepts\n#endif",
            "float y = lerp(a, b, t);",
            // Arrays of unknown bound in references, pointers and aliases.
            "void process(float (&a)[]);",
            "void f(int(&)[]);",
            "void h(int (*)[]);",
            "typedef int U[];",
            "using U = int[];",
        ];
        for code in named {
            assert!(why_not_as_cxx20(code).is_some(), "{code}");
        }
        let plain = [
            "#include \"gpu_mem.h\"\n#include <cstdint>\n#include <math.h>\n#include <utility>\n\
             extern \"C\" __global__ void k(gm_array<float, 1> a) { a(0) = a(1) == a(2); }",
            "struct S { S& operator=(const S&) = default; S& operator+=(int); };",
            "int operator<<(A, int); int operator>>(A, int); V operator->();",
            "extern __shared__ float dynamic[]; auto f = [](int i) { return i; };",
            "float (*p)[4] = nullptr; int pairs = 0; int tuples[3]; delete[] p;",
            "syncthreads(); v = a[i] < b[j] ? 1 : 0; int operators = 2;",
            "__device__ void f(int a[]) {}",
            // Comments and literals do not count.
            "// aggregate the partial sums (trivially constructible)\n/* operator== */ int x;",
            "const char* s = \"pair<int, int> and operator<\";",
        ];
        for code in plain {
            assert_eq!(why_not_as_cxx20(code), None, "{code}");
        }
        assert_eq!(
            why_not_as_cxx20("int x;\nbool operator==(A, A);").as_deref(),
            Some("line 2: a comparison operator is declared (C++20 rewrites comparisons)")
        );
        assert_eq!(
            why_not_as_cxx20("#include \"gpu_mem.h\"\n#include <vector>\n").as_deref(),
            Some("line 2: `<vector>` may compare or compute otherwise in C++20")
        );
    }
}
