//! Pool allocation, access grants, page-locking, copies, fill and pointer queries.

use super::Hsa;
use gpu_mem_core::Result;
use gpu_mem_hsa_sys as sys;
use std::ffi::c_void;

impl Hsa {
    /// `hsa_amd_memory_pool_allocate(pool, bytes, 0, &ptr)`. Flags are reserved (must be 0) in
    /// the 5.2.3 interface.
    ///
    /// # Safety
    /// `pool` is a pool handed out by this runtime (from [`Hsa::agents`] / [`Hsa::memory_pools`]) while
    /// it is initialised: ROCr takes handles for object pointers and does not validate them.
    pub unsafe fn memory_pool_allocate(
        &self,
        pool: sys::hsa_amd_memory_pool_t,
        bytes: usize,
    ) -> Result<*mut c_void> {
        let f = self.get(
            self.functions.hsa_amd_memory_pool_allocate,
            "hsa_amd_memory_pool_allocate",
            "memory allocation",
        )?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-pointer; the runtime validates the pool and size.
        let status = unsafe { f(pool, bytes, 0, &mut ptr) };
        self.check("hsa_amd_memory_pool_allocate", status)?;
        Ok(ptr)
    }

    /// `hsa_amd_memory_pool_free`.
    ///
    /// # Safety
    /// `ptr` is the exact base returned by [`Hsa::memory_pool_allocate`], freed once, and no
    /// agent still accesses it.
    pub unsafe fn memory_pool_free(&self, ptr: *mut c_void) -> Result<()> {
        let f = self.get(
            self.functions.hsa_amd_memory_pool_free,
            "hsa_amd_memory_pool_free",
            "memory allocation",
        )?;
        // SAFETY: guaranteed by the caller.
        let status = unsafe { f(ptr) };
        self.check("hsa_amd_memory_pool_free", status)
    }

    /// `hsa_amd_agents_allow_access(agents, NULL, ptr)`. Replaces the access set: afterwards
    /// only `agents` (plus the owning pool's agent) may access the allocation.
    ///
    /// # Safety
    /// `ptr` is the base of a live pool allocation.
    pub unsafe fn agents_allow_access(
        &self,
        agents: &[sys::hsa_agent_t],
        ptr: *const c_void,
    ) -> Result<()> {
        let f = self.get(
            self.functions.hsa_amd_agents_allow_access,
            "hsa_amd_agents_allow_access",
            "host memory visible to the device",
        )?;
        let count = u32::try_from(agents.len()).unwrap_or(u32::MAX);
        // SAFETY: `agents` holds `count` valid handles; `ptr` is a live allocation (caller).
        let status = unsafe { f(count, agents.as_ptr(), std::ptr::null(), ptr) };
        self.check("hsa_amd_agents_allow_access", status)
    }

    /// `hsa_amd_memory_lock(host, bytes, agents, n, &agent_ptr)`: page-locks ordinary host
    /// memory and returns the address the listed agents must use for it.
    ///
    /// # Safety
    /// `host..host+bytes` is valid host memory that stays allocated until
    /// [`Hsa::memory_unlock`] is called with the same `host`.
    pub unsafe fn memory_lock(
        &self,
        host: *mut c_void,
        bytes: usize,
        agents: &[sys::hsa_agent_t],
    ) -> Result<*mut c_void> {
        let f = self.get(
            self.functions.hsa_amd_memory_lock,
            "hsa_amd_memory_lock",
            "registering host memory",
        )?;
        let mut agents = agents.to_vec();
        let count = i32::try_from(agents.len()).unwrap_or(i32::MAX);
        let mut agent_ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: the agent array and out-pointer are valid for the call; the range is valid
        // host memory (caller). ROCr does not keep the agents array.
        let status = unsafe { f(host, bytes, agents.as_mut_ptr(), count, &mut agent_ptr) };
        self.check("hsa_amd_memory_lock", status)?;
        Ok(agent_ptr)
    }

    /// `hsa_amd_memory_lock_to_pool`: as [`Hsa::memory_lock`], with the access properties of a
    /// CPU `pool` (fine- or coarse-grained).
    ///
    /// # Safety
    /// As [`Hsa::memory_lock`].
    pub unsafe fn memory_lock_to_pool(
        &self,
        host: *mut c_void,
        bytes: usize,
        agents: &[sys::hsa_agent_t],
        pool: sys::hsa_amd_memory_pool_t,
    ) -> Result<*mut c_void> {
        let f = self.get(
            self.functions.hsa_amd_memory_lock_to_pool,
            "hsa_amd_memory_lock_to_pool",
            "registering host memory",
        )?;
        let mut agents = agents.to_vec();
        let count = i32::try_from(agents.len()).unwrap_or(i32::MAX);
        let mut agent_ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: as in `memory_lock`; flags are reserved and 0.
        let status = unsafe {
            f(
                host,
                bytes,
                agents.as_mut_ptr(),
                count,
                pool,
                0,
                &mut agent_ptr,
            )
        };
        self.check("hsa_amd_memory_lock_to_pool", status)?;
        Ok(agent_ptr)
    }

