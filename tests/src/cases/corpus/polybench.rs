//! PolyBench/GPU's CUDA kernels (github.com/cavazos-lab/PolyBench-ACC, `CUDA/`), kept verbatim
//! in `tests/corpus/polybench/` with small problem sizes, launched as the benchmarks' host code
//! launches them (the same thread blocks, grid computations and sequences of launches) and
//! checked against serial Rust references written for these tests.

use super::support::{
    Lcg, blocks_for, check_close, device, download, matmul, upload, widen, zeros,
};
use crate::{Case, Requires, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{KernelArg, Runtime};

const MM2: &str = include_str!("../../../corpus/polybench/2mm.cu");
const BICG: &str = include_str!("../../../corpus/polybench/bicg.cu");
const CORRELATION: &str = include_str!("../../../corpus/polybench/correlation.cu");
const CONVOLUTION_2D: &str = include_str!("../../../corpus/polybench/2DConvolution.cu");
const CONVOLUTION_3D: &str = include_str!("../../../corpus/polybench/3DConvolution.cu");
const FDTD_2D: &str = include_str!("../../../corpus/polybench/fdtd2d.cu");
const GRAMSCHMIDT: &str = include_str!("../../../corpus/polybench/gramschmidt.cu");

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    crate::cases!["corpus::polybench", Requires::Kernels;
        mm2,
        bicg,
        correlation,
        convolution_2d,
        convolution_3d,
        fdtd_2d,
        gramschmidt,
    ]
}

// ---------------------------------------------------------------------------------------------
// 2mm
// ---------------------------------------------------------------------------------------------

/// PolyBench's 2mm, D := alpha * A * B * C + beta * D: `mm2_kernel1` (tmp = alpha * A * B) then
/// `mm2_kernel2` (D = beta * D + tmp * C), on 32 x 8 blocks (DIM_THREAD_BLOCK_X/Y of 2mm.cuh) and
/// the grids `mm2Cuda` computes.
fn mm2(rt: &Runtime) -> Result<(), String> {
    const BLOCK: (u32, u32) = (32, 8);
    let dev = device(rt)?;
    let (ni, nj, nk, nl) = (64usize, 64usize, 64usize, 64usize); // NI, NJ, NK, NL of 2mm.cu
    let (alpha, beta) = (32412.0f32, 2123.0f32); // init_array's
    let mut rng = Lcg::new(11);
    let a = rng.units(ni * nk);
    let b = rng.units(nk * nj);
    let c = rng.units(nj * nl);
    let d = rng.units(ni * nl);
    let mut d_tmp = zeros::<f32>(&dev, ni * nj, "tmp")?;
    let mut d_a = upload(&dev, &a, "A")?;
    let mut d_b = upload(&dev, &b, "B")?;
    let mut d_c = upload(&dev, &c, "C")?;
    let mut d_d = upload(&dev, &d, "D")?;
    let grid1 = (blocks_for(nj, BLOCK.0), blocks_for(ni, BLOCK.1));
    let grid2 = (blocks_for(nl, BLOCK.0), blocks_for(ni, BLOCK.1));
    let sizes = [ni, nj, nk, nl].map(|n| n as i32);
    let kernel1 = Kernel::from_source(MM2, "mm2_kernel1");
    let kernel2 = Kernel::from_source(MM2, "mm2_kernel2");
    // SAFETY: threads outside NI x NJ do nothing; the others stay inside tmp (NI x NJ),
    // A (NI x NK) and B (NK x NJ).
    unsafe {
        dev.launch(
            &kernel1,
            LaunchConfig::new(grid1, BLOCK),
            &mut [
                &mut Scalar(sizes[0]),
                &mut Scalar(sizes[1]),
                &mut Scalar(sizes[2]),
                &mut Scalar(sizes[3]),
                &mut Scalar(alpha),
                &mut Scalar(beta),
                &mut d_tmp,
                &mut d_a,
                &mut d_b,
            ],
        )
    }
    .map_err(fail("mm2_kernel1"))?;
    // SAFETY: threads outside NI x NL do nothing; the others stay inside tmp, C (NJ x NL) and
    // D (NI x NL).
    unsafe {
        dev.launch(
            &kernel2,
            LaunchConfig::new(grid2, BLOCK),
            &mut [
                &mut Scalar(sizes[0]),
                &mut Scalar(sizes[1]),
                &mut Scalar(sizes[2]),
                &mut Scalar(sizes[3]),
                &mut Scalar(alpha),
                &mut Scalar(beta),
                &mut d_tmp,
                &mut d_c,
                &mut d_d,
            ],
        )
    }
    .map_err(fail("mm2_kernel2"))?;
    let alpha_a: Vec<f64> = a.iter().map(|&v| f64::from(alpha) * f64::from(v)).collect();
    let tmp = matmul(&alpha_a, &widen(&b), ni, nk, nj);
    let tc = matmul(&tmp, &widen(&c), ni, nj, nl);
    let want_d: Vec<f64> = d
        .iter()
        .zip(&tc)
        .map(|(&d, &tc)| f64::from(beta) * f64::from(d) + tc)
        .collect();
    // Sums of 64 positive f32 terms against f64: relative errors below 64 * 2^-24.
    check_close("tmp", &download(&d_tmp, "tmp")?, &tmp, 1e-4, 0.0)?;
    check_close("D", &download(&d_d, "D")?, &want_d, 1e-4, 0.0)
}

