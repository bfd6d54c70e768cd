//! NVIDIA cuda-samples of CUDA features past the basics: cooperative groups of the threads that
//! are active (`coalesced_threads`), partitions by label or predicate (`labeled_partition`,
//! `binary_partition`), the grid barrier of a cooperative launch (`this_grid().sync()`), the
//! arrive/wait barrier (`<cuda/barrier>`) and half precision (`<cuda_fp16.h>`). The device code is verbatim in
//! `tests/corpus/cuda-samples/` (BSD-3-Clause, origin on line 1); the launches are the samples'
//! own on smaller problems, checked as the samples' host code checks them, and more strictly
//! where the result is deterministic.

use super::support::{Lcg, check_close, check_equal, device, download, launch, upload};
use crate::{Case, Requires, ensure};
use gpu_mem::Runtime;
use gpu_mem::prelude::*;

const WARP_AGGREGATED: &str =
    include_str!("../../../corpus/cuda-samples/warpAggregatedAtomicsCG.cu");
const BINARY_PARTITION: &str = include_str!("../../../corpus/cuda-samples/binaryPartitionCG.cu");
const MULTI_BLOCK: &str = include_str!("../../../corpus/cuda-samples/reductionMultiBlockCG.cu");
const FP16_PRODUCT: &str = include_str!("../../../corpus/cuda-samples/fp16ScalarProduct.cu");
const AW_BARRIER: &str = include_str!("../../../corpus/cuda-samples/simpleAWBarrier.cu");

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    let mut cases = crate::cases!["corpus::cuda_samples_features", Requires::Kernels;
        warp_aggregated_filter,
        warp_aggregated_map_to_buckets,
        warp_aggregated_max_in_buckets,
        binary_partition_odd_even,
        grid_sync_needs_a_cooperative_launch,
        fp16_scalar_product_native,
        fp16_scalar_product_intrinsics,
    ];
    cases.extend(
        crate::cases!["corpus::cuda_samples_features", Requires::CooperativeLaunch;
            reduction_multi_block_cooperative,
            arrive_wait_barrier_normalizes,
        ],
    );
    cases
}

/// The samples' thread count per block.
const THREADS: u32 = 512;

/// Inputs: `n` values below `below` from the generator started at the state `seed`.
fn random(n: usize, seed: u64, below: u32) -> Vec<i32> {
    let mut rng = Lcg::from_state(seed);
    (0..n).map(|_| rng.below(below) as i32).collect()
}

// ---------------------------------------------------------------------------------------------
// warpAggregatedAtomicsCG: one atomic per group of active lanes
// ---------------------------------------------------------------------------------------------

/// `filter_arr` keeps the positive elements: the leader of each group of lanes that take the
/// branch (`coalesced_threads`) reserves the group's slots with one `atomicAdd`, and each lane
/// writes at the leader's offset plus its rank. The count must be exact, and the slots a
/// permutation of the kept values (which order they come in depends on the schedule).
fn warp_aggregated_filter(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // Not a multiple of the block: the last block has idle threads. Values 0..4, as the
    // sample's `rand() % numOfBuckets`: about a fifth of the lanes take no part.
    let n = 20_000usize;
    let src = random(n, 7, 5);
    let mut d_src = upload(&dev, &src, "src")?;
    let mut d_dst = upload(&dev, &vec![-1; n], "dst")?;
    let mut d_nres = upload(&dev, &[0], "nres")?;
    let kernel = Kernel::from_source(WARP_AGGREGATED, "filter_arr");
    // The sample's grid: n / 512 + 1 blocks of 512 threads.
    let config = LaunchConfig::new(n as u32 / THREADS + 1, THREADS);
    // SAFETY: the kernel reads src[i] for i < n and writes dst at the reserved slots, fewer
    // than n (one per positive element); nres is one int.
    unsafe {
        launch(
            &dev,
            &kernel,
            config,
            &mut [&mut d_dst, &mut d_nres, &mut d_src, &mut Scalar(n as i32)],
        )
    }?;
    let mut want: Vec<i32> = src.iter().copied().filter(|&v| v > 0).collect();
    let nres = download(&d_nres, "nres")?[0];
    ensure!(
        nres as usize == want.len(),
        "filter_arr kept {nres} elements, the reference {}",
        want.len()
    );
    let dst = download(&d_dst, "dst")?;
    ensure!(
        dst[want.len()..].iter().all(|&v| v == -1),
        "filter_arr wrote past the slots it reserved"
    );
    let mut got = dst[..want.len()].to_vec();
    got.sort_unstable();
    want.sort_unstable();
    ensure!(
        got == want,
        "filter_arr's kept elements are not the positive inputs (some slot written twice)"
    );
    Ok(())
}

