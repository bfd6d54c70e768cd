//! Rodinia's CUDA kernels (github.com/yuhc/gpu-rodinia, `cuda/`), kept verbatim in
//! `tests/corpus/rodinia/`, launched as the benchmarks' host code launches them (the same block
//! shapes, grid computations and sequences of launches, on smaller problems) and checked against
//! serial Rust references written for these tests.

use super::support::{Lcg, check_close, check_equal, device, download, upload, widen, zeros};
use crate::{Case, Requires, ensure, fail};
use gpu_mem::Runtime;
use gpu_mem::prelude::*;
use std::collections::VecDeque;

const BACKPROP: &str = include_str!("../../../corpus/rodinia/backprop.cu");
const BFS: &str = include_str!("../../../corpus/rodinia/bfs.cu");
const GAUSSIAN: &str = include_str!("../../../corpus/rodinia/gaussian.cu");
const HOTSPOT: &str = include_str!("../../../corpus/rodinia/hotspot.cu");
const NW: &str = include_str!("../../../corpus/rodinia/nw.cu");
const PATHFINDER: &str = include_str!("../../../corpus/rodinia/pathfinder.cu");
const SRAD_V2: &str = include_str!("../../../corpus/rodinia/srad_v2.cu");
const LUD: &str = include_str!("../../../corpus/rodinia/lud.cu");
const NN: &str = include_str!("../../../corpus/rodinia/nn.cu");

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    crate::cases!["corpus::rodinia", Requires::Kernels;
        backprop,
        bfs,
        gaussian,
        hotspot,
        nw,
        pathfinder,
        srad_v2,
        lud,
        nn,
    ]
}

// ---------------------------------------------------------------------------------------------
// backprop
// ---------------------------------------------------------------------------------------------

/// backprop.h: the blocks are WIDTH x HEIGHT = 16 x 16, and the hidden layer has 16 units.
const BP_BLOCK: usize = 16;

/// Rodinia's backprop: `bpnn_layerforward_CUDA` (each 16 x 16 block multiplies its 16 input units
/// into the weights and reduces them in shared memory), then `bpnn_adjust_weights_cuda`, on the
/// grid `bpnn_train_cuda` uses: (1, in / 16) blocks of 16 x 16 threads.
fn backprop(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    // Original: `in` from the command line (a multiple of 16; 65536 in the runs), hid = 16.
    let (n_in, hid) = (64usize, BP_BLOCK);
    let num_blocks = n_in / 16;
    let mut rng = Lcg::new(1);
    let input: Vec<f32> = (0..=n_in).map(|_| rng.unit()).collect();
    let weights: Vec<f32> = (0..(n_in + 1) * (hid + 1))
        .map(|_| rng.unit() - 0.5)
        .collect();
    let prev: Vec<f32> = (0..(n_in + 1) * (hid + 1))
        .map(|_| (rng.unit() - 0.5) * 0.1)
        .collect();
    let delta: Vec<f32> = (0..=hid).map(|_| rng.unit() - 0.5).collect();
    let config = LaunchConfig::new((1, num_blocks as u32), (16, 16));

    let mut d_input = upload(&dev, &input, "input")?;
    let mut d_output_hidden = zeros::<f32>(&dev, hid + 1, "output_hidden")?;
    let mut d_weights = upload(&dev, &weights, "weights")?;
    let mut d_partial = zeros::<f32>(&dev, num_blocks * BP_BLOCK, "partial sums")?;
    let forward = Kernel::from_source(BACKPROP, "bpnn_layerforward_CUDA");
    // SAFETY: the grid covers rows 1..=in and columns 1..=16 of the (in + 1) x 17 weights, the
    // input units 1..=in and num_blocks * 16 partial sums, all inside the arrays given.
    unsafe {
        dev.launch(
            &forward,
            config,
            &mut [
                &mut d_input,
                &mut d_output_hidden,
                &mut d_weights,
                &mut d_partial,
                &mut Scalar(n_in as i32),
                &mut Scalar(hid as i32),
            ],
        )
    }
    .map_err(fail("bpnn_layerforward_CUDA"))?;
    let (want_partial, want_weights) = backprop_forward_reference(&input, &weights, n_in, hid);
    // The same f32 products and the same pairwise tree as the kernel: equal up to rounding.
    let got = download(&d_partial, "partial sums")?;
    check_close("hidden_partial_sum", &got, &want_partial, 1e-5, 1e-6)?;
    let got = download(&d_weights, "weights")?;
    check_close(
        "input_hidden after layerforward",
        &got,
        &want_weights,
        1e-5,
        1e-6,
    )?;

    // bpnn_train_cuda uploads the weights again, with the hidden deltas and previous changes.
    let mut d_weights = upload(&dev, &weights, "weights again")?;
    let mut d_delta = upload(&dev, &delta, "hidden delta")?;
    let mut d_prev = upload(&dev, &prev, "previous weights")?;
    let adjust = Kernel::from_source(BACKPROP, "bpnn_adjust_weights_cuda");
    // SAFETY: as above: rows 1..=in and row 0 of the 17 columns, deltas 1..=16, inputs 1..=in.
    unsafe {
        dev.launch(
            &adjust,
            config,
            &mut [
                &mut d_delta,
                &mut Scalar(hid as i32),
                &mut d_input,
                &mut Scalar(n_in as i32),
                &mut d_weights,
                &mut d_prev,
            ],
        )
    }
    .map_err(fail("bpnn_adjust_weights_cuda"))?;
    let (want_w, want_prev) = backprop_adjust_reference(&delta, &input, &weights, &prev, hid);
    // The kernel computes in double (ETA and MOMENTUM are double literals) and rounds to float.
    check_close("w", &download(&d_weights, "w")?, &want_w, 1e-6, 1e-7)?;
    check_close("oldw", &download(&d_prev, "oldw")?, &want_prev, 1e-6, 1e-7)?;
    Ok(())
}

