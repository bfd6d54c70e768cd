//! Which kernels a module defines, as the compiler will see them: the kernel's
//! source is preprocessed with the prelude in scan mode (conditional code resolved, macros
//! expanded, CUDA's declaration words kept), and the parts that come from the kernel's own file
//! are read by `gpu_mem_core`'s declaration scanner. Kernels in headers it includes are not
//! entry points; a kernel that is a template is one only through the module's name
//! expressions.

use super::compiler::{CompileFailure, Compiler};
use gpu_mem_core::kernel::scan;
use std::path::Path;

/// A module's entry points.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Declared {
    /// Kernels launched by name: plain `__global__` functions (each name once), then the
    /// module's name expressions.
    pub(crate) kernels: Vec<String>,
}

/// The declarations of `unit` (the kernel's code after `#line 1 "<file>"`), preprocessed by
/// `compiler` in `scratch`, plus the name expressions.
pub(crate) fn declared(
    compiler: &Compiler,
    scratch: &Path,
    include: &Path,
    unit: &str,
    file: &str,
    name_expressions: &[String],
) -> Result<Declared, CompileFailure> {
    let path = scratch.join("scan.cpp");
    std::fs::write(&path, unit)
        .map_err(|e| CompileFailure::DidNotRun(format!("cannot write {}: {e}", path.display())))?;
    let text = compiler.preprocess(&path, include)?;
    Ok(read(&own_text(&text, file), name_expressions))
}

/// The kernels of preprocessed text.
pub(crate) fn read(text: &str, name_expressions: &[String]) -> Declared {
    let mut kernels: Vec<String> = Vec::new();
    if let Some(found) = scan::kernels(text) {
        for k in found.iter().filter(|k| !k.template) {
            let overloaded = found.iter().filter(|o| o.name == k.name).count() > 1;
            if !overloaded && !kernels.contains(&k.name) {
                kernels.push(k.name.clone());
            }
        }
    }
    for name in name_expressions {
        if !kernels.contains(name) {
            kernels.push(name.clone());
        }
    }
    Declared { kernels }
}

/// The lines of preprocessor output that come from `file`: after a line marker naming it (GCC
/// and clang write `# <line> "<file>" [flags]`), up to the next marker naming another file.
pub(crate) fn own_text(preprocessed: &str, file: &str) -> String {
    let quoted = format!("\"{file}\"");
    let mut out = String::new();
    let mut inside = false;
    for line in preprocessed.lines() {
        let trimmed = line.trim_start();
        if let Some(marker) = trimmed.strip_prefix('#') {
            let marker = marker.trim_start();
            let marker = marker.strip_prefix("line").unwrap_or(marker).trim_start();
            if marker.starts_with(|c: char| c.is_ascii_digit()) {
                inside = marker
                    .split_once(' ')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with(&quoted));
                continue;
            }
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

// Safe code only, so nothing for Miri to check (and text-heavy tests take minutes under it).
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn only_the_kernels_own_lines_are_read() {
        let text = "# 1 \"kernel.cpp\"\n\
                    # 1 \"include/gpu_mem.h\" 1\n\
                    __global__ void prelude_kernel() {}\n\
                    # 3 \"k.cu\"\n\
                    __constant__ float c[4];\n\
                    # 1 \"include/other.h\" 1\n\
                    __global__ void header_kernel() {}\n\
                    # 5 \"k.cu\" 2\n\
                    __global__ void mine(float* p) {}\n\
                    template <class T> __global__ void t(T* p) {}\n\
                    __global__ void twice(int) {}\n\
                    __global__ void twice(float) {}\n";
        let own = own_text(text, "k.cu");
        assert!(!own.contains("prelude_kernel") && !own.contains("header_kernel"));
        let declared = read(&own, &["t<float>".to_string()]);
        assert_eq!(declared.kernels, ["mine", "t<float>"]);
    }
}
