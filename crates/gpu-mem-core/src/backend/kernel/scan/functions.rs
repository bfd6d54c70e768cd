//! The functions a kernel source declares at file scope (inside namespaces too): kernels,
//! `__device__` helpers and the rest, each with its name, namespace, whether it is a template,
//! its return type and body as token ranges; and which helpers wait (call a barrier,
//! collective, atomic or spin hint, or another helper that does), which the simulator's
//! stackless rewrite makes coroutines as it does the kernels.
//!
//! The scan reads declarations, not C++: whatever it does not understand (an `operator`, a
//! qualified name, a trailing or deduced return type) leaves the name or return type unknown,
//! and a helper that waits and is not understood keeps the kernel on stacks.

use super::tokens::{Token, is_name_byte};
use std::collections::BTreeSet;

/// What a function is to the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `__global__`: a kernel.
    Kernel,
    /// `__device__` (or `GM_DEVICE`) and not `__global__`: a helper.
    Device,
    /// Anything else with a parameter list (a host function, say).
    Other,
}

/// A function declared or defined at file scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Kernel, helper or other.
    pub kind: Kind,
    /// The first token of its declaration.
    pub start: usize,
    /// The token of its name (the identifier before its parameter list), when plain.
    pub name: Option<usize>,
    /// Its return type's first and last token, when it is one a `gm_sim_sub<...>` can wrap.
    pub returns: Option<(usize, usize)>,
    /// The `{` and `}` of its body; `None` for a declaration.
    pub body: Option<(usize, usize)>,
    /// Whether it is a template (`template <...>` before it).
    pub template: bool,
    /// The names of the namespaces around it, outermost first (`None`: an anonymous one or a
    /// linkage block, which add nothing to a qualified name).
    pub namespace: Vec<Option<String>>,
}

/// Words of a declaration that are not part of its return type.
const SPECIFIERS: [&str; 10] = [
    "extern",
    "__device__",
    "__host__",
    "__global__",
    "__forceinline__",
    "__noinline__",
    "GM_DEVICE",
    "inline",
    "static",
    "constexpr",
];

/// Words followed by a parenthesised group that is not the parameter list.
const ATTRIBUTES: [&str; 4] = [
    "__launch_bounds__",
    "__attribute__",
    "alignas",
    "__declspec",
];

/// The file-scope functions of `toks` (from `code`), in source order; `None` when a brace or
/// parenthesis does not close.
pub fn functions(code: &str, toks: &[Token]) -> Option<Vec<Function>> {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let mut out = Vec::new();
    // The first token of the declaration being read.
    let mut start = 0;
    let mut depth = 0i32;
    // Namespaces and linkage blocks open around the declaration, by name.
    let mut scopes: Vec<Option<String>> = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        match text(i) {
            "(" => depth += 1,
            ")" => depth -= 1,
            ";" if depth == 0 => {
                if let Some(f) = function(code, toks, start, i, None, &scopes) {
                    out.push(f);
                }
                start = i + 1;
            }
            "}" if depth == 0 => {
                scopes.pop()?;
                start = i + 1;
            }
            "{" if depth == 0 => {
                let head: Vec<&str> = (start..i).map(text).collect();
                let namespace = match head[..] {
                    ["inline", "namespace", ..] | ["namespace", ..] => head
                        .iter()
                        .all(|w| *w == ":" || w.bytes().all(is_name_byte)),
                    ["extern"] => true,
                    _ => false,
                };
                if namespace {
                    // Its declarations are at file scope too (a linkage block's kernels are
                    // found, and the rewrite leaves such a source alone).
                    // `namespace a::b {` is two at once, named together.
                    let name = head
                        .iter()
                        .position(|w| *w == "namespace")
                        .map(|n| head[n + 1..].concat())
                        .filter(|name| !name.is_empty());
                    scopes.push(name);
                    start = i + 1;
                    i += 1;
                    continue;
                }
                let close = body_end(code, toks, i)?;
                if let Some(f) = function(code, toks, start, i, Some((i, close)), &scopes) {
                    out.push(f);
                    start = close + 1;
                } else if !has_initializer(code, &toks[start..i]) {
                    // A class, struct, union or enum: what it declares is not at file scope.
                    start = close + 1;
                }
                i = close + 1;
                continue;
            }
            _ => {}
        }
        if depth < 0 {
            return None;
        }
        i += 1;
    }
    (depth == 0 && scopes.is_empty()).then_some(out)
}

