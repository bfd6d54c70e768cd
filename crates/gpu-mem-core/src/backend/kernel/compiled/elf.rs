//! The symbol table of a compiled module (an ELF file: a simulator library, an AMD GPU code
//! object): what each defined symbol is called, what it is, where and how large. Reading never
//! panics: offsets are checked, a damaged file is `None`.

/// A symbol of the symbol table (`.symtab`): its name, type (`STT_*`), value (an offset in the
/// loaded library for a shared library's definitions) and size; only symbols defined in a
/// section of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Its name, as the compiler wrote it (mangled for C++).
    pub name: String,
    /// `STT_*`.
    pub kind: u8,
    /// Its value: an offset from the load address for a shared library's definitions.
    pub value: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// `STT_OBJECT`: a data object.
pub const STT_OBJECT: u8 = 1;
/// `STT_FUNC`: a function.
pub const STT_FUNC: u8 = 2;
/// `STT_TLS`: a thread-local variable.
pub const STT_TLS: u8 = 6;

/// The symbols defined in the file (see [`Symbol`]); `None` when it has no readable symbol
/// table.
pub fn symbols(bytes: &[u8]) -> Option<Vec<Symbol>> {
    const SHT_SYMTAB: u32 = 2;
    const SYMBOL_BYTES: usize = 24;
    if bytes.get(..4)? != b"\x7fELF" || *bytes.get(4)? != 2 || *bytes.get(5)? != 1 {
        return None;
    }
    let r = Reader(bytes);
    let shoff = usize::try_from(r.u64_at(0x28)?).ok()?;
    let shentsize = usize::from(r.u16_at(0x3A)?);
    let shnum = usize::from(r.u16_at(0x3C)?);
    let section = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
    let (symtab, strtab) = (0..shnum).find_map(|i| {
        let header = section(i)?;
        (r.u32_at(header.checked_add(4)?)? == SHT_SYMTAB).then_some(())?;
        let link = usize::try_from(r.u32_at(header.checked_add(0x28)?)?).ok()?;
        Some((header, section(link)?))
    })?;
    let (start, size) = (
        usize::try_from(r.u64_at(symtab.checked_add(0x18)?)?).ok()?,
        usize::try_from(r.u64_at(symtab.checked_add(0x20)?)?).ok()?,
    );
    let names = usize::try_from(r.u64_at(strtab.checked_add(0x18)?)?).ok()?;
    let end = start.checked_add(size)?;
    let mut out = Vec::new();
    for symbol in (start..end).step_by(SYMBOL_BYTES) {
        if symbol.checked_add(SYMBOL_BYTES)? > end {
            break;
        }
        let section_index = r.u16_at(symbol.checked_add(6)?)?;
        if section_index == 0 {
            continue; // undefined here
        }
        let name_at = names.checked_add(usize::try_from(r.u32_at(symbol)?).ok()?)?;
        let name = bytes.get(name_at..)?;
        let name = &name[..name.iter().position(|&b| b == 0)?];
        out.push(Symbol {
            name: String::from_utf8_lossy(name).into_owned(),
            kind: r.u8_at(symbol.checked_add(4)?)? & 0xf,
            value: r.u64_at(symbol.checked_add(8)?)?,
            size: r.u64_at(symbol.checked_add(0x10)?)?,
        });
    }
    Some(out)
}

/// Little-endian reads that fail (`None`) past the end of the file.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u8_at(&self, at: usize) -> Option<u8> {
        self.0.get(at).copied()
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_not_elf64_has_no_symbols() {
        assert_eq!(symbols(b"not an elf file at all"), None);
        assert_eq!(symbols(&[]), None);
        let mut header = vec![0u8; 64];
        header[..6].copy_from_slice(b"\x7fELF\x02\x01");
        // No section headers: no symbol table.
        assert_eq!(symbols(&header), None);
    }
}
