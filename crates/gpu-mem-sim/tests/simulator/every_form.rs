//! Behaviours every kernel form shares, each written once and run in every form: the kernel is
//! spelled three ways (portable source, a closure, an async closure) and checked by one function,
//! which `every_form!` turns into a test per form (checked builds are one). The form decides the executor's plan (see
//! `executor/plan.rs`): source runs `Direct` when it names no wait or runs as regions between
//! barriers, `Stackless` when kept off regions, or on fibers when kept there; a closure runs on fibers; an async closure is `Polled`. The plan
//! may change a launch's cost, never its outcome, and these tests hold it to that.
//!
//! What only one form can do (a C++ exception, a foreign future, a fiber's reuse) stays in that
//! form's module.
#![cfg(not(miri))]

use crate::common;

use gpu_mem_core::kernel::{Dim3, LaunchConfig};
use gpu_mem_core::{Error, Kernel};
use gpu_mem_sim::thread::{AsyncThreadCtx, SharedArray, ThreadCtx};
use gpu_mem_sim::{SimBackend, SimConfig, SimDeviceConfig, SimKernel};

/// How a kernel is written, and with it how the simulator runs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// Portable source as written (entry `k`): `Direct` when it names no wait, else its blocks
    /// as regions between barriers (`Direct` too) where its barriers allow, else `Stackless`.
    Source,
    /// The same source kept off regions by a comment naming a warp barrier (which the
    /// regions rewrite refuses anywhere, the stackless one only in code): `Stackless` where the
    /// source allows it.
    SourceStackless,
    /// The same source kept on fibers by a comment naming the runtime table (`gm_sim_rt`), which
    /// keeps a kernel from being tried stackless; a kernel that names no wait still runs `Direct`.
    SourceOnFibers,
    /// The same source on a device that checks every access (`Checks::memcheck`): built
    /// checked, its threads calls, on fibers where they wait.
    SourceChecked,
    /// A closure (`Kernel::sim`), each thread on a fiber.
    Closure,
    /// An async closure (`Kernel::sim_async`), each thread a future polled in rounds.
    Async,
}

