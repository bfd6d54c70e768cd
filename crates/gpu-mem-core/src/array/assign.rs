//! Assignment to any view (Numba's `d[key] = value`, `d.setitem(key, value)`): a scalar, a host
//! array or a device array, broadcast to the target's shape, into a target of any strides.
//!
//! Numba's rules, in Numba's order: a value with more axes than the target
//! is [`Error::AssignRank`] ("Can't assign 3-D array to 1-D self", even for leading size-1 axes);
//! the value's shape, padded with leading 1s, must equal the target's on every axis where it is
//! not 1, else [`Error::AssignShape`] ("Can't copy sequence with size 2 to array axis 0 with
//! dimension 5"); a host value must be contiguous once its broadcast axes are removed
//! ([`Error::NonContiguous`]), as `to_device` requires.
//!
//! How the elements move: a dense target (its span holds only its elements: C, F, reversed or
//! transposed) gets one copy or one memset from a host buffer laid out like it; anything else
//! (a column, every other element, a broadcast source) runs the built-in copy kernel
//! `kernels/assign.cu`, the portable source every backend compiles; where a backend cannot run
//! it (no kernel support, no compiler), the target is written run by run with plain copies.
//! A device value that shares memory with the target is copied first, so `d[::-1] = d` reverses.

use crate::array::DeviceArray;
use crate::backend::DevicePtr;
use crate::backend::kernel::{Kernel, LaunchArg, LaunchConfig, portable};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Layout;
use ndarray::{ArrayBase, Data, Dimension};
use std::any::TypeId;
use std::sync::OnceLock;

/// Element axes the copy kernel takes (its arrays have one more, over the element's bytes).
const KERNEL_AXES: usize = 8;

fn assign_kernel() -> &'static Kernel {
    static KERNEL: OnceLock<Kernel> = OnceLock::new();
    KERNEL.get_or_init(|| Kernel::from_source(portable::ASSIGN, "gm_assign"))
}

/// Numba's broadcast check of a value of shape `value` against a target of shape `target`.
/// Returns, for each target axis, the value axis it reads (`None` where the value is broadcast).
pub(crate) fn broadcast_axes(target: &[usize], value: &[usize]) -> Result<Vec<Option<usize>>> {
    if value.len() > target.len() {
        return Err(Error::AssignRank {
            value_ndim: value.len(),
            target_ndim: target.len(),
        });
    }
    let pad = target.len() - value.len();
    let mut axes = Vec::with_capacity(target.len());
    for (axis, &dimension) in target.iter().enumerate() {
        let Some(value_axis) = axis.checked_sub(pad) else {
            axes.push(None);
            continue;
        };
        let size = value[value_axis];
        if size != dimension && size != 1 {
            return Err(Error::AssignShape {
                size,
                axis,
                dimension,
            });
        }
        axes.push((size == dimension && dimension != 1).then_some(value_axis));
    }
    Ok(axes)
}

/// The value's element strides seen with the target's shape (0 on broadcast axes).
fn broadcast_strides(axes: &[Option<usize>], value_strides: &[isize]) -> Vec<isize> {
    axes.iter()
        .map(|axis| axis.map_or(0, |a| value_strides[a]))
        .collect()
}

impl<T: Element> DeviceArray<T> {
    /// Sets every element to `value` (Numba's `d[...] = 5`; with a view, `d[:, 1] = 5` is
    /// `d.slice(s![.., 1])?.fill(5)`, `d[::2] = 0` is `d.slice(s![..;2])?.fill(0)`). Works on
    /// any layout; synchronous, like Numba's setitem without a stream. A target whose elements
    /// overlap (strides that reach one element from several indices) gets the value of the last
    /// index reaching each element, as a sequence of assignments would leave it; one whose
    /// indices outnumber its elements over 64 times and exceed 2^32 is
    /// [`Error::Unsupported`] (broadcast axes, stride 0, count once).
    #[track_caller]
    pub fn fill(&mut self, value: T) -> Result<()> {
        if self.is_empty() {
            return Ok(());
        }
        if self.is_dense() {
            let bytes = bytemuck::bytes_of(&value);
            if let Some(&first) = bytes.first()
                && bytes.iter().all(|&b| b == first)
            {
                return self.memset(first);
            }
            let span = crate::memory::try_collect(
                std::iter::repeat_n(value, self.layout.span_len()),
                "the value to assign",
            )?;
            return self.write_span(&span);
        }
        let source = self.device().to_device(&ndarray::arr0(value))?;
        self.assign_strided(&source, &vec![0; self.ndim()])
    }

