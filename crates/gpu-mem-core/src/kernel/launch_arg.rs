//! [`LaunchArg`]: one kernel argument as a backend receives it.

use crate::backend::DevicePtr;
use std::any::TypeId;

/// A kernel argument, type-erased for the [`Backend`](crate::Backend).
///
/// GPU backends pass an `Array` as the prelude's `gm_array<T, N>` by value (`data` pointer,
/// then `shape[N]` and `strides[N]` as 64-bit integers, strides in elements), a `Record` as a
/// `T*`, and a `Scalar` as its bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum LaunchArg {
    /// An n-d array in device (or mapped) memory.
    Array {
        /// Device address of the first logical element (null for empty arrays).
        ptr: DevicePtr,
        /// Shape.
        shape: Vec<usize>,
        /// Strides in elements.
        strides: Vec<isize>,
        /// Lowest element offset reachable from `ptr` (≤ 0), for bounds checks.
        min_offset: isize,
        /// Elements between the lowest and highest reachable offsets (0 when empty).
        span_len: usize,
        /// Element size in bytes.
        itemsize: usize,
        /// Element type, for the simulator's checks.
        elem: TypeId,
        /// Element type name.
        dtype: &'static str,
    },
    /// One value in device memory (a `DeviceRecord`).
    Record {
        /// Its device address.
        ptr: DevicePtr,
        /// Its size.
        itemsize: usize,
        /// Its type.
        elem: TypeId,
        /// Its type name.
        dtype: &'static str,
    },
    /// A value passed by copy.
    Scalar {
        /// The value's bytes.
        bytes: Vec<u8>,
        /// Its type.
        elem: TypeId,
        /// Its type name.
        dtype: &'static str,
    },
}

impl LaunchArg {
    /// A short description for messages: `array of f32 (3, 4)`, `scalar i32`.
    pub fn describe(&self) -> String {
        match self {
            LaunchArg::Array { dtype, shape, .. } => {
                format!("array of {dtype} {}", crate::error::fmt_dims(shape))
            }
            LaunchArg::Record { dtype, .. } => format!("record {dtype}"),
            LaunchArg::Scalar { dtype, .. } => format!("scalar {dtype}"),
        }
    }
}
