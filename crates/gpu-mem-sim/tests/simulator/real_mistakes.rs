//! The checks on mistakes as they appear in real kernels (a 2-D stencil's bound, a tiled
//! matmul's second barrier, a halo loaded without one, a transposed tile's padding, a
//! reduction's first stride, a double-buffered scan), each caught with its kind, line and
//! threads, beside its correct form, which no check reports.

// Source kernels: the host compiler and loaded libraries are outside what Miri interprets.
#![cfg(not(miri))]

use crate::common::{int_arg as int, with_checks as with};
use crate::memcheck::{config, fault_of, racechecked, run};
use gpu_mem_core::kernel::{Dim3, LaunchConfig};
use gpu_mem_sim::{Checks, SimBackend};

fn memchecked() -> SimBackend {
    with(Checks {
        memcheck: true,
        ..Checks::default()
    })
}

/// Every check at once: memcheck, racecheck and initcheck.
fn all_checks() -> SimBackend {
    with(Checks {
        memcheck: true,
        racecheck: true,
        initcheck: true,
    })
}

fn blocks_2d(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig::new(Dim3::new(grid, grid, 1), Dim3::new(block, block, 1))
}

/// `x` and `y` of a thread the message names as `[x, y, 0]`.
fn xy(thread: [u32; 3], block: [u32; 3], block_dim: u32) -> (u32, u32) {
    (
        block[0] * block_dim + thread[0],
        block[1] * block_dim + thread[1],
    )
}

#[test]
fn a_stencils_row_bound_off_by_one_reads_past_the_last_row() {
    let stencil = |bound: &str| {
        format!(
            r#"
__global__ void k(const float* in, float* out, int w, int h) {{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x > 0 && x < w - 1 && y > 0 && {bound}) {{
        out[y * w + x] = in[(y - 1) * w + x] + in[(y + 1) * w + x]
                       + in[y * w + x - 1] + in[y * w + x + 1];
    }}
}}
"#
        )
    };
    let inputs = [vec![1.0f32; 256], vec![0.0f32; 256]];
    let (block, thread, message) = fault_of(run(
        &memchecked(),
        &stencil("y <= h - 1"),
        blocks_2d(2, 8),
        &inputs,
        &[int(16), int(16)],
    ));
    let (x, y) = xy(thread, block, 8);
    assert!(y == 15 && (1..15).contains(&x), "({x}, {y}): {message}");
    assert!(
        message.contains("Invalid __global__ read of size 4")
            && message.contains(&format!(
                "{} bytes past the end of the 1,024-byte allocation",
                4 * (x - 1) + 4
            ))
            && message.contains("k.cu:6"),
        "{message}"
    );
    let out = run(
        &all_checks(),
        &stencil("y < h - 1"),
        blocks_2d(2, 8),
        &inputs,
        &[int(16), int(16)],
    )
    .unwrap_or_else(|e| panic!("the correct stencil: {e}"));
    assert_eq!(out[1][17], 4.0);
    assert_eq!(out[1][255], 0.0);
}

fn tiled_matmul(second_barrier: &str) -> String {
    format!(
        r#"
#define T 8
__global__ void k(const float* A, const float* B, float* C, int n) {{
    __shared__ float As[T][T];
    __shared__ float Bs[T][T];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int t = 0; t < n / T; ++t) {{
        As[ty][tx] = A[row * n + t * T + tx];
        Bs[ty][tx] = B[(t * T + ty) * n + col];
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
        {second_barrier}
    }}
    C[row * n + col] = acc;
}}
"#
    )
}

#[test]
fn a_tiled_matmul_without_its_second_barrier_overwrites_a_tile_still_read() {
    let a: Vec<f32> = (0..256).map(|v| (v % 7) as f32).collect();
    let b: Vec<f32> = (0..256).map(|v| (v % 5) as f32).collect();
    let inputs = [a.clone(), b.clone(), vec![0.0f32; 256]];
    let (_, _, message) = fault_of(run(
        &racechecked(),
        &tiled_matmul(""),
        blocks_2d(2, 8),
        &inputs,
        &[int(16)],
    ));
    assert!(
        message.starts_with("racecheck: Race reported between"),
        "{message}"
    );
    // The next tile's store (line 10 or 11) against this tile's reads (line 13).
    assert!(
        (message.contains("k.cu:10") || message.contains("k.cu:11")) && message.contains("k.cu:13"),
        "{message}"
    );
    assert!(
        message.contains("the shared array `As`") || message.contains("the shared array `Bs`"),
        "{message}"
    );
    let out = run(
        &all_checks(),
        &tiled_matmul("__syncthreads();"),
        blocks_2d(2, 8),
        &inputs,
        &[int(16)],
    )
    .unwrap_or_else(|e| panic!("the correct matmul: {e}"));
    let expected: f32 = (0..16).map(|k| a[3 * 16 + k] * b[k * 16 + 5]).sum();
    assert_eq!(out[2][3 * 16 + 5], expected);
}

