//! `__shared__` arrays of compiled kernels are thread-locals of libraries loaded at run time:
//! large ones, in several kernels loaded side by side, do not fit the space the C library
//! reserves for such libraries up front and are reached through its dynamic path. Each block
//! must still see an instance of its own, never shared with a block running at the same time on
//! another worker, and a value computed before a thread's first access to one must survive it
//! (glibc before 2.40 clobbers vector registers there when kernels use TLS descriptors).
#![cfg(not(miri))]

use gpu_mem_core::Kernel;
use gpu_mem_core::backend::{Launch, Memory, Transfer};
use gpu_mem_core::kernel::{LaunchArg, LaunchConfig};
use gpu_mem_sim::{SimBackend, SimConfig};

/// A kernel whose block fills a 16 KiB shared array with its own block index (plus `tag`) and
/// sums it back.
fn kernel(tag: usize) -> Kernel {
    let source = format!(
        r#"#include "gpu_mem.h"
// kernel {tag}
extern "C" __global__ void fill_and_sum_{tag}(gm_array<long long, 1> out) {{
    GM_SHARED float cells[4096];
    // Computed in a vector register before the thread's first access to `cells`.
    const float value = (float)blockIdx.x + {tag}.0f;
    for (int i = threadIdx.x; i < 4096; i += blockDim.x) cells[i] = value;
    syncthreads();
    if (threadIdx.x == 0) {{
        long long total = 0;
        for (int i = 0; i < 4096; ++i) total += (long long)cells[i];
        out(blockIdx.x) = total;
    }}
    syncthreads();
}}
"#
    );
    Kernel::from_source(source, format!("fill_and_sum_{tag}"))
}

#[test]
fn large_shared_arrays_of_several_loaded_kernels_stay_per_block() {
    let backend = SimBackend::new(SimConfig::default());
    let blocks = 16usize;
    let bytes = blocks * 8;
    let out = backend.alloc(0, bytes).unwrap();
    let arg = LaunchArg::Array {
        ptr: out,
        shape: vec![blocks],
        strides: vec![1],
        min_offset: 0,
        span_len: blocks,
        itemsize: 8,
        elem: std::any::TypeId::of::<i64>(),
        dtype: "i64",
    };
    let kernels: Vec<Kernel> = (0..4).map(kernel).collect();
    for round in 0..2 {
        for (tag, kernel) in kernels.iter().enumerate() {
            // SAFETY: the kernel writes `out(blockIdx.x)` only, inside `out` (bounds-checked).
            unsafe {
                backend.launch(
                    0,
                    kernel,
                    &LaunchConfig::new(blocks as u32, 128),
                    std::slice::from_ref(&arg),
                    None,
                )
            }
            .unwrap();
            let mut host = vec![0u8; bytes];
            // SAFETY: `out` holds `bytes` bytes and the launch has finished.
            unsafe { backend.copy_dtoh(0, host.as_mut_ptr(), out, bytes) }.unwrap();
            for (block, chunk) in host.chunks_exact(8).enumerate() {
                let got = i64::from_ne_bytes(chunk.try_into().unwrap());
                assert_eq!(
                    got,
                    4096 * (block + tag) as i64,
                    "round {round}, kernel {tag}, block {block}"
                );
            }
        }
    }
    // SAFETY: allocated above, no work pending on it.
    unsafe { backend.free(0, out) }.unwrap();
}