/// The function whose declaration runs over tokens `start..end` (`end`: its `;` or body's
/// `{`), or `None` when it declares something else.
fn function(
    code: &str,
    toks: &[Token],
    start: usize,
    end: usize,
    body: Option<(usize, usize)>,
    namespace: &[Option<String>],
) -> Option<Function> {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    if start >= end
        || matches!(
            text(start),
            "struct" | "class" | "union" | "enum" | "typedef" | "using"
        )
    {
        return None;
    }
    let after_template = template_prefix_end(code, toks, start, end)?;
    let head = &toks[after_template..end];
    if has_initializer(code, head) {
        return None;
    }
    // The parameter list: the first group in parentheses that is not an attribute's.
    let mut k = after_template;
    let params = loop {
        if k >= end {
            return None; // no parameter list: a variable
        }
        if text(k) == "(" {
            let close = group_end(code, toks, k, end)?;
            let attribute = k > after_template && ATTRIBUTES.contains(&text(k - 1));
            if !attribute {
                break (k, close);
            }
            k = close + 1;
            continue;
        }
        k += 1;
    };
    let words = |w: &str| (after_template..params.0).any(|j| toks[j].ident && text(j) == w);
    let kind = if words("__global__") {
        Kind::Kernel
    } else if words("__device__") || words("GM_DEVICE") {
        Kind::Device
    } else {
        Kind::Other
    };
    let before = params.0.checked_sub(1).filter(|&n| n >= after_template);
    let name = before.filter(|&n| {
        toks[n].ident
            && text(n) != "operator"
            && !ATTRIBUTES.contains(&text(n))
            && !(n > 0 && text(n - 1) == ":")
    });
    let returns = name.and_then(|n| return_type(code, toks, after_template, n, params.1, end));
    Some(Function {
        kind,
        start,
        name,
        returns,
        body,
        template: after_template > start,
        namespace: namespace.to_vec(),
    })
}

/// The first and last token of the return type between `from` and the name at `name`: the
/// tokens that are neither specifiers nor attributes, one run of them. `None` when there are
/// none, or when it is deduced (`auto`) or trailing (`->` after the parameter list, which ends
/// at `params_close`), which a `gm_sim_sub<...>` cannot wrap.
fn return_type(
    code: &str,
    toks: &[Token],
    from: usize,
    name: usize,
    params_close: usize,
    end: usize,
) -> Option<(usize, usize)> {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    if (params_close..end).any(|j| text(j) == "-" && j + 1 < end && text(j + 1) == ">") {
        return None;
    }
    let mut run: Option<(usize, usize)> = None;
    let mut k = from;
    while k < name {
        let word = text(k);
        if toks[k].ident && ATTRIBUTES.contains(&word) {
            k = group_end(code, toks, k + 1, name)? + 1;
            continue;
        }
        if !(toks[k].ident && SPECIFIERS.contains(&word)) {
            if word == "auto" {
                return None;
            }
            run = match run {
                None => Some((k, k)),
                Some((first, last)) if last + 1 == k => Some((first, k)),
                Some(_) => return None, // specifiers between parts of the type
            };
        }
        k += 1;
    }
    run
}