fn halo(barrier: &str) -> String {
    format!(
        r#"
__global__ void k(const float* in, float* out, int n) {{
    extern __shared__ float s[];
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    int l = threadIdx.x + 1;
    s[l] = in[g];
    if (threadIdx.x == 0) s[0] = g > 0 ? in[g - 1] : 0.0f;
    if (threadIdx.x == blockDim.x - 1) s[l + 1] = g + 1 < n ? in[g + 1] : 0.0f;
    {barrier}
    out[g] = s[l - 1] + s[l] + s[l + 1];
}}
"#
    )
}

#[test]
fn a_halo_read_before_the_barrier_races_and_a_launch_short_of_its_halo_overflows() {
    let inputs = [(0..64).map(|v| v as f32).collect::<Vec<_>>(), vec![0.0; 64]];
    let (_, _, message) = fault_of(run(
        &racechecked(),
        &halo(""),
        config(2, 32, 34 * 4),
        &inputs,
        &[int(64)],
    ));
    assert!(
        message.contains("racecheck")
            && message.contains("dynamic shared memory")
            && message.contains("k.cu:10")
            && message.contains("k.cu:6"),
        "{message}"
    );
    // Dynamic shared memory for the block's own elements only: the right halo lies outside.
    let (_, thread, message) = fault_of(run(
        &memchecked(),
        &halo("__syncthreads();"),
        config(2, 32, 32 * 4),
        &inputs,
        &[int(64)],
    ));
    assert_eq!(thread, [31, 0, 0], "{message}");
    assert!(
        message.contains("Invalid __shared__ write of size 4")
            && message.contains("0 bytes past the end of the 128-byte dynamic shared memory")
            && message.contains("k.cu:6"),
        "{message}"
    );
    let out = run(
        &all_checks(),
        &halo("__syncthreads();"),
        config(2, 32, 34 * 4),
        &inputs,
        &[int(64)],
    )
    .unwrap_or_else(|e| panic!("the correct halo: {e}"));
    assert_eq!(out[1][31], 30.0 + 31.0 + 32.0);
    assert_eq!(out[1][63], 62.0 + 63.0);
}

#[test]
fn a_transposed_tile_indexed_past_its_row_overflows_at_the_last_thread() {
    let transpose = |column: &str| {
        format!(
            r#"
#define T 8
__global__ void k(const float* in, float* out, int n) {{
    __shared__ float tile[T][T];
    int x = blockIdx.x * T + threadIdx.x, y = blockIdx.y * T + threadIdx.y;
    tile[threadIdx.y][{column}] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * T + threadIdx.x; y = blockIdx.x * T + threadIdx.y;
    out[y * n + x] = tile[threadIdx.x][threadIdx.y];
}}
"#
        )
    };
    let input: Vec<f32> = (0..256).map(|v| v as f32).collect();
    let inputs = [input, vec![0.0f32; 256]];
    // `threadIdx.x + 1` lands in the next row of the tile, unseen, until the last row's last
    // thread writes past the array.
    let (block, thread, message) = fault_of(run(
        &memchecked(),
        &transpose("threadIdx.x + 1"),
        blocks_2d(2, 8),
        &inputs,
        &[int(16)],
    ));
    assert_eq!((block, thread), ([0, 0, 0], [7, 7, 0]), "{message}");
    assert!(
        message.contains("Invalid __shared__ write of size 4")
            && message.contains("0 bytes past the end of the 256-byte shared array `tile`")
            && message.contains("k.cu:6"),
        "{message}"
    );
    let out = run(
        &all_checks(),
        &transpose("threadIdx.x"),
        blocks_2d(2, 8),
        &inputs,
        &[int(16)],
    )
    .unwrap_or_else(|e| panic!("the correct transpose: {e}"));
    assert_eq!(out[1][3 * 16 + 9], (9 * 16 + 3) as f32);
}

#[test]
fn a_reduction_starting_at_the_block_size_reads_past_its_shared_array() {
    let reduction = |first: &str| {
        format!(
            r#"
__global__ void k(const float* in, float* out) {{
    __shared__ float s[64];
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * 64 + t];
    __syncthreads();
    for (unsigned st = {first}; st > 0; st >>= 1) {{
        if (t < st) s[t] += s[t + st];
        __syncthreads();
    }}
    if (t == 0) out[blockIdx.x] = s[0];
}}
"#
        )
    };
    let inputs = [vec![1.0f32; 128], vec![0.0f32; 2]];
    let (block, thread, message) = fault_of(run(
        &memchecked(),
        &reduction("blockDim.x"),
        config(2, 64, 0),
        &inputs,
        &[],
    ));
    assert_eq!(block, [0, 0, 0], "{message}");
    assert!(thread[0] < 64, "{message}");
    assert!(
        message.contains("Invalid __shared__ read of size 4")
            && message.contains("past the end of the 256-byte shared array `s`")
            && message.contains("k.cu:8"),
        "{message}"
    );
    let out = run(
        &all_checks(),
        &reduction("blockDim.x / 2"),
        config(2, 64, 0),
        &inputs,
        &[],
    )
    .unwrap_or_else(|e| panic!("the correct reduction: {e}"));
    assert_eq!(out[1], vec![64.0, 64.0]);
}

