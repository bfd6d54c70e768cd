//! What the simulator reads from a compiled kernel library itself:
//! * how much of its thread-local storage is the kernels' static `__shared__` arrays (the
//!   prelude's host branch makes them `static thread_local`). The prelude's stackless section
//!   and its checked hooks have thread-locals of their own (frame arenas, the pointer to the
//!   granted ranges), and the C++ runtime adds a guard
//!   (`__tls_guard`): those are not the kernels', so the arrays are counted from the symbol
//!   table where the library has one, and only without one is the whole thread-local segment
//!   taken;
//! * for a checked program (`crate::sanitizer`), its loaded segments and every thread-local
//!   symbol, which its threads may touch;
//!
//! The symbol table itself is read by `gpu_mem_core::kernel::compiled`.

/// Bytes of the kernels' own thread-local variables: the sizes of the `STT_TLS` symbols of the
/// symbol table but the prelude's and the runtime's ([`is_prelude_tls`]); the whole `PT_TLS`
/// segment when the library has no symbol table (stripped). `None` when `bytes` is not a
/// 64-bit little-endian ELF file.
pub(crate) fn shared_bytes(bytes: &[u8]) -> Option<u64> {
    use gpu_mem_core::kernel::compiled::{STT_TLS, symbols};
    let segment = tls_size(bytes)?;
    let kernels = symbols(bytes).and_then(|symbols| {
        symbols
            .iter()
            .filter(|s| s.kind == STT_TLS && !is_prelude_tls(s.name.as_bytes()))
            .try_fold(0u64, |total, s| total.checked_add(s.size))
    });
    Some(kernels.unwrap_or(segment))
}

/// The prelude's own thread-locals (file-scope `static thread_local`s of its stackless
/// and regions sections, named as GCC and clang mangle internal-linkage variables: `_ZL<length><name>`), and
/// the C++ runtime's guard of thread-locals with constructors. The tests' check that a
/// stackless kernel gets all of the limit finds one missing from this list.
pub(crate) fn is_prelude_tls(name: &[u8]) -> bool {
    const PRELUDE: [&str; 8] = [
        "gm_sim_tls_anchor",
        // Where a leading guard refused the rest of an axis (`gpu_mem.h`).
        "gm_sim_refused_axis",
        "gm_sim_frames",
        "gm_sim_sub_frames",
        "gm_sim_frames_owner",
        "gm_sim_subs",
        // A checked program's pointer to its OS thread's granted ranges (`gm_sim/checked.h`).
        "gm_sim_allowed_here",
        // A block run as regions (`gm_sim/regions.h`).
        "gm_sim_regions_state",
    ];
    // The exchange buffer of cooperative groups' tiles larger than a warp (the simulator's,
    // where a GPU's live in the user's `block_tile_memory`).
    const TILE_EXCHANGE: &[u8] = b"20gm_sim_tile_exchange";
    name == b"__tls_guard"
        || name
            .windows(TILE_EXCHANGE.len())
            .any(|w| w == TILE_EXCHANGE)
        || PRELUDE
            .iter()
            .any(|p| name == format!("_ZL{}{p}", p.len()).as_bytes())
}

/// Every thread-local of the symbol table (name, offset in the thread-local block, size): a
/// checked program's `__shared__` arrays and the prelude's own.
pub(crate) fn thread_locals(bytes: &[u8]) -> Vec<(String, u64, u64)> {
    use gpu_mem_core::kernel::compiled::{STT_TLS, symbols};
    symbols(bytes)
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.kind == STT_TLS)
        .map(|s| (s.name, s.value, s.size))
        .collect()
}

/// `(p_vaddr, p_memsz)` of each `PT_LOAD` program header; `None` when `bytes` is not a 64-bit
/// little-endian ELF file.
pub(crate) fn loaded_segments(bytes: &[u8]) -> Option<Vec<(u64, u64)>> {
    const PT_LOAD: u32 = 1;
    let r = headers(bytes)?;
    let mut loads = Vec::new();
    for header in r.1 {
        if r.0.u32_at(header)? == PT_LOAD {
            loads.push((
                r.0.u64_at(header.checked_add(0x10)?)?,
                r.0.u64_at(header.checked_add(0x28)?)?,
            ));
        }
    }
    Some(loads)
}

/// The file's reader and the offsets of its program headers.
fn headers(bytes: &[u8]) -> Option<(Reader<'_>, Vec<usize>)> {
    if bytes.get(..4)? != b"\x7fELF" || *bytes.get(4)? != 2 || *bytes.get(5)? != 1 {
        return None;
    }
    let r = Reader(bytes);
    let phoff = usize::try_from(r.u64_at(0x20)?).ok()?;
    let phentsize = usize::from(r.u16_at(0x36)?);
    let phnum = usize::from(r.u16_at(0x38)?);
    let offsets = (0..phnum)
        .map(|i| phoff.checked_add(i.checked_mul(phentsize)?))
        .collect::<Option<Vec<usize>>>()?;
    Some((r, offsets))
}

