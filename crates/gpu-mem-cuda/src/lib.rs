//! The CUDA backend of gpu-mem: the CUDA driver API and NVRTC, both loaded at run time.
//!
//! Layers (each module states its contract):
//!
//! * [`driver`] — `libcuda.so.1` loaded with `libloading`, every symbol optional, one thin
//!   function per driver call returning `Result`.
//! * [`backend`] — [`CudaBackend`], the `gpu_mem_core::Backend` implementation: memory,
//!   streams, events, and kernel launch (NVRTC-compiled portable source, modules cached per
//!   kernel and device, `gm_array` parameters, `cuLaunchKernel`). **Not yet run on a GPU**:
//!   tested against a stand-in driver and the real NVRTC only; see its module docs.
//! * [`nvrtc`] — NVRTC loaded the same way; compiles kernel source with the portable prelude
//!   `gpu_mem.h` to PTX or a cubin.
//!
//! * `nccl` (feature `nccl`) — NCCL (`libnccl.so.2`) loaded the same way, behind the
//!   backend's collectives capability (`gpu_mem::collective`).
//! * `cudarc` (feature `cudarc`) — interop with the cudarc crate: arrays over `CudaSlice`s,
//!   `CudaView`s of arrays, streams both ways, all in the device's primary context.
//!
//! Entry points for the facade: [`open`] (what `GPU_MEM_BACKEND=cuda` and `auto` call) and
//! [`probe`] (driver facts without creating contexts).
//!
//! Environment: `GPU_MEM_CUDA_LIBRARY` overrides the driver path, `GPU_MEM_NVRTC_LIBRARY` the
//! NVRTC path, `GPU_MEM_NCCL_LIBRARY` the NCCL path.

pub mod backend;
#[cfg(feature = "cudarc")]
pub mod cudarc;
pub mod driver;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod nvrtc;

pub use backend::CudaBackend;
pub use driver::CudaDriver;
pub use nvrtc::Nvrtc;

use gpu_mem_core::{Backend, BackendKind, Error, Result};
use std::sync::Arc;

/// What [`probe`] finds out about the installed driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaProbe {
    /// Path or soname the driver was loaded from.
    pub library: String,
    /// `cuDriverGetVersion`, e.g. 13050 for CUDA 13.5.
    pub driver_version: i32,
    /// `cuDeviceGetCount` after a successful `cuInit(0)`.
    pub device_count: usize,
}

/// What `open` reports when the driver loaded but did not start: no device is the normal case
/// on a machine with the driver and no GPU; anything else is a driver that is broken here.
fn start_failure(error: Error, library: &str) -> Error {
    match &error {
        Error::Native { code, .. }
            if *code == i64::from(driver::sys::CUresult::CUDA_ERROR_NO_DEVICE.0) =>
        {
            Error::BackendUnavailable {
                backend: BackendKind::Cuda,
                reason: format!("the CUDA driver ({library}) finds no device: {error}"),
            }
        }
        Error::Native { .. } => Error::BackendUnusable {
            backend: BackendKind::Cuda,
            reason: format!("{library}: {error}"),
        },
        _ => error,
    }
}

/// Loads the driver, initialises it and counts devices, without creating any context.
pub fn probe() -> Result<CudaProbe> {
    let driver = CudaDriver::load()?;
    probe_driver(driver)
}

fn probe_driver(driver: &'static CudaDriver) -> Result<CudaProbe> {
    driver.init(0)?;
    let driver_version = driver.driver_get_version()?;
    let count = driver.device_get_count()?;
    Ok(CudaProbe {
        library: driver.path().to_string(),
        driver_version,
        device_count: usize::try_from(count).unwrap_or(0),
    })
}

/// Opens the CUDA backend: loads `libcuda` (`GPU_MEM_CUDA_LIBRARY` or `libcuda.so.1`), runs
/// `cuInit(0)` and finds the devices.
///
/// Errors: [`Error::LibraryLoad`] when there is no driver (the usual case on machines without an
/// NVIDIA GPU), [`Error::MissingSymbol`] for a library that is not a usable driver,
/// [`Error::BackendUnavailable`] when the driver finds no device (`CUDA_ERROR_NO_DEVICE`, or
/// zero devices), and [`Error::BackendUnusable`] when it refuses to start otherwise (a driver
/// library of another version than the kernel module, a stub library, ...), naming the library.
pub fn open() -> Result<Arc<dyn Backend>> {
    let driver = CudaDriver::load()?;
    let found = probe_driver(driver).map_err(|error| start_failure(error, driver.path()))?;
    if found.device_count == 0 {
        return Err(Error::BackendUnavailable {
            backend: BackendKind::Cuda,
            reason: format!("the CUDA driver ({}) reports no devices", found.library),
        });
    }
    tracing::info!(
        library = %found.library,
        driver_version = found.driver_version,
        devices = found.device_count,
        "CUDA driver initialised"
    );
    let backend: Arc<dyn Backend> = Arc::new(CudaBackend::new(driver, found.device_count)?);
    Ok(backend)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native(code: driver::sys::CUresult) -> Error {
        Error::Native {
            backend: BackendKind::Cuda,
            call: "cuInit",
            code: i64::from(code.0),
            code_name: format!("{code:?}"),
            description: String::new(),
        }
    }

    /// No device is the normal case on a machine without a GPU; any other refusal to start names
    /// the library, so that a user can tell which one was loaded.
    #[test]
    fn start_failures_name_the_library_and_tell_no_device_apart() {
        let path = "/opt/cuda-compat/libcuda.so.1";
        match start_failure(native(driver::sys::CUresult::CUDA_ERROR_NO_DEVICE), path) {
            Error::BackendUnavailable { reason, .. } => assert!(reason.contains(path), "{reason}"),
            other => panic!("no device reported as {other:?}"),
        }
        let mismatch = native(driver::sys::CUresult::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH);
        match start_failure(mismatch, path) {
            Error::BackendUnusable { reason, .. } => assert!(reason.contains(path), "{reason}"),
            other => panic!("a driver mismatch reported as {other:?}"),
        }
        let missing = Error::MissingSymbol {
            library: "the CUDA driver",
            path: path.into(),
            symbol: "cuInit",
            feature: "the CUDA backend",
        };
        assert!(matches!(
            start_failure(missing, path),
            Error::MissingSymbol { .. }
        ));
    }
}
