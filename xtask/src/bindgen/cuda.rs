//! Bindings for the CUDA driver API (`cuda.h` + `cudaTypedefs.h`) and NVRTC (`nvrtc.h`).
//!
//! Writes four files into `crates/sys/cuda/src/generated/`:
//!
//! * `driver.rs` — bindgen output: the driver API types and constants, and one `PFN_*`
//!   function-pointer type per bound call. The `PFN_` types come from `cudaTypedefs.h`, which
//!   names every signature by the driver version that introduced it
//!   (`PFN_cuEventElapsedTime_v2000` vs. `_v12080`), so the binding can pick the versions a wide
//!   range of drivers export instead of the ones `cuda.h`'s macros select.
//! * `driver_symbols.rs` — a `macro_rules!` table (field, `PFN_` type, exported names, minimum
//!   driver) from [`DRIVER_SYMBOLS`]; the driver layer expands it into its `Option<fn>` table.
//! * `nvrtc.rs` / `nvrtc_symbols.rs` — the same for NVRTC. `nvrtc.h` has no typedef header, so
//!   bindgen's function declarations are rewritten into `PFN_nvrtcX` pointer types.
//!
//! Headers are read from `GPU_MEM_CUDA_INCLUDE`, else from where `.ci/install-cuda-parts.sh`
//! installs the pinned wheels. Nothing is downloaded here.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// `CUDA_VERSION` of the pinned `cuda.h` (wheel `nvidia-cuda-runtime==13.5.37`).
const PINNED_CUDA_VERSION: u32 = 13050;

/// One native function bound at run time.
pub(super) struct Symbol {
    /// Field name in the driver layer's table (the API name without version suffix).
    pub(super) field: &'static str,
    /// The function-pointer type generated for it.
    pub(super) pfn: &'static str,
    /// Exported names to try, in order.
    pub(super) exported: &'static [&'static str],
    /// The oldest driver (CUDA version) or NVRTC release that exports the first name.
    pub(super) since: &'static str,
}

pub(super) const fn sym(
    field: &'static str,
    pfn: &'static str,
    exported: &'static [&'static str],
    since: &'static str,
) -> Symbol {
    Symbol {
        field,
        pfn,
        exported,
        since,
    }
}

