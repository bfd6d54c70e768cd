//! The variables in device memory a source defines at file scope: `__device__`, `__constant__`
//! and `__managed__` variables, which the host reads and writes by name
//! (`Device::copy_to_symbol`). Declarations with `extern` define nothing; `__shared__` ones are
//! per block, not device memory.

use super::functions::body_end;
use super::qualified;
use super::tokens::Token;

/// Where a variable lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemorySpace {
    /// `__device__`: global memory.
    Device,
    /// `__constant__`: constant memory (read-only in kernels).
    Constant,
    /// `__managed__`: managed memory.
    Managed,
}

/// A variable in device memory a source defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableDecl {
    /// Its name, qualified by its namespaces (`ns::table`).
    pub name: String,
    /// Where it lives.
    pub space: MemorySpace,
}

/// Words that start a declaration of something else than a variable.
const NOT_VARIABLES: [&str; 10] = [
    "struct",
    "class",
    "union",
    "enum",
    "typedef",
    "using",
    "template",
    "static_assert",
    "friend",
    "namespace",
];

/// The variables of `toks` (from `code`).
pub(super) fn variables(code: &str, toks: &[Token]) -> Option<Vec<VariableDecl>> {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let mut out = Vec::new();
    let mut scopes: Vec<Option<String>> = Vec::new();
    let mut start = 0;
    let mut depth = 0i32;
    let mut i = 0;
    while i < toks.len() {
        match text(i) {
            "(" | "[" => depth += 1,
            ")" | "]" => depth -= 1,
            ";" if depth == 0 => {
                out.extend(declared(code, toks, start, i, &scopes));
                start = i + 1;
            }
            "}" if depth == 0 => {
                scopes.pop()?;
                start = i + 1;
            }
            "{" if depth == 0 => {
                let head: Vec<&str> = (start..i).map(text).collect();
                match head[..] {
                    ["inline", "namespace", ..] | ["namespace", ..] | ["extern"] => {
                        let name = head
                            .iter()
                            .position(|w| *w == "namespace")
                            .map(|n| head[n + 1..].concat())
                            .filter(|name| !name.is_empty());
                        scopes.push(name);
                        start = i + 1;
                    }
                    _ => {
                        // A body, a class, or braces that initialise a variable: skipped whole;
                        // a variable's declaration goes on to its `;`.
                        let close = body_end(code, toks, i)?;
                        if !head.contains(&"=") && !is_variable_head(&head) {
                            start = close + 1;
                        }
                        i = close;
                    }
                }
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

/// Whether a head before `{` declares a variable with brace initialisation
/// (`__device__ int table[2] {1, 2}`): a memory space word, and no parameter list.
fn is_variable_head(head: &[&str]) -> bool {
    space_of(head).is_some() && !head.contains(&"(")
}

fn space_of(words: &[&str]) -> Option<MemorySpace> {
    if words.contains(&"__constant__") {
        Some(MemorySpace::Constant)
    } else if words.contains(&"__managed__") {
        Some(MemorySpace::Managed)
    } else if words.contains(&"__device__") {
        Some(MemorySpace::Device)
    } else {
        None
    }
}

/// The variables the declaration over tokens `start..end` (`end`: its `;`) defines.
fn declared(
    code: &str,
    toks: &[Token],
    start: usize,
    end: usize,
    scopes: &[Option<String>],
) -> Vec<VariableDecl> {
    let text = |k: usize| &code[toks[k].start..toks[k].end];
    let words: Vec<&str> = (start..end).map(text).collect();
    let Some(space) = space_of(&words) else {
        return Vec::new();
    };
    if words.is_empty()
        || NOT_VARIABLES.contains(&words[0])
        || words.contains(&"extern")
        || words.contains(&"__shared__")
    {
        return Vec::new();
    }
    // Declarators are split by commas outside brackets; each one's name is its last identifier
    // before its first `=`, `[` or `{` (or before its end), attributes' groups aside. Angle
    // brackets count only before that (after it, `<` may be a comparison).
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut name: Option<usize> = None;
    let mut named = false;
    for k in start..=end {
        let word = if k == end { ";" } else { text(k) };
        match word {
            "(" if depth == 0 && !named => {
                let attribute = name.is_some_and(|n| ATTRIBUTES.contains(&text(n)));
                if !attribute {
                    // A parameter list: a function, not a variable.
                    return Vec::new();
                }
                name = None;
                depth += 1;
            }
            "<" if !named => depth += 1,
            ">" if !named => depth -= 1,
            "(" | "[" | "{" => {
                named |= depth == 0;
                depth += 1;
            }
            ")" | "]" | "}" => depth -= 1,
            "=" if depth == 0 => named = true,
            "," | ";" if depth == 0 => {
                if let Some(n) = name {
                    out.push(VariableDecl {
                        name: qualified(scopes, text(n)),
                        space,
                    });
                }
                name = None;
                named = false;
            }
            _ if depth == 0 && !named && toks[k].ident && !is_keyword(word) => name = Some(k),
            _ => {}
        }
    }
    out
}

/// Words followed by a parenthesised group that is not a parameter list.
const ATTRIBUTES: [&str; 4] = ["__align__", "__attribute__", "alignas", "__declspec"];

/// Words of a declaration that are never its name.
fn is_keyword(word: &str) -> bool {
    matches!(
        word,
        "__device__"
            | "__constant__"
            | "__managed__"
            | "__host__"
            | "static"
            | "const"
            | "volatile"
            | "constexpr"
            | "inline"
            | "unsigned"
            | "signed"
            | "int"
            | "long"
            | "short"
            | "char"
            | "float"
            | "double"
            | "bool"
            | "void"
    )
}

#[cfg(test)]
mod tests {
    use super::super::tokens::tokens;
    use super::*;

    fn names(code: &str) -> Vec<(String, MemorySpace)> {
        let toks = tokens(code).unwrap();
        variables(code, &toks)
            .unwrap()
            .into_iter()
            .map(|v| (v.name, v.space))
            .collect()
    }

    #[test]
    fn device_constant_and_managed_variables_are_found() {
        let code = "#define N 4\n\
                    __constant__ float c_Kernel[N];\n\
                    __device__ unsigned int count = 0;\n\
                    __device__ float table[2] = {1, 2}, other;\n\
                    static __device__ __align__(16) float aligned[4];\n\
                    __managed__ int flag;\n\
                    extern __device__ int elsewhere;\n\
                    __shared__ float tile[16];\n\
                    __device__ int helper(int x) { return x; }\n\
                    __device__ int declared(int x);\n\
                    struct S { __device__ int member; };\n\
                    namespace ns { __constant__ double coeffs[3] {1, 2, 3}; }\n\
                    __global__ void k(float* p) { __shared__ float s[4]; static __device__ int no; }\n\
                    int host_value = 3;\n";
        assert_eq!(
            names(code),
            [
                ("c_Kernel".to_string(), MemorySpace::Constant),
                ("count".to_string(), MemorySpace::Device),
                ("table".to_string(), MemorySpace::Device),
                ("other".to_string(), MemorySpace::Device),
                ("aligned".to_string(), MemorySpace::Device),
                ("flag".to_string(), MemorySpace::Managed),
                ("ns::coeffs".to_string(), MemorySpace::Constant),
            ]
        );
    }

    #[test]
    fn unbalanced_sources_are_not_read() {
        let toks = tokens("__device__ int a[2;").unwrap();
        assert_eq!(variables("__device__ int a[2;", &toks), None);
    }
}
