//! `gpu-mem memory SNAPSHOT.json`: prints a saved memory snapshot's summary and draws its live
//! memory over time as SVG.

use crate::plot;
use gpu_mem::usage::MemorySnapshot;
use gpu_mem::{Error, Result};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct MemoryArgs {
    /// A snapshot saved with `MemorySnapshot::to_json` (`Device::memory_snapshot`).
    snapshot: PathBuf,
    /// Where to write the chart of live memory over time (default: the snapshot's path with
    /// `.svg`).
    #[arg(long)]
    svg: Option<PathBuf>,
}

fn read(path: &Path) -> Result<MemorySnapshot> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::InvalidArgument {
        name: "SNAPSHOT",
        reason: format!("cannot read {}: {e}", path.display()),
    })?;
    MemorySnapshot::from_json(&text)
}

pub fn run(args: &MemoryArgs) -> Result<()> {
    let snapshot = read(&args.snapshot)?;
    outln!("{}", snapshot.summary().trim_end());
    let svg = args
        .svg
        .clone()
        .unwrap_or_else(|| args.snapshot.with_extension("svg"));
    plot::live_bytes(&snapshot, &svg)?;
    outln!("live memory over time: {}", svg.display());
    Ok(())
}
