//! Bindings for the HSA runtime and the parts of HIP gpu-mem uses.
//!
//! Both come from Debian 12's ROCm 5.2.3 headers (`libhsa-runtime-dev 5.2.3-3`,
//! `libamdhip64-dev 5.2.3-8`), pinned by the SHA-256 of each header file bindgen reads, so a
//! regenerated file can only differ from the committed one when this allowlist changes.
//!
//! The output is *not* bindgen's dynamic-loading struct (its methods panic on a missing symbol).
//! Instead every allowlisted function `f` becomes a function-pointer type `PFN_f`, and a generated
//! macro lists all `(f, PFN_f)` pairs, from which the driver layer builds a table of optional
//! pointers resolved one by one with `libloading`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One set of bindings: headers, allowlist, output file.
struct Target {
    /// Short name used in messages and in the generated macro's name (`hsa`, `hip`, `comgr`).
    name: &'static str,
    /// Where the output is mounted inside its crate (`""` for the root, `"comgr::"`), so the
    /// list macro can name the function-pointer types by absolute path.
    module_path: &'static str,
    /// Debian package providing the headers, with the pinned version.
    package: &'static str,
    /// Header bindgen reads (the others are reached through its `#include`s).
    entry_headers: &'static [&'static str],
    /// Every header the output depends on, with its pinned SHA-256.
    pinned: &'static [(&'static str, &'static str)],
    clang_args: &'static [&'static str],
    functions: &'static [&'static str],
    types: &'static [&'static str],
    vars: &'static [&'static str],
    /// Output, relative to the workspace root.
    output: &'static str,
}

const HSA: Target = Target {
    name: "hsa",
    module_path: "",
    package: "libhsa-runtime-dev 5.2.3-3",
    entry_headers: &["/usr/include/hsa/hsa.h", "/usr/include/hsa/hsa_ext_amd.h"],
    pinned: &[
        (
            "/usr/include/hsa/hsa.h",
            "53c42a7879eca0380582b1f4f162dd4376236813f252fd40922bf7266c5596b8",
        ),
        (
            "/usr/include/hsa/hsa_ext_amd.h",
            "1fe88f36352167e0deff20ebf7999c4cd3ffed68a957d84698ad56b52fde9f4c",
        ),
        (
            "/usr/include/hsa/hsa_ext_image.h",
            "b796099bf6b0f4478f09e14bd61a087d0f2e6c88c1b5efa9b5f45eaba4ecfbc6",
        ),
    ],
    clang_args: &["-I/usr/include/hsa"],
    functions: &[
        // runtime, system and agents
        "hsa_init",
        "hsa_shut_down",
        "hsa_status_string",
        "hsa_system_get_info",
        "hsa_iterate_agents",
        "hsa_agent_get_info",
        // memory pools
        "hsa_amd_agent_iterate_memory_pools",
        "hsa_amd_memory_pool_get_info",
        "hsa_amd_agent_memory_pool_get_info",
        "hsa_amd_memory_pool_allocate",
        "hsa_amd_memory_pool_free",
        "hsa_amd_agents_allow_access",
        // page-locking and registration
        "hsa_amd_memory_lock",
        "hsa_amd_memory_lock_to_pool",
        "hsa_amd_memory_unlock",
        "hsa_memory_register",
        "hsa_memory_deregister",
        // copies, fill, pointer queries
        "hsa_memory_copy",
        "hsa_amd_memory_async_copy",
        "hsa_amd_memory_fill",
        "hsa_amd_pointer_info",
        // inter-process sharing
        "hsa_amd_ipc_memory_create",
        "hsa_amd_ipc_memory_attach",
        "hsa_amd_ipc_memory_detach",
        // signals
        "hsa_signal_create",
        "hsa_amd_signal_create",
        "hsa_signal_destroy",
        "hsa_signal_load_scacquire",
        "hsa_signal_load_relaxed",
        "hsa_signal_store_relaxed",
        "hsa_signal_store_screlease",
        "hsa_signal_silent_store_relaxed",
        "hsa_signal_subtract_screlease",
        "hsa_signal_wait_scacquire",
        "hsa_signal_wait_relaxed",
        "hsa_amd_signal_wait_any",
        "hsa_amd_signal_async_handler",
        // queues
        "hsa_queue_create",
        "hsa_queue_destroy",
        "hsa_queue_add_write_index_scacq_screl",
        "hsa_queue_add_write_index_relaxed",
        "hsa_queue_load_read_index_scacquire",
        "hsa_queue_load_write_index_relaxed",
        "hsa_queue_load_write_index_scacquire",
        // code objects and executables
        "hsa_code_object_reader_create_from_memory",
        "hsa_code_object_reader_destroy",
        "hsa_executable_create_alt",
        "hsa_executable_load_agent_code_object",
        "hsa_executable_freeze",
        "hsa_executable_get_symbol_by_name",
        "hsa_executable_symbol_get_info",
        "hsa_executable_destroy",
        // profiling
        "hsa_amd_profiling_async_copy_enable",
        "hsa_amd_profiling_set_profiler_enabled",
        "hsa_amd_profiling_get_dispatch_time",
        "hsa_amd_profiling_get_async_copy_time",
        "hsa_amd_profiling_convert_tick_to_system_domain",
    ],
    types: &[
        // AQL packets and their header fields
        "hsa_kernel_dispatch_packet_t",
        "hsa_barrier_and_packet_t",
        "hsa_barrier_or_packet_t",
        "hsa_agent_dispatch_packet_t",
        "hsa_packet_type_t",
        "hsa_packet_header_t",
        "hsa_packet_header_width_t",
        "hsa_fence_scope_t",
        "hsa_kernel_dispatch_packet_setup_t",
        "hsa_kernel_dispatch_packet_setup_width_t",
        // enums passed as plain integers to the *_get_info calls
        "hsa_system_info_t",
        "hsa_agent_info_t",
        "hsa_amd_agent_info_t",
        "hsa_device_type_t",
        "hsa_agent_feature_t",
        "hsa_amd_memory_pool_info_t",
        "hsa_amd_agent_memory_pool_info_t",
        "hsa_amd_memory_pool_access_t",
        "hsa_amd_memory_pool_global_flag_t",
        "hsa_amd_segment_t",
        "hsa_executable_symbol_info_t",
        "hsa_symbol_kind_t",
        "hsa_profile_t",
        "hsa_default_float_rounding_mode_t",
        "hsa_amd_signal_attribute_t",
        "hsa_amd_pointer_type_t",
        "hsa_amd_ipc_memory_t",
        "hsa_queue_feature_t",
        "hsa_queue_type_t",
    ],
    vars: &[
        "HSA_STATUS_.*",
        "HSA_AMD_INTERFACE_VERSION_.*",
        "HSA_VERSION_1_0",
    ],
    output: "crates/sys/hsa/src/generated.rs",
};

