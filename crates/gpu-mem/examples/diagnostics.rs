//! What the simulator says about broken kernels, all written as portable source: barrier
//! divergence, an out-of-bounds index, a wrong argument, a compile error, and, with the
//! simulator's checks on, an access past an array, a shared array overflow, races in shared and
//! in global memory and a read of memory nothing wrote. Each launch must fail with the expected error; the example prints
//! the messages (the "Debugging a kernel on the simulator" page of the book shows them).
//!
//! `cargo run -p gpu-mem --example diagnostics`

use gpu_mem::prelude::*;
use gpu_mem::{BackendKind, Error};

const SOURCE: &str = r#"#include "gpu_mem.h"

extern "C" __global__ void half_barrier(gm_array<float, 1> a) {
    if (threadIdx.x < 16) {
        syncthreads();
    }
    a(threadIdx.x) = 1.0f;
}

extern "C" __global__ void past_the_end(gm_array<float, 1> a) {
    a(grid(1) + 1) = 1.0f;
}
"#;

/// Plain CUDA with pointers: only a checked simulator (`Checks::memcheck`) sees these.
const POINTERS: &str = r#"
extern "C" __global__ void stencil(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = in[i] + in[i + 1];
    }
}

extern "C" __global__ void tile_overflow(float* out) {
    __shared__ float tile[32];
    tile[threadIdx.x] = out[threadIdx.x];
    __syncthreads();
    out[threadIdx.x] = tile[31 - threadIdx.x % 32];
}
"#;

/// A reduction missing a barrier: only racecheck (`Checks::racecheck`) sees it.
const RACY: &str = r#"
extern "C" __global__ void sum_without_barrier(const float* in, float* out) {
    __shared__ float partial[32];
    unsigned t = threadIdx.x;
    partial[t] = in[t];
    __syncthreads();
    for (unsigned s = 16; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        // (a __syncthreads() belongs here)
    }
    if (t == 0) out[0] = partial[0];
}
"#;

/// Blocks adding their sums to one total with a plain `+=`: only racecheck sees it.
const RACY_TOTAL: &str = r#"
extern "C" __global__ void total_without_atomics(const float* in, float* total) {
    __shared__ float partial[32];
    unsigned t = threadIdx.x;
    partial[t] = in[blockIdx.x * blockDim.x + t];
    __syncthreads();
    for (unsigned s = 16; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        __syncthreads();
    }
    if (t == 0) total[0] += partial[0]; // (atomicAdd(total, partial[0]) belongs here)
}
"#;

/// A sum into an array nobody cleared: only initcheck (`Checks::initcheck`) sees it.
const UNCLEARED: &str = r#"
extern "C" __global__ void add_into(const float* in, float* total) {
    unsigned t = threadIdx.x;
    total[t] += in[t];
}
"#;

const BROKEN: &str = r#"#include "gpu_mem.h"

extern "C" __global__ void broken(gm_array<float, 1> a) {
    a(0) = undefined_name;
}
"#;

/// Device 0 of a simulator that makes `checks` of the kernels it runs.
fn simulator_checking(checks: gpu_mem::sim::Checks) -> gpu_mem::Result<Device> {
    let mut config = gpu_mem::sim::SimConfig::default();
    for device in &mut config.devices {
        device.checks = checks;
    }
    Runtime::with_backend(std::sync::Arc::new(gpu_mem::sim::SimBackend::new(config))).device(0)
}

