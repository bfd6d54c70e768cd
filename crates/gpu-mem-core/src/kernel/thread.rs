//! [`ThreadCtx`]: what a simulated thread sees — its indices, its arguments, shared and local
//! arrays, barriers — and [`ThreadOps`], what an executor provides behind it.

use crate::element::Element;
use crate::kernel::{Dim3, GlobalArray, GlobalRecord, LocalArray, SharedArray};
use std::any::TypeId;
use std::panic::Location;

/// The memory a barrier orders (ROC's `CLK_LOCAL_MEM_FENCE` / `CLK_GLOBAL_MEM_FENCE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fence {
    /// Shared (group) memory: `__syncthreads()`.
    Local,
    /// Global memory as well: `__threadfence()` + barrier.
    Global,
}

/// Which threads a barrier waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BarrierScope {
    /// Every thread of the block.
    Block,
    /// The threads of the caller's warp (wavefront).
    Warp,
}

/// One kernel argument as a simulated thread reaches it.
#[derive(Debug, Clone, Copy)]
pub enum ArgView<'a> {
    /// An array: `base` is the host address of its first logical element.
    Array {
        /// First logical element.
        base: *mut u8,
        /// Shape.
        shape: &'a [usize],
        /// Strides in elements.
        strides: &'a [isize],
        /// Element type.
        elem: TypeId,
        /// Element type name.
        dtype: &'static str,
    },
    /// A single value in device memory.
    Record {
        /// Host address of the value.
        ptr: *mut u8,
        /// Its type.
        elem: TypeId,
        /// Its type name.
        dtype: &'static str,
    },
    /// A value passed by copy.
    Scalar {
        /// Its bytes.
        bytes: &'a [u8],
        /// Its type.
        elem: TypeId,
        /// Its type name.
        dtype: &'static str,
    },
}

impl ArgView<'_> {
    fn describe(&self) -> String {
        match self {
            ArgView::Array { dtype, shape, .. } => {
                format!(
                    "an array of {dtype} with shape {}",
                    crate::error::fmt_dims(shape)
                )
            }
            ArgView::Record { dtype, .. } => format!("a record of {dtype}"),
            ArgView::Scalar { dtype, .. } => format!("a scalar {dtype}"),
        }
    }
}

/// What an executor provides to the threads it runs.
pub trait ThreadOps {
    /// Waits until every thread of `scope` has reached a barrier (then, for [`Fence::Global`],
    /// orders global memory). `at` identifies the barrier for divergence reports.
    fn barrier(&self, scope: BarrierScope, fence: Fence, at: &'static Location<'static>);
    /// The block's next static shared buffer in this thread's call order, `bytes` long and
    /// aligned to `align`; `None` after recording a fault (size mismatch, over the limit).
    fn shared(&self, bytes: usize, align: usize, dtype: &'static str) -> Option<*mut u8>;
    /// The block's dynamic shared memory and its size in bytes.
    fn dynamic_shared(&self) -> (*mut u8, usize);
    /// Records a fault of the calling thread; the launch fails with it.
    fn fault(&self, message: String);
}

/// The context a simulated thread runs with (Numba's `cuda.threadIdx`, `cuda.grid(2)`,
/// `cuda.shared.array`, `cuda.syncthreads()` ...).
pub struct ThreadCtx<'a> {
    ops: &'a dyn ThreadOps,
    args: &'a [ArgView<'a>],
    thread_idx: Dim3,
    block_idx: Dim3,
    block_dim: Dim3,
    grid_dim: Dim3,
    warp_size: u32,
}

impl std::fmt::Debug for ThreadCtx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadCtx")
            .field("thread_idx", &self.thread_idx)
            .field("block_idx", &self.block_idx)
            .finish_non_exhaustive()
    }
}

