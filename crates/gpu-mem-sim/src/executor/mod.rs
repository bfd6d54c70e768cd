//! Kernel execution on the simulator: the executor.
//!
//! Every simulated thread runs the kernel — the compiled entry point of its portable source
//! (`crate::source`) or a Rust closure (`crate::thread`) — on a fiber: a stack of its own on which
//! it can be suspended (`fiber`). The threads of a block run cooperatively on one OS thread: a
//! barrier suspends the thread and hands the OS thread straight to the next one, and once every
//! thread of the block (or, for a wave barrier, of the warp) waits at the same barrier they all
//! go on, so a barrier really waits for the whole block (`block`). A thread that ends without
//! having waited leaves its fiber to the next thread, so kernels that never wait cost a call per
//! thread. A compiled kernel whose threads wait only at barriers and collectives is built with
//! each thread a coroutine instead, and its block runs round by round without a stack per thread
//! (`stackless`); the same scheduler decides releases and reports divergence. An async closure
//! kernel's threads are futures, polled round by round the same way (`polled`). Blocks run in
//! parallel on all cores (`grid`, on `crate::workers`). A barrier reached by only
//! part of a block, or threads waiting at different barriers, is reported as
//! [`Error::BarrierDivergence`] instead of hanging; out-of-bounds accesses and panics in the
//! kernel body are [`Error::KernelFault`]s naming the kernel, block and thread.
//!
//! Miri cannot run the fibers' stack switches (inline assembly, or corosensei's), so under Miri
//! kernel launches return an error saying so.

mod args;
mod block;
pub(crate) mod body;
mod fiber;
mod grid;
mod grid_barrier;
mod polled;
mod shared;
mod stack;
mod stackless;

pub(crate) use args::resolve as resolve_args;
pub(crate) use fiber::first_barrier_floor;
pub(crate) use grid::{Code, run_grid};

/// A simulated device's limits, as a launch runs under them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) warp_size: u32,
    /// Shared memory of a block, static and dynamic, in bytes.
    pub(crate) shared_memory: usize,
    /// How long a block may go without progress before it is reported.
    pub(crate) watchdog: std::time::Duration,
}

use gpu_mem_core::kernel::{Kernel, LaunchConfig};
use gpu_mem_core::{Error, Result};

/// Largest block, per dimension and in total (CUDA's limits).
pub(crate) const MAX_BLOCK: [u32; 3] = [1024, 1024, 64];
/// Largest number of threads in a block.
pub(crate) const MAX_THREADS_PER_BLOCK: u64 = 1024;
/// Largest grid, per dimension.
pub(crate) const MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];

/// Checks a launch configuration against the simulated device's limits.
/// `static_shared` is what the kernel's code declares (compiled source), counted with the
/// launch's dynamic shared memory against the block limit.
pub(crate) fn check_config(
    kernel: &Kernel,
    config: &LaunchConfig,
    max_shared: usize,
    static_shared: usize,
) -> Result<()> {
    let invalid = |reason: String| Error::InvalidLaunch {
        kernel: kernel.name().to_string(),
        reason,
    };
    let block = config.block.to_array();
    let grid = config.grid.to_array();
    if block.contains(&0) || grid.contains(&0) {
        return Err(invalid(format!(
            "grid {} and block {} must not be empty",
            config.grid, config.block
        )));
    }
    if block.iter().zip(MAX_BLOCK).any(|(b, m)| *b > m)
        || config.block.count() > MAX_THREADS_PER_BLOCK
    {
        return Err(invalid(format!(
            "block {} exceeds the limit of {MAX_THREADS_PER_BLOCK} threads ({:?} per dimension); try reducing the block size",
            config.block, MAX_BLOCK
        )));
    }
    if grid.iter().zip(MAX_GRID).any(|(g, m)| *g > m) {
        return Err(invalid(format!(
            "grid {} exceeds the limits {MAX_GRID:?}",
            config.grid
        )));
    }
    if config.shared_bytes.saturating_add(static_shared) > max_shared {
        let statics = match static_shared {
            0 => String::new(),
            n => format!(" (plus {n} bytes of static __shared__ arrays)"),
        };
        return Err(invalid(format!(
            "{} bytes of dynamic shared memory requested{statics}; the block limit is {max_shared} bytes",
            config.shared_bytes
        )));
    }
    Ok(())
}
