//! Asynchronous transfers enqueued on a [`Stream`]: Numba's `to_device(ary, stream)`,
//! `copy_to_host(ary, stream)`, `copy_to_device(ary, stream)` and memset on a stream.
//!
//! Each operation hands the stream everything it touches to keep alive, and records itself on
//! the host buffers it reads or writes, so host code touching those buffers waits for it.
//!
//! Methods of [`Stream`] written with the arrays they move, which sit above streams: the stream
//! gives the submission ([`Stream::submit`]) and the host memory it accepts ([`HostSource`],
//! [`HostDestination`]), and knows nothing of device arrays.

use crate::array::DeviceArray;
use crate::array::host_layout::{contiguous_c, contiguous_f, core_view};
use crate::array::transfer::non_contiguous;
use crate::backend::{DevicePtr, Enqueued, require};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::{Layout, Order, check_compatible};
use crate::memory::{Access, HostBuffer, KeepAlive, PendingUses, Storage};
use crate::stream::{HostDestination, HostMemory, HostMemoryMut, HostSource, LockedMemory, Stream};
use std::sync::Arc;

impl LockedMemory<'_> {
    /// Host address of the lowest byte of the array's span.
    fn span_start<T: Element>(&self) -> *mut u8 {
        let low = self.first as isize + self.layout.min_offset() * T::itemsize() as isize;
        self.buffer.base().as_ptr().wrapping_offset(low)
    }
}

impl Stream {
    fn check_array<T: Element>(&self, array: &DeviceArray<T>) -> Result<()> {
        self.device().check_same(array.device(), "array")
    }

    fn check_buffer(&self, buffer: &HostBuffer) -> Result<()> {
        self.device().check_same(buffer.device(), "host buffer")
    }

    /// Waits for other streams' conflicting in-flight uses of mapped memory an operation is about
    /// to use: mapped memory is host memory, which host code must never reach while a stream
    /// writes it. Device memory proper is not tracked: ordering two streams' work on the same
    /// device array is the program's job (an event), as in CUDA and Numba; a race there is a
    /// device-side race, never host memory reached under a transfer.
    fn wait_storage(&self, storage: &Storage, access: Access) -> Result<()> {
        match storage.host_buffer() {
            Some(buffer) => buffer.pending().wait_for_stream(access, self.inner()),
            None => Ok(()),
        }
    }

    /// The use of mapped memory an operation makes through `storage`, to record at submission
    /// (device memory proper needs no record: the host never touches it directly).
    fn storage_use(storage: &Storage, access: Access) -> Option<(&PendingUses, Access)> {
        storage
            .host_buffer()
            .map(|buffer| (buffer.pending(), access))
    }

    /// Copies `host` to a new device array on this stream (Numba's `to_device(ary, stream)`).
    /// The device array has the host array's shape and strides; the host array must be
    /// contiguous once broadcast axes are removed.
    #[track_caller]
    pub fn to_device<T: Element, H: HostSource<T> + ?Sized>(
        &self,
        host: &H,
    ) -> Result<DeviceArray<T>> {
        match host.host_memory()? {
            HostMemory::Locked(locked) => {
                self.check_buffer(locked.buffer)?;
                if !locked.layout.core().is_contiguous() {
                    return Err(non_contiguous(locked.layout));
                }
                let mut array = DeviceArray::<T>::allocate(self.device(), locked.layout.clone())?;
                let start = locked.span_start::<T>();
                self.enqueue_htod(&mut array, locked.buffer, start.cast_const())?;
                Ok(array)
            }
            HostMemory::Pageable(view) => {
                let layout = Layout::with_strides(view.shape(), view.strides())?;
                let core = core_view(&view);
                // C or F order (apart from broadcast axes), as `Device::to_device` and Numba
                // require: `as_slice_memory_order` alone also takes reversed and permuted axes.
                if !layout.core().is_contiguous() {
                    return Err(non_contiguous(&layout));
                }
                let core_slice = core
                    .as_slice_memory_order()
                    .ok_or_else(|| non_contiguous(&layout))?;
                let mut array = DeviceArray::<T>::allocate(self.device(), layout)?;
                let staging = self.stage(bytemuck::cast_slice(core_slice))?;
                let start = staging.base().as_ptr().cast_const();
                self.enqueue_htod(&mut array, &staging, start)?;
                Ok(array)
            }
        }
    }

