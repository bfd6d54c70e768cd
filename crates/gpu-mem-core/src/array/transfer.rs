//! Synchronous transfers of device arrays (Numba's `copy_to_host`, `copy_to_device`, getitem and
//! setitem of single elements, memset), with Numba's checks in Numba's order.

use crate::array::DeviceArray;
use crate::array::host_layout::{
    array_from_span, contiguous_c, contiguous_f, core_view, layout_of,
};
use crate::backend::{DevicePtr, require};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::{Layout, check_compatible};
use ndarray::{ArrayBase, ArrayD, Data, DataMut, Dimension};

pub(crate) fn non_contiguous(layout: &Layout) -> Error {
    Error::NonContiguous {
        shape: layout.shape().to_vec(),
        strides: layout.strides().to_vec(),
    }
}

impl<T: Element> DeviceArray<T> {
    /// Copies the array to a new host array (Numba's `copy_to_host()`).
    ///
    /// The result has the device array's shape and strides, like Numba's: a strided view comes
    /// back strided (the gap elements are carried in its buffer). Unlike Numba, negative strides
    /// are supported (Numba raises `NotImplementedError`), and a broadcast array comes back
    /// materialised, since an owned ndarray cannot alias elements.
    pub fn copy_to_host(&self) -> Result<ArrayD<T>> {
        let span = self.read_span()?;
        array_from_span(span, &self.layout)
    }

    /// Copies the array into an existing host array (Numba's `copy_to_host(ary)`).
    ///
    /// Numba's compatibility check applies: after dropping size-1 axes from both, the shapes must
    /// be equal ([`Error::IncompatibleShape`]) and, for non-empty arrays, the strides too
    /// ([`Error::IncompatibleStrides`]). The element type is checked by the compiler. Only the
    /// target's elements are written: where Numba copies the raw byte span and so also
    /// overwrites the gaps of a strided target, gpu-mem leaves them untouched.
    pub fn copy_to_host_into<S, D>(&self, target: &mut ArrayBase<S, D>) -> Result<()>
    where
        S: DataMut<Elem = T>,
        D: Dimension,
    {
        let target_layout = layout_of(target)?;
        check_compatible(&self.layout, &target_layout, T::itemsize())?;
        if self.layout.size() == 0 {
            return Ok(());
        }
        if self.layout.is_dense()
            && let Some(slice) = target.as_slice_memory_order_mut()
        {
            // Same dense layout on both sides: one direct copy.
            return self.read_span_into(slice);
        }
        let span = self.read_span()?;
        let base = self.layout.min_offset();
        for (slot, offset) in target.iter_mut().zip(self.layout.logical_offsets()) {
            *slot = span[(offset - base) as usize];
        }
        Ok(())
    }

    /// Copies a host array into this one (Numba's `copy_to_device(ary)` with a host array).
    ///
    /// An empty source is a no-op before any check, as in Numba. The destination must be
    /// contiguous (broadcast axes aside). The source may have any layout: it is made contiguous
    /// in the destination's order on the host first, when needed.
    pub fn copy_from_host<S, D>(&mut self, source: &ArrayBase<S, D>) -> Result<()>
    where
        S: Data<Elem = T>,
        D: Dimension,
    {
        if source.is_empty() {
            return Ok(());
        }
        let self_core = self.layout.core();
        if !self_core.is_contiguous() {
            return Err(non_contiguous(&self.layout));
        }
        let core = core_view(source);
        let (data, layout) = if self_core.is_c_contiguous() {
            let layout = Layout::contiguous(core.shape(), crate::layout::Order::C)?;
            (contiguous_c(core)?, layout)
        } else {
            let layout = Layout::contiguous(core.shape(), crate::layout::Order::F)?;
            (contiguous_f(core)?, layout)
        };
        check_compatible(&self_core, &layout, T::itemsize())?;
        let (dst, bytes) = self.span();
        let src: &[u8] = bytemuck::cast_slice(&data);
        if src.len() < bytes {
            return Err(Error::IncompatibleShape {
                expected: self.shape().to_vec(),
                found: source.shape().to_vec(),
            });
        }
        let device = self.device();
        // SAFETY: `src` is a live host slice of at least `bytes` bytes; `dst..dst+bytes` is this
        // array's span, inside its live storage.
        unsafe {
            device
                .backend()
                .copy_htod(device.ordinal(), dst, src.as_ptr(), bytes)
        }
    }

