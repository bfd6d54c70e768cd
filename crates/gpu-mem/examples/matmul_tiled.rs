//! Tiled matrix multiply with shared memory (Numba's `fast_matmul` example), checked against
//! ndarray's `dot`.
//!
//! `cargo run -p gpu-mem --example matmul_tiled [n]` (default n = 100; any size works).

use gpu_mem::kernels::{TPB, matmul_tiled};
use gpu_mem::prelude::*;
use ndarray::Array2;

fn main() -> gpu_mem::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let runtime = Runtime::from_env()?;
    let device = runtime.device(0)?;
    let a = Array2::from_shape_fn((n, n), |(i, j)| ((i * 7 + j * 3) % 11) as f32 - 5.0);
    let b = Array2::from_shape_fn((n, n), |(i, j)| ((i * 5 + j * 2) % 13) as f32 * 0.5);
    let mut da = device.to_device(&a)?;
    let mut db = device.to_device(&b)?;
    let mut dc = device.device_array::<f32>(&[n, n], Order::C)?;
    let blocks = n.div_ceil(TPB) as u32;
    let config = LaunchConfig::new((blocks, blocks), (TPB as u32, TPB as u32));
    let start = std::time::Instant::now();
    // SAFETY: the kernel indexes A, B and C only inside their shapes (bounds-checked on the
    // simulator), and nothing else uses these arrays meanwhile.
    unsafe { device.launch(&matmul_tiled(), config, &mut [&mut da, &mut db, &mut dc])? };
    let elapsed = start.elapsed();
    let c = dc.copy_to_host()?;
    let expected = a.dot(&b).into_dyn();
    let worst = c
        .iter()
        .zip(expected.iter())
        .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
        .fold(0.0f32, f32::max);
    println!(
        "matmul_tiled on {} ({}): {n}x{n} in {:.3} ms, max relative error {worst:.2e}",
        runtime.kind(),
        device.info()?.name,
        elapsed.as_secs_f64() * 1e3
    );
    if worst > 1e-5 {
        return Err(gpu_mem::Error::InvalidArgument {
            name: "result",
            reason: format!("C differs from A.dot(B) by {worst}"),
        });
    }
    println!("result: correct");
    Ok(())
}
