//! Turning launch arguments (device addresses) into what simulated threads index (host
//! addresses of the simulated device memory), validating every range; compiled kernels receive
//! them in the one C parameter layout of the GPU backends (core's `encode_parameters`).

use crate::memory::{AddressSpace, Range};
use crate::thread::ArgView;
use gpu_mem_core::backend::DevicePtr;
use gpu_mem_core::kernel::{LaunchArg, encode_parameters};
use gpu_mem_core::{Error, Result};

/// One argument, resolved: the caller's argument, the host address its device address maps to,
/// and the memory it reaches, kept alive for the launch.
#[derive(Debug)]
pub(crate) struct Resolved {
    arg: LaunchArg,
    /// An array's first logical element (dangling for an array with no memory: nothing can be
    /// indexed, and any access is out of bounds and caught before use), a record's value (null
    /// for a null device pointer, which a kernel may take and test); null for a scalar.
    base: *mut u8,
    range: Option<Range>,
}

impl Resolved {
    /// The device memory the argument reaches, if any.
    pub(crate) fn range(&self) -> Option<&Range> {
        self.range.as_ref()
    }

    /// The argument with the host address in place of the device address: what compiled code
    /// receives. An array with no memory has a null address, as an empty array has on the GPU
    /// backends.
    fn on_host(&self) -> LaunchArg {
        let mut arg = self.arg.clone();
        let address = match self.range {
            Some(_) => self.base.expose_provenance() as u64,
            None => 0,
        };
        if let LaunchArg::Array { ptr, .. } | LaunchArg::Record { ptr, .. } = &mut arg {
            *ptr = DevicePtr(address);
        }
        arg
    }
}

// SAFETY: the raw pointer addresses simulated device memory kept alive by the `Range`; the
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
    let (base, range) = match arg {
        LaunchArg::Array {
            ptr,
            shape,
            min_offset,
            span_len,
            itemsize,
            ..
        } => {
            if *span_len == 0 || shape.contains(&0) {
                (
                    std::ptr::NonNull::<u64>::dangling().as_ptr().cast::<u8>(),
                    None,
                )
            } else {
                let low_bytes = min_offset.unsigned_abs() * itemsize;
                let low = DevicePtr(ptr.0.wrapping_sub(low_bytes as u64));
                let range = memory.resolve(low, span_len * itemsize)?;
                let base = range.region.host_ptr(range.offset).wrapping_add(low_bytes);
                (base, Some(range))
            }
        }
        LaunchArg::Record { ptr, .. } if ptr.0 == 0 => (std::ptr::null_mut(), None),
        LaunchArg::Record { ptr, itemsize, .. } => {
            let range = memory.resolve(*ptr, *itemsize)?;
            (range.region.host_ptr(range.offset), Some(range))
        }
        LaunchArg::Scalar { .. } => (std::ptr::null_mut(), None),
    };
    Ok(Resolved {
        arg: arg.clone(),
        base,
        range,
    })
}

/// Views of the resolved arguments, as threads see them.
pub(crate) fn views(resolved: &[Resolved]) -> Vec<ArgView<'_>> {
    resolved
        .iter()
        .map(|r| match &r.arg {
            LaunchArg::Array {
                shape,
                strides,
                elem,
                dtype,
                ..
            } => ArgView::Array {
                base: r.base,
                shape,
                strides,
                elem: *elem,
                dtype,
            },
            LaunchArg::Record { elem, dtype, .. } => ArgView::Record {
                ptr: r.base,
                elem: *elem,
                dtype,
            },
            LaunchArg::Scalar { bytes, elem, dtype } => ArgView::Scalar {
                bytes,
                elem: *elem,
                dtype,
            },
        })
        .collect()
}

/// Each argument as compiled code receives it, in 8-byte words: the C parameter the GPU
/// backends pass (`encode_parameters`: a pointer where `pointer(i)` says parameter `i` is one,
/// else a `gm_array<T, N>`; a record's pointer; a scalar's bytes), with host addresses of the
/// simulated device memory in place of device addresses, the last word zero-padded.
pub(crate) fn encode(
    kernel: &str,
    resolved: &[Resolved],
    pointer: impl Fn(usize) -> bool,
) -> Result<Vec<Box<[u64]>>> {
    let on_host: Vec<LaunchArg> = resolved.iter().map(Resolved::on_host).collect();
    let parameters = encode_parameters(kernel, &on_host, |i| pointer(i).then_some(8))?;
    Ok(parameters
        .iter()
        .map(|parameter| {
            parameter
                .bytes
                .chunks(8)
                .map(|chunk| {
                    let mut word = [0u8; 8];
                    word[..chunk.len()].copy_from_slice(chunk);
                    u64::from_ne_bytes(word)
                })
                .collect()
        })
        .collect())
}
