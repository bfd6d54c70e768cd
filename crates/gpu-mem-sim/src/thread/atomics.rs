//! Atomic read-modify-write on device and shared memory from simulated threads: CUDA's
//! `atomicAdd` ... family (Numba's `cuda.atomic.*`) with the same names and types as the
//! prelude's host branch. Blocks run in parallel, so these are real atomic operations.

use gpu_mem_core::Element;
use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

mod sealed {
    pub trait Sealed {}
}

/// Element types with atomic add, sub, exchange, compare-and-swap, min and max (`i32`, `u32`,
/// `i64`, `u64`, `f32`, `f64`).
pub trait AtomicElement: Element + PartialOrd + sealed::Sealed {
    /// Atomically replaces the value at `ptr` by `f(old)`; returns `old`.
    ///
    /// # Safety
    /// `ptr` is valid and aligned for `Self`, and every concurrent access to it is atomic.
    unsafe fn atomic_update(ptr: *mut Self, f: impl Fn(Self) -> Self) -> Self;

    /// Atomically adds `value` at `ptr`; returns the old value.
    ///
    /// # Safety
    /// As [`AtomicElement::atomic_update`].
    unsafe fn atomic_add(ptr: *mut Self, value: Self) -> Self;

    /// `self - value` with the wrapping of CUDA's integer atomics.
    fn sub(self, value: Self) -> Self;
}

/// Integer element types with atomic and, or and xor (`i32`, `u32`, `i64`, `u64`).
pub trait AtomicInteger:
    AtomicElement
    + std::ops::BitAnd<Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitXor<Output = Self>
{
}

/// An atomic integer type of the same size as `T`, for compare-and-swap on `T`'s bits.
trait Bits: Sized {
    type Raw: bytemuck::Pod;
    fn load(&self) -> Self::Raw;
    fn swap_if(&self, current: Self::Raw, new: Self::Raw) -> Result<Self::Raw, Self::Raw>;
}

macro_rules! bits {
    ($($atomic:ty => $raw:ty),*) => {$(
        impl Bits for $atomic {
            type Raw = $raw;
            fn load(&self) -> $raw {
                <$atomic>::load(self, Ordering::Acquire)
            }
            fn swap_if(&self, current: $raw, new: $raw) -> Result<$raw, $raw> {
                self.compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Acquire)
            }
        }
    )*};
}
bits!(AtomicU32 => u32, AtomicU64 => u64);

/// Compare-and-swap loop applying `f` to the value at `ptr`; returns the old value.
///
/// # Safety
/// `ptr` is valid and aligned for `T` (and so for `A`, which has `T`'s size and alignment), and
/// every concurrent access to it is atomic.
unsafe fn update_bits<T: bytemuck::Pod, A: Bits>(ptr: *mut T, f: impl Fn(T) -> T) -> T {
    // SAFETY: `A` has the size and alignment of `T` (checked by the macro's choice of `A`), the
    // caller guarantees the pointer, and `A` is an atomic integer type valid for any bits.
    let atomic = unsafe { &*ptr.cast::<A>() };
    let mut current = atomic.load();
    loop {
        let old: T = bytemuck::cast(current);
        let new: A::Raw = bytemuck::cast(f(old));
        match atomic.swap_if(current, new) {
            Ok(_) => return old,
            Err(actual) => current = actual,
        }
    }
}

macro_rules! integer_atomics {
    ($($t:ty => $atomic:ty, $bits:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl AtomicElement for $t {
            unsafe fn atomic_update(ptr: *mut $t, f: impl Fn($t) -> $t) -> $t {
                // SAFETY: the caller's contract; `$bits` has the size and alignment of `$t`.
                unsafe { update_bits::<$t, $bits>(ptr, f) }
            }
            unsafe fn atomic_add(ptr: *mut $t, value: $t) -> $t {
                // SAFETY: the caller guarantees a valid, aligned pointer accessed only atomically.
                unsafe { <$atomic>::from_ptr(ptr) }.fetch_add(value, Ordering::AcqRel)
            }
            fn sub(self, value: $t) -> $t {
                self.wrapping_sub(value)
            }
        }
        impl AtomicInteger for $t {}
    )*};
}
integer_atomics!(
    i32 => AtomicI32, AtomicU32,
    u32 => AtomicU32, AtomicU32,
    i64 => AtomicI64, AtomicU64,
    u64 => AtomicU64, AtomicU64
);

macro_rules! float_atomics {
    ($($t:ty => $bits:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl AtomicElement for $t {
            unsafe fn atomic_update(ptr: *mut $t, f: impl Fn($t) -> $t) -> $t {
                // SAFETY: the caller's contract; the float's bits live in an atomic of its size.
                unsafe { update_bits::<$t, $bits>(ptr, f) }
            }
            unsafe fn atomic_add(ptr: *mut $t, value: $t) -> $t {
                // SAFETY: as in `atomic_update`.
                unsafe { update_bits::<$t, $bits>(ptr, |old| old + value) }
            }
            fn sub(self, value: $t) -> $t {
                self - value
            }
        }
    )*};
}
float_atomics!(f32 => AtomicU32, f64 => AtomicU64);