/// The driver API calls a memory HAL needs, with the symbol version that the widest range of
/// drivers export. `cuda.h` 13.x would map `cuEventElapsedTime` to `cuEventElapsedTime_v2`
/// (12.8+) and `cuDevicePrimaryCtxRelease` to `_v2` (11.0+); the tables below bind the older
/// exports instead (or try them as a fallback), because their behaviour is the same for the
/// calls gpu-mem makes.
const DRIVER_SYMBOLS: &[Symbol] = &[
    sym(
        "cuGetErrorName",
        "PFN_cuGetErrorName_v6000",
        &["cuGetErrorName"],
        "6.0",
    ),
    sym(
        "cuGetErrorString",
        "PFN_cuGetErrorString_v6000",
        &["cuGetErrorString"],
        "6.0",
    ),
    sym("cuInit", "PFN_cuInit_v2000", &["cuInit"], "2.0"),
    sym(
        "cuDriverGetVersion",
        "PFN_cuDriverGetVersion_v2020",
        &["cuDriverGetVersion"],
        "2.2",
    ),
    sym(
        "cuDeviceGetCount",
        "PFN_cuDeviceGetCount_v2000",
        &["cuDeviceGetCount"],
        "2.0",
    ),
    sym(
        "cuDeviceGet",
        "PFN_cuDeviceGet_v2000",
        &["cuDeviceGet"],
        "2.0",
    ),
    sym(
        "cuDeviceGetAttribute",
        "PFN_cuDeviceGetAttribute_v2000",
        &["cuDeviceGetAttribute"],
        "2.0",
    ),
    sym(
        "cuDeviceGetName",
        "PFN_cuDeviceGetName_v2000",
        &["cuDeviceGetName"],
        "2.0",
    ),
    sym(
        "cuDeviceTotalMem",
        "PFN_cuDeviceTotalMem_v3020",
        &["cuDeviceTotalMem_v2"],
        "3.2",
    ),
    sym(
        "cuDevicePrimaryCtxRetain",
        "PFN_cuDevicePrimaryCtxRetain_v7000",
        &["cuDevicePrimaryCtxRetain"],
        "7.0",
    ),
    sym(
        "cuDevicePrimaryCtxRelease",
        "PFN_cuDevicePrimaryCtxRelease_v11000",
        &["cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"],
        "11.0 (falls back to the 7.0 export)",
    ),
    sym(
        "cuCtxSetCurrent",
        "PFN_cuCtxSetCurrent_v4000",
        &["cuCtxSetCurrent"],
        "4.0",
    ),
    sym(
        "cuCtxGetCurrent",
        "PFN_cuCtxGetCurrent_v4000",
        &["cuCtxGetCurrent"],
        "4.0",
    ),
    sym(
        "cuCtxSynchronize",
        "PFN_cuCtxSynchronize_v2000",
        &["cuCtxSynchronize"],
        "2.0",
    ),
    sym(
        "cuMemGetInfo",
        "PFN_cuMemGetInfo_v3020",
        &["cuMemGetInfo_v2"],
        "3.2",
    ),
    sym(
        "cuMemAlloc",
        "PFN_cuMemAlloc_v3020",
        &["cuMemAlloc_v2"],
        "3.2",
    ),
    sym("cuMemFree", "PFN_cuMemFree_v3020", &["cuMemFree_v2"], "3.2"),
    // The real extent of a mapping (an IPC handle's size is not to be trusted).
    sym(
        "cuMemGetAddressRange",
        "PFN_cuMemGetAddressRange_v3020",
        &["cuMemGetAddressRange_v2"],
        "3.2",
    ),
    sym(
        "cuMemAllocAsync",
        "PFN_cuMemAllocAsync_v11020",
        &["cuMemAllocAsync"],
        "11.2",
    ),
    sym(
        "cuMemFreeAsync",
        "PFN_cuMemFreeAsync_v11020",
        &["cuMemFreeAsync"],
        "11.2",
    ),
    sym(
        "cuMemcpyHtoD",
        "PFN_cuMemcpyHtoD_v3020",
        &["cuMemcpyHtoD_v2"],
        "3.2",
    ),
    sym(
        "cuMemcpyDtoH",
        "PFN_cuMemcpyDtoH_v3020",
        &["cuMemcpyDtoH_v2"],
        "3.2",
    ),
    sym(
        "cuMemcpyDtoD",
        "PFN_cuMemcpyDtoD_v3020",
        &["cuMemcpyDtoD_v2"],
        "3.2",
    ),
    sym(
        "cuMemcpyHtoDAsync",
        "PFN_cuMemcpyHtoDAsync_v3020",
        &["cuMemcpyHtoDAsync_v2"],
        "3.2",
    ),
    sym(
        "cuMemcpyDtoHAsync",
        "PFN_cuMemcpyDtoHAsync_v3020",
        &["cuMemcpyDtoHAsync_v2"],
        "3.2",
    ),
    sym(
        "cuMemcpyDtoDAsync",
        "PFN_cuMemcpyDtoDAsync_v3020",
        &["cuMemcpyDtoDAsync_v2"],
        "3.2",
    ),
    sym(
        "cuMemsetD8",
        "PFN_cuMemsetD8_v3020",
        &["cuMemsetD8_v2"],
        "3.2",
    ),
    sym(
        "cuMemsetD32",
        "PFN_cuMemsetD32_v3020",
        &["cuMemsetD32_v2"],
        "3.2",
    ),
    sym(
        "cuMemsetD8Async",
        "PFN_cuMemsetD8Async_v3020",
        &["cuMemsetD8Async"],
        "3.2",
    ),
    sym(
        "cuMemsetD32Async",
        "PFN_cuMemsetD32Async_v3020",
        &["cuMemsetD32Async"],
        "3.2",
    ),
    sym(
        "cuMemHostAlloc",
        "PFN_cuMemHostAlloc_v2020",
        &["cuMemHostAlloc"],
        "2.2",
    ),
    sym(
        "cuMemFreeHost",
        "PFN_cuMemFreeHost_v2000",
        &["cuMemFreeHost"],
        "2.0",
    ),
    sym(
        "cuMemHostRegister",
        "PFN_cuMemHostRegister_v6050",
        &["cuMemHostRegister_v2"],
        "6.5",
    ),
    sym(
        "cuMemHostUnregister",
        "PFN_cuMemHostUnregister_v4000",
        &["cuMemHostUnregister"],
        "4.0",
    ),
    sym(
        "cuMemHostGetDevicePointer",
        "PFN_cuMemHostGetDevicePointer_v3020",
        &["cuMemHostGetDevicePointer_v2"],
        "3.2",
    ),
    sym(
        "cuStreamCreate",
        "PFN_cuStreamCreate_v2000",
        &["cuStreamCreate"],
        "2.0",
    ),
    sym(
        "cuStreamDestroy",
        "PFN_cuStreamDestroy_v4000",
        &["cuStreamDestroy_v2"],
        "4.0",
    ),
    sym(
        "cuStreamSynchronize",
        "PFN_cuStreamSynchronize_v2000",
        &["cuStreamSynchronize"],
        "2.0",
    ),
    sym(
        "cuStreamQuery",
        "PFN_cuStreamQuery_v2000",
        &["cuStreamQuery"],
        "2.0",
    ),
    sym(
        "cuStreamWaitEvent",
        "PFN_cuStreamWaitEvent_v3020",
        &["cuStreamWaitEvent"],
        "3.2",
    ),
    sym(
        "cuEventCreate",
        "PFN_cuEventCreate_v2000",
        &["cuEventCreate"],
        "2.0",
    ),
    sym(
        "cuEventDestroy",
        "PFN_cuEventDestroy_v4000",
        &["cuEventDestroy_v2"],
        "4.0",
    ),
    sym(
        "cuEventRecord",
        "PFN_cuEventRecord_v2000",
        &["cuEventRecord"],
        "2.0",
    ),
    sym(
        "cuEventQuery",
        "PFN_cuEventQuery_v2000",
        &["cuEventQuery"],
        "2.0",
    ),
    sym(
        "cuEventSynchronize",
        "PFN_cuEventSynchronize_v2000",
        &["cuEventSynchronize"],
        "2.0",
    ),
    sym(
        "cuEventElapsedTime",
        "PFN_cuEventElapsedTime_v2000",
        &["cuEventElapsedTime"],
        "2.0",
    ),
    sym(
        "cuModuleLoadData",
        "PFN_cuModuleLoadData_v2000",
        &["cuModuleLoadData"],
        "2.0",
    ),
    sym(
        "cuModuleGetFunction",
        "PFN_cuModuleGetFunction_v2000",
        &["cuModuleGetFunction"],
        "2.0",
    ),
    sym(
        "cuModuleGetGlobal",
        "PFN_cuModuleGetGlobal_v3020",
        &["cuModuleGetGlobal_v2"],
        "3.2",
    ),
    sym(
        "cuModuleUnload",
        "PFN_cuModuleUnload_v2000",
        &["cuModuleUnload"],
        "2.0",
    ),
    sym(
        "cuLaunchKernel",
        "PFN_cuLaunchKernel_v4000",
        &["cuLaunchKernel"],
        "4.0",
    ),
    sym(
        "cuLaunchCooperativeKernel",
        "PFN_cuLaunchCooperativeKernel_v9000",
        &["cuLaunchCooperativeKernel"],
        "9.0",
    ),
    sym(
        "cuFuncSetAttribute",
        "PFN_cuFuncSetAttribute_v9000",
        &["cuFuncSetAttribute"],
        "9.0",
    ),
    sym(
        "cuFuncGetAttribute",
        "PFN_cuFuncGetAttribute_v2020",
        &["cuFuncGetAttribute"],
        "2.2",
    ),
    sym(
        "cuFuncGetParamInfo",
        "PFN_cuFuncGetParamInfo_v12040",
        &["cuFuncGetParamInfo"],
        "12.4",
    ),
    sym(
        "cuModuleLoadDataEx",
        "PFN_cuModuleLoadDataEx_v2010",
        &["cuModuleLoadDataEx"],
        "2.1",
    ),
    sym(
        "cuDevicePrimaryCtxReset",
        "PFN_cuDevicePrimaryCtxReset_v11000",
        &["cuDevicePrimaryCtxReset_v2", "cuDevicePrimaryCtxReset"],
        "11.0 (falls back to the 7.0 export)",
    ),
    // Several devices (peer access and copies).
    sym(
        "cuDeviceCanAccessPeer",
        "PFN_cuDeviceCanAccessPeer_v4000",
        &["cuDeviceCanAccessPeer"],
        "4.0",
    ),
    sym(
        "cuCtxEnablePeerAccess",
        "PFN_cuCtxEnablePeerAccess_v4000",
        &["cuCtxEnablePeerAccess"],
        "4.0",
    ),
    sym(
        "cuMemcpyPeer",
        "PFN_cuMemcpyPeer_v4000",
        &["cuMemcpyPeer"],
        "4.0",
    ),
    sym(
        "cuMemcpyPeerAsync",
        "PFN_cuMemcpyPeerAsync_v4000",
        &["cuMemcpyPeerAsync"],
        "4.0",
    ),
    // Managed memory.
    sym(
        "cuMemAllocManaged",
        "PFN_cuMemAllocManaged_v6000",
        &["cuMemAllocManaged"],
        "6.0",
    ),
    // Managed-memory hints: the 12.2 signatures with a `CUmemLocation`, which `cuda.h` 13.x
    // selects (`cuMemPrefetchAsync_v2`, `cuMemAdvise_v2`). The 8.0 exports take a `CUdevice`
    // instead, a different signature: no fallback to them, so an older driver has no hints.
    sym(
        "cuMemPrefetchAsync",
        "PFN_cuMemPrefetchAsync_v12020",
        &["cuMemPrefetchAsync_v2"],
        "12.2",
    ),
    sym(
        "cuMemAdvise",
        "PFN_cuMemAdvise_v12020",
        &["cuMemAdvise_v2"],
        "12.2",
    ),
    // The device's default memory pool.
    sym(
        "cuDeviceGetDefaultMemPool",
        "PFN_cuDeviceGetDefaultMemPool_v11020",
        &["cuDeviceGetDefaultMemPool"],
        "11.2",
    ),
    sym(
        "cuMemPoolGetAttribute",
        "PFN_cuMemPoolGetAttribute_v11020",
        &["cuMemPoolGetAttribute"],
        "11.2",
    ),
    sym(
        "cuMemPoolSetAttribute",
        "PFN_cuMemPoolSetAttribute_v11020",
        &["cuMemPoolSetAttribute"],
        "11.2",
    ),
    sym(
        "cuMemPoolTrimTo",
        "PFN_cuMemPoolTrimTo_v11020",
        &["cuMemPoolTrimTo"],
        "11.2",
    ),
    // Peer access to pool memory (cuCtxEnablePeerAccess does not cover memory pools).
    sym(
        "cuMemPoolSetAccess",
        "PFN_cuMemPoolSetAccess_v11020",
        &["cuMemPoolSetAccess"],
        "11.2",
    ),
    // Inter-process sharing. `cuIpcOpenMemHandle_v2` (11.0) and the 4.1 export take the same
    // arguments.
    sym(
        "cuIpcGetMemHandle",
        "PFN_cuIpcGetMemHandle_v4010",
        &["cuIpcGetMemHandle"],
        "4.1",
    ),
    sym(
        "cuIpcOpenMemHandle",
        "PFN_cuIpcOpenMemHandle_v11000",
        &["cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle"],
        "11.0 (falls back to the 4.1 export)",
    ),
    sym(
        "cuIpcCloseMemHandle",
        "PFN_cuIpcCloseMemHandle_v4010",
        &["cuIpcCloseMemHandle"],
        "4.1",
    ),
];

