//! Which kernels of a module's PTX wait at a grid barrier (`this_grid().sync()`,
//! `cg::sync(grid)`), and where in their source.
//!
//! Cooperative groups' grid barrier reads the grid's workspace from the environment registers
//! `%envreg1` / `%envreg2`, which only a cooperative launch fills, and traps when it is null.
//! Outside a cooperative launch that trap ends the kernel with `CUDA_ERROR_LAUNCH_FAILED` and
//! the context is lost for everything else on the device (seen on an H200, driver 580.159). So
//! the backend refuses such a launch before it is made, as the simulator refuses it, and needs
//! to know which kernels have the barrier.
//!
//! Contract: a function *has a grid barrier* when its body reads `%envreg1` or `%envreg2` and
//! holds a `trap` (the workspace check's); a kernel has one when it, or a function it calls
//! (directly or not), has one. The place given is the last `.loc` before the first such `trap`
//! in the module's own source file, named as it was compiled (the line that calls the barrier:
//! the header's lines are `inlined_at` it), else the nearest `.loc` at all, by its path. A kernel that reads the workspace and traps
//! for another reason is also refused outside a cooperative launch; such a kernel can always
//! be launched cooperatively.

use std::collections::{HashMap, HashSet};

/// Where a kernel's grid barrier is: the file as the PTX names it, and the line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GridSync {
    /// The source file (`.file` of the PTX), `None` without line information.
    pub file: Option<String>,
    /// The line in it (0 when unknown).
    pub line: u32,
}

impl GridSync {
    /// `file:line`, or a note that the PTX has no line information.
    pub fn place(&self) -> String {
        match &self.file {
            Some(file) => format!("{file}:{}", self.line),
            None => "a line the PTX does not give".to_string(),
        }
    }
}

/// One function (`.entry` or `.func`) of the PTX.
#[derive(Debug, Default)]
struct Function {
    name: String,
    entry: bool,
    reads_workspace: bool,
    /// The `(file index, line)` of the `.loc` lines before the first `trap`, last first.
    trap_locations: Option<Vec<(u32, u32)>>,
    calls: Vec<String>,
}

/// The kernels (`.entry` names) of `ptx` that have a grid barrier, with its place; `own_file`
/// is how the module's source file ends in the PTX's `.file` lines (its program name).
pub fn kernels_with_grid_sync(ptx: &str, own_file: &str) -> HashMap<String, GridSync> {
    let (functions, files) = functions(ptx);
    let by_name: HashMap<&str, &Function> =
        functions.iter().map(|f| (f.name.as_str(), f)).collect();
    let mut found = HashMap::new();
    for entry in functions.iter().filter(|f| f.entry) {
        if let Some(function) = first_with_barrier(entry, &by_name) {
            let locations = function.trap_locations.as_deref().unwrap_or(&[]);
            let own = locations
                .iter()
                .find(|(file, _)| files.get(file).is_some_and(|path| path.ends_with(own_file)));
            // The module's own file by the name it was compiled as (NVRTC puts its working
            // directory in front), a header by its path.
            let (file, line) = match own {
                Some(&(_, line)) => (Some(own_file.to_string()), line),
                None => locations
                    .first()
                    .map_or((None, 0), |(file, line)| (files.get(file).cloned(), *line)),
            };
            found.insert(entry.name.clone(), GridSync { file, line });
        }
    }
    found
}

/// The first function with a grid barrier among `entry` and what it calls.
fn first_with_barrier<'f>(
    entry: &'f Function,
    by_name: &HashMap<&str, &'f Function>,
) -> Option<&'f Function> {
    let mut seen = HashSet::new();
    let mut stack = vec![entry];
    while let Some(function) = stack.pop() {
        if !seen.insert(function.name.as_str()) {
            continue;
        }
        if function.reads_workspace && function.trap_locations.is_some() {
            return Some(function);
        }
        stack.extend(
            function
                .calls
                .iter()
                .filter_map(|c| by_name.get(c.as_str())),
        );
    }
    None
}

