//! Compiling portable kernel source for one compute capability.

use super::api::Nvrtc;
use gpu_mem_core::{Error, Result};
use std::ffi::CString;
use std::fmt;
use std::time::Instant;

/// The portable kernel prelude (DESIGN.md §5), shipped by gpu-mem-core.
pub const PRELUDE: &str = gpu_mem_core::KERNEL_PRELUDE;

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
    /// The PTX text (for a cubin too: NVRTC keeps the PTX it assembled), empty where NVRTC
    /// gives none.
    pub ptx: String,
    /// Each name expression with its lowered (mangled) name.
    pub lowered: Vec<(String, String)>,
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

/// What [`Nvrtc::compile`] compiles: a source and how.
#[derive(Debug, Clone, Copy)]
pub struct CompileRequest<'a> {
    /// The source text.
    pub source: &'a str,
    /// Its name in messages.
    pub name: &'a str,
    /// The target.
    pub capability: ComputeCapability,
    /// PTX or a cubin.
    pub kind: CodeKind,
    /// Options passed after the architecture and include folders.
    pub extra_options: &'a [&'a str],
    /// Template instantiations (and `&variable`s) to lower.
    pub name_expressions: &'a [String],
}

impl Nvrtc {
    /// Compiles `source` (named `name` in messages) for `capability`, without name
    /// expressions (see [`Nvrtc::compile_request`]).
    pub fn compile(
        &self,
        source: &str,
        name: &str,
        capability: ComputeCapability,
        kind: CodeKind,
        extra_options: &[&str],
    ) -> Result<Compiled> {
        self.compile_request(&CompileRequest {
            source,
            name,
            capability,
            kind,
            extra_options,
            name_expressions: &[],
        })
    }

