#![cfg(all(unix, not(miri)))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! A simulated thread that overflows its stack ends the process with a message naming the
//! kernel and `GPU_MEM_SIM_STACK_SIZE` (not a bare SIGSEGV), and a larger stack lets the same
//! kernel run. Each launch runs in a child process (this binary, one test selected).

use gpu_mem_core::kernel::{LaunchArg, LaunchConfig};
use gpu_mem_core::{Backend, Kernel};
use gpu_mem_sim::{SimBackend, SimConfig, SimKernel};
use std::process::{Command, Output};

const CHILD: &str = "GPU_MEM_SIM_TEST_CHILD";

fn child(stack: Option<&str>) -> Output {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "big_local_array",
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1");
    match stack {
        Some(size) => command.env("GPU_MEM_SIM_STACK_SIZE", size),
        None => command.env_remove("GPU_MEM_SIM_STACK_SIZE"),
    };
    command.output().unwrap()
}

/// The child: a kernel whose every thread has a 512 KiB local array.
#[test]
#[ignore = "run in a child process by overflow_names_the_kernel_and_the_setting"]
fn big_local_array() {
    let kernel = Kernel::sim("deep_locals", |t| {
        let mut local = [0u8; 512 << 10];
        let i = t.thread_idx().x as usize;
        local[i * 1000] = 1;
        std::hint::black_box(&mut local);
    });
    let backend = SimBackend::new(SimConfig::default());
    let args: [LaunchArg; 0] = [];
    // SAFETY: the kernel touches no device memory.
    unsafe { backend.launch(0, &kernel, &LaunchConfig::new(1, 4), &args, None) }.unwrap();
    println!("deep_locals ran");
}

#[test]
fn overflow_names_the_kernel_and_the_setting() {
    let out = child(None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the default 256 KiB stack overflows");
    assert!(
        stderr.contains("stack overflow in a simulated thread of kernel `deep_locals`")
            && stderr.contains("256 KiB")
            && stderr.contains("GPU_MEM_SIM_STACK_SIZE"),
        "{stderr}"
    );
    let out = child(Some("2MiB"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("deep_locals ran"),
        "a 2 MiB stack is enough: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