/// The kernel `k` in `form`, from its three spellings.
fn kernel(
    form: Form,
    source: &str,
    closure: impl Fn(&ThreadCtx<'_>) + Send + Sync + 'static,
    polled: impl AsyncFn(&AsyncThreadCtx<'_>) + Send + Sync + 'static,
) -> Kernel {
    match form {
        Form::Source | Form::SourceChecked => Kernel::from_source(source, "k"),
        Form::SourceStackless => Kernel::from_source(
            format!("{source}\n// decltype: keeps this kernel off regions\n"),
            "k",
        ),
        Form::SourceOnFibers => Kernel::from_source(
            format!("{source}\n// gm_sim_rt: keeps this kernel on fibers\n"),
            "k",
        ),
        Form::Closure => Kernel::sim("k", closure),
        Form::Async => Kernel::sim_async("k", polled),
    }
}

/// Runs the check `$behaviour(form)` as one test per form, in a module named after it.
macro_rules! every_form {
    ($($behaviour:ident),* $(,)?) => {$(
        mod $behaviour {
            use super::Form;
            #[test]
            fn source() {
                super::$behaviour(Form::Source)
            }
            #[test]
            fn source_stackless() {
                super::$behaviour(Form::SourceStackless)
            }
            #[test]
            fn source_on_fibers() {
                super::$behaviour(Form::SourceOnFibers)
            }
            #[test]
            fn source_checked() {
                super::$behaviour(Form::SourceChecked)
            }
            #[test]
            fn closure() {
                super::$behaviour(Form::Closure)
            }
            #[test]
            fn async_closure() {
                super::$behaviour(Form::Async)
            }
        }
    )*};
}

every_form!(
    threads_see_their_own_indices_in_blocks_of_any_shape,
    a_fault_names_its_thread_and_ends_the_block,
    a_barrier_skipped_by_some_threads_is_divergence,
    threads_that_leave_a_loop_with_barriers_apart_is_divergence,
    a_break_out_of_a_loop_with_barriers_is_taken_together_or_is_divergence,
    a_parameter_each_thread_moves_is_its_own,
    block_reductions_in_shared_memory_sum_every_thread,
    warp_and_block_collectives_give_every_thread_its_value,
    a_spin_wait_that_lets_others_run_finishes,
    a_spin_wait_that_nothing_ends_is_reported,
    an_unsupported_warp_size_is_a_launch_error,
);

/// The device `form` runs on: one that checks every access for [`Form::SourceChecked`].
fn device(form: Form) -> SimDeviceConfig {
    SimDeviceConfig {
        checks: gpu_mem_sim::Checks {
            memcheck: form == Form::SourceChecked,
            ..gpu_mem_sim::Checks::default()
        },
        ..SimDeviceConfig::default()
    }
}

fn backend_of(device: SimDeviceConfig) -> SimBackend {
    SimBackend::new(SimConfig {
        devices: vec![device],
    })
}

fn backend(form: Form) -> SimBackend {
    backend_of(device(form))
}

/// The line of `source` holding `mark`, as a report names it (`k.cu:LINE`).
fn site(source: &str, mark: &str) -> String {
    let line = source.lines().position(|l| l.contains(mark)).unwrap() + 1;
    format!("k.cu:{line}")
}

/// Where a report of `form` points: the source's `k.cu`, or this file for closures.
fn file_of(form: Form) -> &'static str {
    match form {
        Form::Source | Form::SourceStackless | Form::SourceOnFibers | Form::SourceChecked => {
            "k.cu:"
        }
        Form::Closure | Form::Async => "every_form.rs:",
    }
}

fn linear_block(t: &ThreadCtx<'_>) -> usize {
    let (block, grid) = (t.block_idx(), t.grid_dim());
    ((block.z * grid.y + block.y) * grid.x + block.x) as usize
}

const INDICES: &str = r#"#include "gpu_mem.h"
extern "C" __global__ void k(gm_array<int, 1> out) {
    const int n = blockDim.x * blockDim.y * blockDim.z;
    const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    out((long long)blockIdx.x * n + t) = t * 1000 + threadIdx.z * 100 + threadIdx.y * 10 + threadIdx.x % 10;
}
"#;

fn indices(t: &ThreadCtx<'_>) {
    let (i, n) = (t.thread_idx(), t.block_dim().count() as usize);
    let me = t.linear_thread_idx();
    t.array::<i32>(0).set(
        [t.block_idx().x as usize * n + me as usize],
        (me * 1000 + i.z * 100 + i.y * 10 + i.x % 10) as i32,
    );
}

fn threads_see_their_own_indices_in_blocks_of_any_shape(form: Form) {
    let backend = backend(form);
    let kernel = kernel(form, INDICES, indices, async |t| indices(t));
    for block in [
        Dim3::new(256, 1, 1),
        Dim3::new(3, 5, 7),
        Dim3::new(8, 4, 2),
        Dim3::new(1, 1, 1),
    ] {
        let n = block.count() as usize;
        let config = LaunchConfig::new(Dim3::new(2, 1, 1), block);
        let out = common::run_on_array(&backend, &kernel, config, &vec![-1; 2 * n]).unwrap();
        for (i, value) in out.iter().enumerate() {
            let t = (i % n) as u32;
            let (x, y, z) = (
                t % block.x,
                (t / block.x) % block.y,
                t / (block.x * block.y),
            );
            let expected = (t * 1000 + z * 100 + y * 10 + x % 10) as i32;
            assert_eq!(*value, expected, "element {i} in blocks of {block:?}");
        }
    }
}

/// How thread 9 fails in [`a_fault_names_its_thread_and_ends_the_block`].
#[derive(Clone, Copy, Debug)]
enum Failure {
    /// An index past the array's end.
    OutOfBounds,
    /// `__trap()` in source, a panic in a closure.
    Trap,
    /// A C++ exception in source, a panic in a closure.
    Throw,
}

/// Each thread writes its index, then thread 9 fails: the error names thread 9 of block 0 and
/// how it failed, and threads 0 to 9 have written, with or without a barrier before (which
/// makes the source wait, so it runs stackless or on fibers). Whether threads after the faulting
/// one ran before the block ended is the plan's: on a GPU its warp-mates run beside it, and the
/// direct plan stops at once (`direct::threads_after_the_faulting_one_do_not_run`).
fn a_fault_names_its_thread_and_ends_the_block(form: Form) {
    let backend = backend(form);
    for failure in [Failure::OutOfBounds, Failure::Trap, Failure::Throw] {
        if matches!((failure, form), (Failure::Throw, Form::SourceChecked)) {
            // CUDA has no exceptions in device code; the simulator's extension is not checked:
            // memcheck refuses the store into the exception object the C++ runtime allocated
            // (a fault of thread 9 still, named as an invalid global write).
            continue;
        }
        for barrier in [false, true] {
            let fail = match failure {
                Failure::OutOfBounds => "data(1000) = 0;",
                Failure::Trap => "__trap();",
                Failure::Throw => "throw 9;",
            };
            let wait = if barrier { "__syncthreads();" } else { "" };
            let source = format!(
                r#"#include "gpu_mem.h"
extern "C" __global__ void k(gm_array<int, 1> data) {{
    {wait}
    const int t = threadIdx.x;
    data(t) = t;
    if (t == 9) {{ {fail} }}
}}
"#
            );
            let body = move |t: &ThreadCtx<'_>| {
                let me = t.thread_idx().x as usize;
                let data = t.array::<i32>(0);
                data.set([me], me as i32);
                if me == 9 {
                    match failure {
                        Failure::OutOfBounds => data.set([1000], 0),
                        Failure::Trap | Failure::Throw => panic!("thread 9 gives up"),
                    }
                }
            };
            let kernel = kernel(
                form,
                &source,
                move |t| {
                    if barrier {
                        t.syncthreads();
                    }
                    body(t)
                },
                async move |t| {
                    if barrier {
                        t.syncthreads().await;
                    }
                    body(t)
                },
            );
            let config = LaunchConfig::new(1, 32);
            let init = vec![-1i32; 32];
            let what = format!("{failure:?}, barrier first: {barrier}");
            let (error, out) = run_until_fault(&backend, &kernel, config, &init);
            let Error::KernelFault {
                kernel: name,
                block,
                thread,
                message,
            } = &error
            else {
                panic!("{what}: expected a kernel fault, got {error}");
            };
            assert_eq!(name, "k", "{what}");
            assert_eq!((block[0], thread[0]), (0, 9), "{what}: {error}");
            let expected = match (failure, form) {
                (Failure::OutOfBounds, _) => "1000",
                (
                    Failure::Trap,
                    Form::Source
                    | Form::SourceStackless
                    | Form::SourceOnFibers
                    | Form::SourceChecked,
                ) => "trap",
                (
                    Failure::Throw,
                    Form::Source
                    | Form::SourceStackless
                    | Form::SourceOnFibers
                    | Form::SourceChecked,
                ) => "exception",
                (_, Form::Closure | Form::Async) => "the kernel panicked: thread 9 gives up",
            };
            assert!(message.contains(expected), "{what}: {error}");
            // The array after the fault: written up to thread 9; after it, written or untouched.
            for (t, value) in out.iter().enumerate() {
                let t = t as i32;
                assert!(*value == t || (t > 9 && *value == -1), "{what}: {out:?}");
            }
        }
    }
}

