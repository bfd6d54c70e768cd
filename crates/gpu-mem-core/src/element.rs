//! Element types that can live in device memory.
//!
//! Any [`bytemuck::Pod`] type is an element: it has no padding, no invalid bit patterns and no
//! pointers, so copying its bytes between host and device is always sound. The numeric
//! primitives are the common case; `#[derive(Pod, Zeroable)]` structs play the role of Numba's
//! structured (record) dtypes.

use bytemuck::Pod;
use std::fmt::Debug;

/// A type whose values can be stored in device arrays and copied byte for byte.
pub trait Element: Pod + Debug + Send + Sync + 'static {
    /// The name used in messages (`f32`, `i64`, `my_crate::Point`), Numba's `dtype`.
    fn dtype() -> &'static str {
        std::any::type_name::<Self>()
    }

    /// Size of one element in bytes (Numba's `itemsize`).
    fn itemsize() -> usize {
        std::mem::size_of::<Self>()
    }
}

impl<T: Pod + Debug + Send + Sync + 'static> Element for T {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sizes() {
        assert_eq!(<f32 as Element>::dtype(), "f32");
        assert_eq!(<i64 as Element>::itemsize(), 8);
        assert_eq!(<[u16; 3] as Element>::itemsize(), 6);
    }
}