/// The partial sums of the forward pass and the weights it leaves behind: for each block of 16
/// input units and each hidden unit, the 16 products reduced by the kernel's tree (at each step,
/// row `r`, a multiple of twice the stride, adds row `r + stride`), which also writes every row's
/// partial result back over the weights.
fn backprop_forward_reference(
    input: &[f32],
    weights: &[f32],
    n_in: usize,
    hid: usize,
) -> (Vec<f64>, Vec<f64>) {
    let cols = hid + 1;
    let mut partial = vec![0.0; n_in / BP_BLOCK * hid];
    let mut after = widen(weights);
    for block in 0..n_in / BP_BLOCK {
        for j in 0..hid {
            let row = |r: usize| BP_BLOCK * block + r + 1;
            let mut v: Vec<f32> = (0..BP_BLOCK)
                .map(|r| weights[row(r) * cols + j + 1] * input[row(r)])
                .collect();
            let mut stride = 1;
            while stride < BP_BLOCK {
                for r in (0..BP_BLOCK).step_by(2 * stride) {
                    v[r] += v[r + stride];
                }
                stride *= 2;
            }
            for (r, value) in v.iter().enumerate() {
                after[row(r) * cols + j + 1] = f64::from(*value);
            }
            partial[block * hid + j] = f64::from(v[0]);
        }
    }
    (partial, after)
}

/// Weights and previous changes after the momentum update: for rows 1..=in and row 0 (the bias
/// row, whose input is 1), `change = ETA * delta[j] * ly[k] + MOMENTUM * oldw[k][j]`,
/// `w[k][j] += change`, `oldw[k][j] = change`; column 0 is left alone.
fn backprop_adjust_reference(
    delta: &[f32],
    ly: &[f32],
    w: &[f32],
    oldw: &[f32],
    hid: usize,
) -> (Vec<f64>, Vec<f64>) {
    const ETA: f64 = 0.3;
    const MOMENTUM: f64 = 0.3;
    let cols = hid + 1;
    let mut new_w = widen(w);
    let mut new_old = widen(oldw);
    for (k, &y) in ly.iter().enumerate() {
        let input = if k == 0 { 1.0 } else { f64::from(y) };
        for (j, &d) in delta.iter().enumerate().take(hid + 1).skip(1) {
            let idx = k * cols + j;
            let change = ETA * f64::from(d) * input + MOMENTUM * f64::from(oldw[idx]);
            new_w[idx] = f64::from(w[idx]) + change;
            new_old[idx] = change;
        }
    }
    (new_w, new_old)
}

// ---------------------------------------------------------------------------------------------
// bfs
// ---------------------------------------------------------------------------------------------

/// bfs.cu's `struct Node`, which `Kernel` takes by pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Node {
    starting: i32,
    no_of_edges: i32,
}

/// Rodinia's bfs: `Kernel` (expands the frontier through `Node*` records and an edge list) and
/// `Kernel2` (the next frontier, and the `bool` "not over" flag), launched in turns until the flag
/// stays false, on the grid bfs.cu computes (blocks of at most MAX_THREADS_PER_BLOCK = 512).
fn bfs(rt: &Runtime) -> Result<(), String> {
    const MAX_THREADS_PER_BLOCK: usize = 512;
    let dev = device(rt)?;
    let n = 1500usize; // original: graph files of 4096 to 1M nodes
    let (nodes, edges) = random_graph(n, 2);
    let source = 0usize;
    let (blocks, threads) = if n > MAX_THREADS_PER_BLOCK {
        (n.div_ceil(MAX_THREADS_PER_BLOCK), MAX_THREADS_PER_BLOCK)
    } else {
        (1, n)
    };
    let mut start = vec![0u8; n];
    start[source] = 1;
    let mut cost = vec![-1i32; n];
    cost[source] = 0;

    let mut d_nodes = upload(&dev, &nodes, "nodes")?;
    let mut d_edges = upload(&dev, &edges, "edges")?;
    let mut d_mask = upload(&dev, &start, "mask")?;
    let mut d_updating = zeros::<u8>(&dev, n, "updating mask")?;
    let mut d_visited = upload(&dev, &start, "visited")?;
    let mut d_cost = upload(&dev, &cost, "cost")?;
    let mut d_over = zeros::<u8>(&dev, 1, "over")?;
    let expand = Kernel::from_source(BFS, "Kernel");
    let advance = Kernel::from_source(BFS, "Kernel2");
    let config = LaunchConfig::new(blocks as u32, threads as u32);
    let mut rounds = 0usize;
    loop {
        d_over.fill(0).map_err(fail("over"))?;
        // SAFETY: threads with tid >= no_of_nodes do nothing; the others read their node, its
        // edges (inside the edge list) and the flags and costs of nodes, all of length n.
        unsafe {
            dev.launch(
                &expand,
                config,
                &mut [
                    &mut d_nodes,
                    &mut d_edges,
                    &mut d_mask,
                    &mut d_updating,
                    &mut d_visited,
                    &mut d_cost,
                    &mut Scalar(n as i32),
                ],
            )
        }
        .map_err(fail("Kernel"))?;
        // SAFETY: as above, with the one-element flag.
        unsafe {
            dev.launch(
                &advance,
                config,
                &mut [
                    &mut d_mask,
                    &mut d_updating,
                    &mut d_visited,
                    &mut d_over,
                    &mut Scalar(n as i32),
                ],
            )
        }
        .map_err(fail("Kernel2"))?;
        rounds += 1;
        if download(&d_over, "over")?[0] == 0 {
            break;
        }
        ensure!(rounds <= n, "the search did not end after {rounds} rounds");
    }
    let want = bfs_reference(&nodes, &edges, source);
    check_equal("cost", &download(&d_cost, "cost")?, &want)?;
    let deepest = want.iter().copied().max().unwrap_or(0);
    ensure!(
        rounds == deepest as usize + 1,
        "{rounds} rounds for a search {deepest} levels deep"
    );
    let reached: Vec<u8> = want.iter().map(|&c| u8::from(c >= 0)).collect();
    check_equal("visited", &download(&d_visited, "visited")?, &reached)?;
    check_equal("mask", &download(&d_mask, "mask")?, &vec![0u8; n])?;
    Ok(())
}

