//! The HIP runtime calls gpu-mem uses for versions, errors and stream/pointer interop.

use super::{Hip, c_text};
use gpu_mem_core::Result;
use gpu_mem_hip_sys as sys;
use std::ffi::{c_int, c_void};

impl Hip {
    /// `hipGetErrorName`, when exported.
    pub fn error_name(&self, error: sys::hipError_t) -> Option<String> {
        let f = self.functions.hipGetErrorName?;
        // SAFETY: takes a plain integer and returns a static string or null.
        unsafe { c_text(f(error)) }
    }

    /// `hipGetErrorString`, when exported.
    pub fn error_string(&self, error: sys::hipError_t) -> Option<String> {
        let f = self.functions.hipGetErrorString?;
        // SAFETY: as in `error_name`.
        unsafe { c_text(f(error)) }
    }

    /// `hipInit(0)`. Without a GPU HIP 5.2 returns `hipErrorInvalidDevice`.
    pub fn init(&self) -> Result<()> {
        let f = self.get(self.functions.hipInit, "hipInit", "HIP interop")?;
        // SAFETY: no pointer arguments.
        let rc = unsafe { f(0) };
        self.check_hip("hipInit", rc)
    }

    /// `hipGetDeviceCount`.
    pub fn device_count(&self) -> Result<i32> {
        let f = self.get(
            self.functions.hipGetDeviceCount,
            "hipGetDeviceCount",
            "HIP interop",
        )?;
        let mut count: c_int = 0;
        // SAFETY: valid out-pointer.
        let rc = unsafe { f(&mut count) };
        self.check_hip("hipGetDeviceCount", rc)?;
        Ok(count)
    }

    /// `hipDriverGetVersion`.
    pub fn driver_version(&self) -> Result<i32> {
        let f = self.get(
            self.functions.hipDriverGetVersion,
            "hipDriverGetVersion",
            "HIP interop",
        )?;
        let mut version: c_int = 0;
        // SAFETY: valid out-pointer.
        let rc = unsafe { f(&mut version) };
        self.check_hip("hipDriverGetVersion", rc)?;
        Ok(version)
    }

    /// `hipRuntimeGetVersion`.
    pub fn runtime_version(&self) -> Result<i32> {
        let f = self.get(
            self.functions.hipRuntimeGetVersion,
            "hipRuntimeGetVersion",
            "HIP interop",
        )?;
        let mut version: c_int = 0;
        // SAFETY: valid out-pointer.
        let rc = unsafe { f(&mut version) };
        self.check_hip("hipRuntimeGetVersion", rc)?;
        Ok(version)
    }

    /// `hipStreamCreateWithFlags`.
    pub fn stream_create(&self, flags: u32) -> Result<sys::hipStream_t> {
        let f = self.get(
            self.functions.hipStreamCreateWithFlags,
            "hipStreamCreateWithFlags",
            "HIP stream interop",
        )?;
        let mut stream: sys::hipStream_t = std::ptr::null_mut();
        // SAFETY: valid out-pointer.
        let rc = unsafe { f(&mut stream, flags) };
        self.check_hip("hipStreamCreateWithFlags", rc)?;
        Ok(stream)
    }

    /// `hipStreamDestroy`.
    ///
    /// # Safety
    /// `stream` came from [`Hip::stream_create`] and is destroyed once.
    pub unsafe fn stream_destroy(&self, stream: sys::hipStream_t) -> Result<()> {
        let f = self.get(
            self.functions.hipStreamDestroy,
            "hipStreamDestroy",
            "HIP stream interop",
        )?;
        // SAFETY: guaranteed by the caller.
        let rc = unsafe { f(stream) };
        self.check_hip("hipStreamDestroy", rc)
    }

    /// `hipStreamSynchronize`.
    ///
    /// # Safety
    /// `stream` is live (or null for the default stream).
    pub unsafe fn stream_synchronize(&self, stream: sys::hipStream_t) -> Result<()> {
        let f = self.get(
            self.functions.hipStreamSynchronize,
            "hipStreamSynchronize",
            "HIP stream interop",
        )?;
        // SAFETY: guaranteed by the caller.
        let rc = unsafe { f(stream) };
        self.check_hip("hipStreamSynchronize", rc)
    }

    /// `hipHostGetDevicePointer(&dev, host, 0)` for the host address `host` (looked up in HIP's
    /// tables, never dereferenced).
    pub fn host_get_device_pointer(&self, host: usize) -> Result<*mut c_void> {
        let f = self.get(
            self.functions.hipHostGetDevicePointer,
            "hipHostGetDevicePointer",
            "HIP pointer interop",
        )?;
        let mut device: *mut c_void = std::ptr::null_mut();
        // SAFETY: HIP only looks `host` up in its allocation tables; `device` is a valid
        // out-pointer.
        let rc = unsafe { f(&mut device, host as *mut c_void, 0) };
        self.check_hip("hipHostGetDevicePointer", rc)?;
        Ok(device)
    }

    /// `hipPointerGetAttributes` for the address `ptr` (looked up, never dereferenced).
    pub fn pointer_attributes(&self, ptr: usize) -> Result<sys::hipPointerAttribute_t> {
        let f = self.get(
            self.functions.hipPointerGetAttributes,
            "hipPointerGetAttributes",
            "HIP pointer interop",
        )?;
        let mut attributes = sys::hipPointerAttribute_t::default();
        // SAFETY: HIP only looks `ptr` up; `attributes` is a valid out-pointer.
        let rc = unsafe { f(&mut attributes, ptr as *const c_void) };
        self.check_hip("hipPointerGetAttributes", rc)?;
        Ok(attributes)
    }
}