/// The PTX's functions, and its `.file` table (index to path).
fn functions(ptx: &str) -> (Vec<Function>, HashMap<u32, String>) {
    let mut functions = Vec::new();
    let mut files = HashMap::new();
    let mut current: Option<Function> = None;
    let mut depth = 0usize;
    let mut locations: Vec<(u32, u32)> = Vec::new();
    for line in ptx.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix(".file") {
            if let Some((index, path)) = file_line(rest) {
                files.insert(index, path);
            }
            continue;
        }
        if current.is_none() {
            if let Some((name, entry)) = declared_function(line) {
                current = Some(Function {
                    name,
                    entry,
                    ..Function::default()
                });
                depth = 0;
                locations.clear();
            } else {
                continue;
            }
        }
        let Some(function) = current.as_mut() else {
            continue;
        };
        // A prototype (`.func f(...);`) has no body.
        if depth == 0 && line.ends_with(';') && !line.contains('{') {
            current = None;
            continue;
        }
        if line.contains("%envreg1") || line.contains("%envreg2") {
            function.reads_workspace = true;
        }
        if let Some(rest) = line.strip_prefix(".loc") {
            locations.extend(loc_places(rest));
        }
        if (line == "trap;" || line.starts_with("trap;")) && function.trap_locations.is_none() {
            function.trap_locations = Some(locations.iter().rev().copied().collect());
        }
        if let Some(callee) = callee(line) {
            function.calls.push(callee);
        }
        let opened = line.matches('{').count();
        let closed = line.matches('}').count();
        let was_open = depth > 0;
        depth = (depth + opened).saturating_sub(closed);
        if (was_open || opened > 0) && depth == 0 {
            functions.extend(current.take());
        }
    }
    (functions, files)
}

/// `(name, is_entry)` of a line declaring a function: `.visible .entry k(`, `.func f(`,
/// `.func (.param .b32 r) f(`.
fn declared_function(line: &str) -> Option<(String, bool)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words.iter().position(|w| *w == ".entry" || *w == ".func")?;
    if !words[..at]
        .iter()
        .all(|w| matches!(*w, ".visible" | ".weak" | ".extern"))
    {
        return None;
    }
    let entry = words[at] == ".entry";
    let mut rest = line[line.find(words[at])? + words[at].len()..].trim_start();
    // A return value in parentheses comes before the name.
    if rest.starts_with('(') {
        rest = rest[rest.find(')')? + 1..].trim_start();
    }
    let name: String = rest
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != '(' && *c != ';')
        .collect();
    (!name.is_empty()).then_some((name, entry))
}

/// The index and path of a `.file` line's rest: `1 "/tmp/k.cu"` (optionally with a timestamp
/// and size after the path).
fn file_line(rest: &str) -> Option<(u32, String)> {
    let rest = rest.trim();
    let (index, path) = rest.split_once(char::is_whitespace)?;
    let path = path.trim().strip_prefix('"')?;
    Some((index.parse().ok()?, path[..path.find('"')?].to_string()))
}

/// The places a `.loc` line's rest names: `1 109 5` and, after `inlined_at`, `2 1061 5`.
fn loc_places(rest: &str) -> Vec<(u32, u32)> {
    let place = |text: &str| -> Option<(u32, u32)> {
        let mut numbers = text
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|w| !w.is_empty());
        Some((numbers.next()?.parse().ok()?, numbers.next()?.parse().ok()?))
    };
    let (head, inlined) = rest
        .split_once("inlined_at")
        .map_or((rest, None), |(head, inlined)| (head, Some(inlined)));
    // The caller's place first, so that read back to front the line itself comes before it.
    inlined
        .and_then(place)
        .into_iter()
        .chain(place(head))
        .collect()
}

/// The function a `call` instruction names: `call.uni (retval0), f, (param0);`,
/// `call.uni f, (param0);`, `@%p1 call f;`.
fn callee(line: &str) -> Option<String> {
    let line = match line.strip_prefix('@') {
        // A predicate guards it.
        Some(guarded) => guarded.split_once(char::is_whitespace)?.1.trim_start(),
        None => line,
    };
    let operands = line.strip_prefix("call")?;
    // The opcode's modifiers (`.uni`) end at the first space.
    let (modifiers, mut text) = operands.split_once(char::is_whitespace)?;
    if !modifiers.is_empty() && !modifiers.starts_with('.') {
        return None;
    }
    text = text.trim_start();
    if text.starts_with('(') {
        text = text[text.find(')')? + 1..]
            .trim_start()
            .strip_prefix(',')?
            .trim_start();
    }
    let name: String = text
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != ',' && *c != ';' && *c != '(')
        .collect();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What NVRTC 13 writes for cuda-samples' reductionMultiBlockCG with `-lineinfo` (abridged):
    /// the workspace read, the null check's trap inlined from the header at the source's line
    /// 109 (`cg::sync(grid)`).
    const GRID_SYNC: &str = r#"
