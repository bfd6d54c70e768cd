//! Run-time backend selection: `GPU_MEM_BACKEND=auto|cuda|roc|sim`.
//!
//! `auto` (the default) tries CUDA, then ROC, then the simulator, logging each attempt with
//! `tracing`, and takes the first that opens with at least one device. A named backend that
//! cannot be opened is an error that says why — including "not compiled in" when its Cargo
//! feature is off.

use gpu_mem_core::{Backend, BackendKind, Device, Error, Result};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Which backend to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// The first available of CUDA, ROC, simulator.
    #[default]
    Auto,
    /// One backend.
    Only(BackendKind),
}

impl FromStr for BackendChoice {
    type Err = Error;
    fn from_str(value: &str) -> Result<BackendChoice> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(BackendChoice::Auto),
            "cuda" => Ok(BackendChoice::Only(BackendKind::Cuda)),
            "roc" | "rocm" | "hsa" => Ok(BackendChoice::Only(BackendKind::Roc)),
            "sim" | "simulator" => Ok(BackendChoice::Only(BackendKind::Sim)),
            _ => Err(Error::UnknownBackend {
                name: value.to_string(),
            }),
        }
    }
}

/// The choice as a user writes it in `GPU_MEM_BACKEND`: `auto`, `cuda`, `roc`, `sim` (what
/// [`FromStr`] reads back).
impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendChoice::Auto => f.write_str("auto"),
            BackendChoice::Only(kind) => f.write_str(kind.name()),
        }
    }
}

impl BackendChoice {
    /// Reads `GPU_MEM_BACKEND` (unset or empty means `auto`).
    pub fn from_env() -> Result<BackendChoice> {
        match std::env::var("GPU_MEM_BACKEND") {
            Ok(value) => value.parse(),
            Err(std::env::VarError::NotPresent) => Ok(BackendChoice::Auto),
            Err(std::env::VarError::NotUnicode(raw)) => Err(Error::UnknownBackend {
                name: raw.to_string_lossy().into_owned(),
            }),
        }
    }
}

/// Whether a backend can be used here.
#[derive(Debug)]
pub struct BackendStatus {
    /// The backend.
    pub kind: BackendKind,
    /// Whether its Cargo feature is on.
    pub compiled: bool,
    /// The opened backend, or why it is unavailable.
    pub backend: Result<Arc<dyn Backend>>,
}

impl BackendStatus {
    /// `true` when the backend opened.
    pub fn is_available(&self) -> bool {
        self.backend.is_ok()
    }

    /// Why the backend is unavailable (`None` when it is available), without repeating that it
    /// is unavailable.
    pub fn reason(&self) -> Option<String> {
        self.backend.as_ref().err().map(|error| match error {
            Error::BackendUnavailable { reason, .. } => reason.clone(),
            Error::BackendUnusable { reason, .. } => format!("installed but unusable: {reason}"),
            other => other.to_string(),
        })
    }
}

/// Whether `error` (from opening a backend) says the backend is simply not there: its library
/// not installed (no candidate file found at all), no device, not compiled in; not that
/// something installed is broken (a library there that does not load, or refuses to start).
fn is_absent(error: &Error) -> bool {
    matches!(
        error,
        Error::LibraryLoad { present: false, .. } | Error::BackendUnavailable { .. }
    )
}

/// `<backend>: <why>`, for [`Error::NoBackend`].
fn unavailable_reason(kind: BackendKind, error: Error) -> String {
    match error {
        Error::BackendUnavailable { reason, .. } => format!("{kind}: {reason}"),
        other => format!("{kind}: {other}"),
    }
}

/// Opens one backend, or says why it cannot be used.
pub fn open_backend(kind: BackendKind) -> Result<Arc<dyn Backend>> {
    let backend = match kind {
        BackendKind::Cuda => open_cuda(),
        BackendKind::Roc => open_roc(),
        BackendKind::Sim => open_sim(),
    }?;
    if backend.device_count() == 0 {
        return Err(Error::BackendUnavailable {
            backend: kind,
            reason: "no devices found".into(),
        });
    }
    Ok(backend)
}

// Unused only when every backend is compiled in.
#[cfg_attr(
    all(feature = "cuda", feature = "roc", feature = "sim"),
    allow(dead_code)
)]
fn not_compiled(kind: BackendKind) -> Error {
    Error::BackendUnavailable {
        backend: kind,
        reason: format!("not compiled in (enable the `{kind}` feature of the gpu-mem crate)"),
    }
}

