//! [`Launch`] on CUDA: CUDA C++ source → NVRTC → module (cached) → `cuLaunchKernel`.
//!
//! # Contract
//!
//! 1. A kernel without source is [`Error::NotSupportedByBackend`]: it can only run on the
//!    simulator.
//! 2. The configuration is checked against the device's limits
//!    ([`LaunchLimits::check`](super::limits::LaunchLimits::check)) and the arguments are
//!    encoded ([`KernelParams::build`]) before anything is compiled, so bad launches fail fast
//!    with [`Error::InvalidLaunch`] naming the kernel.
//! 3. A module (source and name expressions) is compiled once per device by NVRTC with the
//!    prelude put in front (`full_source`), for the target [`CudaBackend::kernel_target`]
//!    picks; it stays loaded until the backend is dropped, and its kernels share its variables.
//!    A kernel is found by its lowered name, its C name or the C++ name that reads as the entry
//!    (`entry_of`); one the module lacks is [`Error::InvalidLaunch`] listing its kernels.
//! 4. Each argument becomes the bytes of its compiled parameter: an array passed to an 8-byte
//!    parameter (a pointer) is its first element's address, one passed to a parameter of
//!    `8 + 16 N` bytes a `gm_array<T, N>` (`LaunchArg::c_parameter_for`); the sizes are the
//!    driver's (`cuFuncGetParamInfo`, CUDA 12.4+) or else the PTX's.
//! 5. `stream: None` launches on the legacy default stream — ordered after the work of every
//!    stream gpu-mem creates, which are blocking — and then waits for that stream, so the
//!    kernel's own failure (e.g. `CUDA_ERROR_ILLEGAL_ADDRESS`) is this call's error. With a
//!    stream the launch is only enqueued; failures surface at the stream's synchronisation.
//! 6. Driver errors stay [`Error::Native`] (call, code and code name from the driver), with the
//!    kernel's name added to the description.
//! 7. Once compiled, the function itself is checked before `cuLaunchKernel`
//!    (`check_function`): argument count and sizes, block size, and static plus dynamic shared
//!    memory against the device's opt-in maximum, opting in above the default 48 KiB; a
//!    mismatch is [`Error::InvalidLaunch`]. So is a kernel with a grid barrier (`grid_sync`)
//!    launched without `LaunchConfig::cooperative`: on the GPU it would trap and lose the
//!    device.

use super::grid_sync::GridSync;
use super::kernels::{FunctionHandle, NVRTC_LINE_INFO};
use super::module_cache::{LoadedKernel, LoadedModule};
use super::params::KernelParams;
use super::{CudaBackend, legacy_stream, ptx};
use crate::driver::sys::CUfunction_attribute;
use crate::nvrtc::{CompileRequest, PRELUDE_NAME};
use gpu_mem_core::backend::{DevicePtr, Launch, StreamHandle};
use gpu_mem_core::kernel::compiled::normalized;
use gpu_mem_core::kernel::{Kernel, KernelSource, LaunchArg, LaunchConfig, Module};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{BackendKind, Error, Result};
use std::sync::Arc;

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
    /// Where the kernel waits at a grid barrier (from the PTX): it needs a cooperative launch.
    pub grid_sync: Option<GridSync>,
}

