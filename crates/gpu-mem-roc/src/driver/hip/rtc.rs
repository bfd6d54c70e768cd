//! hiprtc calls: program creation, compilation, code and log retrieval.

use super::{Hip, c_text};
use gpu_mem_core::{Error, Result};
use gpu_mem_hip_sys as sys;
use std::ffi::{CString, c_char, c_int};

fn c_string(name: &'static str, value: &str) -> Result<CString> {
    CString::new(value).map_err(|_| Error::InvalidArgument {
        name,
        reason: "contains a NUL byte".to_string(),
    })
}

impl Hip {
    /// `hiprtcGetErrorString`: the result's name (`HIPRTC_ERROR_COMPILATION`, ...).
    pub fn rtc_error_string(&self, result: sys::hiprtcResult) -> String {
        let text = self.functions.hiprtcGetErrorString.and_then(|f| {
            // SAFETY: takes a plain integer and returns a static string or null.
            unsafe { c_text(f(result)) }
        });
        text.unwrap_or_else(|| format!("hiprtcResult {result}"))
    }

    /// `hiprtcVersion`: `(major, minor)`.
    pub fn rtc_version(&self) -> Result<(i32, i32)> {
        let f = self.get(self.functions.hiprtcVersion, "hiprtcVersion", "hiprtc")?;
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: both out-pointers are valid.
        let rc = unsafe { f(&mut major, &mut minor) };
        self.check_rtc("hiprtcVersion", rc, None)?;
        Ok((major, minor))
    }

    /// `hiprtcCreateProgram(&prog, source, name, headers...)`; `headers` are
    /// `(include name, contents)` pairs resolved by `#include "name"`.
    pub fn rtc_create_program(
        &self,
        source: &str,
        name: &str,
        headers: &[(&str, &str)],
    ) -> Result<sys::hiprtcProgram> {
        let f = self.get(
            self.functions.hiprtcCreateProgram,
            "hiprtcCreateProgram",
            "hiprtc",
        )?;
        let source = c_string("source", source)?;
        let name = c_string("name", name)?;
        let mut contents = Vec::with_capacity(headers.len());
        let mut names = Vec::with_capacity(headers.len());
        for (include, text) in headers {
            names.push(c_string("header name", include)?);
            contents.push(c_string("header contents", text)?);
        }
        let mut content_ptrs: Vec<*const c_char> = contents.iter().map(|c| c.as_ptr()).collect();
        let mut name_ptrs: Vec<*const c_char> = names.iter().map(|c| c.as_ptr()).collect();
        let count = c_int::try_from(headers.len()).map_err(|_| Error::InvalidArgument {
            name: "headers",
            reason: format!("{} headers is too many", headers.len()),
        })?;
        let mut program: sys::hiprtcProgram = std::ptr::null_mut();
        // SAFETY: every string is NUL-terminated and alive for the call (hiprtc copies them);
        // the two arrays hold `count` entries; `program` is a valid out-pointer.
        let rc = unsafe {
            f(
                &mut program,
                source.as_ptr(),
                name.as_ptr(),
                count,
                content_ptrs.as_mut_ptr(),
                name_ptrs.as_mut_ptr(),
            )
        };
        self.check_rtc("hiprtcCreateProgram", rc, None)?;
        Ok(program)
    }

    /// `hiprtcCompileProgram(prog, options)`. Returns the raw result so the caller can attach
    /// the log to a failure.
    ///
    /// # Safety
    /// `program` is live.
    pub unsafe fn rtc_compile_program(
        &self,
        program: sys::hiprtcProgram,
        options: &[String],
    ) -> Result<sys::hiprtcResult> {
        let f = self.get(
            self.functions.hiprtcCompileProgram,
            "hiprtcCompileProgram",
            "hiprtc",
        )?;
        let owned = options
            .iter()
            .map(|o| c_string("option", o))
            .collect::<Result<Vec<_>>>()?;
        let mut ptrs: Vec<*const c_char> = owned.iter().map(|c| c.as_ptr()).collect();
        let count = c_int::try_from(ptrs.len()).map_err(|_| Error::InvalidArgument {
            name: "options",
            reason: format!("{} options is too many", ptrs.len()),
        })?;
        // SAFETY: `program` is live (caller); the option array holds `count` NUL-terminated
        // strings alive for the call.
        Ok(unsafe { f(program, count, ptrs.as_mut_ptr()) })
    }

    /// `hiprtcAddNameExpression(prog, expression)`: the expression (a template instantiation)
    /// gets a lowered name after compilation.
    ///
    /// # Safety
    /// `program` is live and not compiled yet.
    pub unsafe fn rtc_add_name_expression(
        &self,
        program: sys::hiprtcProgram,
        expression: &str,
    ) -> Result<()> {
        let f = self.get(
            self.functions.hiprtcAddNameExpression,
            "hiprtcAddNameExpression",
            "template kernels",
        )?;
        let expression = c_string("name expression", expression)?;
        // SAFETY: `program` is live (caller); the string is NUL-terminated and copied by hiprtc.
        let rc = unsafe { f(program, expression.as_ptr()) };
        self.check_rtc("hiprtcAddNameExpression", rc, None)
    }

