//! racecheck on global memory (`Checks::racecheck`): kernels whose threads, in one block or in
//! several, touch the same bytes of an allocation with nothing ordering them, each reported
//! with both accesses; and kernels ordered by barriers, grid barriers and atomics, which it must
//! not report.

// Source kernels: the host compiler and loaded libraries are outside what Miri interprets.
#![cfg(not(miri))]

use crate::memcheck::{config, fault_of, racechecked, run, run_kernel};
use gpu_mem_core::kernel::{Dim3, LaunchConfig};

/// Two kernels in one source (one compile): `k`, whose body holds `racy`, then `fixed`, whose
/// body holds `ordered`; `signature` is their parameters.
fn both(signature: &str, racy: &str, ordered: &str) -> String {
    format!(
        "\nextern \"C\" __global__ void k({signature}) {{{racy}}}\n\
         extern \"C\" __global__ void fixed({signature}) {{{ordered}}}\n"
    )
}

#[test]
fn a_global_histogram_without_atomics_races_and_with_them_does_not() {
    let histogram = |update: &str| {
        format!(
            r#"
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int bin = (int)in[i] % 4;
    {update}
"#
        )
    };
    let code = both(
        "const float* in, float* bins",
        &histogram("bins[bin] = bins[bin] + 1.0f;"),
        &histogram("atomicAdd(&bins[bin], 1.0f);"),
    );
    let input: Vec<f32> = (0..64).map(|v| v as f32).collect();
    let (_, _, message) = fault_of(run(
        &racechecked(),
        &code,
        config(2, 32, 0),
        &[input.clone(), vec![0.0f32; 4]],
        &[],
    ));
    assert!(
        message.starts_with("racecheck: Race reported between"),
        "{message}"
    );
    assert!(message.contains("k.cu:5"), "{message}");
    assert!(message.contains("of the 16-byte allocation"), "{message}");
    let out = run_kernel(
        &racechecked(),
        (&code, "fixed"),
        config(2, 32, 0),
        &[input, vec![0.0f32; 4]],
        &[],
    )
    .unwrap_or_else(|e| panic!("the atomic histogram: {e}"));
    assert_eq!(out[1], vec![16.0; 4]);
}

/// Each block sums its part in shared memory, then adds it to `out[0]`: `k` with a plain
/// `+=`; `published` as NVIDIA's threadFenceReduction does (each block publishes its sum, fences
/// and counts itself done; the block that counts last adds up the others' sums); `early` reads
/// the sums before counting (the last block found by its index, not by counting itself).
fn block_sums() -> String {
    let kernel = |name: &str, finish: &str| {
        format!(
            r#"
extern "C" __global__ void {name}(const float* in, float* out, float* partial, float* counter) {{
    unsigned* done = reinterpret_cast<unsigned*>(counter);
    __shared__ float s[32];
    __shared__ bool last;
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned d = 16; d > 0; d >>= 1) {{
        if (t < d) s[t] += s[t + d];
        __syncthreads();
    }}
    {finish}
}}"#
        )
    };
    let published = r#"
    if (t == 0) {
        partial[blockIdx.x] = s[0];
        __threadfence();
        unsigned ticket = atomicInc(done, gridDim.x);
        last = ticket == gridDim.x - 1;
    }
    __syncthreads();
    if (last && t == 0) {
        float total = 0;
        for (unsigned b = 0; b < gridDim.x; ++b) total += partial[b];
        out[0] = total;
    }"#;
    let early = r#"
    if (t == 0) partial[blockIdx.x] = s[0];
    if (t == 0 && blockIdx.x == gridDim.x - 1) {
        float total = 0;
        for (unsigned b = 0; b < gridDim.x; ++b) total += partial[b];
        out[0] = total;
    }"#;
    [
        kernel("k", "if (t == 0) out[0] += s[0];"),
        kernel("published", published),
        kernel("early", early),
    ]
    .concat()
}

/// The arrays of a `block_sums` launch of 4 blocks of 32 threads over `input`.
fn sums_of(input: Vec<f32>) -> [Vec<f32>; 4] {
    [input, vec![0.0; 1], vec![0.0; 4], vec![0.0; 1]]
}

#[test]
fn blocks_adding_to_one_total_without_atomics_race_across_blocks() {
    let (_, _, message) = fault_of(run(
        &racechecked(),
        &block_sums(),
        config(4, 32, 0),
        &sums_of(vec![1.0; 128]),
        &[],
    ));
    assert!(message.contains("racecheck: Race reported"), "{message}");
    assert!(
        message.contains("by thread (0, 0, 0) of block ("),
        "both threads are thread 0, of two blocks: {message}"
    );
    assert!(message.contains("k.cu:13"), "{message}");
    assert!(
        message.contains("with no barrier, grid barrier or atomic ordering them"),
        "{message}"
    );
}

#[test]
fn the_last_block_may_read_what_the_others_published_before_their_atomic() {
    let input: Vec<f32> = (0..128).map(|v| v as f32).collect();
    let out = run_kernel(
        &racechecked(),
        (&block_sums(), "published"),
        config(4, 32, 0),
        &sums_of(input),
        &[],
    )
    .unwrap_or_else(|e| panic!("published through an atomic: {e}"));
    assert_eq!(out[1], vec![(0..128).sum::<i32>() as f32]);
    // Read before the atomic: the sums of blocks that had not counted are read unordered.
    let (_, _, message) = fault_of(run_kernel(
        &racechecked(),
        (&block_sums(), "early"),
        config(4, 32, 0),
        &sums_of(vec![1.0; 128]),
        &[],
    ));
    assert!(message.contains("racecheck: Race reported"), "{message}");
}