/// The name NVRTC looks `entry` up by in `module` (its lowered name, i.e. a name expression;
/// its C name; or the C++ name that reads as it, found by `super::ptx`), with its parameters'
/// sizes as the PTX declares them.
fn entry_of(
    module: &LoadedModule,
    kernel: &Kernel,
    entry: &str,
) -> Result<(String, Option<ptx::PtxEntry>)> {
    let invalid = |reason: String| Error::InvalidLaunch {
        kernel: kernel.name().to_string(),
        reason,
    };
    let wanted = normalized(entry);
    let name = match module.lowered.iter().find(|(e, _)| normalized(e) == wanted) {
        Some((_, lowered)) => lowered.clone(),
        None => match ptx::find_entry(&module.ptx, entry).map_err(invalid)? {
            Some(found) => found.name.clone(),
            // No PTX to read (it should always be there): the C name, which the driver checks.
            None if module.ptx.entries.is_empty() => entry.to_string(),
            None => {
                return Err(invalid(format!(
                    "the source has no kernel `{entry}` to launch; its kernels: {} (a template kernel is launched by an instantiation the module is made with: Kernel::from_source(code, \"name<arguments>\") or Module::with_name_expressions)",
                    ptx::entry_names(&module.ptx).join(", ")
                )));
            }
        },
    };
    let found = module.ptx.entries.iter().find(|e| e.name == name).cloned();
    Ok((name, found))
}

/// What NVRTC calls a module's source in messages: its name, made safe for a `#line`
/// directive.
fn program_name(module: &str) -> String {
    let safe: String = module
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\0' => '_',
            other => other,
        })
        .collect();
    format!("{safe}.cu")
}