    /// Compiles `request.source` for `request.capability`, offering the prelude as `gpu_mem.h`
    /// and gpu-mem's C library headers, with the CUDA headers' folders as `-I`.
    pub fn compile_request(&self, request: &CompileRequest<'_>) -> Result<Compiled> {
        let CompileRequest {
            source,
            name,
            capability,
            kind,
            extra_options,
            name_expressions,
        } = *request;
        let source_c = c_string("source", source)?;
        let name_c = c_string("name", name)?;
        let mut headers = vec![(
            c_string("prelude name", PRELUDE_NAME)?,
            c_string("prelude", PRELUDE)?,
        )];
        for (include, text) in gpu_mem_core::RTC_HEADERS {
            headers.push((c_string("header name", include)?, c_string("header", text)?));
        }
        let header_refs: Vec<(&std::ffi::CStr, &std::ffi::CStr)> = headers
            .iter()
            .map(|(n, t)| (n.as_c_str(), t.as_c_str()))
            .collect();
        let mut options = vec![c_string("options", &kind.architecture_option(capability))?];
        for dir in super::include_dirs(self.path()) {
            options.push(c_string("options", &format!("-I{}", dir.display()))?);
        }
        for option in extra_options {
            options.push(c_string("options", option)?);
        }
        let expressions = name_expressions
            .iter()
            .map(|e| c_string("name expression", e))
            .collect::<Result<Vec<_>>>()?;

        let started = Instant::now();
        let program = self.create_program(&source_c, &name_c, &header_refs)?;
        for expression in &expressions {
            self.add_name_expression(&program, expression)?;
        }
        self.compile_program(&program, &options)
            .map_err(|err| with_context(err, name, capability))?;
        let code = match kind {
            CodeKind::Ptx => self.ptx(&program)?,
            CodeKind::Cubin => self.cubin(&program)?,
        };
        let ptx = match kind {
            CodeKind::Ptx => String::from_utf8_lossy(&code).into_owned(),
            CodeKind::Cubin => self
                .ptx(&program)
                .map(|p| String::from_utf8_lossy(&p).into_owned())
                .unwrap_or_default(),
        };
        let mut lowered = Vec::with_capacity(expressions.len());
        for (expression, text) in expressions.iter().zip(name_expressions) {
            lowered.push((text.clone(), self.lowered_name(&program, expression)?));
        }
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
            ptx,
            lowered,
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

/// Chooses what to compile for a device, given what NVRTC and the driver support:
///
/// * a cubin for the device's own architecture when NVRTC can target it exactly — no JIT, and it
///   needs only a driver of NVRTC's major release (CUDA minor-version compatibility);
/// * otherwise PTX for the newest virtual architecture NVRTC has that is not newer than the
///   device, which the driver JIT-compiles — and a driver can only JIT PTX from an NVRTC that is
///   not newer than itself.
///
/// `driver_version` and the NVRTC version use CUDA's encoding (13050 = 13.5).
pub fn choose_target(
    device: ComputeCapability,
    nvrtc_archs: &[i32],
    nvrtc_version: (i32, i32),
    driver_version: i32,
) -> Result<(CodeKind, ComputeCapability)> {
    let nvrtc_encoded = nvrtc_version.0 * 1000 + nvrtc_version.1 * 10;
    let wanted = i32::try_from(device.major * 10 + device.minor).unwrap_or(i32::MAX);
    let unsupported = |reason: String| Error::NotSupportedByBackend {
        backend: gpu_mem_core::BackendKind::Cuda,
        feature: "kernel compilation",
        reason,
    };
    if nvrtc_archs.contains(&wanted) {
        if driver_version / 1000 < nvrtc_version.0 {
            return Err(unsupported(format!(
                "the driver supports CUDA {}.{}, older than NVRTC {}.{}'s major release",
                driver_version / 1000,
                driver_version % 1000 / 10,
                nvrtc_version.0,
                nvrtc_version.1
            )));
        }
        return Ok((CodeKind::Cubin, device));
    }
    let best = nvrtc_archs.iter().copied().filter(|&a| a <= wanted).max().ok_or_else(|| {
        unsupported(format!(
            "NVRTC {}.{} cannot target compute capability {device} (it supports {nvrtc_archs:?})",
            nvrtc_version.0, nvrtc_version.1
        ))
    })?;
    if driver_version < nvrtc_encoded {
        return Err(unsupported(format!(
            "compute capability {device} needs PTX, and the driver (CUDA {}.{}) cannot JIT PTX from the newer NVRTC {}.{}",
            driver_version / 1000,
            driver_version % 1000 / 10,
            nvrtc_version.0,
            nvrtc_version.1
        )));
    }
    let virtual_cc = ComputeCapability::new((best / 10) as u32, (best % 10) as u32);
    Ok((CodeKind::Ptx, virtual_cc))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARCHS: [i32; 6] = [75, 80, 86, 89, 90, 120];

    #[test]
    fn exact_architecture_gets_a_cubin() {
        let got = choose_target(ComputeCapability::new(8, 6), &ARCHS, (13, 5), 13000);
        assert_eq!(
            got.ok(),
            Some((CodeKind::Cubin, ComputeCapability::new(8, 6)))
        );
    }

    #[test]
    fn unknown_architecture_gets_ptx_for_the_nearest_older_one() {
        // 8.7 is not in the list: PTX for 8.6, which the (new enough) driver JITs.
        let got = choose_target(ComputeCapability::new(8, 7), &ARCHS, (13, 5), 13050);
        assert_eq!(
            got.ok(),
            Some((CodeKind::Ptx, ComputeCapability::new(8, 6)))
        );
    }

    #[test]
    fn ptx_from_a_newer_nvrtc_than_the_driver_is_refused() {
        let got = choose_target(ComputeCapability::new(8, 7), &ARCHS, (13, 5), 13020);
        assert!(
            matches!(got, Err(Error::NotSupportedByBackend { .. })),
            "{got:?}"
        );
    }

    #[test]
    fn cubin_needs_the_same_major_release() {
        let got = choose_target(ComputeCapability::new(9, 0), &ARCHS, (13, 5), 12080);
        assert!(
            matches!(got, Err(Error::NotSupportedByBackend { .. })),
            "{got:?}"
        );
    }

    #[test]
    fn too_old_devices_are_refused_with_the_supported_list() {
        let got = choose_target(ComputeCapability::new(7, 0), &ARCHS, (13, 5), 13050);
        match got {
            Err(Error::NotSupportedByBackend { reason, .. }) => {
                assert!(reason.contains("75"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
    }
}