#[cfg(feature = "cuda")]
fn open_cuda() -> Result<Arc<dyn Backend>> {
    gpu_mem_cuda::open()
}
#[cfg(not(feature = "cuda"))]
fn open_cuda() -> Result<Arc<dyn Backend>> {
    Err(not_compiled(BackendKind::Cuda))
}

#[cfg(feature = "roc")]
fn open_roc() -> Result<Arc<dyn Backend>> {
    gpu_mem_roc::open()
}
#[cfg(not(feature = "roc"))]
fn open_roc() -> Result<Arc<dyn Backend>> {
    Err(not_compiled(BackendKind::Roc))
}

#[cfg(feature = "sim")]
fn open_sim() -> Result<Arc<dyn Backend>> {
    Ok(Arc::new(gpu_mem_sim::SimBackend::from_env()?))
}
#[cfg(not(feature = "sim"))]
fn open_sim() -> Result<Arc<dyn Backend>> {
    Err(not_compiled(BackendKind::Sim))
}

fn compiled(kind: BackendKind) -> bool {
    match kind {
        BackendKind::Cuda => cfg!(feature = "cuda"),
        BackendKind::Roc => cfg!(feature = "roc"),
        BackendKind::Sim => cfg!(feature = "sim"),
    }
}

/// Every backend gpu-mem knows, with whether it is compiled in and available, in `auto` order.
pub fn backends() -> Vec<BackendStatus> {
    BackendKind::ALL
        .iter()
        .map(|&kind| BackendStatus {
            kind,
            compiled: compiled(kind),
            backend: open_backend(kind),
        })
        .collect()
}

/// An opened backend and its devices.
///
/// When the last clone of a runtime is dropped with [`leak_check_enabled`](gpu_mem_core::usage::leak_check_enabled)
/// (`GPU_MEM_LEAK_CHECK=1`, or a debug build), allocations of its devices still alive are listed
/// in a `tracing` warning with where each was made.
#[derive(Clone)]
pub struct Runtime {
    backend: Arc<dyn Backend>,
    /// Shared by the clones; the last one's drop runs the leak check.
    _leak_check: Arc<LeakCheck>,
}

/// Runs the leak check for a backend when dropped.
struct LeakCheck {
    backend: Arc<dyn Backend>,
}

impl Drop for LeakCheck {
    fn drop(&mut self) {
        if gpu_mem_core::usage::leak_check_enabled() {
            gpu_mem_core::usage::warn_about_leaks(&self.backend);
        }
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("backend", &self.backend.kind())
            .field("devices", &self.backend.device_count())
            .finish()
    }
}

impl Runtime {
    /// Opens the backend named by `GPU_MEM_BACKEND` (default `auto`).
    pub fn from_env() -> Result<Runtime> {
        Runtime::open(BackendChoice::from_env()?)
    }

    /// Opens a backend.
    pub fn open(choice: BackendChoice) -> Result<Runtime> {
        match choice {
            BackendChoice::Only(kind) => {
                let backend = open_backend(kind)?;
                tracing::info!(backend = %kind, devices = backend.device_count(), "opened backend");
                Ok(Runtime::with_backend(backend))
            }
            BackendChoice::Auto => {
                let mut reasons = Vec::new();
                for kind in BackendKind::ALL {
                    match open_backend(kind) {
                        Ok(backend) => {
                            tracing::info!(backend = %kind, devices = backend.device_count(), "auto: selected backend");
                            return Ok(Runtime::with_backend(backend));
                        }
                        // A library that is not installed is the normal case on most
                        // machines; one that is there but cannot be used (a driver and library
                        // of different versions, no permission, a bad setting) is worth a
                        // warning: the run goes on, on another backend, where the user may
                        // expect the GPU.
                        Err(error) if is_absent(&error) => {
                            tracing::info!(backend = %kind, "auto: backend unavailable: {error}");
                            reasons.push(unavailable_reason(kind, error));
                        }
                        Err(error) => {
                            tracing::warn!(backend = %kind, "auto: backend present but unusable, skipped: {error}");
                            reasons.push(unavailable_reason(kind, error));
                        }
                    }
                }
                Err(Error::NoBackend { reasons })
            }
        }
    }

    /// Opens one backend by kind (no fallback).
    pub fn open_kind(kind: BackendKind) -> Result<Runtime> {
        Runtime::open(BackendChoice::Only(kind))
    }

    /// Wraps an already opened backend (e.g. a configured simulator).
    pub fn with_backend(backend: Arc<dyn Backend>) -> Runtime {
        Runtime {
            _leak_check: Arc::new(LeakCheck {
                backend: Arc::clone(&backend),
            }),
            backend,
        }
    }

