//! Async closure kernels (`SimKernel::sim_async`): their threads are futures polled in rounds.
//! What they share with every other form (barriers, shared memory, collectives, faults,
//! divergence) is checked once for all in `every_form`; here, what only futures do: waiting
//! threads dropped, a foreign future awaited, two waits at once, a blocking call, a spin that
//! never awaits, and a small kernel run under Miri.

use crate::common;

use gpu_mem_core::kernel::LaunchConfig;
use gpu_mem_core::{Backend, Error, Kernel};
use gpu_mem_sim::thread::{AsyncThreadCtx, ThreadCtx};
use gpu_mem_sim::{SimBackend, SimConfig, SimKernel};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use common::launch;

/// Runs `kernel` with one zeroed `u32` output array of `len` elements and returns it.
fn run_u32(
    backend: &SimBackend,
    kernel: &Kernel,
    config: LaunchConfig,
    len: usize,
) -> Result<Vec<u32>, Error> {
    common::run_on_array(backend, kernel, config, &vec![0u32; len])
}

fn backend() -> SimBackend {
    SimBackend::new(SimConfig::default())
}

fn linear(t: &ThreadCtx<'_>) -> usize {
    t.linear_thread_idx() as usize
}

fn global_linear(t: &ThreadCtx<'_>) -> usize {
    let threads = t.block_dim().count() as usize;
    let block = t.block_idx();
    let grid = t.grid_dim();
    let b = (block.z as usize * grid.y as usize + block.y as usize) * grid.x as usize
        + block.x as usize;
    b * threads + linear(t)
}

async fn tree_sum_async(t: &AsyncThreadCtx<'_>) {
    let n = t.block_dim().count() as usize;
    let cells = t.shared_array::<u32, 1>([1024]);
    let me = linear(t);
    cells.set([me], me as u32 + 1);
    t.syncthreads().await;
    let mut stride = n.next_power_of_two() / 2;
    while stride > 0 {
        if me < stride && me + stride < n {
            cells.set([me], cells.get([me]) + cells.get([me + stride]));
        }
        t.syncthreads().await;
        stride /= 2;
    }
    if me == 0 {
        let block = global_linear(t) / n;
        t.array::<u32>(0).set([block], cells.get([0]));
    }
}

/// A barrier that half the block skips: the same divergence as the closure form, naming the
/// barrier's line; every waiting thread's future is dropped (its destructors run).
#[test]
fn divergence_is_reported_and_waiting_threads_are_dropped() {
    static DROPPED: AtomicUsize = AtomicUsize::new(0);
    struct Guard;
    impl Drop for Guard {
        fn drop(&mut self) {
            DROPPED.fetch_add(1, Ordering::SeqCst);
        }
    }
    let backend = backend();
    let kernel = Kernel::sim_async("diverging", async |t| {
        let _guard = Guard;
        if t.thread_idx().x % 2 == 0 {
            t.syncthreads().await;
        }
    });
    let error = launch(&backend, &kernel, LaunchConfig::new(1, 64), &[]).unwrap_err();
    match &error {
        Error::BarrierDivergence { detail, .. } => {
            assert!(
                detail.contains("reached by 32 of 64 threads")
                    && detail.contains("async_kernels.rs"),
                "{detail}"
            );
        }
        other => panic!("expected a divergence, got {other}"),
    }
    assert_eq!(DROPPED.load(Ordering::SeqCst), 64);
    // The backend runs the next launch normally.
    let polled = Kernel::sim_async("tree_sum", async |t| tree_sum_async(t).await);
    let sums = run_u32(&backend, &polled, LaunchConfig::new(2, 64), 2).unwrap();
    assert_eq!(sums, vec![64 * 65 / 2; 2]);
}

fn fault_message(error: &Error) -> &str {
    match error {
        Error::KernelFault { message, .. } => message,
        other => panic!("expected a kernel fault, got {other}"),
    }
}

#[test]
fn a_panic_is_a_fault_of_its_thread() {
    let backend = backend();
    let kernel = Kernel::sim_async("faulting", async |t| {
        t.syncthreads().await;
        if t.thread_idx().x == 3 {
            panic!("deliberate");
        }
        t.syncthreads().await;
    });
    let error = launch(&backend, &kernel, LaunchConfig::new(2, 32), &[]).unwrap_err();
    assert!(
        fault_message(&error).contains("the kernel panicked: deliberate"),
        "{error}"
    );
    match error {
        Error::KernelFault { thread, block, .. } => {
            assert_eq!((thread, block), ([3, 0, 0], [0, 0, 0]));
        }
        _ => unreachable!(),
    }
}

