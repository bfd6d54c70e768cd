//! `gpu-mem bench`: a bandwidthTest-style table.

use crate::info::human;
use gpu_mem::prelude::*;
use gpu_mem::{BackendChoice, Error};
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Smallest transfer (bytes or with a unit: 4KiB).
    #[arg(long, default_value = "4KiB")]
    min: String,
    /// Largest transfer.
    #[arg(long, default_value = "256MiB")]
    max: String,
    /// Time spent per measurement, in milliseconds.
    #[arg(long, default_value_t = 20)]
    millis: u64,
}

#[derive(Serialize, Clone)]
struct Row {
    direction: &'static str,
    memory: &'static str,
    bytes: u64,
    gib_per_s: f64,
    iterations: u32,
}

#[derive(Serialize)]
struct Report {
    backend: &'static str,
    device: String,
    rows: Vec<Row>,
}

fn size_arg(name: &'static str, value: &str) -> Result<u64> {
    gpu_mem::sim::parse_size(value).map_err(|_| Error::InvalidArgument {
        name,
        reason: format!("{value:?} is not a size"),
    })
}

/// Runs `op` repeatedly for about `budget` (at least 3 times) and returns GiB/s.
fn measure(bytes: u64, budget: Duration, mut op: impl FnMut() -> Result<()>) -> Result<(f64, u32)> {
    op()?; // warm-up
    let start = Instant::now();
    let mut iterations = 0u32;
    while iterations < 3 || start.elapsed() < budget {
        op()?;
        iterations += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok((
        bytes as f64 * iterations as f64 / seconds / (1u64 << 30) as f64,
        iterations,
    ))
}

pub fn run(choice: BackendChoice, args: &BenchArgs) -> Result<()> {
    let (min, max) = (size_arg("--min", &args.min)?, size_arg("--max", &args.max)?);
    if min > max || min < 4 {
        return Err(Error::InvalidArgument {
            name: "--min",
            reason: "must be at least 4 bytes and at most --max".into(),
        });
    }
    let runtime = Runtime::open(choice)?;
    let dev = runtime.device(args.device)?;
    let budget = Duration::from_millis(args.millis.max(1));
    let mut sizes = Vec::new();
    let mut size = min;
    while size <= max {
        sizes.push(size);
        size *= 4;
    }
    let progress = std::io::stderr().is_terminal() && !args.json;
    let total = sizes.len() * 7;
    let mut rows = Vec::new();
    let stream = dev.stream()?;
    for &bytes in &sizes {
        let n = (bytes / 4) as usize;
        let mut d = dev.device_array::<u32>(&[n], Order::C)?;
        let mut d2 = dev.device_array::<u32>(&[n], Order::C)?;
        let mut pageable = ndarray::Array1::<u32>::from_elem(n, 1);
        let mut pinned = dev.pinned_array::<u32>(&[n])?;
        let mut mapped = dev.mapped_array::<u32>(&[n], MapFlags::default())?;
        let mut push = |direction, memory, result: (f64, u32)| {
            rows.push(Row {
                direction,
                memory,
                bytes,
                gib_per_s: result.0,
                iterations: result.1,
            });
            if progress {
                let _ = write!(
                    std::io::stderr(),
                    "\r  measuring: {}/{} ",
                    rows.len(),
                    total
                );
                let _ = std::io::stderr().flush();
            }
        };
        push(
            "H2D",
            "pageable",
            measure(bytes, budget, || d.copy_from_host(&pageable))?,
        );
        push(
            "D2H",
            "pageable",
            measure(bytes, budget, || d.copy_to_host_into(&mut pageable))?,
        );
        push(
            "H2D",
            "pinned",
            measure(bytes, budget, || {
                stream.copy_from_host(&mut d, &pinned)?;
                stream.synchronize()
            })?,
        );
        push(
            "D2H",
            "pinned",
            measure(bytes, budget, || {
                stream.copy_to_host(&d, &mut pinned)?;
                stream.synchronize()
            })?,
        );
        push(
            "H2D",
            "mapped",
            measure(bytes, budget, || {
                stream.copy_from_host(&mut d, &mapped)?;
                stream.synchronize()
            })?,
        );
        push(
            "D2H",
            "mapped",
            measure(bytes, budget, || {
                stream.copy_to_host(&d, &mut mapped)?;
                stream.synchronize()
            })?,
        );
        push(
            "D2D",
            "device",
            measure(bytes, budget, || d2.copy_from_device(&d))?,
        );
    }
    if progress {
        errln!("");
    }
    let info = dev.info()?;
    let report = Report {
        backend: runtime.kind().name(),
        device: info.name,
        rows,
    };
    if args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| Error::InvalidArgument {
            name: "json",
            reason: e.to_string(),
        })?;
        outln!("{text}");
        return Ok(());
    }
    outln!(
        "gpu-mem bandwidth: {} backend, {}",
        report.backend,
        report.device
    );
    outln!(
        "{:>10}  {:>12}  {:>12}  {:>12}  {:>12}  {:>12}  {:>12}  {:>12}",
        "size",
        "H2D pageable",
        "D2H pageable",
        "H2D pinned",
        "D2H pinned",
        "H2D mapped",
        "D2H mapped",
        "D2D"
    );
    for chunk in report.rows.chunks(7) {
        let cells: Vec<String> = chunk
            .iter()
            .map(|r| format!("{:>8.2} GiB/s", r.gib_per_s))
            .collect();
        outln!("{:>10}  {}", human(chunk[0].bytes), cells.join("  "));
    }
    Ok(())
}