/// The token after a `template <...>` that starts at `start`, or `start` when there is none.
fn template_prefix_end(code: &str, toks: &[Token], start: usize, end: usize) -> Option<usize> {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    if text(start) != "template" {
        return Some(start);
    }
    let mut angles = 0i32;
    for k in start + 1..end {
        match text(k) {
            "<" => angles += 1,
            ">" => {
                angles -= 1;
                if angles == 0 {
                    return Some(k + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether `head` has an `=` outside parentheses and angle brackets (an initializer: the
/// braces after it are a value, not a body). The name of an operator function (`operator==`,
/// `operator<=`, `operator+=`) is not one, and inside parentheses `<` and `>` are comparisons
/// as often as brackets (`f(bool b = 1 > 2, int c = 3)`), so they count only outside them.
fn has_initializer(code: &str, head: &[Token]) -> bool {
    let text = |k: usize| &code[head[k].start..head[k].end];
    let (mut parens, mut angles) = (0i32, 0i32);
    let mut k = 0;
    while k < head.len() {
        match text(k) {
            "operator" => k = operator_name_end(code, head, k),
            "(" => parens += 1,
            ")" => parens -= 1,
            "<" if parens == 0 => angles += 1,
            ">" if parens == 0 => angles -= 1,
            "=" if parens <= 0 && angles <= 0 => return true,
            _ => {}
        }
        k += 1;
    }
    false
}

/// The last token of the operator function name that starts with `operator` at token `at`: the
/// operator's punctuation (at most three characters, `<<=`, `->*`, `new[]` being `new` and two),
/// `operator()` taking its `()`, or `at` itself for a conversion (`operator int`) or a name that
/// does not go on.
fn operator_name_end(code: &str, toks: &[Token], at: usize) -> usize {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    if at + 2 < toks.len() && text(at + 1) == "(" && text(at + 2) == ")" {
        return at + 2;
    }
    let mut k = at;
    while k + 1 < toks.len()
        && k < at + 3
        && matches!(
            text(k + 1),
            "+" | "-"
                | "*"
                | "/"
                | "%"
                | "^"
                | "&"
                | "|"
                | "~"
                | "!"
                | "="
                | "<"
                | ">"
                | "["
                | "]"
                | ","
        )
    {
        k += 1;
    }
    k
}

/// The `)` that closes the `(` at token `open`, before `end`.
fn group_end(code: &str, toks: &[Token], open: usize, end: usize) -> Option<usize> {
    closing(code, toks, open, end, ("(", ")"))
}

/// The `}` that closes the `{` at token `open`; `None` when the source ends first.
pub fn body_end(code: &str, toks: &[Token], open: usize) -> Option<usize> {
    closing(code, toks, open, toks.len(), ("{", "}"))
}

/// The `]` that closes the `[` at token `open`; `None` when the source ends first.
pub fn bracket_end(code: &str, toks: &[Token], open: usize) -> Option<usize> {
    closing(code, toks, open, toks.len(), ("[", "]"))
}

/// The token that closes the bracket at token `open` (`opens`, closed by `closes`), before
/// `end`.
fn closing(
    code: &str,
    toks: &[Token],
    open: usize,
    end: usize,
    (opens, closes): (&str, &str),
) -> Option<usize> {
    let mut depth = 0i32;
    for (k, t) in toks.iter().enumerate().take(end).skip(open) {
        let word = &code[t.start..t.end];
        if word == opens {
            depth += 1;
        } else if word == closes {
            depth -= 1;
            if depth == 0 {
                return Some(k);
            }
        }
    }
    None
}

/// The `(` of the plain call of the name at token `i`: the next token is `(`, and it is not a
/// member (`.barrier(`, `->barrier(`) or qualified (`::atomicAdd(`), where the macro would not
/// apply cleanly. (A name in parentheses, `(syncthreads)()`, or taken by address,
/// `&syncthreads`, is not called: the next token is not `(`. A call after `&&`, `>` or a `?:`'s
/// `:` is a call.) With `template_arguments`, a call with explicit template arguments
/// (`warp_sum<int>(v)`) is one too: for helpers (the macros of the barrier names apply only to a
/// `(` right after the name).
pub fn call_open(code: &str, toks: &[Token], i: usize, template_arguments: bool) -> Option<usize> {
    let text = |t: &Token| &code[t.start..t.end];
    let mut open = i + 1;
    if template_arguments && toks.get(open).is_some_and(|t| text(t) == "<") {
        let (mut angles, mut parens) = (0i32, 0i32);
        loop {
            match text(toks.get(open)?) {
                "(" => parens += 1,
                ")" => parens -= 1,
                "<" if parens == 0 => angles += 1,
                ">" if parens == 0 => {
                    angles -= 1;
                    if angles == 0 {
                        break;
                    }
                }
                ";" | "{" | "}" => return None,
                _ => {}
            }
            open += 1;
        }
        open += 1;
    }
    let called = toks.get(open).is_some_and(|next| text(next) == "(");
    let token = |back: usize| i.checked_sub(back).and_then(|p| toks.get(p));
    let pair = |first: &str, second: &str| {
        token(1).is_some_and(|b| text(b) == second)
            && token(2)
                .is_some_and(|a| text(a) == first && a.end == token(1).map_or(0, |b| b.start))
    };
    let named = token(1).is_some_and(|prev| text(prev) == ".") || pair("-", ">") || pair(":", ":");
    (called && !named).then_some(open)
}

/// The `)` that closes the call whose `(` is token `open`.
pub fn call_end(code: &str, toks: &[Token], open: usize) -> Option<usize> {
    group_end(code, toks, open, toks.len())
}

/// The names of the helpers that wait: `__device__` functions whose body calls one of
/// `suspending`, or another such helper.
pub fn waiting_helpers<'c>(
    code: &'c str,
    toks: &[Token],
    functions: &[Function],
    suspending: &[&str],
) -> BTreeSet<&'c str> {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let mut waiting: BTreeSet<&'c str> = BTreeSet::new();
    loop {
        let before = waiting.len();
        for f in functions {
            let (Kind::Device, Some(name), Some((open, close))) = (f.kind, f.name, f.body) else {
                continue;
            };
            if waiting.contains(text(name)) {
                continue;
            }
            let calls = (open..close).any(|k| {
                let word = text(k);
                toks[k].ident
                    && (suspending.contains(&word)
                        && toks
                            .get(k + 1)
                            .is_some_and(|n| &code[n.start..n.end] == "(")
                        || waiting.contains(word) && call_open(code, toks, k, true).is_some())
            });
            if calls {
                waiting.insert(text(name));
            }
        }
        if waiting.len() == before {
            return waiting;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tokens::tokens;
    use super::*;

    /// (kind, name, return type, whether defined) of each function of `code`.
    fn scan(code: &str) -> Vec<(Kind, Option<String>, Option<String>, bool)> {
        let toks = tokens(code).unwrap();
        let text = |a: usize, b: usize| code[toks[a].start..toks[b].end].to_string();
        functions(code, &toks)
            .unwrap()
            .into_iter()
            .map(|f| {
                (
                    f.kind,
                    f.name.map(|n| text(n, n)),
                    f.returns.map(|(a, b)| text(a, b)),
                    f.body.is_some(),
                )
            })
            .collect()
    }

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    /// Operator functions, and a default argument holding `>`, are functions, not variables
    /// with an initializer: the kernel after them is found (it was not, and ran on fibers).
    #[test]
    #[cfg_attr(miri, ignore = "safe code only, slow under Miri: run natively")]
    fn operator_functions_do_not_hide_the_kernel_after_them() {
        let code = "#include \"gpu_mem.h\"\n\
                    __device__ bool operator==(const V& a, float s) { return a.x == s; }\n\
                    __device__ bool operator!=(V a, V b) { return !(a == b); }\n\
                    __device__ V& operator+=(V& a, V b) { a.x += b.x; return a; }\n\
                    __device__ bool operator<=(V a, V b) { return a.x <= b.x; }\n\
                    __device__ bool operator>(V a, V b) { return a.x > b.x; }\n\
                    __device__ int operator<<(V a, int s) { return a.x << s; }\n\
                    __device__ float operator()(int i);\n\
                    __device__ V operator-(V a) { return a; }\n\
                    __device__ int pick(bool b = 1 > 2, int c = 3) { return b ? c : 0; }\n\
                    __device__ int counter = 0;\n\
                    __device__ float table[2] = {1, 2};\n\
                    extern \"C\" __global__ void k(float* p) { p[0] = 1; }\n";
        let found = scan(code);
        assert_eq!(found.len(), 10, "{found:?}");
        assert_eq!(found[8], (Kind::Device, some("pick"), some("int"), true));
        assert!(
            found[..8]
                .iter()
                .all(|(kind, name, _, _)| *kind == Kind::Device && name.is_none()),
            "{found:?}"
        );
        assert_eq!(found[9], (Kind::Kernel, some("k"), some("void"), true));
    }

    #[test]
    fn declarations_are_read_for_kind_name_and_return_type() {
        let code = "#include \"gpu_mem.h\"\n\
                    struct pair { int a; __device__ int sum() { return a; } };\n\
                    __device__ int counter = 0;\n\
                    __device__ float table[2] = {1, 2};\n\
                    template <typename T, int N = (3)>\n\
                    static __device__ __forceinline__ T warp_sum(T v) { return v; }\n\
                    __device__ unsigned long long wide(int x);\n\
                    GM_DEVICE const float& at(const float* p, int i = 0) { return p[i]; }\n\
                    namespace inner { __device__ void nested() {} }\n\
                    __device__ auto deduced() { return 1; }\n\
                    __device__ int trailing() -> int;\n\
                    __device__ int pair::member() { return 1; }\n\
                    int host(int x) { return x; }\n\
                    extern \"C\" __global__ void __launch_bounds__(256) k(float* p) { p[0] = 1; }\n";
        assert_eq!(
            scan(code),
            vec![
                (Kind::Device, some("warp_sum"), some("T"), true),
                (
                    Kind::Device,
                    some("wide"),
                    some("unsigned long long"),
                    false
                ),
                (Kind::Device, some("at"), some("const float&"), true),
                (Kind::Device, some("nested"), some("void"), true),
                (Kind::Device, some("deduced"), None, true),
                (Kind::Device, some("trailing"), None, false),
                (Kind::Device, None, None, true),
                (Kind::Other, some("host"), some("int"), true),
                (Kind::Kernel, some("k"), some("void"), true),
            ]
        );
    }

    #[test]
    fn unbalanced_sources_are_not_read() {
        for code in [
            "__device__ void f( {",
            "void f() { }}",
            "__device__ void f() {",
        ] {
            let toks = tokens(code).unwrap();
            assert_eq!(functions(code, &toks), None, "{code}");
        }
    }

    #[test]
    fn helpers_that_wait_include_those_calling_them() {
        let code = "__device__ int leaf(int v) { return __shfl_down_sync(~0ull, v, 1); }\n\
                    __device__ int middle(int v) { return leaf(v) + 1; }\n\
                    __device__ int top(int v) { return middle(v); }\n\
                    __device__ int plain(int v) { int leaf = 1; return v + leaf; }\n\
                    __global__ void k(int* p) { p[0] = top(p[0]); }\n";
        let toks = tokens(code).unwrap();
        let fns = functions(code, &toks).unwrap();
        let waiting = waiting_helpers(code, &toks, &fns, &["__shfl_down_sync"]);
        assert_eq!(
            waiting.into_iter().collect::<Vec<_>>(),
            ["leaf", "middle", "top"]
        );
    }
}