/// Driver API types and constants bound besides what the `PFN_` types pull in.
const DRIVER_TYPES: &[&str] = &[
    "CUdevice_attribute",
    "CUstream_flags",
    "CUevent_flags",
    "CUfunction_attribute",
    "CUjit_option",
    "CUmemPool_attribute",
    "CUmemAttach_flags",
    "CUipcMem_flags",
];
const DRIVER_VARS: &[&str] = &[
    "CUDA_VERSION",
    "CU_MEMHOSTALLOC_.*",
    "CU_MEMHOSTREGISTER_.*",
    "CU_IPC_HANDLE_SIZE",
];

/// NVRTC calls gpu-mem uses (NVRTC has no versioned exports).
const NVRTC_SYMBOLS: &[Symbol] = &[
    sym(
        "nvrtcGetErrorString",
        "PFN_nvrtcGetErrorString",
        &["nvrtcGetErrorString"],
        "7.0",
    ),
    sym("nvrtcVersion", "PFN_nvrtcVersion", &["nvrtcVersion"], "7.0"),
    sym(
        "nvrtcGetNumSupportedArchs",
        "PFN_nvrtcGetNumSupportedArchs",
        &["nvrtcGetNumSupportedArchs"],
        "11.2",
    ),
    sym(
        "nvrtcGetSupportedArchs",
        "PFN_nvrtcGetSupportedArchs",
        &["nvrtcGetSupportedArchs"],
        "11.2",
    ),
    sym(
        "nvrtcCreateProgram",
        "PFN_nvrtcCreateProgram",
        &["nvrtcCreateProgram"],
        "7.0",
    ),
    sym(
        "nvrtcDestroyProgram",
        "PFN_nvrtcDestroyProgram",
        &["nvrtcDestroyProgram"],
        "7.0",
    ),
    sym(
        "nvrtcCompileProgram",
        "PFN_nvrtcCompileProgram",
        &["nvrtcCompileProgram"],
        "7.0",
    ),
    sym(
        "nvrtcGetProgramLogSize",
        "PFN_nvrtcGetProgramLogSize",
        &["nvrtcGetProgramLogSize"],
        "7.0",
    ),
    sym(
        "nvrtcGetProgramLog",
        "PFN_nvrtcGetProgramLog",
        &["nvrtcGetProgramLog"],
        "7.0",
    ),
    sym(
        "nvrtcGetPTXSize",
        "PFN_nvrtcGetPTXSize",
        &["nvrtcGetPTXSize"],
        "7.0",
    ),
    sym("nvrtcGetPTX", "PFN_nvrtcGetPTX", &["nvrtcGetPTX"], "7.0"),
    sym(
        "nvrtcAddNameExpression",
        "PFN_nvrtcAddNameExpression",
        &["nvrtcAddNameExpression"],
        "8.0",
    ),
    sym(
        "nvrtcGetLoweredName",
        "PFN_nvrtcGetLoweredName",
        &["nvrtcGetLoweredName"],
        "8.0",
    ),
    sym(
        "nvrtcGetCUBINSize",
        "PFN_nvrtcGetCUBINSize",
        &["nvrtcGetCUBINSize"],
        "11.1",
    ),
    sym(
        "nvrtcGetCUBIN",
        "PFN_nvrtcGetCUBIN",
        &["nvrtcGetCUBIN"],
        "11.1",
    ),
];