fn main() -> gpu_mem::Result<()> {
    let dev = Runtime::open(BackendChoice::Only(BackendKind::Sim))?.device(0)?;
    let mut a = dev.device_array::<f32>(&[32], Order::C)?;
    let mut wrong = dev.device_array::<f64>(&[32], Order::C)?;
    let config = LaunchConfig::new(1, 32);
    let mut failures = 0;
    let mut show = |what: &str, result: gpu_mem::Result<()>, ok: fn(&Error) -> bool| match result {
        Err(error) if ok(&error) => println!("{what}:\n  {error}\n"),
        other => {
            failures += 1;
            println!("{what}: unexpected {other:?}\n");
        }
    };
    let divergence = Kernel::from_source(SOURCE, "half_barrier");
    show(
        "barrier divergence",
        // SAFETY: the simulator checks what this broken kernel does.
        unsafe { dev.launch(&divergence, config, &mut [&mut a]) },
        |e| matches!(e, Error::BarrierDivergence { .. }),
    );
    let oob = Kernel::from_source(SOURCE, "past_the_end");
    show(
        "out-of-bounds index",
        // SAFETY: the simulator checks what this broken kernel does.
        unsafe { dev.launch(&oob, config, &mut [&mut a]) },
        |e| matches!(e, Error::KernelFault { .. }),
    );
    show(
        "wrong argument",
        // SAFETY: the simulator checks what this broken kernel does.
        unsafe { dev.launch(&oob, config, &mut [&mut wrong]) },
        |e| matches!(e, Error::InvalidLaunch { .. }),
    );
    // The same simulator with every access of a kernel checked before it happens.
    let checked = simulator_checking(gpu_mem::sim::Checks {
        memcheck: true,
        ..gpu_mem::sim::Checks::default()
    })?;
    let mut input = checked.to_device(&ndarray::Array1::<f32>::ones(32))?;
    let mut output = checked.device_array::<f32>(&[64], Order::C)?;
    let stencil = Kernel::from_source(POINTERS, "stencil");
    show(
        "memcheck: one past the end",
        // SAFETY: the checked simulator refuses the bad access before it happens.
        unsafe {
            checked.launch(
                &stencil,
                config,
                &mut [&mut input, &mut output, &mut Scalar(32i32)],
            )
        },
        |e| matches!(e, Error::KernelFault { .. }),
    );
    let overflow = Kernel::from_source(POINTERS, "tile_overflow");
    show(
        "memcheck: shared array overflow",
        // SAFETY: the checked simulator refuses the bad access before it happens.
        unsafe { checked.launch(&overflow, LaunchConfig::new(1, 64), &mut [&mut output]) },
        |e| matches!(e, Error::KernelFault { .. }),
    );
    // And one that also looks for races.
    let races = simulator_checking(gpu_mem::sim::Checks {
        racecheck: true,
        ..gpu_mem::sim::Checks::default()
    })?;
    let mut values = races.to_device(&ndarray::Array1::<f32>::ones(32))?;
    let mut sum = races.device_array::<f32>(&[1], Order::C)?;
    let racy = Kernel::from_source(RACY, "sum_without_barrier");
    show(
        "racecheck: a missing barrier",
        // SAFETY: the kernel stays inside its arrays (checked too).
        unsafe { races.launch(&racy, config, &mut [&mut values, &mut sum]) },
        |e| matches!(e, Error::KernelFault { .. }),
    );
    let mut many = races.to_device(&ndarray::Array1::<f32>::ones(128))?;
    let racy_total = Kernel::from_source(RACY_TOTAL, "total_without_atomics");
    show(
        "racecheck: blocks adding to one total",
        // SAFETY: the kernel stays inside its arrays (checked too).
        unsafe {
            races.launch(
                &racy_total,
                LaunchConfig::new(4, 32),
                &mut [&mut many, &mut sum],
            )
        },
        |e| matches!(e, Error::KernelFault { .. }),
    );
    // And one that looks for reads of device memory nothing wrote.
    let init = simulator_checking(gpu_mem::sim::Checks {
        initcheck: true,
        ..gpu_mem::sim::Checks::default()
    })?;
    let mut addends = init.to_device(&ndarray::Array1::<f32>::ones(32))?;
    let mut total = init.device_array::<f32>(&[32], Order::C)?;
    let uncleared = Kernel::from_source(UNCLEARED, "add_into");
    show(
        "initcheck: an array nobody cleared",
        // SAFETY: the kernel stays inside its arrays (checked too).
        unsafe { init.launch(&uncleared, config, &mut [&mut addends, &mut total]) },
        |e| matches!(e, Error::KernelFault { .. }),
    );
    let broken = Kernel::from_source(BROKEN, "broken");
    show(
        "compile error",
        // SAFETY: the simulator checks what this broken kernel does.
        unsafe { dev.launch(&broken, config, &mut [&mut a]) },
        |e| matches!(e, Error::KernelCompile { .. }),
    );
    println!(
        "result: {}",
        if failures == 0 { "correct" } else { "WRONG" }
    );
    if failures == 0 {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            name: "diagnostics",
            reason: format!("{failures} launch(es) did not fail as expected"),
        })
    }
}
