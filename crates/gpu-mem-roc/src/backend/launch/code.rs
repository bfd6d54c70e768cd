//! A module's CUDA C++ source → hiprtc code object for the agent's ISA → HSA executable → its
//! kernels' and variables' symbols.
//!
//! Loading follows the HSA runtime specification, "Executables" / "Code object readers":
//! `hsa_code_object_reader_create_from_memory` (the bytes must outlive the reader, so they are
//! kept here), `hsa_executable_create_alt` with the agent's profile and the default rounding
//! mode, `hsa_executable_load_agent_code_object`, `hsa_executable_freeze`. A module is one
//! executable per agent, so its kernels share its variables. A kernel is found by its lowered
//! name (a name expression) or by the name in the code object's metadata that reads as the
//! entry (`gpu_mem_core::kernel::compiled::is_named`), then its descriptor symbol `<name>.kd`
//! (code object v3+ naming) gives its kernel object, kernarg segment size and alignment, group
//! and private segment sizes; a variable by the code object's symbol table, then
//! `HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS` and `_SIZE`. Executable and reader are
//! destroyed when the last user goes: the module's cache entry and every [`LoadedKernel`]
//! (dispatches in flight hold one).

use super::kernargs::code_object_abi_version;
use super::metadata::{ExplicitArg, HiddenArg, kernel_args, kernel_names};
use crate::driver::Hsa;
use gpu_mem_core::kernel::compiled::{self, is_named, normalized, source_name};
use gpu_mem_core::{Error, Result};
use gpu_mem_hsa_sys as sys;
use std::sync::Arc;

/// An executable holding one code object for one agent; destroyed on drop.
#[derive(Debug)]
struct Executable {
    hsa: Arc<Hsa>,
    executable: Option<sys::hsa_executable_t>,
    reader: Option<sys::hsa_code_object_reader_t>,
    /// The code object the reader refers to (not copied by the runtime).
    code: Arc<[u8]>,
}

impl Drop for Executable {
    fn drop(&mut self) {
        if let Some(exe) = self.executable.take() {
            // SAFETY: created by `load`, destroyed once; no dispatch of its kernels is in flight
            // (each holds the `LoadedKernel` owning this).
            if let Err(e) = unsafe { self.hsa.executable_destroy(exe) } {
                tracing::warn!(error = %e, "hsa_executable_destroy failed");
            }
        }
        if let Some(reader) = self.reader.take() {
            // SAFETY: created by `load`, destroyed once, after the executable using it.
            if let Err(e) = unsafe { self.hsa.code_object_reader_destroy(reader) } {
                tracing::warn!(error = %e, "hsa_code_object_reader_destroy failed");
            }
        }
    }
}

/// A module loaded on one agent: its executable and code object, and its name expressions'
/// lowered names.
#[derive(Debug)]
pub struct LoadedModule {
    executable: Arc<Executable>,
    agent: sys::hsa_agent_t,
    lowered: Vec<(String, String)>,
}

/// A kernel ready to dispatch on one agent.
#[derive(Debug)]
pub struct LoadedKernel {
    _executable: Arc<Executable>,
    /// The entry point's name.
    pub entry: String,
    /// `HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT`: the packet's `kernel_object`.
    pub kernel_object: u64,
    /// Bytes of the kernarg segment, hidden arguments included.
    pub kernarg_size: u32,
    /// Required alignment of the kernarg segment.
    pub kernarg_alignment: u32,
    /// Static group segment (LDS) bytes per work-group.
    pub group_size: u32,
    /// Private segment (scratch) bytes per work-item, the dynamic call stack's allowance
    /// included ([`private_segment_size`]).
    pub private_size: u32,
    /// The code object's ELF ABI version (2 = v4, 3 = v5), when recognised.
    pub abi_version: Option<u8>,
    /// The kernel's declared parameters (offsets and sizes) from the code object's metadata,
    /// when it has any.
    pub explicit: Option<Vec<ExplicitArg>>,
    /// The kernel's hidden arguments from the code object's metadata, when it has any.
    pub hidden: Option<Vec<HiddenArg>>,
}