#[test]
fn awaiting_a_foreign_future_is_a_fault_not_a_hang() {
    let backend = backend();
    let kernel = Kernel::sim_async("foreign", async |t| {
        t.syncthreads().await;
        std::future::pending::<()>().await;
    });
    let error = launch(&backend, &kernel, LaunchConfig::new(1, 8), &[]).unwrap_err();
    assert!(
        fault_message(&error).contains("returned `Pending` without waiting"),
        "{error}"
    );
}

/// Polls two futures side by side (a minimal `join`).
struct Both<A, B>(Option<Pin<Box<A>>>, Option<Pin<Box<B>>>);

impl<A: Future<Output = ()>, B: Future<Output = ()>> Future for Both<A, B> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(a) = self.0.as_mut()
            && a.as_mut().poll(cx).is_ready()
        {
            self.0 = None;
        }
        if let Some(b) = self.1.as_mut()
            && b.as_mut().poll(cx).is_ready()
        {
            self.1 = None;
        }
        if self.0.is_none() && self.1.is_none() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[test]
fn two_waits_at_once_are_a_fault() {
    let backend = backend();
    let kernel = Kernel::sim_async("joined", async |t| {
        Both(
            Some(Box::pin(t.syncthreads())),
            Some(Box::pin(async {
                t.wavebarrier().await;
            })),
        )
        .await;
    });
    let error = launch(&backend, &kernel, LaunchConfig::new(1, 32), &[]).unwrap_err();
    assert!(
        fault_message(&error).contains("while it waits somewhere else"),
        "{error}"
    );
}

#[test]
fn a_blocking_barrier_in_an_async_kernel_is_a_fault() {
    let backend = backend();
    let kernel = Kernel::sim_async("blocking", async |t| {
        ThreadCtx::syncthreads(t);
    });
    let error = launch(&backend, &kernel, LaunchConfig::new(1, 4), &[]).unwrap_err();
    assert!(
        fault_message(&error).contains("the blocking barrier at"),
        "{error}"
    );
}

/// Thread 0 spins until the block's last thread has raised a flag: awaiting `nanosleep` in
/// the loop lets the others run.
#[test]
fn a_spin_wait_that_awaits_nanosleep_finishes() {
    let backend = backend();
    let kernel = Kernel::sim_async("flag", async |t| {
        let flag = t.shared_array::<u32, 1>([1]);
        let n = t.block_dim().x;
        let me = t.thread_idx().x;
        if me == 0 {
            let mut spins = 0u32;
            while flag.atomic_add([0], 0) == 0 {
                spins += 1;
                t.nanosleep().await;
            }
            t.array::<u32>(0).set([0], spins);
        } else if me == n - 1 {
            flag.atomic_exch([0], 1);
        }
    });
    let out = run_u32(&backend, &kernel, LaunchConfig::new(1, 64), 1).unwrap();
    // Thread 0 ran first, found no flag, let the others run once, then found it.
    assert_eq!(out, vec![1]);
}

/// Under Miri (no fibers): barriers, shared memory and a warp shuffle over two blocks, with
/// every future pinned in place while it waits.
#[test]
fn async_kernels_run_under_miri() {
    let backend = backend();
    let kernel = Kernel::sim_async("small", async |t| {
        let cells = t.shared_array::<u32, 1>([8]);
        let me = t.thread_idx().x as usize;
        let local = [me as u32; 4];
        cells.set([me], local[me % 4] + 1);
        t.syncthreads().await;
        let left = cells.get([(me + 7) % 8]);
        let right = t.shfl_xor_sync(u64::MAX, left, 1).await;
        t.syncthreads().await;
        t.array::<u32>(0)
            .set([global_linear(t)], left * 100 + right + local[0]);
    });
    let out = run_u32(&backend, &kernel, LaunchConfig::new(2, 8), 16).unwrap();
    let expected: Vec<u32> = (0..16u32)
        .map(|i| {
            let me = i % 8;
            let left = (me + 7) % 8 + 1;
            let right = ((me ^ 1) + 7) % 8 + 1;
            left * 100 + right + me
        })
        .collect();
    assert_eq!(out, expected);
}

/// A spin-wait that never awaits holds the block's only OS thread, so the thread it waits for never
/// runs: reported as a fault after the spin limits (the watchdog's time,
/// [`common::WATCHDOG_SECONDS`] here), not a hang.
#[test]
#[cfg_attr(miri, ignore = "spins for a second")]
fn a_spin_wait_that_never_awaits_is_reported() {
    let backend = common::backend_with_watchdog(common::WATCHDOG_SECONDS);
    let kernel = Kernel::sim_async("spin", async |t| {
        let flag = t.shared_array::<u32, 1>([1]);
        if t.thread_idx().x == 0 {
            while flag.atomic_add([0], 0) == 0 {}
        } else {
            flag.atomic_exch([0], 1);
        }
    });
    let started = std::time::Instant::now();
    let error = launch(&backend, &kernel, LaunchConfig::new(1, 2), &[]).unwrap_err();
    assert!(
        fault_message(&error).contains("no forward progress: the thread spun"),
        "{error}"
    );
    assert!(started.elapsed() >= std::time::Duration::from_secs_f64(common::WATCHDOG_SECONDS));
}

