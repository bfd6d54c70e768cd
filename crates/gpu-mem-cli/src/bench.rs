//! `gpu-mem bench`: a bandwidthTest-style table.

use crate::info::human;
use gpu_mem::prelude::*;
use gpu_mem::{BackendChoice, Error};
use serde::Serialize;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Smallest transfer: bytes, or with a unit from KiB to PiB (4KiB, 1.5MiB).
    #[arg(long, default_value = "4KiB")]
    min: String,
    /// Largest transfer, in the same units.
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

/// A size argument, in the units and with the message of the `GPU_MEM_SIM_MEMORY` variable
/// (`4096`, `4KiB`, `1.5MiB`, up to `1PiB`).
fn size_arg(name: &'static str, value: &str) -> Result<u64> {
    gpu_mem::sim::parse_size_of(name, value)
}

/// Progress on stderr: a bar on a terminal, plain lines otherwise (a log, a pipe, CI).
enum Progress {
    Bar(indicatif::ProgressBar),
    Lines { total: usize },
}

impl Progress {
    fn new(total: usize) -> Progress {
        if std::io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(total as u64),
                indicatif::ProgressDrawTarget::stderr(),
            );
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{spinner} [{bar:30}] {pos}/{len} {msg} ({elapsed})",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            Progress::Bar(bar)
        } else {
            Progress::Lines { total }
        }
    }

    /// About to measure step `done + 1` of the total.
    fn step(&self, done: usize, what: &str) {
        match self {
            Progress::Bar(bar) => {
                bar.set_position(done as u64);
                bar.set_message(what.to_string());
            }
            // One line per transfer size: enough to see it move, few enough to read in a log.
            Progress::Lines { total } if done.is_multiple_of(KINDS.len()) => {
                errln!("gpu-mem bench: measuring {what} ({}/{total})", done + 1);
            }
            Progress::Lines { .. } => {}
        }
    }

    /// Prints a line of output without tearing the bar.
    fn print(&self, line: &str) {
        match self {
            Progress::Bar(bar) => bar.suspend(|| outln!("{line}")),
            Progress::Lines { .. } => outln!("{line}"),
        }
    }

    fn finish(&self) {
        if let Progress::Bar(bar) = self {
            bar.finish_and_clear();
        }
    }
}

const KINDS: [(&str, &str); 7] = [
    ("H2D", "pageable"),
    ("D2H", "pageable"),
    ("H2D", "pinned"),
    ("D2H", "pinned"),
    ("H2D", "mapped"),
    ("D2H", "mapped"),
    ("D2D", "device"),
];

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
    let info = dev.info()?;
    let backend = runtime.kind().name();
    let progress = Progress::new(sizes.len() * KINDS.len());
    if !args.json {
        progress.print(&format!(
            "gpu-mem bandwidth: {backend} backend, {}",
            info.name
        ));
        let mut header = format!("{:>10}", "size");
        for (direction, memory) in KINDS {
            header.push_str(&format!("  {:>14}", format!("{direction} {memory}")));
        }
        progress.print(header.trim_end());
    }
    let mut rows: Vec<Row> = Vec::new();
    let stream = dev.stream()?;
    for &bytes in &sizes {
        let n = (bytes / 4) as usize;
        let mut d = dev.device_array::<u32>(&[n], Order::C)?;
        let mut d2 = dev.device_array::<u32>(&[n], Order::C)?;
        let mut pageable = ndarray::Array1::<u32>::from_elem(n, 1);
        let mut pinned = dev.pinned_array::<u32>(&[n])?;
        let mut mapped = dev.mapped_array::<u32>(&[n], MapFlags::default())?;
        let mut row = Vec::with_capacity(KINDS.len());
        for (direction, memory) in KINDS {
            let what = if row.is_empty() {
                format!("{} transfers", human(bytes))
            } else {
                format!("{} {direction} {memory}", human(bytes))
            };
            progress.step(rows.len() + row.len(), &what);
            let result = match (direction, memory) {
                ("H2D", "pageable") => measure(bytes, budget, || d.copy_from_host(&pageable)),
                ("D2H", "pageable") => {
                    measure(bytes, budget, || d.copy_to_host_into(&mut pageable))
                }
                ("H2D", "pinned") => measure(bytes, budget, || {
                    stream.copy_from_host(&mut d, &pinned)?;
                    stream.synchronize()
                }),
                ("D2H", "pinned") => measure(bytes, budget, || {
                    stream.copy_to_host(&d, &mut pinned)?;
                    stream.synchronize()
                }),
                ("H2D", "mapped") => measure(bytes, budget, || {
                    stream.copy_from_host(&mut d, &mapped)?;
                    stream.synchronize()
                }),
                ("D2H", "mapped") => measure(bytes, budget, || {
                    stream.copy_to_host(&d, &mut mapped)?;
                    stream.synchronize()
                }),
                _ => measure(bytes, budget, || d2.copy_from_device(&d)),
            };
            let (gib_per_s, iterations) = match result {
                Ok(result) => result,
                Err(error) => {
                    progress.finish();
                    return Err(error);
                }
            };
            row.push(Row {
                direction,
                memory,
                bytes,
                gib_per_s,
                iterations,
            });
        }
        if !args.json {
            let cells: Vec<String> = row
                .iter()
                .map(|r| format!("{:>8.2} GiB/s", r.gib_per_s))
                .collect();
            progress.print(&format!("{:>10}  {}", human(bytes), cells.join("  ")));
        }
        rows.extend(row);
    }
    progress.finish();
    if args.json {
        let report = Report {
            backend,
            device: info.name,
            rows,
        };
        let text = serde_json::to_string_pretty(&report).map_err(|e| Error::InvalidArgument {
            name: "json",
            reason: e.to_string(),
        })?;
        outln!("{text}");
    }
    Ok(())
}
