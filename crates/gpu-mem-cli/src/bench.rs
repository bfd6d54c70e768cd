//! `gpu-mem bench`: a bandwidthTest-style table.

use crate::info::human;
use gpu_mem::prelude::*;
use gpu_mem::{BackendChoice, BackendKind, Error};
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
    /// Also draw bandwidth against size per kind of memory, as SVG, to this file.
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
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
    /// `per_size` steps for each transfer size.
    Lines {
        total: usize,
        per_size: usize,
    },
}

impl Progress {
    fn new(total: usize, per_size: usize) -> Progress {
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
            Progress::Lines { total, per_size }
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
            Progress::Lines { total, per_size } if done.is_multiple_of(*per_size) => {
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

/// The transfers measured, and last a host `memcpy` between two page-aligned pageable buffers,
/// measured on the simulator only: its device memory is host memory, so a single-threaded
/// `memcpy` of the same size is what every kind there is read against (where pageable and
/// page-locked copies are both one such copy, which of them is ahead is down to noise; larger
/// page-locked copies, which the simulator splits between threads, pass it).
const KINDS: [(&str, &str); 8] = [
    ("H2D", "pageable"),
    ("D2H", "pageable"),
    ("H2D", "pinned"),
    ("D2H", "pinned"),
    ("H2D", "mapped"),
    ("D2H", "mapped"),
    ("D2D", "device"),
    ("H2H", "memcpy"),
];

/// The kinds measured on a backend: all of [`KINDS`] on the simulator, the transfers elsewhere.
fn kinds_for(backend: BackendKind) -> &'static [(&'static str, &'static str)] {
    match backend {
        BackendKind::Sim => &KINDS,
        _ => &KINDS[..KINDS.len() - 1],
    }
}

/// The buffers of one transfer size, and the stream the asynchronous copies go on.
struct Buffers {
    device: DeviceArray<u32>,
    other_device: DeviceArray<u32>,
    pageable: ndarray::Array1<u32>,
    /// The `memcpy`'s source and destination, each starting on a page (see [`page_aligned`]);
    /// only where the `memcpy` is measured.
    memcpy: Option<[(Vec<u32>, usize); 2]>,
    pinned: PinnedArray<u32>,
    mapped: MappedArray<u32>,
    stream: Stream,
}

impl Buffers {
    fn new(dev: &Device, n: usize, with_memcpy: bool) -> Result<Buffers> {
        Ok(Buffers {
            device: dev.device_array::<u32>(&[n], Order::C)?,
            other_device: dev.device_array::<u32>(&[n], Order::C)?,
            pageable: ndarray::Array1::<u32>::from_elem(n, 1),
            memcpy: with_memcpy.then(|| [page_aligned(n), page_aligned(n)]),
            pinned: dev.pinned_array::<u32>(&[n])?,
            mapped: dev.mapped_array::<u32>(&[n], MapFlags::default())?,
            stream: dev.stream()?,
        })
    }

    /// One transfer of one kind. Pageable and device-to-device copies are synchronous;
    /// page-locked and mapped ones go on the stream, which is then synchronized; the `memcpy`
    /// copies between the two page-aligned host buffers.
    fn transfer(&mut self, kind: (&str, &str)) -> Result<()> {
        let Buffers {
            device,
            other_device,
            pageable,
            memcpy,
            pinned,
            mapped,
            stream,
        } = self;
        match kind {
            ("H2H", "memcpy") => {
                if let Some([(source, from), (destination, to)]) = memcpy {
                    let n = device.size();
                    destination[*to..*to + n]
                        .copy_from_slice(std::hint::black_box(&source[*from..*from + n]));
                    std::hint::black_box(&mut *destination);
                }
                return Ok(());
            }
            ("H2D", "pageable") => return device.copy_from_host(&*pageable),
            ("D2H", "pageable") => return device.copy_to_host_into(pageable),
            ("H2D", "pinned") => stream.copy_from_host(device, &*pinned)?,
            ("D2H", "pinned") => stream.copy_to_host(&*device, pinned)?,
            ("H2D", "mapped") => stream.copy_from_host(device, &*mapped)?,
            ("D2H", "mapped") => stream.copy_to_host(&*device, mapped)?,
            _ => return other_device.copy_from_device(&*device),
        }
        // An asynchronous copy is done when its stream is.
        stream.synchronize()
    }
}

/// A buffer of `n` elements starting on a page: a `Vec` with a page to spare, and the index of
/// its first element on a page boundary. Two such buffers are a `memcpy` at its best: where the
/// destination lies a few bytes past the source modulo a page, or an odd multiple of 16 bytes,
/// `memcpy` runs several times slower on some machines (as two heap blocks allocated one after
/// the other often do).
fn page_aligned(n: usize) -> (Vec<u32>, usize) {
    const PAGE: usize = 4096;
    let buffer = vec![1u32; n + PAGE / 4];
    let skip = (PAGE - buffer.as_ptr() as usize % PAGE) % PAGE / 4;
    (buffer, skip)
}

/// Rounds per transfer size: each round gives every kind of transfer its share of the time in
/// turn, so that a slow stretch of a shared machine falls on all of them alike and the ratios
/// between them (page-locked against pageable) hold within one run.
const ROUNDS: u32 = 5;

/// The time and bytes one kind of transfer has run for.
#[derive(Default, Clone, Copy)]
struct Tally {
    seconds: f64,
    bytes: u64,
    iterations: u32,
}

impl Tally {
    /// Runs `op` (which moves `bytes`) for about `slice`, at least once.
    fn run(
        &mut self,
        bytes: u64,
        slice: Duration,
        mut op: impl FnMut() -> Result<()>,
    ) -> Result<()> {
        let start = Instant::now();
        let mut iterations = 0u32;
        while iterations == 0 || start.elapsed() < slice {
            op()?;
            iterations += 1;
        }
        self.seconds += start.elapsed().as_secs_f64();
        self.bytes += bytes * u64::from(iterations);
        self.iterations += iterations;
        Ok(())
    }

    fn gib_per_s(&self) -> f64 {
        self.bytes as f64 / self.seconds / (1u64 << 30) as f64
    }
}

/// Measures every kind of transfer of `bytes` in [`ROUNDS`] turns of `slice` each, after one
/// warm-up transfer of each (`starting` is told before a kind's first).
fn measure_size(
    dev: &Device,
    kinds: &[(&'static str, &'static str)],
    bytes: u64,
    slice: Duration,
    mut starting: impl FnMut(usize, (&str, &str)),
) -> Result<Vec<Tally>> {
    let with_memcpy = kinds.contains(&("H2H", "memcpy"));
    let mut buffers = Buffers::new(dev, (bytes / 4) as usize, with_memcpy)?;
    let mut tallies = vec![Tally::default(); kinds.len()];
    for round in 0..ROUNDS {
        for (index, &kind) in kinds.iter().enumerate() {
            if round == 0 {
                starting(index, kind);
                buffers.transfer(kind)?;
            }
            tallies[index].run(bytes, slice, || buffers.transfer(kind))?;
        }
    }
    Ok(tallies)
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
    // Transfers move whole 4-byte elements: each size is what is really moved (a requested
    // size between two multiples of 4 is rounded down, and the row says so by its size).
    let mut sizes = Vec::new();
    let mut size = min;
    while size <= max {
        let moved = size / 4 * 4;
        if sizes.last() != Some(&moved) {
            sizes.push(moved);
        }
        size *= 4;
    }
    let info = dev.info()?;
    let backend = runtime.kind().name();
    let kinds = kinds_for(runtime.kind());
    let progress = Progress::new(sizes.len() * kinds.len(), kinds.len());
    if !args.json {
        progress.print(&format!(
            "gpu-mem bandwidth: {backend} backend, {}",
            info.name
        ));
        let mut header = format!("{:>10}", "size");
        for (direction, memory) in kinds {
            header.push_str(&format!("  {:>14}", format!("{direction} {memory}")));
        }
        progress.print(header.trim_end());
    }
    let mut rows: Vec<Row> = Vec::new();
    let slice = budget / ROUNDS;
    for (index, &bytes) in sizes.iter().enumerate() {
        let measured = measure_size(&dev, kinds, bytes, slice, |kind, (direction, memory)| {
            let what = if kind == 0 {
                format!("{} transfers", human(bytes))
            } else {
                format!("{} {direction} {memory}", human(bytes))
            };
            progress.step(index * kinds.len() + kind, &what);
        });
        let tallies = match measured {
            Ok(tallies) => tallies,
            Err(error) => {
                progress.finish();
                return Err(error);
            }
        };
        let row: Vec<Row> = kinds
            .iter()
            .zip(tallies)
            .map(|(&(direction, memory), tally)| Row {
                direction,
                memory,
                bytes,
                gib_per_s: tally.gib_per_s(),
                iterations: tally.iterations,
            })
            .collect();
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
    if let Some(path) = &args.plot {
        let series: Vec<(String, Vec<(f64, f64)>)> = kinds
            .iter()
            .map(|&(direction, memory)| {
                let points = rows
                    .iter()
                    .filter(|r| r.direction == direction && r.memory == memory)
                    .map(|r| (r.bytes as f64, r.gib_per_s))
                    .collect();
                (format!("{direction} {memory}"), points)
            })
            .collect();
        let title = format!("gpu-mem bandwidth: {backend} backend, {}", info.name);
        crate::plot::bandwidth(&title, &series, path)?;
        if !args.json {
            progress.print(&format!("bandwidth chart: {}", path.display()));
        }
    }
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
