//! More of NVIDIA's cuda-samples: warp votes, scans and sorts, wavelets, quasirandom generators,
//! DCT, a 3-D stencil, aligned copies, `clock()`, `assert`, `printf` and system-wide atomics.
//! The device code is verbatim in `tests/corpus/cuda-samples/` (BSD-3-Clause, origin on line 1);
//! the launches are the samples' own (block sizes, shared memory, template arguments, the host
//! code's sequence of launches) on smaller problems, and the results are checked against plain
//! serial references written here: exactly where the computation is exact (integers, or float
//! operations whose order the kernel fixes), within a tolerance argued per case otherwise.

use super::support::{
    Lcg, check_equal, check_scaled, check_sorted, device, download, launch, launch_sort,
    sort_input, sort_shared, upload, zeros,
};
use crate::{Case, Requires, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{DevicePointer, Error, KernelArg, Runtime};

const VOTE: &str = include_str!("../../../corpus/cuda-samples/simpleVoteIntrinsics.cu");
const SCAN: &str = include_str!("../../../corpus/cuda-samples/scan.cu");
const MERGE_SORT: &str = include_str!("../../../corpus/cuda-samples/mergeSort.cu");
const ODD_EVEN: &str =
    include_str!("../../../corpus/cuda-samples/sortingNetworks_oddEvenMergeSort.cu");
const DWT_HAAR: &str = include_str!("../../../corpus/cuda-samples/dwtHaar1D.cu");
const QUASIRANDOM: &str = include_str!("../../../corpus/cuda-samples/quasirandomGenerator.cu");
const SOBOL: &str = include_str!("../../../corpus/cuda-samples/SobolQRNG.cu");
const ALIGNED_TYPES: &str = include_str!("../../../corpus/cuda-samples/alignedTypes.cu");
const DCT8X8: &str = include_str!("../../../corpus/cuda-samples/dct8x8.cu");
const FDTD3D: &str = include_str!("../../../corpus/cuda-samples/FDTD3d.cu");
const CLOCK: &str = include_str!("../../../corpus/cuda-samples/clock.cu");
const ASSERT: &str = include_str!("../../../corpus/cuda-samples/simpleAssert.cu");
const PRINTF: &str = include_str!("../../../corpus/cuda-samples/simplePrintf.cu");
const GROUPS: &str = include_str!("../../../corpus/cuda-samples/simpleCooperativeGroups.cu");
const SYSTEM_ATOMICS: &str = include_str!("../../../corpus/cuda-samples/systemWideAtomics.cu");

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    let mut cases = crate::cases!["corpus::cuda_samples_more", Requires::Kernels;
        vote_any,
        vote_all,
        vote_any_across_warps,
        scan_short_arrays,
        scan_large_arrays,
        merge_sort,
        odd_even_merge_sort_shared,
        odd_even_merge_sort_long_arrays,
        dwt_haar_one_block,
        dwt_haar_two_steps,
        quasirandom_generator,
        quasirandom_inverse_cnd_uniform,
        quasirandom_inverse_cnd_given,
        sobol_qrng,
        aligned_types,
        dct8x8_forward,
        dct8x8_inverse,
        dct8x8_quantization_float,
        dct8x8_quantization_short,
        fdtd3d,
        clock_timed_reduction,
        simple_assert_passes,
        simple_printf,
        simple_cooperative_groups,
        system_wide_atomics,
    ];
    // A failed device-side assert is a sticky error on a GPU (the context cannot launch again),
    // and only the simulator names the assertion: the failing launch runs there.
    cases.extend(
        crate::cases!["corpus::cuda_samples_more", Requires::Simulator;
            simple_assert_fails,
        ],
    );
    cases
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Float results equal bit for bit (where the kernel's float operations and their order are
/// fixed, so a serial f32 emulation rounds exactly as the kernel does).
fn check_bits(what: &str, got: &[f32], want: &[f32]) -> Result<(), String> {
    ensure!(
        got.len() == want.len(),
        "{what}: {} values, expected {}",
        got.len(),
        want.len()
    );
    match got
        .iter()
        .zip(want)
        .position(|(g, w)| g.to_bits() != w.to_bits())
    {
        Some(i) => Err(format!(
            "{what}[{i}] = {:e}, expected {:e} (bits {:#010x}, expected {:#010x})",
            got[i],
            want[i],
            got[i].to_bits(),
            want[i].to_bits()
        )),
        None => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------------
// simpleVoteIntrinsics
// ---------------------------------------------------------------------------------------------

/// The sample's warp size and its VOTE_DATA_GROUP: four warps of data.
const WARP: usize = 32;
const VOTE_THREADS: usize = 4 * WARP;

/// genVoteTestPattern: a warp of zeros, a warp with every other value set, a warp with every
/// other value zero, a warp of 0xffffffff.
fn vote_pattern() -> Vec<u32> {
    let size = VOTE_THREADS;
    let mut pattern = vec![0u32; size];
    for (i, v) in pattern.iter_mut().enumerate() {
        let odd = i & 1 == 1;
        *v = match i * 4 / size {
            0 => 0,
            1 if odd => i as u32,
            2 if !odd => i as u32,
            1 | 2 => 0,
            _ => 0xffff_ffff,
        };
    }
    pattern
}

/// VoteAnyKernel1 / VoteAllKernel2 on the pattern, one block of four warps: each thread gets
/// its warp's vote, exactly 0 or 1 (the sample sums a warp's results and wants 0 or 32).
fn vote(rt: &Runtime, entry: &str, warp_vote: impl Fn(&[u32]) -> bool) -> Result<(), String> {
    let dev = device(rt)?;
    let input = vote_pattern();
    let mut d_input = upload(&dev, &input, "input")?;
    let mut d_result = upload(&dev, &vec![7u32; VOTE_THREADS], "result")?;
    let kernel = Kernel::from_source(VOTE, entry);
    // SAFETY: thread tx reads input[tx] and writes result[tx], tx < 128, the arrays' length.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(1, VOTE_THREADS as u32),
            &mut [
                &mut d_input,
                &mut d_result,
                &mut Scalar(VOTE_THREADS as i32),
            ],
        )
    }?;
    let want: Vec<u32> = input
        .chunks(WARP)
        .flat_map(|warp| [u32::from(warp_vote(warp)); WARP])
        .collect();
    check_equal(entry, &download(&d_result, "result")?, &want)
}

fn vote_any(rt: &Runtime) -> Result<(), String> {
    vote(rt, "VoteAnyKernel1", |warp| warp.iter().any(|&v| v != 0))
}

fn vote_all(rt: &Runtime) -> Result<(), String> {
    vote(rt, "VoteAllKernel2", |warp| warp.iter().all(|&v| v != 0))
}

/// VoteAnyKernel3 with the sample's launch (one block of three warps, warp_size 32): per
/// thread, three bools: any of its warp past thread 48, itself past 48, all of its warp past
/// 48 (left untouched, false, otherwise).
fn vote_any_across_warps(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let threads = 3 * WARP;
    let mut d_info = zeros::<u8>(&dev, 3 * threads, "info")?;
    let kernel = Kernel::from_source(VOTE, "VoteAnyKernel3");
    // SAFETY: thread tx writes info[3 tx .. 3 tx + 3], inside the 3 x 96 bools.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(1, threads as u32),
            &mut [&mut d_info, &mut Scalar(WARP as i32)],
        )
    }?;
    let half = WARP * 3 / 2;
    let want: Vec<u8> = (0..threads)
        .flat_map(|tx| {
            let warp = tx / WARP * WARP..(tx / WARP + 1) * WARP;
            [
                u8::from(warp.clone().any(|t| t >= half)),
                u8::from(tx >= half),
                u8::from(warp.clone().all(|t| t >= half)),
            ]
        })
        .collect();
    check_equal("info", &download(&d_info, "info")?, &want)
}

// ---------------------------------------------------------------------------------------------
// scan
// ---------------------------------------------------------------------------------------------

/// THREADBLOCK_SIZE: 256 threads, each scanning a uint4.
const SCAN_THREADS: usize = 256;
const SCAN_PER_BLOCK: usize = 4 * SCAN_THREADS;

/// scanExclusiveHost: exclusive prefix sums of each `length` array, modulo 2^32.
fn exclusive_scans(input: &[u32], length: usize) -> Vec<u32> {
    input
        .chunks(length)
        .flat_map(|array| {
            array.iter().scan(0u32, |sum, &v| {
                let before = *sum;
                *sum = sum.wrapping_add(v);
                Some(before)
            })
        })
        .collect()
}

/// The sample's input: random 32-bit words (its rand() gives 31 bits; all 32 here, so the
/// sums wrap).
fn scan_input(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = Lcg::from_state(seed);
    (0..n).map(|_| rng.next_u32()).collect()
}

