//! `gpu-mem selftest`: a quick end-to-end check of the selected backend — allocation,
//! transfers both ways, page-locked and mapped memory, a stream with an event, a kernel, and the
//! memory statistics (what the checks allocated, counted and all given back).

use gpu_mem::kernels::{TPB, matmul_tiled};
use gpu_mem::prelude::*;
use gpu_mem::{BackendChoice, Error};
use ndarray::Array2;

type Check = fn(&Device) -> gpu_mem::Result<()>;

fn fail(what: &str) -> Error {
    Error::InvalidArgument {
        name: "selftest",
        reason: what.to_string(),
    }
}

fn transfers(dev: &Device) -> gpu_mem::Result<()> {
    let host = Array2::from_shape_fn((64, 33), |(i, j)| (i * 33 + j) as f64);
    let d = dev.to_device(&host)?;
    if d.copy_to_host()? != host.clone().into_dyn() {
        return Err(fail("round trip changed the data"));
    }
    let col = d.slice(ndarray::s![.., 5])?.copy_to_host()?;
    if col != host.column(5).to_owned().into_dyn() {
        return Err(fail("a strided view came back wrong"));
    }
    Ok(())
}

fn streams(dev: &Device) -> gpu_mem::Result<()> {
    let stream = dev.stream()?;
    let mut src = dev.pinned_array::<u32>(&[1 << 16])?;
    src.view_mut()?
        .iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = i as u32);
    let start = stream.record_event()?;
    let d = stream.to_device(&src)?;
    let mut back = dev.pinned_array::<u32>(&[1 << 16])?;
    stream.copy_to_host(&d, &mut back)?;
    let end = stream.record_event()?;
    stream.synchronize()?;
    if back.view()?.iter().enumerate().any(|(i, v)| *v != i as u32) {
        return Err(fail("async copies through pinned memory changed the data"));
    }
    end.elapsed_since(&start)?;
    Ok(())
}

fn mapped(dev: &Device) -> gpu_mem::Result<()> {
    let m = dev.mapped_array::<u8>(&[4096], MapFlags::default())?;
    m.device_view().memset(0x5a)?;
    if m.read()?.iter().any(|v| *v != 0x5a) {
        return Err(fail(
            "a device write to mapped memory is not visible on the host",
        ));
    }
    Ok(())
}

fn kernel(dev: &Device) -> gpu_mem::Result<()> {
    let n = 48;
    let a = Array2::from_shape_fn((n, n), |(i, j)| (i + j) as f32);
    let b = Array2::from_shape_fn((n, n), |(i, j)| (i * 2) as f32 - j as f32);
    let mut c = Array2::<f32>::zeros((n, n));
    let blocks = n.div_ceil(TPB) as u32;
    let config = LaunchConfig::new((blocks, blocks), (TPB as u32, TPB as u32));
    // SAFETY: the ready-made kernel stays inside its arguments.
    unsafe {
        dev.launch(
            &matmul_tiled(),
            config,
            &mut [&mut In(&a), &mut In(&b), &mut c],
        )?
    };
    let expected = a.dot(&b);
    if c.iter()
        .zip(expected.iter())
        .any(|(x, y)| (x - y).abs() > 1e-3 * y.abs().max(1.0))
    {
        return Err(fail("the tiled matmul kernel computed a wrong product"));
    }
    Ok(())
}

/// The statistics follow an allocation and its free, and the checks before left nothing alive.
fn memory_statistics(dev: &Device) -> gpu_mem::Result<()> {
    use gpu_mem::usage::MemoryKind;
    let before = dev.memory_stats().kind(MemoryKind::Device);
    let d = dev.device_array::<u8>(&[3 << 20], Order::C)?;
    let during = dev.memory_stats().kind(MemoryKind::Device);
    if during.current_bytes != before.current_bytes + (3 << 20)
        || during.allocations != before.allocations + 1
    {
        return Err(fail(&format!(
            "a 3 MiB array was not counted: {before:?} then {during:?}"
        )));
    }
    if !dev.memory_summary().contains("3.0 MiB") {
        return Err(fail("the memory summary does not show the 3 MiB array"));
    }
    drop(d);
    let alive = gpu_mem::usage::leaks(dev);
    if !alive.is_empty() {
        return Err(fail(&format!(
            "{} allocation(s) of the checks still alive: {alive:?}",
            alive.len()
        )));
    }
    Ok(())
}

pub fn run(choice: BackendChoice, device: usize) -> gpu_mem::Result<()> {
    let runtime = Runtime::open(choice)?;
    let dev = runtime.device(device)?;
    outln!(
        "selftest on {} device {device}: {}",
        runtime.kind(),
        dev.info()?.name
    );
    let checks: [(&str, Check); 5] = [
        ("transfers", transfers),
        ("streams and events", streams),
        ("mapped memory", mapped),
        ("kernel launch", kernel),
        ("memory statistics", memory_statistics),
    ];
    let mut failed = 0;
    for (name, check) in checks {
        match check(&dev) {
            Ok(()) => outln!("  ok    {name}"),
            Err(error) => {
                failed += 1;
                outln!("  FAIL  {name}: {error}");
            }
        }
    }
    dev.check_release_errors()?;
    outln!("{} passed, {failed} failed", checks.len() - failed);
    if failed > 0 {
        return Err(fail(&format!("{failed} check(s) failed")));
    }
    Ok(())
}
