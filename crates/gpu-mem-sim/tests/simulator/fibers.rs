//! The executor's fibers: threads left waiting when a block fails are ended (a closure's frames
//! unwound, its destructors run), and the fibers they leave behind run later launches correctly,
//! closure and source kernels alike, whatever mix of waits, exits and failures came before.
#![cfg(not(miri))]

use crate::common;

use gpu_mem_core::backend::{Memory, Transfer};
use gpu_mem_core::kernel::{LaunchArg, LaunchConfig};
use gpu_mem_core::{Error, Kernel};
use gpu_mem_sim::{SimBackend, SimConfig, SimKernel};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A source kernel whose threads run on fibers: its atomic is called in a struct's member
/// function, where a stackless thread could not let the others run.
const SUM_OF_INDICES: &str = r#"#include "gpu_mem.h"
struct summer { __device__ void add(int* total, int value) { atomicAdd(total, value); } };
extern "C" __global__ void sum_of_indices(gm_array<int, 1> out) {
    GM_SHARED int total[1];
    if (threadIdx.x == 0) total[0] = 0;
    syncthreads();
    summer{}.add(&total[0], (int)threadIdx.x);
    syncthreads();
    if (threadIdx.x == 0) out(blockIdx.x) = total[0];
}
"#;

/// Counts drops of the guards that waiting threads hold.
static DROPPED: AtomicUsize = AtomicUsize::new(0);

struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::SeqCst);
    }
}

use common::launch;

/// Launches the source kernel over `blocks` blocks of `threads` and checks every block's sum.
fn check_sums(backend: &SimBackend, kernel: &Kernel, blocks: u32, threads: u32) {
    let bytes = blocks as usize * 4;
    let out = backend.alloc(0, bytes).unwrap();
    let arg = LaunchArg::Array {
        ptr: out,
        shape: vec![blocks as usize],
        strides: vec![1],
        min_offset: 0,
        span_len: blocks as usize,
        itemsize: 4,
        elem: std::any::TypeId::of::<i32>(),
        dtype: "i32",
    };
    launch(backend, kernel, LaunchConfig::new(blocks, threads), &[arg]).unwrap();
    let mut host = vec![0u8; bytes];
    // SAFETY: `out` holds `bytes` bytes and nothing else uses it.
    unsafe { backend.copy_dtoh(0, host.as_mut_ptr(), out, bytes) }.unwrap();
    let expected = (threads * (threads - 1) / 2) as i32;
    for (block, chunk) in host.chunks_exact(4).enumerate() {
        let got = i32::from_ne_bytes(chunk.try_into().unwrap());
        assert_eq!(got, expected, "block {block} of {blocks}x{threads}");
    }
    // SAFETY: allocated above, no work pending on it.
    unsafe { backend.free(0, out) }.unwrap();
}

#[test]
fn threads_left_waiting_are_unwound_and_their_fibers_reused() {
    let backend = SimBackend::new(SimConfig::default());
    // Half of each block waits at a barrier the other half never reaches: the waiting half is
    // ended when the block fails, its guards dropped.
    let diverging = Kernel::sim("diverging", |t| {
        let _guard = Guard;
        if t.thread_idx().x % 2 == 0 {
            t.syncthreads();
        }
    });
    let sums = Kernel::from_source(SUM_OF_INDICES, "sum_of_indices");
    let faulting = Kernel::sim("faulting", |t| {
        t.syncthreads();
        if t.thread_idx().x == 3 {
            panic!("deliberate");
        }
        t.syncthreads();
    });
    for round in 0..3 {
        DROPPED.store(0, Ordering::SeqCst);
        let error = launch(&backend, &diverging, LaunchConfig::new(4, 64), &[]).unwrap_err();
        assert!(
            matches!(error, Error::BarrierDivergence { .. }),
            "round {round}: {error}"
        );
        // Every thread's guard is dropped: 32 exited, 32 unwound, in each block that ran (blocks
        // after the failing one may be skipped, never half-run).
        let dropped = DROPPED.load(Ordering::SeqCst);
        assert!(
            dropped > 0 && dropped.is_multiple_of(64),
            "round {round}: {dropped} guards dropped"
        );
        check_sums(&backend, &sums, 8, 256);
        let error = launch(&backend, &faulting, LaunchConfig::new(2, 32), &[]).unwrap_err();
        assert!(
            matches!(error, Error::KernelFault { .. }),
            "round {round}: {error}"
        );
        check_sums(&backend, &sums, 3, 1024);
        check_sums(&backend, &sums, 5, 1);
    }
}

