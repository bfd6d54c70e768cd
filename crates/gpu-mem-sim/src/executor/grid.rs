//! Running a grid: blocks spread over the simulator's worker threads (`crate::workers`) once
//! the launching thread has run them alone for a moment, the error of the lowest failing
//! block kept.

use super::Limits;
use super::args::{Parameters, Resolved, views};
use super::block::{Block, block_index, block_linear};
use super::grid_barrier::GridBarrier;
use super::plan::{Code, Looped, Plan, Prepared};
use super::shared::SharedMemory;
use super::sim_thread::RunningBlocks;
use crate::reentry::enter_kernel;
use crate::sanitizer::MemoryMap;
use gpu_mem_core::kernel::{Dim3, LaunchConfig};
use gpu_mem_core::sync::{get_mut, lock};
use gpu_mem_core::{Error, Result};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the launching thread runs a grid's blocks alone before worker threads help: a
/// launch whose blocks take less never wakes one.
const RUN_ALONE_FOR: Duration = Duration::from_micros(20);

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

/// Runs every block of `config`'s grid; returns the error of the lowest-numbered failing block.
pub(crate) fn run_grid(
    kernel: &str,
    code: Code<'_>,
    args: &[Resolved],
    parameters: &Parameters,
    config: &LaunchConfig,
    limits: Limits,
    memory: Option<(&MemoryMap, crate::Checks)>,
) -> Result<()> {
    let prepared = Prepared::new(code, parameters, memory);
    let plan = prepared.plan(limits.thread_order);
    if cfg!(miri) && !plan.runs_under_miri() {
        return Err(Error::NotSupportedByBackend {
            backend: gpu_mem_core::BackendKind::Sim,
            feature: "kernel launch under Miri",
            reason: "simulated threads run on fibers, whose stack switches Miri cannot interpret (async closure kernels run)"
                .into(),
        });
    }
    let views = Views(views(args));
    let total = config.grid.count();
    if config.cooperative {
        return run_cooperative(kernel, plan, &views, config, limits);
    }
    let next = AtomicU64::new(0);
    let most = blocks_per_claim(&plan, config);
    let workers = crate::workers::worker_count() as u64;
    let launcher = std::thread::current().id();
    // The launching thread's time per block alone (its last claim's, in ns; 0: unknown), what a
    // helper compares its own with (see `Helping`).
    let alone_ns = AtomicU64::new(0);
    // Its time per block with the helpers (its last claim's; 0: none yet).
    let together_ns = AtomicU64::new(0);
    // (block number, error) of the lowest failing block so far; blocks above it are skipped.
    let failure = LowestFailure::default();
    // Runs blocks until none is left or, with `until`, that time has passed; returns whether
    // blocks are left. Alone (with `until`), claims start at one block and grow eightfold, so
    // that a grid of heavy blocks lets the workers in after its first one; with the workers, each
    // claim is at most half a worker's share of what is left, so that they finish together.
    let run_blocks = |until: Option<Instant>| -> bool {
        let _in_kernel = enter_kernel(kernel);
        let _running = RunningBlocks;
        let mut alone = 1u64;
        let helper = std::thread::current().id() != launcher;
        // A helper's first claim pays for its first blocks on this OS thread (fiber stacks,
        // caches): it is not judged.
        let mut judged = false;
        loop {
            let claim = match until {
                Some(until) if Instant::now() >= until => {
                    return next.load(Ordering::Relaxed) < total;
                }
                Some(_) => {
                    let claim = alone.min(most);
                    alone = alone.saturating_mul(8);
                    claim
                }
                None if workers == 1 => most,
                None => {
                    let left = total.saturating_sub(next.load(Ordering::Relaxed));
                    (left / (2 * workers)).clamp(1, most)
                }
            };
            let linear = next.fetch_add(claim, Ordering::Relaxed);
            if linear >= total || linear > failure.lowest.load(Ordering::Acquire) {
                return false;
            }
            let block = BlockRun {
                kernel,
                plan,
                views: &views,
                config,
                limits,
            };
            let blocks = claim.min(total - linear);
            let started = Instant::now();
            if let Err((failed, error)) = block.run(linear, blocks, None) {
                failure.record(failed, error);
            }
            let elapsed = started.elapsed();
            let per_block = Helping::per_block(elapsed, blocks);
            let alone = alone_ns.load(Ordering::Relaxed);
            if until.is_some() {
                alone_ns.store(per_block, Ordering::Relaxed);
            } else if !helper {
                together_ns.store(per_block, Ordering::Relaxed);
            } else if std::mem::replace(&mut judged, true)
                && elapsed >= Helping::LEAST
                && !Helping::speeds_up(per_block, alone, workers)
                && !Helping::speeds_up(together_ns.load(Ordering::Relaxed), alone, workers)
            {
                // The launching thread goes on alone (it never stops before the queue is empty).
                return false;
            }
        }
    };
    // The launching thread runs blocks alone first: waking a worker costs microseconds of
    // system time on both sides, more than a small grid's whole work. Past `RUN_ALONE_FOR` the
    // process's worker threads help with the rest.
    if run_blocks(Some(Instant::now() + RUN_ALONE_FOR)) {
        let left = total.saturating_sub(next.load(Ordering::Relaxed));
        let helpers = usize::try_from(left.saturating_sub(1)).unwrap_or(usize::MAX);
        crate::workers::run_parallel(helpers, &|| {
            run_blocks(None);
        });
    }
    failure.into_result()
}

