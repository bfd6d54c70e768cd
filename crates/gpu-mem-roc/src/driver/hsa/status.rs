//! `hsa_status_t` names and texts.

use super::Hsa;
use gpu_mem_hsa_sys as sys;
use std::ffi::{CStr, c_char};

macro_rules! status_names {
    ($($name:ident),* $(,)?) => {
        /// The symbolic name of an HSA status code (core and AMD-extension codes of the 5.2.3
        /// headers), or `None` for a code those headers do not define.
        pub fn status_name(status: sys::hsa_status_t) -> Option<&'static str> {
            $(
                if status == sys::$name as sys::hsa_status_t {
                    return Some(stringify!($name));
                }
            )*
            None
        }
    };
}

status_names!(
    HSA_STATUS_SUCCESS,
    HSA_STATUS_INFO_BREAK,
    HSA_STATUS_ERROR,
    HSA_STATUS_ERROR_INVALID_ARGUMENT,
    HSA_STATUS_ERROR_INVALID_QUEUE_CREATION,
    HSA_STATUS_ERROR_INVALID_ALLOCATION,
    HSA_STATUS_ERROR_INVALID_AGENT,
    HSA_STATUS_ERROR_INVALID_REGION,
    HSA_STATUS_ERROR_INVALID_SIGNAL,
    HSA_STATUS_ERROR_INVALID_QUEUE,
    HSA_STATUS_ERROR_OUT_OF_RESOURCES,
    HSA_STATUS_ERROR_INVALID_PACKET_FORMAT,
    HSA_STATUS_ERROR_RESOURCE_FREE,
    HSA_STATUS_ERROR_NOT_INITIALIZED,
    HSA_STATUS_ERROR_REFCOUNT_OVERFLOW,
    HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS,
    HSA_STATUS_ERROR_INVALID_INDEX,
    HSA_STATUS_ERROR_INVALID_ISA,
    HSA_STATUS_ERROR_INVALID_ISA_NAME,
    HSA_STATUS_ERROR_INVALID_CODE_OBJECT,
    HSA_STATUS_ERROR_INVALID_EXECUTABLE,
    HSA_STATUS_ERROR_FROZEN_EXECUTABLE,
    HSA_STATUS_ERROR_INVALID_SYMBOL_NAME,
    HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED,
    HSA_STATUS_ERROR_VARIABLE_UNDEFINED,
    HSA_STATUS_ERROR_EXCEPTION,
    HSA_STATUS_ERROR_INVALID_CODE_SYMBOL,
    HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL,
    HSA_STATUS_ERROR_INVALID_FILE,
    HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER,
    HSA_STATUS_ERROR_INVALID_CACHE,
    HSA_STATUS_ERROR_INVALID_WAVEFRONT,
    HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP,
    HSA_STATUS_ERROR_INVALID_RUNTIME_STATE,
    HSA_STATUS_ERROR_FATAL,
    HSA_STATUS_ERROR_INVALID_MEMORY_POOL,
    HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION,
    HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION,
    HSA_STATUS_ERROR_MEMORY_FAULT,
    HSA_STATUS_CU_MASK_REDUCED,
);

impl Hsa {
    /// `hsa_status_string`: the runtime's text for `status`, or `None` when the symbol is
    /// missing or the runtime does not know the code. Works without a successful `hsa_init`.
    pub fn status_string(&self, status: sys::hsa_status_t) -> Option<String> {
        let f = self.functions.hsa_status_string?;
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: `text` is a valid out-pointer; the call only reads `status`.
        let rc = unsafe { f(status, &mut text) };
        if rc != sys::HSA_STATUS_SUCCESS || text.is_null() {
            return None;
        }
        // SAFETY: on success ROCr stores a pointer to a static NUL-terminated string.
        Some(
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned(),
        )
    }
}