    /// Copies `host` into `dst` on this stream (Numba's `copy_to_device(ary, stream)`). A
    /// page-locked source must already have `dst`'s layout; a pageable one is first made
    /// contiguous in `dst`'s order.
    pub fn copy_from_host<T: Element, H: HostSource<T> + ?Sized>(
        &self,
        dst: &mut DeviceArray<T>,
        host: &H,
    ) -> Result<()> {
        self.check_array(dst)?;
        match host.host_memory()? {
            HostMemory::Locked(locked) => {
                if locked.layout.size() == 0 {
                    return Ok(());
                }
                self.check_buffer(locked.buffer)?;
                // The usual case, the same C-contiguous layout on both sides, needs no squeezing
                // or comparing of broadcast axes.
                if !(locked.layout == &dst.layout && dst.layout.is_c_contiguous()) {
                    let dst_core = dst.layout.core();
                    if !dst_core.is_contiguous() {
                        return Err(non_contiguous(&dst.layout));
                    }
                    let src_core = locked.layout.core();
                    if !src_core.is_contiguous() {
                        return Err(non_contiguous(locked.layout));
                    }
                    check_compatible(&dst_core, &src_core, T::itemsize())?;
                }
                let start = locked.span_start::<T>();
                self.enqueue_htod(dst, locked.buffer, start.cast_const())
            }
            HostMemory::Pageable(view) => {
                if view.is_empty() {
                    return Ok(());
                }
                let dst_core = dst.layout.core();
                if !dst_core.is_contiguous() {
                    return Err(non_contiguous(&dst.layout));
                }
                let core = core_view(&view);
                let (data, layout) = if dst_core.is_c_contiguous() {
                    let layout = Layout::contiguous(core.shape(), Order::C)?;
                    (contiguous_c(core)?, layout)
                } else {
                    let layout = Layout::contiguous(core.shape(), Order::F)?;
                    (contiguous_f(core)?, layout)
                };
                check_compatible(&dst_core, &layout, T::itemsize())?;
                let staging = self.stage(bytemuck::cast_slice(&data))?;
                let start = staging.base().as_ptr().cast_const();
                self.enqueue_htod(dst, &staging, start)
            }
        }
    }

    /// Copies `src` into host memory on this stream (Numba's `copy_to_host(ary, stream)`), with
    /// Numba's compatibility check. Page-locked destinations are written asynchronously (reading
    /// them waits for the stream); a pageable destination makes the call wait for the stream.
    #[track_caller]
    pub fn copy_to_host<T: Element, H: HostDestination<T> + ?Sized>(
        &self,
        src: &DeviceArray<T>,
        host: &mut H,
    ) -> Result<()> {
        self.check_array(src)?;
        let bytes = src.alloc_size();
        match host.host_memory_mut()? {
            HostMemoryMut::Locked(locked) => {
                self.check_buffer(locked.buffer)?;
                check_compatible(&src.layout, locked.layout, T::itemsize())?;
                if bytes == 0 || src.layout.size() == 0 {
                    return Ok(());
                }
                let start = locked.span_start::<T>();
                self.enqueue_dtoh(src, locked.buffer, start)
            }
            HostMemoryMut::Pageable(mut view) => {
                let layout = Layout::with_strides(view.shape(), view.strides())?;
                check_compatible(&src.layout, &layout, T::itemsize())?;
                if bytes == 0 || src.layout.size() == 0 {
                    return Ok(());
                }
                let staging = self.inner().staging_buffer(bytes)?;
                self.enqueue_dtoh(src, &staging, staging.base().as_ptr())?;
                self.synchronize()?;
                // SAFETY: the copy into the staging buffer has completed; it holds `bytes`
                // initialised bytes, aligned for `T` (page aligned; no device array's element
                // needs more than 256 bytes, and none is zero-sized: `check_element`).
                let span: &[T] = unsafe {
                    std::slice::from_raw_parts(
                        staging.base().as_ptr().cast::<T>(),
                        bytes / T::itemsize(),
                    )
                };
                let base = src.layout.min_offset();
                for (slot, offset) in view.iter_mut().zip(src.layout.logical_offsets()) {
                    *slot = span[(offset - base) as usize];
                }
                Ok(())
            }
        }
    }

