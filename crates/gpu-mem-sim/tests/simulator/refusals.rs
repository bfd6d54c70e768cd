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

/// Whether the tests' kernels are built by clang (`GPU_MEM_SIM_CXX`), whose object-size check
/// does not follow a variable index: an index past a C array's end is refused at the index
/// there, named by the index and the array's type rather than by the access.
fn built_by_clang() -> bool {
    std::env::var("GPU_MEM_SIM_CXX").is_ok_and(|cxx| cxx.contains("clang"))
}

/// A local array indexed from data, below its start and past its end: below it lie the frame's
/// other locals, which the thread may touch, so only the index's own check sees it (GCC's
/// object-size check compares the end only; clang's follows no variable index at all). Each is
/// refused before it lands, in every build and with either compiler, and the process goes on.
#[test]
fn an_index_outside_a_local_array_is_refused_in_every_build() {
    let code = r#"
__global__ void k(const float* in, float* out) {
    float v[8];
    for (int i = 0; i < 8; ++i) v[i] = in[i];
    int j = (int)in[threadIdx.x + 8];
    float s = v[j];
    v[j] = 5.0f;
    out[threadIdx.x] = s + v[0];
}
"#;
    for index in [-1i32, -2, -8, 8, 12] {
        let mut input: Vec<f32> = (0..40)
            .map(|i| if i < 8 { i as f32 } else { 0.0 })
            .collect();
        input[8 + 3] = index as f32;
        for (build, thread, message) in
            refused_in_every_build(code, 32, &[input, vec![0.0; 32]], &[])
        {
            assert_eq!(thread, [3, 0, 0], "{build}, index {index}: {message}");
            let said = if index < 0 || built_by_clang() {
                let side = if index < 0 {
                    "before its first"
                } else {
                    "past its last"
                };
                message.contains(&format!(
                    "Invalid index {index} of the 8-element array `float"
                )) && message.contains(&format!("{side} element"))
            } else {
                message.contains("Invalid __local__ read of size 4")
                    && message.contains("past the end of the array or object")
            };
            assert!(
                said && message.contains("k.cu:6"),
                "{build}, index {index}: {message}"
            );
        }
    }
    // In bounds, every build computes what a GPU does: v[j] + 5 where j = 0, else v[j] + v[0].
    for (build, backend) in each_build() {
        let mut input: Vec<f32> = (0..40)
            .map(|i| if i < 8 { i as f32 } else { 0.0 })
            .collect();
        input[8 + 3] = 7.0;
        let out = run(
            &backend,
            code,
            config(1, 32, 0),
            &[input, vec![0.0; 32]],
            &[],
        )
        .unwrap_or_else(|e| panic!("{build}: {e}"));
        assert_eq!(out[1][3], 7.0, "{build}");
        assert_eq!(out[1][0], 5.0, "{build}");
    }
}

/// A shared array indexed by a signed index one below its start, beside another shared array:
/// where the linker put the other one before it, those bytes are the block's to touch and no
/// access check refuses them (nor would compute-sanitizer, which knows one shared window per
/// block), but C++ leaves the index undefined and a GPU's compiler lays the arrays out
/// otherwise. Refused in every build at the index, on the kernel's line, whatever the layout.
#[test]
fn an_index_below_a_shared_array_is_refused_in_every_build() {
    let code = r#"
__global__ void k(const float* in, float* out) {
    __shared__ float before[32];
    __shared__ float after[32];
    before[threadIdx.x] = 1.0f;
    after[threadIdx.x] = in[threadIdx.x];
    __syncthreads();
    int left = (int)threadIdx.x - (int)in[32];
    out[threadIdx.x] = after[left] + before[threadIdx.x];
}
"#;
    let mut input = vec![2.0f32; 33];
    input[32] = 1.0;
    for (build, thread, message) in refused_in_every_build(code, 32, &[input, vec![0.0; 32]], &[]) {
        assert_eq!(thread, [0, 0, 0], "{build}: {message}");
        assert!(
            message.contains("Invalid index -1 of the 32-element array `float")
                && message.contains("before its first element")
                && message.contains("k.cu:9"),
            "{build}: {message}"
        );
    }
    for (build, backend) in each_build() {
        let mut input = vec![2.0f32; 33];
        input[32] = 0.0;
        let out = run(
            &backend,
            code,
            config(1, 32, 0),
            &[input, vec![0.0; 32]],
            &[],
        )
        .unwrap_or_else(|e| panic!("{build}: {e}"));
        assert_eq!(out[1], vec![3.0; 32], "{build}");
    }
}
