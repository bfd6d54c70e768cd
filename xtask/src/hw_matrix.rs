//! `cargo xtask hw-matrix [--json] [--json-file <path>] [--require <kind>]... [--release]`: the
//! hardware CI matrix.
//!
//! 1. Finds the backends and devices this machine has, through `gpu_mem::backends()` (this
//!    xtask is built with every backend feature, so "unavailable" means the machine lacks it,
//!    not the build).
//! 2. Runs the conformance suite once per available backend:
//!    `cargo test -p gpu-mem-conformance --features gpu-mem/<kind> --test conformance` with
//!    `GPU_MEM_BACKEND=<kind>`, and reads libtest's summary line from its output.
//! 3. Prints one table (or, with `--json`, one JSON document): backend, devices, passed, failed,
//!    skipped, and for each unavailable backend the reason. `--json-file` also writes the JSON
//!    document to a file (a CI artifact) while the table is printed.
//!
//! The exit status is non-zero when any available backend fails (a failed case, no summary,
//! nothing passed), when no backend is available at all, or when a backend named by
//! `--require` is unavailable — a GPU runner passes `--require cuda` or `--require roc` so a
//! broken driver cannot turn into a green simulator-only run.

mod libtest;
mod report;

use gpu_mem::BackendKind;
use report::{BackendRow, DeviceRow, Matrix, SuiteRun};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// Parsed command line.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    json: bool,
    json_file: Option<String>,
    release: bool,
    require: Vec<BackendKind>,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut options = Options::default();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => options.json = true,
            "--release" => options.release = true,
            "--json-file" => {
                let path = args.next().ok_or("--json-file needs a path")?;
                options.json_file = Some(path.clone());
            }
            "--require" => {
                let name = args
                    .next()
                    .ok_or("--require needs a backend name (cuda, roc or sim)")?;
                options.require.push(parse_kind(name)?);
            }
            other => match other.strip_prefix("--require=") {
                Some(name) => options.require.push(parse_kind(name)?),
                None => return Err(format!("hw-matrix: unknown argument `{other}`")),
            },
        }
    }
    Ok(options)
}

fn parse_kind(name: &str) -> Result<BackendKind, String> {
    match name.parse::<gpu_mem::BackendChoice>() {
        Ok(gpu_mem::BackendChoice::Only(kind)) => Ok(kind),
        Ok(gpu_mem::BackendChoice::Auto) => Err("--require needs one backend, not auto".into()),
        Err(error) => Err(error.to_string()),
    }
}

/// Runs the matrix; `Err` carries the message for a non-zero exit.
pub fn run(args: &[String]) -> Result<(), String> {
    let options = parse_args(args)?;
    let root = workspace_root()?;
    let mut rows = discover(&options.require);
    for row in rows.iter_mut().filter(|row| row.available) {
        eprintln!(
            "hw-matrix: running the conformance suite on the {} backend ...",
            row.backend
        );
        row.suite = Some(run_suite(&root, &row.backend, options.release));
    }
    let matrix = Matrix::new(rows);
    if let Some(path) = &options.json_file {
        std::fs::write(path, matrix.to_json()? + "\n")
            .map_err(|e| format!("cannot write {path}: {e}"))?;
    }
    if options.json {
        println!("{}", matrix.to_json()?);
    } else {
        print!("{}", matrix.to_table());
    }
    if matrix.ok {
        Ok(())
    } else {
        Err(format!(
            "hw-matrix failed:\n  {}",
            matrix.failures().join("\n  ")
        ))
    }
}

pub(crate) fn workspace_root() -> Result<PathBuf, String> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "cannot find the workspace root above xtask/".to_string())
}

/// Every backend gpu-mem knows, with its devices or the reason it is unavailable.
fn discover(required: &[BackendKind]) -> Vec<BackendRow> {
    gpu_mem::backends()
        .into_iter()
        .map(|status| {
            let devices = match &status.backend {
                Ok(backend) => (0..backend.device_count())
                    .map(|ordinal| match backend.device_info(ordinal) {
                        Ok(info) => DeviceRow {
                            ordinal,
                            name: info.name,
                            arch: info.arch,
                        },
                        Err(error) => DeviceRow {
                            ordinal,
                            name: format!("device {ordinal} (info failed: {error})"),
                            arch: String::new(),
                        },
                    })
                    .collect(),
                Err(_) => Vec::new(),
            };
            BackendRow {
                backend: status.kind.name().to_string(),
                compiled: status.compiled,
                available: status.is_available(),
                reason: status.reason(),
                devices,
                suite: None,
                required: required.contains(&status.kind),
            }
        })
        .collect()
}

