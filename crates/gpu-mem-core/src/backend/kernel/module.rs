//! [`Module`]: one CUDA C++ source, compiled as one unit, as on a GPU: its kernels share its
//! `__device__` and `__constant__` variables.
//!
//! Contract:
//! * a module is its source text and the template instantiations it is compiled with (its name
//!   expressions, as NVRTC's `nvrtcAddNameExpression` takes them). Two modules of the same text
//!   and instantiations are the same module: every backend builds and loads it once per device,
//!   so kernels made from it at different places share its variables there;
//! * its kernels are the `__global__` functions it defines that are not templates, named as in
//!   the source (`extern "C"` or not, qualified by namespace), and its name expressions;
//! * its variables (`__device__`, `__constant__` and `__managed__` at file scope, variable
//!   templates' instantiations too) are reached by name through
//!   [`Device::copy_to_symbol`](crate::Device::copy_to_symbol) and friends, found in the
//!   compiled module.
//!
//! Depends on `scan` only. It knows nothing of [`Kernel`](super::Kernel): the kernels of a
//! module ([`Module::kernel`]) are made next to that type, in `definition`.

use super::scan;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

/// One kernel source and the template instantiations it is compiled with.
///
/// ```
/// use gpu_mem_core::Module;
/// const SRC: &str = r#"
/// __constant__ float scale[4];
/// template <typename T> __global__ void times(T* a, int n) { /* ... */ }
/// __global__ void plain(float* a) { /* ... */ }
/// "#;
/// let module = Module::from_source(SRC).with_name_expressions(["times<float>", "times<int>"]);
/// let times_f32 = module.kernel("times<float>");
/// let plain = module.kernel("plain"); // shares `scale` with the other two
/// assert_eq!(module.kernels(), ["plain", "times<float>", "times<int>"]);
/// ```
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

struct ModuleInner {
    code: String,
    /// Sorted, without duplicates.
    name_expressions: Vec<String>,
    /// A hash of the code and the name expressions (equality compares them too).
    key: u64,
    declared: OnceLock<Declarations>,
}

/// What the scan found, read once.
#[derive(Debug, Default)]
struct Declarations {
    kernels: Option<Vec<scan::KernelDecl>>,
}

impl fmt::Debug for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Module")
            .field("key", &format_args!("{:016x}", self.inner.key))
            .field("code_bytes", &self.inner.code.len())
            .field("name_expressions", &self.inner.name_expressions)
            .finish()
    }
}

impl PartialEq for Module {
    fn eq(&self, other: &Module) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
            || (self.inner.key == other.inner.key
                && self.inner.name_expressions == other.inner.name_expressions
                && self.inner.code == other.inner.code)
    }
}

impl Eq for Module {}

impl Hash for Module {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.key.hash(state);
    }
}

fn key_of(code: &str, name_expressions: &[String]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    code.hash(&mut hasher);
    name_expressions.hash(&mut hasher);
    hasher.finish()
}

impl Module {
    /// The module of `code` (CUDA C++ as NVRTC takes it; `#include "gpu_mem.h"` optional).
    pub fn from_source(code: impl Into<String>) -> Module {
        Module::new(code.into(), Vec::new())
    }

    fn new(code: String, mut name_expressions: Vec<String>) -> Module {
        name_expressions.sort();
        name_expressions.dedup();
        let key = key_of(&code, &name_expressions);
        Module {
            inner: Arc::new(ModuleInner {
                code,
                name_expressions,
                key,
                declared: OnceLock::new(),
            }),
        }
    }

