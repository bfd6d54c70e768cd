//! cudarc and gpu-mem on one buffer: cudarc allocates it, a gpu-mem kernel (portable source,
//! compiled by NVRTC) fills it on a cudarc stream, cudarc reads it back.
//!
//! `cargo run -p gpu-mem --features cudarc --example cudarc_interop [n]` (default 1,000,000).
//! Needs an NVIDIA GPU and its driver; elsewhere it says why it cannot run and exits with 0.

use gpu_mem::cudarc::{self as interop, driver::CudaStream};
use gpu_mem::prelude::*;
use gpu_mem::{BackendKind, Error};
use std::sync::Arc;

const FILL: &str = r#"
#include "gpu_mem.h"
extern "C" __global__ void fill(gm_array<float, 1> a, float k) {
    const long long i = grid(1);
    if (i < a.shape[0]) a(i) = k * (float)i;
}"#;

fn cudarc_error(call: &'static str) -> impl Fn(interop::driver::DriverError) -> Error {
    move |e| interop::driver_error(call, e)
}

fn main() -> gpu_mem::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    // Probe first: cudarc panics where there is no CUDA driver; gpu-mem reports why.
    let runtime = match interop::ready().and_then(|_| Runtime::open_kind(BackendKind::Cuda)) {
        Ok(runtime) => runtime,
        Err(why) => {
            println!("cudarc_interop needs a CUDA GPU and driver, and cannot run here: {why}");
            return Ok(());
        }
    };
    let dev = runtime.device(0)?;
    let ctx = interop::context(0)?; // the primary context, as gpu-mem uses
    let cu_stream: Arc<CudaStream> = ctx.new_stream().map_err(cudarc_error("new_stream"))?;

    // 1. cudarc allocates.
    let slice = cu_stream
        .alloc_zeros::<f32>(n)
        .map_err(cudarc_error("alloc_zeros"))?;
    // 2. gpu-mem takes the slice over and fills it on the same (cudarc) stream.
    let mut array = interop::array_from_slice(&dev, slice)?;
    let stream = interop::stream_from_cudarc(&dev, Arc::clone(&cu_stream))?;
    let kernel = Kernel::from_source(FILL, "fill");
    // SAFETY: the kernel writes a(i) only for i < len.
    unsafe {
        stream.launch(
            &kernel,
            LaunchConfig::for_items(n, 256),
            &mut [&mut array, &mut Scalar(0.5f32)],
        )?
    };
    stream.synchronize()?;
    // 3. cudarc reads it back through a view of the gpu-mem array.
    let host: Vec<f32> = {
        let view = interop::view(&array, &cu_stream)?;
        cu_stream
            .clone_dtoh(&view.view())
            .map_err(cudarc_error("clone_dtoh"))?
    };
    let wrong = host
        .iter()
        .enumerate()
        .filter(|(i, v)| **v != 0.5 * *i as f32)
        .count();
    println!(
        "{n} elements allocated by cudarc, filled by gpu-mem's `fill` on {}, read back by \
         cudarc: {wrong} wrong",
        dev.info()?.name
    );
    if wrong != 0 {
        return Err(Error::InvalidArgument {
            name: "result",
            reason: format!("{wrong} of {n} elements differ from 0.5 * i"),
        });
    }
    Ok(())
}
