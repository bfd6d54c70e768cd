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

use libtest_mimic::{Arguments, Trial};

/// Set when the binary is re-run as a child process by a test that needs its own environment.
pub const CHILD_ENV: &str = "GPU_MEM_ROC_TEST_CHILD";

fn main() {
    if let Ok(role) = std::env::var(CHILD_ENV) {
        if let Some(trial) = role.strip_prefix(newer_hip::ROLE_PREFIX) {
            std::process::exit(newer_hip::child_main(trial, run_in_child));
        }
        let result = match role.as_str() {
            "hsa-override" => hsa::override_child(),
            other => Err(format!("unknown child role {other}")),
        };
        match result {
            Ok(()) => std::process::exit(0),
            Err(message) => {
                eprintln!("{message}");
                std::process::exit(1);
            }
        }
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
        Trial::ignorable_test("hiprtc::corpus::gfx90a", corpus::corpus_compiles),
    ];
    for arch in kernels::ARCHS {
        trials.push(Trial::ignorable_test(
            format!("hiprtc::probe_kernel::{arch}"),
            kernels::probe_kernel_compiles(arch),
        ));
        trials.push(Trial::ignorable_test(
            format!("hiprtc::portable_kernels::{arch}"),
            kernels::portable_kernels_compile(arch),
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

/// Runs the trial a parent named (see `newer_hip`), in this child process.
fn run_in_child(trial: &str) -> Option<support::Outcome> {
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
