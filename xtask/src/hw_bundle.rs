//! `cargo xtask hw-bundle --out DIR`: everything a GPU machine needs to check gpu-mem without a
//! Rust toolchain or network, built here.
//!
//! ```text
//! DIR/run.sh             finds the drivers, runs every check, writes $OUT (else DIR/results, or
//!                        its argument)
//! DIR/numba_compare.py   numba-cuda side by side with hw-bench (where numba-cuda is installed)
//! DIR/bin/gpu-mem        the CLI (info, bench --json, selftest)
//! DIR/bin/conformance    the conformance suite (run one case per process by run.sh)
//! DIR/bin/roc-native, cuda-loader, cuda-nvrtc_kernels   the backends' native tests
//! DIR/bin/<example>      matmul_tiled, block_sum, barrier_wave, diagnostics, all_reduce (a
//!                        one-rank NCCL communicator on the GPU; NCCL itself is the machine's)
//! DIR/bin/hw-bench       gpu-mem's side of the numba comparison and the allocator bench
//! DIR/bin/hw-buggy       the buggy kernels (tests/kernels/buggy), one launch per run: the
//!                        simulator's checks beside compute-sanitizer
//! DIR/src/...            the portable kernel sources the native tests compile
//! ```
//!
//! On a device machine (the repository's working tree travels; `DIR` is an ignored path, so it
//! is carried): carry `target/hw-bundle` and run `bash target/hw-bundle/run.sh` there; what it
//! writes goes to `$OUT`, which comes back.
//!
//! Release builds; test binaries come from `cargo test --no-run --message-format=json` (the
//! `executable` of each test artifact). Every binary is stripped; the bundle must stay under
//! [`MAX_BYTES`], and its size is printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The bundle's size limit.
pub const MAX_BYTES: u64 = 60 << 20;

const RUN_SH: &str = include_str!("hw_bundle/run.sh");
const NUMBA_COMPARE: &str = include_str!("hw_bundle/numba_compare.py");

/// Examples of the `gpu-mem` package the bundle runs.
const EXAMPLES: [&str; 5] = [
    "matmul_tiled",
    "block_sum",
    "barrier_wave",
    "diagnostics",
    "all_reduce",
];

/// The bundle's own programs (binaries of this package).
const BUNDLE_TOOLS: [&str; 2] = ["hw-bench", "hw-buggy"];

/// Test binaries: (package, test target, name in the bundle).
const TESTS: [(&str, &str, &str); 5] = [
    ("gpu-mem-conformance", "conformance", "conformance"),
    ("gpu-mem-roc", "native", "roc-native"),
    ("gpu-mem-cuda", "loader", "cuda-loader"),
    ("gpu-mem-cuda", "nvrtc_kernels", "cuda-nvrtc_kernels"),
    ("gpu-mem-cuda", "nvrtc_corpus", "cuda-nvrtc_corpus"),
];

/// Source files the native tests read at run time (via `GPU_MEM_SOURCE_ROOT`).
const SOURCES: [&str; 4] = [
    "tests/kernels",
    "tests/corpus",
    "crates/gpu-mem-core/include",
    "crates/gpu-mem-core/kernels",
];

/// Parsed command line.
#[derive(Debug, PartialEq, Eq)]
struct Options {
    out: PathBuf,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut out = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => out = Some(PathBuf::from(args.next().ok_or("--out needs a directory")?)),
            other => match other.strip_prefix("--out=") {
                Some(dir) => out = Some(PathBuf::from(dir)),
                None => return Err(format!("hw-bundle: unknown argument `{other}`")),
            },
        }
    }
    Ok(Options {
        out: out.ok_or("usage: cargo xtask hw-bundle --out DIR")?,
    })
}