    /// Assigns a host array, broadcast to this array's shape (Numba's `d[key] = ary`):
    /// `d.slice(s![..;-1])?.assign(&arange)` reverses, and a `(3, 1)` value fills the rows of a
    /// `(3, 4)` target. The value may have fewer axes (leading axes are broadcast) and size-1
    /// axes (broadcast too); more axes, or a length that is neither 1 nor the target's, are
    /// Numba's errors ([`Error::AssignRank`], [`Error::AssignShape`]). The value must be
    /// contiguous apart from broadcast axes ([`Error::NonContiguous`], as in Numba). A target
    /// whose elements overlap is written as [`DeviceArray::fill`] says.
    #[track_caller]
    pub fn assign<S, D>(&mut self, value: &ArrayBase<S, D>) -> Result<()>
    where
        S: Data<Elem = T>,
        D: Dimension,
    {
        let axes = broadcast_axes(self.shape(), value.shape())?;
        let core = crate::array::host_layout::core_view(value);
        if !crate::array::host_layout::layout_of(&core)?.is_contiguous() {
            return Err(crate::array::transfer::non_contiguous(
                &crate::array::host_layout::layout_of(value)?,
            ));
        }
        if self.is_empty() {
            return Ok(());
        }
        if self.is_dense() {
            let values = value
                .broadcast(self.shape())
                .ok_or_else(|| Error::AssignShape {
                    size: value.len(),
                    axis: 0,
                    dimension: self.len().unwrap_or(1),
                })?;
            let mut span = crate::memory::zeroed_vec::<T>(self.layout.span_len(), "the value")?;
            let base = self.layout.min_offset();
            for (v, offset) in values.iter().zip(self.layout.logical_offsets()) {
                if let Some(slot) = usize::try_from(offset - base)
                    .ok()
                    .and_then(|i| span.get_mut(i))
                {
                    *slot = *v;
                }
            }
            return self.write_span(&span);
        }
        let source = self.device().to_device(value)?;
        let strides = broadcast_strides(&axes, source.strides());
        self.assign_strided(&source, &strides)
    }

    /// Assigns a device array, broadcast to this array's shape (Numba's `d[key] = d_ary`), with
    /// [`DeviceArray::assign`]'s rules; the value may have any strides. A value sharing memory
    /// with `self` is copied first, so `d.assign_device(&d.slice(s![..;-1])?)` reverses `d`.
    pub fn assign_device(&mut self, value: &DeviceArray<T>) -> Result<()> {
        self.device().check_same(value.device(), "value")?;
        let axes = broadcast_axes(self.shape(), value.shape())?;
        if self.is_empty() {
            return Ok(());
        }
        let copy;
        let value = if value.shares_memory_with(self) {
            copy = value.duplicate()?;
            &copy
        } else {
            value
        };
        if self.is_dense() && value.shape() == self.shape() && value.strides() == self.strides() {
            let (dst, bytes) = self.span();
            let (src, _) = value.span();
            let device = self.device();
            // SAFETY: both spans have `bytes` bytes (same shape and strides) and lie in live
            // storage of this device.
            return unsafe {
                device
                    .backend()
                    .copy_dtod(device.ordinal(), dst, src, bytes)
            };
        }
        let strides = broadcast_strides(&axes, value.strides());
        self.assign_strided(value, &strides)
    }

    /// Whether the array's span holds exactly its elements (every element once, no gaps).
    fn is_dense(&self) -> bool {
        self.layout.is_dense()
    }

    /// A new allocation holding a copy of this array's span, with the same layout.
    #[track_caller]
    pub(crate) fn duplicate(&self) -> Result<DeviceArray<T>> {
        let copy = DeviceArray::<T>::allocate(self.device(), self.layout.clone())?;
        let (dst, bytes) = copy.span();
        let (src, _) = self.span();
        if bytes > 0 {
            let device = self.device();
            // SAFETY: `copy` has this array's layout, so both spans have `bytes` bytes; both lie
            // in live storage of this device.
            unsafe {
                device
                    .backend()
                    .copy_dtod(device.ordinal(), dst, src, bytes)?
            };
        }
        Ok(copy)
    }

    /// Writes the whole span (`span[0]` at the lowest address) with one copy.
    fn write_span(&mut self, span: &[T]) -> Result<()> {
        let (dst, bytes) = self.span();
        let src: &[u8] = bytemuck::cast_slice(span);
        if src.len() != bytes {
            return Err(Error::IncompatibleShape {
                expected: vec![self.layout.span_len()],
                found: vec![span.len()],
            });
        }
        let device = self.device();
        // SAFETY: `src` is a live host slice of exactly `bytes` bytes; the destination is this
        // array's span, inside its live storage.
        unsafe {
            device
                .backend()
                .copy_htod(device.ordinal(), dst, src.as_ptr(), bytes)
        }
    }

