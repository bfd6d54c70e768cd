//! More of PolyBench/GPU's CUDA kernels (github.com/cavazos-lab/PolyBench-ACC, `CUDA/`): 3mm,
//! atax, covariance, doitgen, gemver, jacobi-2d, syr2k, adi and lu. Their files in
//! `tests/corpus/polybench/` keep each benchmark's whole `.cuh`, which defines the problem size
//! only when none is defined before it, so the cases put small sizes in front of the verbatim
//! source (`sized`). Each is launched as the benchmark's host code launches it (the same thread
//! blocks, grid computations and sequences of launches, including the host code's slips, which
//! the references follow) and checked against a serial Rust reference written for these tests.

use super::support::{
    Lcg, blocks_for, check_close, device, download, launch, matmul, racing, upload, widen, zeros,
};
use crate::{Case, Requires, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{KernelArg, Module, Runtime};

const MM3: &str = include_str!("../../../corpus/polybench/3mm.cu");
const ATAX: &str = include_str!("../../../corpus/polybench/atax.cu");
const COVARIANCE: &str = include_str!("../../../corpus/polybench/covariance.cu");
const DOITGEN: &str = include_str!("../../../corpus/polybench/doitgen.cu");
const GEMVER: &str = include_str!("../../../corpus/polybench/gemver.cu");
const JACOBI_2D: &str = include_str!("../../../corpus/polybench/jacobi2D.cu");
const SYR2K: &str = include_str!("../../../corpus/polybench/syr2k.cu");
const ADI: &str = include_str!("../../../corpus/polybench/adi.cu");
const LU: &str = include_str!("../../../corpus/polybench/lu.cu");

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    crate::cases!["corpus::polybench_more", Requires::Kernels;
        mm3,
        atax,
        covariance,
        doitgen,
        gemver,
        jacobi_2d,
        syr2k,
        adi,
        lu,
    ]
}

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

/// The module of a benchmark's source with the size macros `defines` defined in front of it:
/// every `.cuh` defines its sizes only `if !defined(...)` of all of them (the host code's
/// `-DNI=...` way of choosing a size).
fn sized(code: &str, defines: &[(&str, usize)]) -> Module {
    let mut text: String = defines
        .iter()
        .map(|(name, value)| format!("#define {name} {value}\n"))
        .collect();
    text.push_str(code);
    Module::from_source(text)
}

/// The other rounding some host functions use: `(size_t)(ceil((float)n) / ((float)block))`,
/// which truncates the quotient.
fn blocks_truncated(n: usize, block: u32) -> u32 {
    ((n as f32).ceil() / block as f32) as u32
}

// ---------------------------------------------------------------------------------------------
// 3mm
// ---------------------------------------------------------------------------------------------