const HIP: Target = Target {
    name: "hip",
    module_path: "",
    package: "libamdhip64-dev 5.2.3-8",
    entry_headers: &[
        "/usr/include/hip/hip_runtime_api.h",
        "/usr/include/hip/hiprtc.h",
    ],
    pinned: &[
        (
            "/usr/include/hip/hip_runtime_api.h",
            "a04fb7c68adc44761a8993890cded3503976547377af7cc08a3521a094f4264a",
        ),
        (
            "/usr/include/hip/hiprtc.h",
            "3ce936205dcaeb867fa749e5c700d251be2f1f79ef6edb965b7e87199f7d2b42",
        ),
        (
            "/usr/include/hip/hip_version.h",
            "8ce58f685d868562fb1532c4bfcb363581e83513ffcfe5293398196cbf77cf77",
        ),
        (
            "/usr/include/hip/driver_types.h",
            "2a3c9e7a70511599d14342d5d11acfc3a78f1ff1cd7d71d4cdfdca9f89c0106b",
        ),
    ],
    // HIP's headers refuse C without a platform; the AMD platform is the one the library implements.
    clang_args: &["-D__HIP_PLATFORM_AMD__", "-I/usr/include"],
    functions: &[
        // hiprtc
        "hiprtcVersion",
        "hiprtcGetErrorString",
        "hiprtcCreateProgram",
        "hiprtcCompileProgram",
        "hiprtcGetCodeSize",
        "hiprtcGetCode",
        "hiprtcGetProgramLogSize",
        "hiprtcGetProgramLog",
        "hiprtcDestroyProgram",
        "hiprtcAddNameExpression",
        "hiprtcGetLoweredName",
        // HIP runtime: versions, errors, devices
        "hipInit",
        "hipGetDeviceCount",
        "hipDriverGetVersion",
        "hipRuntimeGetVersion",
        "hipGetErrorName",
        "hipGetErrorString",
        // HIP stream and pointer interop
        "hipStreamCreateWithFlags",
        "hipStreamDestroy",
        "hipStreamSynchronize",
        "hipHostGetDevicePointer",
        "hipPointerGetAttributes",
    ],
    types: &["hipMemoryType", "hipPointerAttribute_t"],
    vars: &["HIP_VERSION.*", "hipStreamDefault", "hipStreamNonBlocking"],
    output: "crates/sys/hip/src/generated.rs",
};

