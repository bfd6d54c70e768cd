//! How each check build refuses a bad access and what it says of it, where the builds differ:
//! memcheck alone (an inline shadow test; a kernel with barriers run as regions), racecheck and
//! initcheck (a hook per access). Each mistake must be refused by every build, before it lands,
//! as the same kind of access on the kernel's own line: a local array indexed past its end (the
//! compiler keeps such an array to itself, so only its object-size check sees the access), an
//! odd-sized shared array's tail, an atomic that is a kernel's last statement (a call in tail
//! position returns to the kernel's caller), a null pointer and an index that wrapped.

// Source kernels: the host compiler and loaded libraries are outside what Miri interprets.
#![cfg(not(miri))]

use crate::common::{int_arg as int, with_checks};
use crate::memcheck::{config, fault_of, run};
use gpu_mem_sim::{Checks, SimBackend};

/// One device per check build: memcheck alone, racecheck, initcheck.
fn each_build() -> [(&'static str, SimBackend); 3] {
    let only = |memcheck, racecheck, initcheck| {
        with_checks(Checks {
            memcheck,
            racecheck,
            initcheck,
        })
    };
    [
        ("memcheck", only(true, false, false)),
        ("racecheck", only(false, true, false)),
        ("initcheck", only(false, false, true)),
    ]
}

/// `code`'s kernel `k` on one block of `threads` over `inputs` (and `scalars`), refused in every
/// build: each build's thread and message.
fn refused_in_every_build(
    code: &str,
    threads: u32,
    inputs: &[Vec<f32>],
    scalars: &[gpu_mem_core::kernel::LaunchArg],
) -> Vec<(&'static str, [u32; 3], String)> {
    each_build()
        .into_iter()
        .map(|(build, backend)| {
            let (_, thread, message) =
                fault_of(run(&backend, code, config(1, threads, 0), inputs, scalars));
            (build, thread, message)
        })
        .collect()
}

/// A per-thread histogram with too few bins, indexed from data: bin 24 of 16 lies 32 bytes past
/// the array, over what the kernel's frame saved (registers, its return address). Each build
/// refused it before it landed: the process goes on, and the read of the `+=` is named.
#[test]
fn a_local_array_indexed_past_its_end_is_refused_before_it_lands() {
    let code = r#"
__global__ void k(const float* bins_in, float* out) {
    int counts[16];
    for (int i = 0; i < 16; ++i) counts[i] = 0;
    int b = (int)bins_in[threadIdx.x];
    counts[b] += 1;
    int s = 0;
    for (int i = 0; i < 16; ++i) s += counts[i] * i;
    out[threadIdx.x] = (float)s;
}
"#;
    for bin in [16.0f32, 20.0, 24.0, 40.0] {
        let mut bins = vec![3.0f32; 32];
        bins[5] = bin;
        for (build, thread, message) in
            refused_in_every_build(code, 32, &[bins, vec![0.0; 32]], &[])
        {
            assert_eq!(thread, [5, 0, 0], "{build}, bin {bin}: {message}");
            assert!(
                message.contains("Invalid __local__ read of size 4")
                    && message.contains("past the end of the array or object")
                    && message.contains("k.cu:6"),
                "{build}, bin {bin}: {message}"
            );
        }
    }
    // In bounds, every build computes what a GPU does.
    for (build, backend) in each_build() {
        let bins: Vec<f32> = (0..32).map(|i| (i % 16) as f32).collect();
        let out = run(
            &backend,
            code,
            config(1, 32, 0),
            &[bins, vec![0.0; 32]],
            &[],
        )
        .unwrap_or_else(|e| panic!("{build}: {e}"));
        let expected: Vec<f32> = (0..32).map(|i| (i % 16) as f32).collect();
        assert_eq!(out[1], expected, "{build}");
    }
}

/// A shared array of 63 floats (252 bytes) beside another: its last 4-byte slot of 8 is no
/// longer the neighbour's, so the write and the read past it are refused with memcheck alone
/// too (which tests a shadow byte per 8 bytes), and named as the array's.
#[test]
fn an_odd_sized_shared_arrays_tail_is_refused_in_every_build() {
    let writes = r#"
__global__ void k(const float* in, float* out) {
    __shared__ float s[63];
    __shared__ float after[64];
    s[threadIdx.x] = in[threadIdx.x];
    after[threadIdx.x] = 0.0f;
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x % 63] + after[threadIdx.x];
}
"#;
    let reads = r#"
__global__ void k(const float* in, float* out) {
    __shared__ float s[63];
    __shared__ float after[64];
    if (threadIdx.x < 63) s[threadIdx.x] = in[threadIdx.x];
    after[threadIdx.x] = 0.0f;
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x] + after[threadIdx.x];
}
"#;
    let inputs = [vec![1.0f32; 64], vec![0.0f32; 64]];
    for (code, access, line) in [(writes, "write", 5), (reads, "read", 8)] {
        for (build, thread, message) in refused_in_every_build(code, 64, &inputs, &[]) {
            assert_eq!(thread, [63, 0, 0], "{build}: {message}");
            assert!(
                message.contains(&format!("Invalid __shared__ {access} of size 4"))
                    && message.contains("0 bytes past the end of the 252-byte shared array `s`")
                    && message.contains(&format!("k.cu:{line}")),
                "{build}: {message}"
            );
        }
    }
}

