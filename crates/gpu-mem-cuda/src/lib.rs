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
//! * `cudarc` (feature `cudarc`) — interop with the cudarc crate: arrays over `CudaSlice`s,
//!   `CudaView`s of arrays, streams both ways, all in the device's primary context.
//!
//! Entry points for the facade: [`open`] (what `GPU_MEM_BACKEND=cuda` and `auto` call) and
//! [`probe`] (driver facts without creating contexts).
//!
//! Environment: `GPU_MEM_CUDA_LIBRARY` overrides the driver path, `GPU_MEM_NVRTC_LIBRARY` the
//! NVRTC path.

pub mod backend;
#[cfg(feature = "cudarc")]
pub mod cudarc;
pub mod driver;
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
/// [`Error::Native`] when the driver refuses (`CUDA_ERROR_NO_DEVICE`, ...), and
/// [`Error::BackendUnavailable`] when it reports zero devices.
pub fn open() -> Result<Arc<dyn Backend>> {
    let driver = CudaDriver::load()?;
    let found = probe_driver(driver)?;
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