    /// `hiprtcGetLoweredName(prog, expression)` of an expression added before compilation.
    ///
    /// # Safety
    /// `program` is live and compiled.
    pub unsafe fn rtc_lowered_name(
        &self,
        program: sys::hiprtcProgram,
        expression: &str,
    ) -> Result<String> {
        let f = self.get(
            self.functions.hiprtcGetLoweredName,
            "hiprtcGetLoweredName",
            "template kernels",
        )?;
        let expression = c_string("name expression", expression)?;
        let mut lowered: *const c_char = std::ptr::null();
        // SAFETY: `program` is live and compiled (caller); the out-pointer is a live local; the
        // string hiprtc returns lives as long as the program and is copied here.
        let rc = unsafe { f(program, expression.as_ptr(), &mut lowered) };
        self.check_rtc("hiprtcGetLoweredName", rc, None)?;
        // SAFETY: as above.
        unsafe { super::c_text(lowered) }.ok_or_else(|| Error::InvalidArgument {
            name: "name expression",
            reason: "hiprtc gave no lowered name".into(),
        })
    }

    /// Builds the error for a failed compile, with `log` as its description.
    pub fn rtc_compile_error(&self, result: sys::hiprtcResult, log: String) -> Error {
        match self.check_rtc("hiprtcCompileProgram", result, Some(log)) {
            Err(e) => e,
            Ok(()) => Error::InvalidArgument {
                name: "result",
                reason: "HIPRTC_SUCCESS is not a compile error".to_string(),
            },
        }
    }

    /// `hiprtcGetProgramLogSize` + `hiprtcGetProgramLog`, without the trailing NUL.
    ///
    /// # Safety
    /// `program` is live.
    pub unsafe fn rtc_program_log(&self, program: sys::hiprtcProgram) -> Result<String> {
        let size_fn = self.get(
            self.functions.hiprtcGetProgramLogSize,
            "hiprtcGetProgramLogSize",
            "hiprtc compile logs",
        )?;
        let log_fn = self.get(
            self.functions.hiprtcGetProgramLog,
            "hiprtcGetProgramLog",
            "hiprtc compile logs",
        )?;
        let mut size = 0usize;
        // SAFETY: `program` is live (caller); `size` is a valid out-pointer.
        let rc = unsafe { size_fn(program, &mut size) };
        self.check_rtc("hiprtcGetProgramLogSize", rc, None)?;
        if size == 0 {
            return Ok(String::new());
        }
        let mut buffer = vec![0u8; size];
        // SAFETY: `buffer` holds the `size` bytes the runtime said the log needs.
        let rc = unsafe { log_fn(program, buffer.as_mut_ptr().cast()) };
        self.check_rtc("hiprtcGetProgramLog", rc, None)?;
        let end = buffer.iter().position(|b| *b == 0).unwrap_or(buffer.len());
        buffer.truncate(end);
        Ok(String::from_utf8_lossy(&buffer).into_owned())
    }

    /// `hiprtcGetCodeSize` + `hiprtcGetCode`: the code object (an AMDGPU ELF).
    ///
    /// # Safety
    /// `program` is live and compiled.
    pub unsafe fn rtc_code(&self, program: sys::hiprtcProgram) -> Result<Vec<u8>> {
        let size_fn = self.get(
            self.functions.hiprtcGetCodeSize,
            "hiprtcGetCodeSize",
            "hiprtc code objects",
        )?;
        let code_fn = self.get(
            self.functions.hiprtcGetCode,
            "hiprtcGetCode",
            "hiprtc code objects",
        )?;
        let mut size = 0usize;
        // SAFETY: `program` is live (caller); `size` is a valid out-pointer.
        let rc = unsafe { size_fn(program, &mut size) };
        self.check_rtc("hiprtcGetCodeSize", rc, None)?;
        let mut code = vec![0u8; size];
        if size > 0 {
            // SAFETY: `code` holds the `size` bytes the runtime reported.
            let rc = unsafe { code_fn(program, code.as_mut_ptr().cast()) };
            self.check_rtc("hiprtcGetCode", rc, None)?;
        }
        Ok(code)
    }

    /// `hiprtcDestroyProgram`.
    ///
    /// # Safety
    /// `program` is live and destroyed once.
    pub unsafe fn rtc_destroy_program(&self, program: sys::hiprtcProgram) -> Result<()> {
        let f = self.get(
            self.functions.hiprtcDestroyProgram,
            "hiprtcDestroyProgram",
            "hiprtc",
        )?;
        let mut program = program;
        // SAFETY: `program` is live and destroyed once (caller).
        let rc = unsafe { f(&mut program) };
        self.check_rtc("hiprtcDestroyProgram", rc, None)
    }
}
