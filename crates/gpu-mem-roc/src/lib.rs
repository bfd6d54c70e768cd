//! The ROCm backend of gpu-mem, on the HSA runtime (ROCr) with hiprtc for kernel source.
//!
//! Layers (each module states its contract):
//! * [`driver`] — `libhsa-runtime64.so.1` and `libamdhip64` loaded at run time with
//!   `libloading`; one thin function per native call turning status codes into `Result`.
//! * [`hiprtc`] — portable kernel source → AMD GPU code object for an agent's ISA.
//! * `backend` — [`RocBackend`], the [`gpu_mem_core::Backend`] implementation.
//! * `rccl` (feature `nccl`) — RCCL (`librccl.so.1`) found and opened at run time; not yet
//!   behind a collectives capability (see its docs).
//!
//! [`open`] is the entry point the facade calls for `GPU_MEM_BACKEND=roc` (and, for `auto`,
//! after CUDA): it fails with [`Error::LibraryLoad`] when the runtime is not installed (or does
//! not load), with [`Error::BackendUnavailable`] when `hsa_init` fails on a machine without
//! `/dev/kfd` (the reason starts with "no AMD GPU driver (/dev/kfd missing)" and carries the HSA
//! status text), and with [`Error::BackendUnusable`] when it fails although `/dev/kfd` is there
//! (no permission to open it, or the runtime's own error, naming the library).

mod backend;
pub mod driver;
pub mod hiprtc;
#[cfg(feature = "nccl")]
pub mod rccl;

pub use backend::RocBackend;

use driver::Hsa;
use gpu_mem_core::{Backend, BackendKind, Error, Result};
use std::path::Path;
use std::sync::Arc;

/// The device node of the AMD kernel driver (amdkfd) that ROCr opens in `hsa_init`.
pub const KFD_DEVICE: &str = "/dev/kfd";

/// Loads the HSA runtime, initialises it and returns the ROC backend.
pub fn open() -> Result<Arc<dyn Backend>> {
    let hsa = Hsa::shared()?;
    // A first `hsa_init` of our own, to name what is wrong when the runtime cannot start.
    if let Err(error) = hsa.init() {
        return Err(init_failure(error, hsa.path()));
    }
    // The backend takes (and gives back) a reference of its own.
    let backend = RocBackend::new(Arc::clone(&hsa));
    // SAFETY: gives back the reference taken just above, used for nothing else.
    if let Err(e) = unsafe { hsa.shut_down() } {
        tracing::warn!(error = %e, "hsa_shut_down of the start-up probe failed");
    }
    Ok(Arc::new(backend?))
}

/// The error `open` reports when `hsa_init` fails. ROCr maps every load failure, including
/// "cannot open /dev/kfd", to HSA_STATUS_ERROR_OUT_OF_RESOURCES, so the device node is checked
/// here to say what is actually wrong: missing (no AMD GPU here: unavailable), present but not
/// openable (no permission: the usual cause on a machine with a GPU), or present and openable
/// (the runtime's own error, with the library it came from).
fn init_failure(error: Error, library: &str) -> Error {
    let node = Path::new(KFD_DEVICE);
    if !node.exists() {
        return Error::BackendUnavailable {
            backend: BackendKind::Roc,
            reason: format!("no AMD GPU driver ({KFD_DEVICE} missing): {error}"),
        };
    }
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(node);
    let reason = match opened {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => format!(
            "no permission to open {KFD_DEVICE} for reading and writing (add the user to the \
             `render` and `video` groups, or give a container the device): {error}"
        ),
        _ => format!("{library}: {error}"),
    };
    Error::BackendUnusable {
        backend: BackendKind::Roc,
        reason,
    }
}
