//! [`Launch`] on the simulator: a grid runs on the host's worker threads (see `executor`), the
//! portable source compiled by the host C++ compiler or the closure form; module variables are
//! the loaded library's own, mapped into the device's address space.

use crate::{SimBackend, executor, launch, reentry, source};
use gpu_mem_core::backend::{DevicePtr, Launch, StreamHandle};
use gpu_mem_core::kernel::{Kernel, LaunchArg, LaunchConfig, Module};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{Error, Result};
use std::ptr::NonNull;

// SAFETY: a launch without a stream waits for the whole device and runs the grid before it
// returns; one on a stream is that stream's job. Arguments are resolved against live memory and
// every access is bounds-checked; module variables are mapped once, never unmapped while the
// backend lives.
unsafe impl Launch for SimBackend {
    unsafe fn launch(
        &self,
        device: usize,
        kernel: &Kernel,
        config: &LaunchConfig,
        args: &[LaunchArg],
        stream: Option<StreamHandle>,
    ) -> Result<()> {
        let d = self.device(device)?;
        if !matches!(d.warp_size, 32 | 64) {
            // `SimDeviceConfig` is plain data; only `from_env` checks what it parses. Warp masks
            // and ballots are 64 bits wide.
            return Err(Error::InvalidLaunch {
                kernel: kernel.name().to_string(),
                reason: format!(
                    "simulated device {device} has a warp size of {}; the simulator runs warps of 32 or 64 threads (SimDeviceConfig::warp_size)",
                    d.warp_size
                ),
            });
        }
        // Portable source is what a GPU runs, so it is preferred; the closure form is for
        // kernels written only for the simulator.
        let code = launch::LaunchCode::of(kernel, d.build())?;
        code.check_args(kernel.name(), args)?;
        executor::check_config(kernel, config, d.shared_memory, code.static_shared())?;
        let resolved = executor::resolve_args(&d.memory, kernel.name(), args)?;
        let parameters = executor::parameters(kernel.name(), code.code(), args, &resolved)?;
        if d.checks.initcheck && !code.is_compiled() {
            // initcheck sees a compiled kernel's writes one by one, not a closure's: what a
            // closure is given counts as written, so that no later read of it is refused.
            for range in resolved.iter().filter_map(executor::Resolved::range) {
                range.region.mark_written(range.offset, range.len);
            }
        }
        let name = kernel.name().to_string();
        let config = *config;
        // What a checked program's threads may touch of global memory.
        let memory = d
            .checks
            .any()
            .then(|| std::sync::Arc::new(d.memory.accessible()));
        let limits = executor::Limits {
            warp_size: d.warp_size,
            shared_memory: d.shared_memory,
            watchdog: d.watchdog,
            thread_order: d.thread_order,
        };
        match stream {
            None => {
                reentry::refuse_in_kernel("synchronous kernel launch")?;
                d.activity.wait_idle();
                executor::run_grid(
                    &name,
                    code.code(),
                    &resolved,
                    &parameters,
                    &config,
                    limits,
                    memory.as_deref().map(|m| (m, d.checks)),
                )
            }
            Some(stream) => {
                let checks = d.checks;
                self.enqueue(
                    d,
                    stream,
                    "kernel launch",
                    Box::new(move || {
                        let ran = executor::run_grid(
                            &name,
                            code.code(),
                            &resolved,
                            &parameters,
                            &config,
                            limits,
                            memory.as_deref().map(|m| (m, checks)),
                        );
                        // The job may hold the last clone of the kernel, whose captures are dropped
                        // here: a blocking call from their `Drop` would wait for this very job, so
                        // it is refused as one from the kernel's threads is.
                        let _in_kernel = reentry::enter_kernel(&name);
                        drop(code);
                        ran.map_err(|e| e.to_string())
                    }),
                )
            }
        }
    }

    /// The module's library holds the variable in this process (one copy for every simulated
    /// device: libraries are loaded once per process); it is mapped into the device's address
    /// space once, like mapped host memory, so copies reach it and kernels reach it directly.
    fn module_global(
        &self,
        device: usize,
        module: &Module,
        name: &str,
    ) -> Result<(DevicePtr, usize)> {
        let d = self.device(device)?;
        let key = (module.clone(), name.trim().to_string());
        let mut symbols = lock(&d.symbols);
        if let Some(found) = symbols.get(&key) {
            return Ok(*found);
        }
        let variable = source::variable(module, name, d.build())?;
        let host = NonNull::new(std::ptr::with_exposed_provenance_mut::<u8>(
            variable.address,
        ))
        .ok_or_else(|| Error::InvalidArgument {
            name: "symbol",
            reason: format!("the variable `{name}` has no address"),
        })?;
        let ptr = d.memory.map_host(host, variable.size.max(1))?;
        symbols.insert(key, (ptr, variable.size));
        Ok((ptr, variable.size))
    }
}
