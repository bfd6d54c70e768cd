//! [`Nvrtc`]: the loaded NVRTC library and one thin function per NVRTC call.

use crate::driver::library::{self, LibrarySpec, LoadedLibrary};
use crate::driver::symbols::nvrtc::Symbols;
use gpu_mem_core::{BackendKind, Error, Result};
use gpu_mem_cuda_sys::nvrtc::{nvrtcProgram, nvrtcResult};
use std::ffi::{CStr, CString, c_char, c_int};
use std::path::Path;

/// How NVRTC is found: `GPU_MEM_NVRTC_LIBRARY`, else the sonames of NVRTC 13, 12 and 11.2+.
pub const NVRTC_LIBRARY: LibrarySpec = LibrarySpec {
    library: "NVRTC",
    override_var: "GPU_MEM_NVRTC_LIBRARY",
    candidates: &[
        "libnvrtc.so.13",
        "libnvrtc.so.12",
        "libnvrtc.so.11.2",
        "libnvrtc.so",
    ],
};

/// Whether a driver of `driver_version` (`cuDriverGetVersion`, e.g. 12080) loads what an NVRTC of
/// `nvrtc` (major, minor) emits: a driver runs the code of its own major release and older.
pub fn driver_runs_code_of(driver_version: i32, nvrtc: (i32, i32)) -> bool {
    nvrtc.0 <= driver_version / 1000
}

/// One loaded NVRTC library.
pub struct Nvrtc {
    symbols: Symbols,
    /// Opened once per process and never unloaded, so the pointers above stay valid.
    library: &'static LoadedLibrary,
}

impl std::fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvrtc")
            .field("path", &self.library.path())
            .field("symbols", &self.symbols)
            .finish()
    }
}

macro_rules! get {
    ($self:ident . $field:ident, $feature:literal) => {
        match $self.symbols.$field {
            Some(f) => f,
            None => {
                return Err(Error::MissingSymbol {
                    library: $self.library.name(),
                    path: $self.library.path().to_string(),
                    symbol: stringify!($field),
                    feature: $feature,
                })
            }
        }
    };
}

impl Nvrtc {
    /// Loads NVRTC (`GPU_MEM_NVRTC_LIBRARY` or the usual sonames).
    pub fn load() -> Result<Nvrtc> {
        Ok(Self::from_library(library::open(&NVRTC_LIBRARY)?))
    }

    /// Loads the NVRTC to compile for a driver of `driver_version` (`cuDriverGetVersion`, e.g.
    /// 12080): `GPU_MEM_NVRTC_LIBRARY` when set; otherwise the newest NVRTC found whose major
    /// release the driver supports (code from a newer NVRTC does not load on it), or the newest
    /// found when none is that old (compiling then reports why, naming both versions).
    pub fn load_for_driver(driver_version: i32) -> Result<Nvrtc> {
        let forced = std::env::var_os(NVRTC_LIBRARY.override_var)
            .is_some_and(|path| !path.to_string_lossy().trim().is_empty());
        if forced {
            return Self::load();
        }
        // Newest first, each opened only when the ones before it do not fit: the first that
        // does is taken; the first that opened is the answer when none does.
        let mut newest = None;
        for candidate in NVRTC_LIBRARY.candidates {
            let Ok(library) = gpu_mem_loader::open_among(
                NVRTC_LIBRARY.library,
                "",
                &[candidate],
                &library::accept_any,
            ) else {
                continue;
            };
            let nvrtc = Self::from_library(library);
            let Ok(version) = nvrtc.version() else {
                continue;
            };
            if driver_runs_code_of(driver_version, version) {
                return Ok(nvrtc);
            }
            newest.get_or_insert(nvrtc);
        }
        match newest {
            Some(nvrtc) => Ok(nvrtc),
            // None opened (or none answers its version): the usual search, for its error.
            None => Self::load(),
        }
    }

    /// Loads NVRTC from exactly `path`.
    pub fn load_from(path: &Path) -> Result<Nvrtc> {
        Ok(Self::from_library(library::open_path(
            &NVRTC_LIBRARY,
            path,
        )?))
    }

    fn from_library(library: &'static LoadedLibrary) -> Nvrtc {
        // SAFETY: the table's pointer types are generated from the NVRTC headers for exactly the
        // exported names they are looked up by, and the library is never unloaded.
        let symbols = unsafe { Symbols::resolve(library.raw()) };
        Nvrtc { symbols, library }
    }

    /// The path or soname NVRTC was loaded from.
    pub fn path(&self) -> &str {
        self.library.path()
    }