impl<'a> ThreadCtx<'a> {
    /// A context for one thread.
    ///
    /// # Safety
    /// Every pointer in `args` addresses memory that stays valid for the whole launch and holds
    /// the described array or value, and `ops` hands out shared memory valid for the block.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn new(
        ops: &'a dyn ThreadOps,
        args: &'a [ArgView<'a>],
        thread_idx: Dim3,
        block_idx: Dim3,
        block_dim: Dim3,
        grid_dim: Dim3,
        warp_size: u32,
    ) -> ThreadCtx<'a> {
        ThreadCtx {
            ops,
            args,
            thread_idx,
            block_idx,
            block_dim,
            grid_dim,
            warp_size,
        }
    }

    /// `threadIdx`.
    pub fn thread_idx(&self) -> Dim3 {
        self.thread_idx
    }

    /// `blockIdx`.
    pub fn block_idx(&self) -> Dim3 {
        self.block_idx
    }

    /// `blockDim`.
    pub fn block_dim(&self) -> Dim3 {
        self.block_dim
    }

    /// `gridDim`.
    pub fn grid_dim(&self) -> Dim3 {
        self.grid_dim
    }

    /// Numba's `cuda.grid(1)`: the global x index.
    pub fn grid1(&self) -> usize {
        self.block_idx.x as usize * self.block_dim.x as usize + self.thread_idx.x as usize
    }

    /// Numba's `cuda.grid(2)`: the global (x, y) index.
    pub fn grid2(&self) -> (usize, usize) {
        (
            self.grid1(),
            self.block_idx.y as usize * self.block_dim.y as usize + self.thread_idx.y as usize,
        )
    }

    /// Numba's `cuda.grid(3)`.
    pub fn grid3(&self) -> (usize, usize, usize) {
        let (x, y) = self.grid2();
        (
            x,
            y,
            self.block_idx.z as usize * self.block_dim.z as usize + self.thread_idx.z as usize,
        )
    }

    /// Numba's `cuda.gridsize(1)`: threads in the grid along x.
    pub fn gridsize1(&self) -> usize {
        self.grid_dim.x as usize * self.block_dim.x as usize
    }

    /// Numba's `cuda.gridsize(2)`.
    pub fn gridsize2(&self) -> (usize, usize) {
        (
            self.gridsize1(),
            self.grid_dim.y as usize * self.block_dim.y as usize,
        )
    }

    /// The thread's linear index within its block (x fastest).
    pub fn linear_thread_idx(&self) -> u32 {
        self.thread_idx.x
            + self.thread_idx.y * self.block_dim.x
            + self.thread_idx.z * self.block_dim.x * self.block_dim.y
    }

    /// Threads per warp (32) or wavefront (64) on this device.
    pub fn warp_size(&self) -> u32 {
        self.warp_size
    }

    /// The thread's lane within its warp.
    pub fn lane_id(&self) -> u32 {
        self.linear_thread_idx() % self.warp_size.max(1)
    }

    /// The thread's warp within its block.
    pub fn warp_id(&self) -> u32 {
        self.linear_thread_idx() / self.warp_size.max(1)
    }

    /// Number of arguments.
    pub fn arg_count(&self) -> usize {
        self.args.len()
    }

    fn arg_fault(&self, index: usize, wanted: String) {
        let found = match self.args.get(index) {
            Some(arg) => arg.describe(),
            None => format!("nothing (the launch has {} arguments)", self.args.len()),
        };
        self.ops.fault(format!(
            "argument {index} was used as {wanted} but is {found}"
        ));
    }

    /// Argument `index` as an array of `T` (a device array, mapped array or transferred host
    /// array). A wrong index or type is a fault, and the returned array is empty.
    pub fn array<T: Element>(&self, index: usize) -> GlobalArray<'_, T> {
        match self.args.get(index) {
            Some(ArgView::Array {
                base,
                shape,
                strides,
                elem,
                ..
            }) if *elem == TypeId::of::<T>() => {
                // SAFETY: the executor built the view from an argument of this element type,
                // valid for the launch (`ThreadCtx::new`'s contract).
                unsafe { GlobalArray::new(self, index, base.cast::<T>(), shape, strides) }
            }
            _ => {
                self.arg_fault(index, format!("an array of {}", T::dtype()));
                GlobalArray::empty(self, index)
            }
        }
    }

    /// Argument `index` as a record of `T` (a `DeviceRecord`).
    pub fn record<T: Element>(&self, index: usize) -> GlobalRecord<'_, T> {
        match self.args.get(index) {
            Some(ArgView::Record { ptr, elem, .. }) if *elem == TypeId::of::<T>() => {
                // SAFETY: as in `array`.
                unsafe { GlobalRecord::new(self, ptr.cast::<T>()) }
            }
            _ => {
                self.arg_fault(index, format!("a record of {}", T::dtype()));
                GlobalRecord::dangling(self)
            }
        }
    }

    /// Argument `index` as a scalar `T`.
    pub fn scalar<T: Element>(&self, index: usize) -> T {
        match self.args.get(index) {
            Some(ArgView::Scalar { bytes, elem, .. }) if *elem == TypeId::of::<T>() => {
                bytemuck::pod_read_unaligned(bytes)
            }
            _ => {
                self.arg_fault(index, format!("a scalar {}", T::dtype()));
                T::zeroed()
            }
        }
    }

    /// A static shared array (Numba's `cuda.shared.array(shape, dtype)`): one buffer per block,
    /// the same for every thread; a thread's n-th call returns the block's n-th buffer, as in
    /// Numba. Zero-initialised at block start by the simulator (undefined on GPUs).
    pub fn shared_array<T: Element, const N: usize>(
        &self,
        shape: [usize; N],
    ) -> SharedArray<'_, T, N> {
        let count = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
        let Some(bytes) = count
            .and_then(|c| c.checked_mul(T::itemsize()))
            .filter(|&b| b > 0)
        else {
            self.ops.fault(format!(
                "shared array shape {shape:?} has no elements or overflows"
            ));
            return SharedArray::empty(self, shape);
        };
        match self
            .ops
            .shared(bytes, std::mem::align_of::<T>(), T::dtype())
        {
            // SAFETY: the executor returned a block-wide buffer of `bytes` bytes aligned for `T`.
            Some(ptr) => unsafe { SharedArray::new(self, ptr.cast::<T>(), shape) },
            None => SharedArray::empty(self, shape),
        }
    }

    /// The block's dynamic shared memory as a 1-d array of `T` (CUDA's `extern __shared__`,
    /// Numba's `cuda.shared.array(0, dtype)`), sized by [`LaunchConfig::shared_bytes`](crate::kernel::LaunchConfig).
    pub fn dynamic_shared<T: Element>(&self) -> SharedArray<'_, T, 1> {
        let (ptr, bytes) = self.ops.dynamic_shared();
        if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
            self.ops.fault(format!(
                "dynamic shared memory is not aligned for {}",
                T::dtype()
            ));
            return SharedArray::empty(self, [0]);
        }
        // SAFETY: the executor's dynamic shared buffer is `bytes` long and block-wide.
        unsafe { SharedArray::new(self, ptr.cast::<T>(), [bytes / T::itemsize().max(1)]) }
    }

    /// A per-thread local array (Numba's `cuda.local.array(shape, dtype)`), zero-initialised.
    pub fn local_array<T: Element, const N: usize>(
        &self,
        shape: [usize; N],
    ) -> LocalArray<'_, T, N> {
        LocalArray::new(self, shape)
    }

    /// Waits for every thread of the block (`cuda.syncthreads()`).
    #[track_caller]
    pub fn syncthreads(&self) {
        self.ops
            .barrier(BarrierScope::Block, Fence::Local, Location::caller());
    }

    /// ROC's `barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)`: a block barrier that also
    /// orders global memory for [`Fence::Global`].
    #[track_caller]
    pub fn barrier(&self, fence: Fence) {
        self.ops
            .barrier(BarrierScope::Block, fence, Location::caller());
    }

    /// Waits for the threads of the caller's warp (ROC's `wavebarrier()`, CUDA's `__syncwarp()`).
    #[track_caller]
    pub fn wavebarrier(&self) {
        self.ops
            .barrier(BarrierScope::Warp, Fence::Local, Location::caller());
    }

    /// Records a fault (used by the array types).
    pub(crate) fn fault(&self, message: String) {
        self.ops.fault(message);
    }
}
