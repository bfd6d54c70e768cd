//! The one fact the simulator reads from a compiled kernel library itself: the size of its
//! thread-local segment, which holds the kernel's static `__shared__` arrays (the prelude's host
//! branch makes them `static thread_local`, and nothing else in the library is thread-local).

/// `p_memsz` of the `PT_TLS` program header of a 64-bit little-endian ELF file; 0 when there is
/// none; `None` when `bytes` is not such a file.
pub(crate) fn tls_size(bytes: &[u8]) -> Option<u64> {
    const PT_TLS: u32 = 7;
    if bytes.get(..4)? != b"\x7fELF" || *bytes.get(4)? != 2 || *bytes.get(5)? != 1 {
        return None;
    }
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_le_bytes)
    };
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    for i in 0..phnum {
        let header = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if u32_at(header)? == PT_TLS {
            return u64_at(header + 0x28);
        }
    }
    Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_what_is_not_elf64() {
        assert_eq!(tls_size(b"not an elf file at all"), None);
        assert_eq!(tls_size(&[]), None);
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
    }
}
