//! Runtime lifetime, system and agent queries, memory-pool discovery.

use super::Hsa;
use gpu_mem_core::Result;
use gpu_mem_hsa_sys as sys;
use std::ffi::c_void;

/// What the backend needs to know about one memory pool.
#[derive(Debug, Clone, Copy)]
pub struct PoolInfo {
    /// The pool handle.
    pub pool: sys::hsa_amd_memory_pool_t,
    /// `HSA_AMD_SEGMENT_*`.
    pub segment: sys::hsa_amd_segment_t,
    /// `HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_*` bits (global segment only, else 0).
    pub global_flags: u32,
    /// Pool size in bytes.
    pub size: usize,
    /// Whether `hsa_amd_memory_pool_allocate` may be used on it.
    pub alloc_allowed: bool,
    /// Allocation granule in bytes (0 when allocation is not allowed).
    pub granule: usize,
    /// Allocation alignment in bytes (0 when allocation is not allowed).
    pub alignment: usize,
}

impl PoolInfo {
    /// A global-segment pool with the given `HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_*` bit.
    pub fn is_global_with(&self, flag: u32) -> bool {
        self.segment == sys::HSA_AMD_SEGMENT_GLOBAL && self.global_flags & flag != 0
    }
}

/// `hsa_iterate_agents` / `hsa_amd_agent_iterate_memory_pools` callback: appends the handle to
/// the `Vec` behind `data`.
unsafe extern "C" fn collect<T>(item: T, data: *mut c_void) -> sys::hsa_status_t {
    // SAFETY: `data` is the `&mut Vec<T>` passed by the caller of the iteration, which is
    // still borrowed for the duration of the (synchronous) iteration.
    let items = unsafe { &mut *data.cast::<Vec<T>>() };
    items.push(item);
    sys::HSA_STATUS_SUCCESS
}

impl Hsa {
    /// `hsa_init`: takes a reference on the runtime (opens `/dev/kfd`).
    pub fn init(&self) -> Result<()> {
        let f = self.get(self.functions.hsa_init, "hsa_init", "the ROC backend")?;
        // SAFETY: hsa_init has no preconditions.
        let status = unsafe { f() };
        self.check("hsa_init", status)
    }

    /// `hsa_shut_down`: drops one reference taken by [`Hsa::init`].
    ///
    /// # Safety
    /// The caller gives back a reference it took with [`Hsa::init`] and no longer uses the
    /// runtime through it: the last `hsa_shut_down` destroys every queue, signal and allocation
    /// other users of the runtime may still hold.
    pub unsafe fn shut_down(&self) -> Result<()> {
        let f = self.get(
            self.functions.hsa_shut_down,
            "hsa_shut_down",
            "runtime shutdown",
        )?;
        // SAFETY: hsa_shut_down has no preconditions (it reports NOT_INITIALIZED itself).
        let status = unsafe { f() };
        self.check("hsa_shut_down", status)
    }

    /// `hsa_system_get_info`.
    ///
    /// # Safety
    /// `T` is the C type the HSA specification gives `attribute`.
    pub unsafe fn system_get_info<T: Copy + Default>(
        &self,
        attribute: sys::hsa_system_info_t,
    ) -> Result<T> {
        let f = self.get(
            self.functions.hsa_system_get_info,
            "hsa_system_get_info",
            "system queries",
        )?;
        let mut value = T::default();
        // SAFETY: `value` is writable and, per the caller, as large as the attribute's type.
        let status = unsafe { f(attribute, (&raw mut value).cast()) };
        self.check("hsa_system_get_info", status)?;
        Ok(value)
    }

    /// `hsa_iterate_agents`: every agent (CPUs and GPUs) in the system.
    pub fn agents(&self) -> Result<Vec<sys::hsa_agent_t>> {
        let f = self.get(
            self.functions.hsa_iterate_agents,
            "hsa_iterate_agents",
            "device discovery",
        )?;
        let mut agents: Vec<sys::hsa_agent_t> = Vec::new();
        // SAFETY: the callback matches the declared signature and only pushes into `agents`,
        // which outlives the synchronous iteration.
        let status = unsafe { f(Some(collect::<sys::hsa_agent_t>), (&raw mut agents).cast()) };
        self.check("hsa_iterate_agents", status)?;
        Ok(agents)
    }

    /// `hsa_agent_get_info` (core `HSA_AGENT_INFO_*` and AMD `HSA_AMD_AGENT_INFO_*` attributes).
    ///
    /// # Safety
    /// `T` is the C type the specification gives `attribute` (e.g. `[u8; 64]` for the name).
    pub unsafe fn agent_get_info<T: Copy>(
        &self,
        agent: sys::hsa_agent_t,
        attribute: u32,
        mut value: T,
    ) -> Result<T> {
        let f = self.get(
            self.functions.hsa_agent_get_info,
            "hsa_agent_get_info",
            "device queries",
        )?;
        // SAFETY: `value` is writable and, per the caller, as large as the attribute's type.
        let status = unsafe { f(agent, attribute, (&raw mut value).cast()) };
        self.check("hsa_agent_get_info", status)?;
        Ok(value)
    }