/// PolyBench's 3mm, G := (A B)(C D): `mm3_kernel1` (E = A B), `mm3_kernel2` (F = C D) and
/// `mm3_kernel3` (G = E F), on 32 x 8 blocks and the three grids `mm3Cuda` computes. All five
/// sizes differ, so a kernel that mixed two of them up would read or write the wrong elements.
fn mm3(rt: &Runtime) -> Result<(), String> {
    const BLOCK: (u32, u32) = (32, 8);
    let dev = device(rt)?;
    let (ni, nj, nk, nl, nm) = (64usize, 48usize, 40usize, 56usize, 32usize); // original: 512 each
    let module = sized(
        MM3,
        &[("NI", ni), ("NJ", nj), ("NK", nk), ("NL", nl), ("NM", nm)],
    );
    let mut rng = Lcg::new(21);
    let a = rng.units(ni * nk);
    let b = rng.units(nk * nj);
    let c = rng.units(nj * nm);
    let d = rng.units(nm * nl);
    let mut d_a = upload(&dev, &a, "A")?;
    let mut d_b = upload(&dev, &b, "B")?;
    let mut d_c = upload(&dev, &c, "C")?;
    let mut d_d = upload(&dev, &d, "D")?;
    let mut d_e = zeros::<f32>(&dev, ni * nj, "E")?;
    let mut d_f = zeros::<f32>(&dev, nj * nl, "F")?;
    let mut d_g = zeros::<f32>(&dev, ni * nl, "G")?;
    let sizes = [ni, nj, nk, nl, nm].map(|n| n as i32);
    let grid1 = (blocks_for(nj, BLOCK.0), blocks_for(ni, BLOCK.1));
    let grid2 = (blocks_for(nl, BLOCK.0), blocks_for(nj, BLOCK.1));
    let grid3 = (blocks_for(nl, BLOCK.0), blocks_for(ni, BLOCK.1));
    let steps: [(&str, (u32, u32)); 3] = [
        ("mm3_kernel1", grid1),
        ("mm3_kernel2", grid2),
        ("mm3_kernel3", grid3),
    ];
    for (name, grid) in steps {
        let kernel = module.kernel(name);
        let (x, y, z) = match name {
            "mm3_kernel1" => (&mut d_a, &mut d_b, &mut d_e),
            "mm3_kernel2" => (&mut d_c, &mut d_d, &mut d_f),
            _ => (&mut d_e, &mut d_f, &mut d_g),
        };
        // SAFETY: each grid covers its output (NI x NJ, NJ x NL, NI x NL) and threads outside
        // it do nothing; the others read a row of the first input and a column of the second,
        // with the inner sizes NK, NM and NJ their buffers have.
        unsafe {
            launch(
                &dev,
                &kernel,
                LaunchConfig::new(grid, BLOCK),
                &mut [
                    &mut Scalar(sizes[0]),
                    &mut Scalar(sizes[1]),
                    &mut Scalar(sizes[2]),
                    &mut Scalar(sizes[3]),
                    &mut Scalar(sizes[4]),
                    x,
                    y,
                    z,
                ],
            )
        }?;
    }
    let e = matmul(&widen(&a), &widen(&b), ni, nk, nj);
    let f = matmul(&widen(&c), &widen(&d), nj, nm, nl);
    let g = matmul(&e, &f, ni, nj, nl);
    // Sums of at most 48 positive f32 products against f64 (G's terms are themselves such
    // sums): relative errors of a few 1e-6.
    check_close("E", &download(&d_e, "E")?, &e, 1e-4, 0.0)?;
    check_close("F", &download(&d_f, "F")?, &f, 1e-4, 0.0)?;
    check_close("G", &download(&d_g, "G")?, &g, 1e-4, 0.0)
}

// ---------------------------------------------------------------------------------------------
// atax
// ---------------------------------------------------------------------------------------------