/// Private (scratch) bytes per work-item reserved for a kernel whose call stack the compiler
/// could not size (recursion, indirect calls, calls it did not inline), on top of what the
/// kernel reports: HIP's default per-thread stack limit (`hipLimitStackSize`, 1 KiB).
pub const DYNAMIC_STACK_BYTES: u32 = 1024;

/// The dispatch packet's `private_segment_size`: what the kernel symbol reports, plus
/// [`DYNAMIC_STACK_BYTES`] when it has a dynamic call stack. hsa.h
/// (`HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE`): "If the value of
/// HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK is true, the kernel may use more private
/// memory than the reported value, and the application must add the dynamic call stack usage to
/// private_segment_size"; without it such a kernel overruns its scratch.
pub fn private_segment_size(reported: u32, dynamic_call_stack: bool) -> u32 {
    if dynamic_call_stack {
        reported.saturating_add(DYNAMIC_STACK_BYTES)
    } else {
        reported
    }
}

/// Loads `code` (lowering `lowered`'s expressions) into an executable for `agent`.
pub fn load_module(
    hsa: &Arc<Hsa>,
    agent: sys::hsa_agent_t,
    code: Vec<u8>,
    lowered: Vec<(String, String)>,
) -> Result<LoadedModule> {
    let mut exe = Executable {
        hsa: Arc::clone(hsa),
        executable: None,
        reader: None,
        code: code.into(),
    };
    // SAFETY: the bytes live in `exe.code` until after the reader is destroyed (Drop order).
    let reader = unsafe { hsa.code_object_reader_create_from_memory(&exe.code) }?;
    exe.reader = Some(reader);
    // SAFETY: HSA_AGENT_INFO_PROFILE is an hsa_profile_t (u32 enum).
    let profile: u32 = unsafe { hsa.agent_get_info(agent, sys::HSA_AGENT_INFO_PROFILE, 0u32) }?;
    let executable =
        hsa.executable_create_alt(profile, sys::HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT)?;
    exe.executable = Some(executable);
    // SAFETY: the executable is new (not frozen) and the reader live.
    unsafe { hsa.executable_load_agent_code_object(executable, agent, reader) }?;
    // SAFETY: live executable.
    unsafe { hsa.executable_freeze(executable) }?;
    Ok(LoadedModule {
        executable: Arc::new(exe),
        agent,
        lowered,
    })
}

impl LoadedModule {
    fn executable(&self) -> Result<sys::hsa_executable_t> {
        self.executable
            .executable
            .ok_or_else(|| Error::InvalidArgument {
                name: "module",
                reason: "its executable was destroyed".into(),
            })
    }

