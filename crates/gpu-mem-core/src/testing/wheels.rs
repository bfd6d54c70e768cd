//! Where the tests find NVIDIA's pinned wheels (NVRTC, NCCL, ptxas), which
//! `.ci/install-cuda-parts.sh` unpacks under `GPU_MEM_CUDA_WHEELS`, by default
//! `$HOME/.cache/gpu-mem/cuda-wheels`.

use std::path::PathBuf;

/// The folder the wheels are unpacked into.
pub fn prefix() -> Option<PathBuf> {
    std::env::var_os("GPU_MEM_CUDA_WHEELS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/gpu-mem/cuda-wheels"))
        })
}

/// The file the variable `override_var` names, as given; else `relative` under [`prefix`], if
/// it is there.
pub fn file(override_var: &str, relative: &str) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(override_var) {
        return Some(PathBuf::from(path));
    }
    Some(prefix()?.join(relative)).filter(|path| path.is_file())
}
