//! HeCBench's CUDA kernels (github.com/zjin-lcf/HeCBench, `src/*-cuda/`), kept verbatim in
//! `tests/corpus/hecbench/`, launched as the benchmarks' host code launches them (the same block
//! shapes, grids, shared memory sizes, symbols and sequences of launches, on smaller problems;
//! timing repetitions run once) and checked against serial Rust references written for these
//! tests.

use super::support::{Lcg, check_close, check_equal, device, download, upload, zeros};
use crate::{Case, Requires, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{Module, Runtime};
use std::f64::consts::PI;

const HAVERSINE: &str = include_str!("../../../corpus/hecbench/haversine.cu");
const ATOMIC_REDUCTION: &str = include_str!("../../../corpus/hecbench/atomicReduction.cu");
const SHUFFLE: &str = include_str!("../../../corpus/hecbench/shuffle.cu");
const ENTROPY: &str = include_str!("../../../corpus/hecbench/entropy.cu");
const CONVOLUTION_1D: &str = include_str!("../../../corpus/hecbench/convolution1D.cu");
const FHD: &str = include_str!("../../../corpus/hecbench/fhd.cu");

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    crate::cases!["corpus::hecbench", Requires::Kernels;
        haversine,
        atomic_reduction,
        shuffle,
        entropy,
        convolution_1d,
        fhd,
    ]
}

// ---------------------------------------------------------------------------------------------
// haversine
// ---------------------------------------------------------------------------------------------

/// HeCBench's haversine: `compute_haversine_distance` over `double4` pairs of (latitude,
/// longitude) in degrees, on blocks of 256 as `distance_device` launches it.
fn haversine(rt: &Runtime) -> Result<(), String> {
    const EARTH_RADIUS_KM: f64 = 6371.0;
    let dev = device(rt)?;
    // Original: 2^21 cities, each against 6 reference cities.
    let (cities, references) = (500usize, 6usize);
    let mut rng = Lcg::new(21);
    let mut place = || {
        [
            180.0 * f64::from(rng.unit()) - 90.0,
            360.0 * f64::from(rng.unit()) - 180.0,
        ]
    };
    let reference_cities: Vec<[f64; 2]> = (0..references).map(|_| place()).collect();
    let city_list: Vec<[f64; 2]> = (0..cities).map(|_| place()).collect();
    let points: Vec<[f64; 4]> = reference_cities
        .iter()
        .flat_map(|b| city_list.iter().map(move |a| [a[0], a[1], b[0], b[1]]))
        .collect();
    let n = points.len();
    let mut d_points = upload(&dev, &points, "locations")?;
    let mut d_distance = zeros::<f64>(&dev, n, "distances")?;
    let kernel = Kernel::from_source(HAVERSINE, "compute_haversine_distance");
    // SAFETY: threads with i >= n do nothing; the others read p[i] and write distance[i], both
    // of n elements.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(n.div_ceil(256) as u32, 256),
            &mut [&mut d_points, &mut d_distance, &mut Scalar(n as i32)],
        )
    }
    .map_err(fail("compute_haversine_distance"))?;
    // DEGREE_TO_RADIAN expands to `M_PI / 180.0`: `x * DEGREE_TO_RADIAN` is (x * pi) / 180.
    let radians = |degrees: f64| degrees * PI / 180.0;
    let want: Vec<f64> = points
        .iter()
        .map(|p| {
            let (ay, ax, by, bx) = (radians(p[0]), radians(p[1]), radians(p[2]), radians(p[3]));
            let (x, y) = ((bx - ax) / 2.0, (by - ay) / 2.0);
            let v = y.sin().powi(2) + x.sin().powi(2) * ay.cos() * by.cos();
            2.0 * EARTH_RADIUS_KM * v.sqrt().asin()
        })
        .collect();
    // Double sin, cos, asin and sqrt within a few ulps of the host's: errors far below 1 mm.
    check_close(
        "distance",
        &download(&d_distance, "distances")?,
        &want,
        1e-12,
        1e-6,
    )
}

