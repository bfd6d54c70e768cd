//! The kernel building blocks under `Launch::launch`, public for callers that manage modules
//! themselves: NVRTC compilation for a device, module loading and unloading, function lookup
//! and a raw `cuLaunchKernel`.
//!
//! Like the rest of the backend this has not run on a GPU; the stand-in driver of the tests
//! checks argument order, handle use and the parameter bytes only.

use super::CudaBackend;
use crate::nvrtc::{CodeKind, Compiled, ComputeCapability, Nvrtc, choose_target};
use gpu_mem_core::backend::StreamHandle;
use gpu_mem_core::kernel::LaunchConfig;
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use std::ffi::{CString, c_void};
use std::sync::Arc;

/// The NVRTC option that keeps source line information in the generated code.
pub const NVRTC_LINE_INFO: &str = "-lineinfo";

/// A loaded module (the `CUmodule` address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ModuleHandle(pub u64);

/// A kernel of a loaded module (the `CUfunction` address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FunctionHandle(pub u64);

impl CudaBackend {
    /// NVRTC, loaded on first use ([`Nvrtc::load_for_driver`]: `GPU_MEM_NVRTC_LIBRARY`, else the
    /// newest whose code this driver runs) unless one was given with [`CudaBackend::use_nvrtc`].
    pub fn nvrtc(&self) -> Result<Arc<Nvrtc>> {
        let mut slot = lock(&self.nvrtc);
        if let Some(nvrtc) = slot.as_ref() {
            return Ok(Arc::clone(nvrtc));
        }
        let nvrtc = Arc::new(Nvrtc::load_for_driver(self.driver.driver_get_version()?)?);
        *slot = Some(Arc::clone(&nvrtc));
        Ok(nvrtc)
    }

    /// Uses `nvrtc` for later compilations (e.g. one loaded from an explicit path).
    pub fn use_nvrtc(&self, nvrtc: Arc<Nvrtc>) {
        *lock(&self.nvrtc) = Some(nvrtc);
    }

    /// What [`CudaBackend::compile_kernel`] produces for `device` (see
    /// [`choose_target`]).
    pub fn kernel_target(&self, device: usize) -> Result<(CodeKind, ComputeCapability)> {
        let capability = self.slot(device)?.facts.capability;
        let nvrtc = self.nvrtc()?;
        choose_target(
            capability,
            &nvrtc.supported_archs()?,
            nvrtc.version()?,
            self.driver.driver_get_version()?,
        )
        .map_err(|error| match error {
            // Name the library: another NVRTC may be installed that would do.
            Error::NotSupportedByBackend {
                backend,
                feature,
                reason,
            } => Error::NotSupportedByBackend {
                backend,
                feature,
                reason: format!(
                    "{reason} (NVRTC loaded from {}; GPU_MEM_NVRTC_LIBRARY names another)",
                    nvrtc.path()
                ),
            },
            other => other,
        })
    }

    /// Compiles portable kernel source (with `gpu_mem.h`) for `device`, with line information
    /// (`-lineinfo`) so profilers and compute-sanitizer point at the kernel's source lines.
    pub fn compile_kernel(&self, device: usize, source: &str, name: &str) -> Result<Compiled> {
        let (kind, capability) = self.kernel_target(device)?;
        self.nvrtc()?
            .compile(source, name, capability, kind, &[NVRTC_LINE_INFO])
    }