/// A random directed graph: every node has 1 to 6 edges to random nodes.
fn random_graph(n: usize, seed: u64) -> (Vec<Node>, Vec<i32>) {
    let mut rng = Lcg::new(seed);
    let mut nodes = Vec::with_capacity(n);
    let mut edges = Vec::new();
    for _ in 0..n {
        let count = 1 + rng.below(6) as usize;
        nodes.push(Node {
            starting: edges.len() as i32,
            no_of_edges: count as i32,
        });
        for _ in 0..count {
            edges.push(rng.below(n as u32) as i32);
        }
    }
    (nodes, edges)
}

/// Breadth-first levels from `source` (-1: unreachable).
fn bfs_reference(nodes: &[Node], edges: &[i32], source: usize) -> Vec<i32> {
    let mut cost = vec![-1i32; nodes.len()];
    cost[source] = 0;
    let mut queue = VecDeque::from([source]);
    while let Some(u) = queue.pop_front() {
        let node = nodes[u];
        let first = node.starting as usize;
        for &v in &edges[first..first + node.no_of_edges as usize] {
            let v = v as usize;
            if cost[v] < 0 {
                cost[v] = cost[u] + 1;
                queue.push_back(v);
            }
        }
    }
    cost
}

// ---------------------------------------------------------------------------------------------
// gaussian
// ---------------------------------------------------------------------------------------------

/// Rodinia's gaussian: forward elimination as `ForwardSub` runs it, `Fan1` (the multipliers of
/// column t) and `Fan2` (the update of the rows below t, and of b) for t = 0..Size-1: 2 (Size - 1)
/// small launches, with MAXBLOCKSIZE = 512 and BLOCK_SIZE_XY = 4, on a 16 x 16 system.
fn gaussian(rt: &Runtime) -> Result<(), String> {
    const MAXBLOCKSIZE: u32 = 512;
    const BLOCK_SIZE_XY: u32 = 4;
    let dev = device(rt)?;
    let size = 16usize; // original: -s 1024 and up, or a matrix file
    let mut rng = Lcg::new(3);
    // Diagonally dominant, so that elimination without pivoting is well conditioned.
    let a: Vec<f32> = (0..size * size)
        .map(|k| rng.unit() - 0.5 + if k / size == k % size { 4.0 } else { 0.0 })
        .collect();
    let b: Vec<f32> = (0..size).map(|_| rng.unit() + 0.5).collect();
    let mut d_m = zeros::<f32>(&dev, size * size, "m")?;
    let mut d_a = upload(&dev, &a, "a")?;
    let mut d_b = upload(&dev, &b, "b")?;
    let s = size as u32;
    // ForwardSub's grids, as it computes them.
    let grid = s / MAXBLOCKSIZE + u32::from(!s.is_multiple_of(MAXBLOCKSIZE));
    let grid_xy = s / BLOCK_SIZE_XY + u32::from(!s.is_multiple_of(BLOCK_SIZE_XY));
    let fan1 = Kernel::from_source(GAUSSIAN, "Fan1");
    let fan2 = Kernel::from_source(GAUSSIAN, "Fan2");
    for t in 0..size - 1 {
        // SAFETY: Fan1's threads past Size-1-t return; the others write m[t+1.., t] and read
        // a in rows t.. of the Size x Size matrices.
        unsafe {
            dev.launch(
                &fan1,
                LaunchConfig::new(grid, MAXBLOCKSIZE),
                &mut [
                    &mut d_m,
                    &mut d_a,
                    &mut Scalar(size as i32),
                    &mut Scalar(t as i32),
                ],
            )
        }
        .map_err(fail("Fan1"))?;
        // SAFETY: Fan2's threads outside rows t+1.. and columns t.. return; the others stay in
        // the Size x Size matrices and the Size elements of b.
        unsafe {
            dev.launch(
                &fan2,
                LaunchConfig::new((grid_xy, grid_xy), (BLOCK_SIZE_XY, BLOCK_SIZE_XY)),
                &mut [
                    &mut d_m,
                    &mut d_a,
                    &mut d_b,
                    &mut Scalar(size as i32),
                    &mut Scalar((size - t) as i32),
                    &mut Scalar(t as i32),
                ],
            )
        }
        .map_err(fail("Fan2"))?;
    }
    let (want_m, want_a, want_b) = elimination_reference(&a, &b, size);
    // f32 elimination of a diagonally dominant 16 x 16 system against f64: errors ~1e-6.
    check_close("m", &download(&d_m, "m")?, &want_m, 1e-4, 1e-5)?;
    check_close("a", &download(&d_a, "a")?, &want_a, 1e-4, 1e-5)?;
    check_close("b", &download(&d_b, "b")?, &want_b, 1e-4, 1e-5)?;
    Ok(())
}

