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
