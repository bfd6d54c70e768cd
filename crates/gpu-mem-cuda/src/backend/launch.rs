//! `Backend::launch` on CUDA: portable source → NVRTC → module (cached) → `cuLaunchKernel`.
//!
//! # Contract
//!
//! 1. A kernel without portable source is [`Error::NotSupportedByBackend`]: it can only run on
//!    the simulator.
//! 2. The configuration is checked against the device's limits ([`LaunchLimits::check`](super::limits::LaunchLimits::check)) and
//!    the arguments are encoded ([`KernelParams::build`]) before anything is compiled, so bad
//!    launches fail fast with [`Error::InvalidLaunch`] naming the kernel.
//! 3. The source is compiled once per (kernel, device) by NVRTC with the prelude
//!    (`#include "gpu_mem.h"` is put in front, so sources may include it or not; `#line` keeps
//!    NVRTC's line numbers those of the kernel's own code), for the target
//!    [`CudaBackend::kernel_target`] picks; the module stays loaded until the backend is
//!    dropped. An entry point missing from the compiled code is [`Error::InvalidLaunch`].
//! 4. `stream: None` launches on the legacy default stream — ordered after the work of every
//!    stream gpu-mem creates, which are blocking — and then waits for that stream, so the
//!    kernel's own failure (e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`) is this call's error. With a
//!    stream the launch is only enqueued; failures surface at the stream's synchronisation.
//! 5. Driver errors stay [`Error::Native`] (call, code and code name from the driver), with the
//!    kernel's name added to the description.
//! 6. Once compiled, the function itself is checked before `cuLaunchKernel`: where the driver
//!    has `cuFuncGetParamInfo` (CUDA 12.4+), a wrong argument count or an argument whose size
//!    differs from the compiled parameter's is [`Error::InvalidLaunch`] (older drivers would
//!    read past the buffers); the function's static shared memory (`cuFuncGetAttribute
//!    SHARED_SIZE_BYTES`) plus the dynamic request must fit the device's opt-in maximum, and
//!    where they exceed the default 48 KiB the kernel opts in with
//!    `cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)` (once per size increase).

use super::kernels::FunctionHandle;
use super::module_cache::LoadedKernel;
use super::params::KernelParams;
use super::{CudaBackend, legacy_stream};
use crate::driver::sys::{CUfunction_attribute, CUresult};
use crate::nvrtc::PRELUDE_NAME;
use gpu_mem_core::backend::StreamHandle;
use gpu_mem_core::kernel::{Kernel, KernelSource, LaunchArg, LaunchConfig};
use gpu_mem_core::{BackendKind, Error, Result};

/// What the compiled function says about itself, read once after loading.
#[derive(Debug, Clone, Default)]
pub struct FunctionInfo {
    /// Byte size of each parameter (`None`: the driver cannot say).
    pub param_sizes: Option<Vec<usize>>,
    /// Static shared memory in bytes.
    pub static_shared: usize,
    /// Dynamic shared memory the function has been opted in to (0: the default).
    pub dynamic_opt_in: usize,
    /// The most threads per block the compiled function can run
    /// (`CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`: its register use may allow fewer than the
    /// device's maximum).
    pub max_threads: usize,
}

/// What NVRTC calls the kernel's source in messages: the kernel name, made safe for a `#line`
/// directive.
fn program_name(kernel: &Kernel) -> String {
    let safe: String = kernel
        .name()
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\0' => '_',
            other => other,
        })
        .collect();
    format!("{safe}.cu")
}

/// The text NVRTC compiles: the prelude's include, then the kernel's code from its line 1.
fn full_source(program: &str, code: &str) -> String {
    format!("#include \"{PRELUDE_NAME}\"\n#line 1 \"{program}\"\n{code}")
}

/// Adds the kernel's name to a driver error, keeping call, code and code name.
fn in_kernel(err: Error, kernel: &Kernel) -> Error {
    match err {
        Error::Native {
            backend,
            call,
            code,
            code_name,
            description,
        } => Error::Native {
            backend,
            call,
            code,
            code_name,
            description: format!("kernel `{}`: {description}", kernel.name()),
        },
        Error::DeviceLost {
            backend,
            device,
            fault,
            recovery,
        } => Error::DeviceLost {
            backend,
            device,
            fault: format!("kernel `{}`: {fault}", kernel.name()),
            recovery,
        },
        other => other,
    }
}

impl CudaBackend {
    /// Compiles, loads and looks up `kernel` for `device`, or returns the cached result.
    fn kernel_function(
        &self,
        device: usize,
        kernel: &Kernel,
        source: &KernelSource,
    ) -> Result<FunctionHandle> {
        let loaded = self.modules.get_or_build(kernel.id(), device, source, || {
            self.build_kernel(device, kernel, source)
        })?;
        Ok(loaded.function)
    }

