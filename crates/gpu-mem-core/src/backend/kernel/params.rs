//! The byte layout of kernel parameters, shared by the GPU backends: each [`LaunchArg`] as the C
//! parameter the compiled kernel declares, for `cuLaunchKernel`'s parameter buffers (CUDA) and
//! the kernarg segment (ROC).
//!
//! # Layout
//!
//! * `Array` → its first element's address for a pointer parameter (8 bytes; the array must be
//!   contiguous from there), else the prelude's `gm_array<T, N>` by value: the 8-byte data
//!   pointer, then `shape[N]`, then `strides[N]` in elements, all 64-bit (`8 + 16 N` bytes,
//!   8-byte aligned; a 0-d array is the pointer alone).
//! * `Record` → a `T*`: the 8-byte device address.
//! * `Scalar` → its bytes unchanged, aligned to the largest power of two (at most 8) dividing
//!   its size.
//!
//! Which form an array takes depends on the compiled parameter's size where the backend knows
//! it (8 bytes: a pointer); where it does not, `gm_array`. A malformed argument (strides that do
//! not match the shape, a zero-sized scalar, a dimension that does not fit `long long`) is
//! [`Error::InvalidLaunch`] naming the kernel and the argument ([`encode_parameters`]).

use super::launch_arg::LaunchArg;
use crate::error::{Error, Result};

/// One argument as a C kernel parameter: its exact bytes and its C alignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CParameter {
    /// What the kernel receives.
    pub bytes: Vec<u8>,
    /// The parameter's alignment in bytes: 1, 2, 4 or 8.
    pub alignment: usize,
}

/// A launch's arguments for `kernel` (the name used in errors) as C parameters
/// ([`LaunchArg::c_parameter_for`]), `size_of(index)` giving the compiled parameter's size where
/// the backend knows it. A malformed argument is [`Error::InvalidLaunch`] naming the argument.
pub fn encode_parameters(
    kernel: &str,
    args: &[LaunchArg],
    size_of: impl Fn(usize) -> Option<usize>,
) -> Result<Vec<CParameter>> {
    let mut parameters = Vec::with_capacity(args.len());
    encode_parameters_at(
        kernel,
        args,
        size_of,
        |index| args[index].address(),
        |bytes, alignment| {
            parameters.push(CParameter {
                bytes: bytes.to_vec(),
                alignment,
            })
        },
    )?;
    Ok(parameters)
}

/// As [`encode_parameters`], with `address_of(index)` in place of each array's or record's
/// device address (a backend whose kernels see memory at other addresses, as the simulator's
/// see host memory), each parameter handed to `put` (bytes, C alignment) in order, without a
/// buffer of its own.
pub fn encode_parameters_at<'a>(
    kernel: &str,
    args: impl IntoIterator<Item = &'a LaunchArg>,
    size_of: impl Fn(usize) -> Option<usize>,
    address_of: impl Fn(usize) -> u64,
    mut put: impl FnMut(&[u8], usize),
) -> Result<()> {
    let mut bytes = Vec::with_capacity(8 + 16 * 4);
    for (index, arg) in args.into_iter().enumerate() {
        bytes.clear();
        let alignment = arg
            .write_c_parameter(address_of(index), size_of(index), &mut bytes)
            .map_err(|reason| Error::InvalidLaunch {
                kernel: kernel.to_string(),
                reason: format!("argument {index} ({}): {reason}", arg.describe()),
            })?;
        put(&bytes, alignment);
    }
    Ok(())
}

impl LaunchArg {
    /// The argument as the C parameter a compiled kernel declares, given that parameter's size
    /// in bytes where the backend knows it: an array goes as its first element's address
    /// ([`LaunchArg::pointer_address`]) to an 8-byte parameter (a pointer), and as a
    /// `gm_array<T, N>` to one of `8 + 16 N` bytes (or when the size is unknown); the rest as
    /// [`LaunchArg::c_parameter`]. Bytes and C alignment; the error says what is malformed.
    pub fn c_parameter_for(&self, size: Option<usize>) -> Result<(Vec<u8>, usize), String> {
        let mut bytes = Vec::new();
        let alignment = self.write_c_parameter(self.address(), size, &mut bytes)?;
        Ok((bytes, alignment))
    }