    /// Copies one device array into another on this stream (Numba's `copy_to_device(d, stream)`).
    ///
    /// `dst` must be on this stream's device; `src` may be on another device of the same backend
    /// (a peer copy, `cuMemcpyPeerAsync`): it is ordered after earlier work on this stream only,
    /// so work on `src`'s device that writes it must be waited for first (an event recorded
    /// there and [`Stream::wait_event`] here, or a synchronize). A backend without asynchronous
    /// peer copies makes this call synchronize the stream and copy synchronously.
    #[track_caller]
    pub fn copy_from_device<T: Element>(
        &self,
        dst: &mut DeviceArray<T>,
        src: &DeviceArray<T>,
    ) -> Result<()> {
        self.check_array(dst)?;
        let peer = !self.device().same_as(src.device());
        if peer && !self.device().same_backend(src.device()) {
            self.check_array(src)?;
        }
        if src.is_empty() {
            return Ok(());
        }
        let dst_core = dst.layout.core();
        let src_core = src.layout.core();
        if !dst_core.is_contiguous() {
            return Err(non_contiguous(&dst.layout));
        }
        if !src_core.is_contiguous() {
            return Err(non_contiguous(&src.layout));
        }
        check_compatible(&dst_core, &src_core, T::itemsize())?;
        let (dst_ptr, dst_bytes) = dst.span();
        let (src_ptr, src_bytes) = src.span();
        let bytes = dst_bytes.min(src_bytes);
        if !peer && crate::array::transfer::spans_overlap(dst_ptr, src_ptr, bytes) {
            // Overlapping views of one allocation: a device copy has `memcpy`'s semantics, so
            // the source goes through a copy of its own first (kept by the stream until the
            // second copy has run, as every array a stream copy uses).
            if dst_ptr == src_ptr {
                return Ok(());
            }
            let mut staged = DeviceArray::<T>::allocate(self.device(), src.layout.clone())?;
            self.copy_from_device(&mut staged, src)?;
            return self.copy_from_device(dst, &staged);
        }
        self.wait_storage(&dst.storage, Access::Write)?;
        self.wait_storage(&src.storage, Access::Read)?;
        let keep = || [dst.storage.keep_alive(), src.storage.keep_alive()];
        let device = self.device();
        let uses = [
            Self::storage_use(&dst.storage, Access::Write),
            Self::storage_use(&src.storage, Access::Read),
        ];
        let src_device = src.device().ordinal();
        let submitted = self.submit(keep, &uses, |stream| {
            let backend = device.backend();
            // SAFETY: both spans lie in storage the stream keeps alive until completion; a peer
            // source lies on `src_device` of the same backend.
            unsafe {
                if peer {
                    require(backend.as_ref(), backend.peer(), "peer copies")?
                        .copy_peer_async(
                            device.ordinal(),
                            dst_ptr,
                            src_device,
                            src_ptr,
                            bytes,
                            stream,
                        )
                        .map(|()| Enqueued::Queued)
                } else {
                    backend.copy_dtod_async(device.ordinal(), dst_ptr, src_ptr, bytes, stream)
                }
            }
        });
        match submitted {
            Err(Error::NotSupportedByBackend { .. }) if peer => {
                self.synchronize()?;
                dst.copy_from_device(src)
            }
            other => other.map(drop),
        }
    }

