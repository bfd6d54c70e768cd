//! Agent and memory-pool discovery: which GPUs are devices, which pools serve which allocation.
//!
//! * Devices are the GPU agents (`HSA_AGENT_INFO_DEVICE == GPU`) in `hsa_iterate_agents` order.
//! * Device memory comes from each GPU's global **coarse-grained** pool that allows runtime
//!   allocation (VRAM; DESIGN.md §4).
//! * Host memory (pinned / mapped) comes from a CPU agent's global **fine-grained** pool that
//!   allows runtime allocation (the "system" pool; one without the kernarg flag is preferred),
//!   made accessible to GPUs with `hsa_amd_agents_allow_access`.
//! * The per-block shared-memory limit is the size of the GPU's group-segment pool (LDS).
//! * Kernel arguments come from the CPU agent's fine-grained global pool flagged
//!   `KERNARG_INIT` (the "kernarg pool"), or the host pool when the runtime has none.

use crate::driver::Hsa;
use crate::driver::hsa::PoolInfo;
use gpu_mem_core::backend::DeviceInfo;
use gpu_mem_core::{BackendKind, Error, Result};
use gpu_mem_hsa_sys as sys;

/// `HSA_AMD_AGENT_INFO_MEMORY_AVAIL`: free bytes across the agent's global pools. Added in ROCm
/// 6.x (hsa_ext_amd.h 1.4); 5.2.3 rejects it, so it is probed, not assumed.
pub const HSA_AMD_AGENT_INFO_MEMORY_AVAIL: u32 = 0xA015;

/// One GPU agent seen as a device.
#[derive(Debug, Clone)]
pub struct Gpu {
    /// The agent handle.
    pub agent: sys::hsa_agent_t,
    /// Static facts reported through the trait.
    pub info: DeviceInfo,
    /// The coarse-grained global pool device allocations come from.
    pub device_pool: PoolInfo,
    /// Whether this GPU may be granted access to the host pool (not NEVER_ALLOWED).
    pub host_pool_access: bool,
}

/// The system (host) side.
#[derive(Debug, Clone, Copy)]
pub struct Host {
    /// The CPU agent owning the host pool.
    pub agent: sys::hsa_agent_t,
    /// The fine-grained global pool host allocations come from.
    pub pool: PoolInfo,
    /// The fine-grained global pool flagged for kernel arguments, if the runtime has one.
    pub kernarg_pool: Option<PoolInfo>,
}

/// Everything discovered at start-up.
#[derive(Debug, Clone)]
pub struct Topology {
    pub gpus: Vec<Gpu>,
    pub host: Host,
    /// HSA system-clock ticks per second.
    pub timestamp_frequency: u64,
}

/// A NUL-terminated fixed-size C string attribute as text.
fn c_chars(raw: &[u8]) -> String {
    let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end]).trim().to_string()
}

fn device_type(hsa: &Hsa, agent: sys::hsa_agent_t) -> Result<sys::hsa_device_type_t> {
    // SAFETY: HSA_AGENT_INFO_DEVICE is an hsa_device_type_t (u32 enum).
    unsafe { hsa.agent_get_info(agent, sys::HSA_AGENT_INFO_DEVICE, 0u32) }
}

/// The pools of `agent` with their attributes.
fn pools(hsa: &Hsa, agent: sys::hsa_agent_t) -> Result<Vec<PoolInfo>> {
    // SAFETY: `agent` came from `hsa.agents()` (the caller's discovery) and the pools from the
    // runtime, initialised meanwhile.
    unsafe { hsa.memory_pools(agent) }?
        .into_iter()
        // SAFETY: as above.
        .map(|p| unsafe { hsa.pool_info(p) })
        .collect()
}

fn unavailable(reason: String) -> Error {
    Error::BackendUnavailable {
        backend: BackendKind::Roc,
        reason,
    }
}

impl Topology {
    /// Discovers agents and pools (after a successful `hsa_init`).
    pub fn discover(hsa: &Hsa) -> Result<Topology> {
        let agents = hsa.agents()?;
        let mut host: Option<Host> = None;
        let mut gpu_agents = Vec::new();
        for agent in agents {
            match device_type(hsa, agent)? {
                sys::HSA_DEVICE_TYPE_GPU => gpu_agents.push(agent),
                sys::HSA_DEVICE_TYPE_CPU if host.is_none() => {
                    let (pool, kernarg_pool) = host_pools(hsa, agent)?;
                    host = pool.map(|pool| Host {
                        agent,
                        pool,
                        kernarg_pool,
                    });
                }
                _ => {}
            }
        }
        let host = host.ok_or_else(|| {
            unavailable("no CPU agent with a fine-grained global memory pool".to_string())
        })?;
        if gpu_agents.is_empty() {
            return Err(unavailable(
                "the HSA runtime reports no GPU agent".to_string(),
            ));
        }
        let gpus = gpu_agents
            .into_iter()
            .enumerate()
            .map(|(ordinal, agent)| describe_gpu(hsa, ordinal, agent, &host))
            .collect::<Result<Vec<_>>>()?;
        // SAFETY: HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY is a uint64_t.
        let timestamp_frequency: u64 =
            unsafe { hsa.system_get_info(sys::HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY) }?;
        Ok(Topology {
            gpus,
            host,
            timestamp_frequency: timestamp_frequency.max(1),
        })
    }
}