    /// `hsa_amd_memory_unlock`.
    ///
    /// # Safety
    /// `host` was passed to a successful lock call, is still allocated, and no agent still
    /// accesses it through the agent pointer.
    pub unsafe fn memory_unlock(&self, host: *mut c_void) -> Result<()> {
        let f = self.get(
            self.functions.hsa_amd_memory_unlock,
            "hsa_amd_memory_unlock",
            "registering host memory",
        )?;
        // SAFETY: guaranteed by the caller.
        let status = unsafe { f(host) };
        self.check("hsa_amd_memory_unlock", status)
    }

    /// `hsa_memory_register`. In ROCr this only checks its arguments; it does **not** page-lock
    /// (use [`Hsa::memory_lock`]). Kept for completeness and for runtimes that do more.
    ///
    /// # Safety
    /// `ptr..ptr+bytes` is valid host memory until [`Hsa::memory_deregister`].
    pub unsafe fn memory_register(&self, ptr: *mut c_void, bytes: usize) -> Result<()> {
        let f = self.get(
            self.functions.hsa_memory_register,
            "hsa_memory_register",
            "registering host memory",
        )?;
        // SAFETY: guaranteed by the caller.
        let status = unsafe { f(ptr, bytes) };
        self.check("hsa_memory_register", status)
    }

    /// `hsa_memory_deregister` (exactly the registered interval).
    ///
    /// # Safety
    /// `ptr, bytes` match a previous [`Hsa::memory_register`].
    pub unsafe fn memory_deregister(&self, ptr: *mut c_void, bytes: usize) -> Result<()> {
        let f = self.get(
            self.functions.hsa_memory_deregister,
            "hsa_memory_deregister",
            "registering host memory",
        )?;
        // SAFETY: guaranteed by the caller.
        let status = unsafe { f(ptr, bytes) };
        self.check("hsa_memory_deregister", status)
    }

    /// `hsa_memory_copy`: synchronous copy; ROCr locks pageable host memory itself for the copy.
    ///
    /// # Safety
    /// Both ranges are valid for `bytes` bytes and do not overlap.
    pub unsafe fn memory_copy(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        bytes: usize,
    ) -> Result<()> {
        let f = self.get(
            self.functions.hsa_memory_copy,
            "hsa_memory_copy",
            "memory copies",
        )?;
        // SAFETY: guaranteed by the caller.
        let status = unsafe { f(dst, src, bytes) };
        self.check("hsa_memory_copy", status)
    }