/// Builds the bundle.
pub fn run(args: &[String]) -> Result<(), String> {
    let options = parse_args(args)?;
    let root = crate::hw_matrix::workspace_root()?;
    let out = prepare_out_dir(&options.out)?;
    let bin = out.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;

    let mut binaries: Vec<(PathBuf, String)> = Vec::new();
    eprintln!("hw-bundle: building the CLI and the examples (release) ...");
    let mut build = vec![
        "build",
        "--release",
        "-p",
        "gpu-mem-cli",
        "--bin",
        "gpu-mem",
    ];
    // `nccl`: the all_reduce example, and the CUDA backend's NCCL path.
    build.extend(["-p", "gpu-mem", "--features", "gpu-mem/nccl"]);
    for example in EXAMPLES {
        build.extend(["--example", example]);
    }
    for artifact in cargo_artifacts(&root, &build)? {
        if artifact.name == "gpu-mem" || EXAMPLES.contains(&artifact.name.as_str()) {
            binaries.push((artifact.executable, artifact.name));
        }
    }
    eprintln!("hw-bundle: building hw-bench and hw-buggy (release) ...");
    for artifact in cargo_artifacts(
        &root,
        &[
            "build",
            "--release",
            "-p",
            "xtask",
            "--bin",
            "hw-bench",
            "--bin",
            "hw-buggy",
        ],
    )? {
        if BUNDLE_TOOLS.contains(&artifact.name.as_str()) {
            binaries.push((artifact.executable, artifact.name));
        }
    }
    for (package, test, name) in TESTS {
        eprintln!("hw-bundle: building the {test} tests of {package} (release) ...");
        let artifacts = cargo_artifacts(
            &root,
            &[
                "test",
                "--release",
                "--no-run",
                "-p",
                package,
                "--test",
                test,
            ],
        )?;
        let artifact = artifacts
            .into_iter()
            .find(|a| a.test && a.name == test)
            .ok_or_else(|| format!("cargo built no test executable `{test}` of {package}"))?;
        binaries.push((artifact.executable, name.to_string()));
    }
    let wanted = 1 + EXAMPLES.len() + BUNDLE_TOOLS.len() + TESTS.len();
    if binaries.len() != wanted {
        let names: Vec<&str> = binaries.iter().map(|(_, n)| n.as_str()).collect();
        return Err(format!(
            "expected {wanted} binaries, cargo reported {names:?}"
        ));
    }
    for (from, name) in &binaries {
        let to = bin.join(name);
        std::fs::copy(from, &to)
            .map_err(|e| format!("copy {} -> {}: {e}", from.display(), to.display()))?;
        strip(&to)?;
    }
    for source in SOURCES {
        copy_dir(&root.join(source), &out.join("src").join(source))?;
    }
    write_file(&out.join("run.sh"), RUN_SH, true)?;
    write_file(&out.join("numba_compare.py"), NUMBA_COMPARE, true)?;

    let size = dir_size(&out)?;
    println!(
        "hw-bundle: {} ({} binaries, stripped): {:.1} MiB of at most {} MiB",
        out.display(),
        binaries.len(),
        size as f64 / f64::from(1u32 << 20),
        MAX_BYTES >> 20
    );
    // Relative to the repository root, where a device machine runs commands.
    let shown = std::env::current_dir()
        .ok()
        .and_then(|cwd| out.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| out.clone());
    println!(
        "hw-bundle: on the GPU machine (carrying {0}) run: bash {0}/run.sh",
        shown.display()
    );
    if size > MAX_BYTES {
        return Err(format!(
            "the bundle is {size} bytes, over the {MAX_BYTES}-byte limit"
        ));
    }
    Ok(())
}