    /// The same source, also compiled with these template instantiations
    /// (`"reduce<float, 256>"`), as NVRTC's name expressions spell them.
    pub fn with_name_expressions<I, S>(self, names: I) -> Module
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut all = self.inner.name_expressions.clone();
        all.extend(names.into_iter().map(|n| n.into().trim().to_string()));
        Module::new(self.inner.code.clone(), all)
    }

    /// The source text.
    pub fn code(&self) -> &str {
        &self.inner.code
    }

    /// The template instantiations it is compiled with, sorted.
    pub fn name_expressions(&self) -> &[String] {
        &self.inner.name_expressions
    }

    /// A hash of the source and name expressions: equal modules have equal keys.
    pub fn key(&self) -> u64 {
        self.inner.key
    }

    fn declared(&self) -> &Declarations {
        self.inner.declared.get_or_init(|| Declarations {
            kernels: scan::kernels(&self.inner.code),
        })
    }

    /// Its kernels: the `__global__` functions it defines that are not templates (each name
    /// once; overloaded names are left out, as no name alone picks one), then its name
    /// expressions. Empty when the source cannot be read ([`scan`]'s limits): then only its
    /// name expressions.
    pub fn kernels(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        if let Some(kernels) = &self.declared().kernels {
            for k in kernels.iter().filter(|k| !k.template) {
                let twice = kernels.iter().filter(|o| o.name == k.name).count() > 1;
                if !twice && !out.contains(&k.name) {
                    out.push(k.name.clone());
                }
            }
        }
        out.extend(
            self.inner
                .name_expressions
                .iter()
                .filter(|n| !out.contains(n))
                .cloned()
                .collect::<Vec<_>>(),
        );
        out
    }

    /// What messages call the module's source (compile errors name `<name>.cu`): its first
    /// kernel's name (of the first name expression if it defines none it can read), or
    /// `kernel`. It follows from the source, so every kernel of a module shares it.
    pub fn name(&self) -> &str {
        self.declared()
            .kernels
            .as_ref()
            .and_then(|k| k.first())
            .map(|k| k.name.as_str())
            .or_else(|| self.inner.name_expressions.first().map(String::as_str))
            .unwrap_or("kernel")
    }

    /// Whether the source defines a `__global__` function called `base` (qualified, template
    /// or not); `None` when the source cannot be read.
    pub fn defines_kernel(&self, base: &str) -> Option<bool> {
        self.declared()
            .kernels
            .as_ref()
            .map(|k| k.iter().any(|k| k.name == base))
    }

    /// Why `entry` cannot be launched from this module, if it cannot: not a name expression, a
    /// kernel the source does not define, or a template instantiation the module was not made
    /// with.
    pub fn check_entry(&self, entry: &str) -> std::result::Result<(), String> {
        if !scan::is_name_expression(entry) {
            return Err(format!(
                "`{entry}` is not a kernel name (a C++ name, with template arguments for a template kernel)"
            ));
        }
        let base = scan::entry_base(entry);
        let listed = || {
            let kernels = self.kernels();
            if kernels.is_empty() {
                "none".to_string()
            } else {
                kernels.join(", ")
            }
        };
        if self.defines_kernel(base) == Some(false) {
            return Err(format!(
                "the source defines no __global__ function `{base}` (its kernels: {})",
                listed()
            ));
        }
        let template = self
            .declared()
            .kernels
            .as_ref()
            .is_some_and(|k| k.iter().any(|k| k.name == base && k.template));
        let instantiated = self.inner.name_expressions.iter().any(|n| n == entry);
        if template && !instantiated {
            return Err(format!(
                "`{base}` is a template: launch an instantiation the module is made with (`{base}<...>`, Module::with_name_expressions); this module's kernels: {}",
                listed()
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "__constant__ float c[4];\n\
                       template <typename T> __global__ void t(T* a) {}\n\
                       __global__ void p(float* a) {}\n\
                       __global__ void o(float* a) {}\n\
                       __global__ void o(int* a) {}\n";

    #[test]
    fn equal_sources_and_instantiations_are_one_module() {
        let a = Module::from_source(SRC).with_name_expressions(["t<int>", "t<float>"]);
        let b = Module::from_source(SRC).with_name_expressions(["t<float>", " t<int>"]);
        assert_eq!(a, b);
        assert_eq!(a.key(), b.key());
        assert_ne!(a, Module::from_source(SRC));
        assert_eq!(a.kernels(), ["p", "t<float>", "t<int>"]);
    }

    #[test]
    fn entries_are_checked() {
        let m = Module::from_source(SRC).with_name_expressions(["t<int>"]);
        assert!(m.check_entry("p").is_ok());
        assert!(m.check_entry("t<int>").is_ok());
        let e = m.check_entry("t<float>").unwrap_err();
        assert!(e.contains("template"), "{e}");
        let e = m.check_entry("missing").unwrap_err();
        assert!(
            e.contains("no __global__ function `missing`") && e.contains("p, t<int>"),
            "{e}"
        );
        assert!(m.check_entry("p; evil").is_err());
    }
}