/// Buckets and grid of the sample's `mapIndicesToBuckets` / `calculateMaxInBuckets`.
const BUCKETS: usize = 5;

/// Launches `entry`, `mapToBuckets` or `calculateMaxInEachBuckets`, as the sample does: n / 512
/// blocks, on the elements' buckets `src` (n of them, uploaded as `srcArr`), the kernel's two
/// other arrays, n and BUCKETS.
///
/// # Safety
/// As `Device::launch`: `arrays` hold what `entry` indexes for n elements in BUCKETS buckets.
unsafe fn launch_buckets(
    dev: &Device,
    entry: &str,
    src: &[i32],
    [first, second]: [&mut DeviceArray<i32>; 2],
) -> Result<(), String> {
    let n = src.len();
    let mut d_src = upload(dev, src, "srcArr")?;
    let kernel = Kernel::from_source(WARP_AGGREGATED, entry);
    // SAFETY: srcArr has the n elements the kernel reads; the other arrays are the caller's.
    unsafe {
        launch(
            dev,
            &kernel,
            LaunchConfig::new(n as u32 / THREADS, THREADS),
            &mut [
                &mut d_src,
                first,
                second,
                &mut Scalar(n as i32),
                &mut Scalar(BUCKETS as i32),
            ],
        )
    }
}

/// `mapToBuckets`: each group of active lanes is split by bucket (`labeled_partition`); each
/// part's leader reserves slots in its bucket's range, as the sample's counters start at
/// `bucket * n`. Every index must land in its bucket's range exactly once.
fn warp_aggregated_map_to_buckets(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 10_240usize;
    // Buckets 0..5 and a sixth value the kernel skips (`bucket < numOfBuckets`): lanes that
    // diverge around the partition.
    let src = random(n, 11, BUCKETS as u32 + 1);
    let mut d_indices = upload(&dev, &vec![-1; n * BUCKETS], "indicesBuckets")?;
    let starts: Vec<i32> = (0..BUCKETS).map(|b| (b * n) as i32).collect();
    let mut d_counters = upload(&dev, &starts, "bucketCounters")?;
    // SAFETY: bucket b's slots are b * n + (0..count(b)), inside the n * BUCKETS indices; the
    // counters are BUCKETS ints.
    unsafe {
        launch_buckets(
            &dev,
            "mapToBuckets",
            &src,
            [&mut d_indices, &mut d_counters],
        )
    }?;
    let counters = download(&d_counters, "bucketCounters")?;
    let indices = download(&d_indices, "indicesBuckets")?;
    for (b, &end) in counters.iter().enumerate() {
        let mut want: Vec<i32> = (0..n as i32)
            .filter(|&i| src[i as usize] == b as i32)
            .collect();
        let count = end as usize - b * n;
        ensure!(
            count == want.len(),
            "bucket {b}: {count} indices reserved, the reference has {}",
            want.len()
        );
        let range = &indices[b * n..(b + 1) * n];
        let mut got = range[..count].to_vec();
        got.sort_unstable();
        want.sort_unstable();
        ensure!(
            got == want,
            "bucket {b} holds other indices than its elements'"
        );
        ensure!(
            range[count..].iter().all(|&v| v == -1),
            "bucket {b}: written past its reserved slots"
        );
    }
    Ok(())
}

