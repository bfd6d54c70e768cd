//! Turning launch arguments (device addresses) into what simulated threads index (host
//! addresses of the simulated device memory), validating every range.

use crate::memory::{AddressSpace, Range};
use crate::thread::ArgView;
use gpu_mem_core::kernel::LaunchArg;
use gpu_mem_core::{Error, Result};

/// One argument, resolved: owns what its view borrows and keeps its memory alive.
#[derive(Debug)]
pub(crate) enum Resolved {
    Array {
        base: *mut u8,
        shape: Vec<usize>,
        strides: Vec<isize>,
        elem: std::any::TypeId,
        dtype: &'static str,
        _range: Option<Range>,
    },
    Record {
        /// Null for a null device pointer (a kernel may take one and test it).
        ptr: *mut u8,
        elem: std::any::TypeId,
        dtype: &'static str,
        _range: Option<Range>,
    },
    Scalar {
        bytes: Vec<u8>,
        elem: std::any::TypeId,
        dtype: &'static str,
    },
}

impl Resolved {
    /// The device memory the argument reaches, if any.
    pub(crate) fn range(&self) -> Option<&Range> {
        match self {
            Resolved::Array { _range, .. } | Resolved::Record { _range, .. } => _range.as_ref(),
            Resolved::Scalar { .. } => None,
        }
    }
}

// SAFETY: the raw pointers address simulated device memory kept alive by the `Range`s; the
// launch contract (unsafe, caller-checked) makes concurrent access the caller's responsibility.
unsafe impl Send for Resolved {}
// SAFETY: as above.
unsafe impl Sync for Resolved {}

/// Resolves every argument against the device's address space.
pub(crate) fn resolve(
    memory: &AddressSpace,
    kernel: &str,
    args: &[LaunchArg],
) -> Result<Vec<Resolved>> {
    args.iter()
        .enumerate()
        .map(|(index, arg)| {
            resolve_one(memory, arg).map_err(|e| Error::InvalidLaunch {
                kernel: kernel.to_string(),
                reason: format!("argument {index} ({}): {e}", arg.describe()),
            })
        })
        .collect()
}

fn resolve_one(memory: &AddressSpace, arg: &LaunchArg) -> Result<Resolved> {
    Ok(match arg {
        LaunchArg::Array {
            ptr,
            shape,
            strides,
            min_offset,
            span_len,
            itemsize,
            elem,
            dtype,
        } => {
            let (base, range) = if *span_len == 0 || shape.contains(&0) {
                // Nothing can be indexed; any access is out of bounds and caught before use.
                (
                    std::ptr::NonNull::<u64>::dangling().as_ptr().cast::<u8>(),
                    None,
                )
            } else {
                let low_bytes = min_offset.unsigned_abs() * itemsize;
                let low = gpu_mem_core::backend::DevicePtr(ptr.0.wrapping_sub(low_bytes as u64));
                let range = memory.resolve(low, span_len * itemsize)?;
                let base = range.region.host_ptr(range.offset).wrapping_add(low_bytes);
                (base, Some(range))
            };
            Resolved::Array {
                base,
                shape: shape.clone(),
                strides: strides.clone(),
                elem: *elem,
                dtype,
                _range: range,
            }
        }
        LaunchArg::Record {
            ptr,
            itemsize,
            elem,
            dtype,
        } if ptr.0 == 0 => Resolved::Record {
            ptr: std::ptr::null_mut(),
            elem: *elem,
            dtype,
            _range: None,
        },
        LaunchArg::Record {
            ptr,
            itemsize,
            elem,
            dtype,
        } => {
            let range = memory.resolve(*ptr, *itemsize)?;
            Resolved::Record {
                ptr: range.region.host_ptr(range.offset),
                elem: *elem,
                dtype,
                _range: Some(range),
            }
        }
        LaunchArg::Scalar { bytes, elem, dtype } => Resolved::Scalar {
            bytes: bytes.clone(),
            elem: *elem,
            dtype,
        },
    })
}

/// Views of the resolved arguments, as threads see them.
pub(crate) fn views(resolved: &[Resolved]) -> Vec<ArgView<'_>> {
    resolved
        .iter()
        .map(|r| match r {
            Resolved::Array {
                base,
                shape,
                strides,
                elem,
                dtype,
                ..
            } => ArgView::Array {
                base: *base,
                shape,
                strides,
                elem: *elem,
                dtype,
            },
            Resolved::Record {
                ptr, elem, dtype, ..
            } => ArgView::Record {
                ptr: *ptr,
                elem: *elem,
                dtype,
            },
            Resolved::Scalar { bytes, elem, dtype } => ArgView::Scalar {
                bytes,
                elem: *elem,
                dtype,
            },
        })
        .collect()
}

/// Each argument as compiled code receives it, in 8-byte words: an array as its first
/// element's address where `pointer(i)` says parameter `i` is a pointer (null for an empty
/// array, which has no memory, as on the GPU backends), else as `gm_array<T, N>`
/// (data pointer, `shape[N]`, `strides[N]` in elements, all 64-bit), a record as `T*`, a scalar
/// as its bytes — the layout the CUDA and ROC launchers use, with host addresses of the
/// simulated device memory in place of device addresses.
pub(crate) fn encode(resolved: &[Resolved], pointer: impl Fn(usize) -> bool) -> Vec<Box<[u64]>> {
    resolved
        .iter()
        .enumerate()
        .map(|(i, r)| match r {
            Resolved::Array { _range: None, .. } if pointer(i) => vec![0u64].into_boxed_slice(),
            Resolved::Array { base, .. } if pointer(i) => {
                vec![base.expose_provenance() as u64].into_boxed_slice()
            }
            Resolved::Array {
                base,
                shape,
                strides,
                ..
            } => std::iter::once(base.expose_provenance() as u64)
                .chain(shape.iter().map(|&d| d as u64))
                .chain(strides.iter().map(|&s| s as i64 as u64))
                .collect(),
            Resolved::Record { ptr, .. } => vec![ptr.expose_provenance() as u64].into_boxed_slice(),
            Resolved::Scalar { bytes, .. } => bytes
                .chunks(8)
                .map(|chunk| {
                    let mut word = [0u8; 8];
                    word[..chunk.len()].copy_from_slice(chunk);
                    u64::from_ne_bytes(word)
                })
                .collect(),
        })
        .collect()
}
