//! The kernarg segment: how [`LaunchArg`]s are laid out in it, the implicit arguments newer code
//! objects read, and the buffer it lives in.
//!
//! # Layout
//!
//! Each argument's bytes ([`encode_parameters`] given the parameter's size from the metadata:
//! the core's layout, shared with the CUDA backend):
//!
//! * `Array` → its first element's address for a pointer parameter (8 bytes; the array must be
//!   contiguous from there); else the prelude's `gm_array<T, N>` by value: 8-byte data
//!   pointer, `N` 64-bit shape entries, `N` 64-bit strides in elements; 8-byte aligned,
//!   `8 + 16 N` bytes (a 0-d array is the pointer alone).
//! * `Record` → a pointer: 8 bytes, 8-byte aligned.
//! * `Scalar` → its bytes, aligned to the largest power of two (at most 8) dividing its size.
//!
//! They go where the code object's metadata places the kernel's parameters: the compiler decides
//! the layout, a launch never guesses it. The count and every size must match the parameters,
//! else the launch is refused naming the argument. A code object without metadata gets the
//! AMDGPU ABI's rule instead: declaration order, each argument at the alignment above.
//!
//! The explicit arguments must fit in the kernel symbol's kernarg segment, else they do not match
//! the kernel and the launch is refused. The rest of the segment holds the *hidden* arguments,
//! filled as the metadata lists them ([`segment`]); a kernel needing a host service this backend
//! does not provide (hostcall / printf buffers, the device heap, multi-grid sync, device-side
//! enqueue) is refused. Without metadata, the fixed layouts: all zero for code object v3/v4, and
//! for v5 and later the block counts, work-group sizes, grid dimensions and dynamic group
//! segment size of the implicit block that kernels read for `blockDim` and `gridDim`.
//!
//! Details: the book's ROC notes, *Kernel launches*, *Kernel arguments in the segment*.

use super::metadata::{ExplicitArg, HiddenArg};
use crate::driver::Hsa;
use gpu_mem_core::kernel::{CParameter, Dim3, LaunchArg, encode_parameters};
use gpu_mem_core::{BackendKind, Error, Result};
use gpu_mem_hsa_sys as sys;
use std::ffi::c_void;
use std::sync::Arc;

/// `ELFOSABI_AMDGPU_HSA`, the OS/ABI byte of AMD GPU code objects.
const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `ELFABIVERSION_AMDGPU_HSA_V5`: the first code object version with the fixed implicit block.
const ABI_VERSION_V5: u8 = 3;

/// The ELF ABI version byte of an AMD GPU code object (2 = code object v4, 3 = v5, 4 = v6).
pub fn code_object_abi_version(code: &[u8]) -> Option<u8> {
    let is_hsa_elf = code.len() > 8 && code[..4] == *b"\x7fELF" && code[7] == ELFOSABI_AMDGPU_HSA;
    is_hsa_elf.then(|| code[8])
}

fn invalid(kernel: &str, reason: String) -> Error {
    Error::InvalidLaunch {
        kernel: kernel.to_string(),
        reason,
    }
}

/// Where the metadata may place explicit arguments: far past any real kernarg segment (a few
/// KiB), so a corrupt offset is refused instead of allocated.
const MAX_EXPLICIT_BYTES: usize = 1 << 20;

fn put(bytes: &mut Vec<u8>, align: usize, value: &[u8]) {
    bytes.resize(bytes.len().next_multiple_of(align), 0);
    bytes.extend_from_slice(value);
}

