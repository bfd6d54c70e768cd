//! Kernels whose threads wait only at barriers and collectives run as coroutines (stackless
//! threads): they must compute what threads on fibers compute, and report faults, exceptions and
//! divergence the same way. Each kernel here is also run in a form that must stay on fibers (a
//! barrier in a helper function, which the compiler refuses in the stackless form, or a helper
//! naming an atomic, which keeps it from being tried), and the results compared.
#![cfg(not(miri))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use gpu_mem_core::kernel::{Dim3, LaunchConfig};
use gpu_mem_core::{Error, Kernel};
use gpu_mem_sim::{SimBackend, SimConfig};

/// Launches `source`'s `entry` over `len` i32 (set to `init(i)` first) and returns them after.
fn run(
    backend: &SimBackend,
    source: &str,
    entry: &str,
    config: LaunchConfig,
    len: usize,
    init: impl Fn(usize) -> i32,
) -> Result<Vec<i32>, Error> {
    let values: Vec<i32> = (0..len).map(init).collect();
    common::run_on_array(
        backend,
        &Kernel::from_source(source, entry),
        config,
        &values,
    )
}

/// A block-wide tree reduction with a barrier per step, locals and a reference to `threadIdx`
/// kept across barriers, an early `return` after the last one, in 3-D blocks of any shape.
/// `HELPER` decides where the barrier is: in the kernel (stackless) or in a helper function
/// (refused by the stackless form, so the same kernel runs on fibers).
fn reduction(helper: bool) -> String {
    let (define, call) = if helper {
        (
            "__device__ void step_barrier() { __syncthreads(); }",
            "step_barrier()",
        )
    } else {
        ("", "__syncthreads()")
    };
    format!(
        r#"#include "gpu_mem.h"
{define}
extern "C" __global__ void reduce(gm_array<int, 1> data) {{
    GM_SHARED int cells[1024];
    const dim3& me = threadIdx;
    const int n = blockDim.x * blockDim.y * blockDim.z;
    const int t = me.x + blockDim.x * (me.y + blockDim.y * me.z);
    const long long base = (long long)blockIdx.x * n;
    cells[t] = data(base + t);
    int steps = 0;
    for (int width = 1; width < n; width *= 2) {{
        {call};
        if (t % (2 * width) == 0 && t + width < n) cells[t] += cells[t + width];
        ++steps;
    }}
    {call};
    if (t != 0) return;
    data(base) = cells[0] * 1000 + steps + (int)(me.x + me.y + me.z);
}}
"#
    )
}

#[test]
fn stackless_threads_compute_what_threads_on_fibers_compute() {
    let backend = SimBackend::new(SimConfig::default());
    for block in [
        Dim3::new(256, 1, 1),
        Dim3::new(16, 16, 1),
        Dim3::new(3, 5, 7),
        Dim3::new(1024, 1, 1),
        Dim3::new(1, 1, 1),
    ] {
        let n = block.count() as usize;
        let config = LaunchConfig::new(Dim3::new(3, 1, 1), block);
        let init = |i: usize| (i % 97) as i32;
        let stackless = run(&backend, &reduction(false), "reduce", config, 3 * n, init).unwrap();
        let fibers = run(&backend, &reduction(true), "reduce", config, 3 * n, init).unwrap();
        assert_eq!(stackless, fibers, "block {block}");
        let steps = (n as f64).log2().ceil() as i32;
        for b in 0..3 {
            let sum: i32 = (b * n..(b + 1) * n).map(init).sum();
            assert_eq!(stackless[b * n], sum * 1000 + steps, "block {block}, {b}");
        }
    }
}

