//! Kernel parameters as `cuLaunchKernel` takes them: one buffer per parameter and an array of
//! pointers to those buffers (`void* kernelParams[]`).
//!
//! # Contract
//!
//! Each [`LaunchArg`] becomes exactly the bytes of the C parameter the kernel declares (the
//! driver copies as many bytes from each pointer as the compiled parameter has), as
//! [`encode_parameters`] lays it out given the compiled parameter's size (the layout is the
//! core's, shared with the ROC backend):
//!
//! * `Array` → its first element's address for a pointer parameter (8 bytes; the array must be
//!   contiguous from there), else `gm_array<T, N>` by value: the 8-byte data pointer, then
//!   `shape[N]`, then `strides[N]` in elements, all 64-bit (`8 + 16 N` bytes, 8-byte aligned;
//!   a 0-d array is the pointer alone);
//! * `Record` → a `T*`: the 8-byte device address;
//! * `Scalar` → its bytes unchanged; its alignment is the natural one of its size (the largest
//!   power of two dividing it, at most 8).
//!
//! Every buffer is stored in 8-byte-aligned memory, which satisfies all of these alignments.
//! Malformed arguments (strides that do not match the shape, a zero-sized scalar, a dimension
//! that does not fit `long long`) are
//! [`Error::InvalidLaunch`](gpu_mem_core::Error::InvalidLaunch) naming the kernel.

use gpu_mem_core::Result;
use gpu_mem_core::kernel::{LaunchArg, encode_parameters};
use std::ffi::c_void;

/// One parameter: its exact bytes, its alignment, and an 8-byte-aligned copy the driver reads.
#[derive(Debug, Clone)]
struct Param {
    bytes: Vec<u8>,
    alignment: usize,
    storage: Box<[u64]>,
}

impl Param {
    fn new(bytes: Vec<u8>, alignment: usize) -> Param {
        let storage = bytes
            .chunks(8)
            .map(|chunk| {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                u64::from_ne_bytes(word)
            })
            .collect();
        Param {
            bytes,
            alignment,
            storage,
        }
    }
}

/// The parameter buffers of one launch.
#[derive(Debug, Clone)]
pub struct KernelParams {
    params: Vec<Param>,
}

impl KernelParams {
    /// Encodes `args` for `kernel` (the name used in errors), for parameters of `sizes` bytes
    /// where known.
    pub fn build(
        kernel: &str,
        args: &[LaunchArg],
        sizes: Option<&[usize]>,
    ) -> Result<KernelParams> {
        let params = encode_parameters(kernel, args, |index| {
            sizes.and_then(|s| s.get(index).copied())
        })?
        .into_iter()
        .map(|p| Param::new(p.bytes, p.alignment))
        .collect();
        Ok(KernelParams { params })
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// Whether the kernel takes no parameters.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// The exact bytes of parameter `index` (what the kernel receives).
    pub fn bytes(&self, index: usize) -> Option<&[u8]> {
        self.params.get(index).map(|p| p.bytes.as_slice())
    }

    /// The C alignment of parameter `index`.
    pub fn alignment(&self, index: usize) -> Option<usize> {
        self.params.get(index).map(|p| p.alignment)
    }

    /// `kernelParams` for `cuLaunchKernel`: one pointer per parameter to its buffer. The
    /// pointers stay valid while `self` is alive and not mutated.
    pub fn pointers(&mut self) -> Vec<*mut c_void> {
        self.params
            .iter_mut()
            .map(|p| p.storage.as_mut_ptr().cast::<c_void>())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_mem_core::Error;
    use gpu_mem_core::backend::DevicePtr;
    use std::any::TypeId;

    fn array(ptr: u64, shape: Vec<usize>, strides: Vec<isize>) -> LaunchArg {
        LaunchArg::Array {
            ptr: DevicePtr(ptr),
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

    fn words(bytes: &[u8]) -> Vec<u64> {
        bytes
            .chunks(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn arrays_are_pointer_shape_strides() {
        let p = KernelParams::build("k", &[array(0x7000, vec![3, 5], vec![-5, 1])], None).unwrap();
        let bytes = p.bytes(0).unwrap();
        assert_eq!(bytes.len(), 40);
        assert_eq!(words(bytes), [0x7000, 3, 5, (-5i64) as u64, 1]);
        assert_eq!(p.alignment(0), Some(8));
    }

    #[test]
    fn scalars_keep_their_bytes_and_natural_alignment() {
        let args: Vec<LaunchArg> = [1usize, 2, 3, 4, 6, 8, 12, 16]
            .iter()
            .map(|&n| scalar((1..=n as u8).collect()))
            .collect();
        let p = KernelParams::build("k", &args, None).unwrap();
        let aligns: Vec<usize> = (0..p.len()).map(|i| p.alignment(i).unwrap()).collect();
        assert_eq!(aligns, [1, 2, 1, 4, 2, 8, 4, 8]);
        assert_eq!(p.bytes(2), Some(&[1u8, 2, 3][..]));
    }

    #[test]
    fn pointers_point_at_aligned_copies_of_the_bytes() {
        let record = LaunchArg::Record {
            ptr: DevicePtr(0xABCD_0000),
            itemsize: 24,
            elem: TypeId::of::<[u64; 3]>(),
            dtype: "rec",
        };
        let value = 0x1122_3344_5566_7788u64;
        let args = [
            scalar(vec![9]),
            record,
            scalar(value.to_ne_bytes().to_vec()),
        ];
        let mut p = KernelParams::build("k", &args, None).unwrap();
        let pointers = p.pointers();
        assert_eq!(pointers.len(), 3);
        for &ptr in &pointers {
            assert_eq!(ptr as usize % 8, 0);
        }
        // SAFETY: each pointer addresses at least 8 initialised bytes owned by `p`.
        let read = |i: usize| unsafe { *(pointers[i] as *const u64) };
        assert_eq!(read(1), 0xABCD_0000);
        assert_eq!(read(2), value);
        // SAFETY: as above; the first byte is the 1-byte scalar.
        assert_eq!(unsafe { *(pointers[0] as *const u8) }, 9);
    }

    #[test]
    fn malformed_arguments_name_the_kernel_and_argument() {
        let bad = [scalar(vec![1]), array(0, vec![2, 2], vec![1])];
        match KernelParams::build("saxpy", &bad, None) {
            Err(Error::InvalidLaunch { kernel, reason }) => {
                assert_eq!(kernel, "saxpy");
                assert!(reason.starts_with("argument 1"), "{reason}");
                assert!(reason.contains("2 shape entries but 1 strides"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            KernelParams::build("k", &[scalar(vec![])], None),
            Err(Error::InvalidLaunch { .. })
        ));
    }

    #[test]
    fn zero_dimensional_arrays_are_just_the_pointer() {
        let p = KernelParams::build("k", &[array(0x40, vec![], vec![])], None).unwrap();
        assert_eq!(p.bytes(0).map(<[u8]>::len), Some(8));
    }
}
