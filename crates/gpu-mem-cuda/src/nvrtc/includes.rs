//! Where NVRTC finds the CUDA headers kernels include (`<cuda_runtime.h>`,
//! `<cooperative_groups.h>`, which needs CCCL's `<nv/target>` and `<cuda/std/...>`):
//! `GPU_MEM_CUDA_INCLUDE` (a path list), `$CUDA_HOME/include`, `$CUDA_PATH/include`,
//! `/usr/local/cuda/include`, and the `include` folder beside the NVRTC library in use (the
//! NVIDIA wheels' layout, `nvidia/cu13/lib` and `nvidia/cu13/include`); each also with its
//! `cccl` folder where it has one (CUDA 13 keeps CCCL there). Only folders holding
//! `cuda_runtime.h` count, and each is given once. The C library headers kernels include
//! (`<math.h>`, `<stdio.h>` ...) come from gpu-mem itself (`gpu_mem_core::RTC_HEADERS`).

use std::path::{Path, PathBuf};

/// The variable naming include folders (a path list), tried first.
pub const INCLUDE_VARIABLE: &str = "GPU_MEM_CUDA_INCLUDE";

/// The folders to give NVRTC as `-I`, for the NVRTC loaded from `nvrtc_path`.
pub fn include_dirs(nvrtc_path: &str) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(list) = std::env::var_os(INCLUDE_VARIABLE) {
        roots.extend(std::env::split_paths(&list));
    }
    for home in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(dir) = std::env::var_os(home).filter(|d| !d.is_empty()) {
            roots.push(PathBuf::from(dir).join("include"));
        }
    }
    roots.push(PathBuf::from("/usr/local/cuda/include"));
    if let Some(library) = loaded_path(nvrtc_path)
        && let Some(lib_dir) = library.parent()
        && let Some(root) = lib_dir.parent()
    {
        roots.push(root.join("include"));
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for root in roots {
        if !root.join("cuda_runtime.h").is_file() {
            continue;
        }
        let cccl = root.join("cccl");
        for dir in [root, cccl] {
            if dir.is_dir() && !out.contains(&dir) {
                out.push(dir);
            }
        }
    }
    out
}

/// The file the library `path` was loaded from: `path` when absolute, else the mapping of this
/// process whose file name it is (`/proc/self/maps`).
fn loaded_path(path: &str) -> Option<PathBuf> {
    let given = Path::new(path);
    if given.is_absolute() {
        return Some(given.to_path_buf());
    }
    let name = given.file_name()?.to_str()?;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|file| Path::new(file).file_name().and_then(|f| f.to_str()) == Some(name))
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_folders_with_cuda_headers_count() {
        let dir = std::env::temp_dir().join(format!("gpu-mem-includes-{}", std::process::id()));
        let include = dir.join("include");
        std::fs::create_dir_all(include.join("cccl")).unwrap();
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        std::fs::write(include.join("cuda_runtime.h"), "").unwrap();
        let library = dir.join("lib").join("libnvrtc.so.13");
        let found = include_dirs(library.to_str().unwrap());
        assert!(found.contains(&include), "{found:?}");
        assert!(found.contains(&include.join("cccl")), "{found:?}");
        let index = |p: &Path| found.iter().position(|f| f == p);
        assert_eq!(index(&include).map(|i| i + 1), index(&include.join("cccl")));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            !include_dirs("/nonexistent/lib/libnvrtc.so")
                .iter()
                .any(|d| d.starts_with("/nonexistent"))
        );
    }
}
