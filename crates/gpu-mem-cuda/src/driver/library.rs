//! Finding and opening a shared library: the loader shared with the ROC backend
//! (`gpu-mem-loader`). Each library is opened once per process and never unloaded; an override
//! variable (`GPU_MEM_CUDA_LIBRARY`, `GPU_MEM_NVRTC_LIBRARY`), when set, is the only path tried;
//! failure is [`Error::LibraryLoad`](gpu_mem_core::Error::LibraryLoad) naming the library,
//! every candidate and the dynamic loader's reason.

use gpu_mem_core::Result;
pub use gpu_mem_loader::{Library as LoadedLibrary, LibrarySpec, accept_any};
use std::path::Path;

/// Opens (or finds already open) the library following `spec`.
pub fn open(spec: &LibrarySpec) -> Result<&'static LoadedLibrary> {
    gpu_mem_loader::open(spec, &accept_any)
}

/// Opens (or finds already open) exactly `path`.
pub fn open_path(spec: &LibrarySpec, path: &Path) -> Result<&'static LoadedLibrary> {
    gpu_mem_loader::open_path(spec, path, &accept_any)
}