/// scanExclusiveShared as the sample launches it over `src`'s n elements (a multiple of
/// 1024): n / 1024 blocks of 256 threads, each thread scanning a uint4, the exclusive scans of
/// the arrays of `length` (at most 1024) written to `dst`.
fn scan_exclusive_shared(
    dev: &Device,
    kernel: &Kernel,
    (src, dst): (&DeviceArray<u32>, &DeviceArray<u32>),
    length: usize,
) -> Result<(), String> {
    let n = src.size();
    ensure!(
        dst.size() == n,
        "d_Dst holds {} elements, d_Src {n}",
        dst.size()
    );
    let (mut src4, mut dst4) = (
        src.view_as::<[u32; 4]>().map_err(fail("uint4 view"))?,
        dst.view_as::<[u32; 4]>().map_err(fail("uint4 view"))?,
    );
    // SAFETY: n / 1024 blocks of 256 threads; thread pos reads and writes uint4 number pos,
    // below n / 4, the views' length.
    unsafe {
        launch(
            dev,
            kernel,
            LaunchConfig::new((n / SCAN_PER_BLOCK) as u32, SCAN_THREADS as u32),
            &mut [&mut dst4, &mut src4, &mut Scalar(length as u32)],
        )
    }
}

/// Checks that `dst` holds the exclusive scans of `input`'s arrays of `length`.
fn check_scans(dst: &DeviceArray<u32>, input: &[u32], length: usize) -> Result<(), String> {
    check_equal(
        &format!("arrays of {length}"),
        &download(dst, "d_Dst")?,
        &exclusive_scans(input, length),
    )
}

/// scanExclusiveShort for every power-of-2 length from 4 to 1024: one launch of
/// scanExclusiveShared over the batch, 1024 elements (256 uint4) per block.
fn scan_short_arrays(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 4 * SCAN_PER_BLOCK;
    let input = scan_input(n, 1);
    let d_src = upload(&dev, &input, "d_Src")?;
    let d_dst = zeros::<u32>(&dev, n, "d_Dst")?;
    let kernel = Kernel::from_source(SCAN, "scanExclusiveShared");
    let mut length = 4;
    while length <= SCAN_PER_BLOCK {
        scan_exclusive_shared(&dev, &kernel, (&d_src, &d_dst), length)?;
        check_scans(&d_dst, &input, length)?;
        length *= 2;
    }
    Ok(())
}