#[test]
fn a_double_buffered_scan_without_its_barrier_reads_what_a_neighbour_writes() {
    let scan = |barrier: &str| {
        format!(
            r#"
__global__ void k(const float* in, float* out) {{
    __shared__ float buf[2][64];
    int t = threadIdx.x, p = 0;
    buf[0][t] = in[t];
    __syncthreads();
    for (int o = 1; o < 64; o <<= 1) {{
        buf[1 - p][t] = t >= o ? buf[p][t] + buf[p][t - o] : buf[p][t];
        p = 1 - p;
        {barrier}
    }}
    out[t] = buf[p][t];
}}
"#
        )
    };
    let inputs = [vec![1.0f32; 64], vec![0.0f32; 64]];
    let (_, _, message) = fault_of(run(
        &racechecked(),
        &scan(""),
        config(1, 64, 0),
        &inputs,
        &[],
    ));
    assert!(
        message.starts_with("racecheck: Race reported between")
            && message.contains("the shared array `buf`")
            && message.contains("k.cu:8"),
        "{message}"
    );
    let out = run(
        &all_checks(),
        &scan("__syncthreads();"),
        config(1, 64, 0),
        &inputs,
        &[],
    )
    .unwrap_or_else(|e| panic!("the correct scan: {e}"));
    assert_eq!(out[1], (1..=64).map(|v| v as f32).collect::<Vec<_>>());
}

#[test]
fn a_counter_every_thread_adds_to_without_atomics_races_across_threads() {
    let count = |update: &str| {
        format!(
            r#"
__global__ void k(const float* in, float* count) {{
    if (in[blockIdx.x * blockDim.x + threadIdx.x] > 0.5f) {update}
}}
"#
        )
    };
    let inputs = [vec![1.0f32; 64], vec![0.0f32; 1]];
    let (_, _, message) = fault_of(run(
        &racechecked(),
        &count("count[0] += 1.0f;"),
        config(2, 32, 0),
        &inputs,
        &[],
    ));
    assert!(
        message.contains("racecheck")
            && message.contains("byte 0 of the 4-byte allocation")
            && message.contains("k.cu:3"),
        "{message}"
    );
    let out = run(
        &all_checks(),
        &count("atomicAdd(&count[0], 1.0f);"),
        config(2, 32, 0),
        &inputs,
        &[],
    )
    .unwrap_or_else(|e| panic!("the atomic counter: {e}"));
    assert_eq!(out[1], vec![64.0]);
}

/// A block histogram in shared memory built with atomics, then written out with no barrier
/// after them: a thread reads its bin while others may still add to it (on a GPU the count
/// comes out short). Atomics among themselves are no race, and with the barrier nothing is
/// reported and the counts are whole.
#[test]
fn a_histogram_read_before_its_atomics_are_done_races() {
    let histogram = |barrier: &str| {
        format!(
            r#"
__global__ void k(const float* in, float* out) {{
    __shared__ unsigned int bins[8];
    unsigned t = threadIdx.x;
    if (t < 8) bins[t] = 0;
    __syncthreads();
    atomicAdd(&bins[(unsigned)in[t] % 8], 1u);
    {barrier}
    if (t < 8) out[t] = (float)bins[t];
}}
"#
        )
    };
    let input: Vec<f32> = (0..64).map(|i| (i % 8) as f32).collect();
    let inputs = [input, vec![0.0f32; 8]];
    let (_, thread, message) = fault_of(run(
        &racechecked(),
        &histogram(""),
        config(1, 64, 0),
        &inputs,
        &[],
    ));
    assert!(
        thread[0] >= 8,
        "a later thread's atomic meets the read: {message}"
    );
    assert!(
        message.contains("racecheck: Race reported between Read access at")
            && message.contains("and Atomic access at")
            && message.contains("k.cu:9")
            && message.contains("k.cu:7")
            && message.contains("the shared array `bins`"),
        "{message}"
    );
    let out = run(
        &all_checks(),
        &histogram("__syncthreads();"),
        config(1, 64, 0),
        &inputs,
        &[],
    )
    .unwrap_or_else(|e| panic!("with the barrier: {e}"));
    assert_eq!(out[1], vec![8.0f32; 8]);
}
