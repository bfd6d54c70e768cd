//! The conformance suite's harness: which backends to test, and the cases.
//!
//! Every case is a function of a fresh [`Runtime`]'s first device. The suite runs each case on
//! every backend that is available here (or only on `GPU_MEM_BACKEND` when that is set);
//! a backend that is not available has its cases reported as ignored, with the reason printed.

pub mod cases;

use gpu_mem::{BackendChoice, BackendKind, Runtime};

fn runtime_open_kind(kind: BackendKind) -> gpu_mem::Result<Runtime> {
    Runtime::open_kind(kind)
}

/// A conformance case.
#[derive(Debug)]
pub struct Case {
    /// Name (module path style).
    pub name: &'static str,
    /// The check; `Err` carries the failure message.
    pub run: fn(&Runtime) -> Result<(), String>,
    /// Why the case cannot run on some backends or tools, if it cannot.
    pub requires: Requires,
}

/// What a case needs beyond the memory API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requires {
    /// Nothing: runs everywhere.
    Nothing,
    /// Kernel launches of portable-source kernels, which every backend runs; not under Miri,
    /// which cannot run the simulator's fibers or compiled kernels.
    Kernels,
    /// Closure kernels (which only the simulator runs), the simulator's diagnostics, or its
    /// settings.
    Simulator,
    /// Cooperative launches (`this_grid().sync()`), which CUDA and the simulator make.
    CooperativeLaunch,
    /// Shifts by the width or more answered as NVIDIA GPUs answer them (and the simulator);
    /// AMD GPUs take the count modulo the width.
    ClampedShifts,
    /// Collectives (`gpu_mem::collective`): NCCL on CUDA, the simulator's model of it; not on
    /// ROC, whose backend has no RCCL path (its streams are HSA queues, not HIP streams).
    Collectives,
    /// Collectives, checking the simulator's diagnostics (mismatched calls, a missing rank),
    /// which NCCL leaves undefined or hanging.
    SimulatedCollectives,
}

impl Requires {
    /// Why a case with this requirement is skipped on `kind` (`None`: it runs).
    pub fn skip_reason(self, kind: BackendKind) -> Option<&'static str> {
        match self {
            Requires::Nothing => None,
            Requires::Kernels
            | Requires::Simulator
            | Requires::CooperativeLaunch
            | Requires::ClampedShifts
                if cfg!(miri) =>
            {
                Some(
                    "these kernels do not run under Miri (the simulator runs their threads on fibers; only async closure kernels run there)",
                )
            }
            Requires::Simulator if kind != BackendKind::Sim => {
                Some("simulator-only case (closure kernels or the simulator's diagnostics)")
            }
            Requires::CooperativeLaunch if kind == BackendKind::Roc => {
                Some("the ROC backend makes no cooperative launches")
            }
            Requires::Collectives | Requires::SimulatedCollectives if cfg!(miri) => Some(
                "collective cases wait on each other's ranks (threads and timeouts); Miri covers the stream bookkeeping they share with copies",
            ),
            Requires::Collectives | Requires::SimulatedCollectives if kind == BackendKind::Roc => {
                Some(
                    "the ROC backend has no RCCL path yet (its streams are HSA queues, which RCCL cannot take)",
                )
            }
            Requires::SimulatedCollectives if kind != BackendKind::Sim => Some(
                "simulator-only collective diagnostics (NCCL leaves mismatched calls undefined or hanging)",
            ),
            Requires::ClampedShifts if kind == BackendKind::Roc => Some(
                "AMD GPUs take a shift count modulo the width, where NVIDIA's (and the simulator) clamp it",
            ),
            _ => None,
        }
    }
}

/// The backends this run covers, each with the runtime or the reason it is unavailable.
pub fn backends_under_test() -> Vec<(BackendKind, Result<(), String>)> {
    let chosen = match BackendChoice::from_env() {
        Ok(BackendChoice::Only(kind)) => vec![kind],
        Ok(BackendChoice::Auto) => BackendKind::ALL.to_vec(),
        Err(error) => {
            eprintln!("conformance: {error}");
            BackendKind::ALL.to_vec()
        }
    };
    chosen
        .into_iter()
        .map(|kind| {
            (
                kind,
                runtime_open_kind(kind).map(drop).map_err(|e| e.to_string()),
            )
        })
        .collect()
}

/// Why the collective cases cannot run on `kind` although the backend is available (its
/// engine does not load: NCCL missing or too old), found once per run; `None` when they can.
pub fn collectives_unavailable(kind: BackendKind) -> Option<&'static str> {
    let reason = match runtime_open_kind(kind).and_then(|rt| rt.device(0)) {
        Ok(device) => match gpu_mem::collective::engine(&device) {
            Ok(_) => return None,
            Err(error) => format!("no collectives engine: {error}"),
        },
        Err(error) => format!("no device to ask for a collectives engine: {error}"),
    };
    // One string per backend and run, for the harness's table of skip reasons.
    Some(Box::leak(reason.into_boxed_str()))
}

/// Opens a fresh runtime of `kind` for one case.
pub fn fresh_runtime(kind: BackendKind) -> Result<Runtime, String> {
    runtime_open_kind(kind).map_err(|e| e.to_string())
}

/// `Err(message)` unless `condition`.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!("{} ({}:{})", format!($($msg)+), file!(), line!()));
        }
    };
}

/// Converts any error into the case's failure message.
pub fn fail<E: std::fmt::Display>(context: &str) -> impl Fn(E) -> String + '_ {
    move |e| format!("{context}: {e}")
}