/// A closure returning a future runs its own code when the thread first runs: a panic there is
/// that thread's fault, as anywhere else in the kernel.
#[test]
fn a_panic_before_the_future_is_a_fault_of_its_thread() {
    let backend = backend();
    let kernel = Kernel::sim_async("early", |t: &AsyncThreadCtx<'_>| {
        if t.thread_idx().x == 2 {
            panic!("before the future");
        }
        async {}
    });
    let error = launch(&backend, &kernel, LaunchConfig::new(1, 8), &[]).unwrap_err();
    assert!(
        fault_message(&error).contains("the kernel panicked: before the future"),
        "{error}"
    );
    match error {
        Error::KernelFault { thread, .. } => assert_eq!(thread, [2, 0, 0]),
        _ => unreachable!(),
    }
}

/// Polls a future once and completes, dropping it (what `now_or_never` does).
struct PollOnce<F>(Option<Pin<Box<F>>>);

impl<F: Future> Future for PollOnce<F> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(mut inner) = self.0.take() {
            let _ = inner.as_mut().poll(cx);
        }
        Poll::Ready(())
    }
}

/// A barrier polled once and dropped is a fault of its thread; the block's counts stay right,
/// so the launch ends at once (no false "no forward progress" after 10 s).
#[test]
fn a_wait_dropped_before_its_release_is_a_fault() {
    let backend = backend();
    let kernel = Kernel::sim_async("dropped", async |t| {
        if t.thread_idx().x == 1 {
            PollOnce(Some(Box::pin(t.syncthreads()))).await;
        }
        t.syncthreads().await;
    });
    let started = std::time::Instant::now();
    let error = launch(&backend, &kernel, LaunchConfig::new(1, 4), &[]).unwrap_err();
    assert!(
        fault_message(&error).contains("dropped before the block released it"),
        "{error}"
    );
    // (Not under Miri, whose interpreter is too slow for a time bound.)
    assert!(cfg!(miri) || started.elapsed() < std::time::Duration::from_secs(5));
}

/// A thread ended for a foreign `Pending` is dropped at once; its destructor's panic is a fault,
/// not an abort of the process.
#[test]
fn a_destructor_panicking_as_its_thread_is_ended_is_a_fault() {
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("in a destructor");
        }
    }
    let backend = backend();
    let kernel = Kernel::sim_async("panicking_drop", async |_| {
        let _guard = PanicsOnDrop;
        std::future::pending::<()>().await;
    });
    let error = launch(&backend, &kernel, LaunchConfig::new(2, 4), &[]).unwrap_err();
    assert!(matches!(error, Error::KernelFault { .. }), "{error}");
}

/// Letting the others run and waiting at a barrier in one poll (a join of both) is allowed.
#[test]
fn nanosleep_joined_with_a_barrier_completes() {
    let backend = backend();
    let kernel = Kernel::sim_async("joined_sleep", async |t| {
        Both(
            Some(Box::pin(t.nanosleep())),
            Some(Box::pin(t.syncthreads())),
        )
        .await;
        t.array::<u32>(0).set([t.thread_idx().x as usize], 7);
    });
    let out = run_u32(&backend, &kernel, LaunchConfig::new(1, 8), 8).unwrap();
    assert_eq!(out, vec![7; 8]);
}

/// A rank-0 shared array whose buffer the block refused (here: the dynamic shared memory takes
/// the whole block's, so the static one does not fit) is a fault when used: every index of a
/// ranked one is out of bounds, but a rank-0 one has no index, and its accesses went through a
/// null pointer. Runs under Miri, which reported that access.
#[test]
fn a_refused_rank_0_shared_array_is_a_fault_not_a_null_access() {
    let backend = backend();
    let limit = backend.device_info(0).unwrap().max_shared_memory_per_block;
    let kernel = Kernel::sim_async("refused", async |t| {
        let s = t.shared_array::<u32, 0>([]);
        s.set([], 1);
        let _ = s.get([]);
        let _ = s.atomic_add([], 1);
    });
    let config = LaunchConfig::new(1, 1).with_shared_bytes(limit);
    let error = launch(&backend, &kernel, config, &[]).unwrap_err();
    assert!(fault_message(&error).contains("shared"), "{error}");
}

