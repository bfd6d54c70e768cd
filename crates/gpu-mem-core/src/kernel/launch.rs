//! Launching: [`Device::launch`] (synchronous, Numba's default stream) and [`Stream::launch`].
//!
//! Written here, above `stream` and `device`, which know nothing of kernel arguments: a stream
//! launch is one more submission ([`Stream::submit`]) of a stream.

use crate::backend::Enqueued;
use crate::device::Device;
use crate::error::Result;
use crate::kernel::{Kernel, KernelArg, LaunchArg, LaunchConfig, Prepared};
use crate::memory::{Access, KeepAlive, PendingUses};
use crate::stream::Stream;

/// Prepares every argument; the device memory staged for host arrays is attributed to the
/// launch's caller (the trait objects and the closure here hide it from `#[track_caller]`).
#[track_caller]
fn prepare_all(device: &Device, args: &mut [&mut dyn KernelArg]) -> Result<Vec<Prepared>> {
    let _site = crate::backend::CallSite::enter();
    args.iter_mut().map(|arg| arg.prepare(device)).collect()
}

fn finish_all(args: &mut [&mut dyn KernelArg], prepared: Vec<Prepared>) -> Result<()> {
    // Every argument is finished even if one fails, so no copy-back is lost; the first error wins.
    let mut first = Ok(());
    for (arg, prepared) in args.iter_mut().zip(prepared) {
        let result = arg.finish(prepared);
        if first.is_ok() {
            first = result;
        }
    }
    first
}

impl Device {
    /// Runs `kernel` and waits for it (Numba's `kernel[grid, block](args...)` on the default
    /// stream): host-array arguments are copied back before this returns, and a fault in the
    /// kernel is this call's error.
    ///
    /// # Safety
    /// The kernel's memory accesses are not checked by the compiler: it must stay within its
    /// arguments and not race with other work on the same memory. The arguments must be the
    /// kernel's parameters, in number, order, rank and element type: the GPU backends check
    /// only their sizes (CUDA only with a driver that reports them, 12.4 and newer). (The
    /// simulator checks all of that, bounds and barriers, and reports violations as errors.)
    #[track_caller]
    pub unsafe fn launch(
        &self,
        kernel: &Kernel,
        config: LaunchConfig,
        args: &mut [&mut dyn KernelArg],
    ) -> Result<()> {
        let prepared = prepare_all(self, args)?;
        let launch_args: Vec<LaunchArg> = prepared.iter().map(|p| p.arg.clone()).collect();
        // SAFETY: the prepared arguments (and their staged copies) live until after this
        // synchronous launch returns; the kernel's accesses are the caller's contract.
        unsafe {
            self.backend()
                .launch(self.ordinal(), kernel, &config, &launch_args, None)?
        };
        finish_all(args, prepared)
    }
}

impl Stream {
    /// Enqueues `kernel` on this stream (Numba's `kernel[grid, block, stream](args...)`). Device
    /// memory used by the arguments stays alive until the kernel has run. Host-array arguments
    /// must be copied back, so with any of them this call waits for the stream before returning.
    ///
    /// # Safety
    /// As [`Device::launch`].
    #[track_caller]
    pub unsafe fn launch(
        &self,
        kernel: &Kernel,
        config: LaunchConfig,
        args: &mut [&mut dyn KernelArg],
    ) -> Result<()> {
        let device = self.device();
        let mut prepared = prepare_all(device, args)?;
        for mapped in prepared.iter().filter_map(|p| p.mapped.as_ref()) {
            // The kernel may write mapped memory: other streams' uses must be done first.
            mapped
                .pending()
                .wait_for_stream(Access::Write, self.inner())?;
        }
        let launch_args: Vec<LaunchArg> = prepared.iter().map(|p| p.arg.clone()).collect();
        let mut keep: Vec<KeepAlive> = prepared.iter_mut().filter_map(|p| p.keep.take()).collect();
        // The kernel's code (a closure that may own device memory) is dropped on a host thread
        // when the stream releases it, never on a backend worker inside the launch.
        keep.push(KeepAlive::Other(Box::new(kernel.clone())));
        let uses: Vec<Option<(&PendingUses, Access)>> = prepared
            .iter()
            .map(|p| {
                p.mapped
                    .as_ref()
                    .map(|buffer| (buffer.pending(), Access::Write))
            })
            .collect();
        self.submit(
            || keep,
            &uses,
            |stream| {
                // SAFETY: the stream keeps every argument's device memory alive until the kernel
                // completes; the kernel's accesses are the caller's contract.
                unsafe {
                    device.backend().launch(
                        device.ordinal(),
                        kernel,
                        &config,
                        &launch_args,
                        Some(stream),
                    )
                }
                .map(|()| Enqueued::Queued)
            },
        )?;
        if args.iter().any(|arg| arg.needs_finish()) {
            self.synchronize()?;
            finish_all(args, prepared)?;
        }
        Ok(())
    }
}