// ---------------------------------------------------------------------------------------------
// bicg
// ---------------------------------------------------------------------------------------------

/// PolyBench's bicg (the BiCG sub-kernel): `bicg_kernel1` (s = A^T r) then `bicg_kernel2`
/// (q = A p), on 256 x 1 blocks and the grids `bicgCuda` computes.
fn bicg(rt: &Runtime) -> Result<(), String> {
    const BLOCK: (u32, u32) = (256, 1);
    let dev = device(rt)?;
    let (nx, ny) = (320usize, 256usize); // NX, NY of bicg.cu
    let mut rng = Lcg::new(12);
    let a = rng.units(nx * ny);
    let r = rng.units(nx);
    let p = rng.units(ny);
    let mut d_a = upload(&dev, &a, "A")?;
    let mut d_r = upload(&dev, &r, "r")?;
    let mut d_s = zeros::<f32>(&dev, ny, "s")?;
    let mut d_p = upload(&dev, &p, "p")?;
    let mut d_q = zeros::<f32>(&dev, nx, "q")?;
    let (nx_i, ny_i) = (nx as i32, ny as i32);
    let kernel1 = Kernel::from_source(BICG, "bicg_kernel1");
    let kernel2 = Kernel::from_source(BICG, "bicg_kernel2");
    // SAFETY: threads with j >= NY do nothing; the others read column j of A (NX x NY) and r
    // (NX), and write s[j].
    unsafe {
        dev.launch(
            &kernel1,
            LaunchConfig::new((blocks_for(ny, BLOCK.0), 1), BLOCK),
            &mut [
                &mut Scalar(nx_i),
                &mut Scalar(ny_i),
                &mut d_a,
                &mut d_r,
                &mut d_s,
            ],
        )
    }
    .map_err(fail("bicg_kernel1"))?;
    // SAFETY: threads with i >= NX do nothing; the others read row i of A and p (NY), and
    // write q[i].
    unsafe {
        dev.launch(
            &kernel2,
            LaunchConfig::new((blocks_for(nx, BLOCK.0), 1), BLOCK),
            &mut [
                &mut Scalar(nx_i),
                &mut Scalar(ny_i),
                &mut d_a,
                &mut d_p,
                &mut d_q,
            ],
        )
    }
    .map_err(fail("bicg_kernel2"))?;
    let a64 = widen(&a);
    let want_s = matmul(&widen(&r), &a64, 1, nx, ny);
    let want_q = matmul(&a64, &widen(&p), nx, ny, 1);
    // Sums of a few hundred positive f32 terms against f64.
    check_close("s", &download(&d_s, "s")?, &want_s, 1e-4, 0.0)?;
    check_close("q", &download(&d_q, "q")?, &want_q, 1e-4, 0.0)
}