/// PolyBench's atax, y := A^T (A x): `atax_kernel1` (tmp = A x) then `atax_kernel2`
/// (y = A^T tmp), on the 32 x 8 blocks and the grids `ataxGpu` uses.
///
/// The kernels index by x only, so on those blocks the eight threads of each column of a block
/// (threadIdx.y = 0..7) all zero and then accumulate the same `tmp[i]` (and `y[j]`) with plain
/// `+=`: a data race in the original, whose result depends on how their loads and stores
/// interleave. That launch is made as the original makes it, and only what holds for every
/// interleaving is checked: with non-negative terms each stored value is a sum of some of the
/// eight threads' partial sums, so the final one is at least the last term and at most eight
/// times the full sum (under racecheck the launch fails with the race instead: `racing`). The
/// kernels' arithmetic is then checked exactly on 32 x 1 blocks, where each element has one
/// thread.
fn atax(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (nx, ny) = (96usize, 80usize); // original: 4096 x 4096
    let module = sized(ATAX, &[("NX", nx), ("NY", ny)]);
    let kernel1 = module.kernel("atax_kernel1");
    let kernel2 = module.kernel("atax_kernel2");
    let mut rng = Lcg::new(22);
    let a = rng.units(nx * ny);
    let x = rng.units(ny);
    let a64 = widen(&a);
    let want_tmp = matmul(&a64, &widen(&x), nx, ny, 1);
    let want_y = matmul(&want_tmp, &a64, 1, nx, ny);
    for block in [(32u32, 8u32), (32, 1)] {
        let mut d_a = upload(&dev, &a, "A")?;
        let mut d_x = upload(&dev, &x, "x")?;
        let mut d_y = zeros::<f32>(&dev, ny, "y")?;
        let mut d_tmp = zeros::<f32>(&dev, nx, "tmp")?;
        let (nx_i, ny_i) = (nx as i32, ny as i32);
        // SAFETY: threads with i >= NX do nothing; the others read row i of A (NX x NY) and x
        // (NY), and write tmp[i] (NX).
        let ran = unsafe {
            launch(
                &dev,
                &kernel1,
                LaunchConfig::new((blocks_for(nx, block.0), 1), block),
                &mut [
                    &mut Scalar(nx_i),
                    &mut Scalar(ny_i),
                    &mut d_a,
                    &mut d_x,
                    &mut d_tmp,
                ],
            )
        };
        if block.1 == 1 {
            ran?;
        } else if racing(rt, "atax_kernel1", ran)?.is_none() {
            continue;
        }
        // SAFETY: threads with j >= NY do nothing; the others read column j of A and tmp (NX),
        // and write y[j] (NY).
        unsafe {
            launch(
                &dev,
                &kernel2,
                LaunchConfig::new((blocks_for(ny, block.0), 1), block),
                &mut [
                    &mut Scalar(nx_i),
                    &mut Scalar(ny_i),
                    &mut d_a,
                    &mut d_y,
                    &mut d_tmp,
                ],
            )
        }?;
        let tmp = download(&d_tmp, "tmp")?;
        let y = download(&d_y, "y")?;
        if block.1 == 1 {
            // Sums of at most 96 positive f32 products against f64.
            check_close("tmp", &tmp, &want_tmp, 1e-4, 0.0)?;
            check_close("y", &y, &want_y, 1e-4, 0.0)?;
            continue;
        }
        // The bounds of the racing launch; y's terms use the tmp the first kernel left.
        for (i, &t) in tmp.iter().enumerate() {
            let last = a64[i * ny + ny - 1] * f64::from(x[ny - 1]);
            let t = f64::from(t);
            ensure!(
                t >= last * (1.0 - 1e-6) && t <= 8.0 * want_tmp[i] * (1.0 + 1e-3),
                "tmp[{i}] (8 threads racing): {t}, outside [{last}, 8 x {}]",
                want_tmp[i]
            );
        }
        let tmp64 = widen(&tmp);
        let full_y = matmul(&tmp64, &a64, 1, nx, ny);
        for (j, &v) in y.iter().enumerate() {
            let last = a64[(nx - 1) * ny + j] * tmp64[nx - 1];
            let v = f64::from(v);
            ensure!(
                v >= last * (1.0 - 1e-6) && v <= 8.0 * full_y[j] * (1.0 + 1e-3),
                "y[{j}] (8 threads racing): {v}, outside [{last}, 8 x {}]",
                full_y[j]
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// covariance
// ---------------------------------------------------------------------------------------------

/// covariance.cu's FLOAT_N, `3214212.01`, as `(DATA_TYPE)FLOAT_N` rounds it.
const COVARIANCE_FLOAT_N: f32 = 3_214_212.0;

/// PolyBench's covariance: `mean_kernel` (column means, divided by FLOAT_N as PolyBench does),
/// `reduce_kernel` (centring) and `covar_kernel` (the upper triangle of the covariance matrix,
/// mirrored), with the blocks of covariance.cuh and the grids `covarianceCuda` computes.
///
/// Those grids truncate M / 256 (M must be a multiple of 256), and the centring grid's y extent
/// is computed with the x block size, `N / 32` blocks of 8 rows: only the first N / 4 rows are
/// centred (the original's slip, deterministic), and the reference centres those rows only.
fn covariance(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (m, n) = (256usize, 64usize); // original: 2048 x 2048
    let module = sized(COVARIANCE, &[("M", m), ("N", n)]);
    let mut rng = Lcg::new(23);
    let data: Vec<f32> = (0..n * m).map(|_| rng.range(-1.0, 1.0)).collect();
    let mut d_data = upload(&dev, &data, "data")?;
    let mut d_mean = zeros::<f32>(&dev, m, "mean")?;
    let mut d_symmat = zeros::<f32>(&dev, m * m, "symmat")?;
    let grid1 = (blocks_truncated(m, 256), 1);
    let grid2 = (blocks_truncated(m, 32), blocks_truncated(n, 32));
    let grid3 = (blocks_truncated(m, 256), 1);
    let (m_i, n_i) = (m as i32, n as i32);
    // SAFETY: threads with j >= M do nothing; the others read column j of data (N x M) and
    // write mean[j] (M).
    unsafe {
        launch(
            &dev,
            &module.kernel("mean_kernel"),
            LaunchConfig::new(grid1, (256, 1)),
            &mut [&mut Scalar(m_i), &mut Scalar(n_i), &mut d_mean, &mut d_data],
        )
    }?;
    // SAFETY: threads outside N x M do nothing (the grid covers less); the others update their
    // element of data and read mean[j].
    unsafe {
        launch(
            &dev,
            &module.kernel("reduce_kernel"),
            LaunchConfig::new(grid2, (32, 8)),
            &mut [&mut Scalar(m_i), &mut Scalar(n_i), &mut d_mean, &mut d_data],
        )
    }?;
    // SAFETY: threads with j1 >= M do nothing; the others read columns j1 and j2 >= j1 of data
    // and write symmat[j1][j2] and symmat[j2][j1] (M x M).
    unsafe {
        launch(
            &dev,
            &module.kernel("covar_kernel"),
            LaunchConfig::new(grid3, (256, 1)),
            &mut [
                &mut Scalar(m_i),
                &mut Scalar(n_i),
                &mut d_symmat,
                &mut d_data,
            ],
        )
    }?;
    let centred_rows = grid2.1 as usize * 8;
    ensure!(
        centred_rows == n / 4,
        "the centring grid covers {centred_rows} rows"
    );
    let float_n = f64::from(COVARIANCE_FLOAT_N);
    let mean: Vec<f64> = (0..m)
        .map(|j| (0..n).map(|i| f64::from(data[i * m + j])).sum::<f64>() / float_n)
        .collect();
    let centred: Vec<f64> = (0..n * m)
        .map(|k| {
            let v = f64::from(data[k]);
            if k / m < centred_rows {
                v - mean[k % m]
            } else {
                v
            }
        })
        .collect();
    let symmat: Vec<f64> = (0..m * m)
        .map(|k| {
            let (j1, j2) = (k / m, k % m);
            (0..n)
                .map(|i| centred[i * m + j1] * centred[i * m + j2])
                .sum()
        })
        .collect();
    // The means are sums of 64 terms of mixed sign divided by FLOAT_N: absolute errors ~1e-13.
    check_close("mean", &download(&d_mean, "mean")?, &mean, 1e-5, 1e-12)?;
    check_close("data", &download(&d_data, "data")?, &centred, 1e-6, 1e-9)?;
    // Sums of 64 products of mixed sign, each below 1: absolute errors ~64 * 2^-24.
    check_close(
        "symmat",
        &download(&d_symmat, "symmat")?,
        &symmat,
        1e-5,
        1e-4,
    )
}

// ---------------------------------------------------------------------------------------------
// doitgen
// ---------------------------------------------------------------------------------------------

/// PolyBench's doitgen (a multi-resolution analysis kernel): for each r, `doitgen_kernel1`
/// (`sum[r][q][p] = Σ_s A[r][q][s] C4[s][p]`) then `doitgen_kernel2`
/// (`A[r][q][p] = sum[r][q][p]`),
/// 2 NR launches on 32 x 8 blocks and the grid `doitgenCuda` computes (whose y extent is
/// computed from NR: NR = NQ here, as in every PolyBench dataset).
fn doitgen(rt: &Runtime) -> Result<(), String> {
    const BLOCK: (u32, u32) = (32, 8);
    let dev = device(rt)?;
    let (nr, nq, np) = (24usize, 24usize, 40usize); // original: 128 each
    let module = sized(DOITGEN, &[("NR", nr), ("NQ", nq), ("NP", np)]);
    let kernel1 = module.kernel("doitgen_kernel1");
    let kernel2 = module.kernel("doitgen_kernel2");
    let mut rng = Lcg::new(24);
    let a = rng.units(nr * nq * np);
    let c4 = rng.units(np * np);
    let mut d_a = upload(&dev, &a, "A")?;
    let mut d_c4 = upload(&dev, &c4, "C4")?;
    let mut d_sum = zeros::<f32>(&dev, nr * nq * np, "sum")?;
    let grid = (blocks_for(np, BLOCK.0), blocks_for(nr, BLOCK.1));
    let sizes = [nr, nq, np].map(|n| n as i32);
    for r in 0..nr as i32 {
        for kernel in [&kernel1, &kernel2] {
            // SAFETY: threads with p >= np or q >= nq do nothing; the others read and write
            // element (r, q, p) of sum and A (NR x NQ x NP), row (r, q) of A and column p of C4
            // (NP x NP).
            unsafe {
                launch(
                    &dev,
                    kernel,
                    LaunchConfig::new(grid, BLOCK),
                    &mut [
                        &mut Scalar(sizes[0]),
                        &mut Scalar(sizes[1]),
                        &mut Scalar(sizes[2]),
                        &mut d_sum,
                        &mut d_a,
                        &mut d_c4,
                        &mut Scalar(r),
                    ],
                )
            }?;
        }
    }
    let want = matmul(&widen(&a), &widen(&c4), nr * nq, np, np);
    // Sums of 40 positive f32 products against f64.
    check_close("sum", &download(&d_sum, "sum")?, &want, 1e-4, 0.0)?;
    check_close("A", &download(&d_a, "A")?, &want, 1e-4, 0.0)
}

// ---------------------------------------------------------------------------------------------
// gemver
// ---------------------------------------------------------------------------------------------

/// PolyBench's gemver: `gemver_kernel1` (A += u1 v1^T + u2 v2^T), `gemver_kernel2`
/// (x += beta A^T y + z) and `gemver_kernel3` (w += alpha A x), with the blocks of gemver.cuh
/// and the grids `gemverCuda` computes (which truncate N / 256: N must be a multiple of 256),
/// alpha and beta as `init` sets them, x and w starting at zero as there.
fn gemver(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 256usize; // original: 4096
    let (alpha, beta) = (43532.0f32, 12313.0f32);
    let module = sized(GEMVER, &[("N", n)]);
    let mut rng = Lcg::new(25);
    let a = rng.units(n * n);
    let [u1, v1, u2, v2, y, z] = [(); 6].map(|()| rng.units(n));
    let mut d_a = upload(&dev, &a, "A")?;
    let mut d_u1 = upload(&dev, &u1, "u1")?;
    let mut d_v1 = upload(&dev, &v1, "v1")?;
    let mut d_u2 = upload(&dev, &u2, "u2")?;
    let mut d_v2 = upload(&dev, &v2, "v2")?;
    let mut d_y = upload(&dev, &y, "y")?;
    let mut d_z = upload(&dev, &z, "z")?;
    let mut d_x = zeros::<f32>(&dev, n, "x")?;
    let mut d_w = zeros::<f32>(&dev, n, "w")?;
    let n_i = n as i32;
    // SAFETY: the (N/32, N/8) grid of 32 x 8 blocks covers A (N x N) exactly; each thread
    // updates its element and reads u1[i], u2[i], v1[j], v2[j] (N each).
    unsafe {
        launch(
            &dev,
            &module.kernel("gemver_kernel1"),
            LaunchConfig::new((blocks_truncated(n, 32), blocks_truncated(n, 8)), (32, 8)),
            &mut [
                &mut Scalar(n_i),
                &mut Scalar(alpha),
                &mut Scalar(beta),
                &mut d_a,
                &mut d_v1,
                &mut d_v2,
                &mut d_u1,
                &mut d_u2,
            ],
        )
    }?;
    let line = LaunchConfig::new((blocks_truncated(n, 256), 1), (256, 1));
    // SAFETY: threads with i >= N do nothing; the others read column i of A and y, z (N), and
    // update x[i].
    unsafe {
        launch(
            &dev,
            &module.kernel("gemver_kernel2"),
            line,
            &mut [
                &mut Scalar(n_i),
                &mut Scalar(alpha),
                &mut Scalar(beta),
                &mut d_a,
                &mut d_x,
                &mut d_y,
                &mut d_z,
            ],
        )
    }?;
    // SAFETY: as above, with row i of A, x, and w[i].
    unsafe {
        launch(
            &dev,
            &module.kernel("gemver_kernel3"),
            line,
            &mut [
                &mut Scalar(n_i),
                &mut Scalar(alpha),
                &mut Scalar(beta),
                &mut d_a,
                &mut d_x,
                &mut d_w,
            ],
        )
    }?;
    let w64 = |v: &[f32]| widen(v);
    let (u1, v1, u2, v2, y, z) = (w64(&u1), w64(&v1), w64(&u2), w64(&v2), w64(&y), w64(&z));
    let want_a: Vec<f64> = (0..n * n)
        .map(|k| {
            let (i, j) = (k / n, k % n);
            f64::from(a[k]) + u1[i] * v1[j] + u2[i] * v2[j]
        })
        .collect();
    let (alpha, beta) = (f64::from(alpha), f64::from(beta));
    let want_x: Vec<f64> = (0..n)
        .map(|i| (0..n).map(|j| beta * want_a[j * n + i] * y[j]).sum::<f64>() + z[i])
        .collect();
    let want_w: Vec<f64> = (0..n)
        .map(|i| (0..n).map(|j| alpha * want_a[i * n + j] * want_x[j]).sum())
        .collect();
    // Positive terms throughout: x sums 256 of them, w 256 products with x's own error.
    check_close("A", &download(&d_a, "A")?, &want_a, 1e-6, 0.0)?;
    check_close("x", &download(&d_x, "x")?, &want_x, 1e-4, 0.0)?;
    check_close("w", &download(&d_w, "w")?, &want_w, 1e-4, 0.0)
}

// ---------------------------------------------------------------------------------------------
// jacobi-2d-imper
// ---------------------------------------------------------------------------------------------

/// PolyBench's jacobi-2d-imper: TSTEPS times `runJacobiCUDA_kernel1` (B = the 5-point average
/// of A over the interior) then `runJacobiCUDA_kernel2` (A = B over the interior), on 32 x 8
/// blocks and the grid `runJacobi2DCUDA` computes.
fn jacobi_2d(rt: &Runtime) -> Result<(), String> {
    const BLOCK: (u32, u32) = (32, 8);
    let dev = device(rt)?;
    let (n, tsteps) = (64usize, 20usize); // original: N = 1024, TSTEPS = 20
    let module = sized(JACOBI_2D, &[("TSTEPS", tsteps), ("N", n)]);
    let kernel1 = module.kernel("runJacobiCUDA_kernel1");
    let kernel2 = module.kernel("runJacobiCUDA_kernel2");
    let mut rng = Lcg::new(26);
    let a = rng.units(n * n);
    let b = rng.units(n * n);
    let mut d_a = upload(&dev, &a, "A")?;
    let mut d_b = upload(&dev, &b, "B")?;
    let config = LaunchConfig::new((blocks_for(n, BLOCK.0), blocks_for(n, BLOCK.1)), BLOCK);
    for _ in 0..tsteps {
        for kernel in [&kernel1, &kernel2] {
            // SAFETY: only interior points (0 < i, j < N-1) work, reading A within one point of
            // theirs and B at the point (or the reverse), both N x N.
            unsafe {
                launch(
                    &dev,
                    kernel,
                    config,
                    &mut [&mut Scalar(n as i32), &mut d_a, &mut d_b],
                )
            }?;
        }
    }
    let (mut want_a, mut want_b) = (widen(&a), widen(&b));
    let interior = |p: usize| {
        let (i, j) = (p / n, p % n);
        i >= 1 && i < n - 1 && j >= 1 && j < n - 1
    };
    for _ in 0..tsteps {
        for p in (0..n * n).filter(|&p| interior(p)) {
            let sum = want_a[p] + want_a[p - 1] + want_a[p + 1] + want_a[p + n] + want_a[p - n];
            want_b[p] = f64::from(0.2f32) * sum;
        }
        for p in (0..n * n).filter(|&p| interior(p)) {
            want_a[p] = want_b[p];
        }
    }
    // Averages of values in [0, 1) (0.2f is not 0.2: the reference uses the float): errors
    // stay near the last step's rounding.
    check_close("A", &download(&d_a, "A")?, &want_a, 1e-5, 1e-6)?;
    check_close("B", &download(&d_b, "B")?, &want_b, 1e-5, 1e-6)
}

// ---------------------------------------------------------------------------------------------
// syr2k
// ---------------------------------------------------------------------------------------------

/// PolyBench's syr2k, C := alpha A B^T + alpha B A^T + beta C: `syr2k_kernel`, on 32 x 8 blocks
/// and the grid `syr2kCuda` computes, with alpha and beta as `init_arrays` sets them. The kernel
/// uses the compile-time NI and NJ rather than its parameters (as the original does), so the
/// parameters are given values that would be wrong bounds.
fn syr2k(rt: &Runtime) -> Result<(), String> {
    const BLOCK: (u32, u32) = (32, 8);
    let dev = device(rt)?;
    let (ni, nj) = (64usize, 48usize); // original: 1024 x 1024
    let (alpha, beta) = (32412.0f32, 2123.0f32);
    let module = sized(SYR2K, &[("NI", ni), ("NJ", nj)]);
    let mut rng = Lcg::new(27);
    let a = rng.units(ni * nj);
    let b = rng.units(ni * nj);
    let c = rng.units(ni * ni);
    let mut d_a = upload(&dev, &a, "A")?;
    let mut d_b = upload(&dev, &b, "B")?;
    let mut d_c = upload(&dev, &c, "C")?;
    // SAFETY: threads outside NI x NI do nothing; the others update their element of C
    // (NI x NI) and read rows i and j of A and B (NI x NJ), by the compile-time sizes.
    unsafe {
        launch(
            &dev,
            &module.kernel("syr2k_kernel"),
            LaunchConfig::new((blocks_for(ni, BLOCK.0), blocks_for(ni, BLOCK.1)), BLOCK),
            &mut [
                &mut Scalar(1i32),
                &mut Scalar(1i32),
                &mut Scalar(alpha),
                &mut Scalar(beta),
                &mut d_a,
                &mut d_b,
                &mut d_c,
            ],
        )
    }?;
    let (alpha, beta) = (f64::from(alpha), f64::from(beta));
    let (a, b) = (widen(&a), widen(&b));
    let want: Vec<f64> = (0..ni * ni)
        .map(|p| {
            let (i, j) = (p / ni, p % ni);
            beta * f64::from(c[p])
                + (0..nj)
                    .map(|k| {
                        alpha * a[i * nj + k] * b[j * nj + k]
                            + alpha * b[i * nj + k] * a[j * nj + k]
                    })
                    .sum::<f64>()
        })
        .collect();
    // Sums of 97 positive terms against f64.
    check_close("C", &download(&d_c, "C")?, &want, 1e-4, 0.0)
}

// ---------------------------------------------------------------------------------------------
// adi
// ---------------------------------------------------------------------------------------------

/// PolyBench's adi (alternating direction implicit solver), one time step as `adiCuda` runs it
/// on 256 x 1 blocks: `adi_kernel1` (the forward sweep along each row, a thread per row),
/// `adi_kernel2` and `adi_kernel3` (the row's last element and back substitution), then
/// `adi_kernel4` once per row i1 = 1 .. N-1 (the forward sweep down the columns, a launch per
/// step of the dependency chain), `adi_kernel5`, and `adi_kernel6` once per i1 = 0 .. N-3:
/// 2 N + 1 launches.
fn adi(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (n, tsteps) = (64usize, 1usize); // original: N = 1024, TSTEPS = 1
    let module = sized(ADI, &[("TSTEPS", tsteps), ("N", n)]);
    let mut rng = Lcg::new(28);
    // B well away from zero and A small, so every division is well conditioned.
    let a: Vec<f32> = (0..n * n).map(|_| rng.range(0.0, 0.5)).collect();
    let b: Vec<f32> = (0..n * n).map(|_| rng.range(2.0, 3.0)).collect();
    let x = rng.units(n * n);
    let mut d_a = upload(&dev, &a, "A")?;
    let mut d_b = upload(&dev, &b, "B")?;
    let mut d_x = upload(&dev, &x, "X")?;
    let config = LaunchConfig::new((blocks_for(n, 256), 1), (256, 1));
    let n_i = n as i32;
    let mut run = |name: &str, i1: Option<i32>| {
        let kernel = module.kernel(name);
        let (mut n_arg, mut i1_arg) = (Scalar(n_i), Scalar(i1.unwrap_or(0)));
        let mut args: Vec<&mut dyn KernelArg> = vec![&mut n_arg, &mut d_a, &mut d_b, &mut d_x];
        if i1.is_some() {
            args.push(&mut i1_arg);
        }
        // SAFETY: threads with an index >= N do nothing; the others read and write rows or
        // columns of A, B and X (N x N) at indices between 0 and N-1 (for kernel 6 with
        // i1 <= N-3, rows N-2-i1 and N-3-i1 >= 0).
        unsafe { launch(&dev, &kernel, config, &mut args) }
    };
    for _ in 0..tsteps {
        run("adi_kernel1", None)?;
        run("adi_kernel2", None)?;
        run("adi_kernel3", None)?;
        for i1 in 1..n as i32 {
            run("adi_kernel4", Some(i1))?;
        }
        run("adi_kernel5", None)?;
        for i1 in 0..n as i32 - 2 {
            run("adi_kernel6", Some(i1))?;
        }
    }
    let (want_b, want_x) = adi_reference(&a, &b, &x, n, tsteps);
    // A few hundred dependent f32 steps, each well conditioned, against f64.
    check_close("B", &download(&d_b, "B")?, &want_b, 1e-4, 1e-5)?;
    check_close("X", &download(&d_x, "X")?, &want_x, 1e-4, 1e-5)
}

/// The six adi kernels' updates in order, in f64.
fn adi_reference(a: &[f32], b: &[f32], x: &[f32], n: usize, tsteps: usize) -> (Vec<f64>, Vec<f64>) {
    let a = widen(a);
    let (mut b, mut x) = (widen(b), widen(x));
    for _ in 0..tsteps {
        for i1 in 0..n {
            let r = i1 * n;
            for i2 in 1..n {
                x[r + i2] -= x[r + i2 - 1] * a[r + i2] / b[r + i2 - 1];
                b[r + i2] -= a[r + i2] * a[r + i2] / b[r + i2 - 1];
            }
        }
        for i1 in 0..n {
            x[i1 * n + n - 1] /= b[i1 * n + n - 1];
        }
        for i1 in 0..n {
            let r = i1 * n;
            for i2 in 0..n - 2 {
                x[r + n - i2 - 2] =
                    (x[r + n - 2 - i2] - x[r + n - 3 - i2] * a[r + n - i2 - 3]) / b[r + n - 3 - i2];
            }
        }
        for i1 in 1..n {
            for i2 in 0..n {
                let (p, q) = (i1 * n + i2, (i1 - 1) * n + i2);
                x[p] -= x[q] * a[p] / b[q];
                b[p] -= a[p] * a[p] / b[q];
            }
        }
        for i2 in 0..n {
            x[(n - 1) * n + i2] /= b[(n - 1) * n + i2];
        }
        for i1 in 0..n - 2 {
            for i2 in 0..n {
                let (p, q) = ((n - 2 - i1) * n + i2, (n - i1 - 3) * n + i2);
                x[p] = (x[p] - x[q] * a[q]) / b[p];
            }
        }
    }
    (b, x)
}

// ---------------------------------------------------------------------------------------------
// lu
// ---------------------------------------------------------------------------------------------

/// PolyBench's lu: for k = 0 .. N-1, `lu_kernel1` (row k right of the diagonal divided by the
/// pivot) on 256 x 1 blocks, then `lu_kernel2` (the trailing update) on 32 x 8 blocks, on the
/// grids `luCuda` computes from N - (k + 1).
///
/// Those grids start at index 0 while the kernels keep only i, j > k, so for larger k they no
/// longer reach the last rows and columns, which then keep stale values: the original's
/// behaviour (deterministic), which the reference follows grid by grid. For k = N-1 both grids
/// are empty: CUDA refuses such a launch (an invalid configuration, which the original never
/// checks), and so does gpu-mem, on every backend (`Error::InvalidLaunch`); those two launches
/// are made as the original makes them and must be refused, writing nothing.
fn lu(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let n = 64usize; // original: 2048
    let module = sized(LU, &[("N", n)]);
    let kernel1 = module.kernel("lu_kernel1");
    let kernel2 = module.kernel("lu_kernel2");
    let mut rng = Lcg::new(29);
    // Diagonally dominant, so every pivot stays far from zero.
    let a: Vec<f32> = (0..n * n)
        .map(|p| rng.range(-0.5, 0.5) + if p / n == p % n { 8.0 } else { 0.0 })
        .collect();
    let mut d_a = upload(&dev, &a, "A")?;
    let mut want = widen(&a);
    let mut empty_launches = 0;
    for k in 0..n {
        let rest = (n - (k + 1)) as f32;
        let grid1 = ((rest / 256.0).ceil() as u32, 1u32);
        let grid2 = ((rest / 32.0).ceil() as u32, (rest / 8.0).ceil() as u32);
        for (kernel, grid, block) in [
            (&kernel1, grid1, (256u32, 1u32)),
            (&kernel2, grid2, (32, 8)),
        ] {
            // SAFETY: only threads with k < i, j < N work (i = k for kernel 1), reading and
            // writing elements of A (N x N).
            let result = unsafe {
                dev.launch(
                    kernel,
                    LaunchConfig::new(grid, block),
                    &mut [&mut Scalar(n as i32), &mut d_a, &mut Scalar(k as i32)],
                )
            };
            if grid.0 == 0 || grid.1 == 0 {
                // What CUDA answers cudaErrorInvalidConfiguration, gpu-mem refuses too.
                ensure!(
                    matches!(result, Err(gpu_mem::Error::InvalidLaunch { .. })),
                    "{} on the empty grid {grid:?}: {result:?}, not a refused launch",
                    kernel.name()
                );
                empty_launches += 1;
            } else {
                result.map_err(fail(kernel.name()))?;
            }
        }
        // The reference, covering what the grids cover.
        let (cols1, cols2, rows2) = (
            grid1.0 as usize * 256,
            grid2.0 as usize * 32,
            grid2.1 as usize * 8,
        );
        for j in k + 1..n.min(cols1) {
            want[k * n + j] /= want[k * n + k];
        }
        for i in k + 1..n.min(rows2) {
            for j in k + 1..n.min(cols2) {
                want[i * n + j] -= want[i * n + k] * want[k * n + j];
            }
        }
    }
    ensure!(
        empty_launches == 2,
        "{empty_launches} launches of an empty grid"
    );
    // N steps of f32 updates of a diagonally dominant matrix against f64.
    check_close("A", &download(&d_a, "A")?, &want, 1e-4, 1e-5)
}
