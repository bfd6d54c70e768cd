//! The stand-in `libcuda` (tests/mock/libcuda_mock.c): building it with `cc`, loading private
//! copies of it, and calling its `mock_*` introspection functions.
//!
//! The stand-in is host memory, not a GPU: tests built on it prove the backend's side of the
//! driver contract, never anything about hardware.

// Each test target includes this file and uses a different part of it.
#![allow(dead_code)]

use gpu_mem_cuda::{CudaBackend, CudaDriver};
use libtest_mimic::Failed;
use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mock/libcuda_mock.c");

/// Builds the mock into `dir` as `libcuda_mock_<name>.so` with extra `-D` defines.
pub fn build(dir: &Path, name: &str, defines: &[&str]) -> Result<PathBuf, String> {
    let out = dir.join(format!("libcuda_mock_{name}.so"));
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .args(defines)
        .arg(SOURCE)
        .arg("-lpthread")
        .status()
        .map_err(|e| format!("cc: {e}"))?;
    if status.success() {
        Ok(out)
    } else {
        Err(format!("cc exited with {status}"))
    }
}

/// libnvrtc from `GPU_MEM_NVRTC_LIBRARY` or the pinned wheel of `.ci/install-cuda-parts.sh`.
pub fn wheel_nvrtc() -> Option<PathBuf> {
    gpu_mem_core::testing::wheels::file("GPU_MEM_NVRTC_LIBRARY", "nvidia/cu13/lib/libnvrtc.so.13")
}

/// One private copy of the mock (its own file, so its own global state) and a handle to it
/// that keeps it loaded while the backend comes and goes.
pub struct Mock {
    pub path: PathBuf,
    pub library: libloading::Library,
}

impl Mock {
    pub fn copy_of(built: &Path, test: &str) -> Result<Mock, Failed> {
        let path = built.with_file_name(format!("libcuda_{test}.so"));
        std::fs::copy(built, &path)?;
        // SAFETY: the mock's initialisers are trivial (static data only).
        let library = unsafe { libloading::Library::new(&path) }?;
        Ok(Mock { path, library })
    }

    pub fn call<T>(&self, name: &str) -> Result<T, Failed> {
        // SAFETY: every mock_* introspection function called this way takes no arguments and
        // returns T.
        let f = unsafe { self.library.get::<unsafe extern "C" fn() -> T>(name) }?;
        // SAFETY: as above.
        Ok(unsafe { f() })
    }

    pub fn call_with(&self, name: &str, arg: i32) -> Result<i32, Failed> {
        // SAFETY: the mock_* functions called here take one int and return an int (or void,
        // whose value is then ignored by the caller).
        let f = unsafe { self.library.get::<unsafe extern "C" fn(i32) -> i32>(name) }?;
        // SAFETY: as above.
        Ok(unsafe { f(arg) })
    }

    pub fn set_pools(&self, on: bool) -> Result<(), Failed> {
        // SAFETY: mock_set_pools_supported(int) returns nothing.
        let f = unsafe {
            self.library
                .get::<unsafe extern "C" fn(i32)>("mock_set_pools_supported")
        }?;
        // SAFETY: as above.
        unsafe { f(i32::from(on)) };
        Ok(())
    }

    /// Tells the mock how many bytes each parameter of the kernels launched next has (what the
    /// real driver knows from the compiled function), so it records exactly those bytes.
    pub fn set_param_sizes(&self, sizes: &[usize]) -> Result<(), Failed> {
        // SAFETY: mock_set_param_sizes(int n, const size_t *sizes) reads n sizes.
        let f = unsafe {
            self.library
                .get::<unsafe extern "C" fn(i32, *const usize) -> i32>("mock_set_param_sizes")
        }?;
        // SAFETY: `sizes` holds sizes.len() values, alive for the call.
        let status = unsafe { f(i32::try_from(sizes.len())?, sizes.as_ptr()) };
        ensure(status == 0, || format!("the mock refused sizes {sizes:?}"))
    }

    /// The bytes parameter `index` of the last launch pointed at.
    pub fn param_bytes(&self, index: usize) -> Result<Vec<u8>, Failed> {
        // SAFETY: mock_param_bytes(int i, unsigned char *out, size_t cap) writes at most cap
        // bytes and returns how many.
        let f = unsafe {
            self.library
                .get::<unsafe extern "C" fn(i32, *mut u8, usize) -> usize>("mock_param_bytes")
        }?;
        let mut out = vec![0u8; 256];
        // SAFETY: `out` has 256 writable bytes.
        let n = unsafe { f(i32::try_from(index)?, out.as_mut_ptr(), out.len()) };
        out.truncate(n);
        Ok(out)
    }

    pub fn backend(&self) -> Result<CudaBackend, Failed> {
        let driver = CudaDriver::load_from(&self.path)?;
        driver.init(0)?;
        let count = usize::try_from(driver.device_get_count()?)?;
        Ok(CudaBackend::new(driver, count)?)
    }
}

pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), Failed> {
    if condition {
        Ok(())
    } else {
        Err(message().into())
    }
}