    fn build_kernel(
        &self,
        device: usize,
        kernel: &Kernel,
        source: &KernelSource,
    ) -> Result<LoadedKernel> {
        let program = program_name(kernel);
        let compiled =
            self.compile_kernel(device, &full_source(&program, source.code()), &program)?;
        tracing::debug!(
            kernel = kernel.name(),
            device,
            kind = ?compiled.kind,
            capability = %compiled.capability,
            bytes = compiled.code.len(),
            "compiled kernel"
        );
        let module = self.module_load(device, &compiled).map_err(|e| match e {
            Error::KernelCompile { compiler, log, .. } => Error::KernelCompile {
                kernel: kernel.name().to_string(),
                compiler,
                log,
            },
            other => in_kernel(other, kernel),
        })?;
        // SAFETY: `module` was loaded just above on `device` and nothing can unload it yet.
        match unsafe { self.module_function(device, module, &source.entry) } {
            Ok(function) => {
                let info = match self.function_info(device, function) {
                    Ok(info) => info,
                    Err(error) => {
                        // Not cached yet, so nothing else would ever unload it.
                        // SAFETY: the module was loaded just above and nothing has run from it.
                        if let Err(unload) = unsafe { self.module_unload(device, module) } {
                            tracing::warn!(%unload, "unloading a module after a failed query failed");
                        }
                        return Err(in_kernel(error, kernel));
                    }
                };
                self.functions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(function.0, info);
                Ok(LoadedKernel { module, function })
            }
            Err(err) => {
                // SAFETY: the module was loaded just above and nothing has used it.
                if let Err(unload) = unsafe { self.module_unload(device, module) } {
                    tracing::warn!(%unload, "unloading a module without the entry point failed");
                }
                Err(match err {
                    Error::Native { code, .. }
                        if code == i64::from(CUresult::CUDA_ERROR_NOT_FOUND.0) =>
                    {
                        Error::InvalidLaunch {
                            kernel: kernel.name().to_string(),
                            reason: format!(
                                "the compiled source has no entry point `{}` (declare it `extern \"C\" __global__`)",
                                source.entry
                            ),
                        }
                    }
                    other => in_kernel(other, kernel),
                })
            }
        }
    }

    fn function_info(&self, device: usize, function: FunctionHandle) -> Result<FunctionInfo> {
        let _cx = self.current(device)?;
        let raw = function.0 as usize as _;
        // SAFETY: the function was just looked up in a module loaded on this device.
        let param_sizes = unsafe { self.driver.func_param_sizes(raw) }?;
        // SAFETY: as above.
        let static_shared = unsafe {
            self.driver.func_get_attribute(
                raw,
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
            )
        }?;
        // SAFETY: as above.
        let max_threads = unsafe {
            self.driver.func_get_attribute(
                raw,
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            )
        }?;
        Ok(FunctionInfo {
            param_sizes,
            static_shared: usize::try_from(static_shared).unwrap_or(0),
            dynamic_opt_in: 0,
            max_threads: usize::try_from(max_threads).unwrap_or(usize::MAX),
        })
    }

    /// Checks the arguments and shared memory against the compiled function, opting in to
    /// more dynamic shared memory where needed (module contract, point 6).
    fn check_function(
        &self,
        device: usize,
        kernel: &Kernel,
        function: FunctionHandle,
        params: &KernelParams,
        config: &LaunchConfig,
    ) -> Result<()> {
        let invalid = |reason: String| Error::InvalidLaunch {
            kernel: kernel.name().to_string(),
            reason,
        };
        let mut functions = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        let Some(info) = functions.get_mut(&function.0) else {
            return Ok(());
        };
        if let Some(sizes) = &info.param_sizes {
            if sizes.len() != params.len() {
                return Err(invalid(format!(
                    "the compiled kernel takes {} parameter(s), {} argument(s) given",
                    sizes.len(),
                    params.len()
                )));
            }
            for (index, want) in sizes.iter().enumerate() {
                let got = params.bytes(index).map_or(0, <[u8]>::len);
                if got != *want {
                    return Err(invalid(format!(
                        "argument {index} has {got} bytes, the compiled parameter {index} has {want}"
                    )));
                }
            }
        }
        let threads = config.block.count();
        if threads > info.max_threads as u64 {
            return Err(invalid(format!(
                "{threads} threads per block exceed the {} this compiled kernel can run (its \
                 register use allows no more); use smaller blocks",
                info.max_threads
            )));
        }
        let limits = self.slot(device)?.facts.limits;
        let (fixed, dynamic) = (info.static_shared, config.shared_bytes);
        let total = fixed.saturating_add(dynamic);
        if total > limits.max_shared_optin {
            return Err(invalid(format!(
                "{fixed} bytes of static and {dynamic} bytes of dynamic shared memory exceed the device's {} bytes per block",
                limits.max_shared_optin
            )));
        }
        if total > limits.max_shared_per_block && dynamic > info.dynamic_opt_in {
            let value = i32::try_from(dynamic)
                .map_err(|_| invalid(format!("{dynamic} bytes of shared memory")))?;
            let _cx = self.current(device)?;
            // SAFETY: the function belongs to a module loaded on this device (cached until the
            // backend drops); the value fits the opt-in maximum (checked above).
            unsafe {
                self.driver.func_set_attribute(
                    function.0 as usize as _,
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    value,
                )
            }
            .map_err(|e| in_kernel(e, kernel))?;
            info.dynamic_opt_in = dynamic;
        }
        Ok(())
    }

