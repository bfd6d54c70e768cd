//! What the CUDA backend reads from a module's PTX: its kernels (`.entry`) with their
//! parameters' sizes, and its variables (`.global`, `.const`), by the names the driver looks
//! them up by — and how a kernel or variable named as the source spells it (`vector_add`,
//! `ns::kernel`, `mask<float>`) finds its mangled name there.
//!
//! Contract: the parameters' sizes are what `cuLaunchKernel` reads for each argument, so the
//! launch can tell a pointer (8 bytes) from a `gm_array<T, N>` (`8 + 16 N`) and check every
//! argument, whatever the driver's version; names are compared as the source spells them
//! (`gpu_mem_core::kernel::compiled::is_named`: `_Z10vector_addPKfS0_Pfi` is `vector_add`,
//! `_ZN2ns1kEPfi` is `ns::k`), and a name two entries match (overloads) is ambiguous.

use super::grid_sync::{GridSync, kernels_with_grid_sync};
use gpu_mem_core::kernel::compiled::{is_named, source_name};

/// A kernel of the PTX: its name there, its parameters' sizes in bytes, and its grid barrier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxEntry {
    /// Its name in the PTX (mangled for C++).
    pub name: String,
    /// Each parameter's size in bytes.
    pub param_sizes: Vec<usize>,
    /// Where it waits at a grid barrier, which needs a cooperative launch (`grid_sync`).
    pub grid_sync: Option<GridSync>,
}

/// The kernels and variables of a module's PTX.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PtxModule {
    /// Its kernels.
    pub entries: Vec<PtxEntry>,
    /// Its module-scope variables' names in the PTX.
    pub variables: Vec<String>,
}

/// Bytes of a PTX fundamental type (`.u32`, `.f64`, `.b8` ...).
fn type_size(ty: &str) -> Option<usize> {
    let bits: usize = ty
        .trim_start_matches('.')
        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .ok()?;
    bits.is_multiple_of(8).then_some(bits / 8)
}

/// The size of one `.param` declaration: its type's size times its array extent.
fn param_size(declaration: &str) -> Option<usize> {
    let mut size = None;
    for word in declaration.split_whitespace() {
        if let Some(s) = type_size(word).filter(|_| word.starts_with('.') && word != ".param") {
            size = Some(s);
        }
    }
    let size = size?;
    let count = match (declaration.rfind('['), declaration.rfind(']')) {
        (Some(open), Some(close)) if open < close => {
            declaration[open + 1..close].trim().parse::<usize>().ok()?
        }
        _ => 1,
    };
    size.checked_mul(count)
}

/// Reads `ptx`'s entries and module-scope variables; `program` is the name the source was
/// compiled as (how its `.file` line ends), which places grid barriers.
pub fn read(ptx: &str, program: &str) -> PtxModule {
    let mut module = PtxModule::default();
    let mut grid_syncs = kernels_with_grid_sync(ptx, program);
    let mut lines = ptx.lines().map(str::trim).peekable();
    while let Some(line) = lines.next() {
        if let Some(at) = line.find(".entry ") {
            let rest = &line[at + ".entry ".len()..];
            let name = rest
                .split(|c: char| c == '(' || c.is_whitespace())
                .next()
                .unwrap_or("")
                .to_string();
            let mut header = rest.to_string();
            while !header.contains(')') {
                match lines.next() {
                    Some(next) => {
                        header.push(' ');
                        header.push_str(next);
                    }
                    None => break,
                }
            }
            let params = header
                .find('(')
                .zip(header.rfind(')'))
                .map(|(open, close)| &header[open + 1..close.max(open + 1)])
                .unwrap_or("");
            let param_sizes = params
                .split(',')
                .filter(|p| p.contains(".param"))
                .map(|p| param_size(p).unwrap_or(0))
                .collect();
            let grid_sync = grid_syncs.remove(&name);
            module.entries.push(PtxEntry {
                name,
                param_sizes,
                grid_sync,
            });
        } else if (line.starts_with(".global")
            || line.starts_with(".const")
            || line.starts_with(".visible .global")
            || line.starts_with(".visible .const"))
            && line.ends_with(';')
            && let Some(name) = variable_name(line)
        {
            module.variables.push(name);
        }
    }
    module
}

/// The name declared by a module-scope `.global` / `.const` line.
fn variable_name(line: &str) -> Option<String> {
    let declaration = line.split('=').next()?.trim().trim_end_matches(';').trim();
    let last = declaration.split_whitespace().last()?;
    let name = last.split('[').next()?;
    (!name.is_empty() && !name.starts_with('.')).then(|| name.to_string())
}