/// Runs the conformance suite on one backend and reads its result.
fn run_suite(root: &Path, backend: &str, release: bool) -> SuiteRun {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let feature = format!("gpu-mem/{backend}");
    let mut command = Command::new(cargo);
    command
        .current_dir(root)
        .args(["test", "-p", "gpu-mem-conformance", "--features", &feature]);
    if release {
        command.arg("--release");
    }
    command
        .args(["--test", "conformance", "--", "--color", "never"])
        .env("GPU_MEM_BACKEND", backend)
        .stdin(Stdio::null());
    let started = Instant::now();
    let output = command.output();
    let seconds = started.elapsed().as_secs_f64();
    let output = match output {
        Ok(output) => output,
        Err(error) => {
            return SuiteRun {
                passed: 0,
                failed: 0,
                skipped: 0,
                failed_cases: Vec::new(),
                error: Some(format!("cannot run cargo: {error}")),
                seconds,
            };
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let run = judge(
        backend,
        &libtest::parse_output(&stdout),
        output.status.code(),
        seconds,
    );
    if run.failure().is_some() {
        // The failing run's own output is what a CI log reader needs.
        eprintln!("---- conformance suite output on {backend} (stdout) ----\n{stdout}");
        eprintln!("---- conformance suite output on {backend} (stderr) ----\n{stderr}");
    }
    run
}

/// Turns a parsed run and its exit code into the row's suite result.
fn judge(
    backend: &str,
    output: &libtest::RunOutput,
    exit_code: Option<i32>,
    seconds: f64,
) -> SuiteRun {
    let summary = output.summary.unwrap_or_default();
    let exit = exit_code.map_or("a signal".to_string(), |c| format!("status {c}"));
    let error = if output.summary.is_none() {
        Some(format!(
            "the suite printed no `test result:` line (it exited with {exit}: build failure or crash?)"
        ))
    } else if let Some((_, reason)) = output.skipped_backends.iter().find(|(k, _)| k == backend) {
        Some(format!(
            "the suite could not open the backend xtask found: {reason}"
        ))
    } else if exit_code != Some(0) && summary.failed == 0 {
        Some(format!(
            "the suite exited with {exit} without a failed case"
        ))
    } else {
        None
    };
    SuiteRun {
        passed: summary.passed,
        failed: summary.failed,
        skipped: summary.ignored,
        failed_cases: output.failed_cases.clone(),
        error,
        seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::libtest::{RunOutput, Summary};
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parses_options() {
        assert_eq!(parse_args(&[]).unwrap(), Options::default());
        assert_eq!(
            parse_args(&strings(&["--json", "--require", "cuda", "--require=rocm"])).unwrap(),
            Options {
                json: true,
                json_file: None,
                release: false,
                require: vec![BackendKind::Cuda, BackendKind::Roc],
            }
        );
        assert_eq!(
            parse_args(&strings(&["--json-file", "m.json", "--release"])).unwrap(),
            Options {
                json: false,
                json_file: Some("m.json".to_string()),
                release: true,
                require: Vec::new(),
            }
        );
        assert!(parse_args(&strings(&["--json-file"])).is_err());
        assert!(parse_args(&strings(&["--require"])).is_err());
        assert!(parse_args(&strings(&["--require", "auto"])).is_err());
        assert!(parse_args(&strings(&["--require", "vulkan"])).is_err());
        assert!(parse_args(&strings(&["--frobnicate"])).is_err());
    }

    fn output(summary: Option<Summary>, skipped: &[(&str, &str)]) -> RunOutput {
        RunOutput {
            summary,
            failed_cases: Vec::new(),
            skipped_backends: skipped
                .iter()
                .map(|(k, r)| (k.to_string(), r.to_string()))
                .collect(),
        }
    }

    const PASS: Summary = Summary {
        ok: true,
        passed: 34,
        failed: 0,
        ignored: 0,
    };

    #[test]
    fn a_clean_run_passes() {
        // Other backends being skipped by the suite is expected and not an error.
        let run = judge(
            "sim",
            &output(Some(PASS), &[("cuda", "no libcuda")]),
            Some(0),
            1.0,
        );
        assert_eq!(run.failure(), None);
        assert_eq!((run.passed, run.failed, run.skipped), (34, 0, 0));
    }

    #[test]
    fn a_missing_summary_is_an_error() {
        let run = judge("sim", &output(None, &[]), Some(101), 1.0);
        let why = run.failure().unwrap();
        assert!(
            why.contains("no `test result:` line") && why.contains("101"),
            "{why}"
        );
    }

    #[test]
    fn the_suite_skipping_the_backend_under_test_is_an_error() {
        let run = judge(
            "cuda",
            &output(Some(PASS), &[("cuda", "not compiled in")]),
            Some(0),
            1.0,
        );
        assert!(run.failure().unwrap().contains("not compiled in"));
    }

    #[test]
    fn a_non_zero_exit_without_failures_is_an_error() {
        let run = judge("sim", &output(Some(PASS), &[]), Some(1), 1.0);
        assert!(run.failure().unwrap().contains("status 1"));
    }

    #[test]
    fn failures_are_counted() {
        let summary = Summary {
            ok: false,
            passed: 30,
            failed: 4,
            ignored: 0,
        };
        let run = judge("roc", &output(Some(summary), &[]), Some(101), 1.0);
        assert_eq!(run.error, None);
        assert_eq!(run.failure().unwrap(), "4 case(s) failed");
    }
}
