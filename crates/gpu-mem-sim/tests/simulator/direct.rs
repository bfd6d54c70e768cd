//! Kernels whose threads never wait for each other run as a loop inside their compiled program
//! (the direct plan): every thread must see its own indices and its own copy of the parameters,
//! and the block must stop after its first fault, naming that thread, as a thread run by any
//! other plan does.
#![cfg(not(miri))]

use crate::common;

use gpu_mem_core::kernel::{Dim3, LaunchConfig};
use gpu_mem_core::{Error, Kernel};
use gpu_mem_sim::{SimBackend, SimConfig};

fn run(
    backend: &SimBackend,
    source: &str,
    entry: &str,
    config: LaunchConfig,
    init: &[i32],
) -> Result<Vec<i32>, Error> {
    common::run_on_array(backend, &Kernel::from_source(source, entry), config, init)
}

#[test]
fn every_thread_sees_its_own_indices_in_blocks_of_any_shape() {
    let backend = SimBackend::new(SimConfig::default());
    let source = r#"#include "gpu_mem.h"
extern "C" __global__ void where_am_i(gm_array<int, 1> out) {
    const int n = blockDim.x * blockDim.y * blockDim.z;
    const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    out((long long)blockIdx.x * n + t) = t * 1000 + threadIdx.z * 100 + threadIdx.y * 10 + threadIdx.x % 10;
}
"#;
    for block in [
        Dim3::new(256, 1, 1),
        Dim3::new(3, 5, 7),
        Dim3::new(8, 4, 2),
        Dim3::new(1, 1, 1),
    ] {
        let n = block.count() as usize;
        let config = LaunchConfig::new(Dim3::new(2, 1, 1), block);
        let out = run(&backend, source, "where_am_i", config, &vec![-1; 2 * n]).unwrap();
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
    let out = backend_alloc_and_run(&backend, &kernel, len);
    for (i, value) in out.iter().enumerate() {
        assert_eq!(*value, (5 + i as i32) * 10000 + 4 * 100 + 14, "thread {i}");
    }
}

/// Launches `bump` over `len` threads with `n = 5`, `a = 3`, `b = 7`.
fn backend_alloc_and_run(backend: &SimBackend, kernel: &Kernel, len: usize) -> Vec<i32> {
    use gpu_mem_core::backend::{Memory, Transfer};
    use gpu_mem_core::kernel::LaunchArg;
    let bytes = len * 4;
    let out = backend.alloc(0, bytes).unwrap();
    let scalar = |value: i32| LaunchArg::Scalar {
        bytes: value.to_ne_bytes().to_vec(),
        elem: std::any::TypeId::of::<i32>(),
        dtype: "i32",
    };
    let args = [
        common::array_arg::<i32>(out, len),
        scalar(5),
        scalar(3),
        scalar(7),
    ];
    let config = LaunchConfig::new(Dim3::new(1, 1, 1), Dim3::new(len as u32, 1, 1));
    common::launch(backend, kernel, config, &args).unwrap();
    let mut back = vec![0i32; len];
    // SAFETY: `out` holds `bytes` bytes; the launch was synchronous.
    unsafe { backend.copy_dtoh(0, back.as_mut_ptr().cast(), out, bytes) }.unwrap();
    // SAFETY: allocated above, no work pending on it.
    unsafe { backend.free(0, out) }.unwrap();
    back
}

#[test]
fn the_block_stops_after_its_first_fault() {
    let backend = SimBackend::new(SimConfig::default());
    let config = LaunchConfig::new(Dim3::new(1, 1, 1), Dim3::new(128, 1, 1));
    // Thread 37 reads past the end; the threads after it must not run.
    let oob = r#"#include "gpu_mem.h"
extern "C" __global__ void oob(gm_array<int, 1> data) {
    const int t = threadIdx.x;
    int v = t == 37 ? data(1000) : 0;
    data(t) = t + v;
}
"#;
    let init = vec![-1; 128];
    let error = run(&backend, oob, "oob", config, &init).unwrap_err();
    match &error {
        Error::KernelFault { kernel, thread, .. } => {
            assert_eq!(kernel, "oob");
            assert_eq!(thread[0], 37, "{error}");
        }
        other => panic!("expected a kernel fault, got {other}"),
    }

    // A C++ exception in thread 5 ends the block there too.
    let throws = r#"#include "gpu_mem.h"
extern "C" __global__ void throws(gm_array<int, 1> data) {
    if (threadIdx.x == 5) throw 1;
    data(threadIdx.x) = 1;
}
"#;
    let error = run(&backend, throws, "throws", config, &init).unwrap_err();
    assert!(
        matches!(&error, Error::KernelFault { thread, message, .. }
            if thread[0] == 5 && message.contains("exception")),
        "{error}"
    );
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
