//! A device's launch limits and the check of a [`LaunchConfig`] against them.
//!
//! # Contract
//!
//! * The limits are the device attributes `MAX_THREADS_PER_BLOCK`, `MAX_BLOCK_DIM_{X,Y,Z}`,
//!   `MAX_GRID_DIM_{X,Y,Z}`, `MAX_SHARED_MEMORY_PER_BLOCK` (what a launch gets without opting
//!   in, 48 KiB) and `MAX_SHARED_MEMORY_PER_BLOCK_OPTIN` (the most a kernel may opt in to with
//!   `cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)`, e.g. 227 KiB on sm_90), read once.
//! * [`LaunchLimits::check`] rejects empty or oversized grids and blocks and dynamic shared
//!   memory above the opt-in maximum with [`Error::InvalidLaunch`] naming the kernel, before
//!   anything is compiled or enqueued. The compiled function's static shared memory is added
//!   after compilation (see `launch.rs`), which also opts in where static + dynamic exceed the
//!   default.

use crate::driver::CudaDriver;
use crate::driver::sys::{CUdevice_attribute, CUdevice_v1};
use gpu_mem_core::kernel::LaunchConfig;
use gpu_mem_core::{Error, Result};

/// What a launch on one device may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchLimits {
    /// Threads in one block, all dimensions together.
    pub max_threads_per_block: u32,
    /// Threads per block along x, y, z.
    pub max_block: [u32; 3],
    /// Blocks per grid along x, y, z.
    pub max_grid: [u32; 3],
    /// Shared memory per block in bytes (without opting in to more).
    pub max_shared_per_block: usize,
    /// Shared memory per block in bytes a kernel may opt in to (at least the default).
    pub max_shared_optin: usize,
}

impl LaunchLimits {
    /// Reads the limits of `device` (no context needed).
    pub fn query(driver: &CudaDriver, device: CUdevice_v1) -> Result<LaunchLimits> {
        use CUdevice_attribute as A;
        let attr = |a: CUdevice_attribute| -> Result<u32> {
            // Negative values do not occur for these attributes; treat one as "nothing allowed".
            Ok(u32::try_from(driver.device_get_attribute(a, device)?).unwrap_or(0))
        };
        let default_shared = attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)? as usize;
        Ok(LaunchLimits {
            max_threads_per_block: attr(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_block: [
                attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
                attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
                attr(A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
            ],
            max_grid: [
                attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attr(A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            max_shared_per_block: default_shared,
            // Drivers before CUDA 9 do not know the attribute: no opt-in there.
            max_shared_optin: attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
                .map_or(default_shared, |v| (v as usize).max(default_shared)),
        })
    }

    /// Checks `config` for `kernel` (the name used in the error); returns the dynamic shared
    /// memory as the `u32` `cuLaunchKernel` takes.
    pub fn check(&self, kernel: &str, config: &LaunchConfig) -> Result<u32> {
        let invalid = |reason: String| Error::InvalidLaunch {
            kernel: kernel.to_string(),
            reason,
        };
        let block = config.block.to_array();
        let grid = config.grid.to_array();
        if block.contains(&0) || grid.contains(&0) {
            return Err(invalid(format!(
                "grid {} and block {} must not have an empty dimension",
                config.grid, config.block
            )));
        }
        if config.block.count() > u64::from(self.max_threads_per_block) {
            return Err(invalid(format!(
                "block {} has {} threads; the device allows {} per block",
                config.block,
                config.block.count(),
                self.max_threads_per_block
            )));
        }
        if block.iter().zip(self.max_block).any(|(b, max)| *b > max) {
            return Err(invalid(format!(
                "block {} exceeds the device's block dimensions {:?}",
                config.block, self.max_block
            )));
        }
        if grid.iter().zip(self.max_grid).any(|(g, max)| *g > max) {
            return Err(invalid(format!(
                "grid {} exceeds the device's grid dimensions {:?}",
                config.grid, self.max_grid
            )));
        }
        if config.shared_bytes > self.max_shared_optin {
            return Err(invalid(format!(
                "{} bytes of dynamic shared memory requested; the device allows {} bytes per block (with opt-in)",
                config.shared_bytes, self.max_shared_optin
            )));
        }
        u32::try_from(config.shared_bytes).map_err(|_| {
            invalid(format!(
                "{} bytes of dynamic shared memory do not fit cuLaunchKernel's 32-bit count",
                config.shared_bytes
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_mem_core::kernel::Dim3;

    // Compute capability 9.0's values.
    const LIMITS: LaunchLimits = LaunchLimits {
        max_threads_per_block: 1024,
        max_block: [1024, 1024, 64],
        max_grid: [i32::MAX as u32, 65535, 65535],
        max_shared_per_block: 48 * 1024,
        max_shared_optin: 227 * 1024,
    };

    fn reason_of(config: LaunchConfig) -> String {
        match LIMITS.check("k", &config) {
            Err(Error::InvalidLaunch { kernel, reason }) if kernel == "k" => reason,
            other => panic!("{config:?} should be invalid, got {other:?}"),
        }
    }

    #[test]
    fn limits_themselves_are_allowed() {
        let edge = LaunchConfig::new(Dim3::new(i32::MAX as u32, 65535, 65535), (1024, 1, 1))
            .with_shared_bytes(227 * 1024);
        assert_eq!(LIMITS.check("k", &edge).ok(), Some(227 * 1024));
        let z = LaunchConfig::new(1, Dim3::new(4, 4, 64));
        assert_eq!(LIMITS.check("k", &z).ok(), Some(0));
    }

    #[test]
    fn each_limit_is_enforced_by_one_more() {
        assert!(reason_of(LaunchConfig::new(1, (33, 32))).contains("1056 threads"));
        assert!(reason_of(LaunchConfig::new(1, Dim3::new(1, 1, 65))).contains("block dimensions"));
        assert!(reason_of(LaunchConfig::new((1, 65536), 1)).contains("grid dimensions"));
        assert!(
            reason_of(LaunchConfig::new(Dim3::new(1, 1, 65536), 1)).contains("grid dimensions")
        );
        let shared = LaunchConfig::new(1, 32).with_shared_bytes(227 * 1024 + 1);
        assert!(reason_of(shared).contains("232449 bytes"));
    }

    #[test]
    fn empty_dimensions_are_rejected() {
        assert!(reason_of(LaunchConfig::new(0, 32)).contains("empty"));
        assert!(reason_of(LaunchConfig::new(1, Dim3::new(32, 0, 1))).contains("empty"));
    }
}
