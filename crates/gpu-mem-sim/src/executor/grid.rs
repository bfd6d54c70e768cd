//! Running a grid: blocks spread over the simulator's worker threads (`crate::workers`), the
//! error of the lowest failing block kept.

use super::args::{Resolved, encode, views};
use super::block::Block;
use super::body::{Body, CompiledLaunch};
use super::shared::SharedMemory;
use crate::reentry::enter_kernel;
use crate::source::SourceProgram;
use crate::thread::{PolledBody, SimKernelFn};
use gpu_mem_core::kernel::{Dim3, LaunchConfig};
use gpu_mem_core::{Error, Result};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The code of a launch, in either form.
#[derive(Clone, Copy)]
pub(crate) enum Code<'a> {
    /// A closure kernel.
    Closure(&'a SimKernelFn),
    /// Compiled portable source (its parameters already checked against the arguments).
    Source(&'a SourceProgram),
    /// An async closure kernel.
    Polled(&'a dyn PolledBody),
}

/// The argument views, shared by the worker threads.
struct Views<'a>(Vec<crate::thread::ArgView<'a>>);

// SAFETY: the views hold raw pointers into simulated device memory that stays alive for the
// launch; concurrent access from several blocks is governed by the launch's unsafe contract, as
// on a GPU.
unsafe impl Sync for Views<'_> {}

impl<'a> Views<'a> {
    // A method (not a field access) so closures capture the whole `Sync` wrapper.
    fn get(&self) -> &[crate::thread::ArgView<'a>] {
        &self.0
    }
}

fn block_index(linear: u64, grid: Dim3) -> Dim3 {
    let (gx, gy) = (grid.x as u64, grid.y as u64);
    Dim3::new(
        (linear % gx) as u32,
        ((linear / gx) % gy) as u32,
        (linear / (gx * gy)) as u32,
    )
}

/// Runs every block of `config`'s grid; returns the error of the lowest-numbered failing block.
pub(crate) fn run_grid(
    kernel: &str,
    code: Code<'_>,
    args: &[Resolved],
    config: &LaunchConfig,
    warp_size: u32,
    shared_limit: usize,
) -> Result<()> {
    if cfg!(miri) && !matches!(code, Code::Polled(_)) {
        return Err(Error::NotSupportedByBackend {
            backend: gpu_mem_core::BackendKind::Sim,
            feature: "kernel launch under Miri",
            reason: "simulated threads run on fibers, whose stack switches Miri cannot interpret (async closure kernels run)"
                .into(),
        });
    }
    let views = Views(views(args));
    // Compiled code receives one buffer per parameter, laid out as the C parameter.
    let buffers;
    let compiled;
    let body = match code {
        Code::Closure(closure) => Body::Closure(closure),
        Code::Polled(body) => Body::Polled(body),
        Code::Source(program) => {
            buffers = encode(args, |i| program.takes_pointer(i));
            compiled = CompiledLaunch {
                program,
                args: buffers
                    .iter()
                    .map(|b| b.as_ptr().cast::<std::ffi::c_void>().cast_mut())
                    .collect(),
            };
            Body::Compiled(&compiled)
        }
    };
    let total = config.grid.count();
    let next = AtomicU64::new(0);
    // (block number, error) of the lowest failing block so far; blocks above it are skipped.
    let failure: Mutex<Option<(u64, Error)>> = Mutex::new(None);
    let lowest_failure = AtomicU64::new(u64::MAX);
    let record = |linear: u64, error: Error| {
        let mut slot = failure.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_none_or(|(b, _)| linear < *b) {
            *slot = Some((linear, error));
            lowest_failure.fetch_min(linear, Ordering::AcqRel);
        }
    };
    let work = || {
        let _in_kernel = enter_kernel(kernel);
        loop {
            let linear = next.fetch_add(1, Ordering::Relaxed);
            if linear >= total || linear > lowest_failure.load(Ordering::Acquire) {
                return;
            }
            let shared = match SharedMemory::new(shared_limit, config.shared_bytes) {
                Ok(shared) => shared,
                Err(reason) => {
                    let kernel = kernel.to_string();
                    return record(linear, Error::InvalidLaunch { kernel, reason });
                }
            };
            let block = Block::new(
                kernel,
                body,
                views.get(),
                block_index(linear, config.grid),
                config.block,
                config.grid,
                warp_size,
                shared,
            );
            if let Err(error) = block.run() {
                record(linear, error);
            }
        }
    };
    // The launching thread runs blocks too; the process's worker threads help with the rest.
    let helpers = usize::try_from(total.saturating_sub(1)).unwrap_or(usize::MAX);
    crate::workers::run_parallel(helpers, &work);
    match failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some((_, error)) => Err(error),
        None => Ok(()),
    }
}