/// Where the generated files live, relative to the workspace root.
const OUT_DIR: &str = "crates/sys/cuda/src/generated";

/// Runs `cargo xtask bindgen cuda [--check]`.
pub fn run(check: bool) -> Result<(), String> {
    let include = find_include_dir()?;
    check_pinned_version(&include)?;
    let files = generate(&include)?;
    let out_dir = workspace_root().join(OUT_DIR);
    if check {
        let mut stale = Vec::new();
        for (name, text) in &files {
            let path = out_dir.join(name);
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            if committed != *text {
                stale.push(format!(
                    "{} ({})",
                    path.display(),
                    first_difference(&committed, text)
                ));
            }
        }
        if stale.is_empty() {
            println!("cuda bindings are up to date ({} files)", files.len());
            Ok(())
        } else {
            Err(format!(
                "cuda bindings differ from a fresh generation; run `cargo xtask bindgen cuda`:\n  {}",
                stale.join("\n  ")
            ))
        }
    } else {
        std::fs::create_dir_all(&out_dir)
            .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
        for (name, text) in &files {
            let path = out_dir.join(name);
            std::fs::write(&path, text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            println!("wrote {} ({} bytes)", path.display(), text.len());
        }
        Ok(())
    }
}

pub(super) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The header directory: `GPU_MEM_CUDA_INCLUDE`, else the install script's location.
pub(super) fn find_include_dir() -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    if let Some(dir) = std::env::var_os("GPU_MEM_CUDA_INCLUDE") {
        let dir = PathBuf::from(dir);
        if dir.join("cuda.h").is_file() {
            return Ok(dir);
        }
        tried.push(format!("{} (GPU_MEM_CUDA_INCLUDE)", dir.display()));
    }
    let prefix = std::env::var_os("GPU_MEM_CUDA_WHEELS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/gpu-mem/cuda-wheels"))
        });
    if let Some(prefix) = prefix {
        let dir = prefix.join("nvidia/cu13/include");
        if dir.join("cuda.h").is_file() {
            return Ok(dir);
        }
        tried.push(dir.display().to_string());
    }
    Err(format!(
        "the pinned CUDA headers (cuda.h, cudaTypedefs.h, nvrtc.h) are not installed; tried: {}. \
         Run `.ci/install-cuda-parts.sh` or set GPU_MEM_CUDA_INCLUDE",
        tried.join(", ")
    ))
}