/// The explicit arguments, laid out as the module docs describe: at the offsets of `layout`
/// (the kernel's parameters from its metadata) when given, else by the ABI's rule.
pub fn pack(kernel: &str, args: &[LaunchArg], layout: Option<&[ExplicitArg]>) -> Result<Vec<u8>> {
    let packed = encode_parameters(kernel, args, |index| {
        layout.and_then(|l| l.get(index)).map(|slot| slot.size)
    })?;
    let Some(layout) = layout else {
        let mut bytes = Vec::new();
        for param in &packed {
            put(&mut bytes, param.alignment, &param.bytes);
        }
        return Ok(bytes);
    };
    if layout.len() != args.len() {
        return Err(invalid(
            kernel,
            format!(
                "the kernel takes {} arguments, {} were given",
                layout.len(),
                args.len()
            ),
        ));
    }
    let mut bytes = Vec::new();
    for (index, (CParameter { bytes: value, .. }, slot)) in packed.iter().zip(layout).enumerate() {
        if value.len() != slot.size {
            return Err(invalid(
                kernel,
                format!(
                    "argument {index} ({}) is {} bytes; the kernel's parameter {index} takes {}",
                    args[index].describe(),
                    value.len(),
                    slot.size
                ),
            ));
        }
        let end = slot
            .offset
            .checked_add(slot.size)
            .filter(|end| *end <= MAX_EXPLICIT_BYTES)
            .ok_or_else(|| {
                invalid(
                    kernel,
                    format!(
                        "its metadata places parameter {index} at bytes {}..+{}, past any kernarg \
                         segment",
                        slot.offset, slot.size
                    ),
                )
            })?;
        if bytes.len() < end {
            bytes.resize(end, 0);
        }
        bytes[slot.offset..end].copy_from_slice(value);
    }
    Ok(bytes)
}

/// What the implicit v5 block describes.
#[derive(Debug, Clone, Copy)]
pub struct DispatchShape {
    /// Blocks (work-groups) per dimension.
    pub grid: Dim3,
    /// Threads (work-items) per block.
    pub block: Dim3,
    /// 1, 2 or 3.
    pub dims: u16,
    /// Dynamic group segment bytes.
    pub dynamic_group: u32,
}

/// Hidden arguments whose service this backend does not set up, with what needs them.
const UNSUPPORTED_HIDDEN: &[(&str, &str)] = &[
    (
        "hidden_hostcall_buffer",
        "host calls from device code (printf, assert, malloc on code object v4)",
    ),
    ("hidden_printf_buffer", "the device printf buffer"),
    (
        "hidden_heap_v1",
        "the device heap (malloc / free in device code)",
    ),
    (
        "hidden_multigrid_sync_arg",
        "multi-grid synchronisation (a cooperative multi-device launch)",
    ),
    ("hidden_default_queue", "device-side enqueue"),
    ("hidden_completion_action", "device-side enqueue"),
    (
        "hidden_private_base",
        "aperture bases (a target without aperture registers)",
    ),
    (
        "hidden_shared_base",
        "aperture bases (a target without aperture registers)",
    ),
];

/// The bytes a supported hidden argument takes, or why the kernel cannot be launched.
fn hidden_value(
    kernel: &str,
    kind: &str,
    shape: &DispatchShape,
    queue_address: u64,
) -> Result<Vec<u8>> {
    let (grid, block) = (shape.grid.to_array(), shape.block.to_array());
    let axis = |suffix: &str| match suffix {
        "x" => Some(0),
        "y" => Some(1),
        "z" => Some(2),
        _ => None,
    };
    if let Some(a) = kind.strip_prefix("hidden_block_count_").and_then(axis) {
        return Ok(grid[a].to_ne_bytes().to_vec());
    }
    if let Some(a) = kind.strip_prefix("hidden_group_size_").and_then(axis) {
        // Block sizes were checked against the 16-bit work-group limits before.
        return Ok((block[a] as u16).to_ne_bytes().to_vec());
    }
    // Grids are whole blocks (no partial last block) and launches have no global offset.
    if kind
        .strip_prefix("hidden_remainder_")
        .and_then(axis)
        .is_some()
        || kind
            .strip_prefix("hidden_global_offset_")
            .and_then(axis)
            .is_some()
        || kind == "hidden_none"
    {
        return Ok(Vec::new());
    }
    match kind {
        "hidden_grid_dims" => Ok(shape.dims.to_ne_bytes().to_vec()),
        "hidden_dynamic_lds_size" => Ok(shape.dynamic_group.to_ne_bytes().to_vec()),
        "hidden_queue_ptr" => Ok(queue_address.to_ne_bytes().to_vec()),
        _ => {
            let what = UNSUPPORTED_HIDDEN
                .iter()
                .find(|(k, _)| *k == kind)
                .map_or("a hidden argument this backend does not know", |(_, w)| *w);
            Err(Error::NotSupportedByBackend {
                backend: BackendKind::Roc,
                feature: "hidden kernel arguments",
                reason: format!(
                    "kernel `{kernel}` needs the hidden argument `{kind}` ({what}), which the ROC \
                     backend does not set up; launching it would hand the kernel a null pointer"
                ),
            })
        }
    }
}

