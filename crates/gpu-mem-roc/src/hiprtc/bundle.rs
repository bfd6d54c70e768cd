//! hiprtc's output in either form it comes in: a raw AMD GPU code object (an ELF, what the
//! Debian ROCm 5.2 hiprtc returns) or a clang offload bundle holding one (what newer hiprtc
//! returns for `--offload-arch`, and what `hipcc --genco` writes).
//!
//! The uncompressed bundle format (clang's `OffloadBundler`): the magic
//! `__CLANG_OFFLOAD_BUNDLE__`, a little-endian `u64` entry count, then per entry `u64 offset`,
//! `u64 size`, `u64 triple length` and the triple (`hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-`,
//! `hip-amdgcn-amd-amdhsa-gfx906`, `host-x86_64-unknown-linux-gnu` with an empty body). The
//! entry for the agent's processor is taken. Compressed bundles (`CCOB`, ROCm 6.2+ with
//! compression on) are refused with a clear error: decompressing them needs zstd or zlib.

use gpu_mem_core::{BackendKind, Error, Result};

const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
const COMPRESSED_MAGIC: &[u8] = b"CCOB";
const ELF_MAGIC: &[u8] = b"\x7fELF";

fn refuse(reason: String) -> Error {
    Error::NotSupportedByBackend {
        backend: BackendKind::Roc,
        feature: "loading hiprtc's output",
        reason,
    }
}

fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let slice = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(slice.try_into().ok()?))
}

/// The processor of an ISA or target id: `gfx90a` of `gfx90a:sramecc+:xnack-`.
fn processor(target: &str) -> &str {
    target.split(':').next().unwrap_or(target)
}

/// The code object for `arch` (an agent ISA name such as `gfx90a`, features allowed) in
/// `bytes`: `bytes` itself when it is an ELF, the matching entry of an offload bundle otherwise.
pub fn code_object_for(bytes: Vec<u8>, arch: &str) -> Result<Vec<u8>> {
    if bytes.starts_with(ELF_MAGIC) {
        return Ok(bytes);
    }
    if bytes.starts_with(COMPRESSED_MAGIC) {
        return Err(refuse(
            "hiprtc returned a compressed offload bundle (CCOB); gpu-mem reads uncompressed \
             bundles and raw code objects only"
                .into(),
        ));
    }
    if !bytes.starts_with(BUNDLE_MAGIC) {
        let head: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
        return Err(refuse(format!(
            "neither an ELF code object nor a clang offload bundle (first bytes {})",
            head.join(" ")
        )));
    }
    let truncated = || refuse("truncated clang offload bundle".into());
    let count = read_u64(&bytes, BUNDLE_MAGIC.len()).ok_or_else(truncated)?;
    let mut at = BUNDLE_MAGIC.len() + 8;
    let mut triples = Vec::new();
    for _ in 0..count {
        let offset = read_u64(&bytes, at).ok_or_else(truncated)?;
        let size = read_u64(&bytes, at + 8).ok_or_else(truncated)?;
        let triple_len = read_u64(&bytes, at + 16).ok_or_else(truncated)?;
        let start = at + 24;
        let end = usize::try_from(triple_len)
            .ok()
            .and_then(|len| start.checked_add(len))
            .ok_or_else(truncated)?;
        let triple = String::from_utf8_lossy(bytes.get(start..end).ok_or_else(truncated)?);
        at = end;
        // `<kind>-amdgcn-amd-amdhsa-[<env>]-<target id>`: the target id is the last field.
        // The target id itself may end in '-' (`xnack-`), so split from the left.
        let fields: Vec<&str> = triple.splitn(6, '-').collect();
        let target = fields.get(5).or(fields.get(4)).copied().unwrap_or("");
        if triple.contains("amdgcn-amd-amdhsa") && processor(target) == processor(arch) {
            let body = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(size).ok())
                .and_then(|(o, s)| bytes.get(o..o.checked_add(s)?))
                .ok_or_else(truncated)?;
            if !body.starts_with(ELF_MAGIC) {
                return Err(refuse(format!(
                    "the offload bundle's entry {triple} is not an ELF code object"
                )));
            }
            return Ok(body.to_vec());
        }
        triples.push(triple.into_owned());
    }
    Err(refuse(format!(
        "the offload bundle has no code object for {arch} (entries: {})",
        triples.join(", ")
    )))
}

/// An uncompressed offload bundle of `entries` (triple, body), for tests.
#[doc(hidden)]
pub fn make_bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut header = BUNDLE_MAGIC.to_vec();
    header.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let table: usize = entries.iter().map(|(t, _)| 24 + t.len()).sum();
    let mut offset = header.len() + table;
    let mut bodies = Vec::new();
    for (triple, body) in entries {
        header.extend_from_slice(&(offset as u64).to_le_bytes());
        header.extend_from_slice(&(body.len() as u64).to_le_bytes());
        header.extend_from_slice(&(triple.len() as u64).to_le_bytes());
        header.extend_from_slice(triple.as_bytes());
        bodies.extend_from_slice(body);
        offset += body.len();
    }
    header.extend_from_slice(&bodies);
    header
}

#[cfg(test)]
mod tests {
    use super::*;

    const ELF_A: &[u8] = b"\x7fELF-gfx90a-code";
    const ELF_B: &[u8] = b"\x7fELF-gfx1030-code";

    #[test]
    fn a_raw_code_object_passes_through() {
        assert_eq!(
            code_object_for(ELF_A.to_vec(), "gfx90a").ok(),
            Some(ELF_A.to_vec())
        );
    }

    #[test]
    fn the_agents_entry_is_taken_from_a_bundle() {
        let bundle = make_bundle(&[
            ("host-x86_64-unknown-linux-gnu", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx1030", ELF_B),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-", ELF_A),
        ]);
        assert_eq!(
            code_object_for(bundle.clone(), "gfx90a").ok(),
            Some(ELF_A.to_vec())
        );
        assert_eq!(
            code_object_for(bundle.clone(), "gfx90a:xnack-").ok(),
            Some(ELF_A.to_vec())
        );
        assert_eq!(
            code_object_for(bundle.clone(), "gfx1030").ok(),
            Some(ELF_B.to_vec())
        );
        let old_style = make_bundle(&[("hip-amdgcn-amd-amdhsa-gfx906", ELF_A)]);
        assert_eq!(
            code_object_for(old_style, "gfx906").ok(),
            Some(ELF_A.to_vec())
        );
        let missing = code_object_for(bundle, "gfx942")
            .err()
            .map(|e| e.to_string());
        assert!(
            missing
                .as_deref()
                .is_some_and(|m| m.contains("no code object for gfx942")
                    && m.contains("hipv4-amdgcn-amd-amdhsa--gfx1030")),
            "{missing:?}"
        );
    }

    #[test]
    fn damaged_compressed_or_foreign_input_is_refused() {
        let mut truncated = make_bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx90a", ELF_A)]);
        truncated.truncate(truncated.len() - 4);
        for (bytes, expected) in [
            (truncated, "truncated"),
            (b"CCOB\x01\x00".to_vec(), "compressed"),
            (b"PK\x03\x04".to_vec(), "neither an ELF"),
        ] {
            let message = code_object_for(bytes, "gfx90a")
                .err()
                .map(|e| e.to_string());
            assert!(
                message.as_deref().is_some_and(|m| m.contains(expected)),
                "{expected}: {message:?}"
            );
        }
    }
}