fn check_pinned_version(include: &Path) -> Result<(), String> {
    let cuda_h = include.join("cuda.h");
    let text = std::fs::read_to_string(&cuda_h)
        .map_err(|e| format!("cannot read {}: {e}", cuda_h.display()))?;
    let version = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("#define CUDA_VERSION"))
        .and_then(|v| v.trim().parse::<u32>().ok())
        .ok_or_else(|| format!("no CUDA_VERSION in {}", cuda_h.display()))?;
    if version != PINNED_CUDA_VERSION {
        return Err(format!(
            "{} has CUDA_VERSION {version}, the bindings are pinned to {PINNED_CUDA_VERSION}",
            cuda_h.display()
        ));
    }
    for needed in ["cudaTypedefs.h", "nvrtc.h"] {
        if !include.join(needed).is_file() {
            return Err(format!("{needed} is missing from {}", include.display()));
        }
    }
    Ok(())
}

const BANNER: &str = "// Generated by `cargo xtask bindgen cuda` from the pinned CUDA 13.5 headers\n\
                      // (CUDA_VERSION 13050, wheels nvidia-cuda-runtime / nvidia-cuda-nvrtc 13.5.37).\n\
                      // Do not edit by hand.\n\n";

/// Generates every file: `(file name, contents)`.
fn generate(include: &Path) -> Result<Vec<(&'static str, String)>, String> {
    let driver = bindgen_driver(include)?;
    ensure_all_present(&driver, DRIVER_SYMBOLS, "driver.rs")?;
    let nvrtc = bindgen_nvrtc(include)?;
    ensure_all_present(&nvrtc, NVRTC_SYMBOLS, "nvrtc.rs")?;
    Ok(vec![
        ("driver.rs", format!("{BANNER}{driver}")),
        (
            "driver_symbols.rs",
            symbol_table("driver", "cuda_driver_symbols", DRIVER_SYMBOLS),
        ),
        ("nvrtc.rs", format!("{BANNER}{nvrtc}")),
        (
            "nvrtc_symbols.rs",
            symbol_table("nvrtc", "cuda_nvrtc_symbols", NVRTC_SYMBOLS),
        ),
    ])
}