/// Runs a launch over `init` that must fail; its error, and the array afterwards.
fn run_until_fault(
    backend: &SimBackend,
    kernel: &Kernel,
    config: LaunchConfig,
    init: &[i32],
) -> (Error, Vec<i32>) {
    use gpu_mem_core::backend::{Memory, Transfer};
    let bytes = std::mem::size_of_val(init);
    let data = backend.alloc(0, bytes).unwrap();
    // SAFETY: `data` holds `bytes` bytes.
    unsafe { backend.copy_htod(0, data, init.as_ptr().cast(), bytes) }.unwrap();
    let args = [common::array_arg::<i32>(data, init.len())];
    let error = common::launch(backend, kernel, config, &args).unwrap_err();
    let mut back = init.to_vec();
    // SAFETY: as above; the launch was synchronous.
    unsafe { backend.copy_dtoh(0, back.as_mut_ptr().cast(), data, bytes) }.unwrap();
    // SAFETY: allocated above, no work pending on it.
    unsafe { backend.free(0, data) }.unwrap();
    (error, back)
}

const PARTIAL: &str = r#"#include "gpu_mem.h"
extern "C" __global__ void k(int* data) {
    if (threadIdx.x >= 32) return;
    __syncthreads(); // reached by half
    data[threadIdx.x] = 1;
}
"#;

const TWO_SITES: &str = r#"#include "gpu_mem.h"
extern "C" __global__ void k(int* data) {
    if (threadIdx.x % 2 == 0) {
        __syncthreads(); // the even threads'
    } else {
        __syncthreads(); // the odd threads'
    }
    data[threadIdx.x] = 1;
}
"#;

