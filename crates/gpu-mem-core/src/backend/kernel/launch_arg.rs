//! [`LaunchArg`]: one kernel argument as a backend receives it.

use crate::backend::types::DevicePtr;
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

    /// The address a pointer parameter (`T*`, `const T*`, `T* __restrict__`) receives: an
    /// array's first element, or a record's (or raw pointer's) address. The array must be one
    /// dense block that starts at its first element (C or F order, no negative or broadcast
    /// stride), since the kernel indexes it from there; a scalar has no address. The error says
    /// why not.
    pub fn pointer_address(&self) -> Result<DevicePtr, String> {
        match self {
            LaunchArg::Array {
                ptr,
                shape,
                strides,
                min_offset,
                span_len,
                ..
            } => {
                let count: usize = shape.iter().product();
                if count == 0 || (*span_len == count && *min_offset == 0) {
                    Ok(*ptr)
                } else {
                    Err(format!(
                        "a pointer parameter receives the address of the array's first element, so the array must be contiguous and start there (C or F order); this view of shape {} has strides {} (elements): pass a contiguous copy",
                        crate::error::fmt_dims(shape),
                        crate::error::fmt_dims(strides)
                    ))
                }
            }
            LaunchArg::Record { ptr, .. } => Ok(*ptr),
            LaunchArg::Scalar { dtype, .. } => Err(format!(
                "a scalar {dtype} is passed by value, and has no address for a pointer parameter"
            )),
        }
    }
}

/// `Ok` when every array or record argument of a launch on `device` is memory that device may
/// reach: memory `owner_of` does not place on another device, or of a device `enabled` says it
/// enabled peer access to. The backends that know their allocations' owners call it before a
/// launch (a kernel given unreachable memory faults on the GPU).
pub fn check_peer_arguments(
    kernel: &str,
    device: usize,
    args: &[LaunchArg],
    owner_of: impl Fn(u64) -> Option<usize>,
    enabled: impl Fn(usize) -> bool,
) -> crate::Result<()> {
    for (index, arg) in args.iter().enumerate() {
        let ptr = match arg {
            LaunchArg::Array { ptr, .. } | LaunchArg::Record { ptr, .. } => *ptr,
            LaunchArg::Scalar { .. } => continue,
        };
        if ptr.0 == 0 {
            continue;
        }
        if let Some(owner) = owner_of(ptr.0)
            && owner != device
            && !enabled(owner)
        {
            return Err(crate::Error::InvalidLaunch {
                kernel: kernel.to_string(),
                reason: format!(
                    "argument {index} is memory of device {owner}, and peer access from device {device} to it is not enabled (Device::enable_peer_access)"
                ),
            });
        }
    }
    Ok(())
}
