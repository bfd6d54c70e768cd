//! What the corpus modules share: fixed-seed inputs, the device, launches, transfers to and from
//! it, and element-wise comparisons with references.

use crate::{ensure, fail};
use gpu_mem::prelude::*;
use gpu_mem::{KernelArg, Runtime};
use ndarray::Array1;
use std::fmt::Debug;

/// Deterministic inputs: a 64-bit linear congruential generator (Knuth's MMIX constants), read
/// from its high bits.
pub struct Lcg(u64);

impl Lcg {
    /// A generator whose state is `seed` mixed (so that small seeds start far apart).
    pub fn new(seed: u64) -> Lcg {
        Lcg(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D)
    }

    /// A generator that starts from `state` itself.
    pub fn from_state(state: u64) -> Lcg {
        Lcg(state)
    }

    fn step(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0
    }

    /// The next 32 random bits (the state's high half).
    pub fn next_u32(&mut self) -> u32 {
        (self.step() >> 32) as u32
    }

    /// The next 31 random bits.
    pub fn bits(&mut self) -> u32 {
        (self.step() >> 33) as u32
    }

    /// Uniform in [0, 1), a multiple of 2^-24 (exact in `f32`).
    pub fn unit(&mut self) -> f32 {
        (self.step() >> 40) as f32 / 16_777_216.0
    }

    /// `len` values of [`Lcg::unit`].
    pub fn units(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| self.unit()).collect()
    }

    /// Uniform in [low, high).
    pub fn range(&mut self, low: f32, high: f32) -> f32 {
        low + (high - low) * self.unit()
    }

    /// Uniform in `0..n` (from 31 bits).
    pub fn below(&mut self, n: u32) -> u32 {
        self.bits() % n
    }

    /// Uniform in `0..n` from all 32 bits: [`Lcg::next_u32`] modulo `n` (another sequence than
    /// [`Lcg::below`]'s).
    pub fn below32(&mut self, n: u32) -> u32 {
        self.next_u32() % n
    }

    /// `len` values of [`Lcg::below32`].
    pub fn all_below32(&mut self, len: usize, n: u32) -> Vec<u32> {
        (0..len).map(|_| self.below32(n)).collect()
    }
}

/// The runtime's first device.
pub fn device(rt: &Runtime) -> Result<Device, String> {
    rt.device(0).map_err(fail("device"))
}

/// Whether the simulator looks for races (`GPU_MEM_SIM_CHECK=racecheck`): a kernel that races as
/// its original does then fails, naming the race.
pub fn racechecked(rt: &Runtime) -> bool {
    rt.kind() == gpu_mem::BackendKind::Sim
        && gpu_mem::sim::SimConfig::from_env()
            .is_ok_and(|config| config.devices.iter().any(|d| d.checks.racecheck))
}

/// What a run whose kernel `kernel` races, as its original does, gave: under racecheck the race
/// must be reported, naming `kernel` (then `None`); otherwise the run's own result.
pub fn racing<T>(rt: &Runtime, kernel: &str, ran: Result<T, String>) -> Result<Option<T>, String> {
    if !racechecked(rt) {
        return ran.map(Some);
    }
    match ran {
        Err(e) if e.contains("racecheck: Race reported") && e.contains(kernel) => Ok(None),
        Err(e) => Err(e),
        Ok(_) => Err(format!("racecheck did not report the race in `{kernel}`")),
    }
}

/// Launches `kernel` (named in errors).
///
/// # Safety
/// As `Device::launch`: the caller's grid and arguments keep the kernel in bounds.
pub unsafe fn launch(
    dev: &Device,
    kernel: &Kernel,
    config: LaunchConfig,
    args: &mut [&mut dyn KernelArg],
) -> Result<(), String> {
    // SAFETY: the caller's contract.
    unsafe { dev.launch(kernel, config, args) }.map_err(fail(kernel.name()))
}

/// A device array holding `values`.
pub fn upload<T: Element>(
    dev: &Device,
    values: &[T],
    what: &str,
) -> Result<DeviceArray<T>, String> {
    dev.to_device(&Array1::from_vec(values.to_vec()))
        .map_err(fail(what))
}