/// Half a block skips a barrier, or the halves wait at two different barriers: divergence,
/// naming how many threads reached the barrier and where each waits.
#[expect(
    clippy::if_same_then_else,
    reason = "the two barriers are the same call at two sites, which is the point"
)]
fn a_barrier_skipped_by_some_threads_is_divergence(form: Form) {
    let backend = backend(form);
    let config = LaunchConfig::new(2, 64);
    let partial = kernel(
        form,
        PARTIAL,
        |t| {
            if t.thread_idx().x < 32 {
                t.syncthreads();
            }
        },
        async |t| {
            if t.thread_idx().x < 32 {
                t.syncthreads().await;
            }
        },
    );
    let error = common::run_on_array(&backend, &partial, config, &[0i32; 128]).unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(error, Error::BarrierDivergence { .. }) && text.contains("32 of 64"),
        "{text}"
    );
    match form {
        Form::Source | Form::SourceStackless | Form::SourceOnFibers | Form::SourceChecked => {
            assert!(text.contains(&site(PARTIAL, "reached by half")), "{text}")
        }
        Form::Closure | Form::Async => assert!(text.contains(file_of(form)), "{text}"),
    }

    let two_sites = kernel(
        form,
        TWO_SITES,
        |t| {
            if t.thread_idx().x % 2 == 0 {
                t.syncthreads();
            } else {
                t.syncthreads();
            }
        },
        async |t| {
            if t.thread_idx().x % 2 == 0 {
                t.syncthreads().await;
            } else {
                t.syncthreads().await;
            }
        },
    );
    let error = common::run_on_array(&backend, &two_sites, config, &[0i32; 128]).unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, Error::BarrierDivergence { .. }), "{text}");
    match form {
        Form::Source | Form::SourceStackless | Form::SourceOnFibers | Form::SourceChecked => {
            assert!(
                text.contains(&site(TWO_SITES, "even threads'"))
                    && text.contains(&site(TWO_SITES, "odd threads'")),
                "{text}"
            )
        }
        Form::Closure | Form::Async => {
            assert!(text.matches(file_of(form)).count() >= 2, "{text}")
        }
    }
}

const LOOP_APART: &str = r#"#include "gpu_mem.h"
extern "C" __global__ void k(int* data) {
    for (int i = 0; i <= (int)(threadIdx.x % 2); ++i) {
        __syncthreads(); // in the loop
    }
    data[threadIdx.x] = 1;
}
"#;

/// The odd threads go round a loop with a barrier once more than the even ones, which have
/// ended by then: divergence at the loop's barrier, as for a barrier skipped.
fn threads_that_leave_a_loop_with_barriers_apart_is_divergence(form: Form) {
    let backend = backend(form);
    let kernel = kernel(
        form,
        LOOP_APART,
        |t| {
            for _ in 0..=t.thread_idx().x % 2 {
                t.syncthreads();
            }
        },
        async |t| {
            for _ in 0..=t.thread_idx().x % 2 {
                t.syncthreads().await;
            }
        },
    );
    let config = LaunchConfig::new(1, 64);
    let error = common::run_on_array(&backend, &kernel, config, &[0i32; 64]).unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(error, Error::BarrierDivergence { .. }) && text.contains("32 of 64"),
        "{text}"
    );
    if file_of(form) == "k.cu:" {
        assert!(text.contains(&site(LOOP_APART, "in the loop")), "{text}");
    }
}

/// Each thread counts its steps round a loop with two barriers, reading its neighbour's cell
/// between them, until it breaks out at step `STOP` (with `+ threadIdx.x % 2`: the odd threads
/// one step later).
const BREAK_OUT: &str = r#"#include "gpu_mem.h"
extern "C" __global__ void k(int* data) {
    __shared__ int cells[64];
    int steps = 0;
    cells[threadIdx.x] = 0;
    for (int i = 0; i < 100; ++i) {
        cells[threadIdx.x] += 1;
        __syncthreads();
        if (i == STOP) break;
        steps += cells[(threadIdx.x + 1) % blockDim.x];
        __syncthreads(); // the second
    }
    data[blockIdx.x * blockDim.x + threadIdx.x] = steps * 100 + cells[threadIdx.x];
}
"#;

fn break_out(t: &ThreadCtx<'_>, i: u32) -> bool {
    i == 4 + t.thread_idx().x % 2
}