/// The whole kernarg segment: `explicit` padded to `segment_size` bytes, then the hidden
/// arguments. With the code object's metadata (`hidden`), each listed hidden argument is filled
/// at its offset or the launch refused (see [`hidden_value`]); without it, hidden arguments are
/// zero except the v5 implicit block when `abi_version` says so.
pub fn segment(
    kernel: &str,
    explicit: &[u8],
    segment_size: usize,
    abi_version: Option<u8>,
    hidden: Option<&[HiddenArg]>,
    shape: DispatchShape,
    queue_address: u64,
) -> Result<Vec<u8>> {
    if explicit.len() > segment_size {
        return Err(invalid(
            kernel,
            format!(
                "the arguments take {} bytes but the kernel's kernarg segment has {segment_size}: \
                 the number or the types of the arguments do not match the kernel's parameters",
                explicit.len()
            ),
        ));
    }
    let mut bytes = explicit.to_vec();
    bytes.resize(segment_size, 0);
    if let Some(hidden) = hidden {
        for arg in hidden {
            let value = hidden_value(kernel, &arg.kind, &shape, queue_address)?;
            let end = arg.offset.checked_add(arg.size);
            let slot = match end {
                Some(end) if arg.offset >= explicit.len() => bytes.get_mut(arg.offset..end),
                _ => None,
            };
            let Some(slot) = slot else {
                return Err(invalid(
                    kernel,
                    format!(
                        "its metadata places `{}` at bytes {}..+{}, outside the hidden part of \
                         its {segment_size}-byte kernarg segment",
                        arg.kind, arg.offset, arg.size
                    ),
                ));
            };
            let n = value.len().min(slot.len());
            slot[..n].copy_from_slice(&value[..n]);
        }
        return Ok(bytes);
    }
    if abi_version.is_some_and(|v| v >= ABI_VERSION_V5) {
        // The v5 implicit block (LLVM AMDGPUUsage, "Code Object V5 Metadata"): block counts
        // (u32 x3) at 0, work-group sizes (u16 x3) at 12, remainders (u16 x3) at 18 left zero
        // since grids are whole blocks, grid dimensions (u16) at 64, dynamic group segment size
        // (u32) at 120; the rest of its 256 bytes stays zero. v3/v4 hidden arguments (global
        // offsets, printf / hostcall / queue pointers) stay zero: a zero offset is what a launch
        // means, and only printf, malloc or device-side enqueue read the pointers.
        let base = explicit.len().next_multiple_of(8);
        let mut field = |offset: usize, value: &[u8]| {
            let at = base + offset;
            if let Some(slot) = bytes.get_mut(at..at + value.len()) {
                slot.copy_from_slice(value);
            }
        };
        let (grid, block) = (shape.grid.to_array(), shape.block.to_array());
        for axis in 0..3 {
            field(4 * axis, &grid[axis].to_ne_bytes());
            // Block sizes were checked against the 16-bit work-group limits before.
            field(12 + 2 * axis, &(block[axis] as u16).to_ne_bytes());
        }
        field(64, &shape.dims.to_ne_bytes());
        field(120, &shape.dynamic_group.to_ne_bytes());
    }
    Ok(bytes)
}

/// A kernarg buffer from the kernarg pool, freed on drop (which the owner arranges to happen
/// only after the dispatch using it completed).
#[derive(Debug)]
pub struct KernargBuffer {
    hsa: Arc<Hsa>,
    address: usize,
}

impl KernargBuffer {
    /// Allocates `bytes.len()` bytes (at least 1) from `pool`, grants `agent` access when the
    /// pool does not allow it by default, and copies `bytes` in.
    pub fn new(
        hsa: &Arc<Hsa>,
        pool: sys::hsa_amd_memory_pool_t,
        grant: Option<sys::hsa_agent_t>,
        bytes: &[u8],
    ) -> Result<KernargBuffer> {
        // SAFETY: `pool` is the device's kernarg pool from the topology (caller).
        let ptr = unsafe { hsa.memory_pool_allocate(pool, bytes.len().max(1)) }?;
        let buffer = KernargBuffer {
            hsa: Arc::clone(hsa),
            address: ptr as usize,
        };
        if let Some(agent) = grant {
            // SAFETY: `ptr` is the base of the allocation just made.
            unsafe { hsa.agents_allow_access(&[agent], ptr) }?;
        }
        // SAFETY: the kernarg pool is host memory (fine-grained system memory) of at least
        // `bytes.len()` bytes, not yet shared with any agent.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr.cast::<u8>(), bytes.len()) };
        Ok(buffer)
    }