/// scanExclusiveLarge: each 1024-element chunk scanned (scanExclusiveShared), the chunks'
/// totals scanned per array (scanExclusiveShared2, one thread per chunk, the last block part
/// idle), then added to their chunks (uniformUpdate).
fn scan_large_arrays(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let module = Module::from_source(SCAN);
    let (first, second, update) = (
        module.kernel("scanExclusiveShared"),
        module.kernel("scanExclusiveShared2"),
        module.kernel("uniformUpdate"),
    );
    // 64 chunks: lengths 2048 (32 arrays) to 65536 (one), whose chunk totals the second kernel
    // scans 2 to 64 at a time.
    let n = 64 * SCAN_PER_BLOCK;
    let chunks = n / SCAN_PER_BLOCK;
    let input = scan_input(n, 2);
    let d_src = upload(&dev, &input, "d_Src")?;
    let d_dst = zeros::<u32>(&dev, n, "d_Dst")?;
    let mut d_buf = zeros::<u32>(&dev, chunks, "d_Buf")?;
    for length in [2048usize, 8192, 65536] {
        scan_exclusive_shared(&dev, &first, (&d_src, &d_dst), SCAN_PER_BLOCK)?;
        let (mut src, mut dst) = (d_src.view(), d_dst.view());
        // SAFETY: thread pos < N = chunks reads element 1024 pos + 1023 of Dst and Src (n
        // elements) and writes d_Buf[pos] (chunks elements); threads past N touch nothing.
        unsafe {
            launch(
                &dev,
                &second,
                LaunchConfig::new(chunks.div_ceil(SCAN_THREADS) as u32, SCAN_THREADS as u32),
                &mut [
                    &mut d_buf,
                    &mut dst,
                    &mut src,
                    &mut Scalar(chunks as u32),
                    &mut Scalar((length / SCAN_PER_BLOCK) as u32),
                ],
            )
        }?;
        let mut dst4 = d_dst.view_as::<[u32; 4]>().map_err(fail("uint4 view"))?;
        // SAFETY: block b reads d_Buffer[b] (b < chunks) and updates its 256 uint4.
        unsafe {
            launch(
                &dev,
                &update,
                LaunchConfig::new(chunks as u32, SCAN_THREADS as u32),
                &mut [&mut dst4, &mut d_buf],
            )
        }?;
        check_scans(&d_dst, &input, length)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// mergeSort
// ---------------------------------------------------------------------------------------------

/// SHARED_SIZE_LIMIT and SAMPLE_STRIDE of mergeSort_common.h (the same limit for
/// sortingNetworks).
const SHARED_SIZE_LIMIT: usize = 1024;
const SAMPLE_STRIDE: usize = 128;
/// The sample's rank and limit buffers.
const MAX_SAMPLE_COUNT: usize = 32768;

/// The sample's merge sort pipeline (mergeSort(), sortDir 1) on 5 x 1024 keys: blocks of 1024
/// sorted in shared memory, then merges of stride 1024, 2048 and 4096. The first two leave a
/// last segment of one array, which the host copies through; the last merges 4096 keys with
/// 1024. The merges are stable, so the result is exactly the stable sort of (key, index).
fn merge_sort(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 5 * SHARED_SIZE_LIMIT;
    // Keys below 4096 (the sample's 65536 on its 4M keys): many repeat, which stability
    // orders.
    let keys = Lcg::from_state(3).all_below32(n, 4096);
    let values: Vec<u32> = (0..n as u32).collect();
    let module = Module::from_source(MERGE_SORT).with_name_expressions([
        "mergeSortSharedKernel<1U>",
        "generateSampleRanksKernel<1U>",
        "mergeElementaryIntervalsKernel<1U>",
    ]);
    let shared = module.kernel("mergeSortSharedKernel<1U>");
    let ranks = module.kernel("generateSampleRanksKernel<1U>");
    let limits = module.kernel("mergeRanksAndIndicesKernel");
    let intervals = module.kernel("mergeElementaryIntervalsKernel<1U>");
    let mut src_key = upload(&dev, &keys, "srcKey")?;
    let mut src_val = upload(&dev, &values, "srcVal")?;
    let dst_key = zeros::<u32>(&dev, n, "dstKey")?;
    let dst_val = zeros::<u32>(&dev, n, "dstVal")?;
    let buf_key = zeros::<u32>(&dev, n, "bufKey")?;
    let buf_val = zeros::<u32>(&dev, n, "bufVal")?;
    let mut ranks_a = zeros::<u32>(&dev, MAX_SAMPLE_COUNT, "ranksA")?;
    let mut ranks_b = zeros::<u32>(&dev, MAX_SAMPLE_COUNT, "ranksB")?;
    let mut limits_a = zeros::<u32>(&dev, MAX_SAMPLE_COUNT, "limitsA")?;
    let mut limits_b = zeros::<u32>(&dev, MAX_SAMPLE_COUNT, "limitsB")?;
    let mut stages = 0;
    let mut stride = SHARED_SIZE_LIMIT;
    while stride < n {
        stages += 1;
        stride <<= 1;
    }
    // The output of the last stage must land in dst.
    let (mut ikey, mut ival, mut okey, mut oval) = if stages % 2 == 1 {
        (
            buf_key.view(),
            buf_val.view(),
            dst_key.view(),
            dst_val.view(),
        )
    } else {
        (
            dst_key.view(),
            dst_val.view(),
            buf_key.view(),
            buf_val.view(),
        )
    };
    // SAFETY: n / 1024 blocks of 512 threads; block b reads and writes elements
    // 1024 b + (0..1024) of the n-element arrays.
    unsafe {
        launch(
            &dev,
            &shared,
            LaunchConfig::new(
                (n / SHARED_SIZE_LIMIT) as u32,
                (SHARED_SIZE_LIMIT / 2) as u32,
            ),
            &mut [
                &mut ikey,
                &mut ival,
                &mut src_key,
                &mut src_val,
                &mut Scalar(SHARED_SIZE_LIMIT as u32),
            ],
        )
    }?;
    let mut stride = SHARED_SIZE_LIMIT;
    while stride < n {
        let last = n % (2 * stride);
        let thread_count = if last > stride {
            (n + 2 * stride - last) / (2 * SAMPLE_STRIDE)
        } else {
            (n - last) / (2 * SAMPLE_STRIDE)
        };
        let grid = LaunchConfig::new(thread_count.div_ceil(256) as u32, 256u32);
        // SAFETY: thread pos < threadCount reads keys of its segment pair (below N) and
        // writes the pair's sample ranks, at indices below 2 N / 128, inside the 32768-element
        // buffers.
        unsafe {
            launch(
                &dev,
                &ranks,
                grid,
                &mut [
                    &mut ranks_a,
                    &mut ranks_b,
                    &mut ikey,
                    &mut Scalar(stride as u32),
                    &mut Scalar(n as u32),
                    &mut Scalar(thread_count as u32),
                ],
            )
        }?;
        for (limits_x, ranks_x) in [(&mut limits_a, &mut ranks_a), (&mut limits_b, &mut ranks_b)] {
            // SAFETY: as above: each segment pair's ranks and limits, inside the buffers.
            unsafe {
                launch(
                    &dev,
                    &limits,
                    grid,
                    &mut [
                        limits_x,
                        ranks_x,
                        &mut Scalar(stride as u32),
                        &mut Scalar(n as u32),
                        &mut Scalar(thread_count as u32),
                    ],
                )
            }?;
        }
        let merge_pairs = if last > stride {
            n.div_ceil(SAMPLE_STRIDE)
        } else {
            (n - last) / SAMPLE_STRIDE
        };
        // SAFETY: block b merges the intervals its limits bound, inside its segment pair
        // (below N), with 128 threads.
        unsafe {
            launch(
                &dev,
                &intervals,
                LaunchConfig::new(merge_pairs as u32, SAMPLE_STRIDE as u32),
                &mut [
                    &mut okey,
                    &mut oval,
                    &mut ikey,
                    &mut ival,
                    &mut limits_a,
                    &mut limits_b,
                    &mut Scalar(stride as u32),
                    &mut Scalar(n as u32),
                ],
            )
        }?;
        if last <= stride {
            // A last segment with no partner: copied through, as the sample's cudaMemcpy.
            for (to, from) in [(&okey, &ikey), (&oval, &ival)] {
                let mut to = to.slice(s![n - last..]).map_err(fail("slice"))?;
                let from = from.slice(s![n - last..]).map_err(fail("slice"))?;
                to.copy_from_device(&from).map_err(fail("pass-through"))?;
            }
        }
        std::mem::swap(&mut ikey, &mut okey);
        std::mem::swap(&mut ival, &mut oval);
        stride <<= 1;
    }
    let mut want: Vec<(u32, u32)> = keys.iter().copied().zip(values.iter().copied()).collect();
    want.sort_by_key(|pair| pair.0);
    let (want_keys, want_values): (Vec<u32>, Vec<u32>) = want.into_iter().unzip();
    check_equal("keys", &download(&dst_key, "dstKey")?, &want_keys)?;
    check_equal(
        "values (stable order)",
        &download(&dst_val, "dstVal")?,
        &want_values,
    )
}

// ---------------------------------------------------------------------------------------------
// sortingNetworks (odd-even merge sort)
// ---------------------------------------------------------------------------------------------

/// oddEvenMergeSortShared: arrays of up to SHARED_SIZE_LIMIT keys, one or more per block of
/// 512 threads, in both directions (the sample's DIR is 0, descending).
fn odd_even_merge_sort_shared(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::from_source(ODD_EVEN, "oddEvenMergeSortShared");
    let n = 4 * SHARED_SIZE_LIMIT;
    for (length, dir) in [
        (64usize, 1u32),
        (256, 0),
        (SHARED_SIZE_LIMIT, 0),
        (SHARED_SIZE_LIMIT, 1),
    ] {
        let (keys, values) = sort_input(n, 40 + length as u64 + u64::from(dir));
        let (dk, dv) = sort_shared(&dev, &kernel, (&keys, &values), &[length as u32, dir])?;
        let what = format!("arrays of {length}, dir {dir}");
        check_sorted(&what, (&keys, &values), (&dk, &dv), length, |_| dir == 1)?;
    }
    Ok(())
}

/// The sample's oddEvenMergeSort() for arrays longer than shared memory: chunks of 1024 sorted
/// by oddEvenMergeSortShared, then every merge step (size 2048 up to the length, stride size/2
/// down to 1) by oddEvenMergeGlobal in place, N / 512 blocks of 256 comparators.
fn odd_even_merge_sort_long_arrays(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let module = Module::from_source(ODD_EVEN);
    let (shared, global) = (
        module.kernel("oddEvenMergeSortShared"),
        module.kernel("oddEvenMergeGlobal"),
    );
    let (length, batch) = (4 * SHARED_SIZE_LIMIT, 2usize);
    let n = length * batch;
    for dir in [0u32, 1] {
        let (keys, values) = sort_input(n, 50 + u64::from(dir));
        let scalars = [SHARED_SIZE_LIMIT as u32, dir];
        let (mut dk, mut dv) = sort_shared(&dev, &shared, (&keys, &values), &scalars)?;
        let mut size = 2 * SHARED_SIZE_LIMIT;
        while size <= length {
            let mut stride = size / 2;
            while stride > 0 {
                let (mut ak, mut av) = (dk.view(), dv.view());
                launch_sort(
                    &dev,
                    &global,
                    (n / 512, 256),
                    [&mut dk, &mut dv, &mut ak, &mut av],
                    &[length as u32, size as u32, stride as u32, dir],
                )?;
                stride >>= 1;
            }
            size <<= 1;
        }
        let what = format!("arrays of {length}, dir {dir}");
        check_sorted(&what, (&keys, &values), (&dk, &dv), length, |_| dir == 1)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// dwtHaar1D
// ---------------------------------------------------------------------------------------------

/// INV_SQRT_2 as the kernel has it (a float literal).
const INV_SQRT_2: f32 = 0.707_106_77;

/// The full Haar decomposition of `signal` (a power of 2) in the sample's layout: the final
/// approximation, then the details of each level from the coarsest, [a_L, d_L, d_L-1 (2),
/// ..., d_1 (n/2)]. Each coefficient is (a - b) / sqrt 2 or (a + b) / sqrt 2 of a pair of the
/// level below, rounded as the kernel rounds it (one f32 sum, one f32 product): exact.
fn haar_reference(signal: &[f32]) -> Vec<f32> {
    let mut out = vec![0f32; signal.len()];
    let mut approx = signal.to_vec();
    while approx.len() > 1 {
        let half = approx.len() / 2;
        for (i, pair) in approx.chunks(2).enumerate() {
            out[half + i] = (pair[0] - pair[1]) * INV_SQRT_2;
        }
        approx = approx
            .chunks(2)
            .map(|pair| (pair[0] + pair[1]) * INV_SQRT_2)
            .collect();
    }
    out[0] = approx[0];
    out
}

/// The sample's host loop (runTest) for a signal of `len` = 2^levels: one launch of up to
/// 512 threads per block decomposes 10 levels of each 1024-element part; the parts' final
/// approximations go back into the input for the next launch, or, at the end, into the
/// output's first element (the sample's device-to-device copies).
fn dwt_haar(rt: &Runtime, len: usize) -> Result<(), String> {
    let dev = device(rt)?;
    let levels = len.trailing_zeros();
    let mut rng = Lcg::from_state(60 + u64::from(levels));
    let signal: Vec<f32> = (0..len).map(|_| rng.range(-1.0, 1.0)).collect();
    let module = Module::from_source(DWT_HAAR);
    let (init, dwt) = (module.kernel("initValue"), module.kernel("dwtHaar1D"));
    let mut d_in = upload(&dev, &signal, "id")?;
    let mut d_out = upload(&dev, &vec![f32::NAN; len], "od")?;
    let mut d_approx = zeros::<f32>(&dev, len, "approx_final")?;
    let mut left = (len / 2) as u32;
    let mut step_levels = levels;
    let mut levels_left = levels;
    let (mut grid, mut block, mut approx_is_input);
    if levels <= 10 {
        (grid, block, approx_is_input) = (1u32, left, false);
    } else {
        (grid, block, approx_is_input) = (left / 512, 512, true);
        step_levels = 10;
        levels_left -= 10;
    }
    // SAFETY: grid x block threads write od[index] for index below len / 2 <= len.
    unsafe {
        launch(
            &dev,
            &init,
            LaunchConfig::new(grid, block),
            &mut [&mut d_out, &mut Scalar(0.0f32)],
        )
    }?;
    while left != 0 {
        let shared = (2 * block as usize + 2 * block as usize / 16) * size_of::<f32>();
        // Block b reads id[1024 b .. 1024 (b + 1)) (2 x bdim per block, inside the
        // signal), writes details at od[left + global id] and below (inside the len
        // outputs) and approx_final[b]; its shared indices stay below 2 bdim + 2 bdim / 16,
        // the dynamic shared memory given.
        // SAFETY: every access stays within those bounds.
        unsafe {
            launch(
                &dev,
                &dwt,
                LaunchConfig::new(grid, block).with_shared_bytes(shared),
                &mut [
                    &mut d_in,
                    &mut d_out,
                    &mut d_approx,
                    &mut Scalar(step_levels),
                    &mut Scalar(left),
                    &mut Scalar(block as i32),
                ],
            )
        }?;
        let parts = d_approx.slice(s![..grid as usize]).map_err(fail("slice"))?;
        let target = if approx_is_input { &d_in } else { &d_out };
        target
            .slice(s![..grid as usize])
            .map_err(fail("slice"))?
            .copy_from_device(&parts)
            .map_err(fail("approx_final"))?;
        if levels_left < 10 {
            approx_is_input = false;
        }
        step_levels = if levels_left > 10 {
            levels_left - 10
        } else {
            levels_left
        };
        levels_left = levels_left.wrapping_sub(10);
        left >>= 10;
        // The sample's expression, `(left / 512) + (0 != (left % 512)) ? 1 : 0`: 1 while
        // anything is left (its `?:` binds last).
        grid = u32::from((left / 512) + u32::from(!left.is_multiple_of(512)) != 0);
        if grid <= 1 {
            block = left;
        }
    }
    check_bits(
        "coefficients",
        &download(&d_out, "od")?,
        &haar_reference(&signal),
    )
}

/// A signal of 1024: the sample's single-block path (10 levels, 512 threads).
fn dwt_haar_one_block(rt: &Runtime) -> Result<(), String> {
    dwt_haar(rt, 1024)
}

/// The sample's signal length, 4096: four blocks of 512 for 10 levels, then one block of 2
/// threads for the last 2.
fn dwt_haar_two_steps(rt: &Runtime) -> Result<(), String> {
    dwt_haar(rt, 4096)
}

// ---------------------------------------------------------------------------------------------
// quasirandomGenerator
// ---------------------------------------------------------------------------------------------

/// QRNG_DIMENSIONS and QRNG_RESOLUTION of quasirandomGenerator_common.h.
const QRNG_DIMENSIONS: usize = 3;
const QRNG_RESOLUTION: usize = 31;

/// The degree of a polynomial over GF(2) (its highest set bit, below 31).
fn degree(p: i32) -> i32 {
    let mut e = 30;
    while p & (1 << e) == 0 {
        e -= 1;
    }
    e
}

/// GeneratePolynomials (quasirandomGenerator_gold.cpp) with primitive = false: the
/// polynomial x, then the next irreducible polynomials over GF(2), by trial division.
fn qrng_polynomials() -> [i32; QRNG_DIMENSIONS] {
    let mut buffer = [0i32; QRNG_DIMENSIONS];
    buffer[0] = 0x2;
    for n in 1..QRNG_DIMENSIONS {
        let mut p1 = buffer[n - 1] + 1;
        loop {
            let e_p1 = degree(p1);
            let mut p2 = 0;
            for &b in &buffer[..n] {
                let e_b = degree(b);
                let mut e_p2 = e_p1;
                p2 = (b << (e_p2 - e_b)) ^ p1;
                while p2 >= b {
                    while p2 & (1 << e_p2) == 0 {
                        e_p2 -= 1;
                    }
                    p2 ^= b << (e_p2 - e_b);
                }
                if p2 == 0 {
                    break;
                }
            }
            if p2 != 0 {
                buffer[n] = p1;
                break;
            }
            p1 += 1;
        }
    }
    buffer
}

/// GenerateCJ (quasirandomGenerator_gold.cpp): Niederreiter's 63-bit generator matrices
/// `cjn[bit][dimension]` from the polynomials, as Bratley, Fox and Niederreiter compute them.
fn qrng_cjn() -> [[i64; QRNG_DIMENSIONS]; 63] {
    let mut cjn = [[0i64; QRNG_DIMENSIONS]; 63];
    for (d, &poly) in qrng_polynomials().iter().enumerate() {
        // The polynomial's coefficients from the leading one down: p[0..=e].
        let e = degree(poly) as usize;
        let p: Vec<i32> = (0..=e).map(|k| (poly >> (e - k)) & 1).collect();
        // b starts as the polynomial 1; v needs 63 + e - 1 entries.
        let mut b: Vec<i32> = vec![1];
        let mut m = 0usize;
        let mut v = vec![0i32; 63 + e - 1];
        let mut u = e;
        for j in (0..63).rev() {
            if u == e {
                u = 0;
                // b *= p.
                let t = b.clone();
                let m1 = m;
                m += e;
                b = vec![0; m + 1];
                for (i, bi) in b.iter_mut().enumerate() {
                    let (mut ip, mut it) = (e as i64 - (m - i) as i64, m1 as i64);
                    while ip <= e as i64 && it >= 0 {
                        if ip >= 0 {
                            *bi ^= p[ip as usize] & t[it as usize];
                        }
                        ip += 1;
                        it -= 1;
                    }
                }
                for (i, vi) in v.iter_mut().enumerate().take(m) {
                    *vi = i32::from(i >= m1);
                }
                for i in m..v.len() {
                    v[i] = 0;
                    for it in 1..=m {
                        v[i] ^= v[i - it] & b[it];
                    }
                }
            }
            for (i, row) in cjn.iter_mut().enumerate() {
                row[d] |= i64::from(v[i + u]) << j;
            }
            u += 1;
        }
    }
    cjn
}

/// initQuasirandomGenerator: the 31-bit table the kernel reads from c_Table.
fn qrng_table() -> [[u32; QRNG_RESOLUTION]; QRNG_DIMENSIONS] {
    let cjn = qrng_cjn();
    let mut table = [[0u32; QRNG_RESOLUTION]; QRNG_DIMENSIONS];
    for (dim, row) in table.iter_mut().enumerate() {
        for (bit, entry) in row.iter_mut().enumerate() {
            *entry = ((cjn[bit][dim] >> 32) & 0x7FFF_FFFF) as u32;
        }
    }
    table
}

/// INT_SCALE, (1.0f / (float)0x80000001U): the float of 0x80000001 is 2^31, so 2^-31.
const INT_SCALE: f32 = 1.0 / 2_147_483_648.0;

/// quasirandomGeneratorKernel with the sample's block (128 x QRNG_DIMENSIONS: threadIdx.y picks
/// the dimension) on 8 blocks (the sample's 128) over N = 10000 points, so each thread strides
/// over the grid about 10 times; with seed 0 as the sample, and with a seed that offsets the
/// sequence. Each value is an XOR of table entries then one exact float scaling: compared bit
/// for bit with getQuasirandomValue.
fn quasirandom_generator(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let table = qrng_table();
    // The first dimension of Niederreiter's sequence in base 2 is van der Corput's: the bits
    // of the index mirrored, so the table must be the reversed unit vectors.
    let mirror: Vec<u32> = (0..QRNG_RESOLUTION as u32).map(|b| 1 << (30 - b)).collect();
    check_equal("c_Table[0] (van der Corput)", &table[0], &mirror)?;
    let kernel = Kernel::from_source(QUASIRANDOM, "quasirandomGeneratorKernel");
    let flat: Vec<u32> = table.iter().flatten().copied().collect();
    dev.copy_to_symbol(&kernel, "c_Table", &flat[..])
        .map_err(fail("c_Table"))?;
    let n = 10_000u32;
    for seed in [0u32, 123_457] {
        let mut d_out = upload(
            &dev,
            &vec![f32::NAN; QRNG_DIMENSIONS * n as usize],
            "d_Output",
        )?;
        // SAFETY: thread (x, y) writes d_Output[y N + pos] for pos < N, y < 3, inside the
        // 3 N outputs.
        unsafe {
            launch(
                &dev,
                &kernel,
                LaunchConfig::new(8, (128, QRNG_DIMENSIONS as u32)),
                &mut [&mut d_out, &mut Scalar(seed), &mut Scalar(n)],
            )
        }?;
        let want: Vec<f32> = table
            .iter()
            .flat_map(|dim| {
                (0..n).map(move |pos| {
                    let mut data = seed.wrapping_add(pos);
                    let mut result = 0u32;
                    for &entry in dim {
                        if data & 1 == 1 {
                            result ^= entry;
                        }
                        data >>= 1;
                    }
                    (result + 1) as f32 * INT_SCALE
                })
            })
            .collect();
        check_bits(
            &format!("seed {seed}"),
            &download(&d_out, "d_Output")?,
            &want,
        )?;
    }
    Ok(())
}

/// MoroInvCNDcpu: Moro's approximation of the inverse normal distribution, in double.
fn moro_inv_cnd(x: u32) -> f64 {
    const A: [f64; 4] = [
        2.50662823884,
        -18.61500062529,
        41.39119773534,
        -25.44106049637,
    ];
    const B: [f64; 4] = [
        -8.4735109309,
        23.08336743743,
        -21.06224101826,
        3.13082909833,
    ];
    const C: [f64; 9] = [
        0.337475482272615,
        0.976169019091719,
        0.160797971491821,
        2.76438810333863E-02,
        3.8405729373609E-03,
        3.951896511919E-04,
        3.21767881768E-05,
        2.888167364E-07,
        3.960315187E-07,
    ];
    let (x, negate) = if x >= 0x8000_0000 {
        (0xffff_ffff - x, true)
    } else {
        (x, false)
    };
    let x1 = 1.0 / f64::from(0xffff_ffffu32);
    let p1 = f64::from(x) * x1 + x1 / 2.0;
    let p2 = p1 - 0.5;
    let z = if p2 > -0.42 {
        let z = p2 * p2;
        p2 * (((A[3] * z + A[2]) * z + A[1]) * z + A[0])
            / ((((B[3] * z + B[2]) * z + B[1]) * z + B[0]) * z + 1.0)
    } else {
        let z = (-p1.ln()).ln();
        -C.iter().rev().fold(0.0, |acc, &c| c + z * acc)
    };
    if negate { -z } else { z }
}

/// Checks inverseCNDKernel's results against [`moro_inv_cnd`] of its inputs.
///
/// Tolerance: the kernel's float p1 carries the rounding of x to 24 bits (2^-24 relative),
/// and __logf errs by up to 2^-21.4 absolute; through the tail's two logarithms and the
/// polynomials (slopes below 3) the result errs by a few 1e-6 at most, times |z| below 6. The
/// check allows 1e-5 (1 + |z|), and also wants the sample's own criterion, a relative L1 error
/// below 1e-6.
fn check_inverse_cnd(what: &str, got: &[f32], inputs: &[u32]) -> Result<(), String> {
    let want: Vec<f64> = inputs.iter().map(|&x| moro_inv_cnd(x)).collect();
    let scale: Vec<f64> = want.iter().map(|w| 1.0 + w.abs()).collect();
    check_scaled(what, got, &want, &scale, 1e-5)?;
    let diff: f64 = got
        .iter()
        .zip(&want)
        .map(|(&g, w)| (f64::from(g) - w).abs())
        .sum();
    let norm: f64 = want.iter().map(|w| w.abs()).sum();
    // False for a NaN, which so fails.
    let within = diff / norm < 1e-6;
    ensure!(
        within,
        "{what}: relative L1 error {:e}, the sample wants below 1e-6",
        diff / norm
    );
    Ok(())
}

/// inverseCNDKernel with the sample's launch (128 threads per block; 8 blocks here, the
/// sample's 128) on `path_n` outputs: of the numbers `inputs`, or, with none (a null
/// `d_Input`, which the kernel tests), of evenly spaced samples it makes on the fly.
fn inverse_cnd(dev: &Device, path_n: u32, inputs: Option<&[u32]>) -> Result<Vec<f32>, String> {
    let kernel = Kernel::from_source(QUASIRANDOM, "inverseCNDKernel");
    let mut d_out = upload(dev, &vec![f32::NAN; path_n as usize], "d_Output")?;
    let (mut null, mut given) = (DevicePointer::<u32>::null(), None);
    let d_input: &mut dyn KernelArg = match inputs {
        Some(values) => {
            ensure!(
                values.len() == path_n as usize,
                "{} inputs for {path_n} outputs",
                values.len()
            );
            given.insert(upload(dev, values, "d_Input")?)
        }
        None => &mut null,
    };
    // SAFETY: thread pos < pathN writes d_Output[pos], inside the pathN outputs, and reads
    // d_Input[pos] (pathN long) unless d_Input is null, which the kernel tests.
    unsafe {
        launch(
            dev,
            &kernel,
            LaunchConfig::new(8, 128),
            &mut [&mut d_out, d_input, &mut Scalar(path_n)],
        )
    }?;
    download(&d_out, "d_Output")
}

/// inverseCNDKernel as the sample launches it, with its input: none (d_Input NULL), so the
/// kernel makes evenly spaced samples (pos + 1) * distance on the fly, 3 x 4096 here.
fn quasirandom_inverse_cnd_uniform(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let path_n = (QRNG_DIMENSIONS * 4096) as u32;
    let got = inverse_cnd(&dev, path_n, None)?;
    let distance = u32::MAX / (path_n + 1);
    let inputs: Vec<u32> = (0..path_n).map(|pos| (pos + 1) * distance).collect();
    check_inverse_cnd("uniform samples", &got, &inputs)
}

/// inverseCNDKernel's other path, launched as the sample launches the first: it transforms
/// the numbers it is given (a non-null d_Input), here random ones and both tails' extremes.
fn quasirandom_inverse_cnd_given(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let mut inputs = Lcg::from_state(70).all_below32(5000, u32::MAX);
    inputs.extend([0, 1, 0x7fff_ffff, 0x8000_0000, u32::MAX - 1, u32::MAX]);
    let got = inverse_cnd(&dev, inputs.len() as u32, Some(&inputs))?;
    check_inverse_cnd("given numbers", &got, &inputs)
}

// ---------------------------------------------------------------------------------------------
// SobolQRNG
// ---------------------------------------------------------------------------------------------

/// n_directions of sobol.h.
const SOBOL_DIRECTIONS: usize = 32;

/// The first entries of the sample's sobol_primitives table (sobol_primitives.cpp, based on
/// Joe and Kuo's joe-kuo-6.10200 set): (degree, a, m), the first dimension being a special
/// case whose entry is ignored.
const SOBOL_PRIMITIVES: [(u32, u32, &[u32]); 8] = [
    (0, 0, &[]),
    (1, 0, &[1]),
    (2, 1, &[1, 3]),
    (3, 1, &[1, 3, 1]),
    (3, 2, &[1, 1, 1]),
    (4, 1, &[1, 1, 3, 3]),
    (4, 4, &[1, 3, 5, 13]),
    (5, 2, &[1, 1, 5, 5, 17]),
];

/// initSobolDirectionVectors (sobol_gold.cpp): each dimension's 32 direction numbers from its
/// primitive polynomial, by Bratley and Fox's recurrence.
fn sobol_directions(dimensions: usize) -> Vec<u32> {
    let mut out = Vec::with_capacity(dimensions * SOBOL_DIRECTIONS);
    for (dim, &(d, a, m)) in SOBOL_PRIMITIVES.iter().enumerate().take(dimensions) {
        let mut v = [0u32; SOBOL_DIRECTIONS];
        if dim == 0 {
            for (i, vi) in v.iter_mut().enumerate() {
                *vi = 1 << (31 - i);
            }
        } else {
            let d = d as usize;
            for i in 0..d {
                v[i] = m[i] << (31 - i);
            }
            for i in d..SOBOL_DIRECTIONS {
                v[i] = v[i - d] ^ (v[i - d] >> d);
                for j in 1..d {
                    v[i] ^= ((a >> (d - 1 - j)) & 1) * v[i - j];
                }
            }
        }
        out.extend(v);
    }
    out
}

/// k_2powneg32 as the kernel has it (a float literal near 2^-32).
const K_2POWNEG32: f32 = 2.328_306_4E-10;

/// sobolCPU: the points one after the other (Gray-code order), each the previous XOR one
/// direction number.
fn sobol_reference(vectors: usize, directions: &[u32]) -> Vec<f32> {
    directions
        .chunks(SOBOL_DIRECTIONS)
        .flat_map(|v| {
            let mut x = 0u32;
            (0..vectors).map(move |i| {
                if i > 0 {
                    x ^= v[(!(i as u32 - 1)).trailing_zeros() as usize];
                }
                x as f32 * K_2POWNEG32
            })
        })
        .collect()
}

/// sobolGPU_kernel with the sample's block (64 threads) and grid shape (a power of 2 of blocks
/// along x per dimension, one row of blocks per dimension along y): 4 blocks (stride 256,
/// where the sample takes about 4 per multiprocessor) and 1 (stride 64, the sample's choice for
/// many dimensions), over 5000 vectors of the first 8 dimensions. Each thread jumps ahead a
/// stride at a time; the values are integers scaled once, so equal the serial ones exactly.
fn sobol_qrng(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (vectors, dimensions) = (5000usize, SOBOL_PRIMITIVES.len());
    let directions = sobol_directions(dimensions);
    let want = sobol_reference(vectors, &directions);
    let kernel = Kernel::from_source(SOBOL, "sobolGPU_kernel");
    for blocks_x in [4u32, 1] {
        let mut d_directions = upload(&dev, &directions, "d_directions")?;
        let mut d_out = upload(&dev, &vec![f32::NAN; vectors * dimensions], "d_output")?;
        // SAFETY: block (x, y) reads the 32 direction numbers of dimension y (dimensions x 32
        // given) and writes d_output[y n_vectors + i] for i < n_vectors.
        unsafe {
            launch(
                &dev,
                &kernel,
                LaunchConfig::new((blocks_x, dimensions as u32), 64),
                &mut [
                    &mut Scalar(vectors as u32),
                    &mut Scalar(dimensions as u32),
                    &mut d_directions,
                    &mut d_out,
                ],
            )
        }?;
        check_bits(
            &format!("{blocks_x} block(s) per dimension"),
            &download(&d_out, "d_output")?,
            &want,
        )?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// alignedTypes
// ---------------------------------------------------------------------------------------------

/// The copy of `memory` bytes as `T` elements (`packed` bytes of data each, the rest padding)
/// by `testKernel<T>`: 8 blocks of the sample's 256 threads (its grid: 64) striding over
/// memory / sizeof(T) elements. As the sample checks, only the packed bytes must match.
fn aligned_copy<T: Element>(
    dev: &Device,
    module: &Module,
    name: &str,
    packed: usize,
    memory: &[u8],
) -> Result<(), String> {
    let size = size_of::<T>();
    let count = memory.len() / size;
    let mut input = vec![T::zeroed(); count];
    bytemuck::cast_slice_mut::<T, u8>(&mut input).copy_from_slice(&memory[..count * size]);
    let mut d_in = upload(dev, &input, "d_in")?;
    let mut d_out = zeros::<T>(dev, count, "d_out")?;
    let entry = format!("testKernel<{name}>");
    // SAFETY: thread tid copies elements tid, tid + 2048, ... below numElements, the length of
    // both arrays.
    unsafe {
        launch(
            dev,
            &module.kernel(&entry),
            LaunchConfig::new(8, 256),
            &mut [&mut d_out, &mut d_in, &mut Scalar(count as i32)],
        )
    }?;
    let got = download(&d_out, "d_out")?;
    for (i, (g, w)) in got.iter().zip(&input).enumerate() {
        let (g, w) = (bytemuck::bytes_of(g), bytemuck::bytes_of(w));
        ensure!(
            g[..packed] == w[..packed],
            "{entry}: element {i} is {:?}, expected {:?}",
            &g[..packed],
            &w[..packed]
        );
    }
    Ok(())
}

/// The sample's twelve instantiations on 96 KiB (its 48 MB, a multiple of 256 bytes; this one
/// of 12 as well, so no element is cut), filled as the sample fills it, (i & 0xFF) + 1 in a
/// byte (256 wrapping to 0). The Rust stand-ins have the C types' sizes (RGB32 is 12 bytes of
/// data padded to 16) and their alignment or less (the device arrays start aligned for all).
fn aligned_types(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let memory: Vec<u8> = (0..96 * 1024).map(|i| ((i & 0xFF) + 1) as u8).collect();
    // uint8, uint16 and I32 are typedefs of unsigned types, named as such: hiprtc finds a
    // template's instances by their demangled names, which spell the types out.
    let names = [
        "unsigned char",
        "unsigned short",
        "RGBA8_misaligned",
        "LA32_misaligned",
        "RGB32_misaligned",
        "RGBA32_misaligned",
        "RGBA8",
        "unsigned int",
        "LA32",
        "RGB32",
        "RGBA32",
        "RGBA32_2",
    ];
    let module = Module::from_source(ALIGNED_TYPES)
        .with_name_expressions(names.map(|n| format!("testKernel<{n}>")));
    let m = &memory;
    aligned_copy::<u8>(&dev, &module, names[0], 1, m)?;
    aligned_copy::<u16>(&dev, &module, names[1], 2, m)?;
    aligned_copy::<[u8; 4]>(&dev, &module, names[2], 4, m)?;
    aligned_copy::<[u32; 2]>(&dev, &module, names[3], 8, m)?;
    aligned_copy::<[u32; 3]>(&dev, &module, names[4], 12, m)?;
    aligned_copy::<[u32; 4]>(&dev, &module, names[5], 16, m)?;
    aligned_copy::<[u8; 4]>(&dev, &module, names[6], 4, m)?;
    aligned_copy::<u32>(&dev, &module, names[7], 4, m)?;
    aligned_copy::<[u32; 2]>(&dev, &module, names[8], 8, m)?;
    aligned_copy::<[u32; 4]>(&dev, &module, names[9], 12, m)?;
    aligned_copy::<[u32; 4]>(&dev, &module, names[10], 16, m)?;
    aligned_copy::<[u32; 8]>(&dev, &module, names[11], 32, m)
}

// ---------------------------------------------------------------------------------------------
// dct8x8
// ---------------------------------------------------------------------------------------------

/// The image for the DCT cases: 64 x 32 pixels in rows of 80 floats (the sample's
/// cudaMallocPitch stride, wider than the image), so the stride parameter matters.
const DCT_WIDTH: usize = 64;
const DCT_HEIGHT: usize = 32;
const DCT_STRIDE: usize = 80;
/// What the padding columns hold; no kernel may write there.
const PAD: f32 = 12345.0;

/// The orthonormal 8-point DCT-II matrix C and its transpose: row k of C is
/// c(k) cos((2n + 1) k pi / 16), c(0) = 1/sqrt 8 and c(k) = 1/2 (the kernels' C_norm x sqrt 2
/// cos(...) constants).
fn dct_matrix() -> ([[f64; 8]; 8], [[f64; 8]; 8]) {
    let mut c = [[0.0; 8]; 8];
    for (k, row) in c.iter_mut().enumerate() {
        let norm = if k == 0 { 8f64.sqrt().recip() } else { 0.5 };
        for (n, value) in row.iter_mut().enumerate() {
            *value = norm * ((2 * n + 1) as f64 * k as f64 * std::f64::consts::PI / 16.0).cos();
        }
    }
    let ct = std::array::from_fn(|n| std::array::from_fn(|k| c[k][n]));
    (c, ct)
}

/// Each 8x8 block B of the strided `image` transformed as L B R with the 8x8 matrices `l` and
/// `r`, and the magnitude its rounding errors scale with, sum |l| |B| |r| (per output).
fn blockwise(image: &[f32], l: &[[f64; 8]; 8], r: &[[f64; 8]; 8]) -> (Vec<f64>, Vec<f64>) {
    let (mut out, mut scale) = (vec![0.0; image.len()], vec![1.0; image.len()]);
    for by in (0..DCT_HEIGHT).step_by(8) {
        for bx in (0..DCT_WIDTH).step_by(8) {
            let at = |y: usize, x: usize| (by + y) * DCT_STRIDE + bx + x;
            for (k, lk) in l.iter().enumerate() {
                for j in 0..8 {
                    let (mut sum, mut magnitude) = (0.0, 0.0);
                    for (y, &lky) in lk.iter().enumerate() {
                        for (x, rx) in r.iter().enumerate() {
                            let term = lky * f64::from(image[at(y, x)]) * rx[j];
                            sum += term;
                            magnitude += term.abs();
                        }
                    }
                    out[at(k, j)] = sum;
                    scale[at(k, j)] = magnitude;
                }
            }
        }
    }
    (out, scale)
}

/// A strided image of random values in `[low, high)`, the padding columns set to PAD.
fn dct_image(seed: u64, low: f32, high: f32) -> Vec<f32> {
    let mut rng = Lcg::from_state(seed);
    (0..DCT_HEIGHT * DCT_STRIDE)
        .map(|i| {
            if i % DCT_STRIDE < DCT_WIDTH {
                rng.range(low, high)
            } else {
                PAD
            }
        })
        .collect()
}

/// Runs CUDAkernel2DCT or CUDAkernel2IDCT as the sample does (blocks of 8 x 4 x 2 threads,
/// each block 32 x 16 pixels: four 8x8 blocks by two) and checks it against `l B r` per 8x8
/// block. Tolerance: two passes of 8-term float sums with float constants, a few units of
/// 2^-24 of the sum of the terms' magnitudes each; 1e-5 of it allowed.
fn dct_kernel(
    rt: &Runtime,
    entry: &str,
    input: &[f32],
    (l, r): (&[[f64; 8]; 8], &[[f64; 8]; 8]),
) -> Result<(), String> {
    let dev = device(rt)?;
    let mut d_src = upload(&dev, input, "src")?;
    let mut d_dst = upload(&dev, &vec![PAD; input.len()], "dst")?;
    let kernel = Kernel::from_source(DCT8X8, entry);
    let grid = ((DCT_WIDTH / 32) as u32, (DCT_HEIGHT / 16) as u32);
    // SAFETY: block (x, y) reads and writes pixels (16 y + 0..16, 32 x + 0..32), inside the
    // 64 x 32 image of rows of ImgStride = 80 floats.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(grid, (8, 4, 2)),
            &mut [&mut d_dst, &mut d_src, &mut Scalar(DCT_STRIDE as i32)],
        )
    }?;
    let got = download(&d_dst, "dst")?;
    let (want, scale) = blockwise(input, l, r);
    let pixels = |v: &[f32]| -> Vec<f32> {
        v.chunks(DCT_STRIDE)
            .flat_map(|row| row[..DCT_WIDTH].to_vec())
            .collect()
    };
    let inside = |v: &[f64]| -> Vec<f64> {
        v.chunks(DCT_STRIDE)
            .flat_map(|row| row[..DCT_WIDTH].to_vec())
            .collect()
    };
    check_scaled(entry, &pixels(&got), &inside(&want), &inside(&scale), 1e-5)?;
    ensure!(
        got.chunks(DCT_STRIDE)
            .all(|row| row[DCT_WIDTH..].iter().all(|&v| v == PAD)),
        "{entry} wrote into the padding past the image's width"
    );
    Ok(())
}

/// The forward DCT of pixel values (0 to 255, as the sample's image): C B C^T per block.
fn dct8x8_forward(rt: &Runtime) -> Result<(), String> {
    let (c, ct) = dct_matrix();
    dct_kernel(rt, "CUDAkernel2DCT", &dct_image(80, 0.0, 255.0), (&c, &ct))
}

/// The inverse DCT of coefficients (-256 to 256): C^T X C per block.
fn dct8x8_inverse(rt: &Runtime) -> Result<(), String> {
    let (c, ct) = dct_matrix();
    dct_kernel(
        rt,
        "CUDAkernel2IDCT",
        &dct_image(81, -256.0, 256.0),
        (&ct, &c),
    )
}

/// The JPEG quantization matrix `Q` of dct8x8_kernel_quantization.cuh.
const DCT_Q: [i16; 64] = [
    32, 33, 51, 81, 66, 39, 34, 17, 33, 36, 48, 47, 28, 23, 12, 12, 51, 48, 47, 28, 23, 12, 12, 12,
    81, 47, 28, 23, 12, 12, 12, 12, 66, 28, 23, 12, 12, 12, 12, 12, 39, 23, 12, 12, 12, 12, 12, 12,
    34, 12, 12, 12, 12, 12, 12, 12, 17, 12, 12, 12, 12, 12, 12, 12,
];

/// Quantizes a strided plane in place with one of the quantization kernels, as the sample
/// launches them (a block of 8 x 8 threads per 8x8 block), and returns the result.
fn quantize<T: Element>(dev: &Device, entry: &str, plane: &[T]) -> Result<Vec<T>, String> {
    let mut d_plane = upload(dev, plane, "plane")?;
    let kernel = Kernel::from_source(DCT8X8, entry);
    let grid = ((DCT_WIDTH / 8) as u32, (DCT_HEIGHT / 8) as u32);
    // SAFETY: thread (tx, ty) of block (bx, by) updates element (8 by + ty, 8 bx + tx), inside
    // the 64 x 32 plane of rows of Stride = 80.
    unsafe {
        launch(
            dev,
            &kernel,
            LaunchConfig::new(grid, (8, 8)),
            &mut [&mut d_plane, &mut Scalar(DCT_STRIDE as i32)],
        )
    }?;
    download(&d_plane, "plane")
}

/// The quantization matrix entry of element `i` of a strided plane.
fn q_of(i: usize) -> i16 {
    DCT_Q[(i / DCT_STRIDE % 8) * 8 + i % DCT_STRIDE % 8]
}

/// CUDAkernelQuantizationFloat: roundf(c / q) * q, one correctly rounded division, a rounding
/// to an integer and an exact product: compared bit for bit (the padding stays as it was).
fn dct8x8_quantization_float(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let plane = dct_image(82, -1024.0, 1024.0);
    let got = quantize(&dev, "CUDAkernelQuantizationFloat", &plane)?;
    let want: Vec<f32> = plane
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            if i % DCT_STRIDE < DCT_WIDTH {
                let q = f32::from(q_of(i));
                (c / q).round() * q
            } else {
                c
            }
        })
        .collect();
    check_bits("quantized plane", &got, &want)
}

/// CUDAkernelQuantizationShort on coefficients of -2048 to 2047: rounded to the nearest
/// multiple of q, halves away from zero, in short arithmetic (no value here overflows it).
fn dct8x8_quantization_short(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let mut rng = Lcg::from_state(83);
    let plane: Vec<i16> = (0..DCT_HEIGHT * DCT_STRIDE)
        .map(|_| rng.below32(4096) as i16 - 2048)
        .collect();
    let got = quantize(&dev, "CUDAkernelQuantizationShort", &plane)?;
    let want: Vec<i16> = plane
        .iter()
        .enumerate()
        .map(|(i, &c)| {
            if i % DCT_STRIDE >= DCT_WIDTH {
                return c;
            }
            let q = q_of(i);
            let quantized = if c < 0 {
                -((-c + (q >> 1)) / q)
            } else {
                (c + (q >> 1)) / q
            };
            quantized * q
        })
        .collect();
    check_equal("quantized plane", &got, &want)
}

// ---------------------------------------------------------------------------------------------
// FDTD3d
// ---------------------------------------------------------------------------------------------

/// RADIUS of FDTD3dGPUKernel.cuh, and the sample's block (k_blockDimX x k_blockDimMaxY).
const RADIUS: usize = 4;
const FDTD_BLOCK: (u32, u32) = (32, 16);

/// fdtdReference: `steps` steps of the radius-4 star stencil on the inner dimx x dimy x dimz
/// points of a volume with a halo of RADIUS, the halo copied through; in f64 from the same
/// float inputs and coefficients.
fn fdtd_reference(
    input: &[f32],
    coeff: &[f32],
    dims: (usize, usize, usize),
    steps: usize,
) -> Vec<f64> {
    let (dimx, dimy, dimz) = dims;
    let (sy, sz) = (dimx + 2 * RADIUS, (dimx + 2 * RADIUS) * (dimy + 2 * RADIUS));
    let mut src: Vec<f64> = input.iter().map(|&v| f64::from(v)).collect();
    for _ in 0..steps {
        let mut dst = src.clone();
        for z in RADIUS..dimz + RADIUS {
            for y in RADIUS..dimy + RADIUS {
                for x in RADIUS..dimx + RADIUS {
                    let i = z * sz + y * sy + x;
                    let mut value = src[i] * f64::from(coeff[0]);
                    for r in 1..=RADIUS {
                        let ring = src[i + r]
                            + src[i - r]
                            + src[i + r * sy]
                            + src[i - r * sy]
                            + src[i + r * sz]
                            + src[i - r * sz];
                        value += f64::from(coeff[r]) * ring;
                    }
                    dst[i] = value;
                }
            }
        }
        src = dst;
    }
    src
}

/// FiniteDifferencesKernel as the sample runs it: the stencil coefficients (all 0.1) in
/// `__constant__` memory, both buffers holding the input (so the halo is there), the inner
/// data 28 floats into each buffer (the sample's padding, which aligns it), 5 time steps with
/// the buffers swapped. The volume is 48 x 24 x 8: the x and y extents are no multiple of the
/// 32 x 16 block, so the last blocks have threads that read only halo data or nothing and
/// write nothing (their halo loads wrap into the next row or plane, which exist).
///
/// Tolerance: every input and coefficient is positive, so each of the 26 float operations a
/// point costs per step adds at most 2^-24 of the value; over 5 steps under 1e-5 of it.
fn fdtd3d(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let dims = (48usize, 24usize, 8usize);
    let (dimx, dimy, dimz) = dims;
    let volume = (dimx + 2 * RADIUS) * (dimy + 2 * RADIUS) * (dimz + 2 * RADIUS);
    let padding = 128 / size_of::<f32>() - RADIUS;
    let steps = 5;
    let mut rng = Lcg::from_state(90);
    let input: Vec<f32> = (0..volume).map(|_| rng.range(0.0, 1.0)).collect();
    let coeff = [0.1f32; RADIUS + 1];
    let mut padded = vec![0.0f32; padding];
    padded.extend(&input);
    let buffers = [
        upload(&dev, &padded, "bufferIn")?,
        upload(&dev, &padded, "bufferOut")?,
    ];
    let kernel = Kernel::from_source(FDTD3D, "FiniteDifferencesKernel");
    dev.copy_to_symbol(&kernel, "stencil", &coeff[..])
        .map_err(fail("stencil"))?;
    let grid = (
        (dimx as u32).div_ceil(FDTD_BLOCK.0),
        (dimy as u32).div_ceil(FDTD_BLOCK.1),
    );
    let (mut src, mut dst) = (0, 1);
    for _ in 0..steps {
        let mut output = buffers[dst].slice(s![padding..]).map_err(fail("slice"))?;
        let mut input = buffers[src].slice(s![padding..]).map_err(fail("slice"))?;
        // Threads read the volume's points from the first inner plane minus RADIUS to
        // the last plus RADIUS (the halo planes); a thread past the inner extent in x or y reads
        // at most a block's width or height further, which wraps into the next row or plane,
        // still inside the volume of dimz + 2 RADIUS planes; only inner points are written.
        // SAFETY: every access stays within those bounds.
        unsafe {
            launch(
                &dev,
                &kernel,
                LaunchConfig::new(grid, FDTD_BLOCK),
                &mut [
                    &mut output,
                    &mut input,
                    &mut Scalar(dimx as i32),
                    &mut Scalar(dimy as i32),
                    &mut Scalar(dimz as i32),
                ],
            )
        }?;
        std::mem::swap(&mut src, &mut dst);
    }
    let got = download(&buffers[src], "output")?[padding..].to_vec();
    let want = fdtd_reference(&input, &coeff, dims, steps);
    let scale: Vec<f64> = want.iter().map(|w| w.abs()).collect();
    check_scaled("volume after 5 steps", &got, &want, &scale, 1e-5)
}

// ---------------------------------------------------------------------------------------------
// clock
// ---------------------------------------------------------------------------------------------

/// timedReduction as the sample launches it (256 threads, 2 x 256 floats of dynamic shared
/// memory; 8 blocks, the sample's 64): every block finds the minimum of the same 512 inputs
/// (exact), and records clock() at its start and end; the times are only checked to be
/// plausible, the end no earlier than the start.
fn clock_timed_reduction(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (blocks, threads) = (8usize, 256usize);
    let mut rng = Lcg::from_state(100);
    let input: Vec<f32> = (0..2 * threads).map(|_| rng.range(-100.0, 100.0)).collect();
    let mut d_input = upload(&dev, &input, "input")?;
    let mut d_output = upload(&dev, &vec![f32::NAN; blocks], "output")?;
    // clock_t: a long, 64 bits.
    let mut d_timer = zeros::<i64>(&dev, 2 * blocks, "timer")?;
    let kernel = Kernel::from_source(CLOCK, "timedReduction");
    // SAFETY: thread tid reads input[tid] and input[tid + 256] (512 inputs), block b writes
    // output[b] and timer[b], timer[b + 8] (16 timers); shared indices stay below 512, the
    // 2048 bytes given.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(blocks as u32, threads as u32)
                .with_shared_bytes(2 * threads * size_of::<f32>()),
            &mut [&mut d_input, &mut d_output, &mut d_timer],
        )
    }?;
    let min = input.iter().copied().fold(f32::INFINITY, f32::min);
    check_equal(
        "block minima",
        &download(&d_output, "output")?,
        &vec![min; blocks],
    )?;
    let timer = download(&d_timer, "timer")?;
    for b in 0..blocks {
        ensure!(
            timer[blocks + b] >= timer[b],
            "block {b}: clock() went back, from {} to {}",
            timer[b],
            timer[blocks + b]
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// simpleAssert, simplePrintf, simpleCooperativeGroups
// ---------------------------------------------------------------------------------------------

/// simpleAssert's launch (2 blocks of 32) with N = 64: no thread fails its assert, and the
/// launch succeeds.
fn simple_assert_passes(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::from_source(ASSERT, "testKernel");
    // SAFETY: the kernel touches no memory.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(2, 32),
            &mut [&mut Scalar(64i32)],
        )
    }
}

/// The sample's own launch, N = 60: threads 60 to 63 fail `assert(gtid < N)`, and the launch
/// fails with an error that names the assertion (the sample expects cudaErrorAssert).
fn simple_assert_fails(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::from_source(ASSERT, "testKernel");
    let config = LaunchConfig::new(2, 32);
    // SAFETY: the kernel touches no memory.
    let failed = unsafe { dev.launch(&kernel, config, &mut [&mut Scalar(60i32)]) };
    ensure!(
        matches!(&failed, Err(Error::KernelFault { message, block, thread, .. })
            if message.contains("gtid < N") && block[0] == 1 && thread[0] >= 28),
        "the failed assert: {failed:?}"
    );
    Ok(())
}

/// simplePrintf's launch: a 2 x 2 grid of 2 x 2 x 2 blocks printing their indices and val.
fn simple_printf(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::from_source(PRINTF, "testKernel");
    // SAFETY: the kernel only prints.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new((2, 2), (2, 2, 2)),
            &mut [&mut Scalar(10i32)],
        )
    }
}