/// Whether a helper speeds a launch up. Blocks that contend for the same memory (a grid whose
/// every thread applies atomics to the same few words) run slower on two cores than on one: each
/// atomic moves the cache line between them (cuda-samples' simpleAtomicIntrinsics took 6.5 ms
/// on one worker and 25-30 ms on two). When a helper's blocks and the launching thread's both
/// take longer than the launching thread's did alone, times the number of workers (with a
/// margin for noise), the helpers add nothing, and each stops helping. (Both: one thread that
/// the machine's other work slows is no reason to stop.)
struct Helping;

impl Helping {
    /// A helper's claim shorter than this says too little about its blocks (wake-up noise).
    const LEAST: Duration = Duration::from_micros(100);

    /// ns per block of a claim that took `elapsed` for `blocks`.
    fn per_block(elapsed: Duration, blocks: u64) -> u64 {
        u64::try_from(elapsed.as_nanos() / u128::from(blocks.max(1))).unwrap_or(u64::MAX)
    }

    /// Whether a helper whose blocks take `helper` ns each speeds up a launch whose launching
    /// thread took `alone` ns a block alone, among `workers` threads (0: unknown, yes).
    fn speeds_up(helper: u64, alone: u64, workers: u64) -> bool {
        helper == 0 || alone == 0 || helper.saturating_mul(4) <= alone.saturating_mul(5 * workers)
    }
}

/// The most blocks a cooperative launch may have: each runs on an OS thread of its own for the
/// whole launch (a GPU allows as many as it can keep resident at once, and fails the launch
/// with `CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE` beyond that).
pub(crate) const MAX_COOPERATIVE_BLOCKS: u64 = 1024;

/// Runs a cooperative launch: every block at once, each on a scoped OS thread of its own, so
/// that blocks can wait for each other at the grid barrier (`this_grid().sync()`).
fn run_cooperative(
    kernel: &str,
    plan: Plan<'_>,
    views: &Views<'_>,
    config: &LaunchConfig,
    limits: Limits,
) -> Result<()> {
    let total = config.grid.count();
    if total > MAX_COOPERATIVE_BLOCKS {
        return Err(Error::InvalidLaunch {
            kernel: kernel.to_string(),
            reason: format!(
                "a cooperative launch of {total} blocks: the simulator runs at most {MAX_COOPERATIVE_BLOCKS} blocks at once (CUDA fails such a launch with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE); size the grid to the blocks that can be resident"
            ),
        });
    }
    let barrier = GridBarrier::new(total);
    let failure = LowestFailure::default();
    let block = BlockRun {
        kernel,
        plan,
        views,
        config,
        limits,
    };
    let spawned = std::thread::scope(|scope| -> std::io::Result<()> {
        for linear in 0..total {
            let (block, barrier, failure) = (&block, &barrier, &failure);
            let started = std::thread::Builder::new()
                .name(format!("gpu-mem-sim block {linear}"))
                .spawn_scoped(scope, move || {
                    let _in_kernel = enter_kernel(kernel);
                    let _running = RunningBlocks;
                    let outcome = block.run(linear, 1, Some(barrier));
                    barrier.leave();
                    if let Err((failed, error)) = outcome {
                        failure.record(failed, error);
                    }
                });
            if let Err(error) = started {
                // The blocks started wait at the barrier for one that never comes: break it.
                for _ in linear..total {
                    barrier.leave();
                }
                return Err(error);
            }
        }
        Ok(())
    });
    if let Err(error) = spawned {
        return Err(Error::InvalidLaunch {
            kernel: kernel.to_string(),
            reason: format!(
                "cannot start a thread for each of the {total} blocks of a cooperative launch: {error}"
            ),
        });
    }
    failure.into_result()
}