pub(super) fn base_builder(include: &Path, header: String) -> bindgen::Builder {
    bindgen::Builder::default()
        .header_contents("gpu_mem_cuda_wrapper.h", &header)
        .clang_arg(format!("-I{}", include.display()))
        .clang_arg("-xc")
        .use_core()
        .default_enum_style(bindgen::EnumVariation::NewType {
            is_bitfield: false,
            is_global: false,
        })
        .prepend_enum_name(false)
        .derive_debug(true)
        .derive_default(false)
        .generate_comments(true)
        .layout_tests(true)
        .formatter(bindgen::Formatter::Prettyplease)
}

fn bindgen_driver(include: &Path) -> Result<String, String> {
    let mut builder = base_builder(include, "#include <cudaTypedefs.h>\n".to_string());
    for s in DRIVER_SYMBOLS {
        builder = builder.allowlist_type(s.pfn);
    }
    for t in DRIVER_TYPES {
        builder = builder.allowlist_type(t);
    }
    for v in DRIVER_VARS {
        builder = builder.allowlist_var(v);
    }
    builder
        .generate()
        .map(|b| b.to_string())
        .map_err(|e| format!("bindgen failed on cuda.h / cudaTypedefs.h: {e}"))
}

fn bindgen_nvrtc(include: &Path) -> Result<String, String> {
    let mut builder = base_builder(include, "#include <nvrtc.h>\n".to_string());
    for s in NVRTC_SYMBOLS {
        builder = builder.allowlist_function(s.field);
    }
    let text = builder
        .allowlist_type("nvrtcResult")
        .generate_comments(false)
        .merge_extern_blocks(true)
        .generate()
        .map(|b| b.to_string())
        .map_err(|e| format!("bindgen failed on nvrtc.h: {e}"))?;
    functions_to_pointer_types(&text)
}