/// The text NVRTC compiles: `#include "gpu_mem.h"` (so sources may include it or not), then
/// the kernel's code after a `#line 1`, which keeps NVRTC's line numbers those of the kernel's
/// own code.
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
    /// `module` compiled and loaded on `device` (once; see `module_cache`). `what` names the
    /// kernel that needed it, in errors.
    pub(super) fn loaded_module(
        &self,
        device: usize,
        module: &Module,
        what: &str,
    ) -> Result<Arc<LoadedModule>> {
        self.modules
            .module(module, device, || self.build_module(device, module, what))
    }

    fn build_module(&self, device: usize, module: &Module, what: &str) -> Result<LoadedModule> {
        let program = program_name(module.name());
        let source = full_source(&program, module.code());
        let (kind, capability) = self.kernel_target(device)?;
        let compiled = self.nvrtc()?.compile_request(&CompileRequest {
            source: &source,
            name: &program,
            capability,
            kind,
            extra_options: &[NVRTC_LINE_INFO],
            name_expressions: module.name_expressions(),
        })?;
        tracing::debug!(
            module = module.name(),
            device,
            kind = ?compiled.kind,
            capability = %compiled.capability,
            bytes = compiled.code.len(),
            "compiled module"
        );
        let handle = self.module_load(device, &compiled).map_err(|e| match e {
            Error::KernelCompile { compiler, log, .. } => Error::KernelCompile {
                kernel: what.to_string(),
                compiler,
                log,
            },
            other => other,
        })?;
        Ok(LoadedModule {
            module: handle,
            ptx: ptx::read(&compiled.ptx, &program),
            lowered: compiled.lowered,
        })
    }

    /// The function of `kernel` on `device`, its module compiled and loaded first where it is
    /// not yet.
    fn kernel_function(
        &self,
        device: usize,
        kernel: &Kernel,
        source: &KernelSource,
    ) -> Result<FunctionHandle> {
        let loaded = self.modules.kernel(kernel.id(), device, source, || {
            let module = self.loaded_module(device, &source.module, kernel.name())?;
            let (name, ptx_entry) = entry_of(&module, kernel, &source.entry)?;
            let (ptx_sizes, grid_sync) = match ptx_entry {
                Some(entry) => (Some(entry.param_sizes), entry.grid_sync),
                None => (None, None),
            };
            // SAFETY: the module is loaded on `device` and cached until the backend drops.
            let function = unsafe { self.module_function(device, module.module, &name) }
                .map_err(|e| in_kernel(e, kernel))?;
            let mut info = self
                .function_info(device, function, ptx_sizes.as_ref().map(Vec::len))
                .map_err(|e| in_kernel(e, kernel))?;
            if info.param_sizes.is_none() {
                info.param_sizes = ptx_sizes;
            }
            info.grid_sync = grid_sync;
            lock(&self.functions).insert(function.0, info);
            Ok(LoadedKernel {
                module: module.module,
                function,
            })
        })?;
        Ok(loaded.function)
    }

    /// The byte sizes of `function`'s parameters, where known.
    fn param_sizes(&self, function: FunctionHandle) -> Option<Vec<usize>> {
        lock(&self.functions)
            .get(&function.0)
            .and_then(|info| info.param_sizes.clone())
    }

    /// What the driver says of `function`; `param_count` is its parameter count where the PTX
    /// gives it.
    fn function_info(
        &self,
        device: usize,
        function: FunctionHandle,
        param_count: Option<usize>,
    ) -> Result<FunctionInfo> {
        let _cx = self.current(device)?;
        let raw = function.0 as usize as _;
        // SAFETY: the function was just looked up in a module loaded on this device.
        let param_sizes = unsafe { self.driver.func_param_sizes(raw, param_count) }?;
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
            grid_sync: None,
        })
    }

    /// Checks the arguments and shared memory against the compiled function (module contract,
    /// point 7): a wrong argument count, or an argument whose size differs from the compiled
    /// parameter's, is refused; so is a block larger than the function's own
    /// `CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK`. Its static shared memory
    /// (`cuFuncGetAttribute(SHARED_SIZE_BYTES)`) plus the dynamic request must fit the device's
    /// opt-in maximum; above the default 48 KiB the kernel opts in with
    /// `cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)`, once per size increase.
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
        let mut functions = lock(&self.functions);
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
        if let Some(sync) = info.grid_sync.as_ref().filter(|_| !config.cooperative) {
            return Err(invalid(format!(
                "this_grid().sync() at {} needs a cooperative launch (LaunchConfig::cooperative), \
                 whose blocks all run at once: in another launch the GPU traps at the barrier \
                 and the device is lost, so the launch is refused",
                sync.place()
            )));
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

// SAFETY: a launch without a stream is on the legacy default stream and waited for before it
// returns; one on a stream is that stream's work; the parameters are the arguments' own bytes
// (`KernelParams`), checked against the compiled function. Module variables come from
// cuModuleGetGlobal on a module cached until the backend drops.
unsafe impl Launch for CudaBackend {
    /// See the module contract.
    unsafe fn launch(
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
        // Malformed arguments fail before anything is compiled.
        KernelParams::build(kernel.name(), args, None)?;
        let function = self.kernel_function(device, kernel, source)?;
        let mut params =
            KernelParams::build(kernel.name(), args, self.param_sizes(function).as_deref())?;
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
            cooperative = config.cooperative,
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

    /// The variable the source calls `name` (found in the module's PTX, `cuModuleGetGlobal`),
    /// the module compiled and loaded on `device` first.
    fn module_global(
        &self,
        device: usize,
        module: &Module,
        name: &str,
    ) -> Result<(DevicePtr, usize)> {
        let loaded = self.loaded_module(device, module, module.name())?;
        let Some(found) = ptx::find_variable(&loaded.ptx, name) else {
            let known = ptx::variable_names(&loaded.ptx);
            return Err(Error::InvalidArgument {
                name: "symbol",
                reason: format!(
                    "the module `{}` has no __device__, __constant__ or __managed__ variable `{name}` at file scope; its variables: {}",
                    module.name(),
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            });
        };
        let found = std::ffi::CString::new(found).map_err(|_| Error::InvalidArgument {
            name: "symbol",
            reason: "contains a NUL byte".into(),
        })?;
        let _cx = self.current(device)?;
        // SAFETY: the module is loaded on `device` (current here) and cached until the backend
        // drops.
        let (ptr, bytes) = unsafe {
            self.driver
                .module_get_global(loaded.module.0 as usize as _, &found)
        }?;
        Ok((DevicePtr(ptr), bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_starts_with_the_prelude_and_resets_line_numbers() {
        let program = program_name("odd \"name\"\\x");
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