/// The atomic methods of an array type with a `fn atomic_slot(&self, index) -> Option<*mut T>`
/// (`None` after recording an out-of-bounds fault). Out-of-bounds atomics return zero.
macro_rules! atomic_methods {
    ($index:ty) => {
        fn atomic_with<R: bytemuck::Zeroable>(
            &self,
            index: $index,
            op: impl FnOnce(*mut T) -> R,
        ) -> R {
            self.ctx.progress();
            match self.atomic_slot(index) {
                Some(ptr) => op(ptr),
                None => R::zeroed(),
            }
        }

        /// `atomicAdd` (Numba's `cuda.atomic.add`): adds `value`, returns the old value.
        pub fn atomic_add(&self, index: $index, value: T) -> T
        where
            T: $crate::thread::AtomicElement,
        {
            self.atomic_with(index, |p| {
                // SAFETY: the slot was bounds-checked and is aligned for `T`; mixing atomics with
                // plain accesses of one element is the kernel's responsibility, as on a GPU (the
                // same holds for every atomic below).
                unsafe { T::atomic_add(p, value) }
            })
        }

        /// `atomicSub` (Numba's `cuda.atomic.sub`): subtracts `value`, returns the old value.
        pub fn atomic_sub(&self, index: $index, value: T) -> T
        where
            T: $crate::thread::AtomicElement,
        {
            // SAFETY: as in `atomic_add`.
            self.atomic_with(index, |p| unsafe {
                T::atomic_update(p, |old| old.sub(value))
            })
        }

        /// `atomicExch` (Numba's `cuda.atomic.exch`): stores `value`, returns the old value.
        pub fn atomic_exch(&self, index: $index, value: T) -> T
        where
            T: $crate::thread::AtomicElement,
        {
            // SAFETY: as in `atomic_add`.
            self.atomic_with(index, |p| unsafe { T::atomic_update(p, |_| value) })
        }

        /// `atomicCAS` (Numba's `cuda.atomic.compare_and_swap`): stores `value` if the element
        /// equals `compare` (bit for bit); returns the old value.
        pub fn atomic_cas(&self, index: $index, compare: T, value: T) -> T
        where
            T: $crate::thread::AtomicElement,
        {
            let same = move |old: T| bytemuck::bytes_of(&old) == bytemuck::bytes_of(&compare);
            // SAFETY: as in `atomic_add`.
            self.atomic_with(index, |p| unsafe {
                T::atomic_update(p, |old| if same(old) { value } else { old })
            })
        }

        /// `atomicMax` (Numba's `cuda.atomic.max`): stores the larger value, returns the old.
        pub fn atomic_max(&self, index: $index, value: T) -> T
        where
            T: $crate::thread::AtomicElement,
        {
            // SAFETY: as in `atomic_add`.
            self.atomic_with(index, |p| unsafe {
                T::atomic_update(p, |old| if value > old { value } else { old })
            })
        }

        /// `atomicMin` (Numba's `cuda.atomic.min`): stores the smaller value, returns the old.
        pub fn atomic_min(&self, index: $index, value: T) -> T
        where
            T: $crate::thread::AtomicElement,
        {
            // SAFETY: as in `atomic_add`.
            self.atomic_with(index, |p| unsafe {
                T::atomic_update(p, |old| if value < old { value } else { old })
            })
        }

        /// `atomicAnd` (Numba's `cuda.atomic.and_`); returns the old value.
        pub fn atomic_and(&self, index: $index, value: T) -> T
        where
            T: $crate::thread::AtomicInteger,
        {
            // SAFETY: as in `atomic_add`.
            self.atomic_with(index, |p| unsafe { T::atomic_update(p, |old| old & value) })
        }

        /// `atomicOr` (Numba's `cuda.atomic.or_`); returns the old value.
        pub fn atomic_or(&self, index: $index, value: T) -> T
        where
            T: $crate::thread::AtomicInteger,
        {
            // SAFETY: as in `atomic_add`.
            self.atomic_with(index, |p| unsafe { T::atomic_update(p, |old| old | value) })
        }

        /// `atomicXor` (Numba's `cuda.atomic.xor`); returns the old value.
        pub fn atomic_xor(&self, index: $index, value: T) -> T
        where
            T: $crate::thread::AtomicInteger,
        {
            // SAFETY: as in `atomic_add`.
            self.atomic_with(index, |p| unsafe { T::atomic_update(p, |old| old ^ value) })
        }
    };
}

/// `atomicInc` / `atomicDec` for arrays of `u32`, as CUDA defines them.
macro_rules! atomic_inc_dec {
    ($index:ty) => {
        /// `atomicInc` (Numba's `cuda.atomic.inc`): `old >= limit ? 0 : old + 1`; returns old.
        pub fn atomic_inc(&self, index: $index, limit: u32) -> u32 {
            // SAFETY: as in `atomic_add`.
            self.atomic_with(index, |p| unsafe {
                <u32 as $crate::thread::AtomicElement>::atomic_update(p, |old| {
                    if old >= limit { 0 } else { old + 1 }
                })
            })
        }

        /// `atomicDec` (Numba's `cuda.atomic.dec`): `old == 0 || old > limit ? limit : old - 1`.
        pub fn atomic_dec(&self, index: $index, limit: u32) -> u32 {
            // SAFETY: as in `atomic_add`.
            self.atomic_with(index, |p| unsafe {
                <u32 as $crate::thread::AtomicElement>::atomic_update(p, |old| {
                    if old == 0 || old > limit {
                        limit
                    } else {
                        old - 1
                    }
                })
            })
        }
    };
}

pub(crate) use {atomic_inc_dec, atomic_methods};