// ---------------------------------------------------------------------------------------------
// atomicReduction
// ---------------------------------------------------------------------------------------------

/// HeCBench's atomicReduction: five grid-stride sums (1, 2, 4, 8 or 16 elements per step) that
/// each end in one `atomicAdd` per thread, for blocks of 128, 256, 512 and 1024 threads and
/// min(ceil(n / block), 2048) / elements blocks, the result reset before each launch.
fn atomic_reduction(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 16_384usize; // original: 52428800 (a multiple of 16 x 1024, as here)
    let mut rng = Lcg::new(22);
    let input: Vec<i32> = (0..n).map(|_| rng.below(7) as i32 - 3).collect();
    let checksum: i32 = input.iter().sum();
    let mut d_in = upload(&dev, &input, "in")?;
    let mut d_out = zeros::<i32>(&dev, 1, "out")?;
    let kernels = [
        ("atomic_reduction", 1),
        ("atomic_reduction_v2", 2),
        ("atomic_reduction_v4", 4),
        ("atomic_reduction_v8", 8),
        ("atomic_reduction_v16", 16),
    ]
    .map(|(name, per_step)| (name, per_step, Kernel::from_source(ATOMIC_REDUCTION, name)));
    for block_size in [128usize, 256, 512, 1024] {
        let blocks = n.div_ceil(block_size).min(2048);
        for (name, per_step, kernel) in &kernels {
            d_out.fill(0).map_err(fail("out"))?;
            // SAFETY: every thread reads in[i .. i + per_step] for i < n, a multiple of
            // per_step, and n is a multiple of 16; all add to the one element of out.
            unsafe {
                dev.launch(
                    kernel,
                    LaunchConfig::new((blocks / per_step) as u32, block_size as u32),
                    &mut [&mut d_in, &mut d_out, &mut Scalar(n as i32)],
                )
            }
            .map_err(fail(name))?;
            let sum = download(&d_out, "out")?[0];
            ensure!(
                sum == checksum,
                "{name} with blocks of {block_size}: {sum}, want {checksum}"
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// shuffle
// ---------------------------------------------------------------------------------------------

/// HeCBench's shuffle: the `__shfl_xor` butterflies and `__shfl` broadcasts over sub-groups of 8,
/// 16 and 32 lanes (one block of BUF_SIZE = 256 threads), then `transpose_shfl`, which reverses
/// each block of 8, 16 or 32 elements through a shuffle, in the order of main.
fn shuffle(rt: &Runtime) -> Result<(), String> {
    const BUF_SIZE: usize = 256;
    const PATTERN: u32 = 0xDEAD_BEEF;
    let dev = device(rt)?;
    let warp = dev.info().map_err(fail("info"))?.warp_size as usize;
    let mut d_out = zeros::<i32>(&dev, BUF_SIZE, "out")?;
    let one_block = LaunchConfig::new(1, BUF_SIZE as u32);
    for group in [8usize, 16, 32] {
        let name = format!("bcast_shfl_xor_sg{group}");
        let kernel = Kernel::from_source(SHUFFLE, name.as_str());
        // SAFETY: one block of BUF_SIZE threads, each writing its own element of out.
        unsafe { dev.launch(&kernel, one_block, &mut [&mut d_out]) }.map_err(fail(&name))?;
        let want = xor_butterfly(BUF_SIZE, group);
        check_equal(&name, &download(&d_out, "out")?, &want)?;
    }
    for group in [8usize, 16, 32] {
        let name = format!("bcast_shfl_sg{group}");
        let kernel = Kernel::from_source(SHUFFLE, name.as_str());
        // SAFETY: as above.
        unsafe {
            dev.launch(
                &kernel,
                one_block,
                &mut [&mut Scalar(PATTERN as i32), &mut d_out],
            )
        }
        .map_err(fail(&name))?;
        // Each thread gets the value of its warp's lane 0: PATTERN where that lane's
        // threadIdx.x is a multiple of the group size (which lane 0 always is).
        let want: Vec<i32> = (0..BUF_SIZE)
            .map(|t| {
                let lane0 = t - t % warp;
                if lane0.is_multiple_of(group) {
                    PATTERN as i32
                } else {
                    0
                }
            })
            .collect();
        check_equal(&name, &download(&d_out, "out")?, &want)?;
    }
    let total = 4096usize; // original: 1 << 27
    let matrix: Vec<f32> = (0..total).map(|i| i as f32 * 10.0).collect(); // main's input
    let mut d_matrix = upload(&dev, &matrix, "matrix")?;
    let mut d_transposed = zeros::<f32>(&dev, total, "transpose")?;
    let kernel = Kernel::from_source(SHUFFLE, "transpose_shfl");
    for group in [8usize, 16, 32] {
        // SAFETY: total / group blocks of group threads, each reading and writing its own
        // element of arrays of total elements.
        unsafe {
            dev.launch(
                &kernel,
                LaunchConfig::new((total / group) as u32, group as u32),
                &mut [&mut d_transposed, &mut d_matrix],
            )
        }
        .map_err(fail("transpose_shfl"))?;
        let want: Vec<f32> = (0..total)
            .map(|i| matrix[i - i % group + group - 1 - i % group])
            .collect();
        // A shuffle moves values without arithmetic: they must be equal.
        check_equal(
            &format!("transpose_shfl by {group}"),
            &download(&d_transposed, "transpose")?,
            &want,
        )?;
    }
    Ok(())
}

/// The butterfly of the `bcast_shfl_xor_sg*` kernels: each thread starts with
/// `threadIdx.x & (group - 1)` and, for mask = 1, 2, 4, ... below group - 1, adds the value of
/// the lane `lane ^ mask` (in its warp: the masks stay below 32).
fn xor_butterfly(threads: usize, group: usize) -> Vec<i32> {
    let mut values: Vec<i32> = (0..threads).map(|t| (t & (group - 1)) as i32).collect();
    let mut mask = 1;
    while mask < group - 1 {
        values = (0..threads).map(|t| values[t] + values[t ^ mask]).collect();
        mask *= 2;
    }
    values
}

// ---------------------------------------------------------------------------------------------
// entropy
// ---------------------------------------------------------------------------------------------

/// HeCBench's entropy: the entropy of the 16 values (0..16) in each pixel's 5 x 5 window, first
/// by `entropy` (a local count array, `__fdividef` and `__log2f`), then by the template
/// `entropy_opt<16, 16>` (counts in a static shared array sized by its template arguments, and a
/// table of `i * log2(i)`), on 16 x 16 blocks as main launches them.
fn entropy(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (width, height) = (40usize, 24usize); // original: from the command line; not multiples of 16
    let mut rng = Lcg::new(23);
    // The top half repeats 0..16 along rows shifted by 4 per row, so that full windows hold all
    // 16 values (finite entropy for `entropy`); the bottom half is random.
    let input: Vec<u8> = (0..width * height)
        .map(|p| {
            let (y, x) = (p / width, p % width);
            if y < height / 2 {
                ((x + 4 * y) % 16) as u8
            } else {
                rng.below(16) as u8
            }
        })
        .collect();
    let mut d_input = upload(&dev, &input, "input")?;
    let mut d_output = zeros::<f32>(&dev, width * height, "output")?;
    let config = LaunchConfig::new(
        (width.div_ceil(16) as u32, height.div_ceil(16) as u32),
        (16, 16),
    );
    let (h, w) = (height as i32, width as i32);
    let baseline = Kernel::from_source(ENTROPY, "entropy");
    // SAFETY: threads outside width x height return; the others read the window's pixels that
    // are inside the image and write their own pixel.
    unsafe {
        dev.launch(
            &baseline,
            config,
            &mut [&mut d_output, &mut d_input, &mut Scalar(h), &mut Scalar(w)],
        )
    }
    .map_err(fail("entropy"))?;
    let counts: Vec<([u32; 16], u32)> = (0..width * height)
        .map(|p| window_counts(&input, width, height, p))
        .collect();
    // -sum p log2 p in f32 as the kernel computes it: an empty bin gives 0 * log2(0) = NaN, as
    // on the GPU (__log2f(0) = -inf). The approximate intrinsics stay within 1e-5 here.
    let want: Vec<f64> = counts
        .iter()
        .map(|(count, total)| {
            let total = (*total).max(1) as f32;
            let s = count.iter().fold(0.0f32, |s, &c| {
                let p = c as f32 / total;
                s - p * p.log2()
            });
            f64::from(s)
        })
        .collect();
    check_close("entropy", &download(&d_output, "output")?, &want, 0.0, 1e-4)?;

    let log_table: Vec<f32> = (0..=25)
        .map(|i| {
            if i <= 1 {
                0.0
            } else {
                i as f32 * (i as f32).log2()
            }
        })
        .collect();
    let mut d_log_table = upload(&dev, &log_table, "log table")?;
    let optimised = Kernel::from_source(ENTROPY, "entropy_opt<16, 16>");
    // SAFETY: as above; counts index the 26-entry table with at most 25.
    unsafe {
        dev.launch(
            &optimised,
            config,
            &mut [
                &mut d_output,
                &mut d_input,
                &mut d_log_table,
                &mut Scalar(h),
                &mut Scalar(w),
            ],
        )
    }
    .map_err(fail("entropy_opt<16, 16>"))?;
    // log2(total) - sum c log2 c / total: the entropy, without NaNs for empty bins.
    let want: Vec<f64> = counts
        .iter()
        .map(|(count, total)| {
            let sum: f64 = count
                .iter()
                .map(|&c| f64::from(log_table[c as usize]))
                .sum();
            f64::from(*total).log2() - sum / f64::from(*total)
        })
        .collect();
    check_close(
        "entropy_opt",
        &download(&d_output, "output")?,
        &want,
        0.0,
        1e-4,
    )
}

/// The counts of each value in pixel `p`'s 5 x 5 window (cut at the image's edges), and their
/// total.
fn window_counts(input: &[u8], width: usize, height: usize, p: usize) -> ([u32; 16], u32) {
    let (y, x) = (p / width, p % width);
    let mut count = [0u32; 16];
    let mut total = 0;
    for yy in y.saturating_sub(2)..(y + 3).min(height) {
        for xx in x.saturating_sub(2)..(x + 3).min(width) {
            count[usize::from(input[yy * width + xx])] += 1;
            total += 1;
        }
    }
    (count, total)
}

// ---------------------------------------------------------------------------------------------
// convolution1D
// ---------------------------------------------------------------------------------------------

/// The element types `conv1D<T>` is run with.
trait Real: Element + PartialEq {
    /// The C++ type, as the instantiations spell it.
    const NAME: &'static str;
    fn from_f64(value: f64) -> Self;
}

impl Real for f64 {
    const NAME: &'static str = "double";
    fn from_f64(value: f64) -> f64 {
        value
    }
}

impl Real for f32 {
    const NAME: &'static str = "float";
    fn from_f64(value: f64) -> f32 {
        value as f32
    }
}

/// HeCBench's convolution1D: the template kernels `conv1d`, `conv1d_tiled` and
/// `conv1d_tiled_caching` (the tiled ones with `extern __shared__` tiles of (block + 9) and
/// block elements), with the mask in the `__constant__` variable template `mask<T>`, for blocks
/// of 64 to 1024 threads, as `conv1D<T>` runs them. Main runs mask widths 3, 5, 7, 9 for double,
/// float and int16_t; here widths 3 and 9 for double and float.
fn convolution_1d(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let names = ["conv1d", "conv1d_tiled", "conv1d_tiled_caching"];
    let instantiations: Vec<String> = ["double", "float"]
        .iter()
        .flat_map(|ty| names.iter().map(move |k| format!("{k}<{ty}>")))
        .collect();
    // One module: the three kernels of a type share its `mask<T>`.
    let module = Module::from_source(CONVOLUTION_1D).with_name_expressions(instantiations);
    let input_width = 1024; // main rounds the width up to a multiple of MAX_BLOCK_SIZE = 1024
    for mask_width in [3usize, 9] {
        conv1d_rounds::<f64>(&dev, &module, input_width, mask_width)?;
        conv1d_rounds::<f32>(&dev, &module, input_width, mask_width)?;
    }
    Ok(())
}

/// `conv1D<T>` of main: the mask to `mask<T>`, then the three kernels, each for blocks of 64, 128,
/// ..., 1024 threads, each result checked.
fn conv1d_rounds<T: Real>(
    dev: &Device,
    module: &Module,
    width: usize,
    mask_width: usize,
) -> Result<(), String> {
    const MAX_MASK_WIDTH: usize = 10;
    let ty = T::NAME;
    let mut rng = Lcg::new(24 + mask_width as u64);
    let a: Vec<f64> = (0..width).map(|_| f64::from(rng.below(256))).collect();
    let mask: Vec<f64> = (0..mask_width).map(|j| 0.5 + 0.25 * j as f64).collect();
    let to_t = |v: &[f64]| v.iter().map(|&x| T::from_f64(x)).collect::<Vec<T>>();
    dev.copy_to_symbol(module, &format!("mask<{ty}>"), &to_t(&mask)[..])
        .map_err(fail("mask"))?;
    let mut d_a = upload(dev, &to_t(&a), "a")?;
    let mut d_b = zeros::<T>(dev, width, "b")?;
    let half = mask_width / 2;
    let want: Vec<T> = to_t(
        &(0..width)
            .map(|i| {
                mask.iter()
                    .enumerate()
                    .filter_map(|(j, m)| {
                        let x = (i + j).checked_sub(half).and_then(|k| a.get(k))?;
                        Some(x * m)
                    })
                    .sum::<f64>()
            })
            .collect::<Vec<f64>>(),
    );
    let item = std::mem::size_of::<T>();
    for (name, shared_extra) in [
        ("conv1d", None),
        ("conv1d_tiled", Some(MAX_MASK_WIDTH - 1)),
        ("conv1d_tiled_caching", Some(0)),
    ] {
        let kernel = module.kernel(format!("{name}<{ty}>"));
        for block in [64usize, 128, 256, 512, 1024] {
            let config = LaunchConfig::new((width / block) as u32, block as u32);
            let config = match shared_extra {
                Some(extra) => config.with_shared_bytes((block + extra) * item),
                None => config,
            };
            d_b.fill(T::from_f64(0.0)).map_err(fail("b"))?;
            // SAFETY: width / block blocks of block threads, one per element; the tiles hold
            // block + 2 * (mask_width / 2) <= block + 9 elements of the shared bytes given, and
            // input reads outside 0..width are skipped or replaced by zeros.
            unsafe {
                dev.launch(
                    &kernel,
                    config,
                    &mut [
                        &mut d_a,
                        &mut d_b,
                        &mut Scalar(width as i32),
                        &mut Scalar(mask_width as i32),
                    ],
                )
            }
            .map_err(fail(name))?;
            // Integers times multiples of 1/4, summed: every value is exact in float and double.
            check_equal(
                &format!("{name}<{ty}> (mask width {mask_width}, blocks of {block})"),
                &download(&d_b, "b")?,
                &want,
            )?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// fhd
// ---------------------------------------------------------------------------------------------

/// fhd's `kdata`, the element of the `__constant__` array `k`.
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct KData {
    x: f32,
    y: f32,
    z: f32,
}

/// HeCBench's fhd (the F^H d of MRI reconstruction): the voxels go to the `__constant__` array
/// `k` in chunks of CHUNK_S = 4096 (the last one partial), and `cmpfhd` (`__cosf`, `__sinf`)
/// accumulates each chunk, given `rmu + i * CHUNK_S` and `imu + i * CHUNK_S`, on blocks of 256.
fn fhd(rt: &Runtime) -> Result<(), String> {
    const CHUNK_S: usize = 4096;
    let dev = device(rt)?;
    // Original: ~100000 samples, 2097152 voxels; here two chunks, the second of 904 voxels.
    let (samples, voxels) = (512usize, 5000usize);
    let mut rng = Lcg::new(25);
    let mut near = |centre: f32| centre + if rng.below(2) == 1 { 0.1 } else { -0.1 };
    let x: Vec<f32> = (0..samples).map(|_| near(0.3)).collect();
    let y: Vec<f32> = (0..samples).map(|_| near(0.2)).collect();
    let z: Vec<f32> = (0..samples).map(|_| near(0.1)).collect();
    let k: Vec<KData> = (0..voxels)
        .map(|_| KData {
            x: near(0.1),
            y: near(0.2),
            z: near(0.3),
        })
        .collect();
    let rmu: Vec<f32> = (0..voxels).map(|_| rng.unit() - 0.5).collect();
    let imu: Vec<f32> = (0..voxels).map(|_| rng.unit() - 0.5).collect();
    let start: Vec<f32> = (0..samples).map(|i| i as f32 / samples as f32).collect();
    let d_rmu = upload(&dev, &rmu, "rmu")?;
    let d_imu = upload(&dev, &imu, "imu")?;
    let mut d_rfhd = upload(&dev, &start, "rfhd")?;
    let mut d_ifhd = upload(&dev, &start, "ifhd")?;
    let mut d_x = upload(&dev, &x, "x")?;
    let mut d_y = upload(&dev, &y, "y")?;
    let mut d_z = upload(&dev, &z, "z")?;
    let kernel = Kernel::from_source(FHD, "cmpfhd");
    let config = LaunchConfig::new(samples.div_ceil(256) as u32, 256);
    let nchunks = voxels.div_ceil(CHUNK_S);
    for i in 0..nchunks {
        let first = i * CHUNK_S;
        let c = if i == nchunks - 1 {
            voxels - first
        } else {
            CHUNK_S
        };
        dev.copy_to_symbol(&kernel, "k", &k[first..first + c])
            .map_err(fail("k"))?;
        let mut rmu_chunk = d_rmu.slice(s![first..]).map_err(fail("rmu chunk"))?;
        let mut imu_chunk = d_imu.slice(s![first..]).map_err(fail("imu chunk"))?;
        // SAFETY: threads with n >= samples do nothing; the others read x, y, z, rfhd, ifhd at
        // n < samples, k[0..c] and the chunk's rmu and imu at m < c, all inside the arrays.
        unsafe {
            dev.launch(
                &kernel,
                config,
                &mut [
                    &mut rmu_chunk,
                    &mut imu_chunk,
                    &mut d_rfhd,
                    &mut d_ifhd,
                    &mut d_x,
                    &mut d_y,
                    &mut d_z,
                    &mut Scalar(samples as i32),
                    &mut Scalar(c as i32),
                ],
            )
        }
        .map_err(fail("cmpfhd"))?;
    }
    let (mut want_r, mut want_i) = (Vec::new(), Vec::new());
    for n in 0..samples {
        let (mut r, mut im) = (f64::from(start[n]), f64::from(start[n]));
        for (kd, (&rm, &imm)) in k.iter().zip(rmu.iter().zip(&imu)) {
            let phase = f64::from(kd.x) * f64::from(x[n])
                + f64::from(kd.y) * f64::from(y[n])
                + f64::from(kd.z) * f64::from(z[n]);
            let (s, c) = (2.0 * PI * phase).sin_cos();
            r += f64::from(rm) * c - f64::from(imm) * s;
            im += f64::from(imm) * c + f64::from(rm) * s;
        }
        want_r.push(r);
        want_i.push(im);
    }
    // 5000 terms of size <= 0.5 with __cosf/__sinf (absolute error ~5e-7) and f32 sums: the
    // error stays far below 1e-5 of the sum of the terms' sizes (~2500).
    let scale: f64 = rmu.iter().chain(&imu).map(|&v| f64::from(v.abs())).sum();
    check_close(
        "rfhd",
        &download(&d_rfhd, "rfhd")?,
        &want_r,
        0.0,
        1e-5 * scale,
    )?;
    check_close(
        "ifhd",
        &download(&d_ifhd, "ifhd")?,
        &want_i,
        0.0,
        1e-5 * scale,
    )
}
