//! `gpu-mem info`.

use crate::Selection;
use gpu_mem::{Result, Runtime, backends};
use serde::Serialize;

#[derive(Serialize)]
struct DeviceReport {
    ordinal: usize,
    name: String,
    arch: String,
    total_memory: u64,
    free_memory: u64,
    warp_size: u32,
    max_threads_per_block: u32,
    max_shared_memory_per_block: usize,
    can_map_host_memory: bool,
}

#[derive(Serialize)]
struct BackendReport {
    backend: &'static str,
    compiled: bool,
    available: bool,
    reason: Option<String>,
    /// The collectives engine ("NCCL 2.32.3 (libnccl.so.2)"), why it cannot be used, or that the
    /// backend has none (`gpu_mem::collective`).
    collectives: Option<String>,
    devices: Vec<DeviceReport>,
}

#[derive(Serialize)]
struct Report {
    selected: Option<&'static str>,
    /// The choice as written (`auto`, `cuda`, `roc`, `sim`).
    choice: String,
    /// What set it: `flag`, `environment` or `default`.
    choice_source: &'static str,
    selection_error: Option<String>,
    backends: Vec<BackendReport>,
}

/// What `backend` answers about collectives: its engine, or why there is none usable.
fn collectives(backend: &std::sync::Arc<dyn gpu_mem::Backend>) -> String {
    match backend.collectives() {
        None => "none (the backend has no engine, or its `nccl` feature is off)".into(),
        Some(engine) => match engine.engine() {
            Ok(name) => name,
            Err(error) => format!("unavailable: {error}"),
        },
    }
}

fn devices(backend: &std::sync::Arc<dyn gpu_mem::Backend>) -> Result<Vec<DeviceReport>> {
    (0..backend.device_count())
        .map(|i| {
            let info = backend.device_info(i)?;
            let mem = backend.mem_info(i)?;
            Ok(DeviceReport {
                ordinal: i,
                name: info.name,
                arch: info.arch,
                total_memory: mem.total,
                free_memory: mem.free,
                warp_size: info.warp_size,
                max_threads_per_block: info.max_threads_per_block,
                max_shared_memory_per_block: info.max_shared_memory_per_block,
                can_map_host_memory: info.can_map_host_memory,
            })
        })
        .collect()
}

pub fn run(selected: Selection, json: bool) -> Result<()> {
    let mut reports = Vec::new();
    for status in backends() {
        let engine = status.backend.as_ref().ok().map(collectives);
        let (available, reason, devs) = match &status.backend {
            // A backend that opens but cannot report a device is listed with the reason, and
            // the others still are.
            Ok(backend) => match devices(backend) {
                Ok(devs) => (true, None, devs),
                Err(error) => (
                    true,
                    Some(format!("a device does not report: {error}")),
                    Vec::new(),
                ),
            },
            // "unavailable" is already said by the line; keep only the reason.
            Err(gpu_mem::Error::BackendUnavailable { reason, .. }) => {
                (false, Some(reason.clone()), Vec::new())
            }
            Err(error) => (false, Some(error.to_string()), Vec::new()),
        };
        reports.push(BackendReport {
            backend: status.kind.name(),
            compiled: status.compiled,
            available,
            reason,
            collectives: engine,
            devices: devs,
        });
    }
    let opened = Runtime::open(selected.choice);
    let report = Report {
        selected: opened.as_ref().ok().map(|r| r.kind().name()),
        choice: selected.choice.to_string(),
        choice_source: match selected.source {
            crate::Source::Flag => "flag",
            crate::Source::Environment => "environment",
            crate::Source::Default => "default",
        },
        selection_error: opened.as_ref().err().map(|e| e.to_string()),
        backends: reports,
    };
    if json {
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| gpu_mem::Error::InvalidArgument {
                name: "json",
                reason: e.to_string(),
            })?;
        outln!("{text}");
        // As the text form: a selected backend that cannot be opened is a failure.
        return opened.map(drop);
    }
    match (&report.selected, &report.selection_error) {
        (Some(name), _) => outln!("selected backend: {name} ({selected})"),
        (None, Some(error)) => outln!("selected backend: none ({selected}): {error}"),
        _ => {}
    }
    for b in &report.backends {
        if b.available {
            // An available backend may still have a device that did not report (the reason).
            match b.reason.as_deref() {
                Some(reason) => outln!(
                    "\n{}: available, {} device(s) ({reason})",
                    b.backend,
                    b.devices.len()
                ),
                None => outln!("\n{}: available, {} device(s)", b.backend, b.devices.len()),
            }
        } else {
            outln!(
                "\n{}: unavailable: {}",
                b.backend,
                b.reason.as_deref().unwrap_or("unknown reason")
            );
        }
        if let Some(engine) = &b.collectives {
            outln!("  collectives: {engine}");
        }
        for d in &b.devices {
            outln!("  device {}: {} ({})", d.ordinal, d.name, d.arch);
            outln!(
                "    memory: {} free of {}",
                human(d.free_memory),
                human(d.total_memory)
            );
            outln!(
                "    warp size: {}, max threads/block: {}, shared memory/block: {}",
                d.warp_size,
                d.max_threads_per_block,
                human(d.max_shared_memory_per_block as u64)
            );
            outln!(
                "    maps host memory: {}",
                if d.can_map_host_memory { "yes" } else { "no" }
            );
        }
    }
    // Exit non-zero when the requested backend cannot be opened, with its own error.
    opened.map(drop)
}

/// A byte count as a user reads it (`256.0 MiB`), in binary units.
pub fn human(bytes: u64) -> String {
    bytesize::ByteSize::b(bytes).display().iec().to_string()
}
