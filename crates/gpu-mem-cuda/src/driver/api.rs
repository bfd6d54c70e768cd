//! [`CudaDriver`]: the loaded `libcuda.so.1` and one thin function per driver call.
//!
//! # Contract
//!
//! * Each method calls exactly one driver function with the arguments given (byte counts are
//!   bytes, `cuMemsetD32*` counts are 32-bit words, as in the C API) and turns its `CUresult`
//!   into a `Result` (see [`super::result`]). No method adds policy: contexts, flags and
//!   ordering are the backend's business.
//! * A call whose symbol the loaded driver lacks returns
//!   [`Error::MissingSymbol`] naming the exported symbol, the
//!   library path and the feature that needs it; the rest of the driver stays usable.
//! * Methods that dereference caller pointers or use handles are `unsafe`; their `# Safety`
//!   sections state what the driver requires.
//! * One [`CudaDriver`] per library per process: [`CudaDriver::load`] opens `libcuda` once (the
//!   shared loader never unloads it; unloading after `cuInit` is undefined territory) and every
//!   runtime of the process shares the same `&'static CudaDriver`. Besides the symbol table it
//!   keeps the one piece of process-wide state the driver has: which devices' primary contexts
//!   were destroyed by a device fault ([`CudaDriver::record_fault`]), because a primary context
//!   is shared by everything in the process that uses the device.

use super::library::{self, LibrarySpec, LoadedLibrary};
use super::result::ErrorText;
use super::symbols::driver::Symbols;
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use gpu_mem_cuda_sys::driver::{
    CU_IPC_HANDLE_SIZE, CUcontext, CUdevice_attribute, CUdevice_v1, CUdeviceptr_v2, CUevent,
    CUfunction, CUfunction_attribute, CUipcMemHandle_v1, CUmem_advise, CUmemAccess_flags,
    CUmemAccessDesc_v1, CUmemLocation, CUmemLocation_st__bindgen_ty_1, CUmemLocationType,
    CUmemPool_attribute, CUmemoryPool, CUmodule, CUresult, CUstream,
};
use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::path::Path;
use std::sync::Mutex;

/// How `libcuda` is found: `GPU_MEM_CUDA_LIBRARY`, else the driver's soname. The unversioned
/// `libcuda.so` is deliberately not tried: on machines without a driver it is usually the
/// toolkit's stub, which fails every call with `CUDA_ERROR_STUB_LIBRARY`.
pub const CUDA_DRIVER_LIBRARY: LibrarySpec = LibrarySpec {
    library: "the CUDA driver",
    override_var: "GPU_MEM_CUDA_LIBRARY",
    candidates: &["libcuda.so.1"],
};

/// The CUDA driver API of one loaded `libcuda`.
pub struct CudaDriver {
    symbols: Symbols,
    errors: ErrorText,
    /// Opened once per process and never unloaded, so the pointers above stay valid.
    library: &'static LoadedLibrary,
    /// Devices whose primary context a device fault destroyed: device → the fault's message.
    faults: Mutex<HashMap<CUdevice_v1, String>>,
    /// Retained primary contexts (address) → their device, so a fault reported while a
    /// context is current is charged to its device.
    contexts: Mutex<HashMap<usize, CUdevice_v1>>,
}

/// What a user can do once a device is lost (see [`CudaDriver::record_fault`]).
pub const DEVICE_LOST_RECOVERY: &str = "drop every array, stream, event and kernel of the device, \
     then call CudaBackend::reset_device (cuDevicePrimaryCtxReset), or start a new process (the \
     only way after CUDA_ERROR_CONTAINED or CUDA_ERROR_TENSOR_MEMORY_LEAK)";

/// The codes after which the context is unusable for the rest of the process (CUDA's
/// "sticky" errors: the device faulted while running work, or an uncorrectable hardware error;
/// after `CUDA_ERROR_CONTAINED` and `CUDA_ERROR_TENSOR_MEMORY_LEAK` the driver says only a new
/// process recovers).
pub fn is_device_fault(code: CUresult) -> bool {
    matches!(
        code,
        CUresult::CUDA_ERROR_ECC_UNCORRECTABLE
            | CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
            | CUresult::CUDA_ERROR_LAUNCH_TIMEOUT
            | CUresult::CUDA_ERROR_ASSERT
            | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
            | CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUresult::CUDA_ERROR_INVALID_PC
            | CUresult::CUDA_ERROR_LAUNCH_FAILED
            | CUresult::CUDA_ERROR_NVLINK_UNCORRECTABLE
            | CUresult::CUDA_ERROR_CONTAINED
            | CUresult::CUDA_ERROR_TENSOR_MEMORY_LEAK
    )
}

/// Every driver opened in this process (one per library path).
static DRIVERS: Mutex<Vec<&'static CudaDriver>> = Mutex::new(Vec::new());

impl std::fmt::Debug for CudaDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDriver")
            .field("path", &self.library.path())
            .field("faults", &self.faults)
            .field("symbols", &self.symbols)
            .finish()
    }
}

/// Fetches a symbol or returns the `MissingSymbol` error for it.
macro_rules! get {
    ($self:ident . $field:ident, $feature:literal) => {
        match $self.symbols.$field {
            Some(f) => f,
            None => return Err($self.missing(stringify!($field), $feature)),
        }
    };
}