.visible .entry reduceSinglePassMultiBlockCG(
	.param .u64 reduceSinglePassMultiBlockCG_param_0,
	.param .u32 reduceSinglePassMultiBlockCG_param_2
)
{
	.loc	1 70 0
	// begin inline asm
	mov.u32 %r25, %envreg2;
	// end inline asm
	mov.u32 %r26, %envreg1;
	bfi.b64 	%rd2, %rd20, %rd19, 32, 32;
	.loc	1 109 5
	.loc	2 1061 5, function_name $L__info_string25, inlined_at 1 109 5
	.loc	2 180 13, function_name $L__info_string26, inlined_at 2 1061 5
	setp.ne.s64 	%p17, %rd2, 0;
	@%p17 bra 	$L__BB0_13;
	// begin inline asm
	trap;
	// end inline asm
$L__BB0_13:
	ret;
}
.visible .entry plain(
	.param .u64 plain_param_0
)
{
	.loc	1 120 3
	ret;
}
	.file	1 "/tmp/reductionMultiBlockCG.cu"
	.file	2 "/usr/local/cuda/include/cooperative_groups.h"
"#;

    #[test]
    fn a_grid_barrier_is_found_at_the_line_that_calls_it() {
        let found = kernels_with_grid_sync(GRID_SYNC, "reductionMultiBlockCG.cu");
        let sync = &found["reduceSinglePassMultiBlockCG"];
        assert_eq!(sync.file.as_deref(), Some("reductionMultiBlockCG.cu"));
        assert_eq!(sync.line, 109);
        assert_eq!(sync.place(), "reductionMultiBlockCG.cu:109");
        assert!(!found.contains_key("plain"), "{found:?}");
    }

    #[test]
    fn a_barrier_in_a_called_function_counts_for_the_kernel() {
        let ptx = r#"
.func  (.param .b32 func_retval0) _Z4waitv(
)
{
	mov.u32 %r1, %envreg1;
	.loc	1 7 3
	trap;
	ret;
}
.visible .entry calls_it(
)
{
	{ // callseq 0, 0
	call.uni (retval0), _Z4waitv, ();
	} // callseq 0
	ret;
}
.visible .entry traps_alone(
)
{
	.loc	1 12 3
	trap;
	ret;
}
	.file	1 "k.cu"
"#;
        let found = kernels_with_grid_sync(ptx, "k.cu");
        assert_eq!(found["calls_it"].line, 7);
        // A trap without the workspace read is the kernel's own (`__trap()`): not a barrier.
        assert!(!found.contains_key("traps_alone"), "{found:?}");
        assert!(!found.contains_key("_Z4waitv"), "only kernels: {found:?}");
    }

    #[test]
    fn calls_are_read_with_and_without_return_values() {
        assert_eq!(callee("call.uni (retval0), f, (p0);").as_deref(), Some("f"));
        assert_eq!(callee("call.uni g, (p0);").as_deref(), Some("g"));
        assert_eq!(callee("call h;").as_deref(), Some("h"));
        assert_eq!(callee("@%p1 call.uni k, ();").as_deref(), Some("k"));
        assert_eq!(callee("mov.u32 %r1, %r2;"), None);
    }

    #[test]
    fn functions_are_declared_with_or_without_a_return_value() {
        assert_eq!(
            declared_function(".visible .entry k("),
            Some(("k".to_string(), true))
        );
        assert_eq!(
            declared_function(".func  (.param .b32 func_retval0) _Z1fv("),
            Some(("_Z1fv".to_string(), false))
        );
        assert_eq!(declared_function("ld.param.u64 %rd1, [k_param_0];"), None);
    }
}