/// The entry the source calls `name` (qualified, without template arguments: instantiations
/// are found by their lowered names) in `module`: its C name, or the one C++ name that reads
/// as it. `Err` with the candidates when several do (overloads).
pub fn find_entry<'m>(module: &'m PtxModule, name: &str) -> Result<Option<&'m PtxEntry>, String> {
    let matching: Vec<&PtxEntry> = module
        .entries
        .iter()
        .filter(|e| is_named(&e.name, name))
        .collect();
    match matching[..] {
        [] => Ok(None),
        [one] => Ok(Some(one)),
        _ => Err(format!(
            "`{name}` is overloaded ({}): give each kernel its own name",
            matching
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The PTX name of the variable the source calls `name` (`table`, `ns::table`, `mask<float>`).
pub fn find_variable<'m>(module: &'m PtxModule, name: &str) -> Option<&'m str> {
    module
        .variables
        .iter()
        .find(|v| is_named(v, name))
        .map(String::as_str)
}

/// What the module's kernels are called in the source, for messages.
pub fn entry_names(module: &PtxModule) -> Vec<String> {
    module
        .entries
        .iter()
        .map(|e| source_name(&e.name))
        .collect()
}

/// What the module's variables are called in the source, for messages.
pub fn variable_names(module: &PtxModule) -> Vec<String> {
    let mut names: Vec<String> = module.variables.iter().map(|v| source_name(v)).collect();
    names.sort_unstable();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What NVRTC 13 wrote for `tests/kernels/cuda/pointers.cu`-like source (abridged).
    const PTX: &str = "\
.version 9.0
.target sm_90
.address_size 64
.const .align 4 .b8 coeffs[16];
.global .align 4 .u32 hidden;
.global .align 4 .u32 _ZN2ns5innerE;
.global .align 4 .b8 table[8] = {1, 0, 0, 0, 2, 0, 0, 0};
	// .globl	_Z4vaddPKfPfi
.visible .entry _Z4vaddPKfPfi(
	.param .u64 _Z4vaddPKfPfi_param_0,
	.param .u64 .ptr .align 1 _Z4vaddPKfPfi_param_1,
	.param .u32 _Z4vaddPKfPfi_param_2
)
{
	ret;
}
.visible .entry _Z2st1SP6float47double2(
	.param .align 4 .b8 _Z2st1SP6float47double2_param_0[8],
	.param .u64 _Z2st1SP6float47double2_param_1,
	.param .align 16 .b8 _Z2st1SP6float47double2_param_2[16]
)
{
	ret;
}
.visible .entry _ZN2ns1kEPfi(
	.param .u64 _ZN2ns1kEPfi_param_0,
	.param .u32 _ZN2ns1kEPfi_param_1
)
{
	ret;
}
.visible .entry plain_c()
{
	ret;
}
.visible .entry _Z1oPf(.param .u64 _Z1oPf_param_0)
{
	ret;
}
.visible .entry _Z1oPi(.param .u64 _Z1oPi_param_0)
{
	ret;
}
";

    #[test]
    fn entries_and_their_parameter_sizes() {
        let m = read(PTX, "k.cu");
        let sizes = |name: &str| {
            m.entries
                .iter()
                .find(|e| e.name == name)
                .map(|e| e.param_sizes.clone())
        };
        assert_eq!(sizes("_Z4vaddPKfPfi"), Some(vec![8, 8, 4]));
        assert_eq!(sizes("_Z2st1SP6float47double2"), Some(vec![8, 8, 16]));
        assert_eq!(sizes("_ZN2ns1kEPfi"), Some(vec![8, 4]));
        assert_eq!(sizes("plain_c"), Some(vec![]));
        assert_eq!(m.variables, ["coeffs", "hidden", "_ZN2ns5innerE", "table"]);
    }

    #[test]
    fn source_names_find_their_mangled_entries() {
        let m = read(PTX, "k.cu");
        let found = |name: &str| find_entry(&m, name).map(|e| e.map(|e| e.name.clone()));
        assert_eq!(found("vadd"), Ok(Some("_Z4vaddPKfPfi".into())));
        assert_eq!(found("ns::k"), Ok(Some("_ZN2ns1kEPfi".into())));
        assert_eq!(found("::plain_c"), Ok(Some("plain_c".into())));
        assert_eq!(found("vad"), Ok(None));
        assert_eq!(found("k"), Ok(None));
        assert!(found("o").unwrap_err().contains("overloaded"));
        assert_eq!(find_variable(&m, "ns::inner"), Some("_ZN2ns5innerE"));
        assert_eq!(find_variable(&m, "hidden"), Some("hidden"));
        assert_eq!(find_variable(&m, "inner"), None);
        assert_eq!(entry_names(&m)[0], "vadd");
    }
}