    /// The address the packet's `kernarg_address` takes.
    pub fn address(&self) -> usize {
        self.address
    }
}

impl Drop for KernargBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated by `new`, freed once; the owner drops the buffer only after the
        // dispatch reading it completed (or was never submitted).
        if let Err(e) = unsafe { self.hsa.memory_pool_free(self.address as *mut c_void) } {
            tracing::warn!(error = %e, "freeing a kernarg buffer failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{DispatchShape, ExplicitArg, code_object_abi_version, pack, segment};
    use gpu_mem_core::Error;
    use gpu_mem_core::backend::DevicePtr;
    use gpu_mem_core::kernel::{Dim3, LaunchArg};
    use std::any::TypeId;

    fn array(ptr: u64, shape: &[usize], strides: &[isize]) -> LaunchArg {
        LaunchArg::Array {
            ptr: DevicePtr(ptr),
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            min_offset: 0,
            span_len: 0,
            itemsize: 4,
            elem: TypeId::of::<f32>(),
            dtype: "f32",
        }
    }

    fn scalar(bytes: &[u8]) -> LaunchArg {
        LaunchArg::Scalar {
            bytes: bytes.to_vec(),
            elem: TypeId::of::<u8>(),
            dtype: "bytes",
        }
    }

    fn word(bytes: &[u8], at: usize) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&bytes[at..at + 8]);
        u64::from_ne_bytes(w)
    }

    fn slots(list: &[(usize, usize)]) -> Vec<ExplicitArg> {
        list.iter()
            .map(|&(offset, size)| ExplicitArg { offset, size })
            .collect()
    }

    #[test]
    fn arguments_go_where_the_metadata_places_the_parameters() {
        // `(int, float4)`: the vector is 16-byte aligned, at 16 (the size rule would say 8).
        let vector: Vec<u8> = (1..=16).collect();
        let b = pack(
            "k",
            &[scalar(&[9, 0, 0, 0]), scalar(&vector)],
            Some(&slots(&[(0, 4), (16, 16)])),
        )
        .unwrap();
        assert_eq!(b.len(), 32);
        assert_eq!(&b[..4], &[9, 0, 0, 0]);
        assert_eq!(&b[4..16], &[0; 12]);
        assert_eq!(&b[16..], vector.as_slice());
        // `(float, struct { float, float })`: the struct is 4-byte aligned, at 4 (not 8).
        let pair = [1, 2, 3, 4, 5, 6, 7, 8];
        let b = pack(
            "k",
            &[scalar(&[0xaa; 4]), scalar(&pair), array(0x40, &[2], &[1])],
            Some(&slots(&[(0, 4), (4, 8), (16, 24)])),
        )
        .unwrap();
        assert_eq!(&b[4..12], &pair);
        assert_eq!(word(&b, 16), 0x40);
        assert_eq!(word(&b, 24), 2);
        assert_eq!(word(&b, 32), 1);
        // Without metadata the ABI's rule places the same pair at 8.
        let b = pack("k", &[scalar(&[0xaa; 4]), scalar(&pair)], None).unwrap();
        assert_eq!(&b[8..16], &pair);
    }

    #[test]
    fn arguments_that_do_not_match_the_parameters_are_refused() {
        let two = slots(&[(0, 8), (8, 4)]);
        match pack("kern", &[scalar(&[0; 8])], Some(&two)) {
            Err(Error::InvalidLaunch { kernel, reason }) => {
                assert_eq!(kernel, "kern");
                assert!(
                    reason.contains("takes 2 arguments, 1 were given"),
                    "{reason}"
                );
            }
            other => panic!("expected InvalidLaunch, got {other:?}"),
        }
        match pack("kern", &[scalar(&[0; 8]), scalar(&[0; 8])], Some(&two)) {
            Err(Error::InvalidLaunch { reason, .. }) => {
                assert!(reason.contains("argument 1"), "{reason}");
                assert!(reason.contains("is 8 bytes"), "{reason}");
                assert!(reason.contains("takes 4"), "{reason}");
            }
            other => panic!("expected InvalidLaunch, got {other:?}"),
        }
    }

    #[test]
    fn arrays_records_and_scalars_follow_the_c_layout() {
        let args = [
            scalar(&[7]),
            array(0x1000, &[3, 5], &[5, -1]),
            scalar(&2.5f32.to_ne_bytes()),
            LaunchArg::Record {
                ptr: DevicePtr(0x2000),
                itemsize: 12,
                elem: TypeId::of::<u8>(),
                dtype: "rec",
            },
            scalar(&[1, 2]),
            scalar(&[9, 9, 9, 9, 9, 9]),
        ];
        let b = pack("k", &args, None).unwrap();
        // u8 at 0; gm_array<float, 2> at 8 (40 bytes); f32 at 48; pointer at 56; u16 at 64;
        // a 6-byte value aligned to 2 at 66.
        assert_eq!(b[0], 7);
        assert_eq!(&b[1..8], &[0; 7]);
        assert_eq!(word(&b, 8), 0x1000);
        assert_eq!(word(&b, 16), 3);
        assert_eq!(word(&b, 24), 5);
        assert_eq!(word(&b, 32), 5);
        assert_eq!(word(&b, 40) as i64, -1);
        assert_eq!(&b[48..52], &2.5f32.to_ne_bytes());
        assert_eq!(word(&b, 56), 0x2000);
        assert_eq!(&b[64..66], &[1, 2]);
        assert_eq!(&b[66..72], &[9; 6]);
        assert_eq!(b.len(), 72);
    }

    #[test]
    fn malformed_arguments_are_refused() {
        for bad in [array(0, &[2, 2], &[1]), scalar(&[])] {
            match pack("kern", &[bad], None) {
                Err(Error::InvalidLaunch { kernel, .. }) => assert_eq!(kernel, "kern"),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn segment_checks_the_size_and_fills_v5_implicit_arguments() {
        let explicit = pack("k", &[array(0x10, &[4], &[1]), scalar(&[1, 0, 0, 0])], None).unwrap();
        assert_eq!(explicit.len(), 28);
        let shape = DispatchShape {
            grid: Dim3::new(6, 2, 1),
            block: Dim3::new(64, 4, 1),
            dims: 2,
            dynamic_group: 512,
        };
        // Too small a segment: the arguments do not match the kernel.
        assert!(matches!(
            segment("k", &explicit, 24, Some(2), None, shape, 0),
            Err(Error::InvalidLaunch { .. })
        ));
        // Code object v4: hidden arguments stay zero.
        let v4 = segment("k", &explicit, 32 + 56, Some(2), None, shape, 0).unwrap();
        assert_eq!(v4.len(), 88);
        assert_eq!(&v4[..28], &explicit[..]);
        assert!(v4[28..].iter().all(|b| *b == 0));
        // Code object v5: the implicit block starts at 32.
        let v5 = segment("k", &explicit, 32 + 256, Some(3), None, shape, 0).unwrap();
        let u32_at = |at: usize| u32::from_ne_bytes(v5[at..at + 4].try_into().unwrap());
        let u16_at = |at: usize| u16::from_ne_bytes(v5[at..at + 2].try_into().unwrap());
        assert_eq!([u32_at(32), u32_at(36), u32_at(40)], [6, 2, 1]);
        assert_eq!([u16_at(44), u16_at(46), u16_at(48)], [64, 4, 1]);
        assert_eq!([u16_at(50), u16_at(52), u16_at(54)], [0, 0, 0]);
        assert_eq!(u16_at(32 + 64), 2);
        assert_eq!(u32_at(32 + 120), 512);
        // A v5 kernel that uses no implicit arguments has no block: nothing written past it.
        let bare = segment("k", &explicit, 32, Some(3), None, shape, 0).unwrap();
        assert_eq!(bare.len(), 32);
    }

    #[test]
    fn metadata_hidden_arguments_are_filled_at_their_offsets() {
        use crate::backend::launch::metadata::{hidden_args, tests::code_object};
        let explicit = pack("k", &[array(0x10, &[4], &[1])], None).unwrap();
        let elf = code_object(
            "k",
            &[
                ("hidden_block_count_x", 24, 4),
                ("hidden_block_count_y", 28, 4),
                ("hidden_block_count_z", 32, 4),
                ("hidden_group_size_x", 36, 2),
                ("hidden_group_size_y", 38, 2),
                ("hidden_group_size_z", 40, 2),
                ("hidden_remainder_x", 42, 2),
                ("hidden_global_offset_x", 48, 8),
                ("hidden_grid_dims", 88, 2),
                ("hidden_dynamic_lds_size", 144, 4),
                ("hidden_queue_ptr", 224, 8),
            ],
        );
        let hidden = hidden_args(&elf, "k").unwrap();
        let shape = DispatchShape {
            grid: Dim3::new(6, 2, 1),
            block: Dim3::new(64, 4, 1),
            dims: 2,
            dynamic_group: 512,
        };
        let b = segment("k", &explicit, 280, Some(3), Some(&hidden), shape, 0xabc0).unwrap();
        let u32_at = |at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap());
        let u16_at = |at: usize| u16::from_ne_bytes(b[at..at + 2].try_into().unwrap());
        assert_eq!(&b[..24], &explicit[..]);
        assert_eq!([u32_at(24), u32_at(28), u32_at(32)], [6, 2, 1]);
        assert_eq!([u16_at(36), u16_at(38), u16_at(40)], [64, 4, 1]);
        assert_eq!(u16_at(42), 0);
        assert_eq!(word(&b, 48), 0);
        assert_eq!(u16_at(88), 2);
        assert_eq!(u32_at(144), 512);
        assert_eq!(word(&b, 224), 0xabc0);
        // Nothing else written.
        let written = [24..44, 48..56, 88..90, 144..148, 224..232];
        for (i, byte) in b.iter().enumerate().skip(24) {
            if !written.iter().any(|r| r.contains(&i)) {
                assert_eq!(*byte, 0, "byte {i}");
            }
        }
        // An offset inside the explicit arguments or past the segment is refused.
        let bad = code_object("k", &[("hidden_grid_dims", 8, 2)]);
        let bad = hidden_args(&bad, "k").unwrap();
        assert!(matches!(
            segment("k", &explicit, 280, Some(3), Some(&bad), shape, 0),
            Err(Error::InvalidLaunch { .. })
        ));
    }

    #[test]
    fn hidden_arguments_needing_host_services_are_refused_by_name() {
        use crate::backend::launch::metadata::{hidden_args, tests::code_object};
        let explicit = pack("k", &[array(0x10, &[4], &[1])], None).unwrap();
        let shape = DispatchShape {
            grid: Dim3::new(1, 1, 1),
            block: Dim3::new(64, 1, 1),
            dims: 1,
            dynamic_group: 0,
        };
        for kind in [
            "hidden_hostcall_buffer",
            "hidden_printf_buffer",
            "hidden_heap_v1",
            "hidden_multigrid_sync_arg",
            "hidden_default_queue",
            "hidden_completion_action",
            "hidden_something_new",
        ] {
            let elf = code_object(
                "printer",
                &[("hidden_block_count_x", 24, 4), (kind, 104, 8)],
            );
            let hidden = hidden_args(&elf, "printer").unwrap();
            match segment("printer", &explicit, 280, Some(3), Some(&hidden), shape, 0) {
                Err(Error::NotSupportedByBackend { reason, .. }) => {
                    assert!(
                        reason.contains("`printer`") && reason.contains(kind),
                        "{reason}"
                    )
                }
                other => panic!("{kind}: {other:?}"),
            }
        }
    }

    #[test]
    fn abi_version_comes_from_the_elf_header() {
        let mut header = vec![0u8; 64];
        header[..4].copy_from_slice(b"\x7fELF");
        header[7] = 64;
        header[8] = 2;
        assert_eq!(code_object_abi_version(&header), Some(2));
        header[7] = 0;
        assert_eq!(code_object_abi_version(&header), None);
        assert_eq!(code_object_abi_version(b"\x7fELF"), None);
    }
}
