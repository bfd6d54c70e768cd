//! `cargo xtask bindgen`: regenerates the committed FFI declarations of the -sys crates.

mod cuda;
mod nccl;
mod rocm;

/// Runs the `bindgen` command with its arguments.
pub fn run(args: &[String]) -> Result<(), String> {
    let check = args.iter().any(|a| a == "--check");
    let target = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map(String::as_str)
        .unwrap_or("all");
    match target {
        "cuda" => cuda::run(check),
        "hsa" => rocm::run_hsa(check),
        "hip" => rocm::run_hip(check),
        "nccl" => nccl::run(check),
        "all" => {
            cuda::run(check)?;
            nccl::run(check)?;
            rocm::run_hsa(check)?;
            rocm::run_hip(check)
        }
        other => Err(format!(
            "unknown bindgen target `{other}` (cuda, nccl, hsa, hip, all)"
        )),
    }
}