/// The code object manager hiprtc compiles through (`libamd_comgr.so.2`), for its list of
/// supported ISAs: hiprtc 5.2.3 aborts the process when asked for an ISA comgr does not know,
/// so the compiler asks comgr first.
const COMGR: Target = Target {
    name: "comgr",
    module_path: "comgr::",
    package: "libamd-comgr-dev 5.2.3-2",
    entry_headers: &["/usr/include/amd_comgr.h"],
    pinned: &[(
        "/usr/include/amd_comgr.h",
        "17e76a21018bd29ca3c51e5e0b35781af7f842aa006f3e36d5fac9516aec5f83",
    )],
    clang_args: &[],
    functions: &[
        "amd_comgr_get_version",
        "amd_comgr_status_string",
        "amd_comgr_get_isa_count",
        "amd_comgr_get_isa_name",
    ],
    types: &[],
    vars: &["AMD_COMGR_STATUS_.*"],
    output: "crates/sys/hip/src/comgr.rs",
};

/// `cargo xtask bindgen hsa [--check]`.
pub fn run_hsa(check: bool) -> Result<(), String> {
    run(&HSA, check)
}

/// `cargo xtask bindgen hip [--check]`.
pub fn run_hip(check: bool) -> Result<(), String> {
    run(&HIP, check)?;
    run(&COMGR, check)
}

fn run(target: &Target, check: bool) -> Result<(), String> {
    verify_pinned_headers(target)?;
    let text = generate(target)?;
    let output = workspace_root()?.join(target.output);
    if check {
        let committed = std::fs::read_to_string(&output)
            .map_err(|e| format!("cannot read committed {}: {e}", output.display()))?;
        let temp = std::env::temp_dir().join(format!("gpu-mem-{}-bindgen-check.rs", target.name));
        std::fs::write(&temp, &text)
            .map_err(|e| format!("cannot write {}: {e}", temp.display()))?;
        if committed != text {
            let diff = Command::new("diff")
                .arg("-u")
                .arg(&output)
                .arg(&temp)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_else(|e| format!("(diff unavailable: {e})"));
            return Err(format!(
                "{} differs from freshly generated bindings (written to {}); run `cargo xtask bindgen {}`\n{diff}",
                output.display(),
                temp.display(),
                target.name
            ));
        }
        println!("{}: up to date ({} bytes)", output.display(), text.len());
    } else {
        if let Some(dir) = output.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(&output, &text)
            .map_err(|e| format!("cannot write {}: {e}", output.display()))?;
        println!("wrote {} ({} bytes)", output.display(), text.len());
    }
    Ok(())
}

/// The checkout xtask was built from (as its other commands find it): the binary the tests
/// built runs without cargo around it.
fn workspace_root() -> Result<PathBuf, String> {
    let manifest = env!("CARGO_MANIFEST_DIR");
    Path::new(manifest)
        .parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("{manifest} has no parent directory"))
}

/// Fails unless every pinned header exists with its pinned content.
fn verify_pinned_headers(target: &Target) -> Result<(), String> {
    let install = format!(
        "install {} (`.ci/install-rocm-parts.sh --bindgen` as root on Debian 12)",
        target.package
    );
    for (path, expected) in target.pinned {
        if !Path::new(path).exists() {
            return Err(format!("pinned header {path} is not installed; {install}"));
        }
        let found = sha256(path)?;
        if found != *expected {
            return Err(format!(
                "{path} is not the pinned version (sha256 {found}, expected {expected}); {install}"
            ));
        }
    }
    Ok(())
}

fn sha256(path: &str) -> Result<String, String> {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .map_err(|e| format!("cannot run sha256sum: {e}"))?;
    if !out.status.success() {
        return Err(format!("sha256sum {path} failed"));
    }
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .map(str::to_string)
        .ok_or_else(|| format!("sha256sum {path}: empty output"))
}

