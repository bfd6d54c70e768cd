//! More of Rodinia's CUDA kernels (github.com/yuhc/gpu-rodinia, `cuda/`): streamcluster,
//! b+tree, cfd (euler3d), lavaMD, srad_v1, huffman, hotspot3D, dwt2d's component copies and
//! particlefilter. Kept verbatim in `tests/corpus/rodinia/`, launched as the benchmarks' host
//! code launches them (the same block shapes, grid computations, symbols and sequences of
//! launches, on smaller problems, with the host-side steps between launches done here as the
//! host does them) and checked against serial Rust references written for these tests.

use super::support::{
    Lcg, check_close, check_equal, device, download, launch, racing, upload, widen, zeros,
};
use crate::{Case, Requires, ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{Module, Runtime};
use std::collections::VecDeque;

const STREAMCLUSTER: &str = include_str!("../../../corpus/rodinia/streamcluster.cu");
const BTREE: &str = include_str!("../../../corpus/rodinia/b+tree.cu");
const CFD: &str = include_str!("../../../corpus/rodinia/cfd_euler3d.cu");
const LAVAMD: &str = include_str!("../../../corpus/rodinia/lavaMD.cu");
const SRAD_V1: &str = include_str!("../../../corpus/rodinia/srad_v1.cu");
const HUFFMAN: &str = include_str!("../../../corpus/rodinia/huffman.cu");
const HOTSPOT_3D: &str = include_str!("../../../corpus/rodinia/hotspot3D.cu");
const DWT2D_COMPONENTS: &str = include_str!("../../../corpus/rodinia/dwt2d_components.cu");
const PARTICLEFILTER: &str = include_str!("../../../corpus/rodinia/particlefilter.cu");

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    let mut cases = crate::cases!["corpus::rodinia_more", Requires::Kernels;
        streamcluster,
        btree_find_k,
        btree_find_range_k,
        cfd_euler3d,
        lava_md,
        srad_v1,
        huffman_vlc_encode,
        hotspot_3d,
        dwt2d_components,
        particlefilter,
        particlefilter_two_blocks,
    ];
    // Both shift a 32-bit word by 32, which the kernels rely on an NVIDIA GPU to answer with 0
    // (`(1<<wrbits)-1` with wrbits = 32; `dw << 32-bit` with bit = 0).
    cases.extend(
        crate::cases!["corpus::rodinia_more", Requires::ClampedShifts;
            huffman_vlc_encode_long_codes,
            huffman_pack2,
        ],
    );
    cases
}

// ---------------------------------------------------------------------------------------------
// streamcluster
// ---------------------------------------------------------------------------------------------

/// streamcluster_header.cu's `Point` as the device sees it: `{ float weight; float *coord; long
/// assign; float cost; }`, with C's padding spelled out. `coord` is a host address the kernel
/// never follows.
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Point {
    weight: f32,
    _pad0: u32,
    coord: u64,
    assign: i64,
    cost: f32,
    _pad1: u32,
}

/// Rodinia's streamcluster: `kernel_compute_cost`, the GPU part of `pgain` (the gain of
/// opening a center at point x), on 512-thread blocks and the 2-d grid `pgain` computes; its
/// outputs, the per-point rows of `work_mem` and the `switch_membership` flags, are what the
/// host reads back.
fn streamcluster(rt: &Runtime) -> Result<(), String> {
    const THREADS_PER_BLOCK: usize = 512;
    const MAXBLOCKS: usize = 65536;
    let dev = device(rt)?;
    // Original: chunks of up to 65536 points of 256 dimensions.
    let (num, dim, k) = (1500usize, 8usize, 12usize);
    let mut rng = Lcg::new(31);
    let coords: Vec<Vec<f32>> = (0..num).map(|_| rng.units(dim)).collect();
    let dist = |a: usize, b: usize| -> f64 {
        (0..dim)
            .map(|d| (f64::from(coords[a][d]) - f64::from(coords[b][d])).powi(2))
            .sum()
    };
    // The centers are the first K points (pgain's is_center), numbered by center_table.
    let mut center_table = vec![0i32; num];
    for (c, entry) in center_table.iter_mut().enumerate().take(k) {
        *entry = c as i32;
    }
    let points: Vec<Point> = (0..num)
        .map(|i| {
            let weight = 0.5 + rng.unit();
            let assign = (0..k)
                .min_by(|&a, &b| dist(i, a).total_cmp(&dist(i, b)))
                .unwrap_or(0);
            Point {
                weight,
                _pad0: 0,
                coord: 0,
                assign: assign as i64,
                cost: (dist(i, assign) * f64::from(weight)) as f32,
                _pad1: 0,
            }
        })
        .collect();
    let x = k + rng.below((num - k) as u32) as usize; // the candidate, not a center
    let stride = k + 1;
    // The costs of reassigning each point to x; no comparison may be a near tie, where the
    // kernel's f32 distance and the f64 reference could fall on different sides.
    let x_cost: Vec<f64> = (0..num)
        .map(|i| dist(i, x) * f64::from(points[i].weight))
        .collect();
    for (i, p) in points.iter().enumerate() {
        let (a, b) = (x_cost[i], f64::from(p.cost));
        ensure!(
            (a - b).abs() > 1e-4 * (a + b) || (a == 0.0 && b == 0.0),
            "the inputs have a near tie at point {i}"
        );
    }
    let coord_h: Vec<f32> = (0..dim * num).map(|q| coords[q % num][q / num]).collect();
    let mut d_p = upload(&dev, &points, "p")?;
    let mut d_coord = upload(&dev, &coord_h, "coord_d")?;
    let mut d_work = zeros::<f32>(&dev, stride * (num + 1), "work_mem_d")?;
    let mut d_center_table = upload(&dev, &center_table, "center_table_d")?;
    let mut d_switch = zeros::<u8>(&dev, num, "switch_membership_d")?;
    // pgain's grid, in its float arithmetic.
    let num_blocks = ((num + THREADS_PER_BLOCK - 1) as f32 / THREADS_PER_BLOCK as f32) as usize;
    let num_blocks_y = ((num_blocks + MAXBLOCKS - 1) as f32 / MAXBLOCKS as f32) as usize;
    let num_blocks_x = ((num_blocks + num_blocks_y - 1) as f32 / num_blocks_y as f32) as usize;
    let kernel = Kernel::from_source(STREAMCLUSTER, "kernel_compute_cost");
    // SAFETY: threads with tid >= num do nothing; the others read their Point (num), the
    // coordinates of their point and of x (dim x num), center_table at their point's center,
    // and write their own row of work_mem (stride x (num + 1)) and their switch flag (num).
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(
                (num_blocks_x as u32, num_blocks_y as u32),
                THREADS_PER_BLOCK as u32,
            ),
            &mut [
                &mut Scalar(num as i32),
                &mut Scalar(dim as i32),
                &mut Scalar(x as i64),
                &mut d_p,
                &mut Scalar(k as i32),
                &mut Scalar(stride as i32),
                &mut d_coord,
                &mut d_work,
                &mut d_center_table,
                &mut d_switch,
            ],
        )
    }?;
    let mut want_work = vec![0.0f64; stride * (num + 1)];
    let mut want_switch = vec![0u8; num];
    for (i, p) in points.iter().enumerate() {
        let cost = f64::from(p.cost);
        if x_cost[i] < cost {
            want_switch[i] = 1;
            want_work[i * stride + k] += x_cost[i] - cost;
        } else {
            want_work[i * stride + center_table[p.assign as usize] as usize] += cost - x_cost[i];
        }
    }
    check_equal(
        "switch_membership",
        &download(&d_switch, "switch_membership")?,
        &want_switch,
    )?;
    // A difference of two f32 costs of order 1, each from an 8-term f32 distance.
    check_close(
        "work_mem",
        &download(&d_work, "work_mem")?,
        &want_work,
        1e-5,
        1e-5,
    )
}

// ---------------------------------------------------------------------------------------------
// b+tree
// ---------------------------------------------------------------------------------------------

/// common.h's DEFAULT_ORDER: the block size of both kernels, and the key and index slots of a
/// `knode` (DEFAULT_ORDER + 1 each).
const ORDER: usize = 256;

/// common.h's `knode` (2068 bytes): `int location; int indices[257]; int keys[257]; bool
/// is_leaf; int num_keys;`, with the arrays' last slots apart (bytemuck's arrays stop at 256)
/// and C's padding after `is_leaf` spelled out.
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct Knode {
    location: i32,
    indices: [i32; ORDER],
    indices_last: i32,
    keys: [i32; ORDER],
    keys_last: i32,
    is_leaf: u8,
    _pad: [u8; 3],
    num_keys: i32,
}

/// A B+ tree as main.c's `node` holds it: keys, and either children (one more than the keys,
/// separated by each child's smallest key) or record values.
enum BNode {
    Leaf(Vec<(i32, i32)>),
    Internal(Vec<i32>, Vec<BNode>),
}

impl BNode {
    fn smallest(&self) -> i32 {
        match self {
            BNode::Leaf(entries) => entries[0].0,
            BNode::Internal(_, children) => children[0].smallest(),
        }
    }
}

/// A tree over `entries` (sorted by key), bulk-loaded with 5 to 8 entries per leaf and 3 to 9
/// children per inner node (as a small-order tree of main.c would hold them after inserts), and
/// its height (edges from the root to a leaf).
fn build_btree(entries: &[(i32, i32)]) -> (BNode, usize) {
    let leaf_sizes = [5usize, 8, 6, 7];
    let inner_sizes = [4usize, 9, 3, 6, 8];
    let mut level: Vec<BNode> = Vec::new();
    let mut rest = entries;
    let mut turn = 0;
    while !rest.is_empty() {
        let take = leaf_sizes[turn % leaf_sizes.len()].min(rest.len());
        level.push(BNode::Leaf(rest[..take].to_vec()));
        rest = &rest[take..];
        turn += 1;
    }
    let mut height = 0;
    while level.len() > 1 {
        let mut next = Vec::new();
        let mut children = level.into_iter().peekable();
        while children.peek().is_some() {
            let take = inner_sizes[turn % inner_sizes.len()];
            turn += 1;
            let group: Vec<BNode> = children.by_ref().take(take).collect();
            let keys = group[1..].iter().map(BNode::smallest).collect();
            next.push(BNode::Internal(keys, group));
        }
        level = next;
        height += 1;
    }
    (level.pop().unwrap_or(BNode::Leaf(Vec::new())), height)
}