/// `calculateMaxInEachBuckets`: per bucket, each labeled part reduces its values with
/// `cg::greater` and its leader applies one `atomicMax`. Deterministic: the maxima.
fn warp_aggregated_max_in_buckets(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 10_240usize;
    let src = random(n, 13, BUCKETS as u32 + 1);
    let values = random(n, 17, 1 << 30);
    let mut d_values = upload(&dev, &values, "valueInBuckets")?;
    let mut d_max = upload(&dev, &[0; BUCKETS], "bucketsMax")?;
    // SAFETY: valueInBuckets has n elements, bucketsMax BUCKETS; only elements with
    // bucket < BUCKETS index it.
    unsafe {
        launch_buckets(
            &dev,
            "calculateMaxInEachBuckets",
            &src,
            [&mut d_values, &mut d_max],
        )
    }?;
    let mut want = [0i32; BUCKETS];
    for (&b, &v) in src.iter().zip(&values) {
        if let Some(max) = want.get_mut(b as usize) {
            *max = (*max).max(v);
        }
    }
    let got = download(&d_max, "bucketsMax")?;
    ensure!(got == want, "bucket maxima {got:?}, the reference {want:?}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// binaryPartitionCG: a warp split by a predicate, each part reduced
// ---------------------------------------------------------------------------------------------

/// `oddEvenCountAndSumCG`: each warp tile is split into its odd and even elements
/// (`binary_partition`), each part summed with `cg::reduce`, and the leaders add the count of
/// odd elements and both sums atomically.
fn binary_partition_odd_even(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The sample sizes its grid by occupancy; here 4 blocks of 256 threads stride over the
    // input (a multiple of the grid, as the sample's 102400 elements are of its grid: every
    // lane of a tile takes the same number of turns).
    let (blocks, threads) = (4u32, 256u32);
    let n = 10_240usize;
    let input = random(n, 19, 50);
    let mut d_input = upload(&dev, &input, "inputArr")?;
    let mut d_odds = upload(&dev, &[0], "numOfOdds")?;
    let mut d_sums = upload(&dev, &[0, 0], "sumOfOddAndEvens")?;
    let kernel = Kernel::from_source(BINARY_PARTITION, "oddEvenCountAndSumCG");
    // SAFETY: the kernel reads inputArr[i] for i < size; numOfOdds is one int and
    // sumOfOddAndEvens two.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(blocks, threads),
            &mut [
                &mut d_input,
                &mut d_odds,
                &mut d_sums,
                &mut Scalar(n as u32),
            ],
        )
    }?;
    let odds = input.iter().filter(|&&v| v & 1 == 1).count() as i32;
    let odd_sum: i32 = input.iter().filter(|&&v| v & 1 == 1).sum();
    let even_sum: i32 = input.iter().filter(|&&v| v & 1 == 0).sum();
    let got = (
        download(&d_odds, "numOfOdds")?[0],
        download(&d_sums, "sums")?,
    );
    ensure!(
        got == (odds, vec![odd_sum, even_sum]),
        "odd count and sums {got:?}, the reference ({odds}, [{odd_sum}, {even_sum}])"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// reductionMultiBlockCG: one launch, blocks synchronized by the grid barrier
// ---------------------------------------------------------------------------------------------

/// `reduceSinglePassMultiBlockCG` in a cooperative launch: each block sums its grid-stride
/// share in double, writes it, waits at `cg::sync(grid)`, and grid thread 0 adds the blocks'
/// sums, which it can read only because every block passed the grid barrier first.
fn reduction_multi_block_cooperative(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The sample sizes the grid by occupancy (all blocks resident); 8 blocks of 256 here.
    let (blocks, threads) = (8u32, 256u32);
    let n = 1usize << 16;
    let input: Vec<f32> = random(n, 23, 1 << 20)
        .iter()
        .map(|&v| v as f32 / (1 << 20) as f32)
        .collect();
    let mut d_input = upload(&dev, &input, "g_idata")?;
    let mut d_output = upload(&dev, &vec![0f32; blocks as usize], "g_odata")?;
    let kernel = Kernel::from_source(MULTI_BLOCK, "reduceSinglePassMultiBlockCG");
    // The sample: threads * sizeof(double) of dynamic shared memory.
    let config = LaunchConfig::new(blocks, threads)
        .with_shared_bytes(threads as usize * 8)
        .cooperative();
    // SAFETY: the kernel reads g_idata[i] for i < n, writes g_odata[blockIdx.x] for the grid's
    // blocks and sdata[thread_rank] within its dynamic shared memory.
    unsafe {
        launch(
            &dev,
            &kernel,
            config,
            &mut [&mut d_input, &mut d_output, &mut Scalar(n as u32)],
        )
    }?;
    let got = download(&d_output, "g_odata")?[0];
    let want: f64 = input.iter().map(|&v| f64::from(v)).sum();
    // Each block's sum is exact in double and rounded once to float; grid thread 0 adds the
    // eight in float: a few float roundings of a sum near 32768.
    check_close("sum", &[got], &[want], 1e-6, 0.0)
}

/// A grid barrier needs a cooperative launch (a GPU's blocks need not all be resident in
/// another, and the barrier can hang): without one, the launch fails naming the barrier; a
/// cooperative grid larger than what can run at once fails too, as CUDA fails it.
fn grid_sync_needs_a_cooperative_launch(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let threads = 64u32;
    let mut d_input = upload(&dev, &[1f32; 256], "g_idata")?;
    let mut d_output = upload(&dev, &[0f32; 4], "g_odata")?;
    let kernel = Kernel::from_source(MULTI_BLOCK, "reduceSinglePassMultiBlockCG");
    let plain = LaunchConfig::new(4, threads).with_shared_bytes(threads as usize * 8);
    // SAFETY: as in reduction_multi_block_cooperative, with 256 inputs and 4 blocks.
    let result = unsafe {
        dev.launch(
            &kernel,
            plain,
            &mut [&mut d_input, &mut d_output, &mut Scalar(256u32)],
        )
    };
    let message = result.err().map(|e| e.to_string()).unwrap_or_default();
    ensure!(
        message.contains("cooperative launch") && message.contains(".cu:"),
        "a grid barrier outside a cooperative launch: {message:?}"
    );
    let huge = LaunchConfig::new(1 << 20, threads)
        .with_shared_bytes(threads as usize * 8)
        .cooperative();
    // SAFETY: refused before any block runs.
    let result = unsafe {
        dev.launch(
            &kernel,
            huge,
            &mut [&mut d_input, &mut d_output, &mut Scalar(256u32)],
        )
    };
    ensure!(
        result.is_err(),
        "a cooperative launch of 2^20 blocks was accepted"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// simpleAWBarrier: cuda::barrier inside blocks, the grid barrier between them
// ---------------------------------------------------------------------------------------------

/// `normVecByDotProductAWBarrier` in a cooperative launch: each block reduces its part of the
/// dot product through warp shuffles and a `cuda::barrier` (arrive, then wait on the token),
/// block 0 adds the partial sums after the grid barrier and takes the root, and every thread
/// divides its elements by it after a second grid barrier.
fn arrive_wait_barrier_normalizes(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // The sample sizes the grid by occupancy; 6 blocks of 256 here.
    let (blocks, threads) = (6u32, 256u32);
    let n = 20_000usize;
    let unit = |v: i32| v as f32 / 1024.0;
    let a: Vec<f32> = random(n, 37, 1024).into_iter().map(unit).collect();
    let b: Vec<f32> = random(n, 41, 1024).into_iter().map(unit).collect();
    let mut d_a = upload(&dev, &a, "vecA")?;
    let mut d_b = upload(&dev, &b, "vecB")?;
    let mut d_partial = upload(&dev, &vec![0f64; blocks as usize], "partialResults")?;
    let kernel = Kernel::from_source(AW_BARRIER, "normVecByDotProductAWBarrier");
    // The sample: one double of dynamic shared memory per warp, and one more.
    let shared = (threads as usize / 32 + 1) * 8;
    let config = LaunchConfig::new(blocks, threads)
        .with_shared_bytes(shared)
        .cooperative();
    // SAFETY: the kernel touches vecA[i] and vecB[i] for i < size, partialResults[blockIdx.x]
    // for its blocks, and tmp[warp] within its dynamic shared memory.
    unsafe {
        launch(
            &dev,
            &kernel,
            config,
            &mut [&mut d_a, &mut d_b, &mut d_partial, &mut Scalar(n as i32)],
        )
    }?;
    let dot: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(x * y)).sum();
    let norm = dot.sqrt();
    let got_norm = download(&d_partial, "partialResults")?[0];
    // Sums of doubles in another order: relative 1e-12.
    check_close(
        "the root of the dot product",
        &[got_norm],
        &[norm],
        1e-12,
        0.0,
    )?;
    for (name, input, array) in [("vecA", &a, &d_a), ("vecB", &b, &d_b)] {
        let got = download(array, name)?;
        for (i, (&g, &x)) in got.iter().zip(input.iter()).enumerate() {
            // The quotient rounded once to float, by a norm that may differ in its last bits.
            let want = (f64::from(x) / norm) as f32;
            let within = (g - want).abs() <= want.abs() * 1e-6;
            ensure!(within, "{name}[{i}] = {g}, the reference {want}");
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// fp16ScalarProduct: half2 arithmetic, rounded as a GPU rounds it
// ---------------------------------------------------------------------------------------------

/// `2^k` for `k` in f64's normal range, exactly (`powi` need not be exact, and is not under
/// Miri).
fn pow2(k: i32) -> f64 {
    f64::from_bits(u64::from((k + 1023) as u16) << 52)
}

/// The exponent of a positive normal `a`: `floor(log2(a))`, exactly.
fn exponent(a: f64) -> i32 {
    ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023
}

/// The half nearest `v` (ties to even), as bits: what every half operation rounds to.
fn half_bits(v: f64) -> u16 {
    let sign = if v.is_sign_negative() { 0x8000u16 } else { 0 };
    let a = v.abs();
    if a.is_nan() {
        return 0x7fff;
    }
    if a >= 65520.0 {
        return sign | 0x7c00;
    }
    // Units of the half's last place at this magnitude: 2^-24 below 2^-14, else 2^(e - 10).
    let e = if a < pow2(-14) { -14 } else { exponent(a) };
    let unit = pow2(e - 10);
    let units = (a / unit).round_ties_even();
    let value = units * unit;
    // Back to bits through the value (exact: `value` is a half).
    let bits = if value < pow2(-14) {
        (value / pow2(-24)) as u16
    } else {
        let e = exponent(value);
        let mantissa = (value / pow2(e) - 1.0) * 1024.0;
        (((e + 15) as u16) << 10) | mantissa as u16
    };
    sign | bits
}

fn half_value(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exponent = i32::from((bits >> 10) & 0x1f);
    let mantissa = f64::from(bits & 0x3ff);
    sign * match exponent {
        0 => mantissa * pow2(-24),
        31 if mantissa == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        e => (1.0 + mantissa / 1024.0) * pow2(e - 15),
    }
}

/// A half rounded from an exact `f64`.
fn half(v: f64) -> f64 {
    half_value(half_bits(v))
}

/// The sample's blocks and threads (its shared array is sized by them).
const FP16_BLOCKS: usize = 128;
const FP16_THREADS: usize = 128;

/// Runs `entry` of fp16ScalarProduct on the sample's inputs (x in 0..4, y in 0..2) and checks
/// every block's result against the kernel's own computation in half precision: each thread's
/// strided `a * b + value` (the sample's loop starts at `threadIdx.x + blockDim.x +
/// blockIdx.x`), then the block's tree of half additions. The products are small integers, so
/// a fused and an unfused multiply-add round alike; the additions round once the sums pass
/// 2048, which the check sees bit for bit.
fn fp16_scalar_product(rt: &Runtime, entry: &str) -> Result<(), String> {
    let dev = device(rt)?;
    // The sample's size, blocks * threads * 16 half2: a block's x sum is near 4600, past 2048
    // and 4096, where halves are 2 and 4 apart, so the last additions round.
    let size = FP16_BLOCKS * FP16_THREADS * 16;
    let x = random(2 * size, 29, 4);
    let y = random(2 * size, 31, 2);
    // half2 as (x | y << 16).
    let pack = |i: usize| {
        u32::from(half_bits(f64::from(x[i]))) | u32::from(half_bits(f64::from(y[i]))) << 16
    };
    let a: Vec<u32> = (0..size).map(pack).collect();
    let b: Vec<u32> = (size..2 * size).map(pack).collect();
    let mut d_a = upload(&dev, &a, "a")?;
    let mut d_b = upload(&dev, &b, "b")?;
    let mut d_results = upload(&dev, &[0f32; FP16_BLOCKS], "results")?;
    let kernel = Kernel::from_source(FP16_PRODUCT, entry);
    // SAFETY: the kernel reads a[i] and b[i] for i < size, writes results[blockIdx.x] for its
    // 128 blocks and its 128-element shared array by thread index.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(FP16_BLOCKS as u32, FP16_THREADS as u32),
            &mut [&mut d_a, &mut d_b, &mut d_results, &mut Scalar(size as u64)],
        )
    }?;
    let lane = |word: u32, high: bool| {
        half_value(if high {
            (word >> 16) as u16
        } else {
            word as u16
        })
    };
    let stride = FP16_BLOCKS * FP16_THREADS;
    let mut want = Vec::with_capacity(FP16_BLOCKS);
    let mut rounded = false;
    for block in 0..FP16_BLOCKS {
        let mut shared: Vec<[f64; 2]> = (0..FP16_THREADS)
            .map(|thread| {
                let mut value = [0.0f64; 2];
                for i in (thread + FP16_THREADS + block..size).step_by(stride) {
                    for (h, v) in value.iter_mut().enumerate() {
                        *v = half(lane(a[i], h == 1) * lane(b[i], h == 1) + *v);
                    }
                }
                value
            })
            .collect();
        let mut step = FP16_THREADS / 2;
        while step > 0 {
            for t in 0..step {
                let other = shared[t + step];
                for (sum, add) in shared[t].iter_mut().zip(other) {
                    let exact = *sum + add;
                    *sum = half(exact);
                    rounded |= *sum != exact;
                }
            }
            step /= 2;
        }
        want.push((shared[0][0] + shared[0][1]) as f32);
    }
    ensure!(
        rounded,
        "the inputs make no half addition round: the check would be weaker"
    );
    check_equal(
        &format!("{entry}: the blocks' results"),
        &download(&d_results, "results")?,
        &want,
    )
}

fn fp16_scalar_product_native(rt: &Runtime) -> Result<(), String> {
    fp16_scalar_product(rt, "scalarProductKernel_native")
}

fn fp16_scalar_product_intrinsics(rt: &Runtime) -> Result<(), String> {
    fp16_scalar_product(rt, "scalarProductKernel_intrinsics")
}

#[cfg(test)]
mod tests {
    use super::{half_bits, half_value, pow2};

    #[test]
    #[cfg_attr(miri, ignore = "safe code only, slow under Miri: run natively")]
    fn half_rounding_matches_ieee() {
        assert_eq!(half_bits(1.0), 0x3c00);
        assert_eq!(half_bits(2049.0), 0x6800); // a tie: to even (2048)
        assert_eq!(half_bits(2051.0), 0x6802); // a tie: to even (2052)
        assert_eq!(half_bits(65504.0), 0x7bff);
        assert_eq!(half_bits(65520.0), 0x7c00);
        assert_eq!(half_bits(pow2(-24)), 0x0001);
        assert_eq!(half_bits(pow2(-25)), 0x0000); // a tie: to even (0)
        assert_eq!(half_bits(-0.5), 0xb800);
        for bits in (0u16..0x7c00).step_by(7) {
            assert_eq!(half_bits(half_value(bits)), bits);
        }
    }
}