// ---------------------------------------------------------------------------------------------
// correlation
// ---------------------------------------------------------------------------------------------

/// correlation.cu's FLOAT_N, `3214212.01f`, which is this float.
const FLOAT_N: f32 = 3_214_212.0;
/// correlation.cu's EPS.
const EPS: f32 = 0.005;

/// PolyBench's correlation: `mean_kernel`, `std_kernel` (sqrt, and 1 for columns whose standard
/// deviation is at most EPS), `reduce_kernel` (centring and scaling) and `corr_kernel` (the
/// correlation matrix), with the blocks of correlation.cuh and the grids `correlationCuda`
/// computes (which truncate M / 256: M must be a multiple of 256).
fn correlation(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (m, n) = (256usize, 16usize); // M, N of correlation.cu
    let mut rng = Lcg::new(13);
    // Columns j % 3 == 0 are small (their deviation falls below EPS and is replaced by 1); the
    // others are large.
    let data: Vec<f32> = (0..n * m)
        .map(|k| {
            let j = k % m;
            if j.is_multiple_of(3) {
                0.5 * rng.unit()
            } else {
                100.0 * rng.unit() + j as f32
            }
        })
        .collect();
    let mut d_data = upload(&dev, &data, "data")?;
    let mut d_mean = zeros::<f32>(&dev, m, "mean")?;
    let mut d_std = zeros::<f32>(&dev, m, "std")?;
    let mut d_symmat = zeros::<f32>(&dev, m * m, "symmat")?;
    // correlationCuda's grids: (size_t)(ceil((float)(M)) / ((float)256)), and (M / 32, N / 8).
    let grid_1d = ((m as f32).ceil() / 256.0) as u32;
    let grid3 = (
        ((m as f32).ceil() / 32.0) as u32,
        ((n as f32).ceil() / 8.0) as u32,
    );
    let (m_i, n_i) = (m as i32, n as i32);
    let launch = |name: &str, config: LaunchConfig, args: &mut [&mut dyn KernelArg]| {
        let kernel = Kernel::from_source(CORRELATION, name);
        // SAFETY: threads outside M columns (and N rows) do nothing; the others stay inside
        // data (N x M), mean and std (M) and symmat (M x M).
        unsafe { dev.launch(&kernel, config, args) }.map_err(fail(name))
    };
    let line = LaunchConfig::new((grid_1d, 1), (256, 1));
    launch(
        "mean_kernel",
        line,
        &mut [&mut Scalar(m_i), &mut Scalar(n_i), &mut d_mean, &mut d_data],
    )?;
    let mut args: [&mut dyn KernelArg; 5] = [
        &mut Scalar(m_i),
        &mut Scalar(n_i),
        &mut d_mean,
        &mut d_std,
        &mut d_data,
    ];
    launch("std_kernel", line, &mut args)?;
    launch(
        "reduce_kernel",
        LaunchConfig::new(grid3, (32, 8)),
        &mut args,
    )?;
    launch(
        "corr_kernel",
        line,
        &mut [
            &mut Scalar(m_i),
            &mut Scalar(n_i),
            &mut d_symmat,
            &mut d_data,
        ],
    )?;
    let want = correlation_reference(&data, m, n);
    // f32 sums of 16 terms and a float sqrt against f64: relative errors ~1e-6.
    check_close("mean", &download(&d_mean, "mean")?, &want.mean, 1e-5, 0.0)?;
    check_close("std", &download(&d_std, "std")?, &want.std, 1e-5, 0.0)?;
    check_close("data", &download(&d_data, "data")?, &want.data, 1e-5, 1e-12)?;
    // The host writes symmat[M-1][M-1] = 1 after the kernels; corr_kernel leaves it alone.
    let mut symmat = download(&d_symmat, "symmat")?;
    ensure!(
        symmat[m * m - 1] == 0.0,
        "corr_kernel wrote symmat[M-1][M-1]"
    );
    symmat[m * m - 1] = 1.0;
    check_close("symmat", &symmat, &want.symmat, 1e-4, 1e-12)
}