    /// Copies another device array into this one (Numba's `copy_to_device(ary)` with a device
    /// array). Both must be contiguous and have the same layout (C into F is rejected with
    /// [`Error::IncompatibleStrides`], as in Numba).
    ///
    /// The source may live on another device: devices of one backend copy directly (a peer copy,
    /// `cuMemcpyPeer`, ordered after the work of both devices), and where the backend has no peer
    /// copy, or the devices belong to different backends, the bytes go through host memory.
    pub fn copy_from_device(&mut self, source: &DeviceArray<T>) -> Result<()> {
        if source.is_empty() {
            return Ok(());
        }
        let self_core = self.layout.core();
        if !self_core.is_contiguous() {
            return Err(non_contiguous(&self.layout));
        }
        let source_core = source.layout.core();
        if !source_core.is_contiguous() {
            return Err(non_contiguous(&source.layout));
        }
        check_compatible(&self_core, &source_core, T::itemsize())?;
        let (dst, bytes) = self.span();
        let (src, src_bytes) = source.span();
        let bytes = bytes.min(src_bytes);
        let device = self.device();
        let from = source.device();
        if device.same_as(from) && spans_overlap(dst, src, bytes) {
            // Two views of one allocation whose spans overlap (`d[1:]` from `d[:-1]`): a device
            // copy has `memcpy`'s semantics, not `memmove`'s, so the source is copied first.
            if dst == src {
                return Ok(());
            }
            let copy = source.duplicate()?;
            return self.copy_from_device(&copy);
        }
        if device.same_as(from) {
            // SAFETY: both spans lie inside live storage of this device.
            return unsafe {
                device
                    .backend()
                    .copy_dtod(device.ordinal(), dst, src, bytes)
            };
        }
        if device.same_backend(from) {
            let backend = device.backend();
            let peer = require(backend.as_ref(), backend.peer(), "peer copies").and_then(|peer| {
                // SAFETY: each span lies inside live storage of its device.
                unsafe { peer.copy_peer(device.ordinal(), dst, from.ordinal(), src, bytes) }
            });
            match peer {
                Err(Error::NotSupportedByBackend { .. }) => {}
                other => return other,
            }
        }
        // Through the host: the source's span, then into this array's span.
        let mut staging: Vec<u8> =
            crate::memory::zeroed_vec(bytes, "a peer copy staged on the host")?;
        // SAFETY: `staging` is a live, exclusively borrowed buffer of `bytes` bytes; the source
        // span lies inside live storage of its device.
        unsafe {
            from.backend()
                .copy_dtoh(from.ordinal(), staging.as_mut_ptr(), src, bytes)?;
        }
        // SAFETY: `staging` holds `bytes` bytes; the destination span lies inside live storage
        // of this device.
        unsafe {
            device
                .backend()
                .copy_htod(device.ordinal(), dst, staging.as_ptr(), bytes)
        }
    }

    /// Sets every byte of the array to `value` (Numba's `driver.device_memset`). The array must
    /// be dense (its span holds only its elements).
    pub fn memset(&mut self, value: u8) -> Result<()> {
        if !self.layout.is_dense() {
            return Err(non_contiguous(&self.layout));
        }
        let (dst, bytes) = self.span();
        if bytes == 0 {
            return Ok(());
        }
        let device = self.device();
        // SAFETY: the span lies inside live storage of this device.
        unsafe {
            device
                .backend()
                .memset_d8(device.ordinal(), dst, value, bytes)
        }
    }

    /// Reads one element (Numba's `d[i, j]` with integers only). Negative indices count from the
    /// end.
    pub fn get(&self, index: &[isize]) -> Result<T> {
        let ptr = self.element_ptr(index)?;
        let mut value = T::zeroed();
        let device = self.device();
        // SAFETY: `value` is a live, exclusively borrowed `T`; `ptr` addresses an element inside
        // live storage.
        unsafe {
            device.backend().copy_dtoh(
                device.ordinal(),
                (&mut value as *mut T).cast::<u8>(),
                ptr,
                T::itemsize(),
            )?;
        }
        Ok(value)
    }

    /// Writes one element (Numba's `d[i, j] = v`).
    pub fn set(&mut self, index: &[isize], value: T) -> Result<()> {
        let ptr = self.element_ptr(index)?;
        let device = self.device();
        // SAFETY: `value` is a live `T`; `ptr` addresses an element inside live storage.
        unsafe {
            device.backend().copy_htod(
                device.ordinal(),
                ptr,
                (&value as *const T).cast::<u8>(),
                T::itemsize(),
            )
        }
    }

    fn element_ptr(&self, index: &[isize]) -> Result<crate::backend::DevicePtr> {
        let offset = self.layout.offset_of(index)?;
        let byte = self.offset as i64 + offset as i64 * T::itemsize() as i64;
        Ok(crate::backend::DevicePtr(
            self.storage.base().0.wrapping_add(byte as u64),
        ))
    }

    /// The elements of the array's span, lowest address first.
    pub(crate) fn read_span(&self) -> Result<Vec<T>> {
        let mut span: Vec<T> = crate::memory::zeroed_vec(
            self.layout.span_len(),
            "a copy of a device array on the host",
        )?;
        self.read_span_into(&mut span)?;
        Ok(span)
    }

    /// Copies the array's span into `out`, which must be exactly as long as the span.
    pub(crate) fn read_span_into(&self, out: &mut [T]) -> Result<()> {
        let (src, bytes) = self.span();
        let dst: &mut [u8] = bytemuck::cast_slice_mut(out);
        if dst.len() != bytes {
            return Err(Error::IncompatibleShape {
                expected: vec![self.layout.span_len()],
                found: vec![out_len::<T>(dst.len())],
            });
        }
        if bytes == 0 {
            return Ok(());
        }
        let device = self.device();
        // SAFETY: `dst` is a live, exclusively borrowed buffer of exactly `bytes` bytes; the
        // source span lies inside live storage of this device.
        unsafe {
            device
                .backend()
                .copy_dtoh(device.ordinal(), dst.as_mut_ptr(), src, bytes)
        }
    }
}

fn out_len<T: Element>(bytes: usize) -> usize {
    bytes / T::itemsize().max(1)
}

/// Whether two device ranges of `bytes` bytes each, on one device, share a byte.
pub(crate) fn spans_overlap(a: DevicePtr, b: DevicePtr, bytes: usize) -> bool {
    let bytes = bytes as u64;
    bytes > 0 && a.0 < b.0.saturating_add(bytes) && b.0 < a.0.saturating_add(bytes)
}