/// An atomic past its array as a kernel's last statement, with a barrier before it (memcheck
/// alone runs the kernel as regions) and in global and shared memory: named at its own line,
/// not the prelude's or the caller's.
#[test]
fn an_atomic_as_the_last_statement_is_named_at_its_line() {
    let global = r#"
__global__ void k(const float* in, float* bins) {
    __shared__ float mine[16];
    mine[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    atomicAdd(&bins[8 + threadIdx.x], mine[threadIdx.x]);
}
"#;
    let shared = r#"
__global__ void k(const float* in, float* out) {
    __shared__ float bins[8];
    if (threadIdx.x < 8) bins[threadIdx.x] = 0.0f;
    __syncthreads();
    atomicAdd(&bins[threadIdx.x], in[threadIdx.x]);
}
"#;
    let inputs = [vec![1.0f32; 16], vec![0.0f32; 16]];
    for (code, what, thread) in [
        (global, "__global__ atomic of size 4", 8),
        (shared, "__shared__ atomic of size 4", 8),
    ] {
        for (build, refused, message) in refused_in_every_build(code, 16, &inputs, &[]) {
            assert_eq!(refused, [thread, 0, 0], "{build}: {message}");
            assert!(
                message.contains(&format!("Invalid {what}"))
                    && message.contains("0 bytes past the end of")
                    && message.contains("k.cu:6"),
                "{build}: {message}"
            );
        }
    }
}

/// A null pointer's write is said at address 0 with no allocation beside it; an unsigned index
/// that wrapped below zero (16 GiB past a float array) is said to be a read of the shared array
/// it would have reached unwrapped, not a global one beside an unrelated allocation.
#[test]
fn a_null_pointer_and_a_wrapped_index_are_said_as_they_are() {
    let null = r#"
__global__ void k(const float* in, float* out, int use_out) {
    float* extra = use_out ? out : nullptr;
    out[threadIdx.x] = in[threadIdx.x];
    extra[threadIdx.x] = in[threadIdx.x] * 2.0f;
}
"#;
    let inputs = [vec![1.0f32; 32], vec![0.0f32; 32]];
    for (build, thread, message) in refused_in_every_build(null, 32, &inputs, &[int(0)]) {
        assert_eq!(thread, [0, 0, 0], "{build}: {message}");
        assert!(
            message.contains("Invalid __global__ write of size 4 at 0x0:")
                && message.contains("a null pointer's")
                && !message.contains("allocation")
                && message.contains("k.cu:5"),
            "{build}: {message}"
        );
    }
    let wrapped = r#"
__global__ void k(const float* in, float* out) {
    __shared__ float s[64];
    s[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x] - s[threadIdx.x - 1];
}
"#;
    let inputs = [vec![1.0f32; 64], vec![0.0f32; 64]];
    for (build, thread, message) in refused_in_every_build(wrapped, 64, &inputs, &[]) {
        assert_eq!(thread, [0, 0, 0], "{build}: {message}");
        assert!(
            message.contains("Invalid __shared__ read of size 4")
                && message.contains("a 32-bit index of 4-byte elements that wrapped below zero")
                && message.contains("unwrapped, 4 bytes before the 256-byte shared array `s`")
                && message.contains("k.cu:6"),
            "{build}: {message}"
        );
    }
}
