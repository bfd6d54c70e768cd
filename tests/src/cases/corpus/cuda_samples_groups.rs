//! NVIDIA cuda-samples whose kernels use cooperative groups past block tiles: groups of the
//! threads that are active (`coalesced_threads`), partitions by label or predicate
//! (`labeled_partition`, `binary_partition`) and the grid barrier of a cooperative launch
//! (`this_grid().sync()`). The device code is verbatim in
//! `tests/corpus/cuda-samples/` (BSD-3-Clause, origin on line 1); the launches are the samples'
//! own on smaller problems, checked as the samples' host code checks them, and more strictly
//! where the result is deterministic.

use crate::{Case, Requires, ensure, fail};
use gpu_mem::Runtime;
use gpu_mem::prelude::*;

const WARP_AGGREGATED: &str =
    include_str!("../../../corpus/cuda-samples/warpAggregatedAtomicsCG.cu");
const BINARY_PARTITION: &str = include_str!("../../../corpus/cuda-samples/binaryPartitionCG.cu");
const MULTI_BLOCK: &str = include_str!("../../../corpus/cuda-samples/reductionMultiBlockCG.cu");

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    crate::cases!["corpus::cuda_samples_groups", Requires::Kernels;
        warp_aggregated_filter,
        warp_aggregated_map_to_buckets,
        warp_aggregated_max_in_buckets,
        binary_partition_odd_even,
        reduction_multi_block_cooperative,
        grid_sync_needs_a_cooperative_launch,
    ]
}

/// The samples' thread count per block.
const THREADS: u32 = 512;

fn device(rt: &Runtime) -> Result<Device, String> {
    rt.device(0).map_err(fail("device"))
}

/// Inputs: a fixed-seed linear congruential generator (Knuth's MMIX constants, high bits out).
fn random(n: usize, seed: u64, below: u32) -> Vec<i32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) as u32 % below) as i32
        })
        .collect()
}

fn upload(dev: &Device, values: &[i32], what: &str) -> Result<DeviceArray<i32>, String> {
    dev.to_device_slice(values).map_err(fail(what))
}

fn download(array: &DeviceArray<i32>, what: &str) -> Result<Vec<i32>, String> {
    Ok(array
        .copy_to_host()
        .map_err(fail(what))?
        .iter()
        .copied()
        .collect())
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
        dev.launch(
            &kernel,
            config,
            &mut [&mut d_dst, &mut d_nres, &mut d_src, &mut Scalar(n as i32)],
        )
    }
    .map_err(fail("filter_arr"))?;
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

/// `mapToBuckets`: each group of active lanes is split by bucket (`labeled_partition`); each
/// part's leader reserves slots in its bucket's range, as the sample's counters start at
/// `bucket * n`. Every index must land in its bucket's range exactly once.
fn warp_aggregated_map_to_buckets(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 10_240usize;
    // Buckets 0..5 and a sixth value the kernel skips (`bucket < numOfBuckets`): lanes that
    // diverge around the partition.
    let src = random(n, 11, BUCKETS as u32 + 1);
    let mut d_src = upload(&dev, &src, "srcArr")?;
    let mut d_indices = upload(&dev, &vec![-1; n * BUCKETS], "indicesBuckets")?;
    let starts: Vec<i32> = (0..BUCKETS).map(|b| (b * n) as i32).collect();
    let mut d_counters = upload(&dev, &starts, "bucketCounters")?;
    let kernel = Kernel::from_source(WARP_AGGREGATED, "mapToBuckets");
    // The sample's grid: n / 512 blocks.
    let config = LaunchConfig::new(n as u32 / THREADS, THREADS);
    // SAFETY: srcArr has n elements; bucket b's slots are b * n + (0..count(b)), inside the
    // n * BUCKETS indices; the counters are BUCKETS ints.
    unsafe {
        dev.launch(
            &kernel,
            config,
            &mut [
                &mut d_src,
                &mut d_indices,
                &mut d_counters,
                &mut Scalar(n as i32),
                &mut Scalar(BUCKETS as i32),
            ],
        )
    }
    .map_err(fail("mapToBuckets"))?;
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
    let mut d_src = upload(&dev, &src, "srcArr")?;
    let mut d_values = upload(&dev, &values, "valueInBuckets")?;
    let mut d_max = upload(&dev, &[0; BUCKETS], "bucketsMax")?;
    let kernel = Kernel::from_source(WARP_AGGREGATED, "calculateMaxInEachBuckets");
    let config = LaunchConfig::new(n as u32 / THREADS, THREADS);
    // SAFETY: srcArr and valueInBuckets have n elements, bucketsMax BUCKETS; only elements
    // with bucket < BUCKETS index it.
    unsafe {
        dev.launch(
            &kernel,
            config,
            &mut [
                &mut d_src,
                &mut d_values,
                &mut d_max,
                &mut Scalar(n as i32),
                &mut Scalar(BUCKETS as i32),
            ],
        )
    }
    .map_err(fail("calculateMaxInEachBuckets"))?;
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
        dev.launch(
            &kernel,
            LaunchConfig::new(blocks, threads),
            &mut [
                &mut d_input,
                &mut d_odds,
                &mut d_sums,
                &mut Scalar(n as u32),
            ],
        )
    }
    .map_err(fail("oddEvenCountAndSumCG"))?;
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
    let mut d_input = dev.to_device_slice(&input).map_err(fail("g_idata"))?;
    let mut d_output = dev
        .to_device_slice(&vec![0f32; blocks as usize])
        .map_err(fail("g_odata"))?;
    let kernel = Kernel::from_source(MULTI_BLOCK, "reduceSinglePassMultiBlockCG");
    // The sample: threads * sizeof(double) of dynamic shared memory.
    let config = LaunchConfig::new(blocks, threads)
        .with_shared_bytes(threads as usize * 8)
        .cooperative();
    // SAFETY: the kernel reads g_idata[i] for i < n, writes g_odata[blockIdx.x] for the grid's
    // blocks and sdata[thread_rank] within its dynamic shared memory.
    unsafe {
        dev.launch(
            &kernel,
            config,
            &mut [&mut d_input, &mut d_output, &mut Scalar(n as u32)],
        )
    }
    .map_err(fail("reduceSinglePassMultiBlockCG"))?;
    let got = d_output.copy_to_host().map_err(fail("g_odata"))?[[0]];
    let want: f64 = input.iter().map(|&v| f64::from(v)).sum();
    // Each block's sum is exact in double and rounded once to float; grid thread 0 adds the
    // eight in float: a few float roundings of a sum near 32768.
    let error = (f64::from(got) - want).abs();
    // Written so that a NaN fails.
    let within = error <= want * 1e-6;
    ensure!(
        within,
        "sum {got}, the reference {want} (error {error:e})"
    );
    Ok(())
}

/// A grid barrier needs a cooperative launch (a GPU's blocks need not all be resident in
/// another, and the barrier can hang): without one, the launch fails naming the barrier; a
/// cooperative grid larger than what can run at once fails too, as CUDA fails it.
fn grid_sync_needs_a_cooperative_launch(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let threads = 64u32;
    let mut d_input = dev.to_device_slice(&[1f32; 256]).map_err(fail("g_idata"))?;
    let mut d_output = dev.to_device_slice(&[0f32; 4]).map_err(fail("g_odata"))?;
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
