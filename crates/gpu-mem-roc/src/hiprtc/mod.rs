//! Compiling portable kernel source to AMD GPU code objects with hiprtc.
//!
//! # Contract
//!
//! * [`compile`] compiles one translation unit for one ISA (`gfx90a`, `gfx1100`, ...) with
//!   `--offload-arch=<isa> -O3` plus the caller's options, and returns the code object: an ELF
//!   for `EM_AMDGPU` that `hsa_code_object_reader_create_from_memory` accepts. No GPU is needed.
//! * A failed compile is [`Error::Native`] for `hiprtcCompileProgram` whose description is the
//!   compiler log; a successful one keeps its (usually empty) log in [`CodeObject::log`].
//! * `headers` are `(include name, contents)` pairs, so `#include "gpu_mem.h"` resolves to the
//!   prelude without touching the file system.
//! * An ISA the code object manager does not list (see [`supported_isas`]) is refused with
//!   [`Error::NotSupportedByBackend`] *before* hiprtc sees it: hiprtc 5.2.3 aborts the process
//!   (comgr 2.4 frees an invalid pointer in `amd_comgr_destroy_action_info`) for such an ISA,
//!   e.g. gfx1100, which ROCm 5.2 predates.
//! * Compiles are serialised process-wide: concurrent `hiprtcCompileProgram` calls crash
//!   hiprtc 5.2.3 (SIGSEGV inside the library when two threads compile at once).

mod bundle;
mod module;

pub use bundle::{code_object_for, make_bundle};

use crate::driver::{Comgr, Hip};
use gpu_mem_core::sync::lock;
use gpu_mem_core::{BackendKind, Error, Result};
use gpu_mem_hip_sys as sys;
pub use module::{PRELUDE_NAME, compile_module, translation_unit};
use std::sync::{Mutex, OnceLock};

/// Held for the whole of each compile (see the module docs).
static COMPILE_LOCK: Mutex<()> = Mutex::new(());

/// The ISAs comgr supports (short names such as `gfx90a`), and which comgr said so.
#[derive(Debug, Clone)]
pub struct IsaList {
    /// The library the list came from.
    pub library: String,
    /// comgr's `(major, minor)` version.
    pub version: (usize, usize),
    /// Short ISA names, sorted, without duplicates.
    pub isas: Vec<String>,
}

/// The processor part of an ISA name: `gfx90a` for `gfx90a:xnack-` or
/// `amdgcn-amd-amdhsa--gfx90a:sramecc+`.
pub fn processor(isa: &str) -> &str {
    let isa = isa.rsplit("--").next().unwrap_or(isa);
    isa.split(':').next().unwrap_or(isa)
}

/// The ISAs the installed comgr (hence hiprtc) can compile for; loaded once per process.
pub fn supported_isas() -> Result<IsaList> {
    static LIST: OnceLock<IsaList> = OnceLock::new();
    // comgr stays loaded for the life of the process: unloading it and letting hiprtc load it
    // again re-registers LLVM's command-line options and aborts.
    static COMGR: OnceLock<Comgr> = OnceLock::new();
    if let Some(list) = LIST.get() {
        return Ok(list.clone());
    }
    let comgr = match COMGR.get() {
        Some(c) => c,
        None => {
            // hiprtc first, so that the comgr found is the one it loaded (`Comgr::load` prefers
            // a loaded copy): its ISA list is what hiprtc can compile for. (Unless one is named;
            // a missing hiprtc is reported where it is needed.)
            if std::env::var_os(crate::driver::comgr::ENV_OVERRIDE).is_none() {
                let _ = crate::driver::hip::Hip::shared();
            }
            let loaded = Comgr::load()?;
            COMGR.get_or_init(|| loaded)
        }
    };
    let mut isas: Vec<String> = comgr
        .isa_names()?
        .iter()
        .map(|n| processor(n).to_string())
        .collect();
    isas.sort();
    isas.dedup();
    let list = IsaList {
        library: comgr.path().to_string(),
        version: comgr.version()?,
        isas,
    };
    Ok(LIST.get_or_init(|| list).clone())
}

