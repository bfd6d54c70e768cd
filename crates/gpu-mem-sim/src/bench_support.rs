//! Measurements for the simulator's own benchmarks (`benches/executor.rs`); not part of the API,
//! and compiled only with the `bench-internals` feature, which the crate's tests and benchmarks
//! turn on.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The floor of a blocking closure's first barrier: `blocks` blocks of `threads` threads (at
/// least 2, else an error) on fibers, each through one barrier with the executor's stacks
/// and switch but no scheduling (see the executor's `fiber/floor.rs`), spread over the
/// simulator's worker threads as a launch's blocks are; returns the whole time, nothing
/// subtracted. `None` where fibers do not switch natively.
pub fn fiber_barrier_floor(threads: usize, blocks: usize) -> Option<Result<Duration, String>> {
    let next = AtomicUsize::new(0);
    // Each participating thread's answer (`None`: nothing to measure here).
    let answers: Mutex<Vec<Option<Result<(), String>>>> = Mutex::new(Vec::new());
    let work = || {
        let next_block = || next.fetch_add(1, Ordering::Relaxed) < blocks;
        let ran = crate::executor::first_barrier_floor(threads, &next_block);
        gpu_mem_core::sync::lock(&answers).push(ran);
    };
    let start = Instant::now();
    crate::workers::run_parallel(blocks.saturating_sub(1), &work);
    let elapsed = start.elapsed();
    let answers = std::mem::take(&mut *gpu_mem_core::sync::lock(&answers));
    answers
        .into_iter()
        .collect::<Option<Result<Vec<()>, String>>>()
        .map(|ran| ran.map(|_| elapsed))
}