/// cgkernel with the sample's launch: one block of 64 threads and 64 ints of dynamic shared
/// memory for the reductions over the block and over its 16-thread tiles (passed to one
/// helper as thread_group). The kernel only prints its sums; the launch must succeed.
fn simple_cooperative_groups(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let kernel = Kernel::from_source(GROUPS, "cgkernel");
    // SAFETY: the reductions index the workspace below the block's 64 threads, the 64 ints
    // of dynamic shared memory given.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(1, 64).with_shared_bytes(64 * size_of::<i32>()),
            &mut [],
        )
    }
}

// ---------------------------------------------------------------------------------------------
// systemWideAtomics
// ---------------------------------------------------------------------------------------------

/// atomicKernel on managed memory (the sample's choice where the device cannot reach pageable
/// memory), with the sample's block of 256 and 8 blocks (its 64); every thread applies each of
/// the ten system-scope atomics LOOP_NUM = 50 times. The host's concurrent CPU atomics of the
/// sample are left out, so every result but the exchange and compare-and-swap ones is
/// deterministic:
/// - the sum, maximum, minimum, AND and the Inc/Dec wraps (each a function of how many times
///   it was applied);
/// - XOR: each thread applies its id an even number of times, so 0xff stays;
/// - OR: `1 << tid` for tid >= 32 shifts an int by its width or more, which C++ leaves
///   undefined (a GPU's shift gives 0, x86's takes the count modulo 32, the sample's own host
///   check does the same shift). Threads 0 to 31 set every bit, and an OR can only add bits,
///   so whatever the larger shifts give the word ends as all ones, which is checked.
fn system_wide_atomics(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (blocks, threads) = (8usize, 256usize);
    let loops = 50usize;
    let n = blocks * threads;
    let mut atom = dev.managed_array::<i32>(&[10]).map_err(fail("managed"))?;
    let mut init = ndarray::Array1::<i32>::zeros(10);
    init[7] = 0xff;
    init[9] = 0xff;
    atom.write(&init).map_err(fail("write"))?;
    let kernel = Kernel::from_source(SYSTEM_ATOMICS, "atomicKernel");
    // SAFETY: every thread touches atom_arr[0..10] only, the array's 10 ints.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(blocks as u32, threads as u32),
            &mut [&mut atom],
        )
    }?;
    let got: Vec<i32> = atom.read().map_err(fail("read"))?.iter().copied().collect();
    let ops = n * loops;
    let inc = (0..ops).fold(0u32, |old, _| if old >= 17 { 0 } else { old + 1 });
    let dec = (0..ops).fold(
        0u32,
        |old, _| {
            if old == 0 || old > 137 { 137 } else { old - 1 }
        },
    );
    let and = (0..n as u32).fold(0xffu32, |acc, tid| acc & (2 * tid + 7));
    let exact = [
        (0, "atomicAdd_system", (10 * ops) as i32),
        (2, "atomicMax_system", n as i32 - 1),
        (3, "atomicMin_system", 0),
        (4, "atomicInc_system", inc as i32),
        (5, "atomicDec_system", dec as i32),
        (7, "atomicAnd_system", and as i32),
        (8, "atomicOr_system", -1),
        (9, "atomicXor_system", 0xff),
    ];
    for (i, op, want) in exact {
        ensure!(
            got[i] == want,
            "{op}: atom_arr[{i}] = {}, expected {want}",
            got[i]
        );
    }
    // The exchange ends on whichever thread came last; the compare-and-swap chain
    // (tid - 1 -> tid) on a thread id reached from 0 in steps of one.
    for (i, op) in [(1, "atomicExch_system"), (6, "atomicCAS_system")] {
        ensure!(
            (0..n as i32).contains(&got[i]),
            "{op}: atom_arr[{i}] = {} is no thread id below {n}",
            got[i]
        );
    }
    Ok(())
}
