//! The hardware bundle's buggy kernels (`tests/kernels/buggy`), run by `hw-buggy` as the bundle
//! runs them: on the simulator with every check on, each must be reported by the check its
//! header names (and the clean one by none). On a GPU the bundle puts compute-sanitizer's
//! verdicts on the same launches beside these.

use std::process::{Command, Stdio};

fn hw_buggy() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hw-buggy"));
    command
        .env("GPU_MEM_BACKEND", "sim")
        .env("GPU_MEM_SIM_CHECK", "memcheck,racecheck,initcheck")
        .env_remove("GPU_MEM_SOURCE_ROOT");
    command
}

#[test]
fn each_buggy_kernel_is_reported_by_the_check_it_names() {
    let listed = hw_buggy().arg("list").output().expect("hw-buggy list");
    assert!(listed.status.success(), "{listed:?}");
    let cases: Vec<(String, String)> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(name, expect)| (name.to_string(), expect.to_string()))
        .collect();
    assert!(cases.len() >= 12, "{cases:?}");
    // Two at a time: each compiles its kernel with the host compiler.
    let verdicts: Vec<(String, String, String)> = cases
        .chunks(2)
        .flat_map(|pair| {
            let children: Vec<_> = pair
                .iter()
                .map(|(name, expect)| {
                    let child = hw_buggy()
                        .args(["run", name, "--deliberately"])
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .spawn()
                        .expect("hw-buggy run");
                    (name.clone(), expect.clone(), child)
                })
                .collect();
            children
                .into_iter()
                .map(|(name, expect, child)| {
                    let out = child.wait_with_output().expect("hw-buggy run");
                    (
                        name,
                        expect,
                        String::from_utf8_lossy(&out.stdout).into_owned(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    let mut wrong = Vec::new();
    for (name, expect, verdict) in &verdicts {
        let right = if expect == "clean" {
            verdict.trim() == format!("{name}: ok")
        } else {
            verdict.starts_with(&format!("{name}: error: "))
                && verdict.contains(&format!(": {expect}: "))
        };
        if !right {
            wrong.push(format!("{name} (expected {expect}): {verdict}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_simulator_runs_them_only_with_checks_on() {
    let out = hw_buggy()
        .env("GPU_MEM_SIM_CHECK", "none")
        .args(["run", "write_without_bounds_check", "--deliberately"])
        .output()
        .expect("hw-buggy run");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("only with checks on"),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn running_a_case_needs_to_be_meant() {
    let out = hw_buggy()
        .args(["run", "clean_reduction"])
        .output()
        .expect("hw-buggy run");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--deliberately"));
}
