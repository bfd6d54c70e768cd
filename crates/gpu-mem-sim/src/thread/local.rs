//! Block-shared and thread-local arrays of a simulated kernel: [`SharedArray`] and
//! [`LocalArray`], C-ordered, with compile-time rank and bounds-checked indexing.

use crate::thread::ThreadCtx;
use gpu_mem_core::Element;
use std::cell::RefCell;
use std::marker::PhantomData;

/// Row-major offset of `index` in `shape`, or `None` when out of bounds.
/// Records an out-of-bounds access of a shared or local array. Out of line and cold: a kernel's
/// loop over an array keeps its values in registers only if the fault's call (which clobbers
/// them) stays off the loop's path.
#[cold]
#[inline(never)]
fn out_of_bounds(ctx: &ThreadCtx<'_>, what: &str, index: &[usize], shape: &[usize]) {
    ctx.fault(format!(
        "{what} index {index:?} is out of bounds for shape {shape:?}"
    ));
}

/// Records an access of a shared array whose buffer the block refused to hand out (over the
/// block's shared memory, or a type or shape other than the same call's in other threads): the
/// refusal itself was recorded already; this keeps a rank-0 array (which every index reaches)
/// from touching memory it does not have.
#[cold]
#[inline(never)]
fn no_buffer(ctx: &ThreadCtx<'_>) {
    ctx.fault("a shared array whose allocation was refused was accessed".to_string());
}

fn c_offset<const N: usize>(shape: &[usize; N], index: &[usize; N]) -> Option<usize> {
    let mut offset = 0usize;
    for axis in 0..N {
        if index[axis] >= shape[axis] {
            return None;
        }
        offset = offset * shape[axis] + index[axis];
    }
    Some(offset)
}

/// A shared (group) memory array: one per block, seen by every thread of it.
#[derive(Debug, Clone, Copy)]
pub struct SharedArray<'a, T: Element, const N: usize> {
    ctx: &'a ThreadCtx<'a>,
    base: *mut T,
    shape: [usize; N],
    _element: PhantomData<T>,
}

impl<'a, T: Element, const N: usize> SharedArray<'a, T, N> {
    /// # Safety
    /// `base` addresses a block-wide buffer of `shape`'s element count of `T`, valid while the
    /// block runs.
    pub(crate) unsafe fn new(ctx: &'a ThreadCtx<'a>, base: *mut T, shape: [usize; N]) -> Self {
        SharedArray {
            ctx,
            base,
            shape,
            _element: PhantomData,
        }
    }

    pub(crate) fn empty(ctx: &'a ThreadCtx<'a>, mut shape: [usize; N]) -> Self {
        shape.iter_mut().for_each(|d| *d = 0);
        SharedArray {
            ctx,
            base: std::ptr::null_mut(),
            shape,
            _element: PhantomData,
        }
    }

    /// The shape.
    pub fn shape(&self) -> [usize; N] {
        self.shape
    }

    fn slot(&self, index: [usize; N]) -> Option<*mut T> {
        if self.base.is_null() {
            // A refused array (`empty`): its shape is all zeros, so any index of a ranked one
            // is out of bounds, but a rank-0 one has no index to be out of.
            no_buffer(self.ctx);
            return None;
        }
        match c_offset(&self.shape, &index) {
            // The offset is within the buffer's element count.
            Some(offset) => Some(self.base.wrapping_add(offset)),
            None => {
                out_of_bounds(self.ctx, "shared array", &index, &self.shape);
                None
            }
        }
    }

    /// Reads `s[index]`.
    pub fn get(&self, index: [usize; N]) -> T {
        match self.slot(index) {
            // SAFETY: the index is in bounds of the block-wide buffer; the block's threads run one
            // at a time, so no other thread accesses it concurrently.
            Some(ptr) => unsafe { ptr.read() },
            None => T::zeroed(),
        }
    }

    /// Writes `s[index] = value`.
    pub fn set(&self, index: [usize; N], value: T) {
        if let Some(ptr) = self.slot(index) {
            // SAFETY: as in `get`.
            unsafe { ptr.write(value) }
        }
    }

    fn atomic_slot(&self, index: [usize; N]) -> Option<*mut T> {
        self.slot(index)
    }

    crate::thread::atomics::atomic_methods!([usize; N]);
}

impl<const N: usize> SharedArray<'_, u32, N> {
    crate::thread::atomics::atomic_inc_dec!([usize; N]);
}

/// The most local memory one thread's arrays may take, each: CUDA's limit per thread (512 KiB).
/// (A whole block of threads may be suspended holding theirs at a barrier.)
pub(crate) const MAX_LOCAL_BYTES: usize = 512 << 10;

/// A per-thread array (Numba's `cuda.local.array`).
#[derive(Debug)]
pub struct LocalArray<'a, T: Element, const N: usize> {
    ctx: &'a ThreadCtx<'a>,
    data: RefCell<Vec<T>>,
    shape: [usize; N],
}

impl<'a, T: Element, const N: usize> LocalArray<'a, T, N> {
    pub(crate) fn new(ctx: &'a ThreadCtx<'a>, shape: [usize; N]) -> Self {
        let bytes = shape
            .iter()
            .try_fold(std::mem::size_of::<T>(), |acc, &d| acc.checked_mul(d));
        let data = match bytes {
            Some(bytes) if bytes <= MAX_LOCAL_BYTES => {
                vec![T::zeroed(); bytes / std::mem::size_of::<T>().max(1)]
            }
            _ => {
                ctx.fault(format!(
                    "local array shape {shape:?} of {} is too large: a thread's local memory holds at most {MAX_LOCAL_BYTES} bytes",
                    T::dtype()
                ));
                Vec::new()
            }
        };
        let shape = if data.is_empty() { [0; N] } else { shape };
        LocalArray {
            ctx,
            data: RefCell::new(data),
            shape,
        }
    }

    /// The shape.
    pub fn shape(&self) -> [usize; N] {
        self.shape
    }

    fn offset(&self, index: [usize; N]) -> Option<usize> {
        let offset = c_offset(&self.shape, &index);
        if offset.is_none() {
            out_of_bounds(self.ctx, "local array", &index, &self.shape);
        }
        offset
    }

    /// Reads `l[index]`.
    pub fn get(&self, index: [usize; N]) -> T {
        self.offset(index)
            .and_then(|o| self.data.borrow().get(o).copied())
            .unwrap_or_else(T::zeroed)
    }

    /// Writes `l[index] = value`.
    pub fn set(&self, index: [usize; N], value: T) {
        if let Some(o) = self.offset(index)
            && let Some(slot) = self.data.borrow_mut().get_mut(o)
        {
            *slot = value;
        }
    }
}