/// Little-endian reads that fail (`None`) past the end of the file.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u16_at(&self, at: usize) -> Option<u16> {
        self.0
            .get(at..at.checked_add(2)?)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32_at(&self, at: usize) -> Option<u32> {
        self.0
            .get(at..at.checked_add(4)?)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    }

    fn u64_at(&self, at: usize) -> Option<u64> {
        self.0
            .get(at..at.checked_add(8)?)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    }
}

/// `p_memsz` of the `PT_TLS` program header of a 64-bit little-endian ELF file; 0 when there is
/// none; `None` when `bytes` is not such a file.
fn tls_size(bytes: &[u8]) -> Option<u64> {
    const PT_TLS: u32 = 7;
    let (r, headers) = headers(bytes)?;
    for header in headers {
        if r.u32_at(header)? == PT_TLS {
            return r.u64_at(header.checked_add(0x28)?);
        }
    }
    Some(0)
}

// Safe code only, so nothing for Miri to check (and text-heavy tests take minutes under it).
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(crate::test_support::proptest_config(16))]

        /// A damaged library (offsets and counts anywhere, up to the end of the address space)
        /// is read as "not an ELF file" or some size, never a panic or an overflow.
        #[test]
        fn damaged_files_never_panic(
            mut bytes in proptest::collection::vec(any::<u8>(), 64..512),
            offsets in proptest::collection::vec(any::<u64>(), 4),
        ) {
            bytes[..6].copy_from_slice(b"\x7fELF\x02\x01");
            bytes[0x20..0x28].copy_from_slice(&offsets[0].to_le_bytes());
            bytes[0x28..0x30].copy_from_slice(&offsets[1].to_le_bytes());
            if offsets[2] % 3 == 1 {
                // Section headers said to lie at the very end of the address space.
                bytes[0x28..0x30].copy_from_slice(&(u64::MAX - offsets[3] % 8).to_le_bytes());
                bytes[0x3C..0x3E].copy_from_slice(&1u16.to_le_bytes());
                // No program headers: the symbol table is read.
                bytes[0x38..0x3A].copy_from_slice(&0u16.to_le_bytes());
            } else if offsets[2] % 3 == 0 {
                // Headers inside the file, their fields near the end of the address space.
                bytes[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
                bytes[0x28..0x30].copy_from_slice(&64u64.to_le_bytes());
                bytes[0x36..0x38].copy_from_slice(&1u16.to_le_bytes());
                bytes[0x38..0x3A].copy_from_slice(&4u16.to_le_bytes());
                bytes[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
                bytes[0x3C..0x3E].copy_from_slice(&4u16.to_le_bytes());
                let far = offsets[3] | (u64::MAX - 0xff);
                for field in [64 + 0x18, 64 + 0x20, 64 + 0x28] {
                    if field + 8 <= bytes.len() {
                        bytes[field..field + 8].copy_from_slice(&far.to_le_bytes());
                    }
                }
            }
            let _ = shared_bytes(&bytes);
        }
    }

    #[test]
    fn only_the_preludes_and_runtimes_thread_locals_are_not_the_kernels() {
        assert!(is_prelude_tls(b"_ZL13gm_sim_frames"));
        assert!(is_prelude_tls(b"_ZL11gm_sim_subs"));
        assert!(is_prelude_tls(b"_ZL19gm_sim_allowed_here"));
        assert!(is_prelude_tls(b"__tls_guard"));
        assert!(is_prelude_tls(
            b"_ZN18cooperative_groups7detailsL20gm_sim_tile_exchangeE"
        ));
        // A kernel's array, as the stackless rewrite names it, and as the ordinary build does.
        assert!(!is_prelude_tls(
            b"_ZZ3bigPZ3big8gm_arrayIfLi1EEE28_Z3big8gm_arrayIfLi1EE.Frame.actorE18gm_sim_shared_tile"
        ));
        assert!(!is_prelude_tls(b"_ZZ3bigE4tile"));
        assert!(!is_prelude_tls(b"_ZL13gm_sim_framesX"));
    }

    #[test]
    fn rejects_what_is_not_elf64() {
        assert_eq!(tls_size(b"not an elf file at all"), None);
        assert_eq!(tls_size(&[]), None);
        assert_eq!(shared_bytes(b"\x7fELF\x02\x01"), None);
    }

    #[test]
    #[cfg(all(
        not(miri),
        target_os = "linux",
        target_endian = "little",
        target_pointer_width = "64"
    ))]
    fn reads_the_running_test_binary() {
        let bytes = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        // Rust's std has thread-locals, so the test binary has a TLS segment.
        assert!(tls_size(&bytes).is_some_and(|n| n > 0));
        let symbols = gpu_mem_core::kernel::compiled::symbols(&bytes).unwrap();
        assert!(symbols.iter().any(|s| {
            s.kind == gpu_mem_core::kernel::compiled::STT_FUNC
                && s.name.contains("reads_the_running_test_binary")
        }));
    }
}
