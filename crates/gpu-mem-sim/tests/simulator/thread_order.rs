//! Thread orders (`ThreadOrder`): a block's threads run in the device's order between
//! barriers, in every kernel form; a kernel missing a barrier computes something else in
//! reverse or random order, and correct kernels compute the same in every order.

use crate::common;

use gpu_mem_core::Kernel;
use gpu_mem_core::kernel::{Dim3, LaunchConfig};
use gpu_mem_sim::thread::{AsyncThreadCtx, ThreadCtx};
use gpu_mem_sim::{SimBackend, SimConfig, SimDeviceConfig, SimKernel, ThreadOrder};
use std::sync::atomic::{AtomicI32, Ordering};

fn ordered(thread_order: ThreadOrder) -> SimBackend {
    SimBackend::new(SimConfig {
        devices: vec![SimDeviceConfig {
            thread_order,
            ..SimDeviceConfig::default()
        }],
    })
}

const RANDOM: ThreadOrder = ThreadOrder::Random { seed: 3 };

/// Each thread takes a ticket from a counter (`out[n]`) and writes it to `out[thread]`: the
/// order the threads ran in.
fn tickets(backend: &SimBackend, kernel: &Kernel, n: usize) -> Vec<u32> {
    let config = LaunchConfig::new(Dim3::new(1, 1, 1), Dim3::new(n as u32, 1, 1));
    let mut out = common::run_on_array(backend, kernel, config, &vec![0u32; n + 1]).unwrap();
    assert_eq!(out.pop(), Some(n as u32), "every thread took one ticket");
    out
}

fn ticket_closure(t: &ThreadCtx<'_>) {
    let out = t.array::<u32>(0);
    let n = t.block_dim().count() as usize;
    let ticket = out.atomic_add([n], 1);
    out.set([t.linear_thread_idx() as usize], ticket);
}

async fn ticket_async(t: &AsyncThreadCtx<'_>) {
    let out = t.array::<u32>(0);
    let n = t.block_dim().count() as usize;
    let ticket = out.atomic_add([n], 1);
    out.set([t.linear_thread_idx() as usize], ticket);
}

const TICKET_SOURCE: &str = r#"
__global__ void k(unsigned int* out) {
    unsigned int n = blockDim.x;
    out[threadIdx.x] = atomicAdd(&out[n], 1u);
}
"#;

/// The forms a kernel takes, each with the orders it runs under; source kernels only off Miri
/// (the host compiler is outside what Miri interprets), closures only on fibers (neither).
fn ticket_kernels() -> Vec<Kernel> {
    let mut kernels = vec![Kernel::sim_async("tickets", async |t| {
        ticket_async(t).await
    })];
    if !cfg!(miri) {
        kernels.push(Kernel::sim("tickets", ticket_closure));
        kernels.push(Kernel::from_source(TICKET_SOURCE, "k"));
    }
    kernels
}

#[test]
fn threads_run_in_the_devices_order_in_every_form() {
    let n = 48;
    let identity: Vec<u32> = (0..n as u32).collect();
    let reversed: Vec<u32> = identity.iter().rev().copied().collect();
    for kernel in ticket_kernels() {
        let what = if kernel.source().is_some() {
            "source"
        } else {
            "closure"
        };
        assert_eq!(
            tickets(&ordered(ThreadOrder::Index), &kernel, n),
            identity,
            "{what}"
        );
        // Thread t ran at position n - 1 - t.
        assert_eq!(
            tickets(&ordered(ThreadOrder::Reverse), &kernel, n),
            reversed,
            "{what}"
        );
        let random = tickets(&ordered(RANDOM), &kernel, n);
        let mut sorted = random.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, identity, "{what}: a permutation");
        assert!(
            random != identity && random != reversed,
            "{what}: {random:?}"
        );
        assert_eq!(
            tickets(&ordered(RANDOM), &kernel, n),
            random,
            "{what}: the same seed, the same order"
        );
        assert_ne!(
            tickets(&ordered(ThreadOrder::Random { seed: 4 }), &kernel, n),
            random,
            "{what}: another seed, another order"
        );
    }
}

/// Thread `t` copies `out[t]` to shared memory and reads back what thread `t - 1` put there,
/// with the barrier between the two `BARRIER` says.
fn neighbour_source(barrier: &str) -> String {
    format!(
        r#"
__global__ void k(int* out) {{
    __shared__ int cell[256];
    int t = threadIdx.x;
    cell[t] = out[t];
    {barrier}
    out[t] = t == 0 ? -1 : cell[t - 1];
}}
"#
    )
}

