//! The kernel argument list from a code object's metadata: the `NT_AMDGPU_METADATA` note (owner
//! `AMDGPU`, type 32) of code objects v3 and later, a MessagePack map whose `amdhsa.kernels`
//! entries list each kernel's `.args` with `.value_kind`, `.offset` and `.size` (LLVM
//! AMDGPUUsage, "Code Object V3 Metadata" and later). The explicit arguments' offsets and sizes
//! place the launch's arguments where the compiled kernel reads them; the hidden arguments decide
//! what the launch must fill, or refuse to launch.

/// `NT_AMDGPU_METADATA`.
const NT_AMDGPU_METADATA: u32 = 32;
/// `SHT_NOTE`.
const SHT_NOTE: u32 = 7;
/// Nesting the decoder accepts (the metadata is three levels deep).
const MAX_DEPTH: usize = 16;

/// One hidden argument of a kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiddenArg {
    /// `.value_kind`, e.g. `hidden_block_count_x` or `hidden_hostcall_buffer`.
    pub kind: String,
    /// Byte offset in the kernarg segment.
    pub offset: usize,
    /// Bytes.
    pub size: usize,
}

/// One explicit (declared) parameter of a kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplicitArg {
    /// Byte offset in the kernarg segment.
    pub offset: usize,
    /// Bytes.
    pub size: usize,
}

/// A kernel's arguments as its code object's metadata lists them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KernelArgs {
    /// The declared parameters, in order.
    pub explicit: Vec<ExplicitArg>,
    /// The arguments the compiler appended.
    pub hidden: Vec<HiddenArg>,
}

/// A decoded MessagePack value (the subset code object metadata uses, plus what is skipped).
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Nil,
    Bool(bool),
    Int(i128),
    Float,
    Str(String),
    Bin,
    Array(Vec<Value>),
    Map(Vec<(Value, Value)>),
}

impl Value {
    fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, Value::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    fn as_usize(&self) -> Option<usize> {
        match self {
            Value::Int(i) => usize::try_from(*i).ok(),
            _ => None,
        }
    }
}

struct Decoder<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Decoder<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n)?;
        let slice = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }

    fn uint(&mut self, n: usize) -> Option<u64> {
        let b = self.take(n)?;
        Some(b.iter().fold(0u64, |acc, x| acc << 8 | u64::from(*x)))
    }

    fn int(&mut self, n: usize) -> Option<i128> {
        let raw = self.uint(n)?;
        let shift = 64 - 8 * n as u32;
        Some(i128::from(((raw << shift) as i64) >> shift))
    }

    fn string(&mut self, n: usize) -> Option<Value> {
        let b = self.take(n)?;
        Some(Value::Str(String::from_utf8_lossy(b).into_owned()))
    }

    fn array(&mut self, n: usize, depth: usize) -> Option<Value> {
        let mut items = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            items.push(self.value(depth + 1)?);
        }
        Some(Value::Array(items))
    }

    fn map(&mut self, n: usize, depth: usize) -> Option<Value> {
        let mut items = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let key = self.value(depth + 1)?;
            items.push((key, self.value(depth + 1)?));
        }
        Some(Value::Map(items))
    }

    fn len(&mut self, n: usize) -> Option<usize> {
        usize::try_from(self.uint(n)?).ok()
    }

    fn value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DEPTH {
            return None;
        }
        let tag = *self.take(1)?.first()?;
        Some(match tag {
            0x00..=0x7f => Value::Int(i128::from(tag)),
            0x80..=0x8f => return self.map(usize::from(tag & 0x0f), depth),
            0x90..=0x9f => return self.array(usize::from(tag & 0x0f), depth),
            0xa0..=0xbf => return self.string(usize::from(tag & 0x1f)),
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4..=0xc6 => {
                let n = self.len(1 << (tag - 0xc4))?;
                self.take(n)?;
                Value::Bin
            }
            0xc7..=0xc9 => {
                let n = self.len(1 << (tag - 0xc7))?;
                self.take(n.checked_add(1)?)?;
                Value::Bin
            }
            0xca => {
                self.take(4)?;
                Value::Float
            }
            0xcb => {
                self.take(8)?;
                Value::Float
            }
            0xcc..=0xcf => Value::Int(i128::from(self.uint(1 << (tag - 0xcc))?)),
            0xd0..=0xd3 => Value::Int(self.int(1 << (tag - 0xd0))?),
            0xd4..=0xd8 => {
                self.take((1usize << (tag - 0xd4)) + 1)?;
                Value::Bin
            }
            0xd9..=0xdb => {
                let n = self.len(1 << (tag - 0xd9))?;
                return self.string(n);
            }
            0xdc | 0xdd => {
                let n = self.len(2 << (tag - 0xdc))?;
                return self.array(n, depth);
            }
            0xde | 0xdf => {
                let n = self.len(2 << (tag - 0xde))?;
                return self.map(n, depth);
            }
            0xe0..=0xff => Value::Int(i128::from(tag as i8)),
            0xc1 => return None,
        })
    }
}

