//! [`ThreadCtx`]: what a simulated thread sees — its indices, its arguments, shared and local
//! arrays, barriers, warp collectives — and [`ThreadOps`], what an executor provides behind it.

use super::collective::{BarrierScope, Collective, Fence};
use crate::thread::{GlobalArray, GlobalRecord, LocalArray, SharedArray};
use gpu_mem_core::Element;
use gpu_mem_core::kernel::Dim3;
use std::any::TypeId;
use std::ffi::{CStr, c_char};
use std::fmt;
use std::panic::Location;

/// Where a barrier or collective stands in the kernel's code. Two threads wait at "the same
/// barrier" when their sites are equal; reports name the site.
#[derive(Debug, Clone, Copy)]
pub struct Site {
    /// The file name's first byte: a Rust `&'static str`, or a NUL-terminated C string inside a
    /// loaded kernel library (never unloaded), or null.
    file: *const u8,
    /// The Rust file name's length; [`C_FILE`] for a C string.
    file_len: u32,
    line: u32,
    column: u32,
}

/// `Site::file_len` of a C string.
const C_FILE: u32 = u32::MAX;

impl Site {
    /// No site (a placeholder).
    pub(crate) const NONE: Site = Site {
        file: std::ptr::null(),
        file_len: C_FILE,
        line: 0,
        column: 0,
    };

    /// The site of a Rust call (`#[track_caller]`).
    pub fn rust(location: &'static Location<'static>) -> Site {
        let file = location.file();
        Site {
            file: file.as_ptr(),
            // A longer name is cut for display only; sites still compare by address.
            file_len: u32::try_from(file.len()).unwrap_or(C_FILE - 1),
            line: location.line(),
            column: location.column(),
        }
    }

    /// The site of a call in compiled kernel source.
    ///
    /// # Safety
    /// `file` is null or a NUL-terminated string that stays valid for the rest of the process.
    pub(crate) unsafe fn c(file: *const c_char, line: i32) -> Site {
        Site {
            file: file.cast(),
            file_len: C_FILE,
            line: u32::try_from(line).unwrap_or(0),
            column: 0,
        }
    }

    fn file_name(&self) -> std::borrow::Cow<'static, str> {
        if self.file.is_null() {
            return "<unknown>".into();
        }
        if self.file_len == C_FILE {
            // SAFETY: `Site::c`'s contract: a NUL-terminated string valid for the process.
            return unsafe { CStr::from_ptr(self.file.cast()) }
                .to_string_lossy()
                .into_owned()
                .into();
        }
        // SAFETY: `Site::rust` took pointer and length from a `&'static str`.
        let bytes: &'static [u8] =
            unsafe { std::slice::from_raw_parts(self.file, self.file_len as usize) };
        String::from_utf8_lossy(bytes)
    }
}

impl PartialEq for Site {
    #[inline]
    fn eq(&self, other: &Site) -> bool {
        if self.line != other.line || self.column != other.column {
            return false;
        }
        // Cheap first: the same string at the same address (the common case).
        (self.file == other.file && self.file_len == other.file_len) || self.same_file_name(other)
    }
}

impl Site {
    /// Copies `self` into `into` field by field. (A site built in registers and copied whole is
    /// spilled and reloaded as one 16-byte value, which stalls on store forwarding.)
    #[inline(always)]
    pub(crate) fn store(&self, into: &mut Site) {
        // SAFETY: volatile writes through a valid exclusive reference; volatile only keeps the
        // compiler from merging the fields into one wide copy.
        unsafe {
            std::ptr::write_volatile(&mut into.file, self.file);
            std::ptr::write_volatile(&mut into.file_len, self.file_len);
            std::ptr::write_volatile(&mut into.line, self.line);
            std::ptr::write_volatile(&mut into.column, self.column);
        }
    }