/// Runs a neighbour kernel on a block of 256 threads, on values no earlier launch left in
/// shared memory; returns how many threads did not see their left neighbour's value.
fn missed_neighbours(backend: &SimBackend, code: &str) -> usize {
    static LAUNCHES: AtomicI32 = AtomicI32::new(0);
    let base = LAUNCHES.fetch_add(1, Ordering::Relaxed) * 1000;
    let values: Vec<i32> = (0..256).map(|t| base + t).collect();
    let kernel = Kernel::from_source(code, "k");
    let config = LaunchConfig::new(Dim3::new(1, 1, 1), Dim3::new(256, 1, 1));
    let got = common::run_on_array(backend, &kernel, config, &values).unwrap();
    (1..256).filter(|&t| got[t] != values[t - 1]).count()
}

#[test]
#[cfg_attr(
    miri,
    ignore = "source kernels: the host compiler is outside what Miri interprets"
)]
fn a_missing_barrier_shows_in_reverse_and_random_order_only() {
    let missing = neighbour_source("/* __syncthreads() missing */");
    let kept = neighbour_source("__syncthreads();");
    // In index order the left neighbour always ran first: the bug is hidden.
    assert_eq!(missed_neighbours(&ordered(ThreadOrder::Index), &missing), 0);
    for order in [ThreadOrder::Reverse, RANDOM] {
        let backend = ordered(order);
        let missed = missed_neighbours(&backend, &missing);
        if order == ThreadOrder::Reverse {
            // Every thread ran before its left neighbour.
            assert_eq!(missed, 255, "{order}");
        } else {
            // About half of them, each ahead of its neighbour with even chances.
            assert!((64..=192).contains(&missed), "{order}: {missed} missed");
        }
        assert_eq!(
            missed_neighbours(&backend, &kept),
            0,
            "{order}, with the barrier"
        );
    }
}

/// A tree reduction with a barrier at every step, in shared memory: the same sums in every
/// order, for closures and async closures on several blocks.
fn tree_sum(t: &ThreadCtx<'_>) {
    let n = t.block_dim().count() as usize;
    let cells = t.shared_array::<u32, 1>([256]);
    let me = t.linear_thread_idx() as usize;
    cells.set([me], me as u32 + 1);
    t.syncthreads();
    let mut stride = n / 2;
    while stride > 0 {
        if me < stride {
            cells.set([me], cells.get([me]) + cells.get([me + stride]));
        }
        t.syncthreads();
        stride /= 2;
    }
    if me == 0 {
        t.array::<u32>(0)
            .set([t.block_idx().x as usize], cells.get([0]));
    }
}

async fn tree_sum_async(t: &AsyncThreadCtx<'_>) {
    let n = t.block_dim().count() as usize;
    let cells = t.shared_array::<u32, 1>([256]);
    let me = t.linear_thread_idx() as usize;
    cells.set([me], me as u32 + 1);
    t.syncthreads().await;
    let mut stride = n / 2;
    while stride > 0 {
        if me < stride {
            cells.set([me], cells.get([me]) + cells.get([me + stride]));
        }
        t.syncthreads().await;
        stride /= 2;
    }
    if me == 0 {
        t.array::<u32>(0)
            .set([t.block_idx().x as usize], cells.get([0]));
    }
}

const TREE_SUM_SOURCE: &str = r#"
__global__ void k(unsigned int* out) {
    __shared__ unsigned int cells[256];
    unsigned int n = blockDim.x, me = threadIdx.x;
    cells[me] = me + 1;
    __syncthreads();
    for (unsigned int stride = n / 2; stride > 0; stride /= 2) {
        if (me < stride) cells[me] += cells[me + stride];
        __syncthreads();
    }
    if (me == 0) out[blockIdx.x] = cells[0];
}
"#;

#[test]
fn correct_reductions_sum_alike_in_every_order() {
    let mut kernels = vec![Kernel::sim_async("tree_sum", async |t| {
        tree_sum_async(t).await
    })];
    if !cfg!(miri) {
        kernels.push(Kernel::sim("tree_sum", tree_sum));
        kernels.push(Kernel::from_source(TREE_SUM_SOURCE, "k"));
    }
    let (blocks, n) = if cfg!(miri) { (2, 16) } else { (5, 256) };
    let config = LaunchConfig::new(Dim3::new(blocks, 1, 1), Dim3::new(n, 1, 1));
    let expected = vec![n * (n + 1) / 2; blocks as usize];
    for order in [ThreadOrder::Index, ThreadOrder::Reverse, RANDOM] {
        let backend = ordered(order);
        for kernel in &kernels {
            let sums = common::run_on_array(&backend, kernel, config, &vec![0u32; blocks as usize]);
            assert_eq!(sums.unwrap(), expected, "{order}, {}", kernel.name());
        }
    }
}