impl CudaDriver {
    /// The process's driver (`GPU_MEM_CUDA_LIBRARY` or `libcuda.so.1`): loaded and resolved on
    /// the first call, shared by every later one.
    pub fn load() -> Result<&'static CudaDriver> {
        Ok(Self::shared(library::open(&CUDA_DRIVER_LIBRARY)?))
    }

    /// The process's driver from exactly `path` (loaded once per path).
    pub fn load_from(path: &Path) -> Result<&'static CudaDriver> {
        Ok(Self::shared(library::open_path(
            &CUDA_DRIVER_LIBRARY,
            path,
        )?))
    }

    fn shared(library: &'static LoadedLibrary) -> &'static CudaDriver {
        // Only complete entries are pushed, so a poisoned lock is still consistent.
        let mut drivers = lock(&DRIVERS);
        if let Some(driver) = drivers.iter().find(|d| std::ptr::eq(d.library, library)) {
            return driver;
        }
        let driver: &'static CudaDriver = Box::leak(Box::new(Self::from_library(library)));
        drivers.push(driver);
        driver
    }

    fn from_library(library: &'static LoadedLibrary) -> CudaDriver {
        // SAFETY: the table's pointer types are generated from the CUDA headers for exactly the
        // exported names they are looked up by (the driver gives a changed signature a new
        // exported name, `_v2`, ...), and the library is never unloaded.
        let symbols = unsafe { Symbols::resolve(library.raw()) };
        let missing: Vec<&str> = symbols
            .presence()
            .into_iter()
            .filter(|(_, _, p)| !p)
            .map(|(_, name, _)| name)
            .collect();
        if !missing.is_empty() {
            tracing::info!(
                path = library.path(),
                ?missing,
                "CUDA driver lacks some symbols"
            );
        }
        let errors = ErrorText {
            name: symbols.cuGetErrorName,
            string: symbols.cuGetErrorString,
        };
        CudaDriver {
            symbols,
            errors,
            library,
            faults: Mutex::new(HashMap::new()),
            contexts: Mutex::new(HashMap::new()),
        }
    }

    /// Notes that `context` is `device`'s primary context (faults seen while it is current are
    /// charged to `device`).
    pub fn note_primary_context(&self, context: CUcontext, device: CUdevice_v1) {
        lock(&self.contexts).insert(context as usize, device);
    }

    /// The device whose primary context is current on this thread, if it is one we retained.
    fn current_device(&self) -> Option<CUdevice_v1> {
        let context = self.ctx_get_current().ok()?;
        lock(&self.contexts).get(&(context as usize)).copied()
    }

    /// Records that a device fault destroyed `device`'s primary context; returns the fault that
    /// is kept (the first one: later errors are consequences of it).
    pub fn record_fault(&self, device: CUdevice_v1, fault: String) -> String {
        let mut faults = lock(&self.faults);
        faults.entry(device).or_insert(fault).clone()
    }

    /// The fault that destroyed `device`'s primary context, if one did.
    pub fn fault(&self, device: CUdevice_v1) -> Option<String> {
        lock(&self.faults).get(&device).cloned()
    }

    /// Forgets `device`'s fault (after its primary context was reset).
    pub fn clear_fault(&self, device: CUdevice_v1) {
        lock(&self.faults).remove(&device);
    }

    /// The path or soname the driver was loaded from.
    pub fn path(&self) -> &str {
        self.library.path()
    }

    /// `(API name, exported name, present)` for every bound call.
    pub fn symbol_presence(&self) -> Vec<(&'static str, &'static str, bool)> {
        self.symbols.presence()
    }

    /// Whether the driver exports the call named `api` (e.g. `"cuMemAllocAsync"`).
    pub fn has(&self, api: &str) -> bool {
        self.symbols
            .presence()
            .iter()
            .any(|(field, _, present)| *field == api && *present)
    }

    fn missing(&self, field: &'static str, feature: &'static str) -> Error {
        let symbol = self
            .symbols
            .presence()
            .into_iter()
            .find(|(f, _, _)| *f == field)
            .map_or(field, |(_, name, _)| name);
        Error::MissingSymbol {
            library: self.library.name(),
            path: self.library.path().to_string(),
            symbol,
            feature,
        }
    }

    /// `Ok` for success; a device fault is recorded for the current context's device and
    /// becomes [`Error::DeviceLost`]; anything else is [`Error::Native`].
    fn check(&self, call: &'static str, code: CUresult) -> Result<()> {
        let result = self.errors.check(call, code);
        if is_device_fault(code)
            && let Err(native) = &result
            && let Some(device) = self.current_device()
        {
            let fault = self.record_fault(device, native.to_string());
            tracing::error!(device, %fault, "CUDA device fault: the primary context is lost");
            return Err(self.lost(device, fault));
        }
        result
    }

    /// The [`Error::DeviceLost`] of `device`.
    pub fn lost(&self, device: CUdevice_v1, fault: String) -> Error {
        Error::DeviceLost {
            backend: gpu_mem_core::BackendKind::Cuda,
            device: usize::try_from(device).unwrap_or(usize::MAX),
            fault,
            recovery: DEVICE_LOST_RECOVERY,
        }
    }

    /// The [`Error::Native`] the driver's error functions give for `code` from `call`.
    pub fn error(&self, call: &'static str, code: CUresult) -> Error {
        self.errors.error(call, code)
    }

    // ----- initialisation and devices ------------------------------------------------------

    /// `cuInit(flags)`.
    pub fn init(&self, flags: c_uint) -> Result<()> {
        let f = get!(self.cuInit, "driver initialisation");
        // SAFETY: cuInit takes a plain flags value.
        self.check("cuInit", unsafe { f(flags) })
    }

    /// `cuDriverGetVersion`: the CUDA version the driver supports (e.g. 13050).
    pub fn driver_get_version(&self) -> Result<i32> {
        let f = get!(self.cuDriverGetVersion, "driver version query");
        let mut version: c_int = 0;
        // SAFETY: the out-pointer is a live local.
        self.check("cuDriverGetVersion", unsafe { f(&mut version) })?;
        Ok(version)
    }

    /// `cuDeviceGetCount`.
    pub fn device_get_count(&self) -> Result<i32> {
        let f = get!(self.cuDeviceGetCount, "device enumeration");
        let mut count: c_int = 0;
        // SAFETY: the out-pointer is a live local.
        self.check("cuDeviceGetCount", unsafe { f(&mut count) })?;
        Ok(count)
    }

    /// `cuDeviceGet(ordinal)`.
    pub fn device_get(&self, ordinal: i32) -> Result<CUdevice_v1> {
        let f = get!(self.cuDeviceGet, "device enumeration");
        let mut device: CUdevice_v1 = 0;
        // SAFETY: the out-pointer is a live local; the driver validates the ordinal.
        self.check("cuDeviceGet", unsafe { f(&mut device, ordinal) })?;
        Ok(device)
    }

    /// `cuDeviceGetAttribute(attribute, device)`.
    pub fn device_get_attribute(
        &self,
        attribute: CUdevice_attribute,
        device: CUdevice_v1,
    ) -> Result<i32> {
        let f = get!(self.cuDeviceGetAttribute, "device attributes");
        let mut value: c_int = 0;
        // SAFETY: the out-pointer is a live local; attribute and device are validated by the driver.
        self.check("cuDeviceGetAttribute", unsafe {
            f(&mut value, attribute, device)
        })?;
        Ok(value)
    }

    /// `cuDeviceGetName`.
    pub fn device_get_name(&self, device: CUdevice_v1) -> Result<String> {
        let f = get!(self.cuDeviceGetName, "device names");
        let mut buffer = [0 as c_char; 256];
        // SAFETY: the driver writes at most `len` bytes (NUL included) into the local buffer.
        self.check("cuDeviceGetName", unsafe {
            f(buffer.as_mut_ptr(), buffer.len() as c_int, device)
        })?;
        // The driver NUL-terminates; force it in case of truncation anyway.
        buffer[buffer.len() - 1] = 0;
        // SAFETY: the buffer is NUL-terminated (set just above at the latest).
        Ok(unsafe { CStr::from_ptr(buffer.as_ptr()) }
            .to_string_lossy()
            .into_owned())
    }

    /// `cuDeviceTotalMem_v2`: device memory in bytes.
    pub fn device_total_mem(&self, device: CUdevice_v1) -> Result<usize> {
        let f = get!(self.cuDeviceTotalMem, "device memory size");
        let mut bytes: usize = 0;
        // SAFETY: the out-pointer is a live local.
        self.check("cuDeviceTotalMem_v2", unsafe { f(&mut bytes, device) })?;
        Ok(bytes)
    }

    // ----- contexts ------------------------------------------------------------------------

    /// `cuDevicePrimaryCtxRetain`: retains (creating if needed) the device's primary context.
    pub fn primary_ctx_retain(&self, device: CUdevice_v1) -> Result<CUcontext> {
        let f = get!(self.cuDevicePrimaryCtxRetain, "primary contexts");
        let mut context: CUcontext = std::ptr::null_mut();
        // SAFETY: the out-pointer is a live local.
        self.check("cuDevicePrimaryCtxRetain", unsafe {
            f(&mut context, device)
        })?;
        Ok(context)
    }

    /// `cuDevicePrimaryCtxRelease(_v2)`.
    ///
    /// # Safety
    /// Balances one successful [`CudaDriver::primary_ctx_retain`] of `device`; no object of the
    /// context may be used afterwards unless another retain keeps it alive.
    pub unsafe fn primary_ctx_release(&self, device: CUdevice_v1) -> Result<()> {
        let f = get!(self.cuDevicePrimaryCtxRelease, "primary contexts");
        // SAFETY: the caller balances a retain; the driver validates the device.
        self.check("cuDevicePrimaryCtxRelease", unsafe { f(device) })
    }

    /// `cuDevicePrimaryCtxReset(_v2)`: destroys every allocation and all state of the device's
    /// primary context in this process; the next retain starts a fresh context.
    ///
    /// # Safety
    /// Nothing in the process still uses an object (memory, stream, event, module) of the old
    /// context.
    pub unsafe fn primary_ctx_reset(&self, device: CUdevice_v1) -> Result<()> {
        let f = get!(self.cuDevicePrimaryCtxReset, "device reset after a fault");
        // SAFETY: guaranteed by the caller; the driver validates the device.
        self.check("cuDevicePrimaryCtxReset", unsafe { f(device) })
    }

    /// `cuCtxSetCurrent`: binds `context` to the calling thread.
    ///
    /// # Safety
    /// `context` is null or a live context (e.g. a retained primary context).
    pub unsafe fn ctx_set_current(&self, context: CUcontext) -> Result<()> {
        let f = get!(self.cuCtxSetCurrent, "context selection");
        // SAFETY: the caller guarantees the context is live or null.
        self.check("cuCtxSetCurrent", unsafe { f(context) })
    }

    /// `cuCtxGetCurrent`: the calling thread's context (null when none).
    pub fn ctx_get_current(&self) -> Result<CUcontext> {
        let f = get!(self.cuCtxGetCurrent, "context selection");
        let mut context: CUcontext = std::ptr::null_mut();
        // SAFETY: the out-pointer is a live local.
        self.check("cuCtxGetCurrent", unsafe { f(&mut context) })?;
        Ok(context)
    }

    /// `cuCtxSynchronize`: waits for all work of the current context.
    pub fn ctx_synchronize(&self) -> Result<()> {
        let f = get!(self.cuCtxSynchronize, "device synchronisation");
        // SAFETY: no arguments; fails with INVALID_CONTEXT when no context is current.
        self.check("cuCtxSynchronize", unsafe { f() })
    }

    // ----- device memory -------------------------------------------------------------------

    /// `cuMemGetInfo_v2`: `(free, total)` bytes of the current context's device.
    pub fn mem_get_info(&self) -> Result<(usize, usize)> {
        let f = get!(self.cuMemGetInfo, "memory info");
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both out-pointers are live locals.
        self.check("cuMemGetInfo_v2", unsafe { f(&mut free, &mut total) })?;
        Ok((free, total))
    }

    /// `cuMemAlloc_v2(bytes)` in the current context.
    pub fn mem_alloc(&self, bytes: usize) -> Result<CUdeviceptr_v2> {
        let f = get!(self.cuMemAlloc, "device allocation");
        let mut ptr: CUdeviceptr_v2 = 0;
        // SAFETY: the out-pointer is a live local.
        self.check("cuMemAlloc_v2", unsafe { f(&mut ptr, bytes) })?;
        Ok(ptr)
    }

    /// `cuMemFree_v2`.
    ///
    /// # Safety
    /// `ptr` came from `cuMemAlloc` in this context, is freed once, and no work still uses it.
    pub unsafe fn mem_free(&self, ptr: CUdeviceptr_v2) -> Result<()> {
        let f = get!(self.cuMemFree, "device allocation");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemFree_v2", unsafe { f(ptr) })
    }

    /// `cuMemAllocAsync(bytes, stream)`: stream-ordered allocation from the device's default pool.
    ///
    /// # Safety
    /// `stream` is a live stream of the current context (or null for the legacy default stream).
    pub unsafe fn mem_alloc_async(&self, bytes: usize, stream: CUstream) -> Result<CUdeviceptr_v2> {
        let f = get!(self.cuMemAllocAsync, "stream-ordered allocation");
        let mut ptr: CUdeviceptr_v2 = 0;
        // SAFETY: the out-pointer is a live local; the stream is guaranteed by the caller.
        self.check("cuMemAllocAsync", unsafe { f(&mut ptr, bytes, stream) })?;
        Ok(ptr)
    }

    /// `cuMemFreeAsync(ptr, stream)`.
    ///
    /// # Safety
    /// `ptr` came from `cuMemAllocAsync`, is freed once, and work using it is ordered before
    /// `stream`'s current end; `stream` is live (or null).
    pub unsafe fn mem_free_async(&self, ptr: CUdeviceptr_v2, stream: CUstream) -> Result<()> {
        let f = get!(self.cuMemFreeAsync, "stream-ordered allocation");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemFreeAsync", unsafe { f(ptr, stream) })
    }

    // ----- copies and memset ---------------------------------------------------------------

    /// `cuMemcpyHtoD_v2(dst, src, bytes)`.
    ///
    /// # Safety
    /// `src..src+bytes` is readable host memory; `dst..dst+bytes` is in a live device allocation.
    pub unsafe fn memcpy_htod(
        &self,
        dst: CUdeviceptr_v2,
        src: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        let f = get!(self.cuMemcpyHtoD, "host-to-device copies");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemcpyHtoD_v2", unsafe { f(dst, src, bytes) })
    }

    /// `cuMemcpyDtoH_v2(dst, src, bytes)`.
    ///
    /// # Safety
    /// `dst..dst+bytes` is writable host memory; `src..src+bytes` is in a live device allocation.
    pub unsafe fn memcpy_dtoh(
        &self,
        dst: *mut c_void,
        src: CUdeviceptr_v2,
        bytes: usize,
    ) -> Result<()> {
        let f = get!(self.cuMemcpyDtoH, "device-to-host copies");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemcpyDtoH_v2", unsafe { f(dst, src, bytes) })
    }

    /// `cuMemcpyDtoD_v2(dst, src, bytes)`.
    ///
    /// # Safety
    /// Both ranges lie in live device allocations.
    pub unsafe fn memcpy_dtod(
        &self,
        dst: CUdeviceptr_v2,
        src: CUdeviceptr_v2,
        bytes: usize,
    ) -> Result<()> {
        let f = get!(self.cuMemcpyDtoD, "device-to-device copies");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemcpyDtoD_v2", unsafe { f(dst, src, bytes) })
    }

    /// `cuMemcpyHtoDAsync_v2(dst, src, bytes, stream)`.
    ///
    /// # Safety
    /// As [`CudaDriver::memcpy_htod`], the ranges stay valid (and the host range unwritten)
    /// until the copy completes, and `stream` is live.
    pub unsafe fn memcpy_htod_async(
        &self,
        dst: CUdeviceptr_v2,
        src: *const c_void,
        bytes: usize,
        stream: CUstream,
    ) -> Result<()> {
        let f = get!(self.cuMemcpyHtoDAsync, "asynchronous host-to-device copies");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemcpyHtoDAsync_v2", unsafe {
            f(dst, src, bytes, stream)
        })
    }

    /// `cuMemcpyDtoHAsync_v2(dst, src, bytes, stream)`.
    ///
    /// # Safety
    /// As [`CudaDriver::memcpy_dtoh`], the ranges stay valid (and the host range otherwise
    /// untouched) until the copy completes, and `stream` is live.
    pub unsafe fn memcpy_dtoh_async(
        &self,
        dst: *mut c_void,
        src: CUdeviceptr_v2,
        bytes: usize,
        stream: CUstream,
    ) -> Result<()> {
        let f = get!(self.cuMemcpyDtoHAsync, "asynchronous device-to-host copies");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemcpyDtoHAsync_v2", unsafe {
            f(dst, src, bytes, stream)
        })
    }

    /// `cuMemcpyDtoDAsync_v2(dst, src, bytes, stream)`.
    ///
    /// # Safety
    /// Both ranges stay in live allocations until the copy completes; `stream` is live.
    pub unsafe fn memcpy_dtod_async(
        &self,
        dst: CUdeviceptr_v2,
        src: CUdeviceptr_v2,
        bytes: usize,
        stream: CUstream,
    ) -> Result<()> {
        let f = get!(
            self.cuMemcpyDtoDAsync,
            "asynchronous device-to-device copies"
        );
        // SAFETY: guaranteed by the caller.
        self.check("cuMemcpyDtoDAsync_v2", unsafe {
            f(dst, src, bytes, stream)
        })
    }

    /// `cuMemsetD8_v2(dst, value, bytes)`.
    ///
    /// # Safety
    /// `dst..dst+bytes` lies in a live device allocation.
    pub unsafe fn memset_d8(&self, dst: CUdeviceptr_v2, value: u8, bytes: usize) -> Result<()> {
        let f = get!(self.cuMemsetD8, "memset");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemsetD8_v2", unsafe { f(dst, value, bytes) })
    }

    /// `cuMemsetD32_v2(dst, value, words)`: `words` 32-bit words, `dst` 4-byte aligned.
    ///
    /// # Safety
    /// `dst..dst+4*words` lies in a live device allocation.
    pub unsafe fn memset_d32(&self, dst: CUdeviceptr_v2, value: u32, words: usize) -> Result<()> {
        let f = get!(self.cuMemsetD32, "memset");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemsetD32_v2", unsafe { f(dst, value, words) })
    }

    /// `cuMemsetD8Async(dst, value, bytes, stream)`.
    ///
    /// # Safety
    /// The range stays in a live allocation until the fill completes; `stream` is live.
    pub unsafe fn memset_d8_async(
        &self,
        dst: CUdeviceptr_v2,
        value: u8,
        bytes: usize,
        stream: CUstream,
    ) -> Result<()> {
        let f = get!(self.cuMemsetD8Async, "asynchronous memset");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemsetD8Async", unsafe { f(dst, value, bytes, stream) })
    }

    /// `cuMemsetD32Async(dst, value, words, stream)`.
    ///
    /// # Safety
    /// `dst..dst+4*words` stays in a live allocation until the fill completes; `stream` is live.
    pub unsafe fn memset_d32_async(
        &self,
        dst: CUdeviceptr_v2,
        value: u32,
        words: usize,
        stream: CUstream,
    ) -> Result<()> {
        let f = get!(self.cuMemsetD32Async, "asynchronous memset");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemsetD32Async", unsafe { f(dst, value, words, stream) })
    }

    // ----- host memory ---------------------------------------------------------------------

    /// `cuMemHostAlloc(bytes, flags)`: page-locked host memory (`CU_MEMHOSTALLOC_*` flags).
    pub fn mem_host_alloc(&self, bytes: usize, flags: c_uint) -> Result<*mut c_void> {
        let f = get!(self.cuMemHostAlloc, "page-locked host allocation");
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: the out-pointer is a live local.
        self.check("cuMemHostAlloc", unsafe { f(&mut ptr, bytes, flags) })?;
        Ok(ptr)
    }

    /// `cuMemFreeHost`.
    ///
    /// # Safety
    /// `ptr` came from `cuMemHostAlloc`, is freed once, and no work still uses it.
    pub unsafe fn mem_free_host(&self, ptr: *mut c_void) -> Result<()> {
        let f = get!(self.cuMemFreeHost, "page-locked host allocation");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemFreeHost", unsafe { f(ptr) })
    }

    /// `cuMemHostRegister_v2(ptr, bytes, flags)` (`CU_MEMHOSTREGISTER_*` flags).
    ///
    /// # Safety
    /// `ptr..ptr+bytes` is host memory that stays allocated until it is unregistered.
    pub unsafe fn mem_host_register(
        &self,
        ptr: *mut c_void,
        bytes: usize,
        flags: c_uint,
    ) -> Result<()> {
        let f = get!(self.cuMemHostRegister, "host memory registration");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemHostRegister_v2", unsafe { f(ptr, bytes, flags) })
    }

    /// `cuMemHostUnregister(ptr)` with the base address that was registered.
    ///
    /// # Safety
    /// `ptr` is the base of a registered range and no work still uses it.
    pub unsafe fn mem_host_unregister(&self, ptr: *mut c_void) -> Result<()> {
        let f = get!(self.cuMemHostUnregister, "host memory registration");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemHostUnregister", unsafe { f(ptr) })
    }

    /// `cuMemHostGetDevicePointer_v2(ptr, 0)`: the device address of mapped host memory.
    ///
    /// # Safety
    /// `ptr` lies in memory allocated or registered with the device-map flag and still alive.
    pub unsafe fn mem_host_get_device_pointer(&self, ptr: *mut c_void) -> Result<CUdeviceptr_v2> {
        let f = get!(self.cuMemHostGetDevicePointer, "mapped host memory");
        let mut device: CUdeviceptr_v2 = 0;
        // SAFETY: the out-pointer is a live local; `ptr` is guaranteed by the caller. Flags
        // must be 0 (reserved).
        self.check("cuMemHostGetDevicePointer_v2", unsafe {
            f(&mut device, ptr, 0)
        })?;
        Ok(device)
    }

    // ----- streams -------------------------------------------------------------------------

    /// `cuStreamCreate(flags)` in the current context.
    pub fn stream_create(&self, flags: c_uint) -> Result<CUstream> {
        let f = get!(self.cuStreamCreate, "streams");
        let mut stream: CUstream = std::ptr::null_mut();
        // SAFETY: the out-pointer is a live local.
        self.check("cuStreamCreate", unsafe { f(&mut stream, flags) })?;
        Ok(stream)
    }

    /// `cuStreamDestroy_v2`.
    ///
    /// # Safety
    /// `stream` is live and destroyed once. (The driver lets queued work finish first.)
    pub unsafe fn stream_destroy(&self, stream: CUstream) -> Result<()> {
        let f = get!(self.cuStreamDestroy, "streams");
        // SAFETY: guaranteed by the caller.
        self.check("cuStreamDestroy_v2", unsafe { f(stream) })
    }

    /// `cuStreamSynchronize`.
    ///
    /// # Safety
    /// `stream` is live (or null for the legacy default stream).
    pub unsafe fn stream_synchronize(&self, stream: CUstream) -> Result<()> {
        let f = get!(self.cuStreamSynchronize, "streams");
        // SAFETY: guaranteed by the caller.
        self.check("cuStreamSynchronize", unsafe { f(stream) })
    }

    /// `cuStreamQuery`: `true` when idle, `false` on `CUDA_ERROR_NOT_READY`.
    ///
    /// # Safety
    /// `stream` is live (or null).
    pub unsafe fn stream_query(&self, stream: CUstream) -> Result<bool> {
        let f = get!(self.cuStreamQuery, "streams");
        // SAFETY: guaranteed by the caller.
        let code = unsafe { f(stream) };
        if code == CUresult::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        self.check("cuStreamQuery", code).map(|()| true)
    }

    /// `cuStreamWaitEvent(stream, event, 0)`.
    ///
    /// # Safety
    /// `stream` and `event` are live.
    pub unsafe fn stream_wait_event(&self, stream: CUstream, event: CUevent) -> Result<()> {
        let f = get!(self.cuStreamWaitEvent, "stream dependencies");
        // SAFETY: guaranteed by the caller; flags must be 0.
        self.check("cuStreamWaitEvent", unsafe { f(stream, event, 0) })
    }

    // ----- events --------------------------------------------------------------------------

    /// `cuEventCreate(flags)` (`CU_EVENT_*` flags).
    pub fn event_create(&self, flags: c_uint) -> Result<CUevent> {
        let f = get!(self.cuEventCreate, "events");
        let mut event: CUevent = std::ptr::null_mut();
        // SAFETY: the out-pointer is a live local.
        self.check("cuEventCreate", unsafe { f(&mut event, flags) })?;
        Ok(event)
    }

    /// `cuEventDestroy_v2`.
    ///
    /// # Safety
    /// `event` is live and destroyed once.
    pub unsafe fn event_destroy(&self, event: CUevent) -> Result<()> {
        let f = get!(self.cuEventDestroy, "events");
        // SAFETY: guaranteed by the caller.
        self.check("cuEventDestroy_v2", unsafe { f(event) })
    }

    /// `cuEventRecord(event, stream)`.
    ///
    /// # Safety
    /// `event` and `stream` are live and of the same context.
    pub unsafe fn event_record(&self, event: CUevent, stream: CUstream) -> Result<()> {
        let f = get!(self.cuEventRecord, "events");
        // SAFETY: guaranteed by the caller.
        self.check("cuEventRecord", unsafe { f(event, stream) })
    }

    /// `cuEventQuery`: `true` when complete, `false` on `CUDA_ERROR_NOT_READY`.
    ///
    /// # Safety
    /// `event` is live.
    pub unsafe fn event_query(&self, event: CUevent) -> Result<bool> {
        let f = get!(self.cuEventQuery, "events");
        // SAFETY: guaranteed by the caller.
        let code = unsafe { f(event) };
        if code == CUresult::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        self.check("cuEventQuery", code).map(|()| true)
    }

    /// `cuEventSynchronize`.
    ///
    /// # Safety
    /// `event` is live.
    pub unsafe fn event_synchronize(&self, event: CUevent) -> Result<()> {
        let f = get!(self.cuEventSynchronize, "events");
        // SAFETY: guaranteed by the caller.
        self.check("cuEventSynchronize", unsafe { f(event) })
    }

    /// `cuEventElapsedTime` (the CUDA 2.0 export, not 12.8's `_v2`): milliseconds from `start`
    /// to `end`.
    ///
    /// # Safety
    /// Both events are live.
    pub unsafe fn event_elapsed_time(&self, start: CUevent, end: CUevent) -> Result<f32> {
        let f = get!(self.cuEventElapsedTime, "event timing");
        let mut ms: f32 = 0.0;
        // SAFETY: the out-pointer is a live local; the events are guaranteed by the caller.
        self.check("cuEventElapsedTime", unsafe { f(&mut ms, start, end) })?;
        Ok(ms)
    }

    // ----- several devices -----------------------------------------------------------------

    /// `cuDeviceCanAccessPeer(&can, device, peer)`.
    pub fn device_can_access_peer(&self, device: CUdevice_v1, peer: CUdevice_v1) -> Result<bool> {
        let f = get!(self.cuDeviceCanAccessPeer, "peer access");
        let mut can: c_int = 0;
        // SAFETY: the out-pointer is a live local; the driver validates both devices.
        self.check("cuDeviceCanAccessPeer", unsafe {
            f(&mut can, device, peer)
        })?;
        Ok(can != 0)
    }

    /// `cuCtxEnablePeerAccess(peer_context, 0)`: lets the current context address the memory
    /// of `peer_context`. `CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED` is returned as the error it is;
    /// the backend decides what it means.
    ///
    /// # Safety
    /// `peer_context` is a live context.
    pub unsafe fn ctx_enable_peer_access(&self, peer_context: CUcontext) -> Result<()> {
        let f = get!(self.cuCtxEnablePeerAccess, "peer access");
        // SAFETY: guaranteed by the caller; flags must be 0.
        self.check("cuCtxEnablePeerAccess", unsafe { f(peer_context, 0) })
    }

    /// `cuMemcpyPeer(dst, dst_context, src, src_context, bytes)`.
    ///
    /// # Safety
    /// Both contexts are live; `dst..dst+bytes` lies in an allocation of `dst_context` and
    /// `src..src+bytes` in one of `src_context`.
    pub unsafe fn memcpy_peer(
        &self,
        dst: CUdeviceptr_v2,
        dst_context: CUcontext,
        src: CUdeviceptr_v2,
        src_context: CUcontext,
        bytes: usize,
    ) -> Result<()> {
        let f = get!(self.cuMemcpyPeer, "peer copies");
        // SAFETY: guaranteed by the caller; the count is in bytes.
        self.check("cuMemcpyPeer", unsafe {
            f(dst, dst_context, src, src_context, bytes)
        })
    }

    /// `cuMemcpyPeerAsync(dst, dst_context, src, src_context, bytes, stream)`.
    ///
    /// # Safety
    /// As [`CudaDriver::memcpy_peer`], both ranges stay valid until the copy completes, and
    /// `stream` is live.
    pub unsafe fn memcpy_peer_async(
        &self,
        dst: CUdeviceptr_v2,
        dst_context: CUcontext,
        src: CUdeviceptr_v2,
        src_context: CUcontext,
        bytes: usize,
        stream: CUstream,
    ) -> Result<()> {
        let f = get!(self.cuMemcpyPeerAsync, "peer copies");
        // SAFETY: guaranteed by the caller; the count is in bytes.
        self.check("cuMemcpyPeerAsync", unsafe {
            f(dst, dst_context, src, src_context, bytes, stream)
        })
    }

    // ----- managed memory ------------------------------------------------------------------

    /// `cuMemAllocManaged(&ptr, bytes, flags)` in the current context (`CU_MEM_ATTACH_*`).
    pub fn mem_alloc_managed(&self, bytes: usize, flags: c_uint) -> Result<CUdeviceptr_v2> {
        let f = get!(self.cuMemAllocManaged, "managed memory");
        let mut ptr: CUdeviceptr_v2 = 0;
        // SAFETY: the out-pointer is a live local.
        self.check("cuMemAllocManaged", unsafe { f(&mut ptr, bytes, flags) })?;
        Ok(ptr)
    }

    /// `cuMemPrefetchAsync_v2(ptr, bytes, location, 0, stream)`: enqueues on `stream` a
    /// migration of the range to `location` (the flags are reserved: 0).
    ///
    /// # Safety
    /// `stream` is live (or null, the legacy stream of the current context); `ptr..ptr+bytes`
    /// is managed memory that stays allocated until the prefetch has completed.
    pub unsafe fn mem_prefetch_async(
        &self,
        ptr: CUdeviceptr_v2,
        bytes: usize,
        location: CUmemLocation,
        stream: CUstream,
    ) -> Result<()> {
        let f = get!(self.cuMemPrefetchAsync, "managed memory prefetch");
        // SAFETY: guaranteed by the caller; the location is passed by value, the count is in
        // bytes.
        self.check("cuMemPrefetchAsync", unsafe {
            f(ptr, bytes, location, 0, stream)
        })
    }

    /// `cuMemAdvise_v2(ptr, bytes, advice, location)` (the location is ignored by the advice
    /// that names none).
    pub fn mem_advise(
        &self,
        ptr: CUdeviceptr_v2,
        bytes: usize,
        advice: CUmem_advise,
        location: CUmemLocation,
    ) -> Result<()> {
        let f = get!(self.cuMemAdvise, "managed memory advice");
        // SAFETY: every argument is passed by value; the driver checks that the range is
        // managed memory, and advice reads and writes none of it.
        self.check("cuMemAdvise", unsafe { f(ptr, bytes, advice, location) })
    }

    // ----- memory pools --------------------------------------------------------------------

    /// `cuDeviceGetDefaultMemPool(&pool, device)`.
    pub fn device_get_default_mem_pool(&self, device: CUdevice_v1) -> Result<CUmemoryPool> {
        let f = get!(self.cuDeviceGetDefaultMemPool, "memory pools");
        let mut pool: CUmemoryPool = std::ptr::null_mut();
        // SAFETY: the out-pointer is a live local; the driver validates the device.
        self.check("cuDeviceGetDefaultMemPool", unsafe { f(&mut pool, device) })?;
        Ok(pool)
    }

    /// `cuMemPoolGetAttribute(pool, attribute, &value)` for the 64-bit attributes
    /// (`RELEASE_THRESHOLD`, `RESERVED_MEM_*`, `USED_MEM_*`).
    ///
    /// # Safety
    /// `pool` is live and `attribute` is one whose value is a `cuuint64_t`.
    pub unsafe fn mem_pool_get_attribute_u64(
        &self,
        pool: CUmemoryPool,
        attribute: CUmemPool_attribute,
    ) -> Result<u64> {
        let f = get!(self.cuMemPoolGetAttribute, "memory pools");
        let mut value: u64 = 0;
        // SAFETY: the value is a live 64-bit local, the size the caller's attribute has.
        self.check("cuMemPoolGetAttribute", unsafe {
            f(pool, attribute, (&raw mut value).cast::<c_void>())
        })?;
        Ok(value)
    }

    /// `cuMemPoolSetAccess(pool, {device, READWRITE}, 1)`: lets `device` read and write what
    /// `pool` allocates (peer access enabled on contexts does not cover pool memory).
    ///
    /// # Safety
    /// `pool` is live.
    pub unsafe fn mem_pool_grant_read_write(
        &self,
        pool: CUmemoryPool,
        device: CUdevice_v1,
    ) -> Result<()> {
        let f = get!(self.cuMemPoolSetAccess, "memory pools");
        let desc = CUmemAccessDesc_v1 {
            location: CUmemLocation {
                type_: CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                __bindgen_anon_1: CUmemLocation_st__bindgen_ty_1 { id: device },
            },
            flags: CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: one descriptor, a live local the driver only reads during the call.
        self.check("cuMemPoolSetAccess", unsafe { f(pool, &raw const desc, 1) })
    }

    /// `cuMemPoolSetAttribute(pool, attribute, &value)` for the 64-bit attributes
    /// (`RELEASE_THRESHOLD`, and 0 to reset the `*_HIGH` watermarks).
    ///
    /// # Safety
    /// `pool` is live and `attribute` is one whose value is a `cuuint64_t`.
    pub unsafe fn mem_pool_set_attribute_u64(
        &self,
        pool: CUmemoryPool,
        attribute: CUmemPool_attribute,
        value: u64,
    ) -> Result<()> {
        let f = get!(self.cuMemPoolSetAttribute, "memory pools");
        let mut value = value;
        // SAFETY: the value is a live 64-bit local, the size the caller's attribute has.
        self.check("cuMemPoolSetAttribute", unsafe {
            f(pool, attribute, (&raw mut value).cast::<c_void>())
        })
    }

    /// `cuMemPoolTrimTo(pool, keep)`.
    ///
    /// # Safety
    /// `pool` is live.
    pub unsafe fn mem_pool_trim_to(&self, pool: CUmemoryPool, keep: usize) -> Result<()> {
        let f = get!(self.cuMemPoolTrimTo, "memory pools");
        // SAFETY: guaranteed by the caller.
        self.check("cuMemPoolTrimTo", unsafe { f(pool, keep) })
    }

    // ----- inter-process sharing -----------------------------------------------------------

    /// `cuIpcGetMemHandle(&handle, ptr)`: the 64 bytes another process opens.
    ///
    /// # Safety
    /// `ptr` is the base of a live `cuMemAlloc` allocation of the current context.
    pub unsafe fn ipc_get_mem_handle(
        &self,
        ptr: CUdeviceptr_v2,
    ) -> Result<[u8; CU_IPC_HANDLE_SIZE as usize]> {
        let f = get!(self.cuIpcGetMemHandle, "IPC memory handles");
        let mut handle = CUipcMemHandle_v1 {
            reserved: [0; CU_IPC_HANDLE_SIZE as usize],
        };
        // SAFETY: the out-pointer is a live local; `ptr` is guaranteed by the caller.
        self.check("cuIpcGetMemHandle", unsafe { f(&mut handle, ptr) })?;
        Ok(handle.reserved.map(|b| b as u8))
    }

    /// `cuIpcOpenMemHandle_v2(&ptr, handle, flags)` (`CU_IPC_MEM_*` flags) in the current
    /// context.
    pub fn ipc_open_mem_handle(
        &self,
        handle: &[u8; CU_IPC_HANDLE_SIZE as usize],
        flags: c_uint,
    ) -> Result<CUdeviceptr_v2> {
        let f = get!(self.cuIpcOpenMemHandle, "IPC memory handles");
        let raw = CUipcMemHandle_v1 {
            reserved: handle.map(|b| b as c_char),
        };
        let mut ptr: CUdeviceptr_v2 = 0;
        // SAFETY: the out-pointer is a live local; the handle is passed by value and the
        // driver validates it.
        self.check("cuIpcOpenMemHandle_v2", unsafe { f(&mut ptr, raw, flags) })?;
        Ok(ptr)
    }

    /// `cuMemGetAddressRange_v2(&base, &size, ptr)`: the allocation or mapping holding `ptr`
    /// in the current context, as (base, bytes).
    pub fn mem_get_address_range(&self, ptr: CUdeviceptr_v2) -> Result<(CUdeviceptr_v2, usize)> {
        let f = get!(self.cuMemGetAddressRange, "IPC memory handles");
        let (mut base, mut size): (CUdeviceptr_v2, usize) = (0, 0);
        // SAFETY: both out-pointers are live locals; the driver validates `ptr`.
        self.check("cuMemGetAddressRange_v2", unsafe {
            f(&mut base, &mut size, ptr)
        })?;
        Ok((base, size))
    }

    /// `cuIpcCloseMemHandle(ptr)`.
    ///
    /// # Safety
    /// `ptr` came from [`CudaDriver::ipc_open_mem_handle`] in the current context, is closed
    /// once, and no work still uses it.
    pub unsafe fn ipc_close_mem_handle(&self, ptr: CUdeviceptr_v2) -> Result<()> {
        let f = get!(self.cuIpcCloseMemHandle, "IPC memory handles");
        // SAFETY: guaranteed by the caller.
        self.check("cuIpcCloseMemHandle", unsafe { f(ptr) })
    }

    // ----- modules and launch --------------------------------------------------------------

    /// `cuModuleLoadData(image)`: loads PTX (NUL-terminated) or a cubin into the current context.
    ///
    /// # Safety
    /// `image` points to a complete PTX text (NUL-terminated) or cubin image.
    pub unsafe fn module_load_data(&self, image: *const c_void) -> Result<CUmodule> {
        let f = get!(self.cuModuleLoadData, "kernel modules");
        let mut module: CUmodule = std::ptr::null_mut();
        // SAFETY: the out-pointer is a live local; the image is guaranteed by the caller.
        self.check("cuModuleLoadData", unsafe { f(&mut module, image) })?;
        Ok(module)
    }

    /// `cuModuleLoadDataEx(image)` with the JIT's info and error logs captured: returns the
    /// module, or the error and the error log (empty when the JIT wrote none). The info log
    /// (e.g. spill warnings) is returned with the module.
    ///
    /// # Safety
    /// `image` points to a complete PTX text (NUL-terminated) or cubin image.
    pub unsafe fn module_load_data_ex(
        &self,
        image: *const c_void,
    ) -> std::result::Result<(CUmodule, String), (Error, String)> {
        use gpu_mem_cuda_sys::driver::CUjit_option as O;
        const LOG: usize = 16 * 1024;
        let Some(f) = self.symbols.cuModuleLoadDataEx else {
            // Old drivers: the plain call, without logs.
            // SAFETY: guaranteed by the caller.
            return unsafe { self.module_load_data(image) }
                .map(|m| (m, String::new()))
                .map_err(|e| (e, String::new()));
        };
        let mut info = vec![0u8; LOG];
        let mut error = vec![0u8; LOG];
        let mut options = [
            O::CU_JIT_INFO_LOG_BUFFER,
            O::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            O::CU_JIT_ERROR_LOG_BUFFER,
            O::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            O::CU_JIT_LOG_VERBOSE,
        ];
        // Option values are passed in pointer-sized slots: buffers as pointers, sizes and
        // flags as integers cast to pointers (the driver writes the filled sizes back).
        let mut values: [*mut c_void; 5] = [
            info.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(LOG),
            error.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(LOG),
            std::ptr::without_provenance_mut(1),
        ];
        let mut module: CUmodule = std::ptr::null_mut();
        // SAFETY: the option and value arrays have the same length, the log buffers are live
        // and LOG bytes long; the image is guaranteed by the caller.
        let code = unsafe {
            f(
                &mut module,
                image,
                options.len() as c_uint,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        let text = |buffer: &[u8]| {
            let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
            String::from_utf8_lossy(&buffer[..end])
                .trim_end()
                .to_string()
        };
        match self.check("cuModuleLoadDataEx", code) {
            Ok(()) => Ok((module, text(&info))),
            Err(err) => Err((err, text(&error))),
        }
    }

    /// `cuFuncGetAttribute(attribute, function)`.
    ///
    /// # Safety
    /// `function` is live.
    pub unsafe fn func_get_attribute(
        &self,
        function: CUfunction,
        attribute: CUfunction_attribute,
    ) -> Result<i32> {
        let f = get!(self.cuFuncGetAttribute, "kernel attributes");
        let mut value: c_int = 0;
        // SAFETY: the out-pointer is a live local; the function is guaranteed by the caller.
        self.check("cuFuncGetAttribute", unsafe {
            f(&mut value, attribute, function)
        })?;
        Ok(value)
    }

    /// The byte size of every parameter of `function` (`cuFuncGetParamInfo`, CUDA 12.4+):
    /// `Ok(None)` when the driver lacks the call or cannot describe the function.
    ///
    /// `count` is the number of parameters where the caller knows it (from the PTX): then only
    /// those indexes are asked, and a driver that knows fewer is answered with `None`. Asking
    /// one index past the last is how the count is found otherwise; the driver answers it with
    /// `CUDA_ERROR_INVALID_VALUE`, which compute-sanitizer reports as an API error (seen on an
    /// H200, driver 580.159), so it is done only when the count is unknown.
    ///
    /// # Safety
    /// `function` is live.
    pub unsafe fn func_param_sizes(
        &self,
        function: CUfunction,
        count: Option<usize>,
    ) -> Result<Option<Vec<usize>>> {
        let Some(f) = self.symbols.cuFuncGetParamInfo else {
            return Ok(None);
        };
        let mut sizes = Vec::new();
        // A kernel has at most 32 764 bytes of parameters, so at most that many parameters.
        for index in 0..count.unwrap_or(32_768) {
            let (mut offset, mut size) = (0usize, 0usize);
            // SAFETY: both out-pointers are live locals; the function is guaranteed by the caller.
            let code = unsafe { f(function, index, &mut offset, &mut size) };
            if code == CUresult::CUDA_ERROR_INVALID_VALUE {
                // Past the last parameter: the end when probing, a disagreement with the
                // caller's count otherwise (whose sizes are then the ones to use).
                return Ok(count.is_none().then_some(sizes));
            }
            if code == CUresult::CUDA_ERROR_NOT_SUPPORTED {
                // The driver cannot describe this function's parameters.
                return Ok(None);
            }
            self.check("cuFuncGetParamInfo", code)?;
            sizes.push(size);
        }
        Ok(Some(sizes))
    }

    /// `cuModuleGetFunction(module, name)`.
    ///
    /// # Safety
    /// `module` is live.
    pub unsafe fn module_get_function(&self, module: CUmodule, name: &CStr) -> Result<CUfunction> {
        let f = get!(self.cuModuleGetFunction, "kernel modules");
        let mut function: CUfunction = std::ptr::null_mut();
        // SAFETY: the out-pointer is a live local, `name` is NUL-terminated, `module` is live.
        self.check("cuModuleGetFunction", unsafe {
            f(&mut function, module, name.as_ptr())
        })?;
        Ok(function)
    }

    /// `cuModuleGetGlobal_v2`: the device address and size of the module variable `name`
    /// (as the PTX names it).
    ///
    /// # Safety
    /// `module` is live (the driver takes the handle for a pointer).
    pub unsafe fn module_get_global(
        &self,
        module: CUmodule,
        name: &CStr,
    ) -> Result<(CUdeviceptr_v2, usize)> {
        let f = get!(self.cuModuleGetGlobal, "module variables");
        let mut ptr: CUdeviceptr_v2 = 0;
        let mut bytes: usize = 0;
        // SAFETY: the out-pointers are live locals, `name` is NUL-terminated, `module` is live.
        self.check("cuModuleGetGlobal", unsafe {
            f(&mut ptr, &mut bytes, module, name.as_ptr())
        })?;
        Ok((ptr, bytes))
    }

    /// `cuModuleUnload`.
    ///
    /// # Safety
    /// `module` is live, unloaded once, and none of its functions is running or used later.
    pub unsafe fn module_unload(&self, module: CUmodule) -> Result<()> {
        let f = get!(self.cuModuleUnload, "kernel modules");
        // SAFETY: guaranteed by the caller.
        self.check("cuModuleUnload", unsafe { f(module) })
    }

    /// `cuFuncSetAttribute(function, attribute, value)`.
    ///
    /// # Safety
    /// `function` is live.
    pub unsafe fn func_set_attribute(
        &self,
        function: CUfunction,
        attribute: CUfunction_attribute,
        value: i32,
    ) -> Result<()> {
        let f = get!(self.cuFuncSetAttribute, "kernel attributes");
        // SAFETY: guaranteed by the caller.
        self.check("cuFuncSetAttribute", unsafe {
            f(function, attribute, value)
        })
    }

    /// `cuLaunchKernel(function, grid, block, shared_bytes, stream, params, NULL)`, or with
    /// `cooperative` `cuLaunchCooperativeKernel` with the same arguments: every block resident
    /// at once, so the kernel may synchronize the grid.
    ///
    /// # Safety
    /// `function` and `stream` are live; `params` holds one pointer per kernel parameter, each
    /// pointing to a value with exactly that parameter's size and layout; every buffer the
    /// kernel touches stays valid until it completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn launch_kernel(
        &self,
        function: CUfunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        stream: CUstream,
        params: *mut *mut c_void,
        cooperative: bool,
    ) -> Result<()> {
        let [gx, gy, gz] = grid;
        let [bx, by, bz] = block;
        if cooperative {
            let f = get!(self.cuLaunchCooperativeKernel, "cooperative launch");
            // SAFETY: guaranteed by the caller.
            let code = unsafe {
                f(
                    function,
                    gx,
                    gy,
                    gz,
                    bx,
                    by,
                    bz,
                    shared_bytes,
                    stream,
                    params,
                )
            };
            return self.check("cuLaunchCooperativeKernel", code);
        }
        let f = get!(self.cuLaunchKernel, "kernel launch");
        // SAFETY: guaranteed by the caller; `extra` is null because parameters go in `params`.
        let code = unsafe {
            f(
                function,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                shared_bytes,
                stream,
                params,
                std::ptr::null_mut(),
            )
        };
        self.check("cuLaunchKernel", code)
    }
}

#[cfg(test)]
mod tests {
    use super::{CUresult, is_device_fault};

    #[test]
    fn faults_that_end_the_context_are_told_from_misuse() {
        for code in [
            CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
            CUresult::CUDA_ERROR_LAUNCH_FAILED,
            CUresult::CUDA_ERROR_ECC_UNCORRECTABLE,
            CUresult::CUDA_ERROR_NVLINK_UNCORRECTABLE,
            CUresult::CUDA_ERROR_CONTAINED,
            CUresult::CUDA_ERROR_TENSOR_MEMORY_LEAK,
        ] {
            assert!(is_device_fault(code), "{code:?}");
        }
        for code in [
            CUresult::CUDA_SUCCESS,
            CUresult::CUDA_ERROR_INVALID_VALUE,
            CUresult::CUDA_ERROR_OUT_OF_MEMORY,
            CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
            CUresult::CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
        ] {
            assert!(!is_device_fault(code), "{code:?}");
        }
    }
}