/// A local array is limited by its bytes (CUDA's 512 KiB of local memory per thread): a few
/// elements of a large type used to pass an element-count limit and make the process abort
/// when the allocation failed.
#[test]
fn a_local_array_over_a_threads_local_memory_is_a_fault() {
    let backend = backend();
    let kernel = Kernel::sim_async("huge_local", async |t| {
        let a = t.local_array::<[u64; 4096], 1>([1 << 24]);
        let _ = a.shape();
    });
    let error = launch(&backend, &kernel, LaunchConfig::new(1, 1), &[]).unwrap_err();
    assert!(
        fault_message(&error).contains("at most 524288 bytes"),
        "{error}"
    );
    let fits = Kernel::sim_async("fits", async |t| {
        let a = t.local_array::<u64, 1>([64 << 10]);
        a.set([(64 << 10) - 1], 1);
    });
    launch(&backend, &fits, LaunchConfig::new(1, 1), &[]).unwrap();
}

/// A fault ends its block at the next round: the threads left, spinning on a flag the faulted
/// thread would have set, used to run on until the no-progress limit (10 s) before the fault
/// was reported. As plain and as async closures.
#[test]
fn a_fault_ends_its_block_without_waiting_for_the_spinning_threads() {
    let backend = backend();
    let plain = Kernel::sim("panic_then_spin", |t| {
        let flag = t.shared_array::<u32, 1>([1]);
        if t.thread_idx().x == 0 {
            panic!("boom");
        }
        while flag.atomic_add([0], 0) == 0 {
            t.nanosleep();
        }
    });
    let polled = Kernel::sim_async("panic_then_spin", async |t| {
        let flag = t.shared_array::<u32, 1>([1]);
        if t.thread_idx().x == 0 {
            panic!("boom");
        }
        while flag.atomic_add([0], 0) == 0 {
            t.nanosleep().await;
        }
    });
    // (Plain closures run on fibers, which Miri cannot run.)
    let kernels = if cfg!(miri) {
        vec![polled]
    } else {
        vec![plain, polled]
    };
    for kernel in kernels {
        let started = std::time::Instant::now();
        let error = launch(&backend, &kernel, LaunchConfig::new(1, 2), &[]).unwrap_err();
        assert!(fault_message(&error).contains("boom"), "{error}");
        assert!(
            cfg!(miri) || started.elapsed() < std::time::Duration::from_secs(5),
            "the fault took {:?}",
            started.elapsed()
        );
    }
}

/// Threads kept at a block barrier by others that loop on warp votes for a flag the waiting threads
/// would set after it: every round has a vote released, which counted as progress, so the launch
/// never returned. Now reported once the barrier has waited the watchdog's rounds and time
/// ([`common::WATCHDOG_SECONDS`] here; a GPU hangs on this kernel). As plain and as async closures.
#[test]
#[cfg_attr(miri, ignore = "runs for a second")]
fn threads_kept_at_a_barrier_by_a_loop_of_warp_votes_are_reported() {
    let backend = common::backend_with_watchdog(common::WATCHDOG_SECONDS);
    let plain = Kernel::sim("poll_forever", |t| {
        let flag = t.shared_array::<u32, 1>([1]);
        if t.thread_idx().x < 32 {
            while t.all_sync(u64::from(u32::MAX), flag.atomic_add([0], 0) == 0) {}
        } else {
            t.syncthreads();
            flag.atomic_add([0], 1);
        }
    });
    let polled = Kernel::sim_async("poll_forever", async |t| {
        let flag = t.shared_array::<u32, 1>([1]);
        if t.thread_idx().x < 32 {
            while t
                .all_sync(u64::from(u32::MAX), flag.atomic_add([0], 0) == 0)
                .await
            {}
        } else {
            t.syncthreads().await;
            flag.atomic_add([0], 1);
        }
    });
    std::thread::scope(|scope| {
        let runs: Vec<_> = [plain, polled]
            .into_iter()
            .map(|kernel| {
                let backend = &backend;
                scope.spawn(move || {
                    let started = std::time::Instant::now();
                    let error =
                        launch(backend, &kernel, LaunchConfig::new(1, 64), &[]).unwrap_err();
                    (error, started.elapsed())
                })
            })
            .collect();
        for run in runs {
            let (error, took) = run.join().unwrap();
            match &error {
                Error::BarrierDivergence { detail, .. } => {
                    assert!(detail.contains("wait at a block barrier"), "{error}")
                }
                other => panic!("expected a report, got {other}"),
            }
            assert!(
                took >= std::time::Duration::from_secs_f64(common::WATCHDOG_SECONDS),
                "{took:?}"
            );
        }
    });
}
