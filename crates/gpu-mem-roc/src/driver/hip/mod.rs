//! The loaded HIP library (`libamdhip64`), used for hiprtc and a few interop calls.
//!
//! # Contract
//!
//! * [`Hip::load`] opens the `GPU_MEM_HIPRTC_LIBRARY` path when set, else the first of
//!   [`CANDIDATES`] that exports `hiprtcCompileProgram` (ROCm 5 keeps hiprtc inside
//!   `libamdhip64.so.5`; ROCm 6 and 7 moved it to `libhiprtc.so.6` / `.so.7`, tried last), and resolves every
//!   generated declaration into an optional pointer. Missing library: [`Error::LibraryLoad`]
//!   with every candidate tried; missing symbol at call time: [`Error::MissingSymbol`].
//! * One thin method per native call (in `rtc` and `runtime`): `hiprtcResult` and `hipError_t`
//!   failures become [`Error::Native`] with the code's name from the library
//!   (`hiprtcGetErrorString`, `hipGetErrorName`) and its description.
//! * Nothing here initialises HIP; hiprtc needs no GPU.

mod rtc;
mod runtime;

use super::loader::{Opened, open_first};
use gpu_mem_core::{BackendKind, Error, Result};
use gpu_mem_hip_sys as sys;
use std::ffi::{CStr, c_char};
use std::sync::{Arc, OnceLock};

/// Logical library name used in errors.
pub const LIBRARY: &str = "libamdhip64 (hiprtc)";
/// Environment variable naming the exact file to load instead of the candidates.
pub const ENV_OVERRIDE: &str = "GPU_MEM_HIPRTC_LIBRARY";
/// Tried in order when the override is not set. The unversioned name only exists where the -dev
/// package is installed.
pub const CANDIDATES: &[&str] = &[
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
    "libhiprtc.so.7",
    "libhiprtc.so.6",
    "libhiprtc.so",
];

macro_rules! hip_table {
    ($($name:ident: $ty:path,)*) => {
        gpu_mem_loader::symbol_table! {
            /// Every HIP / hiprtc function of the generated declarations, resolved or not.
            pub struct HipFunctions { $($name: Option<$ty> = [stringify!($name)],)* }
        }
    };
}
sys::gpu_mem_hip_sys_functions!(hip_table);

/// The HIP library with its resolved functions.
pub struct Hip {
    functions: HipFunctions,
    path: String,
    // Opened once per process and never unloaded, so the pointers in `functions` stay valid.
    _library: &'static libloading::Library,
}

impl std::fmt::Debug for Hip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hip")
            .field("path", &self.path)
            .field("functions", &self.functions)
            .finish()
    }
}

impl Hip {
    /// Opens the library and resolves its functions (a fresh handle; prefer [`Hip::shared`]).
    pub fn load() -> Result<Hip> {
        let Opened { library, path } = open_first(LIBRARY, ENV_OVERRIDE, CANDIDATES, |lib| {
            // SAFETY: only checks the symbol's presence; the pointer is not called.
            match unsafe { lib.get::<sys::PFN_hiprtcCompileProgram>("hiprtcCompileProgram") } {
                Ok(_) => Ok(()),
                Err(e) => Err(format!("no hiprtc in it ({e})")),
            }
        })?;
        // SAFETY: the library exports hiprtc; the generated declarations are those of its
        // ROCm 5.2.3 headers, whose signatures later versions keep.
        let functions = unsafe { HipFunctions::resolve(library) };
        Ok(Hip {
            functions,
            path,
            _library: library,
        })
    }

    /// The process-wide instance, loaded on first success and never unloaded: unloading
    /// libamdhip64 (and the comgr/LLVM it pulls in) and loading it again in one process aborts
    /// with "LLVM ERROR: inconsistency in registered CommandLine options".
    pub fn shared() -> Result<Arc<Hip>> {
        static SHARED: OnceLock<Arc<Hip>> = OnceLock::new();
        if let Some(hip) = SHARED.get() {
            return Ok(Arc::clone(hip));
        }
        let loaded = Arc::new(Hip::load()?);
        Ok(Arc::clone(SHARED.get_or_init(|| loaded)))
    }

    /// The candidate the library was opened by.
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

    fn get<T: Copy>(&self, f: Option<T>, symbol: &'static str, feature: &'static str) -> Result<T> {
        f.ok_or_else(|| Error::MissingSymbol {
            library: LIBRARY,
            path: self.path.clone(),
            symbol,
            feature,
        })
    }

    /// `Ok` for `HIPRTC_SUCCESS`, else [`Error::Native`]; `detail`, when given, replaces the
    /// generic description (the compile log, typically).
    fn check_rtc(
        &self,
        call: &'static str,
        result: sys::hiprtcResult,
        detail: Option<String>,
    ) -> Result<()> {
        if result == sys::HIPRTC_SUCCESS {
            return Ok(());
        }
        let code_name = self.rtc_error_string(result);
        Err(Error::Native {
            backend: BackendKind::Roc,
            call,
            code: i64::from(result),
            description: detail.unwrap_or_else(|| code_name.clone()),
            code_name,
        })
    }

    /// `Ok` for `hipSuccess`, else [`Error::Native`] with `hipGetErrorName` /
    /// `hipGetErrorString` (in HIP 5.2 the latter is often just the name again).
    fn check_hip(&self, call: &'static str, error: sys::hipError_t) -> Result<()> {
        if error == sys::hipSuccess {
            return Ok(());
        }
        let code_name = self
            .error_name(error)
            .unwrap_or_else(|| format!("hipError {error}"));
        let description = self
            .error_string(error)
            .unwrap_or_else(|| code_name.clone());
        Err(Error::Native {
            backend: BackendKind::Roc,
            call,
            code: i64::from(error),
            code_name,
            description,
        })
    }
}

/// Copies a C string owned by the library (static storage) into a `String`.
///
/// # Safety
/// `text` is null or points to a NUL-terminated string that stays valid during the call.
unsafe fn c_text(text: *const c_char) -> Option<String> {
    if text.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated (caller).
    Some(
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned(),
    )
}