/// A device array of `len` zeros (GPUs leave fresh allocations undefined).
pub fn zeros<T: Element>(dev: &Device, len: usize, what: &str) -> Result<DeviceArray<T>, String> {
    let mut array = dev
        .device_array::<T>(&[len], Order::C)
        .map_err(fail(what))?;
    array
        .fill(<T as bytemuck::Zeroable>::zeroed())
        .map_err(fail(what))?;
    Ok(array)
}

/// The elements of `array`, in order.
pub fn download<T: Element>(array: &DeviceArray<T>, what: &str) -> Result<Vec<T>, String> {
    Ok(array
        .copy_to_host()
        .map_err(fail(what))?
        .iter()
        .copied()
        .collect())
}

/// `Err` at the first element where `got` and the reference `want` differ by more than
/// `abs + rel * |want|`; a NaN passes only where the reference is NaN too.
pub fn check_close<T: Copy + Into<f64>>(
    what: &str,
    got: &[T],
    want: &[f64],
    rel: f64,
    abs: f64,
) -> Result<(), String> {
    ensure!(
        got.len() == want.len(),
        "{what}: {} values, the reference has {}",
        got.len(),
        want.len()
    );
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let g: f64 = g.into();
        let within = if w.is_nan() {
            g.is_nan()
        } else {
            (g - w).abs() <= abs + rel * w.abs()
        };
        ensure!(within, "{what}[{i}]: {g}, reference {w}");
    }
    Ok(())
}

/// `Err` at the first element where `got` and the reference `want` differ by more than
/// `tol * scale`: `scale` is the magnitude the rounding error of the computation grows with (the
/// sum of the terms' magnitudes for a sum), element by element. A NaN fails.
pub fn check_scaled(
    what: &str,
    got: &[f32],
    want: &[f64],
    scale: &[f64],
    tol: f64,
) -> Result<(), String> {
    ensure!(
        got.len() == want.len() && want.len() == scale.len(),
        "{what}: {} values, expected {}",
        got.len(),
        want.len()
    );
    for (i, ((&g, &w), &m)) in got.iter().zip(want).zip(scale).enumerate() {
        let error = (f64::from(g) - w).abs();
        // False for a NaN, which so fails.
        let within = error <= tol * m;
        ensure!(
            within,
            "{what}[{i}] = {g}, expected {w} (error {error:e} above {:e})",
            tol * m
        );
    }
    Ok(())
}

/// `Err` at the first element where `got` and `want` differ.
pub fn check_equal<T: PartialEq + Debug>(what: &str, got: &[T], want: &[T]) -> Result<(), String> {
    ensure!(
        got.len() == want.len(),
        "{what}: {} values, the reference has {}",
        got.len(),
        want.len()
    );
    match got.iter().zip(want).position(|(g, w)| g != w) {
        Some(i) => Err(format!(
            "{what}[{i}]: {:?}, reference {:?}",
            got[i], want[i]
        )),
        None => Ok(()),
    }
}

/// `values` as `f64`.
pub fn widen(values: &[f32]) -> Vec<f64> {
    values.iter().map(|&v| f64::from(v)).collect()
}

/// The grid size PolyBench's and other host code computes along one axis:
/// `(size_t)ceil(((float)n) / ((float)block))`.
pub fn blocks_for(n: usize, block: u32) -> u32 {
    (n as f32 / block as f32).ceil() as u32
}

/// `Σ_k a[i][k] * b[k][j]` for an `rows x inner` matrix `a` and an `inner x cols` matrix `b`.
pub fn matmul(a: &[f64], b: &[f64], rows: usize, inner: usize, cols: usize) -> Vec<f64> {
    (0..rows * cols)
        .map(|ij| {
            let (i, j) = (ij / cols, ij % cols);
            (0..inner).map(|k| a[i * inner + k] * b[k * cols + j]).sum()
        })
        .collect()
}

/// SHARED_SIZE_LIMIT of the sortingNetworks samples: their shared-memory kernels sort 1024 keys
/// a block, with 512 threads.
pub const SHARED_SIZE_LIMIT: usize = 1024;

/// Keys as NVIDIA's sorting samples make them (`rand() % 65536`, so some repeat) and values 0,
/// 1, 2, ...
pub fn sort_input(n: usize, seed: u64) -> (Vec<u32>, Vec<u32>) {
    (
        Lcg::from_state(seed).all_below32(n, 65_536),
        (0..n as u32).collect(),
    )
}