fn decode(bytes: &[u8]) -> Option<Value> {
    Decoder { bytes, at: 0 }.value(0)
}

fn le(bytes: &[u8], at: usize, n: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(n)?)?;
    Some(b.iter().rev().fold(0u64, |acc, x| acc << 8 | u64::from(*x)))
}

fn idx(v: u64) -> Option<usize> {
    usize::try_from(v).ok()
}

/// The descriptor of the `NT_AMDGPU_METADATA` note of a 64-bit little-endian ELF, if any.
fn metadata_note(elf: &[u8]) -> Option<&[u8]> {
    if elf.len() < 64 || elf[..4] != *b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        return None;
    }
    let shoff = idx(le(elf, 0x28, 8)?)?;
    let shentsize = idx(le(elf, 0x3a, 2)?)?;
    let shnum = idx(le(elf, 0x3c, 2)?)?;
    if shentsize < 64 {
        return None;
    }
    for i in 0..shnum {
        let sh = shoff.checked_add(i.checked_mul(shentsize)?)?;
        if le(elf, sh + 4, 4)? != u64::from(SHT_NOTE) {
            continue;
        }
        let offset = idx(le(elf, sh + 0x18, 8)?)?;
        let size = idx(le(elf, sh + 0x20, 8)?)?;
        let notes = elf.get(offset..offset.checked_add(size)?)?;
        let mut at = 0;
        while at + 12 <= notes.len() {
            let namesz = idx(le(notes, at, 4)?)?;
            let descsz = idx(le(notes, at + 4, 4)?)?;
            let kind = le(notes, at + 8, 4)?;
            let name_at = at + 12;
            let desc_at = name_at.checked_add(namesz.next_multiple_of(4))?;
            let name = notes.get(name_at..name_at.checked_add(namesz)?)?;
            let desc = notes.get(desc_at..desc_at.checked_add(descsz)?)?;
            if kind == u64::from(NT_AMDGPU_METADATA) && name.starts_with(b"AMDGPU") {
                return Some(desc);
            }
            at = desc_at.checked_add(descsz.next_multiple_of(4))?;
        }
    }
    None
}

/// The names (`.name`, as the compiler wrote them: mangled for C++) of the kernels of the code
/// object `elf`; `None` when it carries no readable metadata.
pub fn kernel_names(elf: &[u8]) -> Option<Vec<String>> {
    let metadata = decode(metadata_note(elf)?)?;
    let Value::Array(kernels) = metadata.get("amdhsa.kernels")? else {
        return None;
    };
    Some(
        kernels
            .iter()
            .filter_map(|k| k.get(".name").and_then(Value::as_str).map(str::to_string))
            .collect(),
    )
}

/// The arguments of kernel `entry` (its `.name`, or `.symbol` `<entry>.kd`) in the code object
/// `elf`; `None` when the code object carries no readable metadata for it.
pub fn kernel_args(elf: &[u8], entry: &str) -> Option<KernelArgs> {
    let metadata = decode(metadata_note(elf)?)?;
    let Value::Array(kernels) = metadata.get("amdhsa.kernels")? else {
        return None;
    };
    let symbol = format!("{entry}.kd");
    let kernel = kernels.iter().find(|k| {
        k.get(".name").and_then(Value::as_str) == Some(entry)
            || k.get(".symbol").and_then(Value::as_str) == Some(symbol.as_str())
    })?;
    let args = match kernel.get(".args") {
        Some(Value::Array(args)) => args.as_slice(),
        None => &[],
        Some(_) => return None,
    };
    let mut list = KernelArgs::default();
    for arg in args {
        let kind = arg.get(".value_kind")?.as_str()?;
        let offset = arg.get(".offset")?.as_usize()?;
        let size = arg.get(".size")?.as_usize()?;
        if kind.starts_with("hidden_") {
            list.hidden.push(HiddenArg {
                kind: kind.to_string(),
                offset,
                size,
            });
        } else {
            list.explicit.push(ExplicitArg { offset, size });
        }
    }
    Some(list)
}

/// The hidden arguments alone (see [`kernel_args`]).
#[cfg(test)]
pub fn hidden_args(elf: &[u8], entry: &str) -> Option<Vec<HiddenArg>> {
    kernel_args(elf, entry).map(|args| args.hidden)
}

#[cfg(test)]
pub mod tests {
    use super::{ExplicitArg, HiddenArg, decode, hidden_args, kernel_args};