/// Every thread breaks out of a loop with barriers at the same step: the loop ends for all;
/// the odd threads a step later than the even ones: divergence at the second barrier, which
/// the odd threads reach when the even ones have ended.
fn a_break_out_of_a_loop_with_barriers_is_taken_together_or_is_divergence(form: Form) {
    let backend = backend(form);
    let together = BREAK_OUT.replace("STOP", "4");
    let closure = move |t: &ThreadCtx<'_>, apart: bool| {
        let cells = t.shared_array::<i32, 1>([64]);
        let (me, n) = (t.thread_idx().x as usize, t.block_dim().x as usize);
        cells.set([me], 0);
        let mut steps = 0;
        for i in 0..100 {
            cells.set([me], cells.get([me]) + 1);
            t.syncthreads();
            if (apart && break_out(t, i)) || (!apart && i == 4) {
                break;
            }
            steps += cells.get([(me + 1) % n]);
            t.syncthreads();
        }
        let out = t.block_idx().x as usize * n + me;
        t.array::<i32>(0).set([out], steps * 100 + cells.get([me]));
    };
    let polled = async move |t: &AsyncThreadCtx<'_>, apart: bool| {
        let cells = t.shared_array::<i32, 1>([64]);
        let (me, n) = (t.thread_idx().x as usize, t.block_dim().x as usize);
        cells.set([me], 0);
        let mut steps = 0;
        for i in 0..100 {
            cells.set([me], cells.get([me]) + 1);
            t.syncthreads().await;
            if (apart && break_out(t, i)) || (!apart && i == 4) {
                break;
            }
            steps += cells.get([(me + 1) % n]);
            t.syncthreads().await;
        }
        let out = t.block_idx().x as usize * n + me;
        t.array::<i32>(0).set([out], steps * 100 + cells.get([me]));
    };
    let kernel_together = kernel(
        form,
        &together,
        move |t| closure(t, false),
        async move |t| polled(t, false).await,
    );
    let config = LaunchConfig::new(2, 64);
    let out = common::run_on_array(&backend, &kernel_together, config, &[0i32; 128]).unwrap();
    // Five steps, the neighbour's cell read after each of the first four: 1 + 2 + 3 + 4.
    assert_eq!(out, vec![1005; 128]);

    let apart = BREAK_OUT.replace("STOP", "4 + (int)(threadIdx.x % 2)");
    let kernel_apart = kernel(
        form,
        &apart,
        move |t| closure(t, true),
        async move |t| polled(t, true).await,
    );
    let error = common::run_on_array(&backend, &kernel_apart, config, &[0i32; 128]).unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(error, Error::BarrierDivergence { .. }) && text.contains("32 of 64"),
        "{text}"
    );
    if file_of(form) == "k.cu:" {
        assert!(text.contains(&site(&apart, "the second")), "{text}");
    }
}

const MOVED: &str = r#"#include "gpu_mem.h"
extern "C" __global__ void k(int* data) {
    data += blockIdx.x * blockDim.x + threadIdx.x;
    __syncthreads();
    *data = (int)threadIdx.x + 1;
}
"#;

/// A kernel's parameters are each thread's own: one that moves its pointer moves no other's.
fn a_parameter_each_thread_moves_is_its_own(form: Form) {
    let backend = backend(form);
    let write = |t: &ThreadCtx<'_>| {
        let me = (t.block_idx().x * t.block_dim().x + t.thread_idx().x) as usize;
        t.array::<i32>(0).set([me], t.thread_idx().x as i32 + 1);
    };
    let kernel = kernel(
        form,
        MOVED,
        move |t| {
            t.syncthreads();
            write(t);
        },
        async move |t| {
            t.syncthreads().await;
            write(t);
        },
    );
    let config = LaunchConfig::new(3, 40);
    let out = common::run_on_array(&backend, &kernel, config, &[0i32; 120]).unwrap();
    let expected: Vec<i32> = (0..120).map(|i| i % 40 + 1).collect();
    assert_eq!(out, expected);
}

/// A tree reduction with its barrier in a helper function, a reference to `threadIdx` kept
/// across barriers and an early return after the last one.
const TREE_SUM: &str = r#"#include "gpu_mem.h"
__device__ void step() { __syncthreads(); }
extern "C" __global__ void k(unsigned int* out) {
    __shared__ unsigned int cells[1024];
    const dim3& me = threadIdx;
    const unsigned n = blockDim.x * blockDim.y * blockDim.z;
    const unsigned t = me.x + blockDim.x * (me.y + blockDim.y * me.z);
    cells[t] = t + 1;
    step();
    unsigned width = 1;
    while (width < n) width *= 2;
    for (unsigned stride = width / 2; stride > 0; stride /= 2) {
        if (t < stride && t + stride < n) cells[t] += cells[t + stride];
        step();
    }
    if (t != 0) return;
    out[blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)] = cells[0];
}
"#;