    #[cold]
    #[inline(never)]
    fn same_file_name(&self, other: &Site) -> bool {
        self.file_name() == other.file_name()
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.column {
            0 => write!(f, "{}:{}", self.file_name(), self.line),
            column => write!(f, "{}:{}:{column}", self.file_name(), self.line),
        }
    }
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
                    gpu_mem_core::error::fmt_dims(shape)
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
    /// orders global memory). For a warp barrier, `mask` names the lanes that must take part.
    /// `at` identifies the barrier for divergence reports.
    fn barrier(&self, scope: BarrierScope, fence: Fence, mask: u64, at: Site);
    /// A barrier of `op`'s scope that also combines the participants' `value`s (see
    /// [`Collective`]); returns this thread's result.
    fn collective(
        &self,
        op: Collective,
        mask: u64,
        value: u64,
        arg: i64,
        width: u32,
        at: Site,
    ) -> u64;
    /// Lets the other threads of the block run for a while (atomics and spin-waits call it, so
    /// a thread waiting for another one's write makes progress).
    fn progress(&self);
    /// The block's next static shared buffer in this thread's call order, `bytes` long and
    /// aligned to `align`; `None` after recording a fault (size mismatch, over the limit).
    fn shared(&self, bytes: usize, align: usize, dtype: &'static str) -> Option<*mut u8>;
    /// The block's dynamic shared memory and its size in bytes.
    fn dynamic_shared(&self) -> (*mut u8, usize);
    /// Records a fault of the calling thread; the launch fails with it.
    fn fault(&self, message: String);
}

/// What every thread of a block shares: the launch's arguments and the block's place in the
/// grid. One per block; each thread's [`ThreadCtx`] refers to it.
#[derive(Debug)]
pub struct BlockCtx<'a> {
    args: &'a [ArgView<'a>],
    block_idx: Dim3,
    block_dim: Dim3,
    grid_dim: Dim3,
    warp_size: u32,
}

impl<'a> BlockCtx<'a> {
    /// The shared part of a block's thread contexts.
    ///
    /// # Safety
    /// Every pointer in `args` addresses memory that stays valid for the whole launch and holds
    /// the described array or value.
    pub unsafe fn new(
        args: &'a [ArgView<'a>],
        block_idx: Dim3,
        block_dim: Dim3,
        grid_dim: Dim3,
        warp_size: u32,
    ) -> BlockCtx<'a> {
        BlockCtx {
            args,
            block_idx,
            block_dim,
            grid_dim,
            warp_size,
        }
    }
}

/// The context a simulated thread runs with (Numba's `cuda.threadIdx`, `cuda.grid(2)`,
/// `cuda.shared.array`, `cuda.syncthreads()` ...). Small (a thread's index and two references),
/// as every waiting thread keeps one.
pub struct ThreadCtx<'a> {
    ops: &'a dyn ThreadOps,
    block: &'a BlockCtx<'a>,
    thread_idx: Dim3,
}

impl std::fmt::Debug for ThreadCtx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadCtx")
            .field("thread_idx", &self.thread_idx)
            .field("block_idx", &self.block.block_idx)
            .finish_non_exhaustive()
    }
}