    /// The body of `Backend::launch` (see the module contract).
    ///
    /// # Safety
    /// As `Backend::launch`: every argument's memory stays valid until the kernel completes,
    /// and the kernel stays inside its arguments.
    pub(super) unsafe fn launch_kernel(
        &self,
        device: usize,
        kernel: &Kernel,
        config: &LaunchConfig,
        args: &[LaunchArg],
        stream: Option<StreamHandle>,
    ) -> Result<()> {
        let source = kernel.source().ok_or_else(|| Error::NotSupportedByBackend {
            backend: BackendKind::Cuda,
            feature: "kernels without portable source",
            reason: format!(
                "kernel `{}` has no portable source (add it with Kernel::with_source); it can only run on the simulator",
                kernel.name()
            ),
        })?;
        let slot = self.slot(device)?;
        slot.facts.limits.check(kernel.name(), config)?;
        self.check_peer_args(device, kernel, args)?;
        let mut params = KernelParams::build(kernel.name(), args)?;
        let function = self.kernel_function(device, kernel, source)?;
        self.check_function(device, kernel, function, &params, config)?;
        let mut pointers = params.pointers();
        let handle = stream.unwrap_or(StreamHandle(legacy_stream() as usize as u64));
        tracing::trace!(
            kernel = kernel.name(),
            device,
            grid = %config.grid,
            block = %config.block,
            shared_bytes = config.shared_bytes,
            stream = handle.0,
            "cuLaunchKernel"
        );
        // The driver copies the parameter bytes before returning; the caller keeps the memory the
        // arguments point to valid until the kernel completes.
        // SAFETY: `function` is loaded on `device` (cached until the backend drops); the stream is
        // live (caller) or the legacy one; `pointers` holds one pointer per argument to a buffer
        // with the parameter's exact bytes (params module contract), alive in `params`.
        unsafe { self.launch_function(device, function, config, handle, &mut pointers) }
            .map_err(|e| in_kernel(e, kernel))?;
        if stream.is_none() {
            self.wait_legacy_stream()
                .map_err(|e| in_kernel(e, kernel))?;
        }
        Ok(())
    }

    /// Number of kernel modules currently loaded by launches (all devices).
    pub fn loaded_kernel_modules(&self) -> usize {
        self.modules.loaded()
    }

    /// Unloads every cached module (from the backend's `Drop`), after waiting for each device
    /// so no kernel is still running from them.
    pub(super) fn unload_kernel_modules(&self) {
        for (device, module) in self.modules.take_all() {
            let unloaded = self.current(device).and_then(|_cx| {
                if let Err(err) = self.driver.ctx_synchronize() {
                    tracing::warn!(%err, device, "waiting for kernels before unloading failed");
                }
                // SAFETY: the module came from module_load on `device` and was removed from the
                // cache, so it is unloaded once; the backend is being dropped, so no launch can
                // use it any more, and the device was synchronised above.
                unsafe { self.module_unload(device, module) }
            });
            if let Err(err) = unloaded {
                tracing::warn!(%err, device, "cuModuleUnload failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_starts_with_the_prelude_and_resets_line_numbers() {
        let kernel = Kernel::new("odd \"name\"\\x");
        let program = program_name(&kernel);
        assert_eq!(program, "odd _name__x.cu");
        let text = full_source(&program, "extern \"C\" __global__ void k() {}\n");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "#include \"gpu_mem.h\"");
        assert_eq!(lines[1], "#line 1 \"odd _name__x.cu\"");
        assert_eq!(lines[2], "extern \"C\" __global__ void k() {}");
    }

    #[test]
    fn driver_errors_gain_the_kernel_name_only() {
        let kernel = Kernel::new("saxpy");
        let native = Error::Native {
            backend: BackendKind::Cuda,
            call: "cuStreamSynchronize",
            code: 700,
            code_name: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            description: "an illegal memory access was encountered".into(),
        };
        match in_kernel(native, &kernel) {
            Error::Native {
                call: "cuStreamSynchronize",
                code: 700,
                code_name,
                description,
                ..
            } => {
                assert_eq!(code_name, "CUDA_ERROR_ILLEGAL_ADDRESS");
                assert_eq!(
                    description,
                    "kernel `saxpy`: an illegal memory access was encountered"
                );
            }
            other => panic!("{other:?}"),
        }
        let other = in_kernel(Error::EventTiming { reason: "x" }, &kernel);
        assert!(matches!(other, Error::EventTiming { .. }));
    }
}
