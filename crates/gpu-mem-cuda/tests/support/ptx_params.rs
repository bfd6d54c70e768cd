//! Reads a kernel's parameter list from PTX: what NVRTC compiled each parameter to.

// Each test target includes this file and uses a different part of it.
#![allow(dead_code)]

/// One `.param` of an `.entry`: its size and alignment in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtxParam {
    pub size: usize,
    pub align: usize,
}

/// The parameters of `.entry <entry>(...)`, in order.
///
/// Handles the two forms NVRTC emits: aggregates as `.param .align A .b8 name[S]` and scalars
/// or pointers as `.param .<type><bits> [.ptr ...] name` (size and alignment = bits / 8).
pub fn entry_params(ptx: &str, entry: &str) -> Result<Vec<PtxParam>, String> {
    let header = format!(".entry {entry}(");
    let start = ptx
        .find(&header)
        .ok_or_else(|| format!("no `{header}` in the PTX"))?;
    let rest = &ptx[start + header.len()..];
    let end = rest
        .find(')')
        .ok_or_else(|| format!("unterminated parameter list of {entry}"))?;
    rest[..end]
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(parse_param)
        .collect()
}

fn parse_param(decl: &str) -> Result<PtxParam, String> {
    let tokens: Vec<&str> = decl.split_whitespace().collect();
    if tokens.first() != Some(&".param") {
        return Err(format!("not a .param: `{decl}`"));
    }
    if let Some(i) = tokens.iter().position(|t| *t == ".align") {
        let align = tokens
            .get(i + 1)
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| format!("bad .align in `{decl}`"))?;
        // An aggregate: `.b8 name[size]`.
        if tokens.get(i + 2) == Some(&".b8") {
            let name = tokens
                .get(i + 3)
                .ok_or_else(|| format!("no name in `{decl}`"))?;
            let open = name
                .find('[')
                .ok_or_else(|| format!("no [size] in `{decl}`"))?;
            let size = name[open + 1..name.len() - 1]
                .parse()
                .map_err(|e| format!("bad size in `{decl}`: {e}"))?;
            return Ok(PtxParam { size, align });
        }
    }
    // A scalar: `.param .u64 ...`, `.param .f32 ...`, `.param .b8 ...`.
    let ty = tokens
        .get(1)
        .ok_or_else(|| format!("no type in `{decl}`"))?;
    let bits: usize = ty
        .trim_start_matches('.')
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .map_err(|e| format!("bad type `{ty}` in `{decl}`: {e}"))?;
    Ok(PtxParam {
        size: bits / 8,
        align: bits / 8,
    })
}
