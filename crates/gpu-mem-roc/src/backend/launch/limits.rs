//! A launch configuration checked against a GPU agent's limits and turned into the dispatch
//! packet's geometry.
//!
//! HSA describes a dispatch in *work-items*: the packet's grid size is blocks × block size per
//! dimension (HSA runtime specification, "Kernel dispatch packet": `grid_size_x` is the number
//! of work-items, not of work-groups). Limits come from the agent (`HSA_AGENT_INFO_WORKGROUP_MAX_SIZE`,
//! `_WORKGROUP_MAX_DIM`, `_GRID_MAX_SIZE`, `_GRID_MAX_DIM`) and the group segment from the
//! GPU's group-segment pool size (LDS per work-group).

use crate::driver::Hsa;
use gpu_mem_core::kernel::LaunchConfig;
use gpu_mem_core::{Error, Result};
use gpu_mem_hsa_sys as sys;

/// The agent's dispatch limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Work-items per work-group.
    pub workgroup_max_size: u32,
    /// Work-items per work-group along each dimension.
    pub workgroup_max_dim: [u16; 3],
    /// Work-items per grid.
    pub grid_max_size: u32,
    /// Work-items per grid along each dimension.
    pub grid_max_dim: [u32; 3],
    /// Group segment (LDS) bytes per work-group.
    pub group_segment_max: u64,
}

impl Limits {
    /// Reads the limits of `agent`; `group_segment_max` is the group pool size.
    pub fn read(hsa: &Hsa, agent: sys::hsa_agent_t, group_segment_max: u64) -> Result<Limits> {
        // Each attribute is read with the C type hsa.h gives it: WORKGROUP_MAX_SIZE and
        // GRID_MAX_SIZE uint32_t, WORKGROUP_MAX_DIM uint16_t[3], GRID_MAX_DIM hsa_dim3_t
        // (three uint32_t).
        // SAFETY: see above.
        let workgroup_max_size: u32 =
            unsafe { hsa.agent_get_info(agent, sys::HSA_AGENT_INFO_WORKGROUP_MAX_SIZE, 0u32) }?;
        // SAFETY: see above.
        let workgroup_max_dim: [u16; 3] =
            unsafe { hsa.agent_get_info(agent, sys::HSA_AGENT_INFO_WORKGROUP_MAX_DIM, [0u16; 3]) }?;
        // SAFETY: see above.
        let grid_max_size: u32 =
            unsafe { hsa.agent_get_info(agent, sys::HSA_AGENT_INFO_GRID_MAX_SIZE, 0u32) }?;
        // SAFETY: see above.
        let grid_max_dim: [u32; 3] =
            unsafe { hsa.agent_get_info(agent, sys::HSA_AGENT_INFO_GRID_MAX_DIM, [0u32; 3]) }?;
        Ok(Limits {
            workgroup_max_size,
            workgroup_max_dim,
            grid_max_size,
            grid_max_dim,
            group_segment_max,
        })
    }
}

/// The geometry fields of a kernel dispatch packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// `setup` dimensions: 1, 2 or 3.
    pub dims: u16,
    /// Work-group size per dimension (the block).
    pub workgroup: [u16; 3],
    /// Grid size in work-items per dimension (blocks × block).
    pub grid: [u32; 3],
    /// Group segment bytes: the kernel's static LDS plus the dynamic shared bytes.
    pub group_segment: u32,
}

const AXES: [&str; 3] = ["x", "y", "z"];