/// main.c's `transform_to_cuda`: the nodes in breadth-first order as `knode`s (keys framed by
/// INT_MIN and INT_MAX, child or record indices, the next node's index after the last key) and
/// the records in the leaves' order. The original leaves `keys[DEFAULT_ORDER]` and the unused
/// indices as malloc left them; here they are INT_MAX and 0.
fn transform_to_knodes(root: &BNode) -> (Vec<Knode>, Vec<i32>) {
    let mut knodes: Vec<Knode> = Vec::new();
    let mut records = Vec::new();
    let mut queue = VecDeque::from([root]);
    let mut nodeindex = 1i32;
    while let Some(node) = queue.pop_front() {
        let mut k = Knode {
            location: knodes.len() as i32,
            indices: [0; ORDER],
            indices_last: 0,
            keys: [i32::MAX; ORDER],
            keys_last: i32::MAX,
            is_leaf: 0,
            _pad: [0; 3],
            num_keys: 0,
        };
        let nk = match node {
            BNode::Leaf(entries) => {
                k.is_leaf = 1;
                for (i, &(key, value)) in entries.iter().enumerate() {
                    k.keys[i + 1] = key;
                    records.push(value);
                    k.indices[i + 1] = records.len() as i32 - 1;
                }
                entries.len()
            }
            BNode::Internal(keys, children) => {
                k.indices[0] = nodeindex;
                nodeindex += 1;
                for (i, &key) in keys.iter().enumerate() {
                    k.keys[i + 1] = key;
                    queue.push_back(&children[i]);
                    k.indices[i + 1] = nodeindex;
                    nodeindex += 1;
                }
                queue.push_back(&children[keys.len()]);
                keys.len()
            }
        };
        k.num_keys = nk as i32 + 2;
        k.keys[0] = i32::MIN;
        k.keys[nk + 1] = i32::MAX;
        k.indices[nk + 1] = knodes.len() as i32 + 1;
        knodes.push(k);
    }
    (knodes, records)
}

/// The tree of both b+tree cases: 2000 records with the keys 0, 3, 6, ... (so that keys not
/// divisible by 3 are absent) and random values.
struct BtreeFixture {
    knodes: Vec<Knode>,
    records: Vec<i32>,
    height: usize,
    keys: Vec<i32>,
    /// The knode index of each leaf, with its smallest key.
    leaves: Vec<(usize, i32)>,
}

fn btree_fixture(seed: u64) -> BtreeFixture {
    let mut rng = Lcg::new(seed);
    let entries: Vec<(i32, i32)> = (0..2000)
        .map(|i| (3 * i, rng.below(1_000_000) as i32))
        .collect();
    let (root, height) = build_btree(&entries);
    let (knodes, records) = transform_to_knodes(&root);
    let leaves = knodes
        .iter()
        .enumerate()
        .filter(|(_, k)| k.is_leaf == 1)
        .map(|(i, k)| (i, k.keys[1]))
        .collect();
    BtreeFixture {
        knodes,
        records,
        height,
        keys: entries.iter().map(|e| e.0).collect(),
        leaves,
    }
}

impl BtreeFixture {
    /// The knode index of the leaf a search for `key` ends in: the last leaf whose smallest key
    /// is at most `key` (the first leaf for smaller keys).
    fn leaf_of(&self, key: i32) -> i64 {
        let after = self
            .leaves
            .partition_point(|&(_, smallest)| smallest <= key);
        self.leaves[after.saturating_sub(1)].0 as i64
    }

    /// The record index of `key`, if present.
    fn record_of(&self, key: i32) -> Option<i32> {
        self.keys.binary_search(&key).ok().map(|i| i as i32)
    }

    /// A query key: present two times in three, else absent (between keys, or outside them).
    fn query(&self, rng: &mut Lcg) -> i32 {
        let top = *self.keys.last().unwrap_or(&0);
        match rng.below(6) {
            0 => top + 1 + rng.below(50) as i32,
            1 => 3 * rng.below(2000) as i32 + 1 + rng.below(2) as i32,
            _ => self.keys[rng.below(self.keys.len() as u32) as usize],
        }
    }
}

/// Rodinia's b+tree, command `k`: `findK`, one block of DEFAULT_ORDER threads per query (a
/// block's threads test the key slots of the node it is at, and thread 0 descends), `height`
/// levels down, then the leaf's matching slot gives the record. The answer of an absent key stays
/// -1 as main.c initializes it.
fn btree_find_k(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let tree = btree_fixture(32);
    ensure!(tree.height >= 3, "a tree {} levels high", tree.height);
    let count = 300usize; // original: the command file's count (up to 65535)
    let mut rng = Lcg::new(33);
    let queries: Vec<i32> = (0..count).map(|_| tree.query(&mut rng)).collect();
    let mut d_knodes = upload(&dev, &tree.knodes, "knodes")?;
    // record is `struct { int value; }`: an i32 each.
    let mut d_records = upload(&dev, &tree.records, "records")?;
    let mut d_curr = zeros::<i64>(&dev, count, "currKnode")?;
    let mut d_offset = zeros::<i64>(&dev, count, "offset")?;
    let mut d_keys = upload(&dev, &queries, "keys")?;
    let mut d_ans = upload(&dev, &vec![-1i32; count], "ans")?;
    let kernel = Kernel::from_source(BTREE, "findK");
    // Block `bid` reads query `bid` and its own currKnode/offset entries (count each);
    // the nodes it visits are knode indices the tree holds (findK checks a child index against
    // knodes_elem before following it), key slots thid and thid + 1 <= DEFAULT_ORDER, and the
    // leaves' record indices (< records).
    // SAFETY: every access stays within those bounds.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(count as u32, ORDER as u32),
            &mut [
                &mut Scalar(tree.height as i64),
                &mut d_knodes,
                &mut Scalar(tree.knodes.len() as i64),
                &mut d_records,
                &mut d_curr,
                &mut d_offset,
                &mut d_keys,
                &mut d_ans,
            ],
        )
    }?;
    let want_ans: Vec<i32> = queries
        .iter()
        .map(|&q| tree.record_of(q).map_or(-1, |r| tree.records[r as usize]))
        .collect();
    let want_leaf: Vec<i64> = queries.iter().map(|&q| tree.leaf_of(q)).collect();
    ensure!(
        want_ans.iter().filter(|&&a| a < 0).count() > count / 8,
        "too few absent keys"
    );
    check_equal("ans", &download(&d_ans, "ans")?, &want_ans)?;
    check_equal("currKnode", &download(&d_curr, "currKnode")?, &want_leaf)?;
    check_equal("offset", &download(&d_offset, "offset")?, &want_leaf)
}

/// Rodinia's b+tree, command `j`: `findRangeK`, the same descent for a range's start and end
/// keys at once, then the record index of the start (`recstart`) and the length up to the end
/// (`reclength`), both left 0 (main.c's initial values) where a key is absent; a length is
/// computed from whatever `recstart` holds.
fn btree_find_range_k(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let tree = btree_fixture(34);
    let count = 300usize;
    let mut rng = Lcg::new(35);
    let top = *tree.keys.last().unwrap_or(&0);
    let (start, end): (Vec<i32>, Vec<i32>) = (0..count)
        .map(|_| {
            // main.c: end = start + rSize, pulled back inside the data.
            let start = tree.query(&mut rng).min(top - 300);
            (
                start,
                start + 3 * rng.below(100) as i32 + rng.below(2) as i32,
            )
        })
        .unzip();
    let mut d_knodes = upload(&dev, &tree.knodes, "knodes")?;
    let mut d_curr = zeros::<i64>(&dev, count, "currKnode")?;
    let mut d_offset = zeros::<i64>(&dev, count, "offset")?;
    let mut d_last = zeros::<i64>(&dev, count, "lastKnode")?;
    let mut d_offset2 = zeros::<i64>(&dev, count, "offset_2")?;
    let mut d_start = upload(&dev, &start, "start")?;
    let mut d_end = upload(&dev, &end, "end")?;
    let mut d_recstart = zeros::<i32>(&dev, count, "recstart")?;
    let mut d_reclen = zeros::<i32>(&dev, count, "reclength")?;
    let kernel = Kernel::from_source(BTREE, "findRangeK");
    // SAFETY: as for findK: per-query entries of the count-long arrays, nodes by checked
    // indices, key slots up to DEFAULT_ORDER.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(count as u32, ORDER as u32),
            &mut [
                &mut Scalar(tree.height as i64),
                &mut d_knodes,
                &mut Scalar(tree.knodes.len() as i64),
                &mut d_curr,
                &mut d_offset,
                &mut d_last,
                &mut d_offset2,
                &mut d_start,
                &mut d_end,
                &mut d_recstart,
                &mut d_reclen,
            ],
        )
    }?;
    let want_start: Vec<i32> = start
        .iter()
        .map(|&s| tree.record_of(s).unwrap_or(0))
        .collect();
    let want_len: Vec<i32> = end
        .iter()
        .zip(&want_start)
        .map(|(&e, &rs)| tree.record_of(e).map_or(0, |re| re - rs + 1))
        .collect();
    check_equal("recstart", &download(&d_recstart, "recstart")?, &want_start)?;
    check_equal("reclength", &download(&d_reclen, "reclength")?, &want_len)?;
    let leaves = |keys: &[i32]| keys.iter().map(|&k| tree.leaf_of(k)).collect::<Vec<i64>>();
    check_equal(
        "currKnode",
        &download(&d_curr, "currKnode")?,
        &leaves(&start),
    )?;
    check_equal("lastKnode", &download(&d_last, "lastKnode")?, &leaves(&end))
}

// ---------------------------------------------------------------------------------------------
// cfd (euler3d)
// ---------------------------------------------------------------------------------------------

/// euler3d.cu's sizes and constants.
const CFD_BLOCK: usize = 192;
const NNB: usize = 4;
const NDIM: usize = 3;
const NVAR: usize = 5;
const GAMMA: f32 = 1.4;
const RK: usize = 3;

/// The far-field state and its flux contributions as euler3d.cu's `main` computes them (in
/// float, with ff_mach = 1.2 and a zero angle of attack): `ff_variable`, then the x, y and z
/// momentum and the density-energy flux contributions (`float3` each).
fn cfd_far_field() -> ([f32; NVAR], [[f32; 3]; 4]) {
    let density = 1.4f32;
    let pressure = 1.0f32;
    let speed_of_sound = (GAMMA * pressure / density).sqrt();
    let speed = 1.2f32 * speed_of_sound;
    let velocity = [speed * 0.0f32.cos(), speed * 0.0f32.sin(), 0.0];
    let momentum = velocity.map(|v| density * v);
    let density_energy = density * (0.5 * (speed * speed)) + pressure / (GAMMA - 1.0);
    let ff = [
        density,
        momentum[0],
        momentum[1],
        momentum[2],
        density_energy,
    ];
    let flux = flux_contribution(momentum, density_energy, pressure, velocity);
    (ff, flux.map(|v| v.map(|c| c as f32)))
}

/// `compute_flux_contribution`: the momentum fluxes along x, y, z and the density-energy flux.
fn flux_contribution<T: Copy + Into<f64>>(
    momentum: [T; 3],
    density_energy: T,
    pressure: T,
    velocity: [T; 3],
) -> [[f64; 3]; 4] {
    let m = momentum.map(Into::into);
    let v = velocity.map(Into::into);
    let (de, p): (f64, f64) = (density_energy.into(), pressure.into());
    [
        [v[0] * m[0] + p, v[0] * m[1], v[0] * m[2]],
        [v[0] * m[1], v[1] * m[1] + p, v[1] * m[2]],
        [v[0] * m[2], v[1] * m[2], v[2] * m[2] + p],
        [v[0] * (de + p), v[1] * (de + p), v[2] * (de + p)],
    ]
}