    /// A tiny MessagePack encoder for the metadata shapes used here.
    pub enum M<'a> {
        S(&'a str),
        I(u64),
        A(Vec<M<'a>>),
        Map(Vec<(&'a str, M<'a>)>),
    }

    pub fn encode(value: &M<'_>, out: &mut Vec<u8>) {
        match value {
            M::S(s) => {
                out.push(0xd9);
                out.push(s.len() as u8);
                out.extend_from_slice(s.as_bytes());
            }
            M::I(i) => {
                out.push(0xcf);
                out.extend_from_slice(&i.to_be_bytes());
            }
            M::A(items) => {
                out.push(0xdc);
                out.extend_from_slice(&(items.len() as u16).to_be_bytes());
                for item in items {
                    encode(item, out);
                }
            }
            M::Map(entries) => {
                out.push(0xde);
                out.extend_from_slice(&(entries.len() as u16).to_be_bytes());
                for (k, v) in entries {
                    encode(&M::S(k), out);
                    encode(v, out);
                }
            }
        }
    }

    /// A minimal 64-bit ELF with one SHT_NOTE section holding an AMDGPU metadata note.
    pub fn elf_with_metadata(metadata: &[u8]) -> Vec<u8> {
        let mut note = Vec::new();
        note.extend_from_slice(&7u32.to_le_bytes());
        note.extend_from_slice(&(metadata.len() as u32).to_le_bytes());
        note.extend_from_slice(&32u32.to_le_bytes());
        note.extend_from_slice(b"AMDGPU\0\0");
        note.extend_from_slice(metadata);
        note.resize(note.len().next_multiple_of(4), 0);
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        elf[7] = 64;
        elf[8] = 3;
        let note_at = elf.len();
        elf.extend_from_slice(&note);
        let shoff = elf.len();
        elf[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        elf[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes());
        elf.extend_from_slice(&[0u8; 64]);
        let mut sh = [0u8; 64];
        sh[4..8].copy_from_slice(&7u32.to_le_bytes());
        sh[0x18..0x20].copy_from_slice(&(note_at as u64).to_le_bytes());
        sh[0x20..0x28].copy_from_slice(&(note.len() as u64).to_le_bytes());
        elf.extend_from_slice(&sh);
        elf
    }

    /// A code object whose kernel `name` has one explicit pointer and `hidden` (kind, offset,
    /// size) arguments.
    pub fn code_object(name: &str, hidden: &[(&str, u64, u64)]) -> Vec<u8> {
        let mut args = vec![M::Map(vec![
            (".offset", M::I(0)),
            (".size", M::I(8)),
            (".value_kind", M::S("global_buffer")),
        ])];
        for (kind, offset, size) in hidden {
            args.push(M::Map(vec![
                (".offset", M::I(*offset)),
                (".size", M::I(*size)),
                (".value_kind", M::S(kind)),
            ]));
        }
        let symbol = format!("{name}.kd");
        let metadata = M::Map(vec![
            (
                "amdhsa.kernels",
                M::A(vec![M::Map(vec![
                    (".args", M::A(args)),
                    (".name", M::S(name)),
                    (".symbol", M::S(&symbol)),
                ])]),
            ),
            ("amdhsa.version", M::A(vec![M::I(1), M::I(2)])),
        ]);
        let mut bytes = Vec::new();
        encode(&metadata, &mut bytes);
        elf_with_metadata(&bytes)
    }

    #[test]
    fn hidden_arguments_come_from_the_metadata_note() {
        let elf = code_object(
            "k",
            &[
                ("hidden_block_count_x", 8, 4),
                ("hidden_hostcall_buffer", 88, 8),
            ],
        );
        let hidden = hidden_args(&elf, "k").unwrap();
        assert_eq!(
            hidden,
            vec![
                HiddenArg {
                    kind: "hidden_block_count_x".into(),
                    offset: 8,
                    size: 4
                },
                HiddenArg {
                    kind: "hidden_hostcall_buffer".into(),
                    offset: 88,
                    size: 8
                },
            ]
        );
        let all = kernel_args(&elf, "k").unwrap();
        assert_eq!(all.explicit, vec![ExplicitArg { offset: 0, size: 8 }]);
        assert_eq!(all.hidden, hidden);
        assert_eq!(hidden_args(&elf, "other"), None);
        assert_eq!(hidden_args(&elf[..40], "k"), None);
    }

    #[test]
    fn the_decoder_reads_compact_forms_and_refuses_truncation() {
        // {"a": [1, -2, true, nil, 1.5f32], "b": "xy"} in the compact forms.
        let bytes = [
            0x82, 0xa1, b'a', 0x95, 0x01, 0xfe, 0xc3, 0xc0, 0xca, 0x3f, 0xc0, 0, 0, 0xa1, b'b',
            0xa2, b'x', b'y',
        ];
        let v = decode(&bytes).unwrap();
        assert_eq!(v.get("b").and_then(|s| s.as_str()), Some("xy"));
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        // Deep nesting is refused, not recursed into without bound.
        assert!(decode(&[0x91; 64]).is_none());
    }
}
