//! Turning a `CUresult` into gpu-mem's [`Error`].
//!
//! # Contract
//!
//! * `CUDA_SUCCESS` is `Ok(())`; every other code is [`Error::Native`] with the call's name, the
//!   numeric code, the code's name (`cuGetErrorName`) and the driver's description
//!   (`cuGetErrorString`).
//! * When the driver cannot name a code (missing symbol, unknown code) the error still carries
//!   the number and says why the text is missing; describing an error never fails.

use gpu_mem_core::{BackendKind, Error, Result};
use gpu_mem_cuda_sys::driver::{CUresult, PFN_cuGetErrorName_v6000, PFN_cuGetErrorString_v6000};
use std::ffi::{CStr, c_char};

/// The two lookup functions, as resolved from the loaded driver.
#[derive(Clone, Copy)]
pub(crate) struct ErrorText {
    pub(crate) name: PFN_cuGetErrorName_v6000,
    pub(crate) string: PFN_cuGetErrorString_v6000,
}

impl ErrorText {
    /// `Ok(())` for `CUDA_SUCCESS`, else the described error of `call`.
    pub(crate) fn check(self, call: &'static str, code: CUresult) -> Result<()> {
        if code == CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(self.error(call, code))
        }
    }

    /// The [`Error::Native`] for a failed `call`.
    pub(crate) fn error(self, call: &'static str, code: CUresult) -> Error {
        let code_name = lookup(self.name, code).unwrap_or_else(|| format!("CUresult {}", code.0));
        let description = lookup(self.string, code).unwrap_or_else(|| {
            if self.string.is_some() {
                "the driver has no description for this code".to_string()
            } else {
                "no description: the driver does not export cuGetErrorString".to_string()
            }
        });
        Error::Native {
            backend: BackendKind::Cuda,
            call,
            code: i64::from(code.0),
            code_name,
            description,
        }
    }
}

fn lookup(
    f: Option<unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult>,
    code: CUresult,
) -> Option<String> {
    let f = f?;
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: `f` is cuGetErrorName or cuGetErrorString, which write a pointer to a static,
    // NUL-terminated string into `text` (or leave it and return an error for unknown codes).
    let status = unsafe { f(code, &mut text) };
    if status != CUresult::CUDA_SUCCESS || text.is_null() {
        return None;
    }
    // SAFETY: on success `text` points to a static NUL-terminated string owned by the driver.
    Some(
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned(),
    )
}