    /// `self[i...] = source[i...]` where `strides` are `source`'s element strides seen with
    /// `self`'s shape (0 on broadcast axes). `source` does not share memory with `self`.
    fn assign_strided(&mut self, source: &DeviceArray<T>, strides: &[isize]) -> Result<()> {
        if !self.layout.never_overlaps() {
            // A target reaching some element more than once (a broadcast, overlapping axes):
            // the kernel's threads would write it at once, byte by byte, and could leave a
            // value no source element has. In index order instead, the last index wins, as
            // NumPy's assignment does.
            return self.assign_overlapping(source, strides);
        }
        match self.launch_assign(source, strides) {
            Err(
                Error::NotSupportedByBackend { .. }
                | Error::CompilerUnavailable { .. }
                | Error::LibraryLoad { .. }
                | Error::MissingSymbol { .. },
            ) => self.assign_by_runs(source, strides),
            other => other,
        }
    }

    /// Runs the copy kernel, synchronously (ordered after all work on the device's streams).
    fn launch_assign(&mut self, source: &DeviceArray<T>, strides: &[isize]) -> Result<()> {
        // Axes of length 1 move nothing; dropping them lets most arrays fit the kernel's axes.
        let keep: Vec<usize> = (0..self.ndim()).filter(|&a| self.shape()[a] != 1).collect();
        if keep.len() > KERNEL_AXES {
            return Err(Error::NotSupportedByBackend {
                backend: self.device().kind(),
                feature: "the assignment kernel",
                reason: format!("{} axes longer than 1", keep.len()),
            });
        }
        let itemsize = T::itemsize();
        let byte_stride = |s: isize| s.saturating_mul(itemsize as isize);
        let pad = KERNEL_AXES - keep.len();
        let mut shape = vec![1usize; pad];
        let mut dst_strides = vec![0isize; pad];
        let mut src_strides = vec![0isize; pad];
        for &axis in &keep {
            shape.push(self.shape()[axis]);
            dst_strides.push(byte_stride(self.strides()[axis]));
            src_strides.push(byte_stride(strides[axis]));
        }
        shape.push(itemsize);
        dst_strides.push(1);
        src_strides.push(1);
        let bytes_arg =
            |array: &DeviceArray<T>, ptr: DevicePtr, strides: Vec<isize>| LaunchArg::Array {
                ptr,
                shape: shape.clone(),
                strides,
                min_offset: array.layout.min_offset().saturating_mul(itemsize as isize),
                span_len: array.alloc_size(),
                itemsize: 1,
                elem: TypeId::of::<u8>(),
                dtype: "u8",
            };
        let args = [
            bytes_arg(self, self.device_ptr(), dst_strides),
            bytes_arg(source, source.device_ptr(), src_strides),
        ];
        let config = LaunchConfig::for_items(self.size().min(1 << 22), 256);
        let device = self.device();
        // SAFETY: both arguments describe live storage of this device (this array and
        // `source`, borrowed for the whole synchronous launch); the kernel reads `source` and
        // writes `self` only at the offsets their layouts reach, byte by byte within elements.
        unsafe {
            device
                .backend()
                .launch(device.ordinal(), assign_kernel(), &config, &args, None)
        }
    }

    /// The kernel-free path: the source comes to the host, and each run of adjacent target
    /// elements is written with one copy.
    /// `assign_strided` for a target that reaches some elements more than once: each element's
    /// value is the one of the last index reaching it, worked out on the host, and written in
    /// runs of the elements the target reaches (its gaps, other views' elements, untouched).
    fn assign_overlapping(&mut self, source: &DeviceArray<T>, strides: &[isize]) -> Result<()> {
        // Along an axis the target broadcasts (stride 0) every index writes the same elements,
        // and the last one's values stay: only that index is walked, so that a broadcast target
        // of 2^62 elements over one byte is one element's work, not 2^62.
        let (target, last_along_broadcast) =
            without_broadcast_axes(self.shape(), self.strides(), strides)?;
        let view_layout = Layout::with_strides(target.shape(), strides)?;
        let len = self.layout.span_len();
        if target.size() > len.saturating_mul(MAX_OVERLAP) && target.size() > MAX_OVERLAP_WALK {
            return Err(Error::Unsupported {
                operation: "assigning to an array whose elements overlap",
                reason: format!(
                    "{} indices reach {len} elements; assign to a view without the overlap",
                    target.size()
                ),
            });
        }
        let span = source.read_span()?;
        let (src_base, base) = (source.layout.min_offset(), self.layout.min_offset());
        let mut values = crate::memory::zeroed_vec::<T>(len, "the assigned values")?;
        let mut reached = vec![false; len];
        for (dst, src) in target.logical_offsets().zip(view_layout.logical_offsets()) {
            let src = src.saturating_add(last_along_broadcast);
            let value = usize::try_from(src - src_base)
                .ok()
                .and_then(|i| span.get(i).copied());
            let slot = usize::try_from(dst - base).ok().filter(|&i| i < len);
            let (Some(value), Some(slot)) = (value, slot) else {
                return Err(Error::Overflow {
                    what: "assignment offset".into(),
                });
            };
            values[slot] = value;
            reached[slot] = true;
        }
        let mut i = 0;
        while i < len {
            if !reached[i] {
                i += 1;
                continue;
            }
            let start = i;
            while i < len && reached[i] {
                i += 1;
            }
            self.write_run(base + start as isize, &values[start..i])?;
        }
        Ok(())
    }