/// [`TREE_SUM`]'s work between two barriers; `stride` 0 is the first, which fills the cells.
fn tree_step(t: &ThreadCtx<'_>, cells: &SharedArray<'_, u32, 1>, stride: usize) {
    let n = t.block_dim().count() as usize;
    let me = t.linear_thread_idx() as usize;
    if stride == 0 {
        cells.set([me], me as u32 + 1);
    } else if me < stride && me + stride < n {
        cells.set([me], cells.get([me]) + cells.get([me + stride]));
    }
}

fn tree_strides(t: &ThreadCtx<'_>) -> impl Iterator<Item = usize> + use<> {
    let width = (t.block_dim().count() as usize).next_power_of_two();
    std::iter::successors(Some(width / 2), |s| Some(s / 2)).take_while(|&s| s > 0)
}

fn tree_result(t: &ThreadCtx<'_>, cells: &SharedArray<'_, u32, 1>) {
    if t.linear_thread_idx() == 0 {
        t.array::<u32>(0).set([linear_block(t)], cells.get([0]));
    }
}

fn block_reductions_in_shared_memory_sum_every_thread(form: Form) {
    let backend = backend(form);
    let kernel = kernel(
        form,
        TREE_SUM,
        |t| {
            let cells = t.shared_array([1024]);
            tree_step(t, &cells, 0);
            t.syncthreads();
            for stride in tree_strides(t) {
                tree_step(t, &cells, stride);
                t.syncthreads();
            }
            tree_result(t, &cells);
        },
        async |t| {
            let cells = t.shared_array([1024]);
            tree_step(t, &cells, 0);
            t.syncthreads().await;
            for stride in tree_strides(t) {
                tree_step(t, &cells, stride);
                t.syncthreads().await;
            }
            tree_result(t, &cells);
        },
    );
    for (grid, block) in [
        (Dim3::new(3, 1, 1), Dim3::new(256, 1, 1)),
        (Dim3::new(2, 2, 1), Dim3::new(100, 1, 1)),
        (Dim3::new(2, 1, 1), Dim3::new(8, 4, 2)),
        (Dim3::new(1, 1, 1), Dim3::new(1024, 1, 1)),
        (Dim3::new(5, 1, 1), Dim3::new(33, 1, 1)),
        // (Small blocks: one run of the program goes through all of them, across y and z.)
        (Dim3::new(3, 2, 3), Dim3::new(8, 1, 1)),
    ] {
        let config = LaunchConfig::new(grid, block);
        let blocks = grid.count() as usize;
        let n = block.count() as u32;
        let sums = common::run_on_array(&backend, &kernel, config, &vec![0u32; blocks]).unwrap();
        assert_eq!(sums, vec![n * (n + 1) / 2; blocks], "{grid} x {block}");
    }
}

/// Values per thread in [`warp_and_block_collectives_give_every_thread_its_value`].
const PER_THREAD: usize = 8;

const COLLECTIVES: &str = r#"#include "gpu_mem.h"
extern "C" __global__ void k(unsigned int* out) {
    const unsigned me = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = threadIdx.x % 32;
    unsigned sum = lane + 1;
    for (int delta = 16; delta > 0; delta /= 2) sum += __shfl_down_sync(~0u, sum, delta);
    unsigned values[8] = {
        sum,
        __shfl_sync(~0u, lane * 3, 5),
        __shfl_up_sync(~0u, lane, 2),
        __float_as_uint(__shfl_xor_sync(~0u, (float)lane, 7)),
        (unsigned)__ballot_sync(~0u, lane % 3 == 0),
        (unsigned)(__all_sync(~0u, lane < 40) != 0) + 2u * (unsigned)(__any_sync(~0u, lane == 9) != 0),
        (unsigned)__syncthreads_count(me % 5 == 0),
        (unsigned)(__syncthreads_and(me < 1000) != 0) + 2u * (unsigned)(__syncthreads_or(me == 7) != 0),
    };
    for (int i = 0; i < 8; ++i) out[me * 8 + i] = values[i];
}
"#;

/// Writes what the thread got from each collective (see [`COLLECTIVES`]).
fn write_collectives(t: &ThreadCtx<'_>, values: [u32; PER_THREAD]) {
    let me = t.block_idx().x as usize * t.block_dim().x as usize + t.thread_idx().x as usize;
    for (i, v) in values.into_iter().enumerate() {
        t.array::<u32>(0).set([me * PER_THREAD + i], v);
    }
}