    /// `cuModuleLoadDataEx` of compiled code into the device's primary context; a refusal the
    /// JIT explains in its error log is [`Error::KernelCompile`] carrying that log (its kernel
    /// name is empty here; launches fill it in).
    pub fn module_load(&self, device: usize, code: &Compiled) -> Result<ModuleHandle> {
        let _cx = self.current(device)?;
        let image = match code.kind {
            // PTX is handed over as NUL-terminated text.
            CodeKind::Ptx => CString::new(code.code.clone())
                .map_err(|_| Error::InvalidArgument {
                    name: "code",
                    reason: "PTX contains a NUL byte".into(),
                })?
                .into_bytes_with_nul(),
            CodeKind::Cubin => code.code.clone(),
        };
        // SAFETY: `image` is a complete PTX text with its NUL or a complete cubin, alive for
        // the call (the driver copies what it keeps).
        let loaded = unsafe {
            self.driver
                .module_load_data_ex(image.as_ptr().cast::<c_void>())
        };
        match loaded {
            Ok((module, info)) => {
                if !info.is_empty() {
                    tracing::info!(device, log = %info, "CUDA JIT info log");
                }
                Ok(ModuleHandle(module as usize as u64))
            }
            // The JIT explained why it refused the code: that is a compile error.
            Err((err @ Error::Native { .. }, log)) if !log.is_empty() => {
                Err(Error::KernelCompile {
                    kernel: String::new(),
                    compiler: format!(
                        "the CUDA driver's JIT (cuModuleLoadDataEx, {} code)",
                        match code.kind {
                            CodeKind::Ptx => "PTX",
                            CodeKind::Cubin => "cubin",
                        }
                    ),
                    log: format!("{err}\n{log}"),
                })
            }
            Err((err, _)) => Err(err),
        }
    }

    /// `cuModuleUnload`.
    ///
    /// # Safety
    /// `module` came from [`CudaBackend::module_load`] on `device`, is unloaded once, and none
    /// of its kernels is still running or used afterwards.
    pub unsafe fn module_unload(&self, device: usize, module: ModuleHandle) -> Result<()> {
        let _cx = self.current(device)?;
        // SAFETY: guaranteed by the caller.
        unsafe { self.driver.module_unload(module.0 as usize as _) }
    }

    /// `cuModuleGetFunction`: the `extern "C"` kernel `name` of `module`.
    ///
    /// # Safety
    /// `module` came from [`CudaBackend::module_load`] on `device` and is not unloaded before
    /// this returns (the driver takes the handle for a pointer and does not validate it).
    pub unsafe fn module_function(
        &self,
        device: usize,
        module: ModuleHandle,
        name: &str,
    ) -> Result<FunctionHandle> {
        let _cx = self.current(device)?;
        let name_c = CString::new(name).map_err(|_| Error::InvalidArgument {
            name: "name",
            reason: "contains a NUL byte".into(),
        })?;
        // SAFETY: the caller's contract: `module` is loaded on `device`, current here.
        let function = unsafe {
            self.driver
                .module_get_function(module.0 as usize as _, &name_c)
        }?;
        Ok(FunctionHandle(function as usize as u64))
    }

    /// `cuLaunchKernel(function, grid, block, shared bytes, stream, params, NULL)` —
    /// `cuLaunchCooperativeKernel` for a cooperative configuration — with no checks of its own
    /// (`Launch::launch` validates the configuration and builds `params`).
    ///
    /// # Safety
    /// `function` belongs to a module still loaded on `device`; `stream` is live (or the null
    /// handle for the legacy default stream); `params` holds one pointer per kernel parameter,
    /// each to a value with that parameter's exact size and layout (for `gm_array<T, N>`:
    /// `#[repr(C)] { u64 data, [i64; N] shape, [i64; N] strides }`); every buffer the kernel
    /// touches stays valid and unaliased until the stream passes the launch.
    pub unsafe fn launch_function(
        &self,
        device: usize,
        function: FunctionHandle,
        config: &LaunchConfig,
        stream: StreamHandle,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        let shared_bytes =
            u32::try_from(config.shared_bytes).map_err(|_| Error::InvalidArgument {
                name: "shared_bytes",
                reason: format!("{} does not fit 32 bits", config.shared_bytes),
            })?;
        let _cx = self.current(device)?;
        let (function, grid, block) = (
            function.0 as usize as _,
            config.grid.to_array(),
            config.block.to_array(),
        );
        let (stream, params) = (stream.0 as usize as _, params.as_mut_ptr());
        // SAFETY: guaranteed by the caller; the driver reads exactly as many parameter
        // pointers as the kernel has parameters.
        unsafe {
            self.driver.launch_kernel(
                function,
                grid,
                block,
                shared_bytes,
                stream,
                params,
                config.cooperative,
            )
        }
    }
}
