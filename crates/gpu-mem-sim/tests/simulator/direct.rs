//! Kernels whose threads never wait for each other run as a loop inside their compiled program
//! (the direct plan): every thread must get its own copy of the parameters, the block must stop
//! at its first fault, and small blocks run together must each report their own. What every
//! plan must do alike (indices, faults, divergence) is checked once for all in `every_form`.
#![cfg(not(miri))]

use crate::common;

use gpu_mem_core::kernel::{Dim3, LaunchConfig};
use gpu_mem_core::{Error, Kernel};
use gpu_mem_sim::{SimBackend, SimConfig};

#[test]
fn each_thread_gets_its_own_copy_of_the_parameters() {
    let backend = SimBackend::new(SimConfig::default());
    // Every thread changes its parameters; the next one must still see the launch's values.
    let source = r#"#include "gpu_mem.h"
extern "C" __global__ void bump(gm_array<int, 1> out, int n, int a, int b) {
    n += threadIdx.x;
    a += 1;
    b *= 2;
    out(threadIdx.x) = n * 10000 + a * 100 + b;
}
"#;
    let kernel = Kernel::from_source(source, "bump");
    let len = 64usize;
    // (`n = 5`, `a = 3`, `b = 7`.)
    let config = LaunchConfig::new(Dim3::new(1, 1, 1), Dim3::new(len as u32, 1, 1));
    let out = run_on_ints(&backend, &kernel, config, len, &[5, 3, 7]);
    for (i, value) in out.iter().enumerate() {
        assert_eq!(*value, (5 + i as i32) * 10000 + 4 * 100 + 14, "thread {i}");
    }
}

/// Launches `kernel` with `config` on an array of `len` `i32` holding -1 and the integers
/// `ints` after it, and gives the array back.
fn run_on_ints(
    backend: &SimBackend,
    kernel: &Kernel,
    config: LaunchConfig,
    len: usize,
    ints: &[i32],
) -> Vec<i32> {
    use gpu_mem_core::backend::{Memory, Transfer};
    let bytes = len * 4;
    let out = backend.alloc(0, bytes).unwrap();
    let init = vec![-1i32; len];
    // SAFETY: `out` holds `bytes` bytes.
    unsafe { backend.copy_htod(0, out, init.as_ptr().cast(), bytes) }.unwrap();
    let args: Vec<_> = std::iter::once(common::array_arg::<i32>(out, len))
        .chain(ints.iter().map(|&v| common::int_arg(v)))
        .collect();
    common::launch(backend, kernel, config, &args).unwrap();
    let mut back = vec![0i32; len];
    // SAFETY: as above; the launch was synchronous.
    unsafe { backend.copy_dtoh(0, back.as_mut_ptr().cast(), out, bytes) }.unwrap();
    // SAFETY: allocated above, no work pending on it.
    unsafe { backend.free(0, out) }.unwrap();
    back
}

#[test]
fn threads_after_the_faulting_one_do_not_run() {
    let backend = SimBackend::new(SimConfig::default());
    // Pointer form: each thread writes its index, thread 9 traps. Threads 10.. must leave
    // their element as it was.
    let source = r#"#include "gpu_mem.h"
extern "C" __global__ void trap_at_nine(int* data) {
    const int t = threadIdx.x;
    data[t] = t;
    if (t == 9) __trap();
}
"#;
    use gpu_mem_core::backend::{Memory, Transfer};
    let len = 32usize;
    let bytes = len * 4;
    let out = backend.alloc(0, bytes).unwrap();
    let init = vec![-1i32; len];
    // SAFETY: `out` holds `bytes` bytes.
    unsafe { backend.copy_htod(0, out, init.as_ptr().cast(), bytes) }.unwrap();
    let config = LaunchConfig::new(Dim3::new(1, 1, 1), Dim3::new(len as u32, 1, 1));
    let error = common::launch(
        &backend,
        &Kernel::from_source(source, "trap_at_nine"),
        config,
        &[common::array_arg::<i32>(out, len)],
    )
    .unwrap_err();
    assert!(
        matches!(&error, Error::KernelFault { thread, .. } if thread[0] == 9),
        "{error}"
    );
    let mut back = vec![0i32; len];
    // SAFETY: as above; the launch was synchronous.
    unsafe { backend.copy_dtoh(0, back.as_mut_ptr().cast(), out, bytes) }.unwrap();
    // SAFETY: allocated above, no work pending on it.
    unsafe { backend.free(0, out) }.unwrap();
    let expected: Vec<i32> = (0..len as i32)
        .map(|t| if t <= 9 { t } else { -1 })
        .collect();
    assert_eq!(back, expected);
}

