//! [`PinnedArray`]: an ndarray-like host array in page-locked memory.

use crate::array::LayoutSource;
use crate::backend::HostAllocFlags;
use crate::device::Device;
use crate::element::Element;
use crate::error::Result;
use crate::layout::{Layout, Order};
use crate::memory::{Access, HostBuffer};
use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn, ShapeBuilder};
use std::marker::PhantomData;
use std::sync::Arc;

/// A host array in page-locked memory (Numba's `cuda.pinned_array`): usable as the source or
/// destination of asynchronous copies. Reading it waits for in-flight copies into it; writing
/// waits for every in-flight copy that uses it.
#[derive(Debug)]
pub struct PinnedArray<T: Element> {
    pub(crate) buffer: Arc<HostBuffer>,
    pub(crate) layout: Layout,
    _element: PhantomData<T>,
}

impl Device {
    /// Allocates a zero-filled, C-ordered page-locked host array (Numba's
    /// `cuda.pinned_array(shape, dtype)`).
    #[track_caller]
    pub fn pinned_array<T: Element>(&self, shape: &[usize]) -> Result<PinnedArray<T>> {
        self.pinned_array_with_order(shape, Order::C)
    }

    /// Allocates a zero-filled page-locked host array in C or Fortran order (Numba's
    /// `order=`).
    #[track_caller]
    pub fn pinned_array_with_order<T: Element>(
        &self,
        shape: &[usize],
        order: Order,
    ) -> Result<PinnedArray<T>> {
        self.pinned_array_with_layout(Layout::contiguous(shape, order)?)
    }

    /// Allocates a zero-filled page-locked host array shaped like `like`, a host or device array
    /// (Numba's `cuda.pinned_array_like(ary)`): same shape and element type, and the strides
    /// `device_array_like` gives (C, F, or the source's axis order without its gaps).
    #[track_caller]
    pub fn pinned_array_like<L: LayoutSource>(&self, like: &L) -> Result<PinnedArray<L::Elem>> {
        self.pinned_array_with_layout(like.source_layout()?.like())
    }

    /// `layout` is dense with non-negative strides.
    #[track_caller]
    fn pinned_array_with_layout<T: Element>(&self, layout: Layout) -> Result<PinnedArray<T>> {
        let buffer = allocate_zeroed::<T>(self, &layout, Some(HostAllocFlags::default()))?;
        Ok(PinnedArray {
            buffer: Arc::new(buffer),
            layout,
            _element: PhantomData,
        })
    }
}

/// Alignment every backend guarantees for page-locked allocations (`Memory::host_alloc`'s
/// promise: 256 bytes, not a page).
pub(crate) const PINNED_ALIGN: usize = 256;

/// The first element of a dense buffer: its base, or a dangling (never dereferenced) pointer
/// aligned for `T` when it holds nothing.
fn first_element<T: Element>(buffer: &HostBuffer, layout: &Layout) -> *mut T {
    if layout.size() == 0 {
        std::ptr::NonNull::<T>::dangling().as_ptr()
    } else {
        buffer.base().as_ptr().cast::<T>()
    }
}

/// Allocates page-locked memory for `layout` and zero-fills it (fresh host memory is
/// uninitialised on GPUs, and reading uninitialised memory is undefined behaviour in Rust).
#[track_caller]
pub(crate) fn allocate_zeroed<T: Element>(
    device: &Device,
    layout: &Layout,
    flags: Option<HostAllocFlags>,
) -> Result<HostBuffer> {
    crate::array::device_array::check_element::<T>(PINNED_ALIGN, "page-locked buffers")?;
    let bytes = crate::array::span_bytes_of::<T>(layout)?;
    let buffer = match flags {
        Some(flags) => HostBuffer::allocate(device, bytes, flags)?,
        None => HostBuffer::allocate_managed(device, bytes)?,
    };
    if bytes > 0 && !buffer.is_zeroed() {
        // SAFETY: the buffer was just allocated with `bytes` bytes and nothing else refers to it.
        unsafe { std::ptr::write_bytes(buffer.base().as_ptr(), 0, bytes) };
    }
    Ok(buffer)
}

/// An ndarray view of a dense buffer with `layout` (C or F contiguous).
///
/// # Safety
/// `buffer` holds `layout.size()` initialised `T`s, and no one writes them while the view lives.
pub(crate) unsafe fn view_of<'a, T: Element>(
    buffer: &'a HostBuffer,
    layout: &Layout,
) -> ArrayViewD<'a, T> {
    let shape = IxDyn(layout.shape()).strides(IxDyn(&to_usize(layout.strides())));
    // SAFETY: per the caller's contract; the layout is dense and non-negative so every element
    // lies inside the buffer, which is aligned for `T` (page aligned or an ndarray allocation).
    unsafe { ArrayViewD::from_shape_ptr(shape, first_element::<T>(buffer, layout).cast_const()) }
}

/// A mutable ndarray view of a dense buffer with `layout`.
///
/// # Safety
/// As [`view_of`], and no one else reads or writes the elements while the view lives.
pub(crate) unsafe fn view_mut_of<'a, T: Element>(
    buffer: &'a HostBuffer,
    layout: &Layout,
) -> ArrayViewMutD<'a, T> {
    let shape = IxDyn(layout.shape()).strides(IxDyn(&to_usize(layout.strides())));
    // SAFETY: per the caller's contract, as in `view_of`.
    unsafe { ArrayViewMutD::from_shape_ptr(shape, first_element::<T>(buffer, layout)) }
}

fn to_usize(strides: &[isize]) -> Vec<usize> {
    strides.iter().map(|s| s.unsigned_abs()).collect()
}

impl<T: Element> PinnedArray<T> {
    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }

    /// Shape and strides.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The device whose driver locked the memory.
    pub fn device(&self) -> &Device {
        self.buffer.device()
    }

    /// A read-only view; waits for in-flight copies into the array first.
    pub fn view(&self) -> Result<ArrayViewD<'_, T>> {
        self.buffer.pending().wait_for_host(Access::Read)?;
        // SAFETY: the buffer holds `size` zero-initialised-or-written `T`s; in-flight writers
        // were waited for, and new device writes need `&mut self`, which the view's borrow of
        // `self` excludes.
        Ok(unsafe { view_of(&self.buffer, &self.layout) })
    }

    /// A mutable view; waits for every in-flight copy that uses the array first.
    pub fn view_mut(&mut self) -> Result<ArrayViewMutD<'_, T>> {
        self.buffer.pending().wait_for_host(Access::Write)?;
        // SAFETY: as in `view`, and every in-flight reader was waited for too; `&mut self`
        // excludes new device work and other host views.
        Ok(unsafe { view_mut_of(&self.buffer, &self.layout) })
    }
}