    /// `nvrtcGetErrorString`: the result code's name (`NVRTC_ERROR_COMPILATION`, ...).
    pub fn error_name(&self, code: nvrtcResult) -> String {
        let Some(f) = self.symbols.nvrtcGetErrorString else {
            return format!("nvrtcResult {}", code.0);
        };
        // SAFETY: nvrtcGetErrorString takes a plain code and returns a static string or null.
        let text = unsafe { f(code) };
        if text.is_null() {
            return format!("nvrtcResult {}", code.0);
        }
        // SAFETY: a non-null result is a static NUL-terminated string.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }

    /// The [`Error::Native`] for a failed NVRTC `call`, with `detail` as the description.
    pub fn error(&self, call: &'static str, code: nvrtcResult, detail: String) -> Error {
        Error::Native {
            backend: BackendKind::Cuda,
            call,
            code: i64::from(code.0),
            code_name: self.error_name(code),
            description: detail,
        }
    }

    fn check(&self, call: &'static str, code: nvrtcResult) -> Result<()> {
        if code == nvrtcResult::NVRTC_SUCCESS {
            Ok(())
        } else {
            Err(self.error(call, code, format!("{call} failed")))
        }
    }

    /// `nvrtcVersion`: `(major, minor)`.
    pub fn version(&self) -> Result<(i32, i32)> {
        let f = get!(self.nvrtcVersion, "NVRTC version query");
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: both out-pointers are live locals.
        self.check("nvrtcVersion", unsafe { f(&mut major, &mut minor) })?;
        Ok((major, minor))
    }

    /// `nvrtcGetNumSupportedArchs` + `nvrtcGetSupportedArchs`: e.g. `[75, 80, 86, 90, ...]`.
    pub fn supported_archs(&self) -> Result<Vec<i32>> {
        let count_fn = get!(
            self.nvrtcGetNumSupportedArchs,
            "supported architecture query"
        );
        let list_fn = get!(self.nvrtcGetSupportedArchs, "supported architecture query");
        let mut count: c_int = 0;
        // SAFETY: the out-pointer is a live local.
        self.check("nvrtcGetNumSupportedArchs", unsafe { count_fn(&mut count) })?;
        let mut archs = vec![0 as c_int; usize::try_from(count).unwrap_or(0)];
        if archs.is_empty() {
            return Ok(archs);
        }
        // SAFETY: the buffer has room for the `count` entries NVRTC reported.
        self.check("nvrtcGetSupportedArchs", unsafe {
            list_fn(archs.as_mut_ptr())
        })?;
        Ok(archs)
    }

    /// `nvrtcCreateProgram` with `headers` offered as `(include name, contents)`.
    pub fn create_program(
        &self,
        source: &CStr,
        name: &CStr,
        headers: &[(&CStr, &CStr)],
    ) -> Result<Program<'_>> {
        let f = get!(self.nvrtcCreateProgram, "kernel compilation");
        let contents: Vec<*const c_char> = headers.iter().map(|(_, c)| c.as_ptr()).collect();
        let names: Vec<*const c_char> = headers.iter().map(|(n, _)| n.as_ptr()).collect();
        let count = c_int::try_from(headers.len()).map_err(|_| Error::InvalidArgument {
            name: "headers",
            reason: "too many headers".into(),
        })?;
        let mut program: nvrtcProgram = std::ptr::null_mut();
        // SAFETY: every pointer is a NUL-terminated string borrowed for the call (NVRTC copies
        // them); the two arrays have `count` entries; the out-pointer is a live local.
        let code = unsafe {
            f(
                &mut program,
                source.as_ptr(),
                name.as_ptr(),
                count,
                contents.as_ptr(),
                names.as_ptr(),
            )
        };
        self.check("nvrtcCreateProgram", code)?;
        Ok(Program {
            nvrtc: self,
            raw: program,
        })
    }

    /// `nvrtcCompileProgram(program, options)`; on failure the error holds the compile log.
    pub fn compile_program(&self, program: &Program<'_>, options: &[CString]) -> Result<()> {
        let f = get!(self.nvrtcCompileProgram, "kernel compilation");
        let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let count = c_int::try_from(pointers.len()).map_err(|_| Error::InvalidArgument {
            name: "options",
            reason: "too many options".into(),
        })?;
        // SAFETY: the program is live (borrowed), the options are NUL-terminated strings that
        // outlive the call, and the array has `count` entries.
        let code = unsafe { f(program.raw, count, pointers.as_ptr()) };
        if code == nvrtcResult::NVRTC_SUCCESS {
            return Ok(());
        }
        let log = self
            .program_log(program)
            .unwrap_or_else(|e| format!("(compile log unavailable: {e})"));
        Err(self.error(
            "nvrtcCompileProgram",
            code,
            format!("compilation failed; NVRTC log:\n{log}"),
        ))
    }

    /// `nvrtcGetProgramLogSize` + `nvrtcGetProgramLog`.
    pub fn program_log(&self, program: &Program<'_>) -> Result<String> {
        let size_fn = get!(self.nvrtcGetProgramLogSize, "compile logs");
        let log_fn = get!(self.nvrtcGetProgramLog, "compile logs");
        let bytes = self.fetch(
            program,
            "nvrtcGetProgramLogSize",
            size_fn,
            "nvrtcGetProgramLog",
            log_fn,
        )?;
        Ok(String::from_utf8_lossy(trim_nul(&bytes)).into_owned())
    }

