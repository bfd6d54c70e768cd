//! `cargo xtask bench`: the project's speed targets, measured by its benchmarks.
//!
//! * `kernels` (`cargo bench -p gpu-mem --bench kernels`): the simulator's kernels, from portable
//!   source, beside Numba's CUDA simulator (target: 10,000x faster) and the tiled matmul beside a
//!   plain i-k-j Rust loop (target: within 3x at n=256); compile costs. Then `corpus` (`cargo bench -p
//!   gpu-mem-conformance --bench corpus`): real kernels of the test corpus (cuda-samples,
//!   Rodinia, PolyBench, HeCBench) beside plain single-threaded Rust loops computing the same
//!   outputs (targets: a geometric mean of the ratios of at most 3x, none above 10x).
//! * `executor` (`cargo bench -p gpu-mem-sim --bench executor`): launch, thread and barrier
//!   costs for source and closure kernels, and block scaling over one and two workers.
//! * `transfers` (`cargo bench -p gpu-mem-sim --bench transfers`): the simulator's 64 MiB
//!   host-to-device copy beside `memcpy` (target: at least 80%), the same from page-locked memory
//!   on a stream (target: no slower than from pageable memory), a 64 MiB `to_device` of a new
//!   array each time (target: within 1.3x of `memcpy` into touched memory, and no slower than
//!   Numba's simulator), a 64-byte `to_device` (target: under 2 µs) and the 4 KiB page-locked
//!   copy + `synchronize` round trip (target: p99 at most 5 µs over 10,000 round trips).
//! * `sanitizer` (`cargo bench -p gpu-mem-conformance --bench corpus -- --memcheck`): the corpus
//!   again, each kernel also with every access checked (`Checks::memcheck`), its cost as the
//!   ratio of the two ratios to the reference (target: at most 2x).

use std::process::Command;

/// Each benchmark's name and the cargo commands that run it, in order.
const BENCHES: [(&str, &[&[&str]]); 4] = [
    (
        "kernels",
        &[
            &["bench", "-p", "gpu-mem", "--bench", "kernels"],
            &["bench", "-p", "gpu-mem-conformance", "--bench", "corpus"],
        ],
    ),
    (
        "executor",
        &[&["bench", "-p", "gpu-mem-sim", "--bench", "executor"]],
    ),
    (
        "transfers",
        &[&["bench", "-p", "gpu-mem-sim", "--bench", "transfers"]],
    ),
    (
        "sanitizer",
        &[&[
            "bench",
            "-p",
            "gpu-mem-conformance",
            "--bench",
            "corpus",
            "--",
            "--memcheck",
        ]],
    ),
];

/// Runs the named benchmarks (all of them without arguments); `--json` asks each benchmark for
/// a JSON summary line after its table (`GPU_MEM_BENCH_JSON=1`; `kernels` prints one for the
/// kernels benchmark and one for the corpus, `executor` one, `transfers` one for its 64 MiB
/// ratios and one for its round trips).
pub fn run(args: &[String]) -> Result<(), String> {
    let json = args.iter().any(|a| a == "--json");
    let args: Vec<String> = args.iter().filter(|a| *a != "--json").cloned().collect();
    let unknown: Vec<&String> = args
        .iter()
        .filter(|a| !BENCHES.iter().any(|(name, _)| name == a))
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "unknown benchmark(s) {unknown:?}: choose from kernels, executor, transfers, sanitizer"
        ));
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for (name, commands) in BENCHES {
        if !args.is_empty() && !args.iter().any(|a| a == name) {
            continue;
        }
        for cargo_args in commands {
            println!("== {name}: cargo {}", cargo_args.join(" "));
            let mut command = Command::new(&cargo);
            command.args(*cargo_args);
            if json {
                // An environment variable, not an argument: criterion's harness rejects
                // arguments it does not know.
                command.env("GPU_MEM_BENCH_JSON", "1");
            }
            let status = command
                .status()
                .map_err(|e| format!("cannot run cargo: {e}"))?;
            if !status.success() {
                return Err(format!("the {name} benchmark failed ({status})"));
            }
        }
    }
    Ok(())
}