/// The CPU agent's fine-grained, allocatable global pool (preferring one that is not the
/// kernarg pool), and its kernarg pool.
fn host_pools(hsa: &Hsa, agent: sys::hsa_agent_t) -> Result<(Option<PoolInfo>, Option<PoolInfo>)> {
    let fine = sys::HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED;
    let kernarg = sys::HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT;
    let candidates: Vec<PoolInfo> = pools(hsa, agent)?
        .into_iter()
        .filter(|p| p.alloc_allowed && p.is_global_with(fine))
        .collect();
    let host = candidates
        .iter()
        .find(|p| p.global_flags & kernarg == 0)
        .or_else(|| candidates.first())
        .copied();
    let kernarg_pool = candidates
        .iter()
        .find(|p| p.global_flags & kernarg != 0)
        .copied();
    Ok((host, kernarg_pool))
}

fn describe_gpu(hsa: &Hsa, ordinal: usize, agent: sys::hsa_agent_t, host: &Host) -> Result<Gpu> {
    let gpu_pools = pools(hsa, agent)?;
    let device_pool = gpu_pools
        .iter()
        .find(|p| {
            p.alloc_allowed && p.is_global_with(sys::HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED)
        })
        .copied()
        .ok_or_else(|| {
            unavailable(format!(
                "GPU agent {ordinal} has no allocatable coarse-grained global pool"
            ))
        })?;
    let lds = gpu_pools
        .iter()
        .find(|p| p.segment == sys::HSA_AMD_SEGMENT_GROUP)
        .map_or(0, |p| p.size);
    // SAFETY: HSA_AGENT_INFO_NAME is char[64].
    let arch = c_chars(&unsafe { hsa.agent_get_info(agent, sys::HSA_AGENT_INFO_NAME, [0u8; 64]) }?);
    // SAFETY: HSA_AMD_AGENT_INFO_PRODUCT_NAME is char[64].
    let product =
        unsafe { hsa.agent_get_info(agent, sys::HSA_AMD_AGENT_INFO_PRODUCT_NAME, [0u8; 64]) }
            .map(|raw| c_chars(&raw))
            .unwrap_or_default();
    // SAFETY: HSA_AGENT_INFO_WAVEFRONT_SIZE is a uint32_t.
    let warp_size: u32 =
        unsafe { hsa.agent_get_info(agent, sys::HSA_AGENT_INFO_WAVEFRONT_SIZE, 0u32) }?;
    // SAFETY: HSA_AGENT_INFO_WORKGROUP_MAX_SIZE is a uint32_t.
    let max_threads: u32 =
        unsafe { hsa.agent_get_info(agent, sys::HSA_AGENT_INFO_WORKGROUP_MAX_SIZE, 0u32) }?;
    // SAFETY: HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS is an hsa_amd_memory_pool_access_t (u32).
    let access: u32 = unsafe {
        hsa.agent_memory_pool_get_info(
            agent,
            host.pool.pool,
            sys::HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS,
        )
    }?;
    let host_pool_access = access != sys::HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
    let name = if product.is_empty() {
        arch.clone()
    } else {
        product
    };
    Ok(Gpu {
        agent,
        info: DeviceInfo {
            ordinal,
            name,
            arch,
            total_memory: device_pool.size as u64,
            warp_size,
            max_threads_per_block: max_threads,
            max_shared_memory_per_block: lds,
            can_map_host_memory: host_pool_access,
        },
        device_pool,
        host_pool_access,
    })
}

/// Free bytes of a GPU from `HSA_AMD_AGENT_INFO_MEMORY_AVAIL` when the runtime knows it (6.x).
pub fn probe_memory_avail(hsa: &Hsa, agent: sys::hsa_agent_t) -> Option<u64> {
    // SAFETY: the 6.x attribute 0xA015 is a uint64_t; older runtimes reject the attribute
    // with an error before writing anything.
    unsafe { hsa.agent_get_info(agent, HSA_AMD_AGENT_INFO_MEMORY_AVAIL, 0u64) }.ok()
}
