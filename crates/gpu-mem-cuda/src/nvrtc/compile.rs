//! Compiling portable kernel source for one compute capability.

use super::api::Nvrtc;
use gpu_mem_core::{Error, Result};
use std::ffi::CString;
use std::fmt;
use std::time::Instant;

/// The portable kernel prelude (DESIGN.md §5), shipped by gpu-mem-core.
pub const PRELUDE: &str = include_str!("../../../gpu-mem-core/include/gpu_mem.h");

/// The name kernel sources include the prelude by: `#include "gpu_mem.h"`.
pub const PRELUDE_NAME: &str = "gpu_mem.h";

/// A CUDA compute capability such as 9.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComputeCapability {
    /// Major version (9 for sm_90).
    pub major: u32,
    /// Minor version (0 for sm_90).
    pub minor: u32,
}

impl ComputeCapability {
    /// `major.minor`.
    pub const fn new(major: u32, minor: u32) -> ComputeCapability {
        ComputeCapability { major, minor }
    }

    /// The two digits NVRTC uses: 90 for 9.0.
    pub fn digits(self) -> String {
        format!("{}{}", self.major, self.minor)
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeKind {
    /// PTX for the virtual architecture `compute_XY` (JIT-compiled by the driver at load).
    Ptx,
    /// A cubin for the real architecture `sm_XY` (runs only on that architecture family).
    Cubin,
}

impl CodeKind {
    fn architecture_option(self, cc: ComputeCapability) -> String {
        match self {
            CodeKind::Ptx => format!("--gpu-architecture=compute_{}", cc.digits()),
            CodeKind::Cubin => format!("--gpu-architecture=sm_{}", cc.digits()),
        }
    }
}

/// The result of one successful compilation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    /// PTX text (no trailing NUL) or cubin bytes.
    pub code: Vec<u8>,
    /// Which of the two.
    pub kind: CodeKind,
    /// The target.
    pub capability: ComputeCapability,
    /// NVRTC's log (warnings; usually empty).
    pub log: String,
}

impl Compiled {
    /// The PTX as text (`None` for a cubin or non-UTF-8 output).
    pub fn ptx_text(&self) -> Option<&str> {
        match self.kind {
            CodeKind::Ptx => std::str::from_utf8(&self.code).ok(),
            CodeKind::Cubin => None,
        }
    }
}

fn c_string(what: &'static str, text: &str) -> Result<CString> {
    CString::new(text).map_err(|_| Error::InvalidArgument {
        name: what,
        reason: "contains a NUL byte".to_string(),
    })
}

impl Nvrtc {
    /// Compiles `source` (named `name` in messages) for `capability`, offering the prelude as
    /// `gpu_mem.h`. `extra_options` are passed to NVRTC after the architecture option.
    pub fn compile(
        &self,
        source: &str,
        name: &str,
        capability: ComputeCapability,
        kind: CodeKind,
        extra_options: &[&str],
    ) -> Result<Compiled> {
        let source_c = c_string("source", source)?;
        let name_c = c_string("name", name)?;
        let prelude = c_string("prelude", PRELUDE)?;
        let prelude_name = c_string("prelude name", PRELUDE_NAME)?;
        let mut options = vec![c_string("options", &kind.architecture_option(capability))?];
        for option in extra_options {
            options.push(c_string("options", option)?);
        }

        let started = Instant::now();
        let program = self.create_program(&source_c, &name_c, &[(&prelude_name, &prelude)])?;
        self.compile_program(&program, &options)
            .map_err(|err| with_context(err, name, capability))?;
        let code = match kind {
            CodeKind::Ptx => self.ptx(&program)?,
            CodeKind::Cubin => self.cubin(&program)?,
        };
        let log = self.program_log(&program)?;
        tracing::debug!(
            name,
            %capability,
            ?kind,
            bytes = code.len(),
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            "NVRTC compiled"
        );
        Ok(Compiled {
            code,
            kind,
            capability,
            log,
        })
    }
}

/// Adds the source name and target to a compile error's description.
fn with_context(err: Error, name: &str, capability: ComputeCapability) -> Error {
    match err {
        Error::Native {
            backend,
            call,
            code,
            code_name,
            description,
        } => Error::Native {
            backend,
            call,
            code,
            code_name,
            description: format!("{name} for compute capability {capability}: {description}"),
        },
        other => other,
    }
}