/// What running one block of a launch needs.
struct BlockRun<'k, 'a> {
    kernel: &'k str,
    plan: Plan<'a>,
    views: &'k Views<'a>,
    config: &'k LaunchConfig,
    limits: Limits,
}

impl BlockRun<'_, '_> {
    /// Runs `blocks` consecutive blocks from block `linear` on the calling OS thread (more than
    /// one only as [`blocks_per_claim`] allows); the error comes with its block's linear index.
    fn run(
        &self,
        linear: u64,
        blocks: u64,
        grid: Option<&GridBarrier>,
    ) -> std::result::Result<(), (u64, Error)> {
        let shared = SharedMemory::new(self.limits.shared_memory, self.config.shared_bytes)
            .map_err(|reason| {
                let kernel = self.kernel.to_string();
                (linear, Error::InvalidLaunch { kernel, reason })
            })?;
        let block = Block::new(
            self.kernel,
            self.plan,
            self.views.get(),
            (block_index(linear, self.config.grid), blocks),
            self.config.block,
            self.config.grid,
            self.limits,
            shared,
            grid,
        );
        block.run().map_err(|error| {
            let failed = match &error {
                Error::KernelFault { block, .. } => {
                    let [x, y, z] = *block;
                    block_linear(Dim3::new(x, y, z), self.config.grid)
                }
                _ => linear,
            };
            (failed, error)
        })
    }
}

/// Threads a worker claims at once, as whole blocks, where blocks may run as one: enough that
/// a block's fixed cost (its state, the switch to the driver fiber and back, ~0.3 us) is spread
/// over many small blocks, few enough that the workers share a grid evenly.
const THREADS_PER_CLAIM: u64 = 2048;

/// How many consecutive blocks one `Block` runs: several only for the direct plan, whose
/// threads share nothing within or across blocks, and without dynamic shared memory (each
/// block gets its own, zeroed).
fn blocks_per_claim(plan: &Plan<'_>, config: &LaunchConfig) -> u64 {
    match plan {
        Plan::Direct(looped) if config.shared_bytes == 0 && !keeps_block_history(looped) => {
            (THREADS_PER_CLAIM / config.block.count().max(1)).max(1)
        }
        _ => 1,
    }
}

/// Whether a checked block keeps what its threads did (racecheck's accesses, initcheck's
/// written bytes of shared memory), which must be one block's alone. memcheck's answers are
/// the same for every block a `Block` runs (the launch's allocations, the shared stack and
/// record, static shared memory every block reuses), so blocks may run several to a `Block`
/// under it: a block of a few threads would otherwise pay a `Block`'s setup, grants and
/// poisoning for each (Rodinia's gaussian: 16 threads a block).
fn keeps_block_history(looped: &Looped<'_>) -> bool {
    looped
        .checked
        .is_some_and(|checked| checked.checks.racecheck || checked.checks.initcheck)
}

/// The error of the lowest-numbered failing block so far (blocks above it are skipped).
struct LowestFailure {
    first: Mutex<Option<(u64, Error)>>,
    lowest: AtomicU64,
}

impl Default for LowestFailure {
    fn default() -> Self {
        LowestFailure {
            first: Mutex::new(None),
            lowest: AtomicU64::new(u64::MAX),
        }
    }
}

impl LowestFailure {
    fn record(&self, linear: u64, error: Error) {
        let mut slot = lock(&self.first);
        if slot.as_ref().is_none_or(|(b, _)| linear < *b) {
            *slot = Some((linear, error));
            self.lowest.fetch_min(linear, Ordering::AcqRel);
        }
    }

    fn into_result(mut self) -> Result<()> {
        match std::mem::take(get_mut(&mut self.first)) {
            Some((_, error)) => Err(error),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Helping;
    use std::time::Duration;

    #[test]
    fn helpers_stop_only_where_two_threads_are_slower_than_one() {
        // Alone 1 us a block, two workers: a helper pays while its blocks take under 2.5 us.
        assert!(Helping::speeds_up(2_400, 1_000, 2));
        assert!(!Helping::speeds_up(2_600, 1_000, 2));
        // Unknown times judge nothing.
        assert!(Helping::speeds_up(0, 1_000, 2));
        assert!(Helping::speeds_up(50_000, 0, 2));
        assert_eq!(Helping::per_block(Duration::from_micros(80), 8), 10_000);
        assert_eq!(Helping::per_block(Duration::from_micros(80), 0), 80_000);
    }
}