    /// `nvrtcAddNameExpression`: `expression` (a template instantiation's name, `&variable`)
    /// gets a lowered (mangled) name after compilation ([`Nvrtc::lowered_name`]).
    pub fn add_name_expression(&self, program: &Program<'_>, expression: &CStr) -> Result<()> {
        let f = get!(self.nvrtcAddNameExpression, "template kernels");
        // SAFETY: the program is live (borrowed) and not compiled yet; NVRTC copies the string.
        self.check("nvrtcAddNameExpression", unsafe {
            f(program.raw, expression.as_ptr())
        })
    }

    /// `nvrtcGetLoweredName` of an expression added before compilation.
    pub fn lowered_name(&self, program: &Program<'_>, expression: &CStr) -> Result<String> {
        let f = get!(self.nvrtcGetLoweredName, "template kernels");
        let mut lowered: *const c_char = std::ptr::null();
        // SAFETY: the program is live and compiled; the out-pointer is a live local. The string
        // NVRTC returns lives as long as the program, and is copied before this returns.
        self.check("nvrtcGetLoweredName", unsafe {
            f(program.raw, expression.as_ptr(), &mut lowered)
        })?;
        if lowered.is_null() {
            return Err(self.error(
                "nvrtcGetLoweredName",
                nvrtcResult::NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID,
                format!("no lowered name for `{}`", expression.to_string_lossy()),
            ));
        }
        // SAFETY: a NUL-terminated string owned by the live program.
        Ok(unsafe { CStr::from_ptr(lowered) }
            .to_string_lossy()
            .into_owned())
    }

    /// `nvrtcGetPTXSize` + `nvrtcGetPTX` (the text without its trailing NUL).
    pub fn ptx(&self, program: &Program<'_>) -> Result<Vec<u8>> {
        let size_fn = get!(self.nvrtcGetPTXSize, "PTX output");
        let ptx_fn = get!(self.nvrtcGetPTX, "PTX output");
        let bytes = self.fetch(program, "nvrtcGetPTXSize", size_fn, "nvrtcGetPTX", ptx_fn)?;
        Ok(trim_nul(&bytes).to_vec())
    }

    /// `nvrtcGetCUBINSize` + `nvrtcGetCUBIN`.
    pub fn cubin(&self, program: &Program<'_>) -> Result<Vec<u8>> {
        let size_fn = get!(self.nvrtcGetCUBINSize, "cubin output");
        let cubin_fn = get!(self.nvrtcGetCUBIN, "cubin output");
        self.fetch(
            program,
            "nvrtcGetCUBINSize",
            size_fn,
            "nvrtcGetCUBIN",
            cubin_fn,
        )
    }

    /// The size-then-contents protocol shared by the log, PTX and cubin getters.
    fn fetch(
        &self,
        program: &Program<'_>,
        size_call: &'static str,
        size_fn: unsafe extern "C" fn(nvrtcProgram, *mut usize) -> nvrtcResult,
        data_call: &'static str,
        data_fn: unsafe extern "C" fn(nvrtcProgram, *mut c_char) -> nvrtcResult,
    ) -> Result<Vec<u8>> {
        let mut size: usize = 0;
        // SAFETY: the program is live (borrowed) and the out-pointer is a live local.
        self.check(size_call, unsafe { size_fn(program.raw, &mut size) })?;
        let mut buffer = vec![0u8; size];
        if size == 0 {
            return Ok(buffer);
        }
        // SAFETY: the buffer has the `size` bytes NVRTC reported for this program.
        self.check(data_call, unsafe {
            data_fn(program.raw, buffer.as_mut_ptr().cast())
        })?;
        Ok(buffer)
    }

    /// `nvrtcDestroyProgram`.
    fn destroy_program(&self, raw: &mut nvrtcProgram) -> Result<()> {
        let f = get!(self.nvrtcDestroyProgram, "kernel compilation");
        // SAFETY: `raw` is a live program owned by a `Program` being dropped; NVRTC sets it to
        // null.
        self.check("nvrtcDestroyProgram", unsafe { f(raw) })
    }
}

fn trim_nul(bytes: &[u8]) -> &[u8] {
    match bytes.iter().position(|&b| b == 0) {
        Some(end) => &bytes[..end],
        None => bytes,
    }
}

/// An NVRTC program, destroyed on drop.
#[derive(Debug)]
pub struct Program<'a> {
    nvrtc: &'a Nvrtc,
    raw: nvrtcProgram,
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        if let Err(err) = self.nvrtc.destroy_program(&mut self.raw) {
            tracing::warn!(%err, "nvrtcDestroyProgram failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::driver_runs_code_of;

    /// CUDA 12 and 13 installed, driver R570 (CUDA 12.8): NVRTC 12's code loads, 13's does not.
    #[test]
    fn a_driver_runs_the_code_of_its_major_release_and_older() {
        assert!(driver_runs_code_of(12080, (12, 8)));
        assert!(driver_runs_code_of(12080, (11, 8)));
        assert!(!driver_runs_code_of(12080, (13, 0)));
        assert!(driver_runs_code_of(13050, (13, 0)));
        assert!(!driver_runs_code_of(10020, (11, 2)));
    }
}
