//! Just enough ELF64 (little-endian) reading to check code objects and shared libraries:
//! the header's machine and flags, and the names in the symbol tables.

/// `EM_AMDGPU` from the ELF specification's machine list.
pub const EM_AMDGPU: u16 = 224;

const SHT_SYMTAB: u32 = 2;
const SHT_DYNSYM: u32 = 11;
const SHN_UNDEF: u16 = 0;

/// A parsed ELF64 file.
pub struct Elf<'a> {
    bytes: &'a [u8],
}

/// One symbol-table entry.
#[derive(Debug, Clone)]
pub struct Symbol {
    pub name: String,
    /// `STT_*` (low 4 bits of st_info).
    pub kind: u8,
    /// `false` for undefined (imported) symbols.
    pub defined: bool,
}

fn u16_at(b: &[u8], o: usize) -> Result<u16, String> {
    b.get(o..o + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or_else(|| format!("ELF truncated at {o}"))
}
fn u32_at(b: &[u8], o: usize) -> Result<u32, String> {
    b.get(o..o + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| format!("ELF truncated at {o}"))
}
fn u64_at(b: &[u8], o: usize) -> Result<u64, String> {
    b.get(o..o + 8)
        .map(|s| u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]))
        .ok_or_else(|| format!("ELF truncated at {o}"))
}
fn usize_at(b: &[u8], o: usize) -> Result<usize, String> {
    usize::try_from(u64_at(b, o)?).map_err(|e| e.to_string())
}

struct Section {
    kind: u32,
    offset: usize,
    size: usize,
    link: u32,
    entsize: usize,
}

impl<'a> Elf<'a> {
    /// Checks the identification bytes (ELF magic, 64-bit, little-endian).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, String> {
        if bytes.len() < 64 || &bytes[0..4] != b"\x7fELF" {
            return Err(format!("not an ELF file ({} bytes)", bytes.len()));
        }
        if bytes[4] != 2 || bytes[5] != 1 {
            return Err(format!(
                "not ELF64 little-endian (class {}, data {})",
                bytes[4], bytes[5]
            ));
        }
        Ok(Elf { bytes })
    }

    pub fn machine(&self) -> Result<u16, String> {
        u16_at(self.bytes, 18)
    }

    pub fn flags(&self) -> Result<u32, String> {
        u32_at(self.bytes, 48)
    }

    fn sections(&self) -> Result<Vec<Section>, String> {
        let b = self.bytes;
        let shoff = usize_at(b, 0x28)?;
        let shentsize = usize::from(u16_at(b, 0x3A)?);
        let shnum = usize::from(u16_at(b, 0x3C)?);
        (0..shnum)
            .map(|i| {
                let h = shoff + i * shentsize;
                Ok(Section {
                    kind: u32_at(b, h + 4)?,
                    offset: usize_at(b, h + 0x18)?,
                    size: usize_at(b, h + 0x20)?,
                    link: u32_at(b, h + 0x28)?,
                    entsize: usize_at(b, h + 0x38)?,
                })
            })
            .collect()
    }

    /// Every symbol of `.symtab` (when `dynamic` is false) or `.dynsym`.
    pub fn symbols(&self, dynamic: bool) -> Result<Vec<Symbol>, String> {
        let wanted = if dynamic { SHT_DYNSYM } else { SHT_SYMTAB };
        let sections = self.sections()?;
        let mut out = Vec::new();
        for s in sections.iter().filter(|s| s.kind == wanted) {
            let strtab = sections
                .get(s.link as usize)
                .ok_or_else(|| format!("bad sh_link {}", s.link))?;
            let strings = self
                .bytes
                .get(strtab.offset..strtab.offset + strtab.size)
                .ok_or("string table outside the file")?;
            let entsize = if s.entsize == 0 { 24 } else { s.entsize };
            for i in 0..s.size / entsize {
                let e = s.offset + i * entsize;
                let name_off = u32_at(self.bytes, e)? as usize;
                let info = *self.bytes.get(e + 4).ok_or("symbol outside the file")?;
                let shndx = u16_at(self.bytes, e + 6)?;
                let name_bytes = strings.get(name_off..).ok_or("bad symbol name offset")?;
                let end = name_bytes
                    .iter()
                    .position(|c| *c == 0)
                    .unwrap_or(name_bytes.len());
                out.push(Symbol {
                    name: String::from_utf8_lossy(&name_bytes[..end]).into_owned(),
                    kind: info & 0xf,
                    defined: shndx != SHN_UNDEF,
                });
            }
        }
        Ok(out)
    }
}
