//! A ROC-style kernel: a block barrier with a global memory fence (`barrier(Fence::Global)`,
//! ROC's `barrier(CLK_GLOBAL_MEM_FENCE)`) and a wavefront barrier (`wavebarrier()`), with the
//! arrays registered with the device for the launch (`roc.register`). Checks every element.
//!
//! `cargo run -p gpu-mem --example barrier_wave`

use gpu_mem::kernels::{BARRIER_WAVE_MAX_BLOCK, barrier_wave, barrier_wave_expected};
use gpu_mem::prelude::*;
use ndarray::Array1;

fn main() -> gpu_mem::Result<()> {
    let runtime = Runtime::from_env()?;
    let device = runtime.device(0)?;
    let warp = device.info()?.warp_size as usize;
    let block = BARRIER_WAVE_MAX_BLOCK as u32;
    let n = 1000usize;
    // Numba ROC's `with roc.register(out, scratch): kernel[...](out, scratch)`: the arrays are
    // page-locked while the kernel runs, then handed back.
    let mut out_reg = device.register(Array1::<f32>::zeros(n))?;
    let mut scratch_reg = device.register(Array1::<f32>::zeros(n))?;
    let config = LaunchConfig::for_items(n, block);
    {
        let (mut out_view, mut scratch_view) = (out_reg.view_mut()?, scratch_reg.view_mut()?);
        // SAFETY: the kernel writes out[i] and scratch[i] for i < n only; both host arrays are
        // copied to the device and back.
        unsafe {
            device.launch(
                &barrier_wave(),
                config,
                &mut [&mut out_view, &mut scratch_view],
            )?
        };
    }
    let (out, scratch) = (out_reg.into_inner()?, scratch_reg.into_inner()?);
    let wrong = (0..n)
        .filter(|&i| {
            out[i] != barrier_wave_expected(i, block as usize, warp) || scratch[i] != i as f32
        })
        .count();
    println!(
        "barrier_wave on {} (warp size {warp}): {n} threads, {wrong} wrong",
        runtime.kind()
    );
    if wrong > 0 {
        return Err(gpu_mem::Error::InvalidArgument {
            name: "result",
            reason: format!("{wrong} elements are wrong"),
        });
    }
    println!("result: correct");
    Ok(())
}
