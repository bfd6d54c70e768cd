//! The device's memory pool, seen from the user: how much it holds ([`MemoryPool::usage`]), how
//! much freed memory it keeps ([`MemoryPool::set_release_threshold`]), giving it back
//! ([`MemoryPool::trim`]), and allocation and free ordered on a stream
//! ([`Stream::device_array`], [`Stream::free`]).
//!
//! Default behaviour: the CUDA backend's pool is the device's default memory pool
//! (`cuDeviceGetDefaultMemPool`), whose release threshold is 0 — freed memory goes back to the
//! driver at the next synchronization — unless raised here. The simulator's pool is its block
//! cache: freed device memory stays resident for reuse, up to the device's capacity or 1 GiB
//! (the release threshold), and device memory in use plus cached never exceeds the capacity. A
//! backend without a pool reports [`Error::NotSupportedByBackend`](crate::Error) from these
//! calls, and its stream-ordered allocations fall back to ordinary ones.
//!
//! On top of the core: it may use arrays, streams, memory, devices and the backend; nothing
//! else in the core uses it.

use crate::array::DeviceArray;
use crate::backend::{Enqueued, PoolUsage, StreamOrderedPool, require};
use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::{Layout, Order};
use crate::memory::{DeviceAlloc, Storage};
use crate::stream::Stream;
use std::marker::PhantomData;
use std::sync::Arc;

/// The memory pool of one device (CUDA's default `CUmemoryPool`, the simulator's block cache).
#[derive(Debug, Clone)]
pub struct MemoryPool {
    device: Device,
}

impl Device {
    /// This device's memory pool.
    pub fn memory_pool(&self) -> MemoryPool {
        MemoryPool {
            device: self.clone(),
        }
    }
}

impl MemoryPool {
    /// The device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Memory in use, memory held (in use plus kept for reuse) and the release threshold
    /// (`CU_MEMPOOL_ATTR_USED_MEM_CURRENT`, `..._RESERVED_MEM_CURRENT`,
    /// `..._RELEASE_THRESHOLD`).
    pub fn usage(&self) -> Result<PoolUsage> {
        self.pool("memory pools")?.pool_usage(self.device.ordinal())
    }

    /// Keeps up to `bytes` of freed memory for reuse instead of releasing it
    /// (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`; `u64::MAX` keeps everything). On the simulator the
    /// pool never holds more than the device's capacity, whatever the threshold.
    pub fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        self.pool("memory pools")?
            .pool_set_release_threshold(self.device.ordinal(), bytes)
    }

    /// Releases freed memory the pool keeps until at most `keep` bytes of it remain
    /// (`cuMemPoolTrimTo`). Memory in use is never released.
    pub fn trim(&self, keep: u64) -> Result<()> {
        self.pool("memory pools")?
            .pool_trim(self.device.ordinal(), keep)
    }

    /// The backend's pool, or the error naming `feature` where it has none.
    fn pool(&self, feature: &'static str) -> Result<&dyn StreamOrderedPool> {
        let backend = self.device.backend();
        require(backend.as_ref(), backend.pool(), feature)
    }
}

impl Stream {
    /// Allocates an uninitialised (zeroed on the simulator) device array from the device's pool,
    /// ordered on this stream (`cuMemAllocAsync`): work enqueued on this stream after the call
    /// may use it; work on other streams must first wait for this stream (an event). On a
    /// backend without stream-ordered allocation it is an ordinary allocation.
    #[track_caller]
    pub fn device_array<T: Element>(
        &self,
        shape: &[usize],
        order: Order,
    ) -> Result<DeviceArray<T>> {
        let layout = Layout::contiguous(shape, order)?;
        crate::array::device_array::check_element::<T>(
            crate::array::device_array::DEVICE_ALIGN,
            "device allocations",
        )?;
        let bytes = crate::array::span_bytes_of::<T>(&layout)?;
        let device = self.device();
        if bytes == 0 {
            return DeviceArray::allocate(device, layout);
        }
        // A stream-ordered allocation is work on the stream. When the device is full, the work
        // keeping dropped memory alive is waited for first (outside `put_on_stream`).
        let ptr = crate::memory::allocate_or_release(device, || {
            self.put_on_stream(|stream| {
                let backend = device.backend();
                let pool = require(
                    backend.as_ref(),
                    backend.pool(),
                    "stream-ordered allocation",
                )?;
                // SAFETY: the stream's handle is live while `self` is.
                unsafe { pool.alloc_async(device.ordinal(), bytes, stream) }
            })
        });
        let alloc = match ptr {
            Ok(ptr) => DeviceAlloc::adopt(device, ptr, bytes, self.handle().0),
            Err(Error::NotSupportedByBackend { .. }) => {
                return DeviceArray::allocate(device, layout);
            }
            Err(error) => return Err(error),
        };
        Ok(DeviceArray {
            storage: Storage::Device(Arc::new(alloc)),
            offset: 0,
            layout,
            _element: PhantomData,
        })
    }

    /// Frees `array`'s memory ordered on this stream (`cuMemFreeAsync`): after the work enqueued
    /// on this stream so far, without waiting for it. Returns `true` when it did so; `false` when
    /// the memory is still used elsewhere (another view, work on another stream not yet known to
    /// be complete) or the backend has no stream-ordered free, in which case it is freed as
    /// usual, when its last user is gone.
    pub fn free<T: Element>(&self, array: DeviceArray<T>) -> Result<bool> {
        let Storage::Device(alloc) = array.storage else {
            return Ok(false);
        };
        self.device().check_same(alloc.device(), "array")?;
        let ptr = alloc.ptr();
        if ptr.is_null() {
            return Ok(false);
        }
        // Every other reference must be this stream's own in-flight work, which the free is
        // ordered after. No new reference can appear (this was the last array over the memory)
        // and references only go away, so a count that matches now stays safe. (Both sides are
        // read under the stream's keep-alive lock: see `only_this_stream_holds`.)
        if !self.inner().only_this_stream_holds(&alloc) {
            return Ok(false);
        }
        let device = self.device().clone();
        let freed = self.submit(Vec::new, &[], |stream| {
            let backend = device.backend();
            let pool = require(
                backend.as_ref(),
                backend.pool(),
                "stream-ordered allocation",
            )?;
            // SAFETY: `ptr` came from `alloc`/`alloc_async` on this device and is freed once: on
            // success `disarm` below stops the allocation's drop from freeing it again; only work
            // on this stream (ordered before this free) still uses it; the handle is live.
            unsafe { pool.free_async(device.ordinal(), ptr, stream) }.map(|()| Enqueued::Queued)
        });
        match freed {
            Ok(_) => {
                alloc.disarm();
                Ok(true)
            }
            Err(Error::NotSupportedByBackend { .. }) => Ok(false),
            Err(error) => Err(error),
        }
    }
}
