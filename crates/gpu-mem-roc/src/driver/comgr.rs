//! The code object manager (`libamd_comgr`) hiprtc compiles through, for its list of ISAs.
//!
//! # Contract
//!
//! * [`Comgr::load`] opens `GPU_MEM_COMGR_LIBRARY` when set, else the first of [`CANDIDATES`]
//!   (inside a process that already loaded HIP this is the copy hiprtc uses).
//! * [`Comgr::isa_names`] lists the ISAs this comgr can compile for. hiprtc 5.2.3 (comgr 2.4)
//!   aborts the whole process (`free()` of an invalid pointer in
//!   `amd_comgr_destroy_action_info`) when asked for an ISA comgr does not know, such as
//!   gfx1100, so the compiler checks this list first.

use super::loader::{Opened, open_first};
use gpu_mem_core::{BackendKind, Error, Result};
use gpu_mem_hip_sys::comgr as sys;
use std::ffi::{CStr, c_char};

/// Logical library name used in errors.
pub const LIBRARY: &str = "libamd_comgr";
/// Environment variable naming the exact file to load instead of the candidates.
pub const ENV_OVERRIDE: &str = "GPU_MEM_COMGR_LIBRARY";
/// Sonames tried in order (ROCm 5 and 6 ship `.so.2`, ROCm 7 `.so.3`).
pub const CANDIDATES: &[&str] = &["libamd_comgr.so.3", "libamd_comgr.so.2", "libamd_comgr.so"];

macro_rules! comgr_table {
    ($($name:ident: $ty:path,)*) => {
        gpu_mem_loader::symbol_table! {
            /// Every comgr function of the generated declarations, resolved or not.
            pub struct ComgrFunctions { $($name: Option<$ty> = [stringify!($name)],)* }
        }
    };
}
gpu_mem_hip_sys::gpu_mem_comgr_sys_functions!(comgr_table);

/// The loaded code object manager.
pub struct Comgr {
    functions: ComgrFunctions,
    path: String,
    // Opened once per process and never unloaded, so the pointers in `functions` stay valid.
    _library: &'static libloading::Library,
}

impl std::fmt::Debug for Comgr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comgr")
            .field("path", &self.path)
            .field("functions", &self.functions)
            .finish()
    }
}

impl Comgr {
    /// Opens the library and resolves its functions.
    pub fn load() -> Result<Comgr> {
        // The copy a loaded hiprtc uses, when there is one: the ISAs it lists are then the ones
        // hiprtc can compile for.
        let candidates = gpu_mem_loader::loaded_first(CANDIDATES);
        let Opened { library, path } = open_first(LIBRARY, ENV_OVERRIDE, &candidates, |lib| {
            // SAFETY: only checks the symbol's presence; the pointer is not called.
            match unsafe { lib.get::<sys::PFN_amd_comgr_get_isa_count>("amd_comgr_get_isa_count") }
            {
                Ok(_) => Ok(()),
                Err(e) => Err(format!("not a code object manager ({e})")),
            }
        })?;
        // SAFETY: the library is comgr (it exports amd_comgr_get_isa_count); the declarations
        // come from its 5.2.3 header and these four functions kept their signatures since 2.0.
        let functions = unsafe { ComgrFunctions::resolve(library) };
        Ok(Comgr {
            functions,
            path,
            _library: library,
        })
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

    fn get<T: Copy>(&self, f: Option<T>, symbol: &'static str) -> Result<T> {
        f.ok_or_else(|| Error::MissingSymbol {
            library: LIBRARY,
            path: self.path.clone(),
            symbol,
            feature: "listing the ISAs hiprtc supports",
        })
    }

    fn check(&self, call: &'static str, status: sys::amd_comgr_status_t) -> Result<()> {
        if status == sys::AMD_COMGR_STATUS_SUCCESS {
            return Ok(());
        }
        let description = self
            .status_string(status)
            .unwrap_or_else(|| format!("comgr status {status}"));
        Err(Error::Native {
            backend: BackendKind::Roc,
            call,
            code: i64::from(status),
            code_name: description.clone(),
            description,
        })
    }

    /// `amd_comgr_status_string`, when exported and the status is known.
    fn status_string(&self, status: sys::amd_comgr_status_t) -> Option<String> {
        let f = self.functions.amd_comgr_status_string?;
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: `text` is a valid out-pointer; comgr stores a pointer to a static string.
        let rc = unsafe { f(status, &mut text) };
        if rc != sys::AMD_COMGR_STATUS_SUCCESS || text.is_null() {
            return None;
        }
        // SAFETY: non-null, NUL-terminated, static.
        Some(
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned(),
        )
    }

    /// `amd_comgr_get_version`: `(major, minor)`.
    pub fn version(&self) -> Result<(usize, usize)> {
        let f = self.get(
            self.functions.amd_comgr_get_version,
            "amd_comgr_get_version",
        )?;
        let (mut major, mut minor) = (0usize, 0usize);
        // SAFETY: both out-pointers are valid.
        unsafe { f(&mut major, &mut minor) };
        Ok((major, minor))
    }

    /// `amd_comgr_get_isa_count` + `amd_comgr_get_isa_name`: full ISA names such as
    /// `amdgcn-amd-amdhsa--gfx90a`.
    pub fn isa_names(&self) -> Result<Vec<String>> {
        let count_fn = self.get(
            self.functions.amd_comgr_get_isa_count,
            "amd_comgr_get_isa_count",
        )?;
        let name_fn = self.get(
            self.functions.amd_comgr_get_isa_name,
            "amd_comgr_get_isa_name",
        )?;
        let mut count = 0usize;
        // SAFETY: valid out-pointer.
        self.check("amd_comgr_get_isa_count", unsafe { count_fn(&mut count) })?;
        let mut names = Vec::with_capacity(count);
        for index in 0..count {
            let mut name: *const c_char = std::ptr::null();
            // SAFETY: `index` < count; `name` is a valid out-pointer.
            self.check("amd_comgr_get_isa_name", unsafe {
                name_fn(index, &mut name)
            })?;
            if !name.is_null() {
                // SAFETY: comgr returns a static NUL-terminated string.
                names.push(
                    unsafe { CStr::from_ptr(name) }
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
        Ok(names)
    }
}