/// A thread that catches the cancellation of its wait and waits again does not revive the
/// block's schedule (which entered a thread without a fiber): the launch reports the
/// divergence, and the next launch runs normally.
#[test]
fn a_thread_that_catches_its_cancellation_and_waits_again_is_ended() {
    static TRIES: AtomicUsize = AtomicUsize::new(0);
    let backend = SimBackend::new(SimConfig::default());
    let kernel = Kernel::sim("rewait", |t| {
        if t.thread_idx().x == 1 {
            return;
        }
        for _ in 0..4 {
            TRIES.fetch_add(1, Ordering::SeqCst);
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.syncthreads())).is_ok() {
                break;
            }
        }
    });
    for _ in 0..2 {
        diverges(&backend, &kernel, LaunchConfig::new(1, 2));
    }
    // Each try after the first is refused at once.
    assert_eq!(TRIES.load(Ordering::SeqCst), 8);
    later_launches_run(&backend);
}

/// Launching `kernel` reports a barrier divergence.
fn diverges(backend: &SimBackend, kernel: &Kernel, config: LaunchConfig) {
    let result = launch(backend, kernel, config, &[]);
    assert!(
        matches!(result, Err(Error::BarrierDivergence { .. })),
        "{result:?}"
    );
}

/// The fibers left behind run a source kernel with barriers and atomics correctly.
fn later_launches_run(backend: &SimBackend) {
    let kernel = Kernel::from_source(SUM_OF_INDICES, "sum_of_indices");
    check_sums(backend, &kernel, 3, 64);
}

/// Destructors of an ended thread may use atomics and barriers: they neither switch to another
/// thread nor disturb the block's end, and every one of them runs.
#[test]
fn destructors_of_ended_threads_may_use_atomics_and_barriers() {
    static ENDED: AtomicUsize = AtomicUsize::new(0);
    struct Busy<'a, 'b>(&'a gpu_mem_sim::ThreadCtx<'b>);
    impl Drop for Busy<'_, '_> {
        fn drop(&mut self) {
            let counter = self.0.shared_array::<u32, 1>([1]);
            // More atomics than a thread runs before it lets the others run.
            for _ in 0..40 {
                counter.atomic_add([0], 1);
            }
            self.0.syncthreads();
            ENDED.fetch_add(1, Ordering::SeqCst);
        }
    }
    let backend = SimBackend::new(SimConfig::default());
    let kernel = Kernel::sim("busy_destructors", |t| {
        if t.thread_idx().x % 2 == 1 {
            return;
        }
        let _busy = Busy(t);
        // Half the block never comes: the other half is ended here, unwinding through `Busy`.
        t.syncthreads();
    });
    diverges(&backend, &kernel, LaunchConfig::new(1, 4));
    assert_eq!(ENDED.load(Ordering::SeqCst), 2);
    later_launches_run(&backend);
}

/// Spin hints (each one an atomic would give) past the round limit, by the last thread of a
/// block that then finishes: it is working, not stuck, and the launch succeeds (it was reported
/// as stuck after 2^20 rounds of 16 hints, about 0.14 s in a release build).
#[test]
fn a_thread_that_spins_past_the_round_limit_and_finishes_is_not_reported() {
    static FINISHED: AtomicUsize = AtomicUsize::new(0);
    let backend = SimBackend::new(SimConfig::default());
    let kernel = Kernel::sim("long_spin", |t| {
        for _ in 0..(17u64 << 20) {
            t.nanosleep();
        }
        FINISHED.fetch_add(1, Ordering::SeqCst);
    });
    launch(&backend, &kernel, LaunchConfig::new(1, 1), &[]).unwrap();
    assert_eq!(FINISHED.load(Ordering::SeqCst), 1);
}

/// Threads that only spin, waiting for something no thread will ever do, are reported (after the
/// round limit and the watchdog's time, [`common::WATCHDOG_SECONDS`] here), and the fibers they
/// leave run later launches.
#[test]
fn threads_that_only_spin_are_reported() {
    let backend = common::backend_with_watchdog(common::WATCHDOG_SECONDS);
    let kernel = Kernel::sim("stuck_spin", |t| {
        let flag = t.shared_array::<u32, 1>([1]);
        while flag.atomic_add([0], 0) == 0 {
            t.nanosleep();
        }
    });
    let started = std::time::Instant::now();
    let result = launch(&backend, &kernel, LaunchConfig::new(1, 2), &[]);
    match result {
        Err(Error::BarrierDivergence { detail, .. }) => {
            assert!(detail.contains("no forward progress"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    assert!(started.elapsed() >= std::time::Duration::from_secs_f64(common::WATCHDOG_SECONDS));
    later_launches_run(&backend);
}
