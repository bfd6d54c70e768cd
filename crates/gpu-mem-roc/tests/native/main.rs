//! Tests of the ROC backend's native parts that run without an AMD GPU: the real HSA runtime and
//! HIP library from Debian 12 (ROCm 5.2.3) and hiprtc compiling kernels to code objects.
//!
//! A test whose library is not installed is reported as ignored with the reason; CI installs
//! them with `.ci/install-rocm-parts.sh`, so there they run. ISAs newer than that hiprtc knows
//! (gfx1100) are compiled with Debian 13's HIP 5.7.1 in a child process (`newer_hip.rs`), which
//! CI unpacks with `.ci/fetch-hip-userland.sh`.

mod corpus;
mod elf;
mod hip;
mod hsa;
mod kernels;
mod newer_hip;
mod support;

use gpu_mem_core::testing::child::{self, Verdict};
use libtest_mimic::{Arguments, Trial};

fn main() {
    if let Some(role) = child::role() {
        child::exit(run_role(&role));
    }
    let args = Arguments::from_args();
    let mut trials = vec![
        Trial::ignorable_test("hsa::library_loads", hsa::library_loads),
        Trial::ignorable_test(
            "hsa::every_table_symbol_is_exported",
            hsa::every_symbol_exists,
        ),
        Trial::ignorable_test("hsa::init_fails_without_kfd", hsa::init_fails_without_kfd),
        Trial::ignorable_test(
            "hsa::open_reports_missing_driver",
            hsa::open_reports_missing_driver,
        ),
        Trial::ignorable_test("hsa::override_names_the_path", hsa::override_names_path),
        Trial::ignorable_test(
            "hip::every_table_symbol_is_exported",
            hip::every_symbol_exists,
        ),
        Trial::ignorable_test(
            "hiprtc::broken_kernel_reports_log",
            kernels::broken_kernel_reports_log,
        ),
        Trial::ignorable_test(
            "hiprtc::unknown_isa_is_refused",
            kernels::unknown_isa_is_refused,
        ),
    ];
    // The compile trials that take seconds run in child processes, side by side.
    for collection in corpus::collections() {
        trials.push(Trial::ignorable_test(
            format!("hiprtc::corpus::gfx90a::{collection}"),
            move || support::in_own_process(&format!("{}{collection}", corpus::TRIAL)),
        ));
    }
    for arch in kernels::ARCHS {
        trials.push(Trial::ignorable_test(
            format!("hiprtc::probe_kernel::{arch}"),
            kernels::probe_kernel_compiles(arch),
        ));
        trials.push(Trial::ignorable_test(
            format!("hiprtc::portable_kernels::{arch}"),
            move || support::in_own_process(&kernels::portable_trial(arch)),
        ));
    }
    // The corpus under the newer hiprtc too: from 5.5 on it has cooperative groups built in,
    // which gpu-mem's <cooperative_groups.h> must meet (Ubuntu 24.04 ships this hiprtc).
    for collection in corpus::collections() {
        trials.push(Trial::ignorable_test(
            format!("newer_userland::hiprtc::corpus::gfx90a::{collection}"),
            move || newer_hip::run(&format!("{}{collection}", corpus::TRIAL)),
        ));
    }
    // The loaders against the newer userland's libraries (ROCr 6.1, HIP 5.7.1).
    for (name, trial) in NEWER_USERLAND_TRIALS {
        trials.push(Trial::ignorable_test(
            format!("newer_userland::{name}"),
            || newer_hip::run(trial),
        ));
    }
    libtest_mimic::run(&args, trials).exit();
}

/// Trials also run under the newer HIP userland: (name, child trial).
const NEWER_USERLAND_TRIALS: [(&str, &str); 4] = [
    ("hsa::every_table_symbol_is_exported", "hsa-symbols"),
    ("hsa::init_fails_without_kfd", "hsa-init"),
    ("hsa::open_reports_missing_driver", "hsa-open"),
    ("hip::every_table_symbol_is_exported", "hip-symbols"),
];

/// What this process, a child of the test binary, was started to run: a trial under the newer
/// userland (`newer_hip`), one under the same libraries (`support::in_own_process`), or the HSA
/// library override's.
fn run_role(role: &str) -> Verdict {
    if let Some(trial) = role.strip_prefix(newer_hip::ROLE_PREFIX) {
        return newer_hip::child_main(trial, run_in_child);
    }
    if let Some(trial) = role.strip_prefix(support::OWN_PROCESS) {
        return match run_in_child(trial) {
            Some(outcome) => support::verdict(outcome),
            None => Verdict::Failed(format!("no trial named {trial}")),
        };
    }
    match role {
        "hsa-override" => match hsa::override_child() {
            Ok(()) => Verdict::Passed,
            Err(message) => Verdict::Failed(message),
        },
        other => Verdict::Failed(format!("unknown child role {other}")),
    }
}

/// Runs the trial a parent named (see `newer_hip` and `support::in_own_process`), in this child
/// process.
fn run_in_child(trial: &str) -> Option<support::Outcome> {
    if let Some(collection) = trial.strip_prefix(corpus::TRIAL) {
        return Some(corpus::compiles(collection));
    }
    match trial {
        "hsa-symbols" => Some(hsa::every_symbol_exists()),
        "hsa-init" => Some(hsa::init_fails_without_kfd()),
        "hsa-open" => Some(hsa::open_reports_missing_driver()),
        "hip-symbols" => Some(hip::every_symbol_exists()),
        compile => {
            let (name, arch) = compile.split_once(':')?;
            kernels::run_by_name(name, arch)
        }
    }
}
