//! Plain data exchanged across the [`Backend`](super::Backend) trait.

use std::ptr::NonNull;

/// A device address as the backend understands it (CUDA `CUdeviceptr`, an HSA pointer, a
/// simulator address). Zero is never a valid allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// The null device pointer (used by zero-size arrays, as in Numba).
    pub const NULL: DevicePtr = DevicePtr(0);

    /// `self + bytes`, or `None` on overflow.
    pub fn checked_add(self, bytes: u64) -> Option<DevicePtr> {
        self.0.checked_add(bytes).map(DevicePtr)
    }

    /// `true` for the null pointer.
    pub fn is_null(self) -> bool {
        self.0 == 0
    }
}

/// A backend's stream handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamHandle(pub u64);

/// What an asynchronous operation's enqueue found: whether the operation is still to run.
///
/// A backend may always answer [`Enqueued::Queued`]. [`Enqueued::Completed`] promises more: the
/// operation, and everything put on the stream before it, had completed when the call returned
/// (a simulator runs a short copy on an idle stream at once), and no failure waits to be
/// reported by the stream's next synchronization. The caller may then release what the work
/// used at once, and skip that synchronization if nothing else is put on the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    /// The operation may still be running or waiting to run.
    Queued,
    /// The operation and all earlier work on the stream have completed.
    Completed,
}

/// A backend's event handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventHandle(pub u64);

/// Static facts about one device.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    /// Device ordinal within its backend.
    pub ordinal: usize,
    /// Marketing or simulator name.
    pub name: String,
    /// Architecture: `sm_90`, `gfx90a`, `sim`.
    pub arch: String,
    /// Total device memory in bytes.
    pub total_memory: u64,
    /// Threads per warp (CUDA) or wavefront (ROC).
    pub warp_size: u32,
    /// Largest block (work-group) size.
    pub max_threads_per_block: u32,
    /// Static + dynamic shared (group) memory a block may use, in bytes.
    pub max_shared_memory_per_block: usize,
    /// Whether host memory can be mapped into the device address space.
    pub can_map_host_memory: bool,
}

/// Free and total device memory, in bytes (Numba's `get_memory_info()`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemInfo {
    /// Bytes still available.
    pub free: u64,
    /// Capacity.
    pub total: u64,
}

/// Flags for page-locked host allocations (`cuMemHostAlloc`'s, spelled out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostAllocFlags {
    /// Usable from every context, not only the allocating device's.
    pub portable: bool,
    /// Mapped into the device address space.
    pub mapped: bool,
    /// Write-combined: fast for the device to read, slow for the host to read.
    pub write_combined: bool,
}

/// Flags for registering existing host memory (`cuMemHostRegister`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HostRegisterFlags {
    /// Usable from every context.
    pub portable: bool,
    /// Mapped into the device address space.
    pub mapped: bool,
}

/// A page-locked host allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostAllocation {
    /// Host address (page aligned on every backend).
    pub host: NonNull<u8>,
    /// The device address of the same memory when it was mapped.
    pub device: Option<DevicePtr>,
    /// `true` when the backend guarantees every byte reads as zero (the core then skips its own
    /// zero-fill); `false` when the memory may be uninitialised.
    pub zeroed: bool,
}

/// A device allocation exported for another process (CUDA's `CUipcMemHandle`, HSA's
/// `hsa_amd_ipc_memory_t`, the simulator's shared-memory file): plain bytes, meaningful only to
/// the backend kind that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpcMemHandle {
    /// Size of the exported allocation in bytes.
    pub bytes: u64,
    /// The backend's opaque handle.
    pub data: Vec<u8>,
}

/// What a device's memory pool holds (`cuMemPoolGetAttribute`'s reserved and used memory, the
/// simulator's block cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolUsage {
    /// Device memory in use by live allocations.
    pub used: u64,
    /// Memory the pool holds: in use plus freed memory kept for reuse.
    pub reserved: u64,
    /// Freed memory the pool keeps before releasing any (`u64::MAX`: keeps everything).
    pub release_threshold: u64,
}