/// The element state of a cell: density, momentum, density energy.
fn cfd_state(vars: &[f64], nelr: usize, i: usize) -> (f64, [f64; 3], f64) {
    (
        vars[i],
        [vars[i + nelr], vars[i + 2 * nelr], vars[i + 3 * nelr]],
        vars[i + 4 * nelr],
    )
}

/// Velocity, speed squared, pressure and speed of sound of a state.
fn cfd_derived(density: f64, momentum: [f64; 3], density_energy: f64) -> ([f64; 3], f64, f64, f64) {
    let velocity = momentum.map(|m| m / density);
    let speed_sqd: f64 = velocity.iter().map(|v| v * v).sum();
    let gamma = f64::from(GAMMA);
    let pressure = (gamma - 1.0) * (density_energy - 0.5 * density * speed_sqd);
    let speed_of_sound = (gamma * pressure / density).sqrt();
    (velocity, speed_sqd, pressure, speed_of_sound)
}

/// Rodinia's cfd (euler3d, the finite-volume Euler solver): `cuda_initialize_variables` for the
/// variables, old variables and fluxes, then iterations of `cuda_compute_step_factor` and three
/// Runge-Kutta stages of `cuda_compute_flux` and `cuda_time_step`, with the old variables copied
/// on the device first, on 192-thread blocks over the padded element count nelr, the far field
/// in `__constant__` memory written as `cudaMemcpyToSymbol` does. The mesh is random (neighbours
/// by index, wing boundaries -1, far-field boundaries -2, small normals) in place of the 97K
/// element file; the padding elements copy the last element (main.c means to copy its normals
/// too but copies the last element's onto themselves, leaving the padding's unset).
fn cfd_euler3d(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (nel, iterations) = (1000usize, 3usize); // original: 97,046 elements, 2000 iterations
    let nelr = CFD_BLOCK * nel.div_ceil(CFD_BLOCK);
    let mut rng = Lcg::new(36);
    let mut areas = vec![0.0f32; nelr];
    let mut neighbours = vec![0i32; nelr * NNB];
    let mut normals = vec![0.0f32; nelr * NDIM * NNB];
    for i in 0..nel {
        areas[i] = rng.range(0.5, 1.5);
        for j in 0..NNB {
            neighbours[i + j * nelr] = match rng.below(10) {
                0 => -1,
                1 => -2,
                _ => ((i as u32 + 1 + rng.below(nel as u32 - 1)) % nel as u32) as i32,
            };
            for k in 0..NDIM {
                normals[i + (j + k * NNB) * nelr] = rng.range(-0.02, 0.02);
            }
        }
    }
    for i in nel..nelr {
        areas[i] = areas[nel - 1];
        for j in 0..NNB {
            neighbours[i + j * nelr] = neighbours[nel - 1 + j * nelr];
            for k in 0..NDIM {
                normals[i + (j + k * NNB) * nelr] = normals[nel - 1 + (j + k * NNB) * nelr];
            }
        }
    }
    let (ff, ff_flux) = cfd_far_field();
    let module = Module::from_source(CFD);
    let init = module.kernel("cuda_initialize_variables");
    let step_factor = module.kernel("cuda_compute_step_factor");
    let flux = module.kernel("cuda_compute_flux");
    let time_step = module.kernel("cuda_time_step");
    dev.copy_to_symbol(&module, "ff_variable", &ff)
        .map_err(fail("ff_variable"))?;
    let names = [
        "ff_flux_contribution_momentum_x",
        "ff_flux_contribution_momentum_y",
        "ff_flux_contribution_momentum_z",
        "ff_flux_contribution_density_energy",
    ];
    for (name, value) in names.iter().zip(&ff_flux) {
        dev.copy_to_symbol(&module, name, value)
            .map_err(fail(name))?;
    }
    let mut d_areas = upload(&dev, &areas, "areas")?;
    let mut d_neighbours = upload(&dev, &neighbours, "elements_surrounding_elements")?;
    let mut d_normals = upload(&dev, &normals, "normals")?;
    let mut d_vars = zeros::<f32>(&dev, nelr * NVAR, "variables")?;
    let mut d_old = zeros::<f32>(&dev, nelr * NVAR, "old_variables")?;
    let mut d_fluxes = zeros::<f32>(&dev, nelr * NVAR, "fluxes")?;
    let mut d_step = zeros::<f32>(&dev, nelr, "step_factors")?;
    let config = LaunchConfig::new((nelr / CFD_BLOCK) as u32, CFD_BLOCK as u32);
    let nelr_i = nelr as i32;
    for target in [&mut d_vars, &mut d_old, &mut d_fluxes] {
        // SAFETY: the grid has exactly nelr threads; each writes its element of the NVAR
        // planes of an nelr x NVAR array.
        unsafe { launch(&dev, &init, config, &mut [&mut Scalar(nelr_i), target]) }?;
    }
    for _ in 0..iterations {
        d_old
            .copy_from_device(&d_vars)
            .map_err(fail("old_variables"))?;
        // SAFETY: one thread per element of nelr: its variables, area and step factor.
        unsafe {
            launch(
                &dev,
                &step_factor,
                config,
                &mut [&mut Scalar(nelr_i), &mut d_vars, &mut d_areas, &mut d_step],
            )
        }?;
        for j in 0..RK as i32 {
            // SAFETY: one thread per element: its NNB neighbour indices (each an element
            // index below nel, or -1 / -2), normals and variables, and the neighbours'
            // variables; it writes its fluxes.
            unsafe {
                launch(
                    &dev,
                    &flux,
                    config,
                    &mut [
                        &mut Scalar(nelr_i),
                        &mut d_neighbours,
                        &mut d_normals,
                        &mut d_vars,
                        &mut d_fluxes,
                    ],
                )
            }?;
            // SAFETY: one thread per element, its entries of each array.
            unsafe {
                launch(
                    &dev,
                    &time_step,
                    config,
                    &mut [
                        &mut Scalar(j),
                        &mut Scalar(nelr_i),
                        &mut d_old,
                        &mut d_vars,
                        &mut d_step,
                        &mut d_fluxes,
                    ],
                )
            }?;
        }
    }
    let want = cfd_reference(
        &CfdMesh {
            nelr,
            areas: &areas,
            neighbours: &neighbours,
            normals: &normals,
        },
        &ff,
        &ff_flux,
        iterations,
    );
    // A few steps of f32 flux sums (mixed signs, values of order 1 to 4) against f64.
    check_close(
        "step_factors",
        &download(&d_step, "step_factors")?,
        &want.1,
        1e-5,
        1e-6,
    )?;
    check_close(
        "variables",
        &download(&d_vars, "variables")?,
        &want.0,
        1e-4,
        1e-4,
    )
}

/// The mesh arrays as euler3d.cu lays them out (element-major planes of nelr).
struct CfdMesh<'a> {
    nelr: usize,
    areas: &'a [f32],
    neighbours: &'a [i32],
    normals: &'a [f32],
}

/// The solver's iterations in f64: the final variables and step factors.
fn cfd_reference(
    mesh: &CfdMesh<'_>,
    ff: &[f32; NVAR],
    ff_flux: &[[f32; 3]; 4],
    iterations: usize,
) -> (Vec<f64>, Vec<f64>) {
    let nelr = mesh.nelr;
    let ff64 = ff.map(f64::from);
    let ff_flux = ff_flux.map(|v| v.map(f64::from));
    let mut vars: Vec<f64> = (0..nelr * NVAR).map(|q| ff64[q / nelr]).collect();
    let mut step = vec![0.0; nelr];
    for _ in 0..iterations {
        let old = vars.clone();
        for (i, s) in step.iter_mut().enumerate() {
            let (density, momentum, de) = cfd_state(&vars, nelr, i);
            let (_, speed_sqd, _, c) = cfd_derived(density, momentum, de);
            *s = 0.5 / (f64::from(mesh.areas[i]).sqrt() * (speed_sqd.sqrt() + c));
        }
        for j in 0..RK {
            let fluxes = cfd_fluxes(mesh, &vars, &ff64, &ff_flux);
            for i in 0..nelr {
                let factor = step[i] / (RK + 1 - j) as f64;
                for v in 0..NVAR {
                    vars[i + v * nelr] = old[i + v * nelr] + factor * fluxes[i + v * nelr];
                }
            }
        }
    }
    (vars, step)
}