#[test]
fn small_blocks_run_together_and_a_fault_names_its_own_block() {
    let backend = SimBackend::new(SimConfig::default());
    // 32 x 32 blocks of 4 x 4 threads (several run as one): each thread writes its global
    // linear index; blocks (5, 9) and (20, 28) fault in thread (1, 2), and the lower one is
    // reported.
    let source = r#"#include "gpu_mem.h"
extern "C" __global__ void tiles(gm_array<int, 1> out, int fault) {
    const int bx = blockIdx.x + gridDim.x * blockIdx.y;
    const int t = threadIdx.x + blockDim.x * threadIdx.y;
    if (fault && threadIdx.x == 1 && threadIdx.y == 2 &&
        ((blockIdx.x == 5 && blockIdx.y == 9) || (blockIdx.x == 20 && blockIdx.y == 28))) {
        __trap();
    }
    out(bx * 16 + t) = bx * 16 + t;
}
"#;
    use gpu_mem_core::backend::{Memory, Transfer};
    use gpu_mem_core::kernel::LaunchArg;
    let len = 32 * 32 * 16;
    let bytes = len * 4;
    let out = backend.alloc(0, bytes).unwrap();
    let kernel = Kernel::from_source(source, "tiles");
    let config = LaunchConfig::new(Dim3::new(32, 32, 1), Dim3::new(4, 4, 1));
    let launch = |fault: i32| {
        let args = [
            common::array_arg::<i32>(out, len),
            LaunchArg::Scalar {
                bytes: fault.to_ne_bytes().to_vec(),
                elem: std::any::TypeId::of::<i32>(),
                dtype: "i32",
            },
        ];
        common::launch(&backend, &kernel, config, &args)
    };
    launch(0).unwrap();
    let mut back = vec![0i32; len];
    // SAFETY: `out` holds `bytes` bytes; the launch was synchronous.
    unsafe { backend.copy_dtoh(0, back.as_mut_ptr().cast(), out, bytes) }.unwrap();
    assert!(back.iter().enumerate().all(|(i, v)| *v == i as i32));

    let error = launch(1).unwrap_err();
    assert!(
        matches!(&error, Error::KernelFault { block, thread, .. }
            if block[..2] == [5, 9] && thread[..2] == [1, 2]),
        "{error}"
    );
    // SAFETY: allocated above, no work pending on it.
    unsafe { backend.free(0, out) }.unwrap();
}

#[test]
fn lanes_count_through_every_row_and_layer_of_a_block() {
    // Blocks of 5 x 3 x 3 (45 threads: a warp ends inside the second layer): each thread's
    // lane is its linear index modulo the warp, whatever row and layer it is in.
    let source = r#"#include "gpu_mem.h"
extern "C" __global__ void lanes(gm_array<int, 1> out) {
    const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    out(blockIdx.x * 45 + t) = gm_lane_id() * 1000 + t;
}
"#;
    let backend = SimBackend::new(SimConfig::default());
    let config = LaunchConfig::new(Dim3::new(3, 1, 1), Dim3::new(5, 3, 3));
    let out = common::run_on_array(
        &backend,
        &Kernel::from_source(source, "lanes"),
        config,
        &[-1i32; 3 * 45],
    )
    .unwrap();
    for (i, value) in out.iter().enumerate() {
        let t = (i % 45) as i32;
        assert_eq!(*value, (t % 32) * 1000 + t, "element {i}");
    }
}

/// Runs `kernel(out, w, h, d)` over `grid` blocks of `block` threads, `out` of `len` elements
/// set to -1 first, and gives `out` back.
fn run_guarded(
    source: &str,
    name: &str,
    grid: Dim3,
    block: Dim3,
    whd: [i32; 3],
    len: usize,
) -> Vec<i32> {
    let backend = SimBackend::new(SimConfig::default());
    let kernel = Kernel::from_source(source, name);
    run_on_ints(&backend, &kernel, LaunchConfig::new(grid, block), len, &whd)
}

