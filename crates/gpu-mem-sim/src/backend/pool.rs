//! [`StreamOrderedPool`] on the simulator: the pool is the device's block cache; a stream-ordered
//! allocation is taken from it at once, a stream-ordered free is a job of its stream.

use crate::SimBackend;
use gpu_mem_core::Result;
use gpu_mem_core::backend::{DevicePtr, Memory, PoolUsage, StreamHandle, StreamOrderedPool};
use std::sync::Arc;

// SAFETY: `alloc_async` is `alloc` (usable by any later work, so by the stream's); `free_async`
// frees as a job of the stream, after the work enqueued before it.
unsafe impl StreamOrderedPool for SimBackend {
    unsafe fn alloc_async(
        &self,
        device: usize,
        bytes: usize,
        stream: StreamHandle,
    ) -> Result<DevicePtr> {
        let d = self.device(device)?;
        // The stream must exist; the block is taken from the pool (the cache) at once, which
        // work enqueued later on the stream may use.
        self.stream(d, stream)?;
        self.alloc(device, bytes)
    }

    unsafe fn free_async(&self, device: usize, ptr: DevicePtr, stream: StreamHandle) -> Result<()> {
        let d = self.device(device)?;
        d.memory.allocation(ptr)?;
        let memory = Arc::clone(&d.memory);
        self.enqueue(
            d,
            stream,
            "stream-ordered free",
            Box::new(move || memory.free(ptr).map_err(|e| e.to_string())),
        )
    }

    fn pool_usage(&self, device: usize) -> Result<PoolUsage> {
        let d = self.device(device)?;
        let used = d.memory.used();
        Ok(PoolUsage {
            used,
            reserved: used + d.memory.cached(),
            release_threshold: d.memory.cache_limit(),
        })
    }

    fn pool_set_release_threshold(&self, device: usize, bytes: u64) -> Result<()> {
        self.device(device)?.memory.set_cache_limit(bytes);
        Ok(())
    }

    fn pool_trim(&self, device: usize, keep: u64) -> Result<()> {
        self.device(device)?.memory.trim_cache_to(keep);
        Ok(())
    }
}