/// Creates `dir` (or empties a previous bundle there); refuses a non-empty directory that is
/// not a bundle, so a typo cannot wipe someone's files.
fn prepare_out_dir(dir: &Path) -> Result<PathBuf, String> {
    if dir.exists() {
        let mut entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let empty = entries.next().is_none();
        if !empty {
            if !dir.join("run.sh").is_file() || !dir.join("bin").is_dir() {
                return Err(format!(
                    "{} is not empty and holds no previous bundle (run.sh, bin/): choose another --out",
                    dir.display()
                ));
            }
            for name in ["bin", "src", "results"] {
                let path = dir.join(name);
                if path.exists() {
                    std::fs::remove_dir_all(&path)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                }
            }
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    dir.canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// One executable cargo reported.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Artifact {
    name: String,
    executable: PathBuf,
    test: bool,
}

/// Runs `cargo <args> --message-format=json` in `root` and returns the executables it reports.
fn cargo_artifacts(root: &Path, args: &[&str]) -> Result<Vec<Artifact>, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(&cargo)
        .args(args)
        .arg("--message-format=json-render-diagnostics")
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {cargo}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo {} failed ({})",
            args.join(" "),
            output.status
        ));
    }
    Ok(parse_artifacts(&String::from_utf8_lossy(&output.stdout)))
}

/// The `compiler-artifact` messages with an executable.
fn parse_artifacts(stdout: &str) -> Vec<Artifact> {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|message| message["reason"] == "compiler-artifact")
        .filter_map(|message| {
            let executable = message["executable"].as_str()?;
            Some(Artifact {
                name: message["target"]["name"].as_str()?.to_string(),
                executable: PathBuf::from(executable),
                test: message["profile"]["test"].as_bool().unwrap_or(false),
            })
        })
        .collect()
}

fn strip(path: &Path) -> Result<(), String> {
    let strip = std::env::var("STRIP").unwrap_or_else(|_| "strip".into());
    let status = Command::new(&strip)
        .arg("--strip-all")
        .arg(path)
        .status()
        .map_err(|e| {
            format!(
                "cannot run {strip} (binutils) to strip {}: {e}",
                path.display()
            )
        })?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{strip} {} failed ({status})", path.display()))
    }
}

fn write_file(path: &Path, text: &str, executable: bool) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    if executable {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| format!("{}: {e}", to.display()))?;
    for entry in std::fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let entry = entry.map_err(|e| format!("{}: {e}", from.display()))?;
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)
                .map_err(|e| format!("{}: {e}", entry.path().display()))?;
        }
    }
    Ok(())
}

fn dir_size(dir: &Path) -> Result<u64, String> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let meta = entry
            .metadata()
            .map_err(|e| format!("{}: {e}", entry.path().display()))?;
        total += if meta.is_dir() {
            dir_size(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_out() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_args(&args(&["--out", "b"])),
            Ok(Options {
                out: PathBuf::from("b")
            })
        );
        assert_eq!(
            parse_args(&args(&["--out=c"])),
            Ok(Options {
                out: PathBuf::from("c")
            })
        );
        assert!(parse_args(&args(&[])).is_err());
        assert!(parse_args(&args(&["--bogus"])).is_err());
    }

    #[test]
    fn reads_test_executables_from_cargo_messages() {
        let stdout = r#"{"reason":"compiler-artifact","target":{"name":"conformance","kind":["test"]},"profile":{"test":true},"executable":"/t/release/deps/conformance-abc"}
{"reason":"compiler-artifact","target":{"name":"gpu_mem","kind":["lib"]},"profile":{"test":false},"executable":null}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            parse_artifacts(stdout),
            vec![Artifact {
                name: "conformance".into(),
                executable: PathBuf::from("/t/release/deps/conformance-abc"),
                test: true,
            }]
        );
    }

    #[test]
    fn refuses_a_foreign_non_empty_directory() {
        let dir = std::env::temp_dir().join(format!("hw-bundle-foreign-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| e.to_string())
            .unwrap_or(());
        std::fs::write(dir.join("precious.txt"), "keep").unwrap_or(());
        let result = prepare_out_dir(&dir);
        assert!(result.is_err(), "{result:?}");
        assert!(dir.join("precious.txt").exists());
        std::fs::remove_dir_all(&dir).unwrap_or(());
    }
}
