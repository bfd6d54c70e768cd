//! Source lines of a checked program's code addresses, read from its line tables by binutils'
//! `addr2line` (installed with the compiler that built the program); only ever asked after a
//! fault, so its start-up costs nothing on the way there.

use std::path::Path;
use std::process::Command;

/// `function at file:line` for the code at `pc` (a return address into the program loaded at
/// `base` from `library`); `None` when the tool is missing or the line unknown.
pub(crate) fn source_line(library: &Path, base: usize, pc: usize) -> Option<String> {
    // The call's own address: a return address is the next instruction's.
    let offset = pc.checked_sub(base)?.checked_sub(1)?;
    // A library loaded from its descriptor (`/proc/self/fd/N`) is this process's to name.
    let library = match library.strip_prefix("/proc/self") {
        Ok(rest) => Path::new("/proc")
            .join(std::process::id().to_string())
            .join(rest),
        Err(_) => library.to_path_buf(),
    };
    let output = Command::new(tool())
        .arg("-e")
        .arg(&library)
        // (Base names: the build's folder is a scratch one, gone by now.)
        .args(["-f", "-C", "-p", "-s"])
        .arg(format!("{offset:#x}"))
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().next()?.trim();
    // (`(discriminator N)`: which of several blocks on the line, noise to a reader.)
    let line = line.find(" (discriminator").map_or(line, |at| &line[..at]);
    (!line.is_empty() && !line.contains("??:")).then(|| line.to_string())
}

/// `GPU_MEM_SIM_ADDR2LINE`, else `addr2line` on `PATH`.
fn tool() -> std::ffi::OsString {
    std::env::var_os("GPU_MEM_SIM_ADDR2LINE").unwrap_or_else(|| "addr2line".into())
}