/// What thread `me` (a global index) of a launch of full 32-lane warps in blocks of `threads`
/// gets from [`COLLECTIVES`], worked out here.
fn collectives_expected(me: u32, threads: u32) -> [u32; PER_THREAD] {
    let lane = me % 32;
    // The shuffle tree: a lane whose source is past the warp keeps its own value.
    let mut sums: Vec<u32> = (1..=32).collect();
    for delta in [16, 8, 4, 2, 1] {
        sums = (0..32)
            .map(|l| sums[l] + sums[if l + delta < 32 { l + delta } else { l }])
            .collect();
    }
    let block = me / threads;
    let in_block = block * threads..(block + 1) * threads;
    [
        sums[lane as usize],
        15,
        if lane >= 2 { lane - 2 } else { lane },
        ((lane ^ 7) as f32).to_bits(),
        (0..32).filter(|l| l % 3 == 0).map(|l| 1u32 << l).sum(),
        3,
        in_block.clone().filter(|m| m % 5 == 0).count() as u32,
        1 + 2 * u32::from(in_block.contains(&7)),
    ]
}

fn warp_and_block_collectives_give_every_thread_its_value(form: Form) {
    let backend = backend(form);
    let in_form = |form| {
        kernel(
            form,
            COLLECTIVES,
            |t| {
                let me = t.block_idx().x * t.block_dim().x + t.thread_idx().x;
                let lane = t.thread_idx().x % 32;
                let mut sum = lane + 1;
                for delta in [16, 8, 4, 2, 1] {
                    sum += t.shfl_down_sync(u64::MAX, sum, delta);
                }
                let values = [
                    sum,
                    t.shfl_sync(u64::MAX, lane * 3, 5),
                    t.shfl_up_sync(u64::MAX, lane, 2),
                    t.shfl_xor_sync(u64::MAX, lane as f32, 7).to_bits(),
                    t.ballot_sync(u64::MAX, lane.is_multiple_of(3)) as u32,
                    u32::from(t.all_sync(u64::MAX, lane < 40))
                        + 2 * u32::from(t.any_sync(u64::MAX, lane == 9)),
                    t.syncthreads_count(me.is_multiple_of(5)),
                    u32::from(t.syncthreads_and(me < 1000))
                        + 2 * u32::from(t.syncthreads_or(me == 7)),
                ];
                write_collectives(t, values);
            },
            async |t| {
                let me = t.block_idx().x * t.block_dim().x + t.thread_idx().x;
                let lane = t.thread_idx().x % 32;
                let mut sum = lane + 1;
                for delta in [16, 8, 4, 2, 1] {
                    sum += t.shfl_down_sync(u64::MAX, sum, delta).await;
                }
                let values = [
                    sum,
                    t.shfl_sync(u64::MAX, lane * 3, 5).await,
                    t.shfl_up_sync(u64::MAX, lane, 2).await,
                    t.shfl_xor_sync(u64::MAX, lane as f32, 7).await.to_bits(),
                    t.ballot_sync(u64::MAX, lane.is_multiple_of(3)).await as u32,
                    u32::from(t.all_sync(u64::MAX, lane < 40).await)
                        + 2 * u32::from(t.any_sync(u64::MAX, lane == 9).await),
                    t.syncthreads_count(me.is_multiple_of(5)).await,
                    u32::from(t.syncthreads_and(me < 1000).await)
                        + 2 * u32::from(t.syncthreads_or(me == 7).await),
                ];
                write_collectives(t, values);
            },
        )
    };
    let run = |kernel: &Kernel, blocks: u32, threads: u32| {
        let config = LaunchConfig::new(blocks, threads);
        let len = (blocks * threads) as usize * PER_THREAD;
        common::run_on_array(&backend, kernel, config, &vec![0u32; len]).unwrap()
    };
    let kernel_in_form = in_form(form);
    // Full warps: every value worked out.
    for (blocks, threads) in [(2u32, 64u32), (3, 32)] {
        let out = run(&kernel_in_form, blocks, threads);
        for me in 0..blocks * threads {
            let got = &out[me as usize * PER_THREAD..][..PER_THREAD];
            assert_eq!(
                got,
                collectives_expected(me, threads),
                "thread {me} of {blocks} x {threads}"
            );
        }
    }
    // Partial warps (a lane whose source is missing keeps its value): as the closure form.
    let closure = in_form(Form::Closure);
    for (blocks, threads) in [(1u32, 48u32), (3, 96), (2, 20)] {
        assert_eq!(
            run(&kernel_in_form, blocks, threads),
            run(&closure, blocks, threads),
            "{blocks} x {threads}"
        );
    }
}

