//! Kernel execution on the simulator: the executor.
//!
//! A launch goes one way: `grid` spreads its blocks over the simulator's worker threads
//! (`crate::workers`; a cooperative launch gives each block an OS thread, for the grid barrier);
//! `plan` decides once, from the kernel's code, how the threads of every block run; `block` holds
//! what a block's threads share; `runner` carries out the plan for a block (`direct` plain calls,
//! `stackless` coroutines, `fibers` a stack per thread, `polled` futures). Whatever the plan,
//! threads record their waits in the block's `schedule`, and `release` applies the one set of
//! rules for barriers and collectives (with the collectives' table, `crate::thread::Collective`);
//! `watchdog` reports blocks that make no progress. `sim_thread` is one thread's face to the
//! executor, `compiled` the callbacks compiled kernels reach it through (`crate::abi`'s layouts),
//! `fiber` and `stack` the stacks threads run on, `args` and `shared` the launch's arguments and
//! a block's shared memory.
//!
//! A barrier reached by only part of a block, or threads waiting at different barriers, is
//! reported as [`Error::BarrierDivergence`] instead of hanging; out-of-bounds accesses and
//! panics in the kernel body are [`Error::KernelFault`]s naming the kernel, block and thread.
//! Miri cannot run the fibers' stack switches (inline assembly, or corosensei's), so under Miri
//! only async closure kernels run; other launches return an error saying so.

mod args;
mod block;
mod compiled;
mod fiber;
mod grid;
mod grid_barrier;
mod plan;
mod races;
mod release;
mod runner;
mod schedule;
mod shared;
mod sim_thread;
mod stack;
mod watchdog;

pub(crate) use args::{Parameters, Resolved, resolve as resolve_args};
pub(crate) use compiled::RUNTIME;
#[cfg(feature = "bench-internals")]
pub(crate) use fiber::first_barrier_floor;
pub(crate) use grid::run_grid;
pub(crate) use plan::{Code, Compiled};

/// A simulated device's limits and settings, as a launch runs under them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) warp_size: u32,
    /// Shared memory of a block, static and dynamic, in bytes.
    pub(crate) shared_memory: usize,
    /// When a block without progress is reported.
    pub(crate) watchdog: crate::config::Watchdog,
    /// The order of a block's threads between barriers.
    pub(crate) thread_order: crate::config::ThreadOrder,
}

use gpu_mem_core::kernel::{Kernel, LaunchArg, LaunchConfig};
use gpu_mem_core::{Error, Result};

/// What `code` receives of the launch's arguments (`resolved` from `args`): a compiled
/// kernel's parameters, encoded once at launch (so a malformed one is refused there); nothing
/// for closures, which read the resolved arguments.
pub(crate) fn parameters(
    kernel: &str,
    code: Code<'_>,
    args: &[LaunchArg],
    resolved: &[Resolved],
) -> Result<Parameters> {
    match code {
        Code::Compiled(compiled) => Parameters::encode(kernel, args, resolved, |i| {
            compiled.pointers.get(i).copied().unwrap_or(false)
        }),
        Code::Closure(_) | Code::Async(_) => Ok(Parameters::default()),
    }
}

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