/// Gaussian elimination without pivoting, keeping the multipliers: returns (m, a, b).
fn elimination_reference(a: &[f32], b: &[f32], n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut m = vec![0.0; n * n];
    let mut a = widen(a);
    let mut b = widen(b);
    for t in 0..n - 1 {
        for i in t + 1..n {
            m[i * n + t] = a[i * n + t] / a[t * n + t];
        }
        for i in t + 1..n {
            for j in t..n {
                a[i * n + j] -= m[i * n + t] * a[t * n + j];
            }
            b[i] -= m[i * n + t] * b[t];
        }
    }
    (m, a, b)
}

// ---------------------------------------------------------------------------------------------
// hotspot
// ---------------------------------------------------------------------------------------------

/// The chip's constants as `compute_tran_temp` derives them.
struct HotspotParams {
    cap: f32,
    rx: f32,
    ry: f32,
    rz: f32,
    step: f32,
}

impl HotspotParams {
    fn new(rows: usize, cols: usize) -> HotspotParams {
        const T_CHIP: f64 = 0.0005;
        const CHIP_HEIGHT: f64 = 0.016;
        const CHIP_WIDTH: f64 = 0.016;
        const FACTOR_CHIP: f64 = 0.5;
        const SPEC_HEAT_SI: f64 = 1.75e6;
        const K_SI: f64 = 100.0;
        const MAX_PD: f64 = 3.0e6;
        const PRECISION: f64 = 0.001;
        let grid_height = CHIP_HEIGHT / rows as f64;
        let grid_width = CHIP_WIDTH / cols as f64;
        let max_slope = MAX_PD / (FACTOR_CHIP * T_CHIP * SPEC_HEAT_SI);
        HotspotParams {
            cap: (FACTOR_CHIP * SPEC_HEAT_SI * T_CHIP * grid_width * grid_height) as f32,
            rx: (grid_width / (2.0 * K_SI * T_CHIP * grid_height)) as f32,
            ry: (grid_height / (2.0 * K_SI * T_CHIP * grid_width)) as f32,
            rz: (T_CHIP / (K_SI * grid_height * grid_width)) as f32,
            step: (PRECISION / max_slope) as f32,
        }
    }
}

/// Rodinia's hotspot: `calculate_temp` (a pyramid of `iteration` stencil steps per launch in
/// three 16 x 16 shared arrays), launched as `compute_tran_temp` does: blocks of BLOCK_SIZE x
/// BLOCK_SIZE, a grid of blocks covering the grid by small blocks of BLOCK_SIZE - 2 pyramid
/// heights, source and destination swapped at every launch.
fn hotspot(rt: &Runtime) -> Result<(), String> {
    const BLOCK_SIZE: usize = 16;
    const EXPAND_RATE: usize = 2;
    let dev = device(rt)?;
    // Original: 512 x 512 (or 1024), pyramid height 2, 2 to 1000 iterations.
    let (rows, cols, pyramid_height, total_iterations) = (64usize, 64usize, 2usize, 6usize);
    let border = pyramid_height * EXPAND_RATE / 2;
    let small_block = BLOCK_SIZE - pyramid_height * EXPAND_RATE;
    let block_cols = cols / small_block + usize::from(!cols.is_multiple_of(small_block));
    let block_rows = rows / small_block + usize::from(!rows.is_multiple_of(small_block));
    let mut rng = Lcg::new(4);
    let temp: Vec<f32> = (0..rows * cols)
        .map(|_| 320.0 + 20.0 * rng.unit())
        .collect();
    let power: Vec<f32> = (0..rows * cols).map(|_| 1e-3 * rng.unit()).collect();
    let p = HotspotParams::new(rows, cols);

    let mut d_power = upload(&dev, &power, "power")?;
    let mut d_temp = [
        upload(&dev, &temp, "temp 0")?,
        zeros::<f32>(&dev, rows * cols, "temp 1")?,
    ];
    let kernel = Kernel::from_source(HOTSPOT, "calculate_temp");
    let config = LaunchConfig::new(
        (block_cols as u32, block_rows as u32),
        (BLOCK_SIZE as u32, BLOCK_SIZE as u32),
    );
    let mut want = temp;
    let mut dst = 0;
    for t in (0..total_iterations).step_by(pyramid_height) {
        let iteration = pyramid_height.min(total_iterations - t);
        let [t0, t1] = &mut d_temp;
        let (src_array, dst_array) = if dst == 0 { (t0, t1) } else { (t1, t0) };
        dst = 1 - dst;
        // SAFETY: each thread loads and stores its grid cell only when it is inside the
        // rows x cols grid (IN_RANGE checks), in arrays of rows * cols elements.
        unsafe {
            dev.launch(
                &kernel,
                config,
                &mut [
                    &mut Scalar(iteration as i32),
                    &mut d_power,
                    src_array,
                    dst_array,
                    &mut Scalar(cols as i32),
                    &mut Scalar(rows as i32),
                    &mut Scalar(border as i32),
                    &mut Scalar(border as i32),
                    &mut Scalar(p.cap),
                    &mut Scalar(p.rx),
                    &mut Scalar(p.ry),
                    &mut Scalar(p.rz),
                    &mut Scalar(p.step),
                    &mut Scalar(0.001f32),
                ],
            )
        }
        .map_err(fail("calculate_temp"))?;
        for _ in 0..iteration {
            want = hotspot_step(&want, &power, rows, cols, &p);
        }
    }
    // The kernel evaluates each step in double and stores floats, as the reference does.
    let got = download(&d_temp[dst], "temperature")?;
    check_close("temperature", &got, &widen(&want), 1e-6, 1e-4)
}