#[test]
fn a_block_barrier_orders_its_threads_global_accesses() {
    let neighbours = |sync: &str| {
        format!(
            r#"
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i] * 2.0f;
    {sync}
    float right = threadIdx.x + 1 < blockDim.x ? out[i + 1] : 0.0f;
    {sync}
    out[i] += right;
"#
        )
    };
    let code = both(
        "const float* in, float* out",
        &neighbours(""),
        &neighbours("__syncthreads();"),
    );
    let input: Vec<f32> = (0..64).map(|v| v as f32).collect();
    let (_, _, message) = fault_of(run(
        &racechecked(),
        &code,
        config(2, 32, 0),
        &[input.clone(), vec![0.0f32; 64]],
        &[],
    ));
    assert!(message.contains("racecheck: Race reported"), "{message}");
    assert!(
        !message.contains("of block"),
        "both threads are of one block: {message}"
    );
    let out = run_kernel(
        &racechecked(),
        (&code, "fixed"),
        config(2, 32, 0),
        &[input, vec![0.0f32; 64]],
        &[],
    )
    .unwrap_or_else(|e| panic!("with barriers: {e}"));
    assert_eq!(out[1][0], 0.0 + 2.0);
    assert_eq!(out[1][31], 62.0);
}

#[test]
fn a_grid_barrier_orders_every_blocks_accesses() {
    // Each block writes its own element, then, after the grid barrier, reads its neighbour's.
    let rotate = |sync: &str| {
        format!(
            r#"
    unsigned b = blockIdx.x;
    if (threadIdx.x == 0) out[b] = in[b];
    {sync}
    float next = threadIdx.x == 0 ? out[(b + 1) % gridDim.x] : 0.0f;
    {sync}
    if (threadIdx.x == 0) out[b] = next;
"#
        )
    };
    let code = format!(
        "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n{}",
        both(
            "const float* in, float* out",
            &rotate("__syncthreads();"),
            &rotate("cg::this_grid().sync();"),
        )
    );
    let launch = LaunchConfig::new(Dim3::new(4, 1, 1), Dim3::new(8, 1, 1)).cooperative();
    let input = vec![1.0f32, 2.0, 3.0, 4.0];
    let (_, _, message) = fault_of(run(
        &racechecked(),
        &code,
        launch,
        &[input.clone(), vec![0.0f32; 4]],
        &[],
    ));
    assert!(message.contains("of block"), "{message}");
    let out = run_kernel(
        &racechecked(),
        (&code, "fixed"),
        launch,
        &[input, vec![0.0f32; 4]],
        &[],
    )
    .unwrap_or_else(|e| panic!("with grid barriers: {e}"));
    assert_eq!(out[1], vec![2.0, 3.0, 4.0, 1.0]);
}

#[test]
fn every_thread_storing_the_same_flag_is_not_a_race_storing_its_own_value_is() {
    // Rodinia's bfs: any thread that finds work sets `*over = true`; all store the same value
    // (compute-sanitizer's "identical data"), so no interleaving changes the outcome.
    let flag = |value: &str| {
        format!(
            r#"
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (in[i] > 0.0f) over[0] = {value};
"#
        )
    };
    let code = both(
        "const float* in, float* over",
        &flag("(float)i"),
        &flag("1.0f"),
    );
    let input = vec![1.0f32; 64];
    let (_, _, message) = fault_of(run(
        &racechecked(),
        &code,
        config(2, 32, 0),
        &[input.clone(), vec![0.0f32; 1]],
        &[],
    ));
    assert!(
        message.contains("racecheck: Race reported between Write access"),
        "{message}"
    );
    let out = run_kernel(
        &racechecked(),
        (&code, "fixed"),
        config(2, 32, 0),
        &[input, vec![0.0f32; 1]],
        &[],
    )
    .unwrap_or_else(|e| panic!("the same value from every thread: {e}"));
    assert_eq!(out[1], vec![1.0]);
}

#[test]
fn a_threads_own_last_write_is_its_own_only() {
    // Every thread of one block adds to one word, twice. A thread's accesses after its first
    // write go unrecorded (they are its own), which must end when the next thread starts: in
    // the program's loop over the block's threads (a source that names no wait) and on fibers
    // (a barrier first; each source is built apart, since whether threads may wait is decided
    // per source).
    let add = |before: &str| {
        format!(
            r#"
extern "C" __global__ void k(const float* in, float* out) {{
    {before}
    out[0] += in[threadIdx.x];
    out[0] += in[threadIdx.x];
}}
"#
        )
    };
    for code in [add(""), add("__syncthreads();")] {
        let (_, thread, message) = fault_of(run(
            &racechecked(),
            &code,
            config(1, 32, 0),
            &[vec![1.0f32; 32], vec![0.0f32; 1]],
            &[],
        ));
        assert!(
            message.contains("racecheck: Race reported between Write access"),
            "{code}: {message}"
        );
        assert_eq!(thread, [1, 0, 0], "{code}: the second thread's first read");
    }
}
