//! Atomic read-modify-write on device memory from simulated threads (Numba's
//! `cuda.atomic.add`, `max`, `min`). Blocks run in parallel, so these are real atomic
//! operations on the element's memory.

use std::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering};

mod sealed {
    pub trait Sealed {}
}

/// Element types with atomic add, max and min (`i32`, `u32`, `i64`, `u64`, `f32`, `f64`).
pub trait AtomicElement: crate::Element + sealed::Sealed {
    /// Atomically adds `value` at `ptr`; returns the old value.
    ///
    /// # Safety
    /// `ptr` is valid and aligned for `Self`, and every concurrent access to it is atomic.
    unsafe fn atomic_add(ptr: *mut Self, value: Self) -> Self;
    /// Atomically stores the larger of the current value and `value`; returns the old value.
    ///
    /// # Safety
    /// As [`AtomicElement::atomic_add`].
    unsafe fn atomic_max(ptr: *mut Self, value: Self) -> Self;
    /// Atomically stores the smaller of the current value and `value`; returns the old value.
    ///
    /// # Safety
    /// As [`AtomicElement::atomic_add`].
    unsafe fn atomic_min(ptr: *mut Self, value: Self) -> Self;
}

macro_rules! integer_atomics {
    ($($t:ty => $atomic:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl AtomicElement for $t {
            unsafe fn atomic_add(ptr: *mut $t, value: $t) -> $t {
                // SAFETY: the caller guarantees a valid, aligned pointer accessed only atomically.
                unsafe { <$atomic>::from_ptr(ptr) }.fetch_add(value, Ordering::AcqRel)
            }
            unsafe fn atomic_max(ptr: *mut $t, value: $t) -> $t {
                // SAFETY: as in `atomic_add`.
                unsafe { <$atomic>::from_ptr(ptr) }.fetch_max(value, Ordering::AcqRel)
            }
            unsafe fn atomic_min(ptr: *mut $t, value: $t) -> $t {
                // SAFETY: as in `atomic_add`.
                unsafe { <$atomic>::from_ptr(ptr) }.fetch_min(value, Ordering::AcqRel)
            }
        }
    )*};
}

integer_atomics!(i32 => AtomicI32, u32 => AtomicU32, i64 => AtomicI64, u64 => AtomicU64);

macro_rules! float_atomics {
    ($($t:ty => $atomic:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl AtomicElement for $t {
            unsafe fn atomic_add(ptr: *mut $t, value: $t) -> $t {
                // SAFETY: as for the integers; the float's bits live in an atomic of its size.
                unsafe { update_bits::<$t, $atomic>(ptr, |old| old + value) }
            }
            unsafe fn atomic_max(ptr: *mut $t, value: $t) -> $t {
                // SAFETY: as in `atomic_add`.
                unsafe { update_bits::<$t, $atomic>(ptr, |old| old.max(value)) }
            }
            unsafe fn atomic_min(ptr: *mut $t, value: $t) -> $t {
                // SAFETY: as in `atomic_add`.
                unsafe { update_bits::<$t, $atomic>(ptr, |old| old.min(value)) }
            }
        }
    )*};
}

float_atomics!(f32 => AtomicU32, f64 => AtomicU64);

/// The bit-level atomic a float is updated through.
trait Bits: Sized {
    type Raw: Copy;
    fn load(&self) -> Self::Raw;
    fn swap_if(&self, current: Self::Raw, new: Self::Raw) -> Result<Self::Raw, Self::Raw>;
}

impl Bits for AtomicU32 {
    type Raw = u32;
    fn load(&self) -> u32 {
        self.load(Ordering::Acquire)
    }
    fn swap_if(&self, current: u32, new: u32) -> Result<u32, u32> {
        self.compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Acquire)
    }
}

impl Bits for AtomicU64 {
    type Raw = u64;
    fn load(&self) -> u64 {
        self.load(Ordering::Acquire)
    }
    fn swap_if(&self, current: u64, new: u64) -> Result<u64, u64> {
        self.compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Acquire)
    }
}

/// Compare-and-swap loop applying `f` to the float at `ptr`; returns the old value.
///
/// # Safety
/// `ptr` is valid and aligned for `T` (and so for `A`, which has `T`'s size and alignment), and
/// every concurrent access to it is atomic.
unsafe fn update_bits<T, A>(ptr: *mut T, f: impl Fn(T) -> T) -> T
where
    T: bytemuck::Pod,
    A: Bits,
    A::Raw: bytemuck::Pod,
{
    // SAFETY: `A` has the size and alignment of `T` (u32/f32, u64/f64), and the caller
    // guarantees the pointer; `A` is an atomic integer type, valid for any bits.
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
