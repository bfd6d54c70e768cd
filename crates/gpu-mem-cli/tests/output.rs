//! Regression tests for issue 9, item 7: the CLI's output.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Read;
use std::process::{Command, Stdio};

fn gpu_mem() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gpu-mem"));
    command
        .env("GPU_MEM_BACKEND", "sim")
        .env_remove("GPU_MEM_LOG");
    command
}

/// `gpu-mem info | head -3`: the reader goes away before the tool has written everything. The
/// tool must end quietly, not panic on the broken pipe.
#[test]
fn info_into_a_closed_pipe_does_not_panic() {
    for args in [&["info"][..], &["info", "--json"][..], &["selftest"][..]] {
        let mut child = gpu_mem()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end at once: every write the tool makes hits a broken pipe.
        drop(child.stdout.take());
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let status = child.wait().unwrap();
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "gpu-mem {args:?} into a closed pipe: {stderr}"
        );
        assert!(status.success(), "gpu-mem {args:?}: {status}, {stderr}");
    }
}

/// `info` names the backend choice as a user writes it in `GPU_MEM_BACKEND`.
#[test]
fn info_prints_the_backend_choice_as_written() {
    for (choice, shown) in [
        ("sim", "GPU_MEM_BACKEND=sim)"),
        ("auto", "GPU_MEM_BACKEND=auto)"),
    ] {
        let output = gpu_mem()
            .env("GPU_MEM_BACKEND", choice)
            .arg("info")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(text.contains(shown), "{choice}: {text}");
        assert!(!text.contains("Only(") && !text.contains("Auto"), "{text}");
    }
}