/// One explicit step of the thermal model, neighbours clamped at the edges of the grid.
fn hotspot_step(
    temp: &[f32],
    power: &[f32],
    rows: usize,
    cols: usize,
    p: &HotspotParams,
) -> Vec<f32> {
    const AMB_TEMP: f64 = 80.0;
    let step_div_cap = f64::from(p.step / p.cap);
    let (rx_1, ry_1, rz_1) = (
        f64::from(1.0 / p.rx),
        f64::from(1.0 / p.ry),
        f64::from(1.0 / p.rz),
    );
    let at = |r: usize, c: usize| f64::from(temp[r * cols + c]);
    (0..rows * cols)
        .map(|k| {
            let (r, c) = (k / cols, k % cols);
            let tc = at(r, c);
            let (north, south) = (at(r.saturating_sub(1), c), at((r + 1).min(rows - 1), c));
            let (west, east) = (at(r, c.saturating_sub(1)), at(r, (c + 1).min(cols - 1)));
            let delta = f64::from(power[k])
                + (south + north - 2.0 * tc) * ry_1
                + (east + west - 2.0 * tc) * rx_1
                + (AMB_TEMP - tc) * rz_1;
            (tc + step_div_cap * delta) as f32
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// nw
// ---------------------------------------------------------------------------------------------

/// Rodinia's nw (Needleman-Wunsch): `needle_cuda_shared_1` for the block anti-diagonals of the
/// top-left triangle (grids of 1..=block_width blocks), then `needle_cuda_shared_2` for the
/// bottom-right one, each block of BLOCK_SIZE = 16 threads sweeping a 17 x 17 shared tile.
fn nw(rt: &Runtime) -> Result<(), String> {
    const BLOCK_SIZE: usize = 16;
    let dev = device(rt)?;
    let (dimension, penalty) = (64usize, 10i32); // original: 2048 10
    let n = dimension + 1; // max_rows = max_cols
    let block_width = (n - 1) / BLOCK_SIZE;
    let mut rng = Lcg::new(5);
    // Scores in BLOSUM62's range; row and column 0 of the reference are not read.
    let reference: Vec<i32> = (0..n * n).map(|_| rng.below(16) as i32 - 4).collect();
    let mut items = vec![0i32; n * n];
    for i in 1..n {
        items[i * n] = -(i as i32) * penalty;
        items[i] = -(i as i32) * penalty;
    }
    let mut d_reference = upload(&dev, &reference, "reference")?;
    let mut d_items = upload(&dev, &items, "matrix")?;
    let first = Kernel::from_source(NW, "needle_cuda_shared_1");
    let second = Kernel::from_source(NW, "needle_cuda_shared_2");
    let diagonals = (1..=block_width)
        .map(|i| (&first, i))
        .chain((1..block_width).rev().map(|i| (&second, i)));
    for (kernel, i) in diagonals {
        // SAFETY: block b of launch i works on the 16 x 16 tile of anti-diagonal i (and its
        // top row and left column), which lies inside the (n) x (n) matrices.
        unsafe {
            dev.launch(
                kernel,
                LaunchConfig::new((i as u32, 1), (BLOCK_SIZE as u32, 1)),
                &mut [
                    &mut d_reference,
                    &mut d_items,
                    &mut Scalar(n as i32),
                    &mut Scalar(penalty),
                    &mut Scalar(i as i32),
                    &mut Scalar(block_width as i32),
                ],
            )
        }
        .map_err(fail("needle_cuda_shared"))?;
    }
    for i in 1..n {
        for j in 1..n {
            items[i * n + j] = (items[(i - 1) * n + j - 1] + reference[i * n + j])
                .max(items[i * n + j - 1] - penalty)
                .max(items[(i - 1) * n + j] - penalty);
        }
    }
    check_equal("score matrix", &download(&d_items, "matrix")?, &items)
}

// ---------------------------------------------------------------------------------------------
// pathfinder
// ---------------------------------------------------------------------------------------------

/// Rodinia's pathfinder: `dynproc_kernel`, a pyramid of up to `pyramid_height` rows of the
/// dynamic program per launch, launched as `calc_path` does (blocks of BLOCK_SIZE = 256, a grid
/// covering the columns by small blocks of 256 - 2 pyramid heights, buffers swapped).
fn pathfinder(rt: &Runtime) -> Result<(), String> {
    const BLOCK_SIZE: usize = 256;
    const HALO: usize = 1;
    let dev = device(rt)?;
    // Original: 100000 columns, 100 rows, pyramid height 20.
    let (cols, rows, pyramid_height) = (1000usize, 20usize, 4usize);
    let border = pyramid_height * HALO;
    let small_block = BLOCK_SIZE - pyramid_height * HALO * 2;
    let block_cols = cols / small_block + usize::from(!cols.is_multiple_of(small_block));
    let mut rng = Lcg::new(6);
    let data: Vec<i32> = (0..rows * cols).map(|_| rng.below(10) as i32).collect();
    let mut d_wall = upload(&dev, &data[cols..], "wall")?;
    let mut d_result = [
        upload(&dev, &data[..cols], "result 0")?,
        zeros::<i32>(&dev, cols, "result 1")?,
    ];
    let kernel = Kernel::from_source(PATHFINDER, "dynproc_kernel");
    let config = LaunchConfig::new(block_cols as u32, BLOCK_SIZE as u32);
    let mut dst = 0;
    for t in (0..rows - 1).step_by(pyramid_height) {
        let [r0, r1] = &mut d_result;
        let (src_array, dst_array) = if dst == 0 { (r0, r1) } else { (r1, r0) };
        dst = 1 - dst;
        // SAFETY: threads load and store only columns inside 0..cols (IN_RANGE and the valid
        // range), and read wall rows startStep..startStep+iteration of the rows - 1 given.
        unsafe {
            dev.launch(
                &kernel,
                config,
                &mut [
                    &mut Scalar(pyramid_height.min(rows - t - 1) as i32),
                    &mut d_wall,
                    src_array,
                    dst_array,
                    &mut Scalar(cols as i32),
                    &mut Scalar(rows as i32),
                    &mut Scalar(t as i32),
                    &mut Scalar(border as i32),
                ],
            )
        }
        .map_err(fail("dynproc_kernel"))?;
    }
    // The cheapest path to each cell of the last row, moving down, down-left or down-right.
    let mut best = data[..cols].to_vec();
    for row in data.chunks(cols).skip(1) {
        best = (0..cols)
            .map(|c| {
                let left = best[c.saturating_sub(1)];
                let right = best[(c + 1).min(cols - 1)];
                left.min(best[c]).min(right) + row[c]
            })
            .collect();
    }
    check_equal("path costs", &download(&d_result[dst], "result")?, &best)
}

// ---------------------------------------------------------------------------------------------
// srad_v2
// ---------------------------------------------------------------------------------------------

/// Rodinia's srad_v2: per iteration, the host computes q0sqr from the region of interest, then
/// `srad_cuda_1` (derivatives and diffusion coefficients, six 16 x 16 shared arrays) and
/// `srad_cuda_2` (the update) run on (cols / 16, rows / 16) blocks of 16 x 16.
///
/// The kernels' edge blocks load one row before J (and, at the last block row, one row after J
/// and C) before replacing those values with clamped ones; on a GPU that read stays inside the
/// allocation by luck. Here J and C live in arrays with a padding row on each side and the
/// kernels get views of their middle rows, so those reads stay inside memory the test owns.
fn srad_v2(rt: &Runtime) -> Result<(), String> {
    const BLOCK_SIZE: usize = 16;
    let dev = device(rt)?;
    // Original: 2048 x 2048, ROI 0 127 0 127, lambda 0.5, 2 iterations.
    let (rows, cols, lambda, niter) = (64usize, 64usize, 0.5f32, 2);
    let roi = (0usize, 31usize, 0usize, 31usize);
    let mut rng = Lcg::new(7);
    let mut j: Vec<f32> = (0..rows * cols).map(|_| rng.unit().exp()).collect();
    let mut d_e = zeros::<f32>(&dev, rows * cols, "E_C")?;
    let mut d_w = zeros::<f32>(&dev, rows * cols, "W_C")?;
    let mut d_n = zeros::<f32>(&dev, rows * cols, "N_C")?;
    let mut d_s = zeros::<f32>(&dev, rows * cols, "S_C")?;
    let first = Kernel::from_source(SRAD_V2, "srad_cuda_1");
    let second = Kernel::from_source(SRAD_V2, "srad_cuda_2");
    let config = LaunchConfig::new(
        ((cols / BLOCK_SIZE) as u32, (rows / BLOCK_SIZE) as u32),
        (BLOCK_SIZE as u32, BLOCK_SIZE as u32),
    );
    for round in 0..niter {
        let q0sqr = srad_q0sqr(&j, cols, roi);
        let padded: Vec<f32> = [vec![0.0; cols], j.clone(), vec![0.0; cols]].concat();
        let d_j_all = upload(&dev, &padded, "J")?;
        let d_c_all = zeros::<f32>(&dev, (rows + 2) * cols, "C")?;
        let mut d_j = d_j_all
            .slice(s![cols..cols + rows * cols])
            .map_err(fail("J view"))?;
        let mut d_c = d_c_all
            .slice(s![cols..cols + rows * cols])
            .map_err(fail("C view"))?;
        let (rows_i, cols_i) = (rows as i32, cols as i32);
        // SAFETY: every access is within one row of the rows x cols image (the edge blocks'
        // loads reach the padding rows around the views of J and C, never further), and E_C,
        // W_C, N_C, S_C are written and read at the thread's own pixel.
        unsafe {
            dev.launch(
                &first,
                config,
                &mut [
                    &mut d_e,
                    &mut d_w,
                    &mut d_n,
                    &mut d_s,
                    &mut d_j,
                    &mut d_c,
                    &mut Scalar(cols_i),
                    &mut Scalar(rows_i),
                    &mut Scalar(q0sqr),
                ],
            )
        }
        .map_err(fail("srad_cuda_1"))?;
        // SAFETY: as above.
        unsafe {
            dev.launch(
                &second,
                config,
                &mut [
                    &mut d_e,
                    &mut d_w,
                    &mut d_n,
                    &mut d_s,
                    &mut d_j,
                    &mut d_c,
                    &mut Scalar(cols_i),
                    &mut Scalar(rows_i),
                    &mut Scalar(lambda),
                    &mut Scalar(q0sqr),
                ],
            )
        }
        .map_err(fail("srad_cuda_2"))?;
        let want = srad_reference(&j, rows, cols, q0sqr, lambda);
        j = download(&d_j, "J")?;
        // f32 arithmetic (with a few double constants) against f64: relative errors ~1e-6.
        check_close(&format!("J after round {round}"), &j, &want, 1e-4, 1e-5)?;
        let all = download(&d_j_all, "padded J")?;
        ensure!(
            all[..cols]
                .iter()
                .chain(&all[cols + rows * cols..])
                .all(|&v| v == 0.0),
            "the kernels wrote outside J"
        );
    }
    Ok(())
}

/// srad.cu's q0sqr: the squared coefficient of variation of J over the region of interest
/// (rows r1..=r2, columns c1..=c2), in float as the host computes it.
fn srad_q0sqr(j: &[f32], cols: usize, (r1, r2, c1, c2): (usize, usize, usize, usize)) -> f32 {
    let (mut sum, mut sum2) = (0.0f32, 0.0f32);
    for row in j.chunks(cols).skip(r1).take(r2 - r1 + 1) {
        for &v in &row[c1..=c2] {
            sum += v;
            sum2 += v * v;
        }
    }
    let size = ((r2 - r1 + 1) * (c2 - c1 + 1)) as f32;
    let mean = sum / size;
    let var = sum2 / size - mean * mean;
    var / (mean * mean)
}

/// One SRAD update of J (speckle-reducing anisotropic diffusion, equations 33, 58 and 61 of
/// Yu and Acton), neighbours clamped at the image's edges.
fn srad_reference(j: &[f32], rows: usize, cols: usize, q0sqr: f32, lambda: f32) -> Vec<f64> {
    let at = |r: usize, c: usize| f64::from(j[r * cols + c]);
    let q0 = f64::from(q0sqr);
    let south = |r: usize| (r + 1).min(rows - 1);
    let east = |c: usize| (c + 1).min(cols - 1);
    let mut derivatives = Vec::with_capacity(rows * cols);
    let mut coefficient = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        for c in 0..cols {
            let jc = at(r, c);
            let n = at(r.saturating_sub(1), c) - jc;
            let s = at(south(r), c) - jc;
            let w = at(r, c.saturating_sub(1)) - jc;
            let e = at(r, east(c)) - jc;
            let g2 = (n * n + s * s + w * w + e * e) / (jc * jc);
            let l = (n + s + w + e) / jc;
            let num = 0.5 * g2 - (1.0 / 16.0) * (l * l);
            let den = 1.0 + 0.25 * l;
            let qsqr = num / (den * den);
            let den = (qsqr - q0) / (q0 * (1.0 + q0));
            coefficient.push((1.0 / (1.0 + den)).clamp(0.0, 1.0));
            derivatives.push([n, s, w, e]);
        }
    }
    (0..rows * cols)
        .map(|k| {
            let (r, c) = (k / cols, k % cols);
            let [n, s, w, e] = derivatives[k];
            let cc = coefficient[k];
            let divergence = cc * n
                + coefficient[south(r) * cols + c] * s
                + cc * w
                + coefficient[r * cols + east(c)] * e;
            at(r, c) + 0.25 * f64::from(lambda) * divergence
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// lud
// ---------------------------------------------------------------------------------------------

/// Rodinia's lud: blocked LU decomposition as `lud_cuda` runs it: for each 16-wide block step,
/// `lud_diagonal` (one block of 16), `lud_perimeter` (blocks of 32 for the rest of the block row
/// and column) and `lud_internal` (16 x 16 blocks for the trailing matrix), then a last
/// `lud_diagonal`.
fn lud(rt: &Runtime) -> Result<(), String> {
    const BLOCK_SIZE: usize = 16;
    let dev = device(rt)?;
    let dim = 64usize; // original: -s 8000 (a multiple of 16), default 32
    let mut rng = Lcg::new(8);
    // Diagonally dominant: LU without pivoting is stable.
    let m: Vec<f32> = (0..dim * dim)
        .map(|k| rng.unit() - 0.5 + if k / dim == k % dim { dim as f32 } else { 0.0 })
        .collect();
    let mut d_m = upload(&dev, &m, "matrix")?;
    let diagonal = Kernel::from_source(LUD, "lud_diagonal");
    let perimeter = Kernel::from_source(LUD, "lud_perimeter");
    let internal = Kernel::from_source(LUD, "lud_internal");
    let bs = BLOCK_SIZE as u32;
    let dim_i = dim as i32;
    let mut i = 0usize;
    while i < dim - BLOCK_SIZE {
        let rest = ((dim - i) / BLOCK_SIZE - 1) as u32;
        let offset = i as i32;
        // SAFETY: the diagonal block at (i, i) lies inside the dim x dim matrix.
        unsafe {
            dev.launch(
                &diagonal,
                LaunchConfig::new(1, bs),
                &mut [&mut d_m, &mut Scalar(dim_i), &mut Scalar(offset)],
            )
        }
        .map_err(fail("lud_diagonal"))?;
        // SAFETY: the `rest` perimeter blocks cover block row and column i inside the matrix.
        unsafe {
            dev.launch(
                &perimeter,
                LaunchConfig::new(rest, 2 * bs),
                &mut [&mut d_m, &mut Scalar(dim_i), &mut Scalar(offset)],
            )
        }
        .map_err(fail("lud_perimeter"))?;
        // SAFETY: the rest x rest internal blocks cover the trailing matrix after block i.
        unsafe {
            dev.launch(
                &internal,
                LaunchConfig::new((rest, rest), (bs, bs)),
                &mut [&mut d_m, &mut Scalar(dim_i), &mut Scalar(offset)],
            )
        }
        .map_err(fail("lud_internal"))?;
        i += BLOCK_SIZE;
    }
    // SAFETY: the last diagonal block lies inside the matrix.
    unsafe {
        dev.launch(
            &diagonal,
            LaunchConfig::new(1, bs),
            &mut [&mut d_m, &mut Scalar(dim_i), &mut Scalar(i as i32)],
        )
    }
    .map_err(fail("lud_diagonal"))?;
    // Doolittle's LU (unit lower L below the diagonal, U on and above it) in f64.
    let mut want = widen(&m);
    for k in 0..dim {
        for r in k + 1..dim {
            want[r * dim + k] /= want[k * dim + k];
            for c in k + 1..dim {
                want[r * dim + c] -= want[r * dim + k] * want[k * dim + c];
            }
        }
    }
    // Blocked f32 elimination of a diagonally dominant matrix against f64: errors ~1e-5.
    check_close("LU", &download(&d_m, "matrix")?, &want, 1e-4, 1e-5)
}

// ---------------------------------------------------------------------------------------------
// nn
// ---------------------------------------------------------------------------------------------

/// nn_cuda.cu's `LatLong`, which `euclid` takes by pointer.
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct LatLong {
    lat: f32,
    lng: f32,
}

/// Rodinia's nn: `euclid`, the distance of every record to the target, on the grid nn_cuda.cu
/// computes: blocks of min(maxThreadsPerBlock, 256) = 256 threads, the blocks spread over
/// gridY = ceil(blocks / maxGridSize.x) rows (one here).
fn nn(rt: &Runtime) -> Result<(), String> {
    const DEFAULT_THREADS_PER_BLOCK: usize = 256;
    const MAX_GRID_X: usize = 65_535; // any device allows at least this many blocks along x
    let dev = device(rt)?;
    let records = 3000usize; // original: the hurricane records of a file list (42764)
    let (lat, lng) = (30.0f32, 90.0f32);
    let mut rng = Lcg::new(9);
    let locations: Vec<LatLong> = (0..records)
        .map(|_| LatLong {
            lat: 180.0 * rng.unit() - 90.0,
            lng: 360.0 * rng.unit() - 180.0,
        })
        .collect();
    let blocks = records.div_ceil(DEFAULT_THREADS_PER_BLOCK);
    let grid_y = blocks.div_ceil(MAX_GRID_X);
    let grid_x = blocks.div_ceil(grid_y);
    let mut d_locations = upload(&dev, &locations, "locations")?;
    let mut d_distances = zeros::<f32>(&dev, records, "distances")?;
    let kernel = Kernel::from_source(NN, "euclid");
    // SAFETY: threads with globalId >= numRecords do nothing; the others read and write element
    // globalId of arrays of numRecords elements.
    unsafe {
        dev.launch(
            &kernel,
            LaunchConfig::new(
                (grid_x as u32, grid_y as u32),
                DEFAULT_THREADS_PER_BLOCK as u32,
            ),
            &mut [
                &mut d_locations,
                &mut d_distances,
                &mut Scalar(records as i32),
                &mut Scalar(lat),
                &mut Scalar(lng),
            ],
        )
    }
    .map_err(fail("euclid"))?;
    let want: Vec<f64> = locations
        .iter()
        .map(|l| {
            let (dy, dx) = (f64::from(lat - l.lat), f64::from(lng - l.lng));
            (dy * dy + dx * dx).sqrt()
        })
        .collect();
    // Two f32 squares, a sum and a correctly rounded sqrt: within a few ulps of f64.
    check_close(
        "distances",
        &download(&d_distances, "distances")?,
        &want,
        1e-6,
        1e-5,
    )
}
