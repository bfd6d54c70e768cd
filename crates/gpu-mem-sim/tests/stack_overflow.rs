//! A simulated thread that overflows its stack ends the process with a message naming the
//! kernel and `GPU_MEM_SIM_STACK_SIZE` (not a bare SIGSEGV), and a larger stack lets the same
//! kernel run; the handler that tells it, installed while other threads fault in memcheck's
//! shadow, passes their faults on. Each launch runs in a child process (this binary, one test
//! selected).
#![cfg(all(unix, not(miri)))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem_core::Kernel;
use gpu_mem_core::backend::{Launch, Memory, Transfer};
use gpu_mem_core::kernel::{LaunchArg, LaunchConfig};
use gpu_mem_sim::{SimBackend, SimConfig, SimKernel};
use std::process::{Command, Output};

const CHILD: &str = "GPU_MEM_SIM_TEST_CHILD";

fn child(test: &str, stack: Option<&str>) -> Output {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            test,
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

/// The child: a kernel from source whose threads wait only at block barriers (so they run
/// stackless, calling helpers on the block's one fiber) with a 512 KiB array in a helper.
#[test]
#[ignore = "run in a child process by a_stackless_kernels_overflow_is_reported_too"]
fn big_helper_frame() {
    let source = r#"#include "gpu_mem.h"
__device__ __noinline__ int deep(int i) {
    volatile char local[512 << 10];
    local[i * 1000] = 1;
    return local[i * 1000];
}
extern "C" __global__ void deep_helper(gm_array<int, 1> out) {
    syncthreads();
    out(threadIdx.x) = deep(threadIdx.x);
}
"#;
    let kernel = Kernel::from_source(source, "deep_helper");
    let backend = SimBackend::new(SimConfig::default());
    let out = backend.alloc(0, 16).unwrap();
    let args = [LaunchArg::Array {
        ptr: out,
        shape: vec![4],
        strides: vec![1],
        min_offset: 0,
        span_len: 4,
        itemsize: 4,
        elem: std::any::TypeId::of::<i32>(),
        dtype: "i32",
    }];
    // SAFETY: the kernel writes `out(threadIdx.x)` for 4 threads, inside `out`.
    unsafe { backend.launch(0, &kernel, &LaunchConfig::new(1, 4), &args, None) }.unwrap();
    println!("deep_helper ran");
}

/// Runs child `test` (kernel `kernel`) with the default stack, which must overflow with a
/// message naming the kernel and the setting, then with 2 MiB, which must be enough.
fn overflows_then_runs(test: &str, kernel: &str) {
    let out = child(test, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the default 256 KiB stack overflows");
    assert!(
        stderr.contains(&format!(
            "stack overflow in a simulated thread of kernel `{kernel}`"
        )) && stderr.contains("256 KiB")
            && stderr.contains("GPU_MEM_SIM_STACK_SIZE"),
        "{stderr}"
    );
    let out = child(test, Some("2MiB"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(&format!("{kernel} ran")),
        "a 2 MiB stack is enough: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_stackless_kernels_overflow_is_reported_too() {
    overflows_then_runs("big_helper_frame", "deep_helper");
}

#[test]
fn overflow_names_the_kernel_and_the_setting() {
    overflows_then_runs("big_local_array", "deep_locals");
}

/// The child: the address space is capped a little above what the process uses, so that a
/// block of 1024 waiting threads runs out of stacks part-way through its first barrier.
#[test]
#[ignore = "run in a child process by running_out_of_stacks_is_a_launch_error"]
#[cfg(target_os = "linux")]
fn out_of_stacks() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let vm_kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmSize:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap();
    // Room for about 100 fibers of 256 KiB (and whatever else the launch allocates).
    let cap = (vm_kib << 10) + (32 << 20);
    let limit = libc::rlimit {
        rlim_cur: cap,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: `setrlimit` reads a valid `rlimit`; it lowers this process's soft limit only.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &limit) }, 0);
    let kernel = Kernel::sim("many_waiters", |t| t.syncthreads());
    let backend = SimBackend::new(SimConfig::default());
    let args: [LaunchArg; 0] = [];
    // SAFETY: the kernel touches no device memory.
    let result = unsafe { backend.launch(0, &kernel, &LaunchConfig::new(1, 1024), &args, None) };
    println!("first launch: {result:?}");
    // The fibers it had are kept: a smaller block still runs.
    // SAFETY: as above.
    let small = unsafe { backend.launch(0, &kernel, &LaunchConfig::new(1, 32), &args, None) };
    println!("small launch: {small:?}");
}

/// A block whose threads cannot all get a stack fails to launch with an error naming the
/// kernel (it does not enter a thread that has no fiber), and the process goes on.
#[test]
#[cfg(target_os = "linux")]
fn running_out_of_stacks_is_a_launch_error() {
    let out = child("out_of_stacks", None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child crashed: {stdout}{stderr}");
    assert!(
        stdout.contains("first launch: Err(InvalidLaunch")
            && stdout.contains("many_waiters")
            && stdout.contains("small launch: Ok(())"),
        "{stdout}{stderr}"
    );
}

/// The child: the process's first launch is memcheck's, a cooperative one whose threads wait
/// at a grid barrier on stacks of their own, so the stack handler is installed while other
/// blocks' threads fault on shadow pages no access read before.
#[test]
#[ignore = "run in a child process by a_handler_installed_while_shadow_pages_fault_passes_them_on"]
fn cooperative_under_memcheck() {
    let source = r#"
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void grid_sum(const float* in, float* out) {
    cg::grid_group grid = cg::this_grid();
    extern double __shared__ sums[];
    sums[threadIdx.x] = in[grid.thread_rank()];
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0;
        for (int i = 0; i < blockDim.x; ++i) s += sums[i];
        out[blockIdx.x] = (float)s;
    }
    cg::sync(grid);
    if (grid.thread_rank() == 0) {
        for (int b = 1; b < gridDim.x; b++) out[0] += out[b];
    }
}
"#;
    let checks = gpu_mem_sim::Checks {
        memcheck: true,
        ..gpu_mem_sim::Checks::default()
    };
    let backend = SimBackend::new(SimConfig {
        devices: vec![gpu_mem_sim::SimDeviceConfig {
            checks,
            ..gpu_mem_sim::SimDeviceConfig::default()
        }],
    });
    let (blocks, threads) = (8usize, 64usize);
    let input = backend.alloc(0, blocks * threads * 4).unwrap();
    let output = backend.alloc(0, blocks * 4).unwrap();
    let ones = vec![1.0f32; blocks * threads];
    // SAFETY: `ones` holds as many bytes as `input`, which nothing else uses.
    unsafe { backend.copy_htod(0, input, ones.as_ptr().cast(), blocks * threads * 4) }.unwrap();
    let kernel = Kernel::from_source(source, "grid_sum");
    let array = |ptr, len: usize| LaunchArg::Array {
        ptr,
        shape: vec![len],
        strides: vec![1],
        min_offset: 0,
        span_len: len,
        itemsize: 4,
        elem: std::any::TypeId::of::<f32>(),
        dtype: "f32",
    };
    let config = LaunchConfig::new(blocks as u32, threads as u32)
        .with_shared_bytes(threads * 8)
        .cooperative();
    // SAFETY: the kernel reads `in` at the grid's thread ranks (all inside) and writes `out` at
    // its block indices.
    unsafe {
        backend.launch(
            0,
            &kernel,
            &config,
            &[array(input, blocks * threads), array(output, blocks)],
            None,
        )
    }
    .unwrap();
    let mut sums = vec![0.0f32; blocks];
    // SAFETY: `sums` holds as many bytes as `output`.
    unsafe { backend.copy_dtoh(0, sums.as_mut_ptr().cast(), output, blocks * 4) }.unwrap();
    println!("grid_sum ran: {}", sums[0]);
}

/// memcheck's shadow handler and the stack handler chain to each other. The stack handler once
/// read what it replaced under a lock it only tried: when two threads faulted on shadow pages at
/// once, one found the lock held by the other, passed its fault to nothing, restored the default
/// and ended the process (about one run of the child in three). Eight runs, each a fresh
/// process.
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn a_handler_installed_while_shadow_pages_fault_passes_them_on() {
    for run in 0..8 {
        let out = child("cooperative_under_memcheck", None);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("grid_sum ran: 512"),
            "run {run}: {:?} {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