    /// `hsa_amd_memory_async_copy`: starts a copy after every `deps` signal reached 0; the
    /// runtime decrements `completion` when done, or sets it negative on failure (the call's
    /// status only covers enqueueing).
    ///
    /// # Safety
    /// `dst_agent` / `src_agent` own or can access the ranges, which are accessible to the copy
    /// agent (pool memory with access granted, or a locked agent pointer; no implicit
    /// page-locking happens), and stay valid until `completion` signals.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn memory_async_copy(
        &self,
        dst: *mut c_void,
        dst_agent: sys::hsa_agent_t,
        src: *const c_void,
        src_agent: sys::hsa_agent_t,
        bytes: usize,
        deps: &[sys::hsa_signal_t],
        completion: sys::hsa_signal_t,
    ) -> Result<()> {
        let f = self.get(
            self.functions.hsa_amd_memory_async_copy,
            "hsa_amd_memory_async_copy",
            "asynchronous copies",
        )?;
        let count = u32::try_from(deps.len()).unwrap_or(u32::MAX);
        let deps_ptr = if deps.is_empty() {
            std::ptr::null()
        } else {
            deps.as_ptr()
        };
        // SAFETY: the dependency array is valid for the call (ROCr copies it); the ranges are
        // valid per the caller.
        let status = unsafe {
            f(
                dst, dst_agent, src, src_agent, bytes, count, deps_ptr, completion,
            )
        };
        self.check("hsa_amd_memory_async_copy", status)
    }

    /// `hsa_amd_memory_fill(ptr, value, count)`: writes `count` 32-bit words, synchronously.
    ///
    /// # Safety
    /// `ptr` is 4-byte aligned inside a runtime allocation holding `count` words.
    pub unsafe fn memory_fill(&self, ptr: *mut c_void, value: u32, count: usize) -> Result<()> {
        let f = self.get(
            self.functions.hsa_amd_memory_fill,
            "hsa_amd_memory_fill",
            "memset",
        )?;
        // SAFETY: guaranteed by the caller.
        let status = unsafe { f(ptr, value, count) };
        self.check("hsa_amd_memory_fill", status)
    }

    /// `hsa_amd_pointer_info` for the address `ptr` (looked up, never dereferenced), without
    /// the accessible-agents list.
    pub fn pointer_info(&self, ptr: usize) -> Result<sys::hsa_amd_pointer_info_t> {
        let f = self.get(
            self.functions.hsa_amd_pointer_info,
            "hsa_amd_pointer_info",
            "pointer queries",
        )?;
        let mut info = sys::hsa_amd_pointer_info_t {
            size: u32::try_from(std::mem::size_of::<sys::hsa_amd_pointer_info_t>())
                .unwrap_or(u32::MAX),
            ..Default::default()
        };
        // SAFETY: `info` is writable with its `size` set as the API requires; the runtime only
        // looks `ptr` up, it never dereferences it; the optional outputs are null.
        let status = unsafe {
            f(
                ptr as *const c_void,
                &mut info,
                None,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        self.check("hsa_amd_pointer_info", status)?;
        Ok(info)
    }
}

impl Hsa {
    /// `hsa_amd_ipc_memory_create(ptr, len, &handle)`: a process-independent handle of the
    /// allocation starting at `ptr`; `len` must be the allocation's full length.
    ///
    /// # Safety
    /// `ptr` is the base of a live runtime allocation of `len` bytes.
    pub unsafe fn ipc_memory_create(
        &self,
        ptr: *mut c_void,
        len: usize,
    ) -> Result<sys::hsa_amd_ipc_memory_t> {
        let f = self.get(
            self.functions.hsa_amd_ipc_memory_create,
            "hsa_amd_ipc_memory_create",
            "IPC memory handles",
        )?;
        let mut handle = sys::hsa_amd_ipc_memory_t::default();
        // SAFETY: `handle` is a valid out-pointer; the allocation is live (caller).
        let status = unsafe { f(ptr, len, &mut handle) };
        self.check("hsa_amd_ipc_memory_create", status)?;
        Ok(handle)
    }

    /// `hsa_amd_ipc_memory_attach(handle, len, agents, &mapped)`: maps another process's shared
    /// allocation of `len` bytes (its full length) for `agents` and returns the local address.
    ///
    /// # Safety
    /// Every agent in `agents` is one handed out by this runtime (from [`Hsa::agents`] / [`Hsa::memory_pools`]) while
    /// it is initialised: ROCr takes handles for object pointers and does not validate them.
    pub unsafe fn ipc_memory_attach(
        &self,
        handle: &sys::hsa_amd_ipc_memory_t,
        len: usize,
        agents: &[sys::hsa_agent_t],
    ) -> Result<*mut c_void> {
        let f = self.get(
            self.functions.hsa_amd_ipc_memory_attach,
            "hsa_amd_ipc_memory_attach",
            "IPC memory handles",
        )?;
        let count = u32::try_from(agents.len()).unwrap_or(u32::MAX);
        let mut mapped: *mut c_void = std::ptr::null_mut();
        // SAFETY: the handle, agent array and out-pointer are valid for the call; the runtime
        // validates the handle's contents and the length.
        let status = unsafe { f(handle, len, count, agents.as_ptr(), &mut mapped) };
        self.check("hsa_amd_ipc_memory_attach", status)?;
        Ok(mapped)
    }

    /// `hsa_amd_ipc_memory_detach`.
    ///
    /// # Safety
    /// `mapped` came from [`Hsa::ipc_memory_attach`], is detached once per attach, and no agent
    /// still accesses it.
    pub unsafe fn ipc_memory_detach(&self, mapped: *mut c_void) -> Result<()> {
        let f = self.get(
            self.functions.hsa_amd_ipc_memory_detach,
            "hsa_amd_ipc_memory_detach",
            "IPC memory handles",
        )?;
        // SAFETY: guaranteed by the caller.
        let status = unsafe { f(mapped) };
        self.check("hsa_amd_ipc_memory_detach", status)
    }
}