impl<'a> ThreadCtx<'a> {
    /// A context for thread `thread_idx` of `block`, which `ops` runs.
    ///
    /// # Safety
    /// `ops` hands out shared memory valid for the block.
    pub unsafe fn new(
        ops: &'a dyn ThreadOps,
        block: &'a BlockCtx<'a>,
        thread_idx: Dim3,
    ) -> ThreadCtx<'a> {
        ThreadCtx {
            ops,
            block,
            thread_idx,
        }
    }

    /// `threadIdx`.
    pub fn thread_idx(&self) -> Dim3 {
        self.thread_idx
    }

    /// `blockIdx`.
    pub fn block_idx(&self) -> Dim3 {
        self.block.block_idx
    }

    /// `blockDim`.
    pub fn block_dim(&self) -> Dim3 {
        self.block.block_dim
    }

    /// `gridDim`.
    pub fn grid_dim(&self) -> Dim3 {
        self.block.grid_dim
    }

    /// Numba's `cuda.grid(1)`: the global x index.
    pub fn grid1(&self) -> usize {
        self.block.block_idx.x as usize * self.block.block_dim.x as usize
            + self.thread_idx.x as usize
    }

    /// Numba's `cuda.grid(2)`: the global (x, y) index.
    pub fn grid2(&self) -> (usize, usize) {
        (
            self.grid1(),
            self.block.block_idx.y as usize * self.block.block_dim.y as usize
                + self.thread_idx.y as usize,
        )
    }

    /// Numba's `cuda.grid(3)`.
    pub fn grid3(&self) -> (usize, usize, usize) {
        let (x, y) = self.grid2();
        (
            x,
            y,
            self.block.block_idx.z as usize * self.block.block_dim.z as usize
                + self.thread_idx.z as usize,
        )
    }

    /// Numba's `cuda.gridsize(1)`: threads in the grid along x.
    pub fn gridsize1(&self) -> usize {
        self.block.grid_dim.x as usize * self.block.block_dim.x as usize
    }

    /// Numba's `cuda.gridsize(2)`.
    pub fn gridsize2(&self) -> (usize, usize) {
        (
            self.gridsize1(),
            self.block.grid_dim.y as usize * self.block.block_dim.y as usize,
        )
    }

    /// The thread's linear index within its block (x fastest).
    pub fn linear_thread_idx(&self) -> u32 {
        self.thread_idx.x
            + self.thread_idx.y * self.block.block_dim.x
            + self.thread_idx.z * self.block.block_dim.x * self.block.block_dim.y
    }

    /// Threads per warp (32) or wavefront (64) on this device.
    pub fn warp_size(&self) -> u32 {
        self.block.warp_size
    }

    /// The thread's lane within its warp.
    pub fn lane_id(&self) -> u32 {
        self.linear_thread_idx() % self.block.warp_size.max(1)
    }

    /// The thread's warp within its block.
    pub fn warp_id(&self) -> u32 {
        self.linear_thread_idx() / self.block.warp_size.max(1)
    }

    /// Number of arguments.
    pub fn arg_count(&self) -> usize {
        self.block.args.len()
    }

    fn arg_fault(&self, index: usize, wanted: String) {
        let found = match self.block.args.get(index) {
            Some(arg) => arg.describe(),
            None => format!(
                "nothing (the launch has {} arguments)",
                self.block.args.len()
            ),
        };
        self.ops.fault(format!(
            "argument {index} was used as {wanted} but is {found}"
        ));
    }

    /// Argument `index` as an array of `T` (a device array, mapped array or transferred host
    /// array). A wrong index or type is a fault, and the returned array is empty.
    pub fn array<T: Element>(&self, index: usize) -> GlobalArray<'_, T> {
        match self.block.args.get(index) {
            Some(ArgView::Array {
                base,
                shape,
                strides,
                elem,
                ..
            }) if *elem == TypeId::of::<T>() => {
                // SAFETY: the executor built the view from an argument of this element type,
                // valid for the launch (`BlockCtx::new`'s contract).
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
        match self.block.args.get(index) {
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
        match self.block.args.get(index) {
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
    /// the same for every thread; a thread's n-th call returns the block's n-th buffer (Numba's
    /// simulator goes by the call's source line instead, and a GPU by the declaration: a call
    /// in a loop takes a new buffer each time here, so declare such arrays before the loop).
    /// Zero-initialised at block start by the simulator (undefined on GPUs).
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
    /// Numba's `cuda.shared.array(0, dtype)`), sized by [`LaunchConfig::shared_bytes`](gpu_mem_core::kernel::LaunchConfig).
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
        self.ops.barrier(
            BarrierScope::Block,
            Fence::Local,
            u64::MAX,
            Site::rust(Location::caller()),
        );
    }

    /// ROC's `barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)`: a block barrier that also
    /// orders global memory for [`Fence::Global`].
    #[track_caller]
    pub fn barrier(&self, fence: Fence) {
        self.ops.barrier(
            BarrierScope::Block,
            fence,
            u64::MAX,
            Site::rust(Location::caller()),
        );
    }

    /// Waits for the threads of the caller's warp (ROC's `wavebarrier()`, CUDA's `__syncwarp()`).
    #[track_caller]
    pub fn wavebarrier(&self) {
        self.ops.barrier(
            BarrierScope::Warp,
            Fence::Local,
            u64::MAX,
            Site::rust(Location::caller()),
        );
    }

    /// Numba's `syncthreads_count(predicate)`: a block barrier returning how many threads of
    /// the block passed `true`.
    #[track_caller]
    pub fn syncthreads_count(&self, predicate: bool) -> u32 {
        let site = Site::rust(Location::caller());
        let count = self.ops.collective(
            Collective::SyncCount,
            u64::MAX,
            predicate.into(),
            0,
            0,
            site,
        );
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// Numba's `syncthreads_and(predicate)`: a block barrier returning whether every thread
    /// passed `true`.
    #[track_caller]
    pub fn syncthreads_and(&self, predicate: bool) -> bool {
        let site = Site::rust(Location::caller());
        self.ops
            .collective(Collective::SyncAnd, u64::MAX, predicate.into(), 0, 0, site)
            != 0
    }

    /// Numba's `syncthreads_or(predicate)`: a block barrier returning whether some thread
    /// passed `true`.
    #[track_caller]
    pub fn syncthreads_or(&self, predicate: bool) -> bool {
        let site = Site::rust(Location::caller());
        self.ops
            .collective(Collective::SyncOr, u64::MAX, predicate.into(), 0, 0, site)
            != 0
    }

    #[track_caller]
    fn shuffle<T: Element>(&self, op: Collective, mask: u64, value: T, arg: i64) -> T {
        let site = Site::rust(Location::caller());
        let Some(bits) = shuffle_bits(self, op, value) else {
            return value;
        };
        let out = self
            .ops
            .collective(op, mask, bits, arg, self.block.warp_size, site);
        from_shuffle_bits(out)
    }

    /// `__shfl_sync(mask, value, src_lane)` (Numba's `shfl_sync`): the value of lane
    /// `src_lane` of the caller's warp.
    #[track_caller]
    pub fn shfl_sync<T: Element>(&self, mask: u64, value: T, src_lane: u32) -> T {
        self.shuffle(Collective::Shfl, mask, value, src_lane.into())
    }

    /// `__shfl_up_sync`: the value of lane `lane - delta` (own value below lane `delta`).
    #[track_caller]
    pub fn shfl_up_sync<T: Element>(&self, mask: u64, value: T, delta: u32) -> T {
        self.shuffle(Collective::ShflUp, mask, value, delta.into())
    }

    /// `__shfl_down_sync`: the value of lane `lane + delta` (own value past the warp's end).
    #[track_caller]
    pub fn shfl_down_sync<T: Element>(&self, mask: u64, value: T, delta: u32) -> T {
        self.shuffle(Collective::ShflDown, mask, value, delta.into())
    }

    /// `__shfl_xor_sync`: the value of lane `lane ^ lane_mask`.
    #[track_caller]
    pub fn shfl_xor_sync<T: Element>(&self, mask: u64, value: T, lane_mask: u32) -> T {
        self.shuffle(Collective::ShflXor, mask, value, lane_mask.into())
    }

    /// `__ballot_sync(mask, predicate)`: bit `l` is set when lane `l` passed `true`.
    #[track_caller]
    pub fn ballot_sync(&self, mask: u64, predicate: bool) -> u64 {
        let site = Site::rust(Location::caller());
        self.ops.collective(
            Collective::Ballot,
            mask,
            predicate.into(),
            0,
            self.block.warp_size,
            site,
        )
    }

    /// `__all_sync(mask, predicate)`: whether every participating lane passed `true`.
    #[track_caller]
    pub fn all_sync(&self, mask: u64, predicate: bool) -> bool {
        let site = Site::rust(Location::caller());
        self.ops.collective(
            Collective::All,
            mask,
            predicate.into(),
            0,
            self.block.warp_size,
            site,
        ) != 0
    }

    /// `__any_sync(mask, predicate)`: whether some participating lane passed `true`.
    #[track_caller]
    pub fn any_sync(&self, mask: u64, predicate: bool) -> bool {
        let site = Site::rust(Location::caller());
        self.ops.collective(
            Collective::Any,
            mask,
            predicate.into(),
            0,
            self.block.warp_size,
            site,
        ) != 0
    }

    /// Lets the other threads of the block run (a spin-wait hint, CUDA's `__nanosleep`).
    pub fn nanosleep(&self) {
        self.ops.progress();
    }

    /// Tells the executor an atomic operation is about to run (forward progress).
    pub(crate) fn progress(&self) {
        self.ops.progress();
    }

    /// Records a fault (used by the array types).
    pub(crate) fn fault(&self, message: String) {
        self.ops.fault(message);
    }
}

/// `value` as a shuffle moves it (its bytes in the low end of a word); `None` after recording a
/// fault for a type of more than 8 bytes.
pub(crate) fn shuffle_bits<T: Element>(
    ctx: &ThreadCtx<'_>,
    op: Collective,
    value: T,
) -> Option<u64> {
    let size = std::mem::size_of::<T>();
    if size > 8 {
        ctx.fault(format!(
            "{} moves values of at most 8 bytes; {} has {size}",
            op.name(),
            T::dtype()
        ));
        return None;
    }
    let mut bits = [0u8; 8];
    bits[..size].copy_from_slice(bytemuck::bytes_of(&value));
    Some(u64::from_ne_bytes(bits))
}

/// The value a shuffle delivered in `bits` (see [`shuffle_bits`]).
pub(crate) fn from_shuffle_bits<T: Element>(bits: u64) -> T {
    let size = std::mem::size_of::<T>().min(8);
    bytemuck::pod_read_unaligned(&bits.to_ne_bytes()[..size])
}