    /// `hsa_amd_agent_iterate_memory_pools`: the pools an agent owns.
    ///
    /// # Safety
    /// `agent` is an agent handed out by this runtime (from [`Hsa::agents`] / [`Hsa::memory_pools`]) while
    /// it is initialised: ROCr takes handles for object pointers and does not validate them.
    pub unsafe fn memory_pools(
        &self,
        agent: sys::hsa_agent_t,
    ) -> Result<Vec<sys::hsa_amd_memory_pool_t>> {
        let f = self.get(
            self.functions.hsa_amd_agent_iterate_memory_pools,
            "hsa_amd_agent_iterate_memory_pools",
            "memory pools",
        )?;
        let mut pools: Vec<sys::hsa_amd_memory_pool_t> = Vec::new();
        // SAFETY: as in `agents`.
        let status = unsafe {
            f(
                agent,
                Some(collect::<sys::hsa_amd_memory_pool_t>),
                (&raw mut pools).cast(),
            )
        };
        self.check("hsa_amd_agent_iterate_memory_pools", status)?;
        Ok(pools)
    }

    /// `hsa_amd_memory_pool_get_info`.
    ///
    /// # Safety
    /// `T` is the C type of `attribute`.
    pub unsafe fn memory_pool_get_info<T: Copy + Default>(
        &self,
        pool: sys::hsa_amd_memory_pool_t,
        attribute: sys::hsa_amd_memory_pool_info_t,
    ) -> Result<T> {
        let f = self.get(
            self.functions.hsa_amd_memory_pool_get_info,
            "hsa_amd_memory_pool_get_info",
            "memory pools",
        )?;
        let mut value = T::default();
        // SAFETY: `value` is writable and as large as the attribute's type (caller).
        let status = unsafe { f(pool, attribute, (&raw mut value).cast()) };
        self.check("hsa_amd_memory_pool_get_info", status)?;
        Ok(value)
    }

    /// `hsa_amd_agent_memory_pool_get_info`: how `agent` may access `pool`.
    ///
    /// # Safety
    /// `T` is the C type of `attribute`.
    pub unsafe fn agent_memory_pool_get_info<T: Copy + Default>(
        &self,
        agent: sys::hsa_agent_t,
        pool: sys::hsa_amd_memory_pool_t,
        attribute: sys::hsa_amd_agent_memory_pool_info_t,
    ) -> Result<T> {
        let f = self.get(
            self.functions.hsa_amd_agent_memory_pool_get_info,
            "hsa_amd_agent_memory_pool_get_info",
            "memory pools",
        )?;
        let mut value = T::default();
        // SAFETY: `value` is writable and as large as the attribute's type (caller).
        let status = unsafe { f(agent, pool, attribute, (&raw mut value).cast()) };
        self.check("hsa_amd_agent_memory_pool_get_info", status)?;
        Ok(value)
    }

    /// The attributes of `pool` the backend uses to pick pools.
    ///
    /// # Safety
    /// `pool` is a pool handed out by this runtime (from [`Hsa::agents`] / [`Hsa::memory_pools`]) while
    /// it is initialised: ROCr takes handles for object pointers and does not validate them.
    pub unsafe fn pool_info(&self, pool: sys::hsa_amd_memory_pool_t) -> Result<PoolInfo> {
        // Each attribute below is read with the C type hsa_ext_amd.h gives it: SEGMENT
        // hsa_amd_segment_t (u32), GLOBAL_FLAGS u32, SIZE size_t, RUNTIME_ALLOC_ALLOWED bool,
        // RUNTIME_ALLOC_GRANULE / ALIGNMENT size_t.
        // SAFETY: see above.
        let segment: u32 =
            unsafe { self.memory_pool_get_info(pool, sys::HSA_AMD_MEMORY_POOL_INFO_SEGMENT) }?;
        let global_flags: u32 = if segment == sys::HSA_AMD_SEGMENT_GLOBAL {
            // SAFETY: see above.
            unsafe { self.memory_pool_get_info(pool, sys::HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS) }?
        } else {
            0
        };
        // SAFETY: see above.
        let size: usize =
            unsafe { self.memory_pool_get_info(pool, sys::HSA_AMD_MEMORY_POOL_INFO_SIZE) }?;
        // SAFETY: see above.
        let alloc_allowed: bool = unsafe {
            self.memory_pool_get_info(pool, sys::HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED)
        }?;
        let (granule, alignment) = if alloc_allowed {
            // SAFETY: see above.
            let granule: usize = unsafe {
                self.memory_pool_get_info(pool, sys::HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE)
            }?;
            // SAFETY: see above.
            let alignment: usize = unsafe {
                self.memory_pool_get_info(
                    pool,
                    sys::HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT,
                )
            }?;
            (granule, alignment)
        } else {
            (0, 0)
        };
        Ok(PoolInfo {
            pool,
            segment,
            global_flags,
            size,
            alloc_allowed,
            granule,
            alignment,
        })
    }
}
