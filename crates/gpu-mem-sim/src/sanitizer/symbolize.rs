//! Source lines of a checked program's code addresses, read from its line tables by binutils'
//! `addr2line` (installed with the compiler that built the program); only ever asked after a
//! fault, so its start-up costs nothing on the way there.

use super::ProgramLayout;
use std::path::Path;
use std::process::Command;

/// `function at file:line` for the code at `pc` (a return address into `program`), the
/// kernel's own line where the code is the prelude's inlined into it (an atomic's loop, a math
/// function); `None` when the tool is missing or the line unknown.
pub(crate) fn source_line(program: &ProgramLayout, pc: usize) -> Option<String> {
    let (library, base) = (program.path.as_path(), program.base);
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
        // (Base names: the build's folder is a scratch one, gone by now. `-i`: the functions
        // the code was inlined into, innermost first.)
        .args(["-f", "-C", "-p", "-s", "-i"])
        .arg(format!("{offset:#x}"))
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let frames: Vec<&str> = text
        .lines()
        .map(|line| {
            let line = line.trim();
            let line = line.strip_prefix("(inlined by) ").unwrap_or(line);
            // (`(discriminator N)`: which of several blocks on the line, noise to a reader.)
            line.find(" (discriminator").map_or(line, |at| &line[..at])
        })
        .filter(|line| !line.is_empty() && !line.contains("??:"))
        .collect();
    let file = |frame: &str| {
        let place = frame.rsplit(" at ").next().unwrap_or(frame);
        place
            .rsplit_once(':')
            .map_or(place, |(file, _)| file)
            .to_string()
    };
    let own = frames
        .iter()
        .find(|frame| !program.prelude_files.contains(&file(frame).as_str()));
    own.or(frames.first()).map(|line| line.to_string())
}

/// `line` ([`source_line`]'s) with the kernel's name where its function is a region of a
/// kernel run as regions, a lambda, which its line tables name `operator()` alone.
pub(crate) fn in_kernel(line: String, kernel: &str) -> String {
    match line.strip_prefix("operator() at ") {
        Some(place) => format!("{kernel} at {place}"),
        None => line,
    }
}

/// `GPU_MEM_SIM_ADDR2LINE`, else `addr2line` on `PATH`.
fn tool() -> std::ffi::OsString {
    std::env::var_os("GPU_MEM_SIM_ADDR2LINE").unwrap_or_else(|| "addr2line".into())
}

// Safe code only, so nothing for Miri to check.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::in_kernel;

    #[test]
    fn a_regions_lambda_is_named_after_its_kernel() {
        assert_eq!(in_kernel("operator() at k.cu:8".into(), "k"), "k at k.cu:8");
        assert_eq!(in_kernel("k at k.cu:8".into(), "other"), "k at k.cu:8");
        assert_eq!(
            in_kernel("helper(int) at k.cu:3".into(), "k"),
            "helper(int) at k.cu:3"
        );
    }
}