/// The outputs of the correlation benchmark.
struct Correlation {
    mean: Vec<f64>,
    std: Vec<f64>,
    data: Vec<f64>,
    symmat: Vec<f64>,
}

/// Means and deviations (divided by FLOAT_N, as PolyBench does), the centred and scaled data,
/// and the matrix of its column products (1 on the diagonal).
fn correlation_reference(data: &[f32], m: usize, n: usize) -> Correlation {
    let float_n = f64::from(FLOAT_N);
    let col = |j: usize| data.iter().skip(j).step_by(m).map(|&v| f64::from(v));
    let mean: Vec<f64> = (0..m).map(|j| col(j).sum::<f64>() / float_n).collect();
    let std: Vec<f64> = (0..m)
        .map(|j| {
            let s = (col(j).map(|v| (v - mean[j]).powi(2)).sum::<f64>() / float_n).sqrt();
            if s <= f64::from(EPS) { 1.0 } else { s }
        })
        .collect();
    let scale = f64::from(FLOAT_N.sqrt());
    let centred: Vec<f64> = (0..n * m)
        .map(|k| (f64::from(data[k]) - mean[k % m]) / (scale * std[k % m]))
        .collect();
    let symmat = (0..m * m)
        .map(|k| {
            let (j1, j2) = (k / m, k % m);
            if j1 == j2 {
                1.0
            } else {
                (0..n)
                    .map(|i| centred[i * m + j1] * centred[i * m + j2])
                    .sum()
            }
        })
        .collect();
    Correlation {
        mean,
        std,
        data: centred,
        symmat,
    }
}

// ---------------------------------------------------------------------------------------------
// 2DConvolution
// ---------------------------------------------------------------------------------------------

/// PolyBench's 2DConvolution: `convolution2D_kernel`, a 3 x 3 stencil over the interior, on
/// 32 x 8 blocks and the grid `convolution2DCuda` computes.
fn convolution_2d(rt: &Runtime) -> Result<(), String> {
    const BLOCK: (u32, u32) = (32, 8);
    // The kernel's coefficients by row offset (-1, 0, +1) and column offset (-1, 0, +1):
    // c11 c21 c31 / c12 c22 c32 / c13 c23 c33.
    const C: [[f32; 3]; 3] = [[0.2, 0.5, -0.8], [-0.3, 0.6, -0.9], [0.4, 0.7, 0.10]];
    let dev = device(rt)?;
    let (ni, nj) = (64usize, 64usize); // NI, NJ of 2DConvolution.cu
    let a = Lcg::new(14).units(ni * nj);
    let mut d_a = upload(&dev, &a, "A")?;
    let mut d_b = zeros::<f32>(&dev, ni * nj, "B")?;
    let kernel = Kernel::from_source(CONVOLUTION_2D, "convolution2D_kernel");
    // SAFETY: only threads of interior points (0 < i < NI-1, 0 < j < NJ-1) work, reading their
    // 3 x 3 neighbourhood of A and writing B at the point, both NI x NJ.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new((blocks_for(ni, BLOCK.0), blocks_for(nj, BLOCK.1)), BLOCK),
            &mut [
                &mut Scalar(ni as i32),
                &mut Scalar(nj as i32),
                &mut d_a,
                &mut d_b,
            ],
        )
    }
    .map_err(fail("convolution2D_kernel"))?;
    let want: Vec<f64> = (0..ni * nj)
        .map(|k| {
            let (i, j) = (k / nj, k % nj);
            if i == 0 || j == 0 || i == ni - 1 || j == nj - 1 {
                return 0.0; // not written
            }
            let mut sum = 0.0;
            for (di, row) in C.iter().enumerate() {
                for (dj, &c) in row.iter().enumerate() {
                    sum += f64::from(c) * f64::from(a[(i + di - 1) * nj + j + dj - 1]);
                }
            }
            sum
        })
        .collect();
    // Nine f32 products summed (signs mixed) against f64: errors ~1e-7 of the terms' size.
    check_close("B", &download(&d_b, "B")?, &want, 1e-5, 1e-5)
}