/// `Ok` when comgr lists `arch`; a missing comgr only logs (hiprtc will report it).
fn check_isa(arch: &str) -> Result<()> {
    match supported_isas() {
        Ok(list) if list.isas.iter().any(|i| i == processor(arch)) => Ok(()),
        Ok(list) => Err(Error::NotSupportedByBackend {
            backend: BackendKind::Roc,
            feature: "compiling kernels for this GPU ISA",
            reason: format!(
                "the installed hiprtc's code object manager ({} {}.{}) does not know {arch}; it \
                 supports {}. (Asking hiprtc anyway would abort the process: comgr frees an \
                 invalid pointer for unknown ISAs.) A newer ROCm is needed for this GPU.",
                list.library,
                list.version.0,
                list.version.1,
                list.isas.join(", ")
            ),
        }),
        Err(e) => {
            tracing::warn!(error = %e, arch, "cannot list comgr's ISAs; compiling without the check");
            Ok(())
        }
    }
}

/// A compiled code object.
#[derive(Debug, Clone)]
pub struct CodeObject {
    /// The ISA it was compiled for (`gfx90a`).
    pub arch: String,
    /// The ELF bytes.
    pub code: Vec<u8>,
    /// hiprtc's log (warnings), often empty.
    pub log: String,
    /// Each name expression with its lowered (mangled) name, where hiprtc gives one.
    pub lowered: Vec<(String, String)>,
}

/// A hiprtc program destroyed on drop.
struct Program<'a> {
    hip: &'a Hip,
    handle: sys::hiprtcProgram,
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        // SAFETY: `handle` came from hiprtcCreateProgram and is destroyed only here.
        if let Err(e) = unsafe { self.hip.rtc_destroy_program(self.handle) } {
            tracing::warn!(error = %e, "hiprtcDestroyProgram failed");
        }
    }
}

/// Compiles `source` (named `name` in diagnostics) for `arch`, lowering `name_expressions`
/// (template instantiations).
pub fn compile(
    hip: &Hip,
    source: &str,
    name: &str,
    arch: &str,
    headers: &[(&str, &str)],
    extra_options: &[&str],
    name_expressions: &[String],
) -> Result<CodeObject> {
    if arch.is_empty()
        || !arch
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ":+-_".contains(c))
    {
        return Err(Error::InvalidArgument {
            name: "arch",
            reason: format!("{arch:?} is not an AMD GPU ISA name such as gfx90a"),
        });
    }
    // A poisoned lock only means another compile panicked; hiprtc state is not Rust state.
    let _serialised = lock(&COMPILE_LOCK);
    check_isa(arch)?;
    let program = Program {
        hip,
        handle: hip.rtc_create_program(source, name, headers)?,
    };
    for expression in name_expressions {
        // SAFETY: the program is live and not compiled yet.
        unsafe { hip.rtc_add_name_expression(program.handle, expression) }?;
    }
    let mut options = vec![format!("--offload-arch={arch}"), "-O3".to_string()];
    options.extend(extra_options.iter().map(|o| (*o).to_string()));
    let started = std::time::Instant::now();
    // SAFETY: the program is live until `program` drops at the end of this function.
    let result = unsafe { hip.rtc_compile_program(program.handle, &options) }?;
    // SAFETY: as above.
    let log = unsafe { hip.rtc_program_log(program.handle) }
        .unwrap_or_else(|e| format!("(compile log unavailable: {e})"));
    tracing::debug!(
        name,
        arch,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "hiprtc compile"
    );
    if result != sys::HIPRTC_SUCCESS {
        return Err(hip.rtc_compile_error(result, log));
    }
    // SAFETY: as above; the program compiled successfully.
    let code = unsafe { hip.rtc_code(program.handle) }?;
    if code.is_empty() {
        return Err(Error::Native {
            backend: gpu_mem_core::BackendKind::Roc,
            call: "hiprtcGetCode",
            code: 0,
            code_name: "HIPRTC_SUCCESS".to_string(),
            description: "hiprtc reported success but returned an empty code object".to_string(),
        });
    }
    // hiprtc 5.2 does not lower some expressions it compiled (an integer argument of a `size_t`
    // parameter, `reduce<int, 256>`): those kernels are found by their demangled names instead.
    let mut lowered = Vec::with_capacity(name_expressions.len());
    for expression in name_expressions {
        // SAFETY: the program is live and compiled.
        match unsafe { hip.rtc_lowered_name(program.handle, expression) } {
            Ok(name) => lowered.push((expression.clone(), name)),
            Err(error) => {
                tracing::debug!(%expression, %error, "hiprtc gave no lowered name; found by its demangled name");
            }
        }
    }
    // Older hiprtc returns the code object itself, newer a clang offload bundle holding it.
    let code = code_object_for(code, arch)?;
    Ok(CodeObject {
        arch: arch.to_string(),
        code,
        log,
        lowered,
    })
}
