//! What the corpus modules share: fixed-seed inputs, the device, transfers to and from it, and
//! element-wise comparisons with references.

use crate::{ensure, fail};
use gpu_mem::Runtime;
use gpu_mem::prelude::*;
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
}

/// The runtime's first device.
pub fn device(rt: &Runtime) -> Result<Device, String> {
    rt.device(0).map_err(fail("device"))
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
