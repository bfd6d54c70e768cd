//! The CLI's charts, drawn as SVG with `plotters`: live bytes over time per kind of memory (from
//! a snapshot's history), and bandwidth against transfer size per kind of memory (from a bench).

use gpu_mem::usage::{MemoryKind, MemorySnapshot};
use gpu_mem::{Error, Result};
use plotters::prelude::*;
use std::path::Path;

const SIZE: (u32, u32) = (960, 540);
const MIB: f64 = 1024.0 * 1024.0;

fn chart_error(path: &Path, error: impl std::fmt::Display) -> Error {
    Error::InvalidArgument {
        name: "chart",
        reason: format!("cannot draw {}: {error}", path.display()),
    }
}

/// One line: its name and its points.
type Series = (String, Vec<(f64, f64)>);

/// Live bytes of each kind over the snapshot's history: a step per allocation or free, ending
/// at the snapshot. Without a history, each kind's bytes at the snapshot are one point.
fn live_bytes_series(snapshot: &MemorySnapshot) -> Vec<Series> {
    MemoryKind::ALL
        .iter()
        .filter_map(|&kind| {
            let mut live = 0f64;
            let mut points = vec![(0.0, 0.0)];
            for event in snapshot.history.iter().filter(|e| e.kind == kind) {
                points.push((event.seconds, live / MIB));
                if event.allocated {
                    live += event.bytes as f64;
                } else {
                    live = (live - event.bytes as f64).max(0.0);
                }
                points.push((event.seconds, live / MIB));
            }
            let now = snapshot.stats.kind(kind).current_bytes as f64 / MIB;
            points.push((
                snapshot.seconds,
                if snapshot.history.is_empty() {
                    now
                } else {
                    live / MIB
                },
            ));
            let used = snapshot.stats.kind(kind).allocations > 0;
            used.then(|| (kind.name().to_string(), points))
        })
        .collect()
}

fn draw_lines(
    path: &Path,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    series: &[Series],
    log_x: bool,
) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| chart_error(path, e);
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x_max, mut y_max, mut x_min) = (0f64, 0f64, f64::MAX);
    for &(x, y) in points {
        x_max = x_max.max(x);
        y_max = y_max.max(y);
        x_min = x_min.min(x);
    }
    let x_max = if x_max > 0.0 { x_max * 1.05 } else { 1.0 };
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60);
    macro_rules! finish {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                .draw()
                .map_err(|e| err(&e))?;
            for (i, (name, points)) in series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                chart
                    .draw_series(LineSeries::new(
                        points.iter().copied(),
                        color.stroke_width(2),
                    ))
                    .map_err(|e| err(&e))?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|e| err(&e))?;
        }};
    }
    if log_x {
        let x_min = if x_min.is_finite() && x_min > 0.0 {
            x_min
        } else {
            1.0
        };
        finish!(
            builder
                .build_cartesian_2d((x_min..x_max).log_scale(), 0f64..y_max)
                .map_err(|e| err(&e))?
        );
    } else {
        finish!(
            builder
                .build_cartesian_2d(0f64..x_max, 0f64..y_max)
                .map_err(|e| err(&e))?
        );
    }
    root.present().map_err(|e| err(&e))
}

/// Draws live MiB against seconds, one line per kind of memory the snapshot's device used.
pub fn live_bytes(snapshot: &MemorySnapshot, path: &Path) -> Result<()> {
    let stats = &snapshot.stats;
    let title = if snapshot.history.is_empty() {
        format!(
            "{} device {}: live memory (no history: GPU_MEM_TRACK=history records it)",
            stats.backend, stats.device
        )
    } else {
        format!(
            "{} device {}: live memory by kind",
            stats.backend, stats.device
        )
    };
    draw_lines(
        path,
        &title,
        ("seconds since the device's first use", "MiB"),
        &live_bytes_series(snapshot),
        false,
    )
}

/// Draws GiB/s against transfer bytes (log scale), one line per direction and memory kind.
pub fn bandwidth(title: &str, series: &[Series], path: &Path) -> Result<()> {
    draw_lines(
        path,
        title,
        ("transfer size (bytes)", "GiB/s"),
        series,
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::live_bytes_series;
    use gpu_mem::prelude::*;
    use gpu_mem::sim::{SimBackend, SimConfig};
    use std::sync::Arc;

    #[test]
    fn a_snapshot_without_history_has_one_point_per_used_kind() -> gpu_mem::Result<()> {
        let runtime =
            Runtime::with_backend(Arc::new(SimBackend::new(SimConfig::uniform(1, 1 << 20))));
        let dev = runtime.device(0)?;
        let _a = dev.device_array::<u8>(&[2 << 10], Order::C)?;
        let series = live_bytes_series(&dev.memory_snapshot());
        assert_eq!(series.len(), 1);
        let (name, points) = &series[0];
        assert_eq!(name, "device");
        let last = points.last().map(|p| p.1);
        assert_eq!(last, Some(2048.0 / super::MIB));
        Ok(())
    }
}