/// Launches one of the sortingNetworks kernels, `blocks` blocks of `threads`, on (dst keys, dst
/// values, src keys, src values, the unsigned `scalars`...), as the samples launch them.
pub fn launch_sort(
    dev: &Device,
    kernel: &Kernel,
    (blocks, threads): (usize, u32),
    arrays: [&mut DeviceArray<u32>; 4],
    scalars: &[u32],
) -> Result<(), String> {
    let [dst_key, dst_val, src_key, src_val] = arrays;
    let mut scalars: Vec<Scalar<u32>> = scalars.iter().map(|&v| Scalar(v)).collect();
    let mut args: Vec<&mut dyn KernelArg> = vec![dst_key, dst_val, src_key, src_val];
    args.extend(scalars.iter_mut().map(|s| s as &mut dyn KernelArg));
    // SAFETY: the four arrays hold batchSize x arrayLength keys and values, and the launches
    // are the samples': each block touches its own SHARED_SIZE_LIMIT chunk, each comparator
    // thread a pair (pos, pos + stride) below batchSize x arrayLength.
    unsafe {
        launch(
            dev,
            kernel,
            LaunchConfig::new(blocks as u32, threads),
            &mut args,
        )
    }
}

/// The first pass of a sortingNetworks sort: `keys` and `values` uploaded and sorted by
/// `kernel`, one of the samples' shared-memory sorts, a block of 512 threads per
/// SHARED_SIZE_LIMIT keys, with the unsigned `scalars`; the sorted keys and values, on the
/// device.
pub fn sort_shared(
    dev: &Device,
    kernel: &Kernel,
    (keys, values): (&[u32], &[u32]),
    scalars: &[u32],
) -> Result<(DeviceArray<u32>, DeviceArray<u32>), String> {
    let n = keys.len();
    let (mut sk, mut sv) = (
        upload(dev, keys, "d_SrcKey")?,
        upload(dev, values, "d_SrcVal")?,
    );
    let (mut dk, mut dv) = (
        zeros::<u32>(dev, n, "d_DstKey")?,
        zeros::<u32>(dev, n, "d_DstVal")?,
    );
    launch_sort(
        dev,
        kernel,
        (n / SHARED_SIZE_LIMIT, (SHARED_SIZE_LIMIT / 2) as u32),
        [&mut dk, &mut dv, &mut sk, &mut sv],
        scalars,
    )?;
    Ok((dk, dv))
}

/// Checks that each `length` chunk of the sorted keys and values is its input chunk's (key,
/// value) pairs, sorted by key ascending or not as `ascending(chunk)` says; equal keys may come
/// in any order, as a sorting network does not keep it.
pub fn check_sorted(
    what: &str,
    (keys, values): (&[u32], &[u32]),
    (got_keys, got_values): (&DeviceArray<u32>, &DeviceArray<u32>),
    length: usize,
    ascending: impl Fn(usize) -> bool,
) -> Result<(), String> {
    let pairs = |k: &[u32], v: &[u32]| -> Vec<(u32, u32)> {
        k.iter().copied().zip(v.iter().copied()).collect()
    };
    let (input, output) = (
        pairs(keys, values),
        pairs(
            &download(got_keys, "d_DstKey")?,
            &download(got_values, "d_DstVal")?,
        ),
    );
    ensure!(
        output.len() == input.len(),
        "{what}: {} keys, expected {}",
        output.len(),
        input.len()
    );
    for (c, (src, dst)) in input.chunks(length).zip(output.chunks(length)).enumerate() {
        let mut want_keys: Vec<u32> = src.iter().map(|p| p.0).collect();
        want_keys.sort_unstable();
        if !ascending(c) {
            want_keys.reverse();
        }
        let dst_keys: Vec<u32> = dst.iter().map(|p| p.0).collect();
        check_equal(&format!("{what}: keys of array {c}"), &dst_keys, &want_keys)?;
        // Equal keys may come in any order: compare the pairs as sets.
        let (mut src, mut dst) = (src.to_vec(), dst.to_vec());
        src.sort_unstable();
        dst.sort_unstable();
        check_equal(
            &format!("{what}: (key, value) pairs of array {c}"),
            &dst,
            &src,
        )?;
    }
    Ok(())
}
