//! The simulator's checks seen through the public API: a refused access names the array it
//! lies near by where the user allocated it (`backend::call_site`), for memcheck and initcheck.

// Source kernels: the host compiler and loaded libraries are outside what Miri interprets.
#![cfg(not(miri))]
// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::prelude::*;
use gpu_mem::sim::{Checks, SimBackend, SimConfig};
use gpu_mem::{Backend, Error};
use std::sync::Arc;

fn checked(checks: Checks) -> (Runtime, Device) {
    let mut config = SimConfig::default();
    for device in &mut config.devices {
        device.checks = checks;
    }
    let backend: Arc<dyn Backend> = Arc::new(SimBackend::new(config));
    let runtime = Runtime::with_backend(backend);
    let device = runtime.device(0).unwrap();
    (runtime, device)
}

const STENCIL: &str = r#"
extern "C" __global__ void k(const float* in, float* out) {
    int i = threadIdx.x;
    out[i] = in[i] + in[i + 1];
}
"#;

#[track_caller]
fn message(result: gpu_mem::Result<()>) -> String {
    match result {
        Err(Error::KernelFault { message, .. }) => message,
        other => panic!("expected a fault, got {other:?}"),
    }
}

#[test]
fn a_refused_access_names_where_its_array_was_allocated() {
    let (_rt, dev) = checked(Checks {
        memcheck: true,
        ..Checks::default()
    });
    let made = format!("{}:{}:", file!(), line!() + 1);
    let mut input = dev.to_device(&ndarray::Array1::<f32>::ones(32)).unwrap();
    let mut out = dev.device_array::<f32>(&[32], Order::C).unwrap();
    let stencil = Kernel::from_source(STENCIL, "k");
    let config = LaunchConfig::new(1, 32);
    // SAFETY: the checked simulator refuses the bad access before it happens.
    let said = message(unsafe { dev.launch(&stencil, config, &mut [&mut input, &mut out]) });
    assert!(
        said.contains("0 bytes past the end of the 128-byte allocation")
            && said.contains(&format!("(made at {made}")),
        "{said}"
    );
}

#[test]
fn an_unwritten_array_is_named_where_it_was_allocated() {
    let (_rt, dev) = checked(Checks {
        initcheck: true,
        ..Checks::default()
    });
    let mut input = dev.to_device(&ndarray::Array1::<f32>::ones(33)).unwrap();
    let made = format!("{}:{}:", file!(), line!() + 1);
    let mut out = dev.device_array::<f32>(&[32], Order::C).unwrap();
    // Reads `out` before anything wrote it.
    let add = Kernel::from_source(
        r#"extern "C" __global__ void k(const float* in, float* out) {
            out[threadIdx.x] += in[threadIdx.x];
        }"#,
        "k",
    );
    // SAFETY: the checked simulator refuses the bad access before it happens.
    let said =
        message(unsafe { dev.launch(&add, LaunchConfig::new(1, 32), &mut [&mut input, &mut out]) });
    assert!(
        said.contains("byte 0 of the 128-byte allocation")
            && said.contains(&format!("(made at {made}")),
        "{said}"
    );
}
