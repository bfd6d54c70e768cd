//! The loaded HSA runtime (`libhsa-runtime64.so.1`, ROCr).
//!
//! # Contract
//!
//! * [`Hsa::load`] opens the library (the `GPU_MEM_HSA_LIBRARY` path when set, else
//!   `libhsa-runtime64.so.1`) and resolves every generated declaration into an optional pointer.
//!   A missing library is [`Error::LibraryLoad`] naming what was tried; it never panics.
//! * One thin method per native call (in `agents`, `memory`, `signals`, `queues`,
//!   `code_objects`, `profiling`): it checks the symbol is present ([`Error::MissingSymbol`]
//!   otherwise), calls it, and turns a non-success `hsa_status_t` into [`Error::Native`] carrying
//!   the status name and `hsa_status_string`'s text (which works even when `hsa_init` failed).
//! * Methods are `unsafe` exactly where the native call has preconditions the types cannot carry
//!   (raw pointers, handles that must be live); their `# Safety` sections say which.
//! * Nothing here calls `hsa_init` implicitly; the backend does, once.

mod agents;
mod code_objects;
mod memory;
mod profiling;
mod queues;
mod signals;
mod status;

pub use agents::PoolInfo;
pub use queues::{AmdEvent, GPU_MEMORY_FAULT_EVENT, GpuMemoryFaultInfo, SystemEventCallback};
pub use status::status_name;

use super::loader::{Opened, open_first};
use gpu_mem_core::{BackendKind, Error, Result};
use gpu_mem_hsa_sys as sys;
use std::sync::{Arc, OnceLock};

/// Logical library name used in errors.
pub const LIBRARY: &str = "libhsa-runtime64";
/// Environment variable naming the exact file to load instead of the default soname.
pub const ENV_OVERRIDE: &str = "GPU_MEM_HSA_LIBRARY";
/// Sonames tried when the override is not set. Only the versioned name: the unversioned
/// `libhsa-runtime64.so` ships in the -dev package alone.
pub const CANDIDATES: &[&str] = &["libhsa-runtime64.so.1"];

macro_rules! hsa_table {
    ($($name:ident: $ty:path,)*) => {
        gpu_mem_loader::symbol_table! {
            /// Every HSA function of the generated declarations, resolved or not.
            pub struct HsaFunctions { $($name: Option<$ty> = [stringify!($name)],)* }
        }
    };
}
sys::gpu_mem_hsa_sys_functions!(hsa_table);

/// The HSA runtime library with its resolved functions.
pub struct Hsa {
    functions: HsaFunctions,
    path: String,
    // Opened once per process and never unloaded, so the pointers in `functions` stay valid.
    library: &'static libloading::Library,
}

impl std::fmt::Debug for Hsa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hsa")
            .field("path", &self.path)
            .field("functions", &self.functions)
            .finish()
    }
}

static SHARED: OnceLock<Arc<Hsa>> = OnceLock::new();

impl Hsa {
    /// Opens the library and resolves its functions (a fresh handle each call).
    pub fn load() -> Result<Hsa> {
        Hsa::open(ENV_OVERRIDE, CANDIDATES)
    }

    /// Opens exactly `path` (no environment override), e.g. a stand-in runtime in tests.
    pub fn load_from(path: &str) -> Result<Hsa> {
        Hsa::open("", &[path])
    }

    fn open(env_override: &'static str, candidates: &[&str]) -> Result<Hsa> {
        let Opened { library, path } = open_first(LIBRARY, env_override, candidates, |lib| {
            // SAFETY: only checks the symbol's presence; the pointer is not called.
            match unsafe { lib.get::<sys::PFN_hsa_init>("hsa_init") } {
                Ok(_) => Ok(()),
                Err(e) => Err(format!("not an HSA runtime (no hsa_init: {e})")),
            }
        })?;
        // SAFETY: the library is an HSA runtime (it exports hsa_init); the generated
        // declarations are those of its ROCm 5.2.3 headers, and later versions keep them
        // ABI-compatible (HSA only adds functions and enum values).
        let functions = unsafe { HsaFunctions::resolve(library) };
        let missing: Vec<&str> = functions
            .presence()
            .into_iter()
            .filter(|(_, _, resolved)| !resolved)
            .map(|(name, _, _)| name)
            .collect();
        if !missing.is_empty() {
            tracing::warn!(path = %path, ?missing, "HSA runtime lacks some functions");
        }
        Ok(Hsa {
            functions,
            path,
            library,
        })
    }

    /// The process-wide instance the backend uses, loaded on first success and never unloaded
    /// (unloading ROCr while its threads run, or after `hsa_init`, is not safe).
    pub fn shared() -> Result<Arc<Hsa>> {
        if let Some(hsa) = SHARED.get() {
            return Ok(Arc::clone(hsa));
        }
        let loaded = Arc::new(Hsa::load()?);
        Ok(Arc::clone(SHARED.get_or_init(|| loaded)))
    }

    /// The candidate the library was opened by (soname or override path).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Every function of the table with whether this library exports it.
    pub fn symbols(&self) -> Vec<(&'static str, bool)> {
        self.functions
            .presence()
            .into_iter()
            .map(|(name, _, resolved)| (name, resolved))
            .collect()
    }

    /// The function pointer, or [`Error::MissingSymbol`] naming what needs it.
    fn get<T: Copy>(&self, f: Option<T>, symbol: &'static str, feature: &'static str) -> Result<T> {
        f.ok_or_else(|| Error::MissingSymbol {
            library: LIBRARY,
            path: self.path.clone(),
            symbol,
            feature,
        })
    }

    /// `Ok` for `HSA_STATUS_SUCCESS` (and `HSA_STATUS_INFO_BREAK`, a successful early stop of
    /// an iteration), else [`Error::Native`] with the runtime's own description.
    fn check(&self, call: &'static str, status: sys::hsa_status_t) -> Result<()> {
        if status == sys::HSA_STATUS_SUCCESS || status == sys::HSA_STATUS_INFO_BREAK {
            return Ok(());
        }
        Err(self.native_error(call, status))
    }

    /// Builds the [`Error::Native`] for `status` returned by `call`.
    pub fn native_error(&self, call: &'static str, status: sys::hsa_status_t) -> Error {
        let code_name = status_name(status)
            .map(str::to_string)
            .unwrap_or_else(|| format!("HSA status {status:#x}"));
        let description = match self.status_string(status) {
            // ROCr's text starts with the status name ("HSA_STATUS_ERROR_...: The runtime ..."):
            // drop it, the error message already shows the name.
            Some(text) => text
                .strip_prefix(&code_name)
                .map(|rest| rest.trim_start_matches(':').trim_start().to_string())
                .unwrap_or(text),
            None => "no description (hsa_status_string did not recognise the code)".to_string(),
        };
        Error::Native {
            backend: BackendKind::Roc,
            call,
            code: i64::from(status),
            code_name,
            description,
        }
    }
}