/// `cuda_compute_flux` for every element, in f64.
fn cfd_fluxes(
    mesh: &CfdMesh<'_>,
    vars: &[f64],
    ff: &[f64; NVAR],
    ff_flux: &[[f64; 3]; 4],
) -> Vec<f64> {
    let nelr = mesh.nelr;
    let mut out = vec![0.0; nelr * NVAR];
    for i in 0..nelr {
        let (density_i, momentum_i, de_i) = cfd_state(vars, nelr, i);
        let (velocity_i, speed_sqd_i, pressure_i, c_i) = cfd_derived(density_i, momentum_i, de_i);
        let fc_i = flux_contribution(momentum_i, de_i, pressure_i, velocity_i);
        let speed_i = speed_sqd_i.sqrt();
        let (mut f_density, mut f_momentum, mut f_de) = (0.0, [0.0f64; 3], 0.0);
        for j in 0..NNB {
            let nb = mesh.neighbours[i + j * nelr];
            let normal: [f64; 3] =
                std::array::from_fn(|k| f64::from(mesh.normals[i + (j + k * NNB) * nelr]));
            let normal_len = normal.iter().map(|n| n * n).sum::<f64>().sqrt();
            if nb >= 0 {
                let nb = nb as usize;
                let (density_nb, momentum_nb, de_nb) = cfd_state(vars, nelr, nb);
                let (velocity_nb, speed_sqd_nb, pressure_nb, c_nb) =
                    cfd_derived(density_nb, momentum_nb, de_nb);
                let fc_nb = flux_contribution(momentum_nb, de_nb, pressure_nb, velocity_nb);
                let factor = -normal_len * 0.2 * 0.5 * (speed_i + speed_sqd_nb.sqrt() + c_i + c_nb);
                f_density += factor * (density_i - density_nb);
                f_de += factor * (de_i - de_nb);
                for d in 0..3 {
                    f_momentum[d] += factor * (momentum_i[d] - momentum_nb[d]);
                }
                for (axis, &n) in normal.iter().enumerate() {
                    let factor = 0.5 * n;
                    f_density += factor * (momentum_nb[axis] + momentum_i[axis]);
                    f_de += factor * (fc_nb[3][axis] + fc_i[3][axis]);
                    for d in 0..3 {
                        f_momentum[d] += factor * (fc_nb[d][axis] + fc_i[d][axis]);
                    }
                }
            } else if nb == -1 {
                for d in 0..3 {
                    f_momentum[d] += normal[d] * pressure_i;
                }
            } else if nb == -2 {
                for (axis, &n) in normal.iter().enumerate() {
                    let factor = 0.5 * n;
                    f_density += factor * (ff[1 + axis] + momentum_i[axis]);
                    f_de += factor * (ff_flux[3][axis] + fc_i[3][axis]);
                    for d in 0..3 {
                        f_momentum[d] += factor * (ff_flux[d][axis] + fc_i[d][axis]);
                    }
                }
            }
        }
        out[i] = f_density;
        for d in 0..3 {
            out[i + (1 + d) * nelr] = f_momentum[d];
        }
        out[i + 4 * nelr] = f_de;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// lavaMD
// ---------------------------------------------------------------------------------------------

/// main.h's particles per box and block size.
const PAR_PER_BOX: usize = 100;
const LAVA_THREADS: u32 = 128;

/// main.h's `FOUR_VECTOR` (`fp` is double).
#[derive(Debug, Clone, Copy, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct FourVector {
    v: f64,
    x: f64,
    y: f64,
    z: f64,
}

/// main.h's `nei_str`.
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct NeiStr {
    x: i32,
    y: i32,
    z: i32,
    number: i32,
    offset: i64,
}

/// main.h's `box_str` (656 bytes), with C's padding after `nn` spelled out.
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct BoxStr {
    x: i32,
    y: i32,
    z: i32,
    number: i32,
    offset: i64,
    nn: i32,
    _pad: i32,
    nei: [NeiStr; 26],
}

/// main.h's `par_str`, passed by value.
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct ParStr {
    alpha: f64,
}

/// main.h's `dim_str`, passed by value.
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct DimStr {
    cur_arg: i32,
    arch_arg: i32,
    cores_arg: i32,
    boxes1d_arg: i32,
    number_boxes: i64,
    box_mem: i64,
    space_elem: i64,
    space_mem: i64,
    space_mem2: i64,
}

/// Rodinia's lavaMD: `kernel_gpu_cuda`, one 128-thread block per box, each thread taking home
/// particles by strides of 128 and summing the potential and forces of the particles of the
/// home box and its neighbours (staged in shared memory), with `par_str` and `dim_str` passed by
/// value and the boxes and neighbour lists built as main.c builds them, on `-boxes1d 3`.
fn lava_md(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let boxes1d = 3usize; // original: 10
    let alpha = 0.5f64;
    let number_boxes = boxes1d.pow(3);
    let space_elem = number_boxes * PAR_PER_BOX;
    let mut boxes = Vec::with_capacity(number_boxes);
    for i in 0..boxes1d as i32 {
        for j in 0..boxes1d as i32 {
            for k in 0..boxes1d as i32 {
                let number = boxes.len() as i32;
                let mut b = BoxStr {
                    x: k,
                    y: j,
                    z: i,
                    number,
                    offset: i64::from(number) * PAR_PER_BOX as i64,
                    nn: 0,
                    _pad: 0,
                    nei: [NeiStr {
                        x: 0,
                        y: 0,
                        z: 0,
                        number: 0,
                        offset: 0,
                    }; 26],
                };
                let inside = |v: i32| v >= 0 && v < boxes1d as i32;
                for l in -1..2 {
                    for m in -1..2 {
                        for n in -1..2 {
                            if !(inside(i + l) && inside(j + m) && inside(k + n))
                                || (l == 0 && m == 0 && n == 0)
                            {
                                continue;
                            }
                            let b1 = boxes1d as i32;
                            let number = (i + l) * b1 * b1 + (j + m) * b1 + (k + n);
                            b.nei[b.nn as usize] = NeiStr {
                                x: k + n,
                                y: j + m,
                                z: i + l,
                                number,
                                offset: i64::from(number) * PAR_PER_BOX as i64,
                            };
                            b.nn += 1;
                        }
                    }
                }
                boxes.push(b);
            }
        }
    }
    let mut rng = Lcg::new(37);
    // main.c: (rand() % 10 + 1) / 10.0 for every component and charge.
    let mut tenth = || f64::from(rng.below(10) + 1) / 10.0;
    let rv: Vec<FourVector> = (0..space_elem)
        .map(|_| FourVector {
            v: tenth(),
            x: tenth(),
            y: tenth(),
            z: tenth(),
        })
        .collect();
    let qv: Vec<f64> = (0..space_elem).map(|_| tenth()).collect();
    let dim = DimStr {
        cur_arg: 1,
        arch_arg: 0,
        cores_arg: 1,
        boxes1d_arg: boxes1d as i32,
        number_boxes: number_boxes as i64,
        box_mem: (number_boxes * std::mem::size_of::<BoxStr>()) as i64,
        space_elem: space_elem as i64,
        space_mem: (space_elem * std::mem::size_of::<FourVector>()) as i64,
        space_mem2: (space_elem * 8) as i64,
    };
    let mut d_box = upload(&dev, &boxes, "box")?;
    let mut d_rv = upload(&dev, &rv, "rv")?;
    let mut d_qv = upload(&dev, &qv, "qv")?;
    let mut d_fv = zeros::<FourVector>(&dev, space_elem, "fv")?;
    let kernel = Kernel::from_source(LAVAMD, "kernel_gpu_cuda");
    // SAFETY: block bx < number_boxes handles box bx; its threads read the particles of the
    // box and of its nn neighbours (offsets of boxes inside the space of number_boxes x 100
    // particles) and write the home box's forces.
    unsafe {
        launch(
            &dev,
            &kernel,
            LaunchConfig::new(number_boxes as u32, LAVA_THREADS),
            &mut [
                &mut Scalar(ParStr { alpha }),
                &mut Scalar(dim),
                &mut d_box,
                &mut d_rv,
                &mut d_qv,
                &mut d_fv,
            ],
        )
    }?;
    let a2 = 2.0 * alpha * alpha;
    let mut want = vec![[0.0f64; 4]; space_elem];
    let mut scale = vec![0.0f64; space_elem];
    for (bx, b) in boxes.iter().enumerate() {
        let home = b.offset as usize;
        let others =
            std::iter::once(bx).chain(b.nei[..b.nn as usize].iter().map(|n| n.number as usize));
        for other in others {
            let first = boxes[other].offset as usize;
            for i in home..home + PAR_PER_BOX {
                let ra = rv[i];
                for j in first..first + PAR_PER_BOX {
                    let rb = rv[j];
                    let r2 = ra.v + rb.v - (ra.x * rb.x + ra.y * rb.y + ra.z * rb.z);
                    let vij = (-(a2 * r2)).exp();
                    let fs = 2.0 * vij;
                    let d = [ra.x - rb.x, ra.y - rb.y, ra.z - rb.z];
                    let f = &mut want[i];
                    f[0] += qv[j] * vij;
                    f[1] += qv[j] * fs * d[0];
                    f[2] += qv[j] * fs * d[1];
                    f[3] += qv[j] * fs * d[2];
                    scale[i] += qv[j] * fs;
                }
            }
        }
    }
    let got = download(&d_fv, "fv")?;
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let g = [g.v, g.x, g.y, g.z];
        for c in 0..4 {
            // Double sums of up to 2700 terms (the forces' of mixed sign): errors far below
            // 1e-10 of the terms' total size.
            let within = (g[c] - w[c]).abs() <= 1e-10 * scale[i].max(1.0);
            ensure!(
                within,
                "fv[{i}] component {c}: {}, reference {}",
                g[c],
                w[c]
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// srad_v1
// ---------------------------------------------------------------------------------------------

/// define.c's NUMBER_THREADS.
const SRAD_THREADS: usize = 512;

/// Rodinia's srad_v1 (speckle reducing anisotropic diffusion): `extract`, then iterations of
/// `prepare`, the `reduce` passes the host loops over (until one block is left), the host's
/// statistics from the first sums, `srad` and `srad2`, then `compress`, on 512-thread blocks, as
/// main.cu runs them.
///
/// The reduction is the original's, bug included: a partial last block adds its remainder from
/// `d_sums[i]` without the pass's multiplier, so from the second pass on it adds raw elements in
/// place of the partial sums of the blocks that did not fit its tree. The host's totals (and so
/// q0sqr) are those sums, deterministic, and the reference computes the same ones.
fn srad_v1(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (nr, nc, niter, lambda) = (50usize, 46usize, 4usize, 0.5f32); // original: 502 x 458, 100
    let ne = nr * nc;
    let blocks = ne.div_ceil(SRAD_THREADS);
    let mut rng = Lcg::new(38);
    let image: Vec<f32> = (0..ne).map(|_| (60 + rng.below(141)) as f32).collect();
    // main.cu's neighbour indices, clamped at the edges.
    let i_n: Vec<i32> = (0..nr as i32).map(|i| (i - 1).max(0)).collect();
    let i_s: Vec<i32> = (0..nr as i32).map(|i| (i + 1).min(nr as i32 - 1)).collect();
    let j_w: Vec<i32> = (0..nc as i32).map(|j| (j - 1).max(0)).collect();
    let j_e: Vec<i32> = (0..nc as i32).map(|j| (j + 1).min(nc as i32 - 1)).collect();
    let module = Module::from_source(SRAD_V1);
    let [extract, prepare, reduce, srad, srad2, compress] =
        ["extract", "prepare", "reduce", "srad", "srad2", "compress"].map(|n| module.kernel(n));
    let mut d_i = upload(&dev, &image, "I")?;
    let mut d_in = upload(&dev, &i_n, "iN")?;
    let mut d_is = upload(&dev, &i_s, "iS")?;
    let mut d_je = upload(&dev, &j_e, "jE")?;
    let mut d_jw = upload(&dev, &j_w, "jW")?;
    let mut d_sums = zeros::<f32>(&dev, ne, "sums")?;
    let mut d_sums2 = zeros::<f32>(&dev, ne, "sums2")?;
    let mut d_dn = zeros::<f32>(&dev, ne, "dN")?;
    let mut d_ds = zeros::<f32>(&dev, ne, "dS")?;
    let mut d_dw = zeros::<f32>(&dev, ne, "dW")?;
    let mut d_de = zeros::<f32>(&dev, ne, "dE")?;
    let mut d_c = zeros::<f32>(&dev, ne, "c")?;
    let full = LaunchConfig::new(blocks as u32, SRAD_THREADS as u32);
    let ne_l = ne as i64;
    // SAFETY: (every whole-image kernel below) threads with ei >= Ne do nothing; the others
    // work on element ei of the Ne-long arrays, srad and srad2 also on its neighbours (row and
    // column indices from iN, iS, jE, jW, all inside the image).
    unsafe { launch(&dev, &extract, full, &mut [&mut Scalar(ne_l), &mut d_i]) }?;
    let mut want = SradReference::new(&image, nr, nc);
    for iteration in 0..niter {
        // SAFETY: as above.
        unsafe {
            launch(
                &dev,
                &prepare,
                full,
                &mut [&mut Scalar(ne_l), &mut d_i, &mut d_sums, &mut d_sums2],
            )
        }?;
        let (mut blocks2, mut no, mut mul) = (blocks, ne, 1usize);
        while blocks2 != 0 {
            // SAFETY: thread ei < no reads sums[ei * mul] (below Ne: mul grows with the
            // blocks); the last busy thread of a partial block reads sums[i] for i below
            // bx * 512 + nf <= Ne; each block's sum goes to sums[bx * mul * 512] < Ne.
            unsafe {
                launch(
                    &dev,
                    &reduce,
                    LaunchConfig::new(blocks2 as u32, SRAD_THREADS as u32),
                    &mut [
                        &mut Scalar(ne_l),
                        &mut Scalar(no as i32),
                        &mut Scalar(mul as i32),
                        &mut d_sums,
                        &mut d_sums2,
                    ],
                )
            }?;
            no = blocks2;
            if blocks2 == 1 {
                blocks2 = 0;
            } else {
                mul *= SRAD_THREADS;
                blocks2 = blocks2.div_ceil(SRAD_THREADS);
            }
        }
        let total = download(&d_sums, "sums")?[0];
        let total2 = download(&d_sums2, "sums2")?[0];
        let (want_total, want_total2) = want.totals();
        // Sums of 2300 f32 values of order 1 to 5, in two orders.
        check_close(
            &format!("total (iteration {iteration})"),
            &[total, total2],
            &[want_total, want_total2],
            1e-5,
            0.0,
        )?;
        // main.cu's statistics, in float.
        let mean = total / ne as f32;
        let mean2 = mean * mean;
        let var = (total2 / ne as f32) - mean2;
        let q0sqr = var / mean2;
        // SAFETY: as above.
        unsafe {
            launch(
                &dev,
                &srad,
                full,
                &mut [
                    &mut Scalar(lambda),
                    &mut Scalar(nr as i32),
                    &mut Scalar(nc as i32),
                    &mut Scalar(ne_l),
                    &mut d_in,
                    &mut d_is,
                    &mut d_je,
                    &mut d_jw,
                    &mut d_dn,
                    &mut d_ds,
                    &mut d_de,
                    &mut d_dw,
                    &mut Scalar(q0sqr),
                    &mut d_c,
                    &mut d_i,
                ],
            )
        }?;
        // SAFETY: as above.
        unsafe {
            launch(
                &dev,
                &srad2,
                full,
                &mut [
                    &mut Scalar(lambda),
                    &mut Scalar(nr as i32),
                    &mut Scalar(nc as i32),
                    &mut Scalar(ne_l),
                    &mut d_in,
                    &mut d_is,
                    &mut d_je,
                    &mut d_jw,
                    &mut d_dn,
                    &mut d_ds,
                    &mut d_de,
                    &mut d_dw,
                    &mut d_c,
                    &mut d_i,
                ],
            )
        }?;
        want.step(f64::from(lambda), q0sqr);
    }
    // SAFETY: as above.
    unsafe { launch(&dev, &compress, full, &mut [&mut Scalar(ne_l), &mut d_i]) }?;
    let want_image: Vec<f64> = want.image.iter().map(|&v| v.ln() * 255.0).collect();
    // Four diffusion steps in f32 on values of order 1, then log x 255.
    check_close("c", &download(&d_c, "c")?, &want.c, 1e-4, 1e-5)?;
    check_close("image", &download(&d_i, "image")?, &want_image, 1e-5, 1e-3)
}

/// srad_v1 in f64: the extracted image, its last diffusion coefficients.
struct SradReference {
    nr: usize,
    nc: usize,
    image: Vec<f64>,
    c: Vec<f64>,
}

impl SradReference {
    fn new(image: &[f32], nr: usize, nc: usize) -> SradReference {
        SradReference {
            nr,
            nc,
            image: image
                .iter()
                .map(|&v| (f64::from(v) / 255.0).exp())
                .collect(),
            c: vec![0.0; image.len()],
        }
    }

    /// The host's totals: `prepare` and the `reduce` passes, with the kernel's indexing (its
    /// partial-block remainder included).
    fn totals(&self) -> (f64, f64) {
        let ne = self.image.len();
        let mut sums = self.image.clone();
        let mut sums2: Vec<f64> = self.image.iter().map(|v| v * v).collect();
        let (mut blocks, mut no, mut mul) = (ne.div_ceil(SRAD_THREADS), ne, 1usize);
        loop {
            for bx in 0..blocks {
                let nf = SRAD_THREADS - (blocks * SRAD_THREADS - no);
                let busy = if nf == SRAD_THREADS || bx != blocks - 1 {
                    SRAD_THREADS
                } else {
                    // The largest power of two (from 2) at most nf.
                    (1..=9)
                        .map(|p| 1usize << p)
                        .filter(|&p| nf >= p)
                        .max()
                        .unwrap_or(0)
                };
                let base = bx * SRAD_THREADS;
                let mut s: f64 = (base..base + busy).map(|ei| sums[ei * mul]).sum();
                let mut s2: f64 = (base..base + busy).map(|ei| sums2[ei * mul]).sum();
                if busy < SRAD_THREADS {
                    // The remainder, read without the multiplier.
                    s += sums[base + busy..base + nf].iter().sum::<f64>();
                    s2 += sums2[base + busy..base + nf].iter().sum::<f64>();
                }
                sums[bx * mul * SRAD_THREADS] = s;
                sums2[bx * mul * SRAD_THREADS] = s2;
            }
            if blocks == 1 {
                return (sums[0], sums2[0]);
            }
            no = blocks;
            mul *= SRAD_THREADS;
            blocks = blocks.div_ceil(SRAD_THREADS);
        }
    }

    /// One `srad` and `srad2` step with the host's q0sqr.
    fn step(&mut self, lambda: f64, q0sqr: f32) {
        let (nr, nc) = (self.nr, self.nc);
        let q0 = f64::from(q0sqr);
        let img = &self.image;
        let at = |r: usize, c: usize| img[r + nr * c];
        let mut d = vec![[0.0f64; 4]; nr * nc]; // N, S, W, E
        for col in 0..nc {
            for row in 0..nr {
                let jc = at(row, col);
                let dn = at(row.saturating_sub(1), col) - jc;
                let ds = at((row + 1).min(nr - 1), col) - jc;
                let dw = at(row, col.saturating_sub(1)) - jc;
                let de = at(row, (col + 1).min(nc - 1)) - jc;
                let g2 = (dn * dn + ds * ds + dw * dw + de * de) / (jc * jc);
                let l = (dn + ds + dw + de) / jc;
                let num = 0.5 * g2 - (1.0 / 16.0) * (l * l);
                let den = 1.0 + 0.25 * l;
                let qsqr = num / (den * den);
                let den = (qsqr - q0) / (q0 * (1.0 + q0));
                self.c[row + nr * col] = (1.0 / (1.0 + den)).clamp(0.0, 1.0);
                d[row + nr * col] = [dn, ds, dw, de];
            }
        }
        let c = &self.c;
        for col in 0..nc {
            for row in 0..nr {
                let ei = row + nr * col;
                let cn = c[ei];
                let cs = c[(row + 1).min(nr - 1) + nr * col];
                let cw = c[ei];
                let ce = c[row + nr * (col + 1).min(nc - 1)];
                let [dn, ds, dw, de] = d[ei];
                let div = cn * dn + cs * ds + cw * dw + ce * de;
                self.image[ei] += 0.25 * lambda * div;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// huffman
// ---------------------------------------------------------------------------------------------

/// parameters.h's NUM_SYMBOLS, and the encoder's block size.
const NUM_SYMBOLS: usize = 256;
const VLC_THREADS: usize = 256;

/// Huffman code lengths of the byte frequencies `freqs` (0 for absent bytes), by the usual
/// merging of the two lightest subtrees.
fn huffman_lengths(freqs: &[u64; NUM_SYMBOLS]) -> [u32; NUM_SYMBOLS] {
    // (weight, tie-break order, symbols below)
    let mut heap: Vec<(u64, usize, Vec<usize>)> = freqs
        .iter()
        .enumerate()
        .filter(|&(_, &f)| f > 0)
        .map(|(s, &f)| (f, s, vec![s]))
        .collect();
    let mut lengths = [0u32; NUM_SYMBOLS];
    let mut order = NUM_SYMBOLS;
    while heap.len() > 1 {
        heap.sort_by_key(|e| std::cmp::Reverse((e.0, e.1)));
        let (wa, _, a) = heap.pop().unwrap_or_default();
        let (wb, _, b) = heap.pop().unwrap_or_default();
        for &s in a.iter().chain(&b) {
            lengths[s] += 1;
        }
        heap.push((wa + wb, order, [a, b].concat()));
        order += 1;
    }
    lengths
}

/// Canonical codewords for `lengths` (right-aligned, as `gm_codewords` holds them).
fn canonical_codes(lengths: &[u32; NUM_SYMBOLS]) -> [u32; NUM_SYMBOLS] {
    let mut symbols: Vec<usize> = (0..NUM_SYMBOLS).filter(|&s| lengths[s] > 0).collect();
    symbols.sort_by_key(|&s| (lengths[s], s));
    let mut codes = [0u32; NUM_SYMBOLS];
    let (mut code, mut len) = (0u32, 0u32);
    for s in symbols {
        code <<= lengths[s] - len;
        len = lengths[s];
        codes[s] = code;
        code += 1;
    }
    codes
}

/// Appends the codes of `words` (bytes from the most significant) to a bit stream packed into
/// 32-bit words from their most significant bit; returns the stream's length in bits.
fn encode_bits(
    words: &[u32],
    codes: &[u32; NUM_SYMBOLS],
    lengths: &[u32; NUM_SYMBOLS],
    out: &mut [u32],
) -> usize {
    let mut bit = 0usize;
    for &w in words {
        for i in 0..4 {
            let s = (w >> ((3 - i) * 8)) as u8 as usize;
            for b in (0..lengths[s]).rev() {
                if (codes[s] >> b) & 1 == 1 {
                    out[bit / 32] |= 1 << (31 - bit % 32);
                }
                bit += 1;
            }
        }
    }
    bit
}

/// Data for the encoder: `num_blocks` x 256 words of bytes drawn with `weights` (symbol s < 256
/// is the byte (5 s + 3) mod 256), and the Huffman code of their byte frequencies (as main_test_cu.cu builds one
/// from its input file), with lengths and right-aligned codewords.
struct VlcData {
    data: Vec<u32>,
    codes: [u32; NUM_SYMBOLS],
    lengths: [u32; NUM_SYMBOLS],
}

fn vlc_data(seed: u64, num_blocks: usize, weights: &[u32]) -> Result<VlcData, String> {
    let mut rng = Lcg::new(seed);
    let total: u32 = weights.iter().sum();
    let mut byte = || {
        let mut r = rng.below(total);
        let mut s = 0;
        while r >= weights[s] {
            r -= weights[s];
            s += 1;
        }
        ((s * 5 + 3) % NUM_SYMBOLS) as u32
    };
    let data: Vec<u32> = (0..num_blocks * VLC_THREADS)
        .map(|_| (0..4).fold(0u32, |w, _| (w << 8) | byte()))
        .collect();
    let mut freqs = [0u64; NUM_SYMBOLS];
    for &w in &data {
        for i in 0..4 {
            freqs[((w >> (8 * i)) & 0xff) as usize] += 1;
        }
    }
    let lengths = huffman_lengths(&freqs);
    ensure!(
        lengths.iter().all(|&l| l <= 16),
        "a codeword longer than the kernel's 16 bits"
    );
    Ok(VlcData {
        data,
        codes: canonical_codes(&lengths),
        lengths,
    })
}

impl VlcData {
    /// The code bits of each word.
    fn word_bits(&self) -> impl Iterator<Item = u32> + '_ {
        self.data.iter().map(|&w| {
            (0..4)
                .map(|i| self.lengths[((w >> (8 * i)) & 0xff) as usize])
                .sum()
        })
    }
}

/// The encoder's device outputs: each block's stream (`out`) and its length in bits
/// (`outidx`), with their expected values.
#[allow(
    dead_code,
    reason = "read by huffman_pack2 only, out of the case list until the simulator shifts by 32 as GPUs do"
)]
struct VlcEncoded {
    out: DeviceArray<u32>,
    outidx: DeviceArray<u32>,
    bits: Vec<u32>,
}

/// `vlc_encode_kernel_sm64huff` on main_test_cu.cu's launch (one 256-thread block per 256
/// words, the codeword table, lengths and scan array in 3 KiB of dynamic shared memory), its
/// outputs checked.
fn vlc_encode(dev: &Device, module: &Module, input: &VlcData) -> Result<VlcEncoded, String> {
    let num_elements = input.data.len();
    let num_blocks = num_elements / VLC_THREADS;
    let mut d_data = upload(dev, &input.data, "sourceData")?;
    let mut d_codes = upload(dev, &input.codes, "codewords")?;
    let mut d_lengths = upload(dev, &input.lengths, "codewordlens")?;
    let mut d_cw32 = zeros::<u32>(dev, num_elements, "cw32")?;
    let mut d_cw32len = zeros::<u32>(dev, num_elements, "cw32len")?;
    let mut d_cw32idx = zeros::<u32>(dev, num_elements, "cw32idx")?;
    let mut d_out = zeros::<u32>(dev, num_elements, "destData")?;
    let mut d_outidx = zeros::<u32>(dev, num_blocks, "cindex")?;
    // Each block's stream, and its length in bits.
    let mut want_out = vec![0u32; num_elements];
    let mut bits = vec![0u32; num_blocks];
    for (b, block_bits) in bits.iter_mut().enumerate() {
        let range = b * VLC_THREADS..(b + 1) * VLC_THREADS;
        let mut stream = vec![0u32; 2 * VLC_THREADS + 1];
        let n = encode_bits(
            &input.data[range.clone()],
            &input.codes,
            &input.lengths,
            &mut stream,
        );
        // The block's scan array holds its whole stream (kc + 2 < 256 words).
        ensure!(
            n < 32 * (VLC_THREADS - 2),
            "block {b}'s code does not fit its 256 words"
        );
        *block_bits = n as u32;
        // out[kn] = as[k] for k <= kcmax = bits / 32.
        want_out[range.start..range.start + n / 32 + 1].copy_from_slice(&stream[..n / 32 + 1]);
    }
    // CACHECWLUT: the codewords, their lengths and the scan array.
    let sm_size = 2 * NUM_SYMBOLS * 4 + VLC_THREADS * 4;
    // SAFETY: thread kn of block b reads data[kn] (num_blocks x 256) and the 256-entry tables,
    // and works in the block's 3 x 256 words of dynamic shared memory (its stream's words
    // kc + 2 < 256, checked above); it writes out[kn] (for k <= kcmax) and outidx[b].
    unsafe {
        launch(
            dev,
            &module.kernel("vlc_encode_kernel_sm64huff"),
            LaunchConfig::new(num_blocks as u32, VLC_THREADS as u32).with_shared_bytes(sm_size),
            &mut [
                &mut d_data,
                &mut d_codes,
                &mut d_lengths,
                &mut d_cw32,
                &mut d_cw32len,
                &mut d_cw32idx,
                &mut d_out,
                &mut d_outidx,
            ],
        )
    }?;
    check_equal("outidx", &download(&d_outidx, "outidx")?, &bits)?;
    check_equal("out", &download(&d_out, "out")?, &want_out)?;
    Ok(VlcEncoded {
        out: d_out,
        outidx: d_outidx,
        bits,
    })
}

/// Rodinia's huffman (PAVLE), the encoder: `vlc_encode_kernel_sm64huff` (each 256-thread
/// block encodes 256 words, four bytes each: the codeword table cached in dynamic shared
/// memory, the bit offsets by a work-efficient scan with `unsigned char` indices, the codes
/// or-ed into shared memory with atomics, in up to three parts per word), on data whose words
/// take at most 32 code bits (a skewed distribution over 48 byte values, codes of 2 to 11
/// bits), so that no word reaches the third part. `huffman_vlc_encode_long_codes` has words
/// over 32 bits.
fn huffman_vlc_encode(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let weights: Vec<u32> = (0..48).map(|s| 1 + 4000 / (1 + s * s / 2)).collect();
    let input = vlc_data(39, 32, &weights)?; // original: 1024 blocks without an input file
    ensure!(
        input.word_bits().all(|b| b <= 32),
        "a word of more than 32 code bits"
    );
    vlc_encode(&dev, &Module::from_source(HUFFMAN), &input).map(drop)
}

/// The encoder on data with many words of more than 32 code bits (one byte value takes 2 bytes
/// in 7, the rest are spread evenly over 250 values with codes of 8 or 9 bits): those words
/// take the kernel's second part with a full 32-bit mask, `(1<<wrbits)-1` with wrbits = 32,
/// and its third part.
fn huffman_vlc_encode_long_codes(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let weights: Vec<u32> = (0..251).map(|s| if s == 0 { 100 } else { 1 }).collect();
    let input = vlc_data(44, 32, &weights)?;
    let long = input.word_bits().filter(|&b| b > 32).count();
    ensure!(long >= 10, "only {long} words of more than 32 code bits");
    vlc_encode(&dev, &Module::from_source(HUFFMAN), &input).map(drop)
}

/// Rodinia's huffman, the packing: the encoder's block streams as in `huffman_vlc_encode`,
/// then `pack2` (16-thread blocks, one thread per encoded block, which copies its block's
/// stream to the block's bit offset, or-ing the words it shares with its neighbours), the
/// result compared with the CPU encoder's single stream. The exclusive scan of the blocks' bit
/// counts between the two kernels, which the original runs with a separate scan kernel (not in
/// the corpus), is done here on the host.
fn huffman_pack2(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let weights: Vec<u32> = (0..48).map(|s| 1 + 4000 / (1 + s * s / 2)).collect();
    let input = vlc_data(39, 32, &weights)?;
    let num_elements = input.data.len();
    let num_blocks = num_elements / VLC_THREADS;
    let module = Module::from_source(HUFFMAN);
    let mut encoded = vlc_encode(&dev, &module, &input)?;
    // The prescan: each block's bit offset in the packed stream.
    let offsets: Vec<u32> = encoded
        .bits
        .iter()
        .scan(0u32, |sum, &b| {
            let start = *sum;
            *sum += b;
            Some(start)
        })
        .collect();
    ensure!(
        offsets.iter().filter(|&&o| o % 32 == 0).count() > 1,
        "too few blocks starting on a word boundary"
    );
    let mut d_cindex2 = upload(&dev, &offsets, "cindex2")?;
    let mut d_packed = zeros::<u32>(&dev, num_elements, "destDataPacked")?;
    // SAFETY: thread b < num_blocks reads block b's words (256 from b x 256) and writes the
    // packed words from its bit offset on, inside the total length (below num_elements words).
    unsafe {
        launch(
            &dev,
            &module.kernel("pack2"),
            LaunchConfig::new((num_blocks / 16) as u32, 16),
            &mut [
                &mut encoded.out,
                &mut encoded.outidx,
                &mut d_cindex2,
                &mut d_packed,
                &mut Scalar((num_elements / num_blocks) as u32),
            ],
        )
    }?;
    // The CPU encoder's output: the whole data's codes in one stream.
    let mut want_packed = vec![0u32; num_elements];
    encode_bits(&input.data, &input.codes, &input.lengths, &mut want_packed);
    check_equal("packed", &download(&d_packed, "packed")?, &want_packed)
}

// ---------------------------------------------------------------------------------------------
// hotspot3D
// ---------------------------------------------------------------------------------------------

/// Rodinia's hotspot3D (opt1): `hotspotOpt1`, a 7-point stencil marching up the layers in
/// registers, on 64 x 4 blocks over the (nx / 64, ny / 4) grid, with the buffers swapped after
/// each iteration as `hotspot_opt1` does, and the coefficients 3D.cu derives from the chip's
/// dimensions.
fn hotspot_3d(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (nx, ny, nz, iterations) = (64usize, 64usize, 4usize, 6usize); // original: 512 x 512 x 8, 100
    // 3D.cu's constants and main's derivation (float variables, double literals).
    let (t_chip, chip_height, chip_width) = (0.0005f32, 0.016f32, 0.016f32);
    let (factor_chip, spec_heat_si, k_si, max_pd, precision) =
        (0.5f64, 1.75e6f64, 100i32, 3.0e6f64, 0.001f64);
    let dx = chip_height / ny as f32;
    let dy = chip_width / nx as f32;
    let dz = t_chip / nz as f32;
    let cap =
        (factor_chip * spec_heat_si * f64::from(t_chip) * f64::from(dx) * f64::from(dy)) as f32;
    let rx = (f64::from(dy) / (2.0 * f64::from(k_si) * f64::from(t_chip) * f64::from(dx))) as f32;
    let ry = (f64::from(dx) / (2.0 * f64::from(k_si) * f64::from(t_chip) * f64::from(dy))) as f32;
    let rz = dz / (k_si as f32 * dx * dy);
    let max_slope = max_pd / (factor_chip * f64::from(t_chip) * spec_heat_si);
    let dt = (precision / max_slope) as f32;
    let step_div_cap = dt / cap;
    let (ce, cn, ct) = (step_div_cap / rx, step_div_cap / ry, step_div_cap / rz);
    let cc = (1.0 - (2.0 * f64::from(ce) + 2.0 * f64::from(cn) + 3.0 * f64::from(ct))) as f32;
    let mut rng = Lcg::new(40);
    let size = nx * ny * nz;
    let power: Vec<f32> = (0..size).map(|_| rng.range(0.0, 0.01)).collect();
    let temp: Vec<f32> = (0..size).map(|_| rng.range(320.0, 340.0)).collect();
    let mut d_p = upload(&dev, &power, "p")?;
    let mut d_in = upload(&dev, &temp, "tIn")?;
    let mut d_out = zeros::<f32>(&dev, size, "tOut")?;
    let kernel = Kernel::from_source(HOTSPOT_3D, "hotspotOpt1");
    for _ in 0..iterations {
        // SAFETY: the grid covers nx x ny exactly (nx a multiple of 64, ny of 4); each thread
        // walks its column through the nz layers, reading its neighbours (clamped at the
        // edges) and the layers above and below (nz >= 2), all inside nx x ny x nz.
        unsafe {
            launch(
                &dev,
                &kernel,
                LaunchConfig::new(((nx / 64) as u32, (ny / 4) as u32), (64, 4)),
                &mut [
                    &mut d_p,
                    &mut d_in,
                    &mut d_out,
                    &mut Scalar(step_div_cap),
                    &mut Scalar(nx as i32),
                    &mut Scalar(ny as i32),
                    &mut Scalar(nz as i32),
                    &mut Scalar(ce),
                    &mut Scalar(ce),
                    &mut Scalar(cn),
                    &mut Scalar(cn),
                    &mut Scalar(ct),
                    &mut Scalar(ct),
                    &mut Scalar(cc),
                ],
            )
        }?;
        std::mem::swap(&mut d_in, &mut d_out);
    }
    let coefficient = |c: f32| f64::from(c);
    let (ce, cn, ct, cc, sdc) = (
        coefficient(ce),
        coefficient(cn),
        coefficient(ct),
        coefficient(cc),
        coefficient(step_div_cap),
    );
    let mut t = widen(&temp);
    for _ in 0..iterations {
        let mut next = vec![0.0; size];
        for z in 0..nz {
            for y in 0..ny {
                for x in 0..nx {
                    let c = x + y * nx + z * nx * ny;
                    let w = if x == 0 { c } else { c - 1 };
                    let e = if x == nx - 1 { c } else { c + 1 };
                    let n = if y == 0 { c } else { c - nx };
                    let s = if y == ny - 1 { c } else { c + nx };
                    let b = if z == 0 { c } else { c - nx * ny };
                    let top = if z == nz - 1 { c } else { c + nx * ny };
                    next[c] = cc * t[c]
                        + ce * (t[w] + t[e])
                        + cn * (t[s] + t[n])
                        + ct * (t[b] + t[top])
                        + sdc * f64::from(power[c])
                        + ct * 80.0;
                }
            }
        }
        t = next;
    }
    // Temperatures near 330 after six f32 stencil steps.
    check_close(
        "temperature",
        &download(&d_in, "temperature")?,
        &t,
        1e-6,
        1e-3,
    )
}

// ---------------------------------------------------------------------------------------------
// dwt2d components
// ---------------------------------------------------------------------------------------------

/// components.cu's THREADS.
const DWT_THREADS: usize = 256;

/// Rodinia's dwt2d, the component copies: `c_CopySrcToComponents<T>` (an 8-bit RGB image split
/// into three planes, read through shared memory four bytes at a time, 768 bytes a block) and
/// `c_CopySrcToComponent<T>` (a grey image), for both instantiations the host uses (`float`:
/// scaled to [-0.5, 0.5]; `int`: minus 128), on the source buffers `rgbToComponents` and
/// `bwToComponent` allocate (rounded up to whole blocks, zero-filled).
fn dwt2d_components(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let (width, height) = (50usize, 37usize); // original: the input image (e.g. 192 x 192)
    let pixels = width * height;
    let mut rng = Lcg::new(41);
    let rgb: Vec<u8> = (0..pixels * 3).map(|_| rng.below(256) as u8).collect();
    let grey: Vec<u8> = (0..pixels).map(|_| rng.below(256) as u8).collect();
    let blocks = pixels.div_ceil(DWT_THREADS);
    let mut src_rgb = rgb.clone();
    src_rgb.resize(blocks * DWT_THREADS * 3, 0);
    let mut src_grey = grey.clone();
    src_grey.resize(blocks * DWT_THREADS, 0);
    let module = Module::from_source(DWT2D_COMPONENTS).with_name_expressions([
        "c_CopySrcToComponents<float>",
        "c_CopySrcToComponents<int>",
        "c_CopySrcToComponent<float>",
        "c_CopySrcToComponent<int>",
    ]);
    let config = LaunchConfig::new(blocks as u32, DWT_THREADS as u32);
    let plane = |c: usize| -> Vec<u8> { rgb.iter().skip(c).step_by(3).copied().collect() };

    let mut d_src = upload(&dev, &src_rgb, "RGB source")?;
    let mut planes = [
        zeros::<f32>(&dev, pixels, "R")?,
        zeros::<f32>(&dev, pixels, "G")?,
        zeros::<f32>(&dev, pixels, "B")?,
    ];
    let [r, g, b] = &mut planes;
    // SAFETY: (both RGB launches) block b reads 768 bytes of the source from 768 b (inside the
    // block-rounded buffer) as 192 floats; threads with a position >= pixels store nothing.
    unsafe {
        launch(
            &dev,
            &module.kernel("c_CopySrcToComponents<float>"),
            config,
            &mut [r, g, b, &mut d_src, &mut Scalar(pixels as i32)],
        )
    }?;
    for (c, array) in planes.iter().enumerate() {
        let want: Vec<f64> = plane(c)
            .iter()
            .map(|&v| f64::from(f32::from(v) / 255.0 - 0.5))
            .collect();
        check_close(
            "float component",
            &download(array, "component")?,
            &want,
            0.0,
            0.0,
        )?;
    }
    let mut planes = [
        zeros::<i32>(&dev, pixels, "R")?,
        zeros::<i32>(&dev, pixels, "G")?,
        zeros::<i32>(&dev, pixels, "B")?,
    ];
    let [r, g, b] = &mut planes;
    // SAFETY: as above.
    unsafe {
        launch(
            &dev,
            &module.kernel("c_CopySrcToComponents<int>"),
            config,
            &mut [r, g, b, &mut d_src, &mut Scalar(pixels as i32)],
        )
    }?;
    for (c, array) in planes.iter().enumerate() {
        let want: Vec<i32> = plane(c).iter().map(|&v| i32::from(v) - 128).collect();
        check_equal("int component", &download(array, "component")?, &want)?;
    }

    let mut d_grey = upload(&dev, &src_grey, "grey source")?;
    let mut c_float = zeros::<f32>(&dev, pixels, "float grey")?;
    // SAFETY: (both grey launches) block b reads 256 bytes from 256 b as 64 floats (inside
    // the block-rounded buffer); threads with a position >= pixels store nothing.
    unsafe {
        launch(
            &dev,
            &module.kernel("c_CopySrcToComponent<float>"),
            config,
            &mut [&mut c_float, &mut d_grey, &mut Scalar(pixels as i32)],
        )
    }?;
    let want: Vec<f64> = grey
        .iter()
        .map(|&v| f64::from(f32::from(v) / 255.0 - 0.5))
        .collect();
    check_close(
        "float grey",
        &download(&c_float, "float grey")?,
        &want,
        0.0,
        0.0,
    )?;
    let mut c_int = zeros::<i32>(&dev, pixels, "int grey")?;
    // SAFETY: as above.
    unsafe {
        launch(
            &dev,
            &module.kernel("c_CopySrcToComponent<int>"),
            config,
            &mut [&mut c_int, &mut d_grey, &mut Scalar(pixels as i32)],
        )
    }?;
    let want: Vec<i32> = grey.iter().map(|&v| i32::from(v) - 128).collect();
    check_equal("int grey", &download(&c_int, "int grey")?, &want)
}

// ---------------------------------------------------------------------------------------------
// particlefilter
// ---------------------------------------------------------------------------------------------

/// ex_particle_CUDA_float_seq.cu's `threads_per_block`.
const PF_THREADS: usize = 512;

/// The inputs of a particle-filter run: the video, the disk's offsets, the seeds.
struct PfSetup {
    isz_x: usize,
    isz_y: usize,
    nfr: usize,
    n: usize,
    video: Vec<u8>,
    objxy: Vec<i32>,
    seeds: Vec<i32>,
}

impl PfSetup {
    /// A video of a bright disk (228) on a dark background (100) moving by (+1, -2) a frame
    /// with noise, the disk's offsets as `strelDisk` and `getneighbors` make them (radius 5:
    /// 69 of them), and fixed seeds in place of `time(0) * i`.
    fn new(n: usize, seed: u64) -> PfSetup {
        let (isz_x, isz_y, nfr) = (128usize, 128usize, 10usize);
        let mut rng = Lcg::new(seed);
        let mut video = vec![0u8; isz_x * isz_y * nfr];
        for k in 0..nfr {
            let (cx, cy) = (64 + k as i64, 64 - 2 * k as i64);
            for x in 0..isz_x {
                for y in 0..isz_y {
                    let (dx, dy) = (x as i64 - cx, y as i64 - cy);
                    let base = if dx * dx + dy * dy < 25 { 228 } else { 100 };
                    let noise = rng.below(21) as i64 - 10;
                    video[x * isz_y * nfr + y * nfr + k] = (base + noise) as u8;
                }
            }
        }
        let (radius, diameter) = (5i32, 9i32);
        let mut objxy = Vec::new();
        for x in 0..diameter {
            for y in 0..diameter {
                let distance = f64::from((x - radius + 1).pow(2) + (y - radius + 1).pow(2)).sqrt();
                if distance < f64::from(radius) {
                    objxy.extend([y - (radius - 1), x - (radius - 1)]);
                }
            }
        }
        let seeds = (0..n)
            .map(|i| (i as i32).wrapping_mul(7_919) + 17)
            .collect();
        PfSetup {
            isz_x,
            isz_y,
            nfr,
            n,
            video,
            objxy,
            seeds,
        }
    }

    fn count_ones(&self) -> usize {
        self.objxy.len() / 2
    }
}

/// The device state of a run, downloaded.
struct PfState {
    array_x: Vec<f64>,
    array_y: Vec<f64>,
    xj: Vec<f64>,
    yj: Vec<f64>,
    cdf: Vec<f64>,
    u: Vec<f64>,
    weights: Vec<f64>,
    likelihood: Vec<f64>,
    partial_sums: Vec<f64>,
    ind: Vec<i32>,
    seeds: Vec<i32>,
}

/// Runs frames 1 .. `frames` of `particleFilter`'s loop (the four kernels per frame, on
/// ceil(N / 512) blocks of 512) and downloads the state.
fn pf_run(dev: &Device, setup: &PfSetup, frames: usize) -> Result<PfState, String> {
    let n = setup.n;
    let ones = setup.count_ones();
    let blocks = n.div_ceil(PF_THREADS);
    let module = Module::from_source(PARTICLEFILTER);
    let [likelihood_k, sum_k, normalize_k, find_index_k] = [
        "likelihood_kernel",
        "sum_kernel",
        "normalize_weights_kernel",
        "find_index_kernel",
    ]
    .map(|name| module.kernel(name));
    // particleFilter's start: every particle at the image's centre, equal weights.
    let xe = (setup.isz_y / 2) as f64;
    let ye = (setup.isz_x / 2) as f64;
    let mut d_array_x = zeros::<f64>(dev, n, "arrayX")?;
    let mut d_array_y = zeros::<f64>(dev, n, "arrayY")?;
    let mut d_xj = upload(dev, &vec![xe; n], "xj")?;
    let mut d_yj = upload(dev, &vec![ye; n], "yj")?;
    let mut d_cdf = zeros::<f64>(dev, n, "CDF")?;
    let mut d_u = zeros::<f64>(dev, n, "u")?;
    let mut d_likelihood = zeros::<f64>(dev, n, "likelihood")?;
    let mut d_weights = upload(dev, &vec![1.0 / n as f64; n], "weights")?;
    let mut d_video = upload(dev, &setup.video, "I")?;
    let mut d_objxy = upload(dev, &setup.objxy, "objxy")?;
    let mut d_ind = zeros::<i32>(dev, ones * n, "ind")?;
    let mut d_seed = upload(dev, &setup.seeds, "seed")?;
    let mut d_partial = zeros::<f64>(dev, n, "partial_sums")?;
    let config = LaunchConfig::new(blocks as u32, PF_THREADS as u32);
    let max_size = (setup.isz_x * setup.isz_y * setup.nfr) as i32;
    for k in 1..=frames as i32 {
        // Threads with i >= Nparticles only clear their shared slot; the others work
        // on particle i of the N-long arrays, its countOnes entries of ind (N x countOnes), and
        // video pixels at indices kept below max_size (the kernel resets larger ones to 0);
        // each block writes partial_sums[block] (N >= blocks).
        // SAFETY: every access stays within those bounds.
        unsafe {
            launch(
                dev,
                &likelihood_k,
                config,
                &mut [
                    &mut d_array_x,
                    &mut d_array_y,
                    &mut d_xj,
                    &mut d_yj,
                    &mut d_cdf,
                    &mut d_ind,
                    &mut d_objxy,
                    &mut d_likelihood,
                    &mut d_video,
                    &mut d_u,
                    &mut d_weights,
                    &mut Scalar(n as i32),
                    &mut Scalar(ones as i32),
                    &mut Scalar(max_size),
                    &mut Scalar(k),
                    &mut Scalar(setup.isz_y as i32),
                    &mut Scalar(setup.nfr as i32),
                    &mut d_seed,
                    &mut d_partial,
                ],
            )
        }?;
        // SAFETY: thread 0 sums partial_sums[0 .. blocks].
        unsafe {
            launch(
                dev,
                &sum_k,
                config,
                &mut [&mut d_partial, &mut Scalar(n as i32)],
            )
        }?;
        // SAFETY: particle i's entries of the N-long arrays; thread 0 writes the whole CDF and
        // u[0] and advances seed[0].
        unsafe {
            launch(
                dev,
                &normalize_k,
                config,
                &mut [
                    &mut d_weights,
                    &mut Scalar(n as i32),
                    &mut d_partial,
                    &mut d_cdf,
                    &mut d_u,
                    &mut d_seed,
                ],
            )
        }?;
        // SAFETY: particle i reads the CDF (N) and writes xj[i], yj[i] from an index below N.
        unsafe {
            launch(
                dev,
                &find_index_k,
                config,
                &mut [
                    &mut d_array_x,
                    &mut d_array_y,
                    &mut d_cdf,
                    &mut d_u,
                    &mut d_xj,
                    &mut d_yj,
                    &mut d_weights,
                    &mut Scalar(n as i32),
                ],
            )
        }?;
    }
    Ok(PfState {
        array_x: download(&d_array_x, "arrayX")?,
        array_y: download(&d_array_y, "arrayY")?,
        xj: download(&d_xj, "xj")?,
        yj: download(&d_yj, "yj")?,
        cdf: download(&d_cdf, "CDF")?,
        u: download(&d_u, "u")?,
        weights: download(&d_weights, "weights")?,
        likelihood: download(&d_likelihood, "likelihood")?,
        partial_sums: download(&d_partial, "partial_sums")?,
        ind: download(&d_ind, "ind")?,
        seeds: download(&d_seed, "seed")?,
    })
}

/// `d_randu`: GCC's LCG on an int seed (wrapping, as the GPU's 32-bit multiply does).
fn pf_randu(seed: &mut i32) -> f64 {
    let num = 1_103_515_245i32.wrapping_mul(*seed).wrapping_add(12_345);
    *seed = num % i32::MAX;
    (f64::from(*seed) / f64::from(i32::MAX)).abs()
}

/// `d_randn`: Box-Muller from two `d_randu`.
fn pf_randn(seed: &mut i32) -> f64 {
    let u = pf_randu(seed);
    let v = pf_randu(seed);
    let cosine = (2.0 * std::f64::consts::PI * v).cos();
    (-2.0 * u.ln()).sqrt() * cosine
}

/// The filter's frames in f64, every block finishing its normalization before thread 0 of
/// block 0 builds the CDF (which only one block guarantees): the state as `PfState` holds it.
fn pf_reference(setup: &PfSetup, frames: usize) -> PfState {
    let n = setup.n;
    let ones = setup.count_ones();
    let blocks = n.div_ceil(PF_THREADS);
    let (isz_y, nfr) = (setup.isz_y as i32, setup.nfr as i32);
    let max_size = (setup.isz_x * setup.isz_y * setup.nfr) as i32;
    let mut s = PfState {
        array_x: vec![0.0; n],
        array_y: vec![0.0; n],
        xj: vec![(setup.isz_y / 2) as f64; n],
        yj: vec![(setup.isz_x / 2) as f64; n],
        cdf: vec![0.0; n],
        u: vec![0.0; n],
        weights: vec![1.0 / n as f64; n],
        likelihood: vec![0.0; n],
        partial_sums: vec![0.0; n],
        ind: vec![0; ones * n],
        seeds: setup.seeds.clone(),
    };
    for k in 1..=frames as i32 {
        for i in 0..n {
            s.weights[i] = 1.0 / n as f64;
            s.array_x[i] = s.xj[i] + 1.0 + 5.0 * pf_randn(&mut s.seeds[i]);
            s.array_y[i] = s.yj[i] - 2.0 + 2.0 * pf_randn(&mut s.seeds[i]);
        }
        for i in 0..n {
            let mut sum = 0.0;
            for y in 0..ones {
                // dev_round_double returns the truncation (its `newValue++` returns the old
                // value), then the int offset is added in double and truncated back to int.
                let ind_x = (s.array_x[i].trunc() + f64::from(setup.objxy[y * 2 + 1])) as i32;
                let ind_y = (s.array_y[i].trunc() + f64::from(setup.objxy[y * 2])) as i32;
                let mut ind = (ind_x * isz_y * nfr + ind_y * nfr + k).abs();
                if ind >= max_size {
                    ind = 0;
                }
                s.ind[i * ones + y] = ind;
                let pixel = f64::from(setup.video[ind as usize]);
                sum += ((pixel - 100.0).powi(2) - (pixel - 228.0).powi(2)) / 50.0;
            }
            s.likelihood[i] = sum / ones as f64;
            s.weights[i] *= s.likelihood[i].exp();
        }
        for b in 0..blocks {
            s.partial_sums[b] = s.weights[b * PF_THREADS..n.min((b + 1) * PF_THREADS)]
                .iter()
                .sum();
        }
        s.partial_sums[0] = s.partial_sums[..blocks].iter().sum();
        let total = s.partial_sums[0];
        for w in &mut s.weights {
            *w /= total;
        }
        let mut acc = 0.0;
        for (c, w) in s.cdf.iter_mut().zip(&s.weights) {
            acc += w;
            *c = acc;
        }
        let u1 = (1.0 / n as f64) * pf_randu(&mut s.seeds[0]);
        for (i, u) in s.u.iter_mut().enumerate() {
            *u = u1 + i as f64 / n as f64;
        }
        for i in 0..n {
            let index = s.cdf.iter().position(|&c| c >= s.u[i]).unwrap_or(n - 1);
            s.xj[i] = s.array_x[index];
            s.yj[i] = s.array_y[index];
        }
    }
    s
}

/// Rodinia's particlefilter (the double version's GPU loop) on one block: 400 particles, nine
/// frames of a 128 x 128 x 10 video (as run with -x 128 -y 128 -z 10), each frame
/// `likelihood_kernel` (moves the particles with the seeds' Box-Muller draws, weighs them by the
/// disk's pixels, per-block sums), `sum_kernel`, `normalize_weights_kernel` (normalization, the
/// CDF and the systematic-resampling offsets, built by thread 0) and `find_index_kernel`
/// (resampling). With one block every read follows its write, so the whole state is checked.
fn particlefilter(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let setup = PfSetup::new(400, 42);
    ensure!(
        setup.count_ones() == 69,
        "{} disk offsets",
        setup.count_ones()
    );
    let frames = setup.nfr - 1;
    let got = pf_run(&dev, &setup, frames)?;
    let want = pf_reference(&setup, frames);
    // Integer state: the seeds' LCG and the pixel indices (truncations of positions that are
    // never within rounding of an integer here).
    check_equal("seed", &got.seeds, &want.seeds)?;
    check_equal("ind", &got.ind, &want.ind)?;
    // Double math (exp, log, cos, sqrt may differ in the last place between libraries) over
    // nine frames; sums of 400 weights in another order.
    let close = |what: &str, g: &[f64], w: &[f64]| check_close(what, g, w, 1e-9, 1e-12);
    close("arrayX", &got.array_x, &want.array_x)?;
    close("arrayY", &got.array_y, &want.array_y)?;
    close("xj", &got.xj, &want.xj)?;
    close("yj", &got.yj, &want.yj)?;
    close("likelihood", &got.likelihood, &want.likelihood)?;
    close("weights", &got.weights, &want.weights)?;
    close("CDF", &got.cdf, &want.cdf)?;
    close("u", &got.u, &want.u)?;
    close(
        "partial_sums[0]",
        &got.partial_sums[..1],
        &want.partial_sums[..1],
    )
}

/// The same filter with the original's 1000 particles, so two blocks, for its first frame.
///
/// `normalize_weights_kernel` then races across blocks, as in the original: thread 0 of block 0
/// builds the whole CDF from weights that block 1 may not have normalized yet, and block 1 reads
/// `u[0]` (written by block 0's thread 0) with no grid-wide synchronization. What does not depend
/// on the blocks' order is checked: the likelihood kernel's and sum kernel's outputs, the
/// normalized weights, the seeds, the CDF's first 512 entries and u's (block 0 builds both from
/// its own weights), and the resampling of block 0's particles whose search ends in that prefix.
/// Block 1's u and resampled positions, and the CDF beyond 512, are not checked: they depend on
/// timing. Under racecheck the launch fails with the race instead (`racing`).
fn particlefilter_two_blocks(rt: &Runtime) -> Result<(), String> {
    let dev = device(rt)?;
    let setup = PfSetup::new(1000, 43);
    let Some(got) = racing(rt, "normalize_weights_kernel", pf_run(&dev, &setup, 1))? else {
        return Ok(());
    };
    let want = pf_reference(&setup, 1);
    check_equal("seed", &got.seeds, &want.seeds)?;
    check_equal("ind", &got.ind, &want.ind)?;
    let close = |what: &str, g: &[f64], w: &[f64]| check_close(what, g, w, 1e-9, 1e-12);
    close("arrayX", &got.array_x, &want.array_x)?;
    close("arrayY", &got.array_y, &want.array_y)?;
    close("likelihood", &got.likelihood, &want.likelihood)?;
    close("weights", &got.weights, &want.weights)?;
    // partial_sums[0] is the total (sum_kernel), [1] block 1's own sum.
    close(
        "partial_sums",
        &got.partial_sums[..2],
        &want.partial_sums[..2],
    )?;
    close(
        "CDF[..512]",
        &got.cdf[..PF_THREADS],
        &want.cdf[..PF_THREADS],
    )?;
    close("u[..512]", &got.u[..PF_THREADS], &want.u[..PF_THREADS])?;
    let prefix_end = want.cdf[PF_THREADS - 1];
    let decided: Vec<usize> = (0..PF_THREADS)
        .filter(|&i| want.u[i] <= prefix_end)
        .collect();
    ensure!(
        !decided.is_empty(),
        "no particle of block 0 resamples inside the CDF's first half"
    );
    let pick = |v: &[f64]| decided.iter().map(|&i| v[i]).collect::<Vec<f64>>();
    close("xj (decided)", &pick(&got.xj), &pick(&want.xj))?;
    close("yj (decided)", &pick(&got.yj), &pick(&want.yj))?;
    Ok(())
}
