//! Code objects loaded into executables, and kernel symbols.

use super::Hsa;
use gpu_mem_core::{Error, Result};
use gpu_mem_hsa_sys as sys;
use std::ffi::CString;

impl Hsa {
    /// `hsa_code_object_reader_create_from_memory`. The reader refers to `code` without copying
    /// it, so the bytes must outlive the reader.
    ///
    /// # Safety
    /// `code` stays alive and unmodified until [`Hsa::code_object_reader_destroy`].
    pub unsafe fn code_object_reader_create_from_memory(
        &self,
        code: &[u8],
    ) -> Result<sys::hsa_code_object_reader_t> {
        let f = self.get(
            self.functions.hsa_code_object_reader_create_from_memory,
            "hsa_code_object_reader_create_from_memory",
            "loading kernels",
        )?;
        let mut reader = sys::hsa_code_object_reader_t::default();
        // SAFETY: `code` is valid for its length (and outlives the reader, caller).
        let status = unsafe { f(code.as_ptr().cast(), code.len(), &mut reader) };
        self.check("hsa_code_object_reader_create_from_memory", status)?;
        Ok(reader)
    }

    /// `hsa_code_object_reader_destroy`.
    ///
    /// # Safety
    /// `reader` is live and destroyed once.
    pub unsafe fn code_object_reader_destroy(
        &self,
        reader: sys::hsa_code_object_reader_t,
    ) -> Result<()> {
        let f = self.get(
            self.functions.hsa_code_object_reader_destroy,
            "hsa_code_object_reader_destroy",
            "loading kernels",
        )?;
        // SAFETY: guaranteed by the caller.
        let status = unsafe { f(reader) };
        self.check("hsa_code_object_reader_destroy", status)
    }

    /// `hsa_executable_create_alt(profile, rounding, NULL, &exe)`.
    pub fn executable_create_alt(
        &self,
        profile: sys::hsa_profile_t,
        rounding: sys::hsa_default_float_rounding_mode_t,
    ) -> Result<sys::hsa_executable_t> {
        let f = self.get(
            self.functions.hsa_executable_create_alt,
            "hsa_executable_create_alt",
            "loading kernels",
        )?;
        let mut exe = sys::hsa_executable_t::default();
        // SAFETY: null options are allowed; `exe` is a valid out-pointer.
        let status = unsafe { f(profile, rounding, std::ptr::null(), &mut exe) };
        self.check("hsa_executable_create_alt", status)?;
        Ok(exe)
    }

    /// `hsa_executable_load_agent_code_object(exe, agent, reader, NULL, NULL)`.
    ///
    /// # Safety
    /// `exe` (not frozen) and `reader` are live.
    pub unsafe fn executable_load_agent_code_object(
        &self,
        exe: sys::hsa_executable_t,
        agent: sys::hsa_agent_t,
        reader: sys::hsa_code_object_reader_t,
    ) -> Result<()> {
        let f = self.get(
            self.functions.hsa_executable_load_agent_code_object,
            "hsa_executable_load_agent_code_object",
            "loading kernels",
        )?;
        // SAFETY: handles live (caller); null options and null loaded-object out-pointer are
        // allowed by the specification.
        let status = unsafe { f(exe, agent, reader, std::ptr::null(), std::ptr::null_mut()) };
        self.check("hsa_executable_load_agent_code_object", status)
    }

    /// `hsa_executable_freeze(exe, NULL)`.
    ///
    /// # Safety
    /// `exe` is live.
    pub unsafe fn executable_freeze(&self, exe: sys::hsa_executable_t) -> Result<()> {
        let f = self.get(
            self.functions.hsa_executable_freeze,
            "hsa_executable_freeze",
            "loading kernels",
        )?;
        // SAFETY: guaranteed by the caller; null options are allowed.
        let status = unsafe { f(exe, std::ptr::null()) };
        self.check("hsa_executable_freeze", status)
    }

    /// `hsa_executable_get_symbol_by_name(exe, name, &agent, &symbol)`. Kernel symbols of code
    /// object v3+ are named `<kernel>.kd`.
    ///
    /// # Safety
    /// `exe` is live and frozen.
    pub unsafe fn executable_get_symbol_by_name(
        &self,
        exe: sys::hsa_executable_t,
        name: &str,
        agent: sys::hsa_agent_t,
    ) -> Result<sys::hsa_executable_symbol_t> {
        let f = self.get(
            self.functions.hsa_executable_get_symbol_by_name,
            "hsa_executable_get_symbol_by_name",
            "loading kernels",
        )?;
        let c_name = CString::new(name).map_err(|_| Error::InvalidArgument {
            name: "name",
            reason: format!("symbol name {name:?} contains a NUL byte"),
        })?;
        let mut symbol = sys::hsa_executable_symbol_t::default();
        // SAFETY: the name is NUL-terminated, `agent` and `symbol` are valid for the call.
        let status = unsafe { f(exe, c_name.as_ptr(), &agent, &mut symbol) };
        self.check("hsa_executable_get_symbol_by_name", status)?;
        Ok(symbol)
    }

    /// `hsa_executable_symbol_get_info`.
    ///
    /// # Safety
    /// `symbol` is live; `T` is the C type of `attribute`.
    pub unsafe fn executable_symbol_get_info<T: Copy + Default>(
        &self,
        symbol: sys::hsa_executable_symbol_t,
        attribute: sys::hsa_executable_symbol_info_t,
    ) -> Result<T> {
        let f = self.get(
            self.functions.hsa_executable_symbol_get_info,
            "hsa_executable_symbol_get_info",
            "loading kernels",
        )?;
        let mut value = T::default();
        // SAFETY: `value` is writable and as large as the attribute's type (caller).
        let status = unsafe { f(symbol, attribute, (&raw mut value).cast()) };
        self.check("hsa_executable_symbol_get_info", status)?;
        Ok(value)
    }

    /// `hsa_executable_destroy`.
    ///
    /// # Safety
    /// `exe` is live, destroyed once, and no dispatch of its kernels is in flight.
    pub unsafe fn executable_destroy(&self, exe: sys::hsa_executable_t) -> Result<()> {
        let f = self.get(
            self.functions.hsa_executable_destroy,
            "hsa_executable_destroy",
            "loading kernels",
        )?;
        // SAFETY: guaranteed by the caller.
        let status = unsafe { f(exe) };
        self.check("hsa_executable_destroy", status)
    }
}
