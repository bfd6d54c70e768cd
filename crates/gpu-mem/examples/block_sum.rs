//! Block-sum reduction in shared memory with dynamic shared memory, summed on the host and
//! checked against a plain sum.
//!
//! `cargo run -p gpu-mem --example block_sum [n]` (default 65,536 elements, 256-thread blocks).

use gpu_mem::kernels::block_sum;
use gpu_mem::prelude::*;
use ndarray::Array1;

fn main() -> gpu_mem::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(65_536);
    let block = 256u32;
    let runtime = Runtime::from_env()?;
    let device = runtime.device(0)?;
    let input = Array1::from_shape_fn(n, |i| (i % 17) as f32 * 0.25);
    let blocks = n.div_ceil(block as usize).max(1);
    let mut d_input = device.to_device(&input)?;
    let mut partial = Array1::<f32>::zeros(blocks);
    let config = LaunchConfig::for_items(n, block).with_shared_bytes(block as usize * 4);
    let stream = device.stream()?;
    let start = std::time::Instant::now();
    // SAFETY: the kernel reads input[i] for i < n and writes partial[b] for b < blocks only.
    // `partial` is a host array: copied in, and back once the kernel has run (Numba's InOut).
    unsafe { stream.launch(&block_sum(), config, &mut [&mut d_input, &mut partial])? };
    let elapsed = start.elapsed();
    let total: f64 = partial.iter().map(|v| *v as f64).sum();
    let expected: f64 = input.iter().map(|v| *v as f64).sum();
    println!(
        "block_sum on {}: {n} elements in {blocks} blocks of {block} in {:.3} ms: sum {total} (expected {expected})",
        runtime.kind(),
        elapsed.as_secs_f64() * 1e3
    );
    if (total - expected).abs() > 1e-6 * expected.abs().max(1.0) {
        return Err(gpu_mem::Error::InvalidArgument {
            name: "result",
            reason: format!("sum {total} != {expected}"),
        });
    }
    println!("result: correct");
    Ok(())
}