/// Checks `config` for a kernel with `static_group` bytes of static LDS against `limits`.
pub fn check(
    kernel: &str,
    config: &LaunchConfig,
    limits: &Limits,
    static_group: u32,
) -> Result<Geometry> {
    let invalid = |reason: String| Error::InvalidLaunch {
        kernel: kernel.to_string(),
        reason,
    };
    let (grid, block) = (config.grid.to_array(), config.block.to_array());
    if grid.contains(&0) || block.contains(&0) {
        return Err(invalid(format!(
            "grid {} and block {} must be at least 1 in every dimension",
            config.grid, config.block
        )));
    }
    let threads = config.block.count();
    if threads > u64::from(limits.workgroup_max_size) {
        return Err(invalid(format!(
            "block {} has {threads} threads; this GPU allows at most {} per block \
             (HSA_AGENT_INFO_WORKGROUP_MAX_SIZE). Try reducing group-size",
            config.block, limits.workgroup_max_size
        )));
    }
    let mut workgroup = [1u16; 3];
    let mut work_items = [1u32; 3];
    for axis in 0..3 {
        let max = limits.workgroup_max_dim[axis];
        workgroup[axis] = u16::try_from(block[axis])
            .ok()
            .filter(|b| *b <= max)
            .ok_or_else(|| {
                invalid(format!(
                    "block {} has {} threads along {}; this GPU allows at most {max} \
                     (HSA_AGENT_INFO_WORKGROUP_MAX_DIM). Try reducing group-size",
                    config.block, block[axis], AXES[axis]
                ))
            })?;
        let items = u64::from(grid[axis]) * u64::from(block[axis]);
        let max = limits.grid_max_dim[axis];
        work_items[axis] = u32::try_from(items)
            .ok()
            .filter(|n| *n <= max)
            .ok_or_else(|| {
                invalid(format!(
                    "grid {} of blocks {} is {items} threads along {}; this GPU allows at most \
                     {max} (HSA_AGENT_INFO_GRID_MAX_DIM)",
                    config.grid, config.block, AXES[axis]
                ))
            })?;
    }
    let total = work_items.iter().map(|n| u64::from(*n)).product::<u64>();
    if total > u64::from(limits.grid_max_size) {
        return Err(invalid(format!(
            "grid {} of blocks {} is {total} threads; this GPU allows at most {} \
             (HSA_AGENT_INFO_GRID_MAX_SIZE)",
            config.grid, config.block, limits.grid_max_size
        )));
    }
    let group = u64::from(static_group) + config.shared_bytes as u64;
    if group > limits.group_segment_max {
        return Err(invalid(format!(
            "it needs {group} bytes of shared memory per block ({static_group} static + {} \
             dynamic); this GPU has {} (group segment). Try reducing group-size or the dynamic \
             shared memory",
            config.shared_bytes, limits.group_segment_max
        )));
    }
    // Unused trailing dimensions must be 1 in the packet; `dims` counts the used ones.
    let dims = if work_items[2] > 1 {
        3
    } else if work_items[1] > 1 {
        2
    } else {
        1
    };
    Ok(Geometry {
        dims,
        workgroup,
        grid: work_items,
        // Fits: bounded by the pool size above, and LDS pools are far below 4 GiB.
        group_segment: u32::try_from(group).unwrap_or(u32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::{Geometry, Limits, check};
    use gpu_mem_core::Error;
    use gpu_mem_core::kernel::LaunchConfig;

    const MI210: Limits = Limits {
        workgroup_max_size: 1024,
        workgroup_max_dim: [1024, 1024, 1024],
        grid_max_size: u32::MAX,
        grid_max_dim: [u32::MAX; 3],
        group_segment_max: 65536,
    };

    #[test]
    fn grid_sizes_are_in_work_items() {
        let g = check(
            "k",
            &LaunchConfig::new((10, 3), (16, 16)).with_shared_bytes(100),
            &MI210,
            2048,
        )
        .unwrap();
        assert_eq!(
            g,
            Geometry {
                dims: 2,
                workgroup: [16, 16, 1],
                grid: [160, 48, 1],
                group_segment: 2148,
            }
        );
        let g = check("k", &LaunchConfig::new(7, 64), &MI210, 0).unwrap();
        assert_eq!((g.dims, g.grid), (1, [448, 1, 1]));
        let g = check("k", &LaunchConfig::new((1, 1, 2), (1, 1, 1)), &MI210, 0).unwrap();
        assert_eq!(g.dims, 3);
    }

    #[test]
    fn configurations_past_the_limits_are_refused() {
        let small = Limits {
            workgroup_max_dim: [1024, 1024, 64],
            grid_max_dim: [1 << 20, 1 << 16, 1 << 16],
            grid_max_size: 1 << 24,
            ..MI210
        };
        let cases = [
            (LaunchConfig::new(1, 2048), 0, "at most 1024 per block"),
            (LaunchConfig::new(1, (1, 1, 128)), 0, "along z"),
            (LaunchConfig::new(0, 1), 0, "at least 1"),
            (LaunchConfig::new((1 << 12, 1), 1024), 0, "along x"),
            (
                LaunchConfig::new((4096, 4096), (256, 1)),
                0,
                "GRID_MAX_SIZE",
            ),
            (
                LaunchConfig::new(1, 1).with_shared_bytes(65536),
                1,
                "shared memory",
            ),
        ];
        for (config, static_group, needle) in cases {
            match check("my_kernel", &config, &small, static_group) {
                Err(Error::InvalidLaunch { kernel, reason }) => {
                    assert_eq!(kernel, "my_kernel");
                    assert!(reason.contains(needle), "{config:?}: {reason}");
                }
                other => panic!("{config:?}: {other:?}"),
            }
        }
        // Exactly at the limits is fine.
        check(
            "k",
            &LaunchConfig::new(1, 1024).with_shared_bytes(65535),
            &small,
            1,
        )
        .unwrap();
    }
}