    /// The name the code object gives the kernel the source calls `entry`; an error listing
    /// the module's kernels when it has none such.
    fn kernel_name(&self, kernel: &str, entry: &str) -> Result<String> {
        let wanted = normalized(entry);
        if let Some((_, lowered)) = self.lowered.iter().find(|(e, _)| normalized(e) == wanted) {
            return Ok(lowered.clone());
        }
        let Some(names) = kernel_names(&self.executable.code) else {
            // No metadata to read: the C name, which the executable checks.
            return Ok(entry.to_string());
        };
        let matching: Vec<&String> = names.iter().filter(|n| is_named(n, entry)).collect();
        match matching[..] {
            [one] => Ok(one.clone()),
            [] => Err(Error::InvalidLaunch {
                kernel: kernel.to_string(),
                reason: format!(
                    "the source has no kernel `{entry}` to launch; its kernels: {} (a template kernel is launched by an instantiation the module is made with: Kernel::from_source(code, \"name<arguments>\") or Module::with_name_expressions)",
                    names
                        .iter()
                        .map(|n| source_name(n))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
            _ => Err(Error::InvalidLaunch {
                kernel: kernel.to_string(),
                reason: format!("`{entry}` is overloaded: give each kernel its own name"),
            }),
        }
    }

    /// The kernel the source calls `entry` (`kernel` names it in errors), ready to dispatch.
    pub fn kernel(&self, hsa: &Hsa, kernel: &str, entry: &str) -> Result<LoadedKernel> {
        let name = self.kernel_name(kernel, entry)?;
        let code = &self.executable.code;
        let abi_version = code_object_abi_version(code);
        let args = kernel_args(code, &name);
        if args.is_none() {
            tracing::warn!(
                entry,
                "no AMDGPU metadata for the kernel in its code object: arguments are laid out by the ABI's rule and hidden ones zeroed"
            );
        }
        let executable = self.executable()?;
        // SAFETY: live, frozen executable.
        let symbol = unsafe {
            hsa.executable_get_symbol_by_name(executable, &format!("{name}.kd"), self.agent)
        }?;
        // Each attribute is read with the C type hsa.h gives it: KERNEL_OBJECT uint64_t, the
        // segment sizes and the kernarg alignment uint32_t.
        // SAFETY: see above; the symbol belongs to the live executable.
        let info = |attribute| unsafe { hsa.executable_symbol_get_info::<u32>(symbol, attribute) };
        // SAFETY: as above.
        let kernel_object: u64 = unsafe {
            hsa.executable_symbol_get_info(symbol, sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT)
        }?;
        let loaded = LoadedKernel {
            entry: entry.to_string(),
            kernel_object,
            kernarg_size: info(sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE)?,
            kernarg_alignment: info(
                sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_ALIGNMENT,
            )?,
            group_size: info(sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE)?,
            private_size: private_segment_size(
                info(sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE)?,
                // SAFETY: as above; DYNAMIC_CALLSTACK is a C `bool` (one byte).
                unsafe {
                    hsa.executable_symbol_get_info::<u8>(
                        symbol,
                        sys::HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_DYNAMIC_CALLSTACK,
                    )
                }? != 0,
            ),
            abi_version,
            explicit: args.as_ref().map(|a| a.explicit.clone()),
            hidden: args.map(|a| a.hidden),
            _executable: Arc::clone(&self.executable),
        };
        tracing::debug!(
            entry,
            kernel_object = format_args!("{:#x}", loaded.kernel_object),
            kernarg = loaded.kernarg_size,
            group = loaded.group_size,
            private = loaded.private_size,
            abi = ?loaded.abi_version,
            "loaded kernel"
        );
        Ok(loaded)
    }

    /// The device address and size of the variable the source calls `name` (`module` names the
    /// module in errors).
    pub fn variable(&self, hsa: &Hsa, module: &str, name: &str) -> Result<(u64, usize)> {
        let symbols = compiled::symbols(&self.executable.code).unwrap_or_default();
        let variables: Vec<&compiled::Symbol> = symbols
            .iter()
            .filter(|s| s.kind == compiled::STT_OBJECT && s.size > 0)
            .collect();
        let Some(found) = variables.iter().find(|s| is_named(&s.name, name)) else {
            let mut known: Vec<String> = variables.iter().map(|s| source_name(&s.name)).collect();
            known.sort_unstable();
            return Err(Error::InvalidArgument {
                name: "symbol",
                reason: format!(
                    "the module `{module}` has no __device__, __constant__ or __managed__ variable `{name}` at file scope; its variables: {}",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            });
        };
        let executable = self.executable()?;
        // SAFETY: live, frozen executable.
        let symbol =
            unsafe { hsa.executable_get_symbol_by_name(executable, &found.name, self.agent) }?;
        // SAFETY: the symbol belongs to the live executable; VARIABLE_ADDRESS is a uint64_t,
        // VARIABLE_SIZE a uint32_t.
        let (address, size) = unsafe {
            (
                hsa.executable_symbol_get_info::<u64>(
                    symbol,
                    sys::HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_ADDRESS,
                )?,
                hsa.executable_symbol_get_info::<u32>(
                    symbol,
                    sys::HSA_EXECUTABLE_SYMBOL_INFO_VARIABLE_SIZE,
                )?,
            )
        };
        Ok((address, size as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::{DYNAMIC_STACK_BYTES, private_segment_size};

    #[test]
    fn a_dynamic_call_stack_adds_the_stack_allowance() {
        assert_eq!(private_segment_size(48, false), 48);
        assert_eq!(private_segment_size(48, true), 48 + DYNAMIC_STACK_BYTES);
        assert_eq!(private_segment_size(0, true), DYNAMIC_STACK_BYTES);
        assert_eq!(private_segment_size(u32::MAX, true), u32::MAX);
    }
}
