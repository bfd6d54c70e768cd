//! The real HIP library: every table function is exported by `libamdhip64.so.5`.

use crate::elf::Elf;
use crate::support::{Outcome, ensure, hip_or_skip, mapped_file};
use libtest_mimic::Completion;
use std::collections::HashSet;

/// Table functions allowed to be missing: none are, for the 5.2.3 headers the table comes from
/// (hiprtc moved to `libhiprtc.so.6` in ROCm 6, which the loader handles by candidates).
pub const OPTIONAL: &[&str] = &[];

pub fn every_symbol_exists() -> Outcome {
    let hip = match hip_or_skip() {
        Ok(h) => h,
        Err(skip) => return Ok(skip),
    };
    let file = mapped_file("libamdhip64.so")?;
    let bytes = std::fs::read(&file).map_err(|e| format!("read {}: {e}", file.display()))?;
    let exported: HashSet<String> = Elf::parse(&bytes)?
        .symbols(true)?
        .into_iter()
        .filter(|s| s.defined)
        .map(|s| s.name)
        .collect();
    let table = hip.symbols();
    let mut problems = Vec::new();
    for (name, resolved) in &table {
        if OPTIONAL.contains(name) {
            continue;
        }
        if !exported.contains(*name) {
            problems.push(format!(
                "{name} is in the loader's table but not exported by {}",
                file.display()
            ));
        }
        if !resolved {
            problems.push(format!("{name} was not resolved"));
        }
    }
    ensure(problems.is_empty(), || problems.join("\n"))?;
    let (major, minor) = hip.rtc_version()?;
    println!(
        "    {} table functions resolved and exported by {} (loaded as {}), hiprtc {major}.{minor}, {} defined dynamic symbols",
        table.len(),
        file.display(),
        hip.path(),
        exported.len()
    );
    Ok(Completion::Completed)
}
