//! [`StreamOrderedPool`]: allocation and free ordered on a stream, from the device's memory
//! pool (optional, through [`Backend::pool`](super::Backend::pool)).

use super::types::{DevicePtr, PoolUsage, StreamHandle};
use crate::error::Result;

/// Stream-ordered allocation from the device's memory pool, and the pool's settings
/// (`cuMemAllocAsync`, `cuMemFreeAsync`, `cuMemPool*` on the device's default pool; the
/// simulator's block cache).
///
/// # Safety
///
/// An implementation must uphold [`Backend`](super::Backend)'s contract, and:
///
/// * **Allocations.** [`StreamOrderedPool::alloc_async`] returns, on `Ok`, memory with the
///   promises of [`Memory::alloc`](super::Memory::alloc), usable by work enqueued on its stream
///   after the call, and valid until freed.
/// * **Frees.** [`StreamOrderedPool::free_async`] gives the memory back only once the work
///   enqueued on its stream before the call has completed.
pub unsafe trait StreamOrderedPool: Send + Sync {
    /// Allocates `bytes` (> 0) of device memory from the device's pool, ordered on `stream`: the
    /// memory may be used by work enqueued on `stream` after this call (`cuMemAllocAsync`; HSA
    /// has no stream-ordered allocation).
    ///
    /// # Safety
    /// `stream` came from [`Streams::stream_create`](super::Streams::stream_create) on this
    /// device and is not destroyed.
    unsafe fn alloc_async(
        &self,
        device: usize,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<DevicePtr>;

    /// Returns memory to the device's pool once the work enqueued on `stream` before this call
    /// has completed (`cuMemFreeAsync`).
    ///
    /// # Safety
    /// `ptr` came from [`Memory::alloc`](super::Memory::alloc) or
    /// [`StreamOrderedPool::alloc_async`] on this device and is freed once; no work enqueued on
    /// other streams still uses it; `stream` is a live stream of this device.
    unsafe fn free_async(&self, device: usize, ptr: DevicePtr, stream: StreamHandle) -> Result<()>;

    /// How much memory the device's pool holds and how much of it is in use.
    fn pool_usage(&self, device: usize) -> Result<PoolUsage>;

    /// Sets how much freed memory the pool keeps for reuse instead of releasing it
    /// (`cuMemPoolSetAttribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)`).
    fn pool_set_release_threshold(&self, device: usize, bytes: u64) -> Result<()>;

    /// Releases freed memory the pool keeps until at most `keep` bytes remain reserved beyond
    /// what is in use (`cuMemPoolTrimTo`).
    fn pool_trim(&self, device: usize, keep: u64) -> Result<()>;
}
