//! RCCL (feature `nccl`): `librccl.so.1` found and opened at run time with the loader the
//! HSA runtime and HIP use, its calls resolved from the table NCCL's are
//! (`gpu-mem-nccl-sys`: RCCL's `rccl.h` declares the same calls and types).
//!
//! # Contract
//!
//! * [`Rccl::load`] tries `GPU_MEM_RCCL_LIBRARY` when set, else `librccl.so.1`,
//!   `/opt/rocm/lib/librccl.so.1` and `librccl.so`; a missing library is
//!   [`Error::LibraryLoad`] naming every path tried, a library without a call gpu-mem needs or
//!   older than RCCL's NCCL 2.7 API is the same error saying why. Never a panic.
//! * **Not wired to the backend yet**: [`RocBackend`](crate::RocBackend) hands out no
//!   collectives. Its streams are chains of HSA signals on AQL queues, and RCCL enqueues on a
//!   `hipStream_t`; joining the two (a HIP stream per gpu-mem stream, ordered with it through
//!   signals both sides wait on) is the missing piece. `gpu_mem::collective` on ROC therefore
//!   reports [`Error::NotSupportedByBackend`].

use gpu_mem_core::{Error, Result};
use gpu_mem_loader::{Library, LibrarySpec, accept_any};
use gpu_mem_nccl_sys::decode_version;
use std::ffi::c_int;
use std::path::Path;

/// How RCCL is found.
pub const RCCL_LIBRARY: LibrarySpec = LibrarySpec {
    library: "RCCL",
    override_var: "GPU_MEM_RCCL_LIBRARY",
    candidates: &["librccl.so.1", "/opt/rocm/lib/librccl.so.1", "librccl.so"],
};

/// The oldest API gpu-mem uses, as an `NCCL_VERSION_CODE` (RCCL reports NCCL's version): 2.7,
/// the first with `ncclSend` / `ncclRecv`.
pub const MIN_RCCL_API: (u32, u32, u32) = (2, 7, 0);

macro_rules! rccl_table {
    ($( $field:ident : $pfn:ty = [$($name:literal),+], $since:literal; )*) => {
        gpu_mem_loader::symbol_table! {
            /// Resolved RCCL function pointers (`None` = not exported by the loaded library).
            pub struct Symbols {
                $( $field: $pfn = [$($name),+], )*
            }
        }
    };
}

gpu_mem_nccl_sys::nccl_symbols!(rccl_table);

/// One loaded RCCL library.
pub struct Rccl {
    symbols: Symbols,
    version: (u32, u32, u32),
    /// Opened once per process and never unloaded, so the pointers above stay valid.
    library: &'static Library,
}

impl std::fmt::Debug for Rccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rccl")
            .field("path", &self.library.path())
            .field("version", &self.version)
            .field("symbols", &self.symbols)
            .finish()
    }
}

impl Rccl {
    /// Loads RCCL (`GPU_MEM_RCCL_LIBRARY` or the usual places) and checks it is usable.
    pub fn load() -> Result<Rccl> {
        Self::from_library(gpu_mem_loader::open(&RCCL_LIBRARY, &accept_any)?)
    }

    /// Loads RCCL from exactly `path`.
    pub fn load_from(path: &Path) -> Result<Rccl> {
        Self::from_library(gpu_mem_loader::open_path(&RCCL_LIBRARY, path, &accept_any)?)
    }

    fn from_library(library: &'static Library) -> Result<Rccl> {
        // SAFETY: the table's pointer types are generated from nccl.h, whose declarations
        // rccl.h repeats for exactly these exported names; the library is never unloaded.
        let symbols = unsafe { Symbols::resolve(library.raw()) };
        let refuse = |reason: String| Error::LibraryLoad {
            library: RCCL_LIBRARY.library,
            tried: vec![library.path().to_string()],
            reason,
            present: true,
        };
        let missing: Vec<&str> = symbols
            .presence()
            .into_iter()
            .filter(|(field, _, resolved)| {
                !resolved && !matches!(*field, "ncclGetLastError" | "ncclCommGetAsyncError")
            })
            .map(|(_, name, _)| name)
            .collect();
        if !missing.is_empty() {
            return Err(refuse(format!("it does not export {}", missing.join(", "))));
        }
        let Some(get_version) = symbols.ncclGetVersion else {
            return Err(refuse("it does not export ncclGetVersion".into()));
        };
        let mut code: c_int = 0;
        // SAFETY: ncclGetVersion writes one int through the pointer, a live local.
        let status = unsafe { get_version(&mut code) };
        if status.0 != 0 {
            return Err(refuse(format!("ncclGetVersion failed with {}", status.0)));
        }
        let version = decode_version(code);
        if version < MIN_RCCL_API {
            let (a, b, c) = version;
            return Err(refuse(format!(
                "its NCCL API {a}.{b}.{c} is too old: gpu-mem needs 2.7.0 or later"
            )));
        }
        Ok(Rccl {
            symbols,
            version,
            library,
        })
    }

    /// The path or soname RCCL was loaded from.
    pub fn path(&self) -> &str {
        self.library.path()
    }

    /// `(major, minor, patch)` of the NCCL API the library implements.
    pub fn version(&self) -> (u32, u32, u32) {
        self.version
    }

    /// `(field, exported name, resolved)` for every call of the table.
    pub fn presence(&self) -> Vec<(&'static str, &'static str, bool)> {
        self.symbols.presence()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_rccl_is_a_load_error_naming_the_path() {
        let missing = Path::new("/nonexistent/gpu-mem-test/librccl.so.1");
        match Rccl::load_from(missing) {
            Err(Error::LibraryLoad { library, tried, .. }) => {
                assert_eq!(library, "RCCL");
                assert!(
                    tried.iter().any(|t| t.contains("/nonexistent/")),
                    "{tried:?}"
                );
            }
            other => panic!("expected a load error, got {other:?}"),
        }
    }

    #[test]
    fn a_library_without_the_calls_is_refused() {
        match Rccl::load_from(Path::new("libc.so.6")) {
            Err(Error::LibraryLoad {
                reason, present, ..
            }) => {
                assert!(present && reason.contains("ncclAllReduce"), "{reason}");
            }
            other => panic!("expected libc to be refused, got {other:?}"),
        }
    }

    #[test]
    fn version_codes_decode() {
        assert_eq!(decode_version(2708), (2, 7, 8));
        assert_eq!(decode_version(22203), (2, 22, 3));
    }
}