/// Rewrites bindgen's `extern "C" { pub fn nvrtcX(args) -> R; }` block into
/// `pub type PFN_nvrtcX = Option<unsafe extern "C" fn(args) -> R>;` items, so that NVRTC, which
/// has no typedef header, is loaded the same way as the driver. Parameter names and `size_t`
/// (as `usize`) are kept from the declarations.
pub(super) fn functions_to_pointer_types(text: &str) -> Result<String, String> {
    let start = text
        .find("unsafe extern \"C\" {")
        .ok_or("bindgen produced no extern block for nvrtc.h")?;
    let body_start = start + "unsafe extern \"C\" {".len();
    let body_end = matching_close(text, body_start - 1, '{', '}')
        .ok_or("unbalanced extern block in the nvrtc bindings")?;
    let body = &text[body_start..body_end];
    let mut types = String::new();
    let mut rest = body;
    while let Some(at) = rest.find("pub fn ") {
        let item = &rest[at + "pub fn ".len()..];
        let open = item
            .find('(')
            .ok_or("malformed function in the nvrtc bindings")?;
        let name = item[..open].trim();
        let close = matching_close(item, open, '(', ')')
            .ok_or("unbalanced parameters in the nvrtc bindings")?;
        let semi = item[close..]
            .find(';')
            .ok_or("function without `;` in the nvrtc bindings")?;
        let params = &item[open..=close];
        let ret = item[close + 1..close + semi].trim();
        let _ = writeln!(
            types,
            "pub type PFN_{name} = ::core::option::Option<unsafe extern \"C\" fn{params} {ret}>;"
        );
        rest = &item[close + semi + 1..];
    }
    let end = body_end + 1;
    Ok(format!("{}{}{}", &text[..start], types, &text[end..]))
}

/// Index of the bracket closing the one at `open` (which must be `open_ch`).
pub(super) fn matching_close(
    text: &str,
    open: usize,
    open_ch: char,
    close_ch: char,
) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text[open..].char_indices() {
        if c == open_ch {
            depth += 1;
        } else if c == close_ch {
            depth = depth.checked_sub(1)?;
            if depth == 0 {
                return Some(open + i);
            }
        }
    }
    None
}

/// bindgen silently skips allowlist entries that match nothing; a renamed typedef must fail.
pub(super) fn ensure_all_present(
    generated: &str,
    symbols: &[Symbol],
    file: &str,
) -> Result<(), String> {
    let missing: Vec<&str> = symbols
        .iter()
        .filter(|s| !generated.contains(&format!("pub type {} =", s.pfn)))
        .map(|s| s.pfn)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the headers do not declare {} (for {file})",
            missing.join(", ")
        ))
    }
}

/// The `macro_rules!` table the driver layer expands into its function-pointer struct.
fn symbol_table(module: &str, macro_name: &str, symbols: &[Symbol]) -> String {
    symbol_table_with(BANNER, module, macro_name, symbols)
}

