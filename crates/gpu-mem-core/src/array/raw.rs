//! Raw pointers in and out: [`DeviceArray::from_raw_parts`] and
//! [`DeviceArray::from_raw_parts_with_deleter`] wrap device memory another library allocated;
//! [`DeviceArray::raw_parts`] and [`Stream::enqueue_external`] hand gpu-mem's memory and streams
//! to another engine (NCCL, RCCL, a CUDA-aware MPI, cuBLAS).
//!
//! # The contract of a foreign pointer
//!
//! gpu-mem cannot check memory it did not allocate, so the constructors are `unsafe`. The caller
//! promises, for the whole life of the returned array and of every view and in-flight operation
//! made from it (gpu-mem keeps the owner alive, or delays the deleter, until the last of them is
//! gone):
//!
//! 1. `ptr` is the device address, *in the backend's own address space for `device`* (a
//!    `CUdeviceptr` of the device's primary context, an HSA agent pointer, a simulator address),
//!    of the array's first logical element, aligned for `T`;
//! 2. every element the shape and strides reach (`ptr + offset * size_of::<T>()` for every index)
//!    lies in one allocation that stays allocated — the owner keeps it, or the deleter has not
//!    run — and holds valid `T`s (any bit pattern is one: `T` is `Pod`);
//! 3. nothing frees or reuses the memory except the owner's drop or the deleter, which gpu-mem
//!    calls once, after the last array and operation using the memory are gone;
//! 4. other users of the memory order their work with gpu-mem's (through events or stream
//!    synchronization): gpu-mem orders only the work it enqueues itself.

use crate::accounting::MemoryKind;
use crate::array::DeviceArray;
use crate::backend::{DevicePtr, Enqueued};
use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::memory::{Access, ForeignMemory, KeepAlive, PendingUses, Release, Storage};
use crate::stream::Stream;
use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

/// Everything another library needs to address an array: the device address of its first
/// element, its shape and strides, and the element size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawParts {
    /// Device address of the first logical element (null for an empty array).
    pub ptr: DevicePtr,
    /// Lowest device address the array reaches (differs from `ptr` with negative strides).
    pub span_start: DevicePtr,
    /// Bytes from `span_start` to the end of the last element reached.
    pub span_bytes: usize,
    /// Shape in elements.
    pub shape: Vec<usize>,
    /// Strides in elements.
    pub strides: Vec<isize>,
    /// Size of one element in bytes.
    pub itemsize: usize,
    /// Device ordinal within its backend.
    pub device: usize,
}

impl<T: Element> DeviceArray<T> {
    /// A device array over memory another library allocated, kept alive by `owner`: dropping
    /// `owner` must be what releases it (or it is released elsewhere after `owner` is dropped).
    /// `strides` are in elements, as in ndarray, and may be negative.
    ///
    /// # Safety
    /// `ptr` is `device`'s address of the first element,
    /// aligned for `T`; every element reached lies in memory that stays allocated at least until
    /// `owner` is dropped, which gpu-mem does once, after the last array and enqueued operation
    /// using the memory are gone; other users order their work with gpu-mem's.
    #[track_caller]
    pub unsafe fn from_raw_parts<O: Any + Send + Sync>(
        device: &Device,
        ptr: DevicePtr,
        shape: &[usize],
        strides: &[isize],
        owner: O,
    ) -> Result<DeviceArray<T>> {
        // SAFETY: the caller's contract is this function's.
        unsafe {
            Self::foreign(
                device,
                ptr,
                shape,
                strides,
                Release::Owner(Box::new(owner)),
                Some(MemoryKind::Foreign),
            )
        }
    }

    /// A device array over memory another library allocated, released by `deleter`, which
    /// gpu-mem calls once with the lowest address the array reaches (`ptr` itself for an empty
    /// array, which reaches none), after the last array and enqueued operation using the memory
    /// are gone (a DLPack-style deleter).
    ///
    /// # Safety
    /// As [`DeviceArray::from_raw_parts`], with "until `deleter` runs" for "until `owner` is
    /// dropped".
    #[track_caller]
    pub unsafe fn from_raw_parts_with_deleter<F>(
        device: &Device,
        ptr: DevicePtr,
        shape: &[usize],
        strides: &[isize],
        deleter: F,
    ) -> Result<DeviceArray<T>>
    where
        F: FnOnce(DevicePtr) + Send + Sync + 'static,
    {
        // SAFETY: the caller's contract is this function's.
        unsafe {
            Self::foreign(
                device,
                ptr,
                shape,
                strides,
                Release::Deleter(Box::new(deleter)),
                Some(MemoryKind::Foreign),
            )
        }
    }