#[test]
fn frames_larger_than_a_chunk_and_many_threads() {
    // 1024 threads, each keeping 4 KiB of locals across a barrier: 4 MiB of frames per block.
    let source = r#"#include "gpu_mem.h"
extern "C" __global__ void keep(gm_array<int, 1> data) {
    int local[1024];
    for (int i = 0; i < 1024; ++i) local[i] = i * (int)threadIdx.x;
    syncthreads();
    int sum = 0;
    for (int i = 0; i < 1024; ++i) sum += local[i];
    syncthreads();
    data(blockIdx.x * blockDim.x + threadIdx.x) = sum;
}
"#;
    let backend = SimBackend::new(SimConfig::default());
    let out = run(
        &backend,
        source,
        "keep",
        LaunchConfig::new(4, 1024),
        4096,
        |_| 0,
    )
    .unwrap();
    for (i, got) in out.iter().enumerate() {
        let t = (i % 1024) as i64;
        assert_eq!(i64::from(*got), (t * 1023 * 1024 / 2) as i32 as i64, "{i}");
    }
}

#[test]
fn faults_exceptions_and_divergence_are_reported_as_on_fibers() {
    let backend = SimBackend::new(SimConfig::default());
    let config = LaunchConfig::new(2, 64);
    let oob = r#"#include "gpu_mem.h"
extern "C" __global__ void oob(gm_array<int, 1> data) {
    syncthreads();
    data(threadIdx.x + 1000) = 1;
    syncthreads();
}
"#;
    let error = run(&backend, oob, "oob", config, 128, |_| 7).unwrap_err();
    match &error {
        Error::KernelFault {
            kernel,
            block,
            thread,
            message,
        } => {
            assert_eq!(kernel, "oob");
            assert_eq!((block[0], thread[0]), (0, 0), "{error}");
            assert!(
                message.contains("(1000)") && message.contains("(128)"),
                "{error}"
            );
        }
        other => panic!("{other}"),
    }

    let throws = r#"#include "gpu_mem.h"
extern "C" __global__ void throws(gm_array<int, 1> data) {
    syncthreads();
    if (threadIdx.x == 5) throw 42;
    data(threadIdx.x) = 1;
}
"#;
    let error = run(&backend, throws, "throws", config, 128, |_| 0).unwrap_err();
    assert!(
        matches!(&error, Error::KernelFault { thread, message, .. }
            if thread[0] == 5 && message.contains("exception")),
        "{error}"
    );

    let partial = r#"#include "gpu_mem.h"
extern "C" __global__ void partial(gm_array<int, 1> data) {
    if (threadIdx.x >= 32) return;
    syncthreads();
    data(threadIdx.x) = 1;
}
"#;
    let error = run(&backend, partial, "partial", config, 128, |_| 0).unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(error, Error::BarrierDivergence { .. })
            && text.contains("partial.cu:4")
            && text.contains("32 of 64"),
        "{text}"
    );

    let two_sites = r#"#include "gpu_mem.h"
extern "C" __global__ void two_sites(gm_array<int, 1> data) {
    if (threadIdx.x % 2 == 0) {
        syncthreads();
    } else {
        barrier(GM_FENCE_GLOBAL);
    }
    data(threadIdx.x) = 1;
}
"#;
    let error = run(&backend, two_sites, "two_sites", config, 128, |_| 0).unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("two_sites.cu:4") && text.contains("two_sites.cu:6"),
        "{text}"
    );
}

/// Runs `source` (entry `k`, one block of `threads`, over as many i32 set to their index) as
/// written and with a never-called helper naming an atomic, which keeps the same kernel on
/// fibers; both must agree.
fn both_ways(source: &str, threads: u32) -> (Result<Vec<i32>, String>, Result<Vec<i32>, String>) {
    let backend = SimBackend::new(SimConfig::default());
    let on_fibers =
        format!("{source}\n__device__ void keep_on_fibers(int* p) {{ atomicAdd(p, 1); }}\n");
    let go = |code: &str| {
        let config = LaunchConfig::new(1, threads);
        run(&backend, code, "k", config, threads as usize, |i| i as i32).map_err(|e| e.to_string())
    };
    (go(source), go(&on_fibers))
}

fn stackless_and_fibers(source: &str) -> (Result<Vec<i32>, String>, Result<Vec<i32>, String>) {
    both_ways(source, 4)
}