#[test]
fn leading_guards_skip_only_the_threads_they_refuse() {
    // Guards on each axis, alone, joined by `||` and behind index variables, over grids whose
    // edge blocks they cut part of (rows, planes) or all of: every thread they admit must
    // still run, in every block, plane and row after a cut (the loop over threads stops an
    // axis at the first thread a guard refuses along it).
    let source = r#"
__global__ void axes(int* out, int w, int h, int d) {
    if (threadIdx.x + blockIdx.x * blockDim.x >= w) return;
    if (blockDim.y * blockIdx.y + threadIdx.y >= h) { return; }
    if (d <= threadIdx.z + blockIdx.z * blockDim.z) return;
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    const int z = blockIdx.z * blockDim.z + threadIdx.z;
    out[(z * 16 + y) * 16 + x] = (z * 16 + y) * 16 + x;
}
__global__ void joined(int* out, int w, int h, int d) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= h || col >= w || d < 0) return;
    out[row * 16 + col] = row * 16 + col;
}
__global__ void wrapped(int* out, int w, int h, int d) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if ((col < w) && h > row && d >= 0) {
        out[row * 16 + col] = row * 16 + col;
    }
}
__global__ void odd_columns(int* out, int w, int h, int d) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col % 2 == 1 && col < w && row < h && d >= 0) {
        out[row * 16 + col] = row * 16 + col;
    }
}
__global__ void planes_first(int* out, int w, int h, int d) {
    if (threadIdx.z >= d) return;
    if (threadIdx.y >= h) return;
    out[(threadIdx.z * 16 + threadIdx.y) * 16 + threadIdx.x] = (threadIdx.z * 16 + threadIdx.y) * 16 + threadIdx.x;
}
"#;
    let len = 16 * 16 * 16;
    let expected = |admits: &dyn Fn(i32, i32, i32) -> bool| -> Vec<i32> {
        (0..len as i32)
            .map(|i| {
                let (x, y, z) = (i % 16, i / 16 % 16, i / 256);
                if admits(x, y, z) { i } else { -1 }
            })
            .collect()
    };
    for (w, h, d) in [
        (13, 7, 5),
        (16, 16, 16),
        (1, 1, 1),
        (0, 5, 5),
        (7, 0, 3),
        (5, 9, 0),
        (-3, 4, 4),
    ] {
        let got = run_guarded(
            source,
            "axes",
            Dim3::new(4, 4, 4),
            Dim3::new(4, 4, 4),
            [w, h, d],
            len,
        );
        // (Unsigned comparisons, as CUDA makes them: a negative bound admits every thread.)
        let below = |i: i32, bound: i32| (i as u32) < (bound as u32);
        let want = expected(&|x, y, z| below(x, w) && below(y, h) && below(z, d));
        assert_eq!(got, want, "axes, w {w} h {h} d {d}");
        let got = run_guarded(
            source,
            "joined",
            Dim3::new(3, 5, 1),
            Dim3::new(6, 4, 1),
            [w, h, d],
            len,
        );
        let want = expected(&|x, y, z| z == 0 && x < w && y < h && x < 18 && y < 20 && d >= 0);
        assert_eq!(got, want, "joined, w {w} h {h} d {d}");
        // The same cut written as the `if` around the body (run as a flat loop over the box
        // it admits), and one whose condition admits no prefix (asked of every thread).
        for name in ["wrapped", "odd_columns"] {
            let got = run_guarded(
                source,
                name,
                Dim3::new(3, 5, 1),
                Dim3::new(6, 4, 1),
                [w, h, d],
                len,
            );
            let odd = name == "odd_columns";
            let want = expected(&|x, y, z| {
                z == 0 && x < w && y < h && x < 16 && y < 16 && d >= 0 && (!odd || x % 2 == 1)
            });
            assert_eq!(got, want, "{name}, w {w} h {h} d {d}");
        }
        let got = run_guarded(
            source,
            "planes_first",
            Dim3::new(1, 1, 1),
            Dim3::new(4, 8, 8),
            [w, h, d],
            len,
        );
        let want = expected(&|x, y, z| x < 4 && y < 8 && z < 8 && below(z, d) && below(y, h));
        assert_eq!(got, want, "planes_first, w {w} h {h} d {d}");
    }
}