    /// The backend.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Which backend this is.
    pub fn kind(&self) -> BackendKind {
        self.backend.kind()
    }

    /// Number of devices.
    pub fn device_count(&self) -> usize {
        self.backend.device_count()
    }

    /// Device `ordinal`.
    pub fn device(&self, ordinal: usize) -> Result<Device> {
        Device::new(Arc::clone(&self.backend), ordinal)
    }

    /// Every device.
    pub fn devices(&self) -> Result<Vec<Device>> {
        (0..self.device_count()).map(|i| self.device(i)).collect()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn choices_display_as_a_user_writes_them() {
        for (choice, text) in [
            (BackendChoice::Auto, "auto"),
            (BackendChoice::Only(BackendKind::Cuda), "cuda"),
            (BackendChoice::Only(BackendKind::Roc), "roc"),
            (BackendChoice::Only(BackendKind::Sim), "sim"),
        ] {
            assert_eq!(choice.to_string(), text);
            assert_eq!(text.parse::<BackendChoice>().ok(), Some(choice));
        }
    }

    use super::*;

    /// `auto` warns only about what is installed and broken, not about what is not there.
    #[test]
    fn absent_backends_are_told_from_broken_ones() {
        let absent = [
            Error::LibraryLoad {
                library: "the CUDA driver",
                tried: vec!["libcuda.so.1".into()],
                reason: "not found".into(),
                present: false,
            },
            Error::BackendUnavailable {
                backend: BackendKind::Roc,
                reason: "no AMD GPU driver".into(),
            },
        ];
        let broken = [
            Error::LibraryLoad {
                library: "the HSA runtime",
                tried: vec!["libhsa-runtime64.so.1".into()],
                reason: "version `GLIBC_2.38' not found".into(),
                present: true,
            },
            Error::BackendUnusable {
                backend: BackendKind::Cuda,
                reason: "libcuda.so.1: cuInit failed".into(),
            },
            Error::MissingSymbol {
                library: "the CUDA driver",
                path: "libcuda.so.1".into(),
                symbol: "cuInit",
                feature: "the CUDA backend",
            },
            Error::InvalidArgument {
                name: "GPU_MEM_CUDA_ALLOCATOR",
                reason: "unknown value".into(),
            },
        ];
        assert!(absent.iter().all(is_absent));
        assert!(!broken.iter().any(is_absent));
    }

    /// Each backend whose feature is off must say so, whether asked for by name or probed.
    #[test]
    fn backends_not_compiled_in_say_so() {
        for kind in BackendKind::ALL {
            let status = backends().into_iter().find(|s| s.kind == kind);
            let Some(status) = status else {
                panic!("backends() omits {kind}")
            };
            assert_eq!(status.compiled, compiled(kind));
            if !compiled(kind) {
                let err = Runtime::open(BackendChoice::Only(kind))
                    .unwrap_err()
                    .to_string();
                assert!(
                    err.contains("not compiled in") && err.contains(kind.name()),
                    "{err}"
                );
                assert!(
                    status
                        .reason()
                        .is_some_and(|r| r.contains("not compiled in"))
                );
            }
        }
    }

    #[cfg(feature = "sim")]
    #[test]
    fn the_simulator_always_opens() {
        let runtime = Runtime::open(BackendChoice::Only(BackendKind::Sim)).unwrap();
        assert_eq!(runtime.kind(), BackendKind::Sim);
        assert!(runtime.device_count() >= 1);
    }

    #[cfg(not(any(feature = "cuda", feature = "roc", feature = "sim")))]
    #[test]
    fn auto_with_no_backend_compiled_in_explains_each() {
        let err = Runtime::open(BackendChoice::Auto).unwrap_err().to_string();
        for kind in BackendKind::ALL {
            assert!(err.contains(&format!("{kind}:")), "{err}");
        }
    }

    #[test]
    fn parses_backend_names() {
        assert_eq!(
            "auto".parse::<BackendChoice>().unwrap(),
            BackendChoice::Auto
        );
        assert_eq!(
            "SIM".parse::<BackendChoice>().unwrap(),
            BackendChoice::Only(BackendKind::Sim)
        );
        assert_eq!(
            "cuda".parse::<BackendChoice>().unwrap(),
            BackendChoice::Only(BackendKind::Cuda)
        );
        let err = "vulkan".parse::<BackendChoice>().unwrap_err().to_string();
        assert!(
            err.contains("vulkan")
                && err.contains("GPU_MEM_BACKEND")
                && err.contains("auto, cuda, roc"),
            "{err}"
        );
    }
}
