//! Device memory as a simulated thread indexes it: [`GlobalArray`] and [`GlobalRecord`].
//!
//! Every access is bounds-checked; an out-of-bounds index records a fault naming the argument,
//! the index and the shape (the launch then fails naming the kernel and thread), and the access
//! does nothing (reads give zero) — where a GPU would trap.

use crate::thread::ThreadCtx;
use gpu_mem_core::Element;
use std::marker::PhantomData;

/// An array argument inside a simulated kernel.
#[derive(Debug, Clone, Copy)]
pub struct GlobalArray<'a, T: Element> {
    ctx: &'a ThreadCtx<'a>,
    arg: usize,
    base: *mut T,
    shape: &'a [usize],
    strides: &'a [isize],
    _element: PhantomData<T>,
}

impl<'a, T: Element> GlobalArray<'a, T> {
    /// # Safety
    /// `base`, `shape` and `strides` describe an array of `T` valid for the launch.
    pub(crate) unsafe fn new(
        ctx: &'a ThreadCtx<'a>,
        arg: usize,
        base: *mut T,
        shape: &'a [usize],
        strides: &'a [isize],
    ) -> Self {
        GlobalArray {
            ctx,
            arg,
            base,
            shape,
            strides,
            _element: PhantomData,
        }
    }

    pub(crate) fn empty(ctx: &'a ThreadCtx<'a>, arg: usize) -> Self {
        GlobalArray {
            ctx,
            arg,
            base: std::ptr::null_mut(),
            shape: &[0],
            strides: &[1],
            _element: PhantomData,
        }
    }

    /// The shape (Numba's `A.shape`).
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }

    /// Length of the first axis.
    pub fn len(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }

    /// `true` when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.shape.contains(&0)
    }

    #[inline]
    fn offset(&self, index: &[usize]) -> Option<isize> {
        if index.len() != self.shape.len() {
            self.wrong_rank(index);
            return None;
        }
        let mut offset = 0isize;
        for (axis, ((&i, &len), &stride)) in
            index.iter().zip(self.shape).zip(self.strides).enumerate()
        {
            if i >= len {
                self.out_of_bounds(index, axis);
                return None;
            }
            offset += i as isize * stride;
        }
        Some(offset)
    }

    // The faults are out of line and cold: a kernel's loop over an array keeps its values in
    // registers only if the fault's call (which clobbers them) stays off the loop's path.

    #[cold]
    #[inline(never)]
    fn wrong_rank(&self, index: &[usize]) {
        self.ctx.fault(format!(
            "argument {} indexed with {} indices {index:?} but has {} dimensions",
            self.arg,
            index.len(),
            self.shape.len()
        ));
    }

    #[cold]
    #[inline(never)]
    fn out_of_bounds(&self, index: &[usize], axis: usize) {
        self.ctx.fault(format!(
            "index {index:?} is out of bounds for argument {} with shape {:?} (axis {axis})",
            self.arg, self.shape
        ));
    }

    /// Reads `A[index]`.
    pub fn get(&self, index: impl AsRef<[usize]>) -> T {
        match self.offset(index.as_ref()) {
            // SAFETY: the index was checked against the shape, so the element lies inside the
            // argument's memory, valid for the launch. Racing writers are excluded by the
            // launch's (unsafe) contract.
            Some(offset) => unsafe { self.base.offset(offset).read() },
            None => T::zeroed(),
        }
    }

    /// Writes `A[index] = value`.
    pub fn set(&self, index: impl AsRef<[usize]>, value: T) {
        if let Some(offset) = self.offset(index.as_ref()) {
            // SAFETY: as in `get`.
            unsafe { self.base.offset(offset).write(value) }
        }
    }

    fn atomic_slot(&self, index: impl AsRef<[usize]>) -> Option<*mut T> {
        // The offset was checked against the shape: the element lies inside the argument.
        self.offset(index.as_ref())
            .map(|offset| self.base.wrapping_offset(offset))
    }

    crate::thread::atomics::atomic_methods!(impl AsRef<[usize]>);

    /// `A[index] = f(A[index])`; returns the new value.
    pub fn update(&self, index: impl AsRef<[usize]>, f: impl FnOnce(T) -> T) -> T {
        let index = index.as_ref();
        match self.offset(index) {
            Some(offset) => {
                // SAFETY: as in `get`.
                unsafe {
                    let slot = self.base.offset(offset);
                    let value = f(slot.read());
                    slot.write(value);
                    value
                }
            }
            None => T::zeroed(),
        }
    }
}

impl GlobalArray<'_, u32> {
    crate::thread::atomics::atomic_inc_dec!(impl AsRef<[usize]>);
}

/// A record argument (`DeviceRecord`) inside a simulated kernel.
#[derive(Debug, Clone, Copy)]
pub struct GlobalRecord<'a, T: Element> {
    ctx: &'a ThreadCtx<'a>,
    ptr: *mut T,
}

impl<'a, T: Element> GlobalRecord<'a, T> {
    /// # Safety
    /// `ptr` addresses a `T` valid for the launch.
    pub(crate) unsafe fn new(ctx: &'a ThreadCtx<'a>, ptr: *mut T) -> Self {
        GlobalRecord { ctx, ptr }
    }

    pub(crate) fn dangling(ctx: &'a ThreadCtx<'a>) -> Self {
        GlobalRecord {
            ctx,
            ptr: std::ptr::null_mut(),
        }
    }

    /// Reads the value.
    pub fn get(&self) -> T {
        if self.ptr.is_null() {
            self.ctx.fault("read of an invalid record argument".into());
            return T::zeroed();
        }
        // SAFETY: a non-null pointer came from `new`, whose contract makes it valid.
        unsafe { self.ptr.read_unaligned() }
    }

    /// Writes the value.
    pub fn set(&self, value: T) {
        if self.ptr.is_null() {
            self.ctx.fault("write of an invalid record argument".into());
            return;
        }
        // SAFETY: as in `get`.
        unsafe { self.ptr.write_unaligned(value) }
    }
}
