//! A declaration-level reader of CUDA C++ kernel sources: what every backend needs to know of a
//! source without compiling it — the kernels it defines and (for the simulator's stackless
//! rewrite) its functions' names, return types and bodies as token ranges.
//!
//! Contract:
//! * it reads declarations, not C++: comments, literals and preprocessor lines are skipped, so a
//!   kernel made by a macro is not seen (backends that need the list preprocess the source
//!   first, as the simulator does);
//! * whatever it does not understand gives `None` or leaves a name out; it never panics on any
//!   input (property-tested);
//! * names are qualified by the namespaces around them (`ns::kernel`), as NVRTC's name
//!   expressions and C++ spell them.

pub mod functions;
pub mod tokens;

use functions::{Kind, functions};
use tokens::tokens;

/// A kernel (`__global__` function) a source defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelDecl {
    /// Its name, qualified by its namespaces (`ns::kernel`).
    pub name: String,
    /// Whether it is a template: it is launched by an instantiation (`kernel<float, 256>`).
    pub template: bool,
}

/// The qualified name of `name` declared inside `namespace` (outermost first).
pub(crate) fn qualified(namespace: &[Option<String>], name: &str) -> String {
    let mut out = String::new();
    for part in namespace.iter().flatten() {
        out.push_str(part);
        out.push_str("::");
    }
    out.push_str(name);
    out
}

/// The kernels `code` defines (with a body), in source order; `None` when the source cannot be
/// read (an unterminated comment or literal, an unbalanced brace or parenthesis).
pub fn kernels(code: &str) -> Option<Vec<KernelDecl>> {
    let toks = tokens(code)?;
    let fns = functions(code, &toks)?;
    Some(
        fns.iter()
            .filter(|f| f.kind == Kind::Kernel && f.body.is_some())
            .filter_map(|f| {
                let n = f.name?;
                Some(KernelDecl {
                    name: qualified(&f.namespace, &code[toks[n].start..toks[n].end]),
                    template: f.template,
                })
            })
            .collect(),
    )
}

/// A name expression split into its kernel (qualified, without a leading `::`) and its
/// template arguments (`<...>`, or empty).
fn split_name(name: &str) -> (&str, &str) {
    let name = name.trim();
    let name = name.strip_prefix("::").unwrap_or(name);
    match name.find('<') {
        Some(open) => (name[..open].trim_end(), &name[open..]),
        None => (name, ""),
    }
}

/// The kernel a name expression names, without template arguments or a leading `::`
/// (`ns::reduce<float, 256>` → `ns::reduce`).
pub fn entry_base(name: &str) -> &str {
    split_name(name).0
}

/// Whether `name` may be a kernel's name expression: a C++ qualified identifier, optionally with
/// template arguments made of identifiers, numbers, types and the punctuation they need. It is
/// pasted into generated code, so statements, braces, comments, literals and directives are
/// refused.
pub fn is_name_expression(name: &str) -> bool {
    let (base, arguments) = split_name(name);
    let identifier = |part: &str| {
        let mut chars = part.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let mut depth = 0i32;
    let balanced = arguments.chars().all(|c| {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ => {}
        }
        depth >= 0
    }) && depth == 0;
    let allowed = |c: char| c.is_ascii_alphanumeric() || " _:<>,*&().+-".contains(c);
    !base.is_empty()
        && base.split("::").all(identifier)
        && arguments.chars().all(allowed)
        && balanced
        && (arguments.is_empty() || arguments.ends_with('>'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_are_found_with_namespaces_and_templates() {
        let code = "#include <cuda_runtime.h>\n\
                    __device__ float helper(float x) { return x; }\n\
                    extern \"C\" __global__ void plain(float* p) { p[0] = 1; }\n\
                    __global__ void mangled(int* p, int n) {}\n\
                    template <typename T, int N>\n\
                    __global__ void reduce(const T* in, T* out) {}\n\
                    namespace outer { namespace inner {\n\
                    __global__ void nested() {}\n\
                    } }\n\
                    namespace a::b { __global__ void deep() {} }\n\
                    namespace { __global__ void hidden() {} }\n\
                    __global__ void declared_only(int* p);\n";
        let found = kernels(code).unwrap();
        let names: Vec<(&str, bool)> = found
            .iter()
            .map(|k| (k.name.as_str(), k.template))
            .collect();
        assert_eq!(
            names,
            [
                ("plain", false),
                ("mangled", false),
                ("reduce", true),
                ("outer::inner::nested", false),
                ("a::b::deep", false),
                ("hidden", false),
            ]
        );
    }

    #[test]
    fn name_expressions() {
        for good in [
            "vectorAdd",
            "reduce<float, 256>",
            "ns::reduce<unsigned int, 128, true>",
            "::k",
            "k<float4>",
            "k<(2 * 64)>",
            "k<int, -1>",
        ] {
            assert!(is_name_expression(good), "{good}");
        }
        for bad in [
            "",
            "k(); evil",
            "k<int>>",
            "k<int",
            "2k",
            "k /* x */",
            "k<\"s\">",
            "k\n#include <x>",
            "k{}",
            "a::",
        ] {
            assert!(!is_name_expression(bad), "{bad}");
        }
        assert_eq!(entry_base("ns::reduce<float, 256>"), "ns::reduce");
        assert_eq!(entry_base("::k"), "k");
    }
}