// ---------------------------------------------------------------------------------------------
// 3DConvolution
// ---------------------------------------------------------------------------------------------

/// PolyBench's 3DConvolution: `convolution3D_kernel` launched once per interior plane i, as
/// `convolution3DCuda` does, on 32 x 8 blocks over (k, j).
fn convolution_3d(rt: &Runtime) -> Result<(), String> {
    const BLOCK: (u32, u32) = (32, 8);
    let dev = device(rt)?;
    let (ni, nj, nk) = (16usize, 32usize, 32usize); // NI, NJ, NK of 3DConvolution.cu
    let a = Lcg::new(15).units(ni * nj * nk);
    let mut d_a = upload(&dev, &a, "A")?;
    let mut d_b = zeros::<f32>(&dev, ni * nj * nk, "B")?;
    let kernel = Kernel::from_source(CONVOLUTION_3D, "convolution3D_kernel");
    let grid = (blocks_for(nk, BLOCK.0), blocks_for(nj, BLOCK.1));
    for i in 1..ni - 1 {
        // SAFETY: only threads of interior points work, reading A within one point of theirs
        // and writing B at the point, both NI x NJ x NK.
        unsafe {
            dev.launch(
                &kernel,
                LaunchConfig::new(grid, BLOCK),
                &mut [
                    &mut Scalar(ni as i32),
                    &mut Scalar(nj as i32),
                    &mut Scalar(nk as i32),
                    &mut d_a,
                    &mut d_b,
                    &mut Scalar(i as i32),
                ],
            )
        }
        .map_err(fail("convolution3D_kernel"))?;
    }
    let want = convolution_3d_reference(&a, ni, nj, nk);
    // Fifteen f32 products of sums up to ~50 against f64.
    check_close("B", &download(&d_b, "B")?, &want, 1e-5, 1e-4)
}