const FLAG: &str = r#"#include "gpu_mem.h"
extern "C" __global__ void k(int* out) {
    __shared__ int flag;
    if (threadIdx.x == 0) flag = 0;
    __syncthreads();
    if (threadIdx.x == 0) {
        while (atomicAdd(&flag, 0) == 0) __nanosleep(10);
        out[0] = flag;
    } else if (threadIdx.x == blockDim.x - 1 && SETS_FLAG) {
        atomicExch(&flag, 42);
    }
}
"#;

fn flag_source(sets_flag: bool) -> String {
    FLAG.replace("SETS_FLAG", if sets_flag { "1" } else { "0" })
}

/// [`FLAG`]'s work before its barrier.
fn flag_init(t: &ThreadCtx<'_>, flag: &SharedArray<'_, i32, 1>) {
    if t.thread_idx().x == 0 {
        flag.set([0], 0);
    }
}

/// [`FLAG`]'s work after its barrier, up to its spin (whether the thread spins).
fn flag_raise(t: &ThreadCtx<'_>, flag: &SharedArray<'_, i32, 1>, sets_flag: bool) -> bool {
    if t.thread_idx().x == 0 {
        return true;
    }
    if t.thread_idx().x == t.block_dim().x - 1 && sets_flag {
        flag.atomic_exch([0], 42);
    }
    false
}

fn flag_seen(flag: &SharedArray<'_, i32, 1>) -> bool {
    flag.atomic_add([0], 0) != 0
}

/// The flag kernel in `form`: thread 0 spins, letting the others run, until the block's last
/// thread raises a flag, if `sets_flag`.
fn flag_kernel(form: Form, sets_flag: bool) -> Kernel {
    kernel(
        form,
        &flag_source(sets_flag),
        move |t| {
            let flag = t.shared_array([1]);
            flag_init(t, &flag);
            t.syncthreads();
            if flag_raise(t, &flag, sets_flag) {
                while !flag_seen(&flag) {
                    t.nanosleep();
                }
                t.array::<i32>(0).set([0], flag.get([0]));
            }
        },
        async move |t| {
            let flag = t.shared_array([1]);
            flag_init(t, &flag);
            t.syncthreads().await;
            if flag_raise(t, &flag, sets_flag) {
                while !flag_seen(&flag) {
                    t.nanosleep().await;
                }
                t.array::<i32>(0).set([0], flag.get([0]));
            }
        },
    )
}

/// Runs [`flag_kernel`] in one block of `threads`; the flag thread 0 saw.
fn run_flag(
    backend: &SimBackend,
    form: Form,
    sets_flag: bool,
    threads: u32,
) -> Result<Vec<i32>, Error> {
    let kernel = flag_kernel(form, sets_flag);
    common::run_on_array(backend, &kernel, LaunchConfig::new(1, threads), &[0i32])
}

fn a_spin_wait_that_lets_others_run_finishes(form: Form) {
    assert_eq!(run_flag(&backend(form), form, true, 64).unwrap(), vec![42]);
}

/// Reported after the spin limits and the watchdog's time ([`common::WATCHDOG_SECONDS`] here),
/// not a hang; the backend runs the next launch.
fn a_spin_wait_that_nothing_ends_is_reported(form: Form) {
    let backend = backend_of(SimDeviceConfig {
        watchdog: gpu_mem_sim::Watchdog::after(std::time::Duration::from_secs_f64(
            common::WATCHDOG_SECONDS,
        )),
        ..device(form)
    });
    let started = std::time::Instant::now();
    let error = run_flag(&backend, form, false, 2).unwrap_err();
    assert!(error.to_string().contains("no forward progress"), "{error}");
    assert!(started.elapsed() >= std::time::Duration::from_secs_f64(common::WATCHDOG_SECONDS));
    assert_eq!(run_flag(&backend, form, true, 2).unwrap(), vec![42]);
}

/// A device configured with a warp size the simulator cannot run is refused at launch.
fn an_unsupported_warp_size_is_a_launch_error(form: Form) {
    let backend = backend_of(SimDeviceConfig {
        warp_size: 128,
        ..device(form)
    });
    let kernel = kernel(
        form,
        COLLECTIVES,
        |t| {
            t.ballot_sync(u64::MAX, true);
        },
        async |t| {
            t.ballot_sync(u64::MAX, true).await;
        },
    );
    let error = common::run_on_array(&backend, &kernel, LaunchConfig::new(1, 128), &[0u32; 1024])
        .unwrap_err();
    match error {
        Error::InvalidLaunch { kernel, reason } => {
            assert_eq!(kernel, "k");
            assert!(
                reason.contains("128") && reason.contains("32 or 64"),
                "{reason}"
            );
        }
        other => panic!("{other:?}"),
    }
}
