//! `cargo xtask bench`: the project's speed targets, measured by its benchmarks.
//!
//! * `kernels` (`cargo bench -p gpu-mem --bench kernels`): the simulator's kernels, from portable
//!   source, beside Numba's CUDA simulator (target: 10,000x faster) and the tiled matmul beside a
//!   plain i-k-j Rust loop (target: within 10x); compile costs.
//! * `executor` (`cargo bench -p gpu-mem-sim --bench executor`): launch, thread and barrier
//!   costs for source and closure kernels, and block scaling over one and two workers.
//! * `transfers` (`cargo bench -p gpu-mem-sim --bench transfers`): the simulator's 64 MiB
//!   host-to-device copy beside `memcpy` (target: at least 80%) and a 64-byte `to_device`
//!   (target: under 2 µs).

use std::process::Command;

const BENCHES: [(&str, &[&str]); 3] = [
    ("kernels", &["bench", "-p", "gpu-mem", "--bench", "kernels"]),
    (
        "executor",
        &["bench", "-p", "gpu-mem-sim", "--bench", "executor"],
    ),
    (
        "transfers",
        &["bench", "-p", "gpu-mem-sim", "--bench", "transfers"],
    ),
];

/// Runs the named benchmarks (all of them without arguments).
pub fn run(args: &[String]) -> Result<(), String> {
    let unknown: Vec<&String> = args
        .iter()
        .filter(|a| !BENCHES.iter().any(|(name, _)| name == a))
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "unknown benchmark(s) {unknown:?}: choose from kernels, executor, transfers"
        ));
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for (name, cargo_args) in BENCHES {
        if !args.is_empty() && !args.iter().any(|a| a == name) {
            continue;
        }
        println!("== {name}: cargo {}", cargo_args.join(" "));
        let status = Command::new(&cargo)
            .args(cargo_args)
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !status.success() {
            return Err(format!("the {name} benchmark failed ({status})"));
        }
    }
    Ok(())
}