/// PolyBench's 3-d stencil (conv3D), term by term: each coefficient with the offsets (i, j, k)
/// of the point of A it multiplies; only interior points are written.
fn convolution_3d_reference(a: &[f32], ni: usize, nj: usize, nk: usize) -> Vec<f64> {
    let (c11, c12, c13) = (2.0, -3.0, 4.0);
    let (c21, c22, c23) = (5.0, 6.0, 7.0);
    let (c31, c32, c33) = (-8.0, -9.0, 10.0);
    let terms: [(f64, [usize; 3]); 15] = [
        (c11, [0, 0, 0]),
        (c13, [2, 0, 0]),
        (c21, [0, 0, 0]),
        (c23, [2, 0, 0]),
        (c31, [0, 0, 0]),
        (c33, [2, 0, 0]),
        (c12, [1, 0, 1]),
        (c22, [1, 1, 1]),
        (c32, [1, 2, 1]),
        (c11, [0, 0, 2]),
        (c13, [2, 0, 2]),
        (c21, [0, 1, 2]),
        (c23, [2, 1, 2]),
        (c31, [0, 2, 2]),
        (c33, [2, 2, 2]),
    ];
    (0..ni * nj * nk)
        .map(|p| {
            let (i, j, k) = (p / (nj * nk), p / nk % nj, p % nk);
            if i == 0 || j == 0 || k == 0 || i == ni - 1 || j == nj - 1 || k == nk - 1 {
                return 0.0;
            }
            terms
                .iter()
                .map(|&(c, [di, dj, dk])| {
                    let q = (i + di - 1) * nj * nk + (j + dj - 1) * nk + (k + dk - 1);
                    c * f64::from(a[q])
                })
                .sum()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// fdtd-2d
// ---------------------------------------------------------------------------------------------

/// PolyBench's fdtd-2d: for each of TMAX time steps, `fdtd_step1_kernel` (ey, with the source
/// `_fict_[t]` on row 0), `fdtd_step2_kernel` (ex) and `fdtd_step3_kernel` (hz), on 32 x 8
/// blocks and the grid `fdtdCuda` computes.
fn fdtd_2d(rt: &Runtime) -> Result<(), String> {
    const BLOCK: (u32, u32) = (32, 8);
    let dev = device(rt)?;
    let (tmax, nx, ny) = (8usize, 64usize, 48usize); // TMAX, NX, NY of fdtd2d.cu
    let mut rng = Lcg::new(16);
    let fict: Vec<f32> = (0..tmax).map(|t| t as f32).collect(); // init_arrays': _fict_[i] = i
    let ex = rng.units(nx * ny);
    let ey = rng.units(nx * ny);
    let hz = rng.units(nx * ny);
    let mut d_fict = upload(&dev, &fict, "_fict_")?;
    let mut d_ex = upload(&dev, &ex, "ex")?;
    let mut d_ey = upload(&dev, &ey, "ey")?;
    let mut d_hz = upload(&dev, &hz, "hz")?;
    let config = LaunchConfig::new((blocks_for(ny, BLOCK.0), blocks_for(nx, BLOCK.1)), BLOCK);
    let step1 = Kernel::from_source(FDTD_2D, "fdtd_step1_kernel");
    let step2 = Kernel::from_source(FDTD_2D, "fdtd_step2_kernel");
    let step3 = Kernel::from_source(FDTD_2D, "fdtd_step3_kernel");
    let (nx_i, ny_i) = (nx as i32, ny as i32);
    for t in 0..tmax as i32 {
        // SAFETY: threads outside NX x NY do nothing; the others read and write their point and
        // the one before it (i - 1) in arrays of NX x NY, and _fict_[t] with t < TMAX.
        unsafe {
            dev.launch(
                &step1,
                config,
                &mut [
                    &mut Scalar(nx_i),
                    &mut Scalar(ny_i),
                    &mut d_fict,
                    &mut d_ex,
                    &mut d_ey,
                    &mut d_hz,
                    &mut Scalar(t),
                ],
            )
        }
        .map_err(fail("fdtd_step1_kernel"))?;
        let mut fields: [&mut dyn KernelArg; 6] = [
            &mut Scalar(nx_i),
            &mut Scalar(ny_i),
            &mut d_ex,
            &mut d_ey,
            &mut d_hz,
            &mut Scalar(t),
        ];
        // SAFETY: as above, with the point before (j - 1) in its row.
        unsafe { dev.launch(&step2, config, &mut fields) }.map_err(fail("fdtd_step2_kernel"))?;
        // SAFETY: only points with i < NX-1 and j < NY-1 work, reading the next point in their
        // row and column.
        unsafe { dev.launch(&step3, config, &mut fields) }.map_err(fail("fdtd_step3_kernel"))?;
    }
    let (want_ex, want_ey, want_hz) = fdtd_reference(&fict, &ex, &ey, &hz, nx, ny);
    // Eight steps of f32 differences against f64: errors ~1e-6 of values of order 1 to 10.
    check_close("ex", &download(&d_ex, "ex")?, &want_ex, 1e-4, 1e-4)?;
    check_close("ey", &download(&d_ey, "ey")?, &want_ey, 1e-4, 1e-4)?;
    check_close("hz", &download(&d_hz, "hz")?, &want_hz, 1e-4, 1e-4)
}

/// The 2-d finite-difference time-domain steps (Yee's scheme) of PolyBench's fdtd-2d.
fn fdtd_reference(
    fict: &[f32],
    ex: &[f32],
    ey: &[f32],
    hz: &[f32],
    nx: usize,
    ny: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (half, c) = (0.5, f64::from(0.7f32));
    let (mut ex, mut ey, mut hz) = (widen(ex), widen(ey), widen(hz));
    for &source in fict {
        ey[..ny].fill(f64::from(source));
        for p in ny..nx * ny {
            ey[p] -= half * (hz[p] - hz[p - ny]);
        }
        for p in 0..nx * ny {
            if p % ny > 0 {
                ex[p] -= half * (hz[p] - hz[p - 1]);
            }
        }
        for p in 0..nx * ny {
            let (i, j) = (p / ny, p % ny);
            if i < nx - 1 && j < ny - 1 {
                hz[p] -= c * (ex[p + 1] - ex[p] + ey[p + ny] - ey[p]);
            }
        }
    }
    (ex, ey, hz)
}

// ---------------------------------------------------------------------------------------------
// gramschmidt
// ---------------------------------------------------------------------------------------------

/// PolyBench's gramschmidt (modified Gram-Schmidt QR): for each column k, `gramschmidt_kernel1`
/// (one thread: the norm, `r[k][k] = sqrt`), `gramschmidt_kernel2` (q's column k) and
/// `gramschmidt_kernel3` (r's row k and the update of the later columns of a): 3 NJ launches
/// on 256 x 1 blocks and the grids `gramschmidtCuda` computes.
fn gramschmidt(rt: &Runtime) -> Result<(), String> {
    const BLOCK: (u32, u32) = (256, 1);
    let dev = device(rt)?;
    let (ni, nj) = (48usize, 32usize); // NI, NJ of gramschmidt.cu
    let mut rng = Lcg::new(17);
    // Well conditioned: a boosted diagonal plus noise.
    let a: Vec<f32> = (0..ni * nj)
        .map(|p| rng.unit() - 0.5 + if p / nj == p % nj { 3.0 } else { 0.0 })
        .collect();
    let mut d_a = upload(&dev, &a, "A")?;
    let mut d_r = zeros::<f32>(&dev, nj * nj, "R")?;
    let mut d_q = zeros::<f32>(&dev, ni * nj, "Q")?;
    let kernels = [
        "gramschmidt_kernel1",
        "gramschmidt_kernel2",
        "gramschmidt_kernel3",
    ]
    .map(|name| Kernel::from_source(GRAMSCHMIDT, name));
    let grids: [(u32, u32); 3] = [
        (1, 1),
        (blocks_for(nj, BLOCK.0), 1),
        (blocks_for(nj, BLOCK.0), 1),
    ];
    for k in 0..nj as i32 {
        for (kernel, grid) in kernels.iter().zip(grids) {
            // SAFETY: thread 0 (kernel 1), threads i < NI (kernel 2) and threads k < j < NJ
            // (kernel 3) work, inside a and q (NI x NJ) and r (NJ x NJ).
            unsafe {
                dev.launch(
                    kernel,
                    LaunchConfig::new(grid, BLOCK),
                    &mut [
                        &mut Scalar(ni as i32),
                        &mut Scalar(nj as i32),
                        &mut d_a,
                        &mut d_r,
                        &mut d_q,
                        &mut Scalar(k),
                    ],
                )
            }
            .map_err(fail("gramschmidt"))?;
        }
    }
    // Modified Gram-Schmidt in f64.
    let mut want_a = widen(&a);
    let mut want_r = vec![0.0; nj * nj];
    let mut want_q = vec![0.0; ni * nj];
    for k in 0..nj {
        let norm: f64 = (0..ni).map(|i| want_a[i * nj + k].powi(2)).sum();
        want_r[k * nj + k] = norm.sqrt();
        for i in 0..ni {
            want_q[i * nj + k] = want_a[i * nj + k] / want_r[k * nj + k];
        }
        for j in k + 1..nj {
            want_r[k * nj + j] = (0..ni)
                .map(|i| want_q[i * nj + k] * want_a[i * nj + j])
                .sum();
            for i in 0..ni {
                want_a[i * nj + j] -= want_q[i * nj + k] * want_r[k * nj + j];
            }
        }
    }
    // f32 Gram-Schmidt of a well-conditioned 48 x 32 matrix against f64: errors ~1e-6.
    check_close("A", &download(&d_a, "A")?, &want_a, 1e-4, 1e-4)?;
    check_close("R", &download(&d_r, "R")?, &want_r, 1e-4, 1e-4)?;
    check_close("Q", &download(&d_q, "Q")?, &want_q, 1e-4, 1e-4)
}