    /// An array over memory gpu-mem did not allocate, counted in the statistics as `kind`
    /// (`None`: not counted, as a module's own variables).
    ///
    /// # Safety
    /// As [`DeviceArray::from_raw_parts`].
    #[track_caller]
    pub(crate) unsafe fn foreign(
        device: &Device,
        ptr: DevicePtr,
        shape: &[usize],
        strides: &[isize],
        release: Release,
        kind: Option<MemoryKind>,
    ) -> Result<DeviceArray<T>> {
        crate::array::device_array::check_element::<T>(
            crate::array::device_array::DEVICE_ALIGN,
            "device allocations",
        )?;
        let layout = Layout::with_strides(shape, strides)?;
        let empty = layout.size() == 0;
        if !empty && ptr.is_null() {
            return Err(Error::InvalidArgument {
                name: "ptr",
                reason: "a null device pointer for a non-empty array".into(),
            });
        }
        if !empty && !(ptr.0 as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(Error::InvalidArgument {
                name: "ptr",
                reason: format!(
                    "{:#x} is not aligned for {} ({} bytes)",
                    ptr.0,
                    T::dtype(),
                    std::mem::align_of::<T>()
                ),
            });
        }
        let bytes = crate::array::span_bytes_of::<T>(&layout)?;
        let offset = crate::array::device_array::first_element_offset::<T>(&layout);
        let base = if empty {
            DevicePtr::NULL
        } else {
            DevicePtr(
                ptr.0
                    .checked_sub(offset as u64)
                    .ok_or_else(|| Error::Overflow {
                        what: format!("the lowest address of an array at {:#x}", ptr.0),
                    })?,
            )
        };
        let release = match release {
            // An empty array keeps no address, but what was handed over is `ptr`'s to free.
            Release::Deleter(deleter) if empty => Release::Deleter(Box::new(move |_| deleter(ptr))),
            other => other,
        };
        let memory = ForeignMemory::new(device, base, bytes, release, kind);
        Ok(DeviceArray {
            storage: Storage::Foreign(Arc::new(memory)),
            offset: if empty { 0 } else { offset },
            layout,
            _element: PhantomData,
        })
    }

    /// The array's address, shape and strides, for another library. The memory stays gpu-mem's:
    /// it is valid while `self` (or a view of it) lives, and work another library enqueues on it
    /// must be ordered with gpu-mem's — use [`Stream::enqueue_external`], which also keeps the
    /// memory alive until that work completes.
    pub fn raw_parts(&self) -> RawParts {
        let (span_start, span_bytes) = self.span();
        RawParts {
            ptr: self.device_ptr(),
            span_start,
            span_bytes,
            shape: self.shape().to_vec(),
            strides: self.strides().to_vec(),
            itemsize: T::itemsize(),
            device: self.device().ordinal(),
        }
    }

    /// `true` when the memory was allocated by another library (raw pointer, DLPack or IPC).
    pub fn is_foreign(&self) -> bool {
        matches!(self.storage, Storage::Foreign(_))
    }
}

/// One array that work of another library reads or writes, for [`Stream::enqueue_external`].
#[derive(Debug)]
pub struct ExternalUse {
    storage: Storage,
    access: Access,
}

impl ExternalUse {
    /// The external work only reads `array`.
    pub fn reads<T: Element>(array: &DeviceArray<T>) -> ExternalUse {
        ExternalUse {
            storage: array.storage.clone(),
            access: Access::Read,
        }
    }

    /// The external work writes (and perhaps reads) `array`.
    pub fn writes<T: Element>(array: &mut DeviceArray<T>) -> ExternalUse {
        ExternalUse {
            storage: array.storage.clone(),
            access: Access::Write,
        }
    }
}

impl Stream {
    /// Enqueues work of another library — an NCCL/RCCL collective, a CUDA-aware MPI call on a
    /// stream, a cuBLAS call — on this stream: `enqueue` receives the native stream handle (a
    /// `CUstream`, the ROC backend's stream, a simulator stream) and enqueues its work there.
    /// The arrays in `uses` stay alive until that work has completed, and host access to mapped
    /// ones waits for it, exactly as for gpu-mem's own operations.
    ///
    /// # Safety
    /// `enqueue` enqueues on the handle only work that touches device memory of `uses` (reading
    /// what is marked [`ExternalUse::reads`]) or memory it owns itself, does not destroy or
    /// synchronize-and-reuse the handle, and does not keep it past the stream's life. A library
    /// that runs work on its own streams (MPI without stream support) must finish it before
    /// `enqueue` returns. `enqueue` runs while this stream's submissions are held, so it must
    /// not call gpu-mem on this stream or on buffers its work uses (a `synchronize`, a host
    /// view of such a buffer): that would wait for itself. Device-wide calls (an allocation,
    /// `Device::synchronize`) are fine.
    pub unsafe fn enqueue_external<F>(&self, uses: Vec<ExternalUse>, enqueue: F) -> Result<()>
    where
        F: FnOnce(crate::backend::StreamHandle) -> Result<()>,
    {
        for u in &uses {
            self.device()
                .check_same(u.storage.device(), "array used by external work")?;
            if let Some(buffer) = u.storage.host_buffer() {
                buffer.pending().wait_for_stream(u.access, self.inner())?;
            }
        }
        let records: Vec<Option<(&PendingUses, Access)>> = uses
            .iter()
            .map(|u| u.storage.host_buffer().map(|b| (b.pending(), u.access)))
            .collect();
        let keep: Vec<KeepAlive> = uses.iter().map(|u| u.storage.keep_alive()).collect();
        // The library sees the handle: from now on synchronizations ask the backend.
        let handle = self.handle();
        self.submit(
            || keep,
            &records,
            |_| enqueue(handle).map(|()| Enqueued::Queued),
        )?;
        Ok(())
    }
}