    /// Sets every byte of a dense array to `value` on this stream.
    pub fn memset<T: Element>(&self, dst: &mut DeviceArray<T>, value: u8) -> Result<()> {
        self.check_array(dst)?;
        if !dst.layout.is_dense() {
            return Err(non_contiguous(&dst.layout));
        }
        let (ptr, bytes) = dst.span();
        if bytes == 0 {
            return Ok(());
        }
        self.wait_storage(&dst.storage, Access::Write)?;
        let device = self.device();
        let uses = [Self::storage_use(&dst.storage, Access::Write)];
        self.submit(
            || [dst.storage.keep_alive()],
            &uses,
            |stream| {
                // SAFETY: the span lies in storage the stream keeps alive until completion.
                unsafe {
                    device
                        .backend()
                        .memset_d8_async(device.ordinal(), ptr, value, bytes, stream)
                }
            },
        )?;
        Ok(())
    }

    /// Copies `bytes` into a page-locked staging buffer of the stream's (`stream::staging`).
    #[track_caller]
    fn stage(&self, bytes: &[u8]) -> Result<Arc<HostBuffer>> {
        let staging = self.inner().staging_buffer(bytes.len())?;
        if !bytes.is_empty() {
            // SAFETY: the staging buffer holds at least `bytes.len()` bytes and no copy uses it
            // (only the stream's cache held it, and host code never reaches it); the source is a
            // live slice that does not overlap it.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), staging.base().as_ptr(), bytes.len())
            };
        }
        Ok(staging)
    }

    /// Enqueues a copy of `src`'s span into `dst`, inside the page-locked `buffer`, and records
    /// the write on the buffer.
    fn enqueue_dtoh<T: Element>(
        &self,
        src: &DeviceArray<T>,
        buffer: &Arc<HostBuffer>,
        dst: *mut u8,
    ) -> Result<()> {
        let (src_ptr, bytes) = src.span();
        // Other streams' in-flight copies from or into this buffer must finish before this one
        // writes it (host code cannot touch it meanwhile: it is borrowed mutably by the caller,
        // or is a staging buffer nobody else has).
        buffer
            .pending()
            .wait_for_stream(Access::Write, self.inner())?;
        self.wait_storage(&src.storage, Access::Read)?;
        let keep = || {
            [
                src.storage.keep_alive(),
                KeepAlive::Host(Arc::clone(buffer)),
            ]
        };
        let device = self.device();
        let uses = [
            Some((buffer.pending(), Access::Write)),
            Self::storage_use(&src.storage, Access::Read),
        ];
        self.submit(keep, &uses, |stream| {
            // SAFETY: the destination span lies in the page-locked buffer, which the stream keeps
            // alive and host code cannot access until this ticket completes; the source span lies
            // in storage kept alive by the stream.
            unsafe {
                device
                    .backend()
                    .copy_dtoh_async(device.ordinal(), dst, src_ptr, bytes, stream)
            }
        })?;
        Ok(())
    }

    fn enqueue_htod<T: Element>(
        &self,
        dst: &mut DeviceArray<T>,
        buffer: &Arc<HostBuffer>,
        src: *const u8,
    ) -> Result<()> {
        let (dst_ptr, bytes): (DevicePtr, usize) = dst.span();
        if bytes == 0 {
            return Ok(());
        }
        if buffer.bytes() < bytes {
            return Err(Error::IncompatibleShape {
                expected: dst.shape().to_vec(),
                found: vec![buffer.bytes() / T::itemsize()],
            });
        }
        // Other streams' in-flight copies into this buffer must finish before this one reads it.
        buffer
            .pending()
            .wait_for_stream(Access::Read, self.inner())?;
        self.wait_storage(&dst.storage, Access::Write)?;
        let keep = || {
            [
                dst.storage.keep_alive(),
                KeepAlive::Host(Arc::clone(buffer)),
            ]
        };
        let device = self.device();
        let uses = [
            Some((buffer.pending(), Access::Read)),
            Self::storage_use(&dst.storage, Access::Write),
        ];
        self.submit(keep, &uses, |stream| {
            // SAFETY: the source lies in a page-locked buffer the stream keeps alive and host code
            // may not write until this ticket completes; the destination span lies in storage the
            // stream keeps alive.
            unsafe {
                device
                    .backend()
                    .copy_htod_async(device.ordinal(), dst_ptr, src, bytes, stream)
            }
        })?;
        Ok(())
    }
}