#[test]
fn collectives_agree_with_fibers() {
    let cases = [
        // A warp reduction, votes, block votes, narrow shuffles.
        r#"#include "gpu_mem.h"
extern "C" __global__ void k(gm_array<int, 1> a) {
    int v = a(threadIdx.x);
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(~0ull, v, o);
    unsigned long long b = __ballot_sync(~0ull, threadIdx.x % 3 == 0);
    int all = __all_sync(~0ull, v > -1), any = __any_sync(~0ull, threadIdx.x == 7);
    int c = syncthreads_count(threadIdx.x % 2), n = syncthreads_and(1), o = syncthreads_or(0);
    __syncwarp();
    int up = __shfl_up_sync(~0ull, (int)threadIdx.x, 3, 16);
    int x = __shfl_xor_sync(~0ull, (int)threadIdx.x, 5);
    int s = __shfl_sync(~0ull, (int)threadIdx.x * 2, 9, 8);
    syncthreads();
    a(threadIdx.x) = v + (int)(b % 1000) + all + 10 * any + 100 * c + n + o + up + x + s;
}"#,
        // One warp shuffles while the other already waits at the block barrier.
        r#"#include "gpu_mem.h"
extern "C" __global__ void k(gm_array<int, 1> a) {
    int v = a(threadIdx.x);
    if (threadIdx.x < 32) {
        v = __shfl_xor_sync(~0ull, v, 1);
        v += __shfl_down_sync(~0ull, v, 2);
    }
    syncthreads();
    a(threadIdx.x) = v;
}"#,
        // A shuffle whose lanes partly exited: divergence, reported the same way.
        r#"#include "gpu_mem.h"
extern "C" __global__ void k(gm_array<int, 1> a) {
    if (threadIdx.x % 32 >= 16) return;
    a(threadIdx.x) = __shfl_down_sync(~0ull, (int)threadIdx.x, 1);
}"#,
        // A block reduction: every warp shuffles, then the first warp alone.
        r#"#include "gpu_mem.h"
extern "C" __global__ void k(gm_array<int, 1> a) {
    __shared__ int part[2];
    int v = a(threadIdx.x);
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(~0ull, v, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
    syncthreads();
    if (threadIdx.x >= 32) return;
    v = threadIdx.x < 2 ? part[threadIdx.x] : 0;
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(~0ull, v, o);
    a(threadIdx.x) = v;
}"#,
        // Lanes outside the mask exited: the others still exchange.
        r#"#include "gpu_mem.h"
extern "C" __global__ void k(gm_array<int, 1> a) {
    if (threadIdx.x % 32 >= 16) return;
    a(threadIdx.x) = __shfl_xor_sync(0xffffull, (int)threadIdx.x, 1);
}"#,
        // A warp barrier with a mask, then a block barrier reached by all. (The exchange reads
        // before a barrier and writes after it: without that, its result would depend on the
        // order the threads run in, which neither executor promises.)
        r#"#include "gpu_mem.h"
extern "C" __global__ void k(gm_array<int, 1> a) {
    if (threadIdx.x % 2 == 0) __syncwarp(0x5555555555555555ull);
    int other = a(63 - threadIdx.x);
    syncthreads();
    a(threadIdx.x) = other;
}"#,
    ];
    for source in cases {
        let (stackless, fibers) = both_ways(source, 64);
        assert_eq!(stackless, fibers, "{source}");
    }
}

#[test]
fn sources_the_rewrite_must_not_change() {
    let cases = [
        // C++17 semantics (C++20 would move here, not copy).
        r#"#include "gpu_mem.h"
struct S { int how = 0; S() {} S(const S&) { how = 1; } S(S&&) { how = 2; } };
__device__ S pass(S&& s) { return s; }
extern "C" __global__ void k(gm_array<int, 1> a) {
    syncthreads();
    a(threadIdx.x) = pass(S{}).how;
}"#,
        // A lambda capturing a shared variable by copy.
        r#"#include "gpu_mem.h"
extern "C" __global__ void k(gm_array<int, 1> a) {
    __shared__ int flag;
    if (threadIdx.x == 0) flag = 0;
    syncthreads();
    auto show = [=](int i) { a(i) = flag; };
    if (threadIdx.x == 0) flag = 7;
    syncthreads();
    show(threadIdx.x);
}"#,
        // `decltype` of a shared variable.
        r#"#include "gpu_mem.h"
extern "C" __global__ void k(gm_array<int, 1> a) {
    __shared__ int total;
    if (threadIdx.x == 0) total = 100;
    syncthreads();
    decltype(total) mine = total;
    mine += threadIdx.x;
    syncthreads();
    a(threadIdx.x) = total;
}"#,
        // The barrier named other than by a call.
        r#"#include "gpu_mem.h"
extern "C" __global__ void k(gm_array<int, 1> a) {
    __shared__ int s[64];
    s[threadIdx.x] = threadIdx.x;
    (syncthreads)();
    a(threadIdx.x) = s[blockDim.x - 1 - threadIdx.x];
}"#,
        // Names that are not ASCII, and `extern "C"` on a line of its own.
        r#"#include "gpu_mem.h"
extern "C"
__global__ void k(gm_array<int, 1> a) {
    int größe = threadIdx.x;
    syncthreads();
    a(threadIdx.x) = größe;
}"#,
        // Threads left waiting at a divergence are dropped without their destructors.
        r#"#include "gpu_mem.h"
struct Acc { gm_array<int, 1> out; int idx; ~Acc() { out(idx) = 99; } };
extern "C" __global__ void k(gm_array<int, 1> a) {
    Acc acc{a, (int)threadIdx.x};
    if (threadIdx.x == 0) return;
    syncthreads();
}"#,
    ];
    for source in cases {
        let (stackless, fibers) = stackless_and_fibers(source);
        assert_eq!(stackless, fibers, "{source}");
    }
}

/// A random kernel of barriers, collectives, shared-memory exchanges, partial warps and early
/// exits (from `seed`, a small xorshift), for [`random_kernels_agree_with_fibers`].
fn random_kernel(seed: u64) -> String {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = |below: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % below
    };
    let mut body = String::new();
    for _ in 0..3 + next(6) {
        let line = match next(10) {
            0 => "syncthreads();".to_string(),
            1 => format!("v += __shfl_down_sync(~0ull, v, {});", 1 + next(16)),
            2 => format!(
                "v ^= (int)(__ballot_sync(~0ull, v % {} == 0) & 0xffff);",
                2 + next(3)
            ),
            3 => format!("v += syncthreads_count(v % {} == 1);", 2 + next(3)),
            4 => format!(
                "if (threadIdx.x % 32 < {}) {{ v += __shfl_xor_sync(~0ull, v, 1); }}",
                16 + next(17)
            ),
            5 => "__syncwarp();".to_string(),
            6 => format!("if (threadIdx.x >= {}) return;", 16 * (1 + next(8))),
            7 => format!(
                "s[threadIdx.x] = v; syncthreads(); v += s[(threadIdx.x + {}) % blockDim.x]; syncthreads();",
                next(64)
            ),
            8 => format!("v = v * 3 + {};", next(5)),
            _ => format!(
                "v += __any_sync(~0ull, v == {}) + __all_sync(~0ull, v > 0);",
                next(9)
            ),
        };
        body.push_str("    ");
        body.push_str(&line);
        body.push('\n');
    }
    format!(
        "#include \"gpu_mem.h\"\n\
         extern \"C\" __global__ void k(gm_array<int, 1> a) {{\n\
         \x20   __shared__ int s[128];\n\
         \x20   int v = a(threadIdx.x);\n\
         {body}\
         \x20   a(threadIdx.x) = v;\n\
         }}\n"
    )
}

/// Random kernels give the same results, or the same error, stackless and on fibers, in blocks
/// of whole and partial warps. (It found a block barrier released after whole warps had exited;
/// run with 300 seeds when the executor changes.)
#[test]
fn random_kernels_agree_with_fibers() {
    for seed in 0..32u64 {
        let source = random_kernel(seed);
        let threads = 16 * (1 + (seed % 8) as u32);
        let (stackless, fibers) = both_ways(&source, threads);
        assert_eq!(
            stackless, fibers,
            "seed {seed}, {threads} threads:\n{source}"
        );
    }
}
