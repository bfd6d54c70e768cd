//! Turning launch arguments (device addresses) into what simulated threads index (host
//! addresses of the simulated device memory), validating every range; and into the parameters
//! compiled kernels receive, in the one C layout of the GPU backends (core's
//! `encode_parameters_at`), with those host addresses.

use crate::memory::{AddressSpace, Range};
use crate::thread::ArgView;
use gpu_mem_core::kernel::{LaunchArg, encode_parameters_at};
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

    /// The host address compiled code receives in place of the device address: null for an
    /// array with no memory (as an empty array's on the GPU backends) and for a scalar.
    fn host_address(&self) -> u64 {
        match self {
            Resolved::Array { _range: None, .. } | Resolved::Scalar { .. } => 0,
            Resolved::Array { base, .. } => base.expose_provenance() as u64,
            Resolved::Record { ptr, .. } => ptr.expose_provenance() as u64,
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

/// A compiled kernel's parameters, in one buffer of 8-byte words: each argument the C parameter
/// the GPU backends pass (`encode_parameters_at`: an array's first element's address where the
/// parameter is a pointer, else a `gm_array<T, N>`; a record's pointer; a scalar's bytes), with
/// host addresses of the simulated device memory in place of device addresses, starting on a
/// word and zero-padded to the next.
#[derive(Debug, Default)]
pub(crate) struct Parameters {
    pub(crate) words: Vec<u64>,
    /// Each parameter's words in `words`.
    pub(crate) spans: Vec<std::ops::Range<usize>>,
}

impl Parameters {
    /// `args` (resolved as `resolved`) for a kernel whose parameter `i` is a pointer where
    /// `pointer(i)` says so; a malformed argument is `InvalidLaunch` naming it.
    pub(crate) fn encode(
        kernel: &str,
        args: &[LaunchArg],
        resolved: &[Resolved],
        pointer: impl Fn(usize) -> bool,
    ) -> Result<Parameters> {
        let mut words = Vec::with_capacity(8 * args.len());
        let mut spans = Vec::with_capacity(args.len());
        encode_parameters_at(
            kernel,
            args,
            |i| pointer(i).then_some(8),
            |i| resolved[i].host_address(),
            |parameter, _alignment| {
                let start = words.len();
                words.resize(start + parameter.len().div_ceil(8), 0);
                bytemuck::cast_slice_mut::<u64, u8>(&mut words[start..])[..parameter.len()]
                    .copy_from_slice(parameter);
                spans.push(start..words.len());
            },
        )?;
        Ok(Parameters { words, spans })
    }
}