    fn assign_by_runs(&mut self, source: &DeviceArray<T>, strides: &[isize]) -> Result<()> {
        let span = source.read_span()?;
        let view_layout = Layout::with_strides(self.shape(), strides)?;
        let base = source.layout.min_offset();
        let value_at = |offset: isize| {
            usize::try_from(offset - base)
                .ok()
                .and_then(|i| span.get(i).copied())
                .ok_or_else(|| Error::Overflow {
                    what: "assignment source offset".into(),
                })
        };
        let mut run: Vec<T> = Vec::new();
        let mut run_start = 0isize;
        for (dst, src) in self
            .layout
            .logical_offsets()
            .zip(view_layout.logical_offsets())
        {
            if !run.is_empty() && dst != run_start + run.len() as isize {
                self.write_run(run_start, &run)?;
                run.clear();
            }
            if run.is_empty() {
                run_start = dst;
            }
            run.push(value_at(src)?);
        }
        if !run.is_empty() {
            self.write_run(run_start, &run)?;
        }
        Ok(())
    }

    /// Writes `values` to the elements at element offsets `start..start + values.len()`.
    fn write_run(&self, start: isize, values: &[T]) -> Result<()> {
        let byte = (self.offset as i64).saturating_add((start as i64) * T::itemsize() as i64);
        let dst = DevicePtr(self.storage.base().0.wrapping_add(byte as u64));
        let src: &[u8] = bytemuck::cast_slice(values);
        let device = self.device();
        // SAFETY: the run's offsets are offsets of this array's elements (from its layout), so
        // the destination lies in its live storage; `src` is a live host slice of that length.
        unsafe {
            device
                .backend()
                .copy_htod(device.ordinal(), dst, src.as_ptr(), src.len())
        }
    }
}

/// An overlapping target whose indices reach each element more than this many times on average
/// (after broadcast axes are dropped) ...
const MAX_OVERLAP: usize = 64;
/// ... and more than this many indices in all (minutes of walking on the host) is refused.
const MAX_OVERLAP_WALK: usize = 1 << 32;

/// The target layout (`shape`, `target_strides`) with every broadcast axis (stride 0, length
/// above 1) cut to length 1, and the source offset (with `source_strides`) of the last index
/// along those axes: the index whose values a broadcast target keeps, as later writes win.
fn without_broadcast_axes(
    shape: &[usize],
    target_strides: &[isize],
    source_strides: &[isize],
) -> Result<(Layout, isize)> {
    let mut cut = shape.to_vec();
    let mut last = 0isize;
    for (axis, len) in cut.iter_mut().enumerate() {
        if target_strides[axis] == 0 && *len > 1 {
            let steps = isize::try_from(*len - 1).map_err(|_| Error::Overflow {
                what: "assignment offset".into(),
            })?;
            last = steps
                .checked_mul(source_strides[axis])
                .and_then(|step| last.checked_add(step))
                .ok_or_else(|| Error::Overflow {
                    what: "assignment offset".into(),
                })?;
            *len = 1;
        }
    }
    Ok((Layout::with_strides(&cut, target_strides)?, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numba_broadcast_rules() {
        assert_eq!(
            broadcast_axes(&[5], &[2]).map_err(|e| e.to_string()),
            Err("Can't copy sequence with size 2 to array axis 0 with dimension 5".into())
        );
        assert_eq!(
            broadcast_axes(&[35], &[1, 2, 3]).map_err(|e| e.to_string()),
            Err("Can't assign 3-D array to 1-D self".into())
        );
        assert_eq!(
            broadcast_axes(&[10], &[1, 10]).map_err(|e| e.to_string()),
            Err("Can't assign 2-D array to 1-D self".into())
        );
        assert_eq!(
            broadcast_axes(&[3, 4], &[3]).map_err(|e| e.to_string()),
            Err("Can't copy sequence with size 3 to array axis 1 with dimension 4".into())
        );
        assert_eq!(
            broadcast_axes(&[3, 4], &[4]).ok(),
            Some(vec![None, Some(0)])
        );
        assert_eq!(
            broadcast_axes(&[3, 4], &[3, 1]).ok(),
            Some(vec![Some(0), None])
        );
        assert_eq!(broadcast_axes(&[], &[]).ok(), Some(vec![]));
        assert_eq!(broadcast_axes(&[0], &[0]).ok(), Some(vec![Some(0)]));
    }
}