/// `info` says which source set the backend: the flag wins over the environment.
#[test]
fn info_names_the_source_of_the_backend_choice() {
    let flag = gpu_mem()
        .env("GPU_MEM_BACKEND", "auto")
        .args(["--backend", "sim", "info"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&flag.stdout);
    assert!(text.contains("set by the flag: --backend sim"), "{text}");
    let env = gpu_mem().arg("info").output().unwrap();
    let text = String::from_utf8_lossy(&env.stdout);
    assert!(
        text.contains("set by the environment: GPU_MEM_BACKEND=sim"),
        "{text}"
    );
    let unset = gpu_mem()
        .env_remove("GPU_MEM_BACKEND")
        .arg("info")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&unset.stdout);
    assert!(text.contains("default: auto"), "{text}");
    // A wrong flag value is clap's error listing the values.
    let bad = gpu_mem()
        .args(["--backend", "cpu", "info"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && text.contains("auto, cuda, roc, sim"),
        "{text}"
    );
}

/// `bench` into a pipe: plain progress lines on stderr, the table on stdout (one row per size,
/// printed as measured), and `bench | head -2` ends quietly.
#[test]
fn bench_reports_progress_and_rows_into_a_pipe() {
    let output = gpu_mem()
        .args(["bench", "--max", "16KiB", "--millis", "1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "title, header and two sizes: {stdout}");
    assert!(lines[2].trim_start().starts_with("4.0 KiB"), "{stdout}");
    assert!(lines[3].trim_start().starts_with("16.0 KiB"), "{stdout}");
    assert!(lines[1].trim_end().ends_with("H2H memcpy"), "{stdout}");
    assert!(
        stderr.contains("measuring 4.0 KiB transfers (1/16)")
            && stderr.contains("measuring 16.0 KiB transfers (9/16)"),
        "{stderr}"
    );
    let mut child = gpu_mem()
        .args(["bench", "--max", "64KiB", "--millis", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success() && !stderr.contains("panicked"), "{stderr}");
}

/// Size arguments take the environment variables' units and give their message.
#[test]
fn bench_sizes_take_units_and_bad_ones_say_why() {
    for (value, message) in [
        (
            "4XB",
            "--min`: \"4XB\" is not a size such as 268435456, 256MiB or 4GiB",
        ),
        ("0", "--min`: \"0\" is not a size from 1 byte to 1 PiB"),
    ] {
        let output = gpu_mem().args(["bench", "--min", value]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains(message),
            "{value}: {stderr}"
        );
    }
    let output = gpu_mem()
        .args([
            "bench", "--min", "1KiB", "--max", "0.001MiB", "--millis", "1", "--json",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("\"bytes\": 1024"), "{stdout}");
    // On the simulator, the host `memcpy` each kind is read against comes with them.
    assert!(
        stdout.contains("\"direction\": \"H2H\"") && stdout.contains("\"memory\": \"memcpy\""),
        "{stdout}"
    );
}

/// A size between two multiples of 4 bytes is measured, and reported, as the whole 4-byte
/// elements it moves (the row said 7 bytes, and its speed was worked out from 7, while 4 moved).
#[test]
fn bench_reports_the_bytes_it_moves() {
    let output = gpu_mem()
        .args([
            "bench", "--min", "7", "--max", "7", "--millis", "1", "--json",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("\"bytes\": 4") && !stdout.contains("\"bytes\": 7"),
        "{stdout}"
    );
}

/// `info --json` fails as `info` does when the backend asked for cannot be opened (it printed
/// the JSON and exited 0), and still prints the JSON.
#[test]
fn info_json_fails_when_the_chosen_backend_cannot_be_opened() {
    let output = gpu_mem()
        .env("GPU_MEM_SIM_MEMORY", "lots")
        .args(["info", "--json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert!(stdout.contains("\"selection_error\""), "{stdout}");
}

/// `--backend` takes what `GPU_MEM_BACKEND` takes: the other names and any case.
#[test]
fn backend_option_takes_the_environment_variables_names() {
    for name in ["SIM", "simulator", "Sim"] {
        let output = gpu_mem()
            .args(["--backend", name, "info", "--json"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "--backend {name}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    // An unknown name in the environment says where it came from.
    let output = gpu_mem()
        .env("GPU_MEM_BACKEND", "vulkan")
        .args(["selftest"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("GPU_MEM_BACKEND"),
        "{stderr}"
    );
}

/// `gpu-mem memory SNAPSHOT.json` prints the summary of a snapshot a program saved, and draws
/// its live memory as SVG; a file that is not a snapshot is an error that says so.
#[test]
fn memory_reads_a_saved_snapshot_and_draws_it() {
    use gpu_mem::prelude::*;
    let dir = std::env::temp_dir().join(format!("gpu-mem-cli-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rt = Runtime::open_kind(gpu_mem::BackendKind::Sim).unwrap();
    let dev = rt.device(0).unwrap();
    let kept = dev.device_array::<f32>(&[3 << 10], Order::C).unwrap();
    let json = dir.join("snapshot.json");
    std::fs::write(&json, dev.memory_snapshot().to_json()).unwrap();
    drop(kept);

    let output = gpu_mem().arg("memory").arg(&json).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        text.contains("12.0 KiB") && text.contains(file!()),
        "{text}"
    );
    let svg = std::fs::read_to_string(dir.join("snapshot.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("device"), "{svg}");

    std::fs::write(dir.join("bad.json"), "{\"not\": 1}").unwrap();
    let output = gpu_mem()
        .arg("memory")
        .arg(dir.join("bad.json"))
        .output()
        .unwrap();
    let error = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && error.contains("not a gpu-mem memory snapshot"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `gpu-mem bench --plot FILE.svg` draws a line per kind of transfer.
#[test]
fn bench_draws_bandwidth_against_size() {
    let path = std::env::temp_dir().join(format!("gpu-mem-bench-{}.svg", std::process::id()));
    let output = gpu_mem()
        .args(["bench", "--max", "64KiB", "--millis", "1", "--plot"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.contains("H2D") || svg.contains("h2d"), "{svg}");
    std::fs::remove_file(&path).unwrap();
}

/// `info` names each backend's collectives engine: the simulator's model of NCCL, in text and
/// in JSON.
#[test]
fn info_names_the_collectives_engine() {
    let out = gpu_mem().arg("info").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("collectives: the gpu-mem simulator's model of NCCL"),
        "{text}"
    );
    let out = gpu_mem().args(["info", "--json"]).output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sim = json["backends"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["backend"] == "sim")
        .unwrap();
    assert!(
        sim["collectives"]
            .as_str()
            .is_some_and(|e| e.contains("model of NCCL")),
        "{sim}"
    );
}