/// Runs bindgen and turns its extern declarations into function-pointer types plus the list macro.
fn generate(target: &Target) -> Result<String, String> {
    let mut wrapper = String::new();
    for header in target.entry_headers {
        let _ = writeln!(wrapper, "#include \"{header}\"");
    }
    let mut builder = bindgen::Builder::default()
        .header_contents("gpu_mem_wrapper.h", &wrapper)
        .clang_args(target.clang_args)
        // Plain integer constants: a status returned by the library may be a value the header
        // did not know, which would be undefined behaviour for a Rust enum.
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .layout_tests(true)
        .derive_default(true)
        .derive_debug(true)
        .generate_comments(true)
        .formatter(bindgen::Formatter::Rustfmt)
        .use_core()
        .allowlist_recursively(true);
    for f in target.functions {
        builder = builder.allowlist_function(format!("^{f}$"));
    }
    for t in target.types {
        builder = builder.allowlist_type(format!("^{t}$"));
    }
    for v in target.vars {
        builder = builder.allowlist_var(format!("^{v}$"));
    }
    let bindings = builder
        .generate()
        .map_err(|e| format!("bindgen failed for {}: {e}", target.name))?;
    let raw = bindings.to_string();
    let (body, names) = externs_to_pointer_types(&raw)?;
    let missing: Vec<&&str> = target
        .functions
        .iter()
        .filter(|f| !names.iter().any(|n| n == **f))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "{}: allowlisted functions not found in the headers: {missing:?}",
            target.name
        ));
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// Generated by `cargo xtask bindgen {}` from {}; do not edit.\n",
        target.name, target.package
    );
    out.push_str(&body);
    out.push('\n');
    let _ = writeln!(
        out,
        "/// Names of all functions declared above, in allowlist order."
    );
    let _ = writeln!(out, "pub const FUNCTION_NAMES: &[&str] = &[");
    for f in target.functions {
        let _ = writeln!(out, "\"{f}\",");
    }
    out.push_str("];\n\n");
    let _ = writeln!(
        out,
        "/// Calls `$callback!` (a macro name in scope at the call site) once with every function as `name: PFN_name,` so the driver layer can\n\
         /// build its table of optional function pointers without restating any signature."
    );
    let _ = writeln!(out, "#[macro_export]");
    let _ = writeln!(out, "macro_rules! gpu_mem_{}_sys_functions {{", target.name);
    out.push_str("($callback:ident) => { $callback! {\n");
    for f in target.functions {
        let _ = writeln!(out, "{f}: $crate::{}PFN_{f},", target.module_path);
    }
    out.push_str("} };\n}\n");
    rustfmt(&out, &workspace_root()?.join("rustfmt.toml"))
}

/// Rewrites every `extern "C" { pub fn f(..) -> R; }` of bindgen's (rustfmt-formatted) output as
/// `pub type PFN_f = unsafe extern "C" fn(..) -> R;` and returns the function names found.
fn externs_to_pointer_types(raw: &str) -> Result<(String, Vec<String>), String> {
    let mut out = String::with_capacity(raw.len());
    let mut names = Vec::new();
    let mut in_extern = false;
    for line in raw.lines() {
        let trimmed = line.trim();
        if !in_extern && (trimmed == "unsafe extern \"C\" {" || trimmed == "extern \"C\" {") {
            in_extern = true;
            continue;
        }
        if in_extern && line == "}" {
            in_extern = false;
            continue;
        }
        if in_extern {
            if let Some(rest) = trimmed.strip_prefix("pub fn ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let after = &rest[name.len()..];
                if !after.starts_with('(') {
                    return Err(format!("unexpected extern declaration: {line}"));
                }
                let _ = writeln!(out, "pub type PFN_{name} = unsafe extern \"C\" fn{after}");
                names.push(name);
            } else if trimmed.starts_with("pub static") {
                return Err(format!("extern statics are not supported: {line}"));
            } else {
                out.push_str(line);
                out.push('\n');
            }
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if in_extern {
        return Err("unterminated extern block in bindgen output".into());
    }
    Ok((out, names))
}

/// Formats with the workspace's rustfmt settings whatever directory xtask runs from, so `--check`
/// compares like with like.
fn rustfmt(text: &str, config: &Path) -> Result<String, String> {
    use std::io::Write as _;
    let mut command = Command::new("rustfmt");
    command.args(["--edition", "2024", "--emit", "stdout"]);
    if config.exists() {
        command.arg("--config-path").arg(config);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run rustfmt (needed to format bindings): {e}"))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| "rustfmt stdin unavailable".to_string())?;
    let input = text.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("rustfmt failed: {e}"))?;
    writer
        .join()
        .map_err(|_| "rustfmt writer thread failed".to_string())?
        .map_err(|e| format!("cannot feed rustfmt: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "rustfmt rejected the generated bindings: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("rustfmt output is not UTF-8: {e}"))
}