/// [`symbol_table`] under another banner.
pub(super) fn symbol_table_with(
    banner: &str,
    module: &str,
    macro_name: &str,
    symbols: &[Symbol],
) -> String {
    let mut out = String::from(banner);
    let _ = writeln!(
        out,
        "/// Calls `$m!` with every {module} function gpu-mem binds, one entry per call:\n\
         /// `field: PFN_type = [exported names to try, in order], \"oldest release exporting the first\";`\n\
         ///\n\
         /// | call | exported as | since |\n\
         /// |---|---|---|"
    );
    for s in symbols {
        let _ = writeln!(
            out,
            "/// | `{}` | `{}` | {} |",
            s.field,
            s.exported.join("`, `"),
            s.since
        );
    }
    let _ = writeln!(
        out,
        "#[macro_export]\nmacro_rules! {macro_name} {{\n    ($m:ident) => {{\n        $m! {{"
    );
    for s in symbols {
        let names: Vec<String> = s.exported.iter().map(|n| format!("\"{n}\"")).collect();
        let _ = writeln!(
            out,
            "            {}: $crate::{module}::{} = [{}], \"{}\";",
            s.field,
            s.pfn,
            names.join(", "),
            s.since
        );
    }
    out.push_str("        }\n    };\n}\n");
    out
}

pub(super) fn first_difference(old: &str, new: &str) -> String {
    if old.is_empty() {
        return "missing or empty".to_string();
    }
    for (i, (a, b)) in old.lines().zip(new.lines()).enumerate() {
        if a != b {
            return format!("first difference at line {}", i + 1);
        }
    }
    format!("{} vs. {} lines", old.lines().count(), new.lines().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extern_block_becomes_pointer_types() {
        let text = "pub struct X;\nunsafe extern \"C\" {\n    pub fn nvrtcVersion(\n        major: *mut c_int,\n        minor: *mut c_int,\n    ) -> nvrtcResult;\n    pub fn nvrtcGetPTX(prog: nvrtcProgram, ptx: *mut c_char) -> nvrtcResult;\n}\npub type Y = u8;\n";
        let out = functions_to_pointer_types(text).expect("rewrite");
        assert!(out.starts_with("pub struct X;\n"), "{out}");
        assert!(out.ends_with("\npub type Y = u8;\n"), "{out}");
        assert!(!out.contains("extern \"C\" {"), "{out}");
        assert!(
            out.contains(
                "pub type PFN_nvrtcVersion = ::core::option::Option<unsafe extern \"C\" fn("
            ),
            "{out}"
        );
        assert!(out.contains("major: *mut c_int"), "{out}");
        assert!(out.contains(
            "pub type PFN_nvrtcGetPTX = ::core::option::Option<unsafe extern \"C\" fn(prog: nvrtcProgram, ptx: *mut c_char) -> nvrtcResult>;"
        ), "{out}");
    }

    #[test]
    fn missing_extern_block_is_an_error() {
        assert!(functions_to_pointer_types("pub struct X;").is_err());
    }

    #[test]
    fn symbol_table_lists_every_entry_with_its_exports() {
        let table = symbol_table("driver", "cuda_driver_symbols", DRIVER_SYMBOLS);
        for s in DRIVER_SYMBOLS {
            let names: Vec<String> = s.exported.iter().map(|n| format!("\"{n}\"")).collect();
            let line = format!(
                "{}: $crate::driver::{} = [{}]",
                s.field,
                s.pfn,
                names.join(", ")
            );
            assert!(table.contains(&line), "missing {line}");
        }
        assert!(table.contains("macro_rules! cuda_driver_symbols"));
    }

    #[test]
    fn elapsed_time_is_bound_at_the_cuda_2_export() {
        // cuda.h 13.x maps cuEventElapsedTime to the 12.8-only _v2; the binding must not.
        let entry = DRIVER_SYMBOLS
            .iter()
            .find(|s| s.field == "cuEventElapsedTime")
            .expect("entry");
        assert_eq!(entry.exported, ["cuEventElapsedTime"]);
        assert_eq!(entry.pfn, "PFN_cuEventElapsedTime_v2000");
    }

    #[test]
    fn matching_close_handles_nesting() {
        assert_eq!(matching_close("(a(b)c)", 0, '(', ')'), Some(6));
        assert_eq!(matching_close("(a(b", 0, '(', ')'), None);
    }
}