    /// The argument as a C kernel parameter of the portable prelude, what GPU backends pass:
    /// its bytes and C alignment. An `Array` is a `gm_array<T, N>` by value (the 8-byte data
    /// pointer, then `N` extents and `N` strides in elements as `long long`), 8-byte aligned; a
    /// 0-d array (there is no `gm_array<T, 0>`) is its data pointer alone, for a `T*`
    /// parameter. A `Record` is its pointer; a `Scalar` its bytes, aligned to the largest power
    /// of two up to 8 dividing its size. The error says what is malformed.
    pub fn c_parameter(&self) -> Result<(Vec<u8>, usize), String> {
        self.c_parameter_for(None)
    }

    /// An array's or record's device address (0 for a scalar).
    fn address(&self) -> u64 {
        match self {
            LaunchArg::Array { ptr, .. } | LaunchArg::Record { ptr, .. } => ptr.0,
            LaunchArg::Scalar { .. } => 0,
        }
    }

    /// Appends the C parameter ([`LaunchArg::c_parameter_for`]) to `out`, with `address` as the
    /// array's or record's address; returns its C alignment.
    fn write_c_parameter(
        &self,
        address: u64,
        size: Option<usize>,
        out: &mut Vec<u8>,
    ) -> Result<usize, String> {
        match self {
            LaunchArg::Array { shape, .. } if !shape.is_empty() && size == Some(8) => {
                // Checks that the array is one block from its first element.
                self.pointer_address()?;
                out.extend_from_slice(&address.to_ne_bytes());
                Ok(8)
            }
            LaunchArg::Array { shape, strides, .. } => {
                if shape.len() != strides.len() {
                    return Err(format!(
                        "{} shape entries but {} strides",
                        shape.len(),
                        strides.len()
                    ));
                }
                out.extend_from_slice(&address.to_ne_bytes());
                for &extent in shape {
                    let extent = i64::try_from(extent)
                        .map_err(|_| format!("extent {extent} does not fit a 64-bit long long"))?;
                    out.extend_from_slice(&extent.to_ne_bytes());
                }
                for &stride in strides {
                    let stride = i64::try_from(stride)
                        .map_err(|_| format!("stride {stride} does not fit a 64-bit long long"))?;
                    out.extend_from_slice(&stride.to_ne_bytes());
                }
                Ok(8)
            }
            LaunchArg::Record { .. } => {
                out.extend_from_slice(&address.to_ne_bytes());
                Ok(8)
            }
            LaunchArg::Scalar { bytes, .. } => {
                if bytes.is_empty() {
                    return Err("a zero-sized value cannot be a kernel parameter".to_string());
                }
                out.extend_from_slice(bytes);
                Ok(1 << bytes.len().trailing_zeros().min(3))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CParameter, LaunchArg, encode_parameters, encode_parameters_at};
    use crate::backend::DevicePtr;
    use crate::error::Error;
    use proptest::prelude::*;
    use std::any::TypeId;

    fn array(shape: Vec<usize>, strides: Vec<isize>) -> LaunchArg {
        array_at(0x1000, shape, strides, 0)
    }

    /// An array at `ptr` reaching `span_len` elements from its first one.
    fn array_at(ptr: u64, shape: Vec<usize>, strides: Vec<isize>, span_len: usize) -> LaunchArg {
        LaunchArg::Array {
            ptr: DevicePtr(ptr),
            shape,
            strides,
            min_offset: 0,
            span_len,
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

    #[test]
    fn a_launch_names_the_kernel_and_the_malformed_argument() {
        let args = [scalar(vec![1; 4]), array(vec![2, 2], vec![1])];
        match encode_parameters("kern", &args, |_| None) {
            Err(Error::InvalidLaunch { kernel, reason }) => {
                assert_eq!(kernel, "kern");
                assert!(
                    reason.starts_with("argument 1 (array of f32 (2, 2)): 2 shape entries"),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
        let sizes = [Some(4), Some(8)];
        let dense = array_at(0x1000, vec![2, 2], vec![2, 1], 4);
        let params = encode_parameters("kern", &[scalar(vec![9; 4]), dense], |i| sizes[i]).unwrap();
        assert_eq!(
            params,
            vec![
                CParameter {
                    bytes: vec![9; 4],
                    alignment: 4
                },
                CParameter {
                    bytes: 0x1000u64.to_ne_bytes().to_vec(),
                    alignment: 8
                },
            ]
        );
    }

    /// With other addresses (the simulator's host ones), each array and record carries the one
    /// given for it, in the same layout; scalars are unchanged; malformed arguments are refused
    /// alike.
    #[test]
    fn parameters_at_other_addresses_keep_the_layout() {
        let record = LaunchArg::Record {
            ptr: DevicePtr(0x3000),
            itemsize: 8,
            elem: TypeId::of::<u64>(),
            dtype: "u64",
        };
        let args = [
            array_at(0x1000, vec![2, 3], vec![3, 1], 6),
            array_at(0x2000, vec![4], vec![1], 4),
            record,
            scalar(vec![5; 12]),
        ];
        let sizes = [None, Some(8), Some(8), Some(12)];
        let mut got = Vec::new();
        encode_parameters_at(
            "kern",
            &args,
            |i| sizes[i],
            |i| 0xA000 + i as u64,
            |bytes, alignment| got.push((bytes.to_vec(), alignment)),
        )
        .unwrap();
        let on_device = encode_parameters("kern", &args, |i| sizes[i]).unwrap();
        assert_eq!(words(&got[0].0), vec![0xA000, 2, 3, 3, 1]);
        assert_eq!(words(&got[1].0), vec![0xA001]);
        assert_eq!(words(&got[2].0), vec![0xA002]);
        assert_eq!(got[3], (vec![5; 12], 4));
        for (at, device) in got.iter().zip(&on_device) {
            assert_eq!((at.0.len(), at.1), (device.bytes.len(), device.alignment));
        }
        let strided = [array_at(0x1000, vec![4], vec![2], 7)];
        let error = encode_parameters_at("kern", &strided, |_| Some(8), |_| 0, |_, _| {});
        assert!(
            matches!(&error, Err(Error::InvalidLaunch { reason, .. }) if reason.contains("contiguous")),
            "{error:?}"
        );
    }

    proptest! {
        // Under Miri the interpreter is isolated from the file system: a few cases, and no
        // failure-persistence file (which needs the working directory).
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { 256 },
            failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
            ..ProptestConfig::default()
        })]

        /// An array is `gm_array<T, N>`: `8 + 16 N` bytes, 8-byte aligned, holding the pointer,
        /// the extents and the strides in that order; a pointer parameter gets the pointer alone
        /// when the array is dense from its first element, and an error when it is not.
        #[test]
        fn arrays_encode_pointer_shape_and_strides(
            ptr in any::<u64>(),
            dims in prop::collection::vec((0usize..1024, -(1isize << 40)..1 << 40), 0..6),
            dense in any::<bool>(),
        ) {
            let (shape, strides): (Vec<usize>, Vec<isize>) = dims.into_iter().unzip();
            let arg = array_at(ptr, shape.clone(), strides.clone(), 0);
            let (bytes, alignment) = arg.c_parameter().unwrap();
            prop_assert_eq!(alignment, 8);
            prop_assert_eq!(bytes.len(), 8 + 16 * shape.len());
            let expected: Vec<i64> = std::iter::once(ptr as i64)
                .chain(shape.iter().map(|&d| d as i64))
                .chain(strides.iter().map(|&s| s as i64))
                .collect();
            prop_assert_eq!(words(&bytes), expected);
            // Unknown and `gm_array`-sized parameters get the struct; 0-d arrays are always the
            // pointer alone.
            prop_assert_eq!(arg.c_parameter_for(None).unwrap(), (bytes.clone(), 8));
            prop_assert_eq!(
                arg.c_parameter_for(Some(8 + 16 * shape.len())).unwrap(),
                (bytes, 8)
            );
            let count: usize = shape.iter().product();
            let span = if dense { count } else { count + 1 };
            let arg = array_at(ptr, shape.clone(), strides, span);
            let pointer = arg.c_parameter_for(Some(8));
            if shape.is_empty() || dense || count == 0 {
                prop_assert_eq!(pointer.unwrap(), (ptr.to_ne_bytes().to_vec(), 8));
            } else {
                prop_assert!(pointer.unwrap_err().contains("contiguous"));
            }
        }

        /// A scalar keeps its bytes; its alignment is the largest power of two up to 8 that
        /// divides its size.
        #[test]
        fn scalars_keep_their_bytes_at_their_natural_alignment(
            bytes in prop::collection::vec(any::<u8>(), 1..64),
            size in prop::option::of(0usize..64),
        ) {
            let (encoded, alignment) = scalar(bytes.clone()).c_parameter_for(size).unwrap();
            prop_assert_eq!(&encoded, &bytes);
            prop_assert!(alignment.is_power_of_two() && alignment <= 8);
            prop_assert_eq!(bytes.len() % alignment, 0);
            prop_assert!(alignment == 8 || bytes.len() % (2 * alignment) != 0);
        }
    }
}
