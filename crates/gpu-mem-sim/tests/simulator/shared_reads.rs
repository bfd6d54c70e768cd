//! racecheck's shared reads let through: a word of shared memory two threads read in a phase,
//! with no write of that phase, is read by every other thread without a record
//! (`gm_sim_read_by_all`). These kernels are the cases where such a read would hide a race if
//! the rule were wrong: a write after many reads, in every thread order, and a warp barrier
//! that orders lanes within the phase.

#![cfg(not(miri))]

use crate::memcheck::{config, fault_of, run};
use gpu_mem_sim::{Checks, SimBackend, SimConfig, SimDeviceConfig, ThreadOrder};

fn racechecked(thread_order: ThreadOrder) -> SimBackend {
    SimBackend::new(SimConfig {
        devices: vec![SimDeviceConfig {
            checks: Checks {
                racecheck: true,
                ..Checks::default()
            },
            thread_order,
            ..SimDeviceConfig::default()
        }],
    })
}

const ORDERS: [ThreadOrder; 3] = [
    ThreadOrder::Index,
    ThreadOrder::Reverse,
    ThreadOrder::Random { seed: 11 },
];

/// Every thread of a 64-thread block reads `s[0]` (and `s[1]` as a pair of bytes' word, whole),
/// then thread `writer` writes `s[0]` in the same phase, unless `barrier` separates them.
fn read_by_all_then_written(writer: u32, barrier: &str) -> String {
    format!(
        r#"
extern "C" __global__ void k(const float* in, float* out) {{
    __shared__ float s[4];
    unsigned t = threadIdx.x;
    if (t < 4) s[t] = in[t];
    __syncthreads();
    float v = s[0] + s[1];
    {barrier}
    if (t == {writer}) s[0] = v;
    __syncthreads();
    out[t] = v + s[0];
}}
"#
    )
}

#[test]
fn a_write_after_every_thread_read_a_word_races_in_every_order() {
    let input: Vec<f32> = (0..64).map(|v| v as f32).collect();
    for order in ORDERS {
        for writer in [0, 1, 2, 40, 63] {
            let (_, thread, message) = fault_of(run(
                &racechecked(order),
                &read_by_all_then_written(writer, ""),
                config(1, 64, 0),
                &[input.clone(), vec![0.0f32; 64]],
                &[],
            ));
            assert!(
                message.starts_with("racecheck: Race reported between"),
                "{order:?}, writer {writer}: {message}"
            );
            assert!(
                message.contains("k.cu:7") && message.contains("k.cu:9"),
                "{order:?}, writer {writer}: the read's and the write's lines: {message}"
            );
            assert!(
                message.contains("the shared array `s`, byte 0"),
                "{order:?}, writer {writer}: {message}"
            );
            // The write came last or the read did: either way one of the two is the writer.
            assert!(
                thread[0] == writer || message.contains(&format!("({writer}, 0, 0)")),
                "{order:?}, writer {writer}: {thread:?} {message}"
            );
        }
        let out = run(
            &racechecked(order),
            &read_by_all_then_written(40, "__syncthreads();"),
            config(1, 64, 0),
            &[input.clone(), vec![0.0f32; 64]],
            &[],
        )
        .unwrap_or_else(|e| panic!("{order:?}, with the barrier: {e}"));
        assert_eq!(out[1], vec![2.0; 64], "{order:?}");
    }
}

/// Lanes 0 and 1 read `s[0]`, pass `__syncwarp()`, then lane 0 reads it again (`again`) and
/// lane 1 writes it: lane 0's second read is not ordered before lane 1's write.
fn read_across_a_warp_barrier(again: &str) -> String {
    format!(
        r#"
extern "C" __global__ void k(const float* in, float* out) {{
    __shared__ float s[32];
    unsigned t = threadIdx.x;
    if (t == 0) s[0] = in[0];
    __syncthreads();
    float v = 0.0f;
    if (t < 2) v = s[0];
    __syncwarp();
    if (t == 0) {{ {again} }}
    if (t == 1) s[0] = 7.0f;
    out[t] = v;
}}
"#
    )
}

#[test]
fn a_read_after_a_warp_barrier_is_recorded_even_where_two_lanes_read_before_it() {
    let input = vec![3.0f32; 32];
    let (_, _, message) = fault_of(run(
        &racechecked(ThreadOrder::Index),
        &read_across_a_warp_barrier("v += s[0];"),
        config(1, 32, 0),
        &[input.clone(), vec![0.0f32; 32]],
        &[],
    ));
    assert!(
        message.starts_with("racecheck: Race reported between"),
        "{message}"
    );
    assert!(
        message.contains("k.cu:10") && message.contains("k.cu:11"),
        "lane 0's second read against lane 1's write: {message}"
    );
    // Without the second read, the warp barrier orders both reads before the write.
    let out = run(
        &racechecked(ThreadOrder::Index),
        &read_across_a_warp_barrier(""),
        config(1, 32, 0),
        &[input, vec![0.0f32; 32]],
        &[],
    )
    .unwrap_or_else(|e| panic!("the ordered write: {e}"));
    assert_eq!(&out[1][..3], &[3.0, 3.0, 0.0]);
}
