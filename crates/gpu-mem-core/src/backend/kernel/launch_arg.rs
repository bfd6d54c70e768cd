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

    /// The argument as the C parameter a compiled kernel declares, given that parameter's size
    /// in bytes where the backend knows it: an array goes as its first element's address
    /// ([`LaunchArg::pointer_address`]) to an 8-byte parameter (a pointer), and as a
    /// `gm_array<T, N>` to one of `8 + 16 N` bytes (or when the size is unknown); the rest as
    /// [`LaunchArg::c_parameter`]. Bytes and C alignment; the error says what is malformed.
    pub fn c_parameter_for(&self, size: Option<usize>) -> Result<(Vec<u8>, usize), String> {
        match self {
            LaunchArg::Array { shape, .. } if !shape.is_empty() && size == Some(8) => {
                let ptr = self.pointer_address()?;
                Ok((ptr.0.to_ne_bytes().to_vec(), 8))
            }
            _ => self.c_parameter(),
        }
    }

    /// The argument as a C kernel parameter of the portable prelude, what GPU backends pass:
    /// its bytes and C alignment. An `Array` is a `gm_array<T, N>` by value (the 8-byte data
    /// pointer, then `N` extents and `N` strides in elements as `long long`), 8-byte aligned; a
    /// 0-d array (there is no `gm_array<T, 0>`) is its data pointer alone, for a `T*`
    /// parameter. A `Record` is its pointer; a `Scalar` its bytes, aligned to the largest power
    /// of two up to 8 dividing its size. The error says what is malformed.
    pub fn c_parameter(&self) -> Result<(Vec<u8>, usize), String> {
        match self {
            LaunchArg::Array {
                ptr,
                shape,
                strides,
                ..
            } => {
                if shape.len() != strides.len() {
                    return Err(format!(
                        "{} shape entries but {} strides",
                        shape.len(),
                        strides.len()
                    ));
                }
                let mut bytes = Vec::with_capacity(8 + 16 * shape.len());
                bytes.extend_from_slice(&ptr.0.to_ne_bytes());
                for &extent in shape {
                    let extent = i64::try_from(extent)
                        .map_err(|_| format!("extent {extent} does not fit a 64-bit long long"))?;
                    bytes.extend_from_slice(&extent.to_ne_bytes());
                }
                for &stride in strides {
                    let stride = i64::try_from(stride)
                        .map_err(|_| format!("stride {stride} does not fit a 64-bit long long"))?;
                    bytes.extend_from_slice(&stride.to_ne_bytes());
                }
                Ok((bytes, 8))
            }
            LaunchArg::Record { ptr, .. } => Ok((ptr.0.to_ne_bytes().to_vec(), 8)),
            LaunchArg::Scalar { bytes, .. } => {
                if bytes.is_empty() {
                    return Err("a zero-sized value cannot be a kernel parameter".to_string());
                }
                Ok((bytes.clone(), 1 << bytes.len().trailing_zeros().min(3)))
            }
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

#[cfg(test)]
mod tests {
    use super::LaunchArg;
    use crate::backend::DevicePtr;
    use std::any::TypeId;

    fn array(shape: Vec<usize>, strides: Vec<isize>) -> LaunchArg {
        LaunchArg::Array {
            ptr: DevicePtr(0x1000),
            shape,
            strides,
            min_offset: 0,
            span_len: 0,
            itemsize: 4,
            elem: TypeId::of::<f32>(),
            dtype: "f32",
        }
    }

    fn scalar(bytes: Vec<u8>) -> LaunchArg {
        LaunchArg::Scalar {
            bytes,
            elem: TypeId::of::<u8>(),
            dtype: "bytes",
        }
    }

    fn words(bytes: &[u8]) -> Vec<i64> {
        bytes
            .chunks_exact(8)
            .map(|c| i64::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn arrays_are_gm_array_structs_by_value() {
        let (bytes, align) = array(vec![3, 5], vec![5, -1]).c_parameter().unwrap();
        assert_eq!(align, 8);
        assert_eq!(words(&bytes), vec![0x1000, 3, 5, 5, -1]);
        // 0-d: the pointer alone.
        let (bytes, align) = array(vec![], vec![]).c_parameter().unwrap();
        assert_eq!((words(&bytes), align), (vec![0x1000], 8));
    }

    #[test]
    fn scalars_align_to_their_size_up_to_8() {
        for (len, align) in [(1, 1), (2, 2), (4, 4), (8, 8), (12, 4), (16, 8), (6, 2)] {
            assert_eq!(
                scalar(vec![7; len]).c_parameter().unwrap().1,
                align,
                "{len}"
            );
        }
    }

    #[test]
    fn malformed_arguments_say_what_is_wrong() {
        let e = array(vec![2, 2], vec![1]).c_parameter().unwrap_err();
        assert!(e.contains("2 shape entries but 1 strides"), "{e}");
        let e = array(vec![usize::MAX], vec![1]).c_parameter().unwrap_err();
        assert!(e.contains("does not fit"), "{e}");
        let e = scalar(vec![]).c_parameter().unwrap_err();
        assert!(e.contains("zero-sized"), "{e}");
    }
}
