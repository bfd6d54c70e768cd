//! NVRTC compiles every portable kernel (with `gpu_mem.h`) to PTX, and the PTX shows what the
//! source asked for; `ptxas` from the nvcc wheel assembles it when it is installed.
//!
//! Needs libnvrtc (the pinned PyPI wheel installed by `.ci/install-cuda-parts.sh`, or
//! `GPU_MEM_NVRTC_LIBRARY`) but no GPU. Without NVRTC (or ptxas) the trials are reported as
//! ignored, with the reason printed.

#[path = "support/ptx_params.rs"]
mod ptx_params;

use gpu_mem_core::Error;
use gpu_mem_core::backend::DevicePtr;
use gpu_mem_core::kernel::LaunchArg;
use gpu_mem_cuda::backend::KernelParams;
use gpu_mem_cuda::nvrtc::{CodeKind, ComputeCapability, Nvrtc};
use libtest_mimic::{Arguments, Failed, Trial};
use ptx_params::{PtxParam, entry_params};
use std::any::TypeId;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

struct Kernel {
    file: &'static str,
    entry: &'static str,
    source: &'static str,
    /// Static `.shared` arrays the source declares (name fragment, bytes).
    static_shared: &'static [(&'static str, usize)],
    dynamic_shared: bool,
    /// Block barriers the source calls; each must survive as a `bar.sync`.
    min_block_barriers: usize,
    global_fence: bool,
    wave_barrier: bool,
}

const KERNELS: &[Kernel] = &[
    Kernel {
        file: "matmul_tiled.cu",
        entry: "matmul_tiled",
        source: include_str!("../../gpu-mem-core/kernels/matmul_tiled.cu"),
        // Two 16x16 float tiles.
        static_shared: &[("sA", 16 * 16 * 4), ("sB", 16 * 16 * 4)],
        dynamic_shared: false,
        min_block_barriers: 2,
        global_fence: false,
        wave_barrier: false,
    },
    Kernel {
        file: "block_sum.cu",
        entry: "block_sum",
        source: include_str!("../../gpu-mem-core/kernels/block_sum.cu"),
        static_shared: &[],
        dynamic_shared: true,
        min_block_barriers: 2,
        global_fence: false,
        wave_barrier: false,
    },
    Kernel {
        file: "barrier_wave.cu",
        entry: "barrier_wave",
        source: include_str!("../../gpu-mem-core/kernels/barrier_wave.cu"),
        static_shared: &[("by_thread", 256 * 4), ("by_lane", 256 * 4)],
        dynamic_shared: false,
        min_block_barriers: 1,
        global_fence: true,
        wave_barrier: true,
    },
];

const CAPABILITIES: [ComputeCapability; 2] =
    [ComputeCapability::new(8, 0), ComputeCapability::new(9, 0)];

fn wheel_prefix() -> Option<PathBuf> {
    gpu_mem_core::testing::wheels::prefix()
}

/// NVRTC from `GPU_MEM_NVRTC_LIBRARY`, the pinned wheel, or the system's sonames.
fn load_nvrtc() -> Result<Nvrtc, String> {
    if std::env::var_os("GPU_MEM_NVRTC_LIBRARY").is_none()
        && let Some(prefix) = wheel_prefix()
    {
        let wheel = prefix.join("nvidia/cu13/lib/libnvrtc.so.13");
        if wheel.is_file() {
            return Nvrtc::load_from(&wheel).map_err(|e| e.to_string());
        }
    }
    Nvrtc::load()
        .map_err(|e| format!("{e} (run .ci/install-cuda-parts.sh or set GPU_MEM_NVRTC_LIBRARY)"))
}

fn find_ptxas() -> Option<PathBuf> {
    let candidate = match std::env::var_os("GPU_MEM_PTXAS") {
        Some(p) => PathBuf::from(p),
        None => wheel_prefix()?.join("nvidia/cu13/bin/ptxas"),
    };
    let runs = Command::new(&candidate)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    runs.then_some(candidate)
}

fn main() {
    let args = Arguments::from_args();
    let nvrtc = load_nvrtc().map(Arc::new);
    let ptxas = find_ptxas();
    let mut trials = Vec::new();

    let nvrtc_reason = nvrtc
        .as_ref()
        .err()
        .map(|e| format!("NVRTC unavailable: {e}"));
    let ptxas_reason = nvrtc_reason.clone().or_else(|| {
        ptxas.is_none().then(|| "ptxas unavailable (nvidia-cuda-nvcc wheel not installed or not runnable; or set GPU_MEM_PTXAS)".to_string())
    });
    let shared = nvrtc.as_ref().ok().cloned();

    let add = |trials: &mut Vec<Trial>,
               name: String,
               reason: &Option<String>,
               test: Box<dyn FnOnce() -> Result<(), Failed> + Send>| {
        let trial = Trial::test(name.clone(), test);
        trials.push(match reason {
            Some(reason) => {
                println!("ignoring {name}: {reason}");
                trial.with_ignored_flag(true)
            }
            None => trial,
        });
    };

    {
        let n = shared.clone();
        add(
            &mut trials,
            "nvrtc_version_and_architectures".into(),
            &nvrtc_reason,
            Box::new(move || version_and_archs(&*need(n)?)),
        );
    }
    for kernel in KERNELS {
        for cc in CAPABILITIES {
            let n = shared.clone();
            add(
                &mut trials,
                format!("ptx::{}::sm_{}", kernel.entry, cc.digits()),
                &nvrtc_reason,
                Box::new(move || compile_and_check_ptx(&*need(n)?, kernel, cc).map(drop)),
            );
            let n = shared.clone();
            let p = ptxas.clone();
            add(
                &mut trials,
                format!("ptxas::{}::sm_{}", kernel.entry, cc.digits()),
                &ptxas_reason,
                Box::new(move || assemble(&*need(n)?, p.ok_or("no ptxas")?, kernel, cc)),
            );
        }
        let n = shared.clone();
        add(
            &mut trials,
            format!("cubin::{}::sm_90", kernel.entry),
            &nvrtc_reason,
            Box::new(move || cubin(&*need(n)?, kernel, ComputeCapability::new(9, 0))),
        );
    }
    for cc in CAPABILITIES {
        let n = shared.clone();
        add(
            &mut trials,
            format!("ptx::conformance_kernels::sm_{}", cc.digits()),
            &nvrtc_reason,
            Box::new(move || conformance_kernels(&*need(n)?, cc)),
        );
    }
    {
        let n = shared.clone();
        add(
            &mut trials,
            "broken_kernel_error_carries_the_log".into(),
            &nvrtc_reason,
            Box::new(move || broken_kernel(&*need(n)?)),
        );
        let n = shared.clone();
        add(
            &mut trials,
            "gm_array_layout_matches_the_launcher".into(),
            &nvrtc_reason,
            Box::new(move || array_layout(&*need(n)?)),
        );
        let n = shared.clone();
        add(
            &mut trials,
            "launch_parameters_match_what_nvrtc_compiled".into(),
            &nvrtc_reason,
            Box::new(move || launch_parameters(&*need(n)?)),
        );
        let n = shared;
        add(
            &mut trials,
            "unsupported_architecture_is_an_error".into(),
            &nvrtc_reason,
            Box::new(move || old_arch(&*need(n)?)),
        );
    }

    let conclusion = libtest_mimic::run(&args, trials);
    let _ = std::fs::remove_dir_all(ptxas_scratch_dir());
    conclusion.exit();
}

/// Where the ptxas trials write their PTX and cubin files (removed at the end of the run).
fn ptxas_scratch_dir() -> PathBuf {
    std::env::temp_dir().join(format!("gpu-mem-cuda-ptxas-{}", std::process::id()))
}

fn need(nvrtc: Option<Arc<Nvrtc>>) -> Result<Arc<Nvrtc>, Failed> {
    nvrtc.ok_or_else(|| "NVRTC not loaded".into())
}

fn version_and_archs(nvrtc: &Nvrtc) -> Result<(), Failed> {
    let (major, minor) = nvrtc.version()?;
    let archs = nvrtc.supported_archs()?;
    println!(
        "NVRTC {major}.{minor} from {}; architectures {archs:?}",
        nvrtc.path()
    );
    if major < 11 {
        return Err(
            format!("NVRTC {major}.{minor} is older than the 11.2 the binding needs").into(),
        );
    }
    for cc in CAPABILITIES {
        let digits: i32 = cc.digits().parse()?;
        if !archs.contains(&digits) {
            return Err(format!("NVRTC does not list {digits} among {archs:?}").into());
        }
    }
    Ok(())
}

/// Every `.cu` of the repository (`tests/kernels`, `crates/gpu-mem-core/kernels`) compiles to PTX
/// with an entry for each `__global__` function: the same source the simulator's host compiler
/// builds.
fn conformance_kernels(nvrtc: &Nvrtc, cc: ComputeCapability) -> Result<(), Failed> {
    // The hardware bundle ships the sources under $GPU_MEM_SOURCE_ROOT (no workspace there).
    let root = match std::env::var_os("GPU_MEM_SOURCE_ROOT") {
        Some(root) => PathBuf::from(root),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
    };
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [
        root.join("tests/kernels"),
        root.join("crates/gpu-mem-core/kernels"),
    ] {
        // The bundle may ship only the suite's kernels.
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        files.extend(
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "cu")),
        );
    }
    files.sort();
    if files.is_empty() {
        return Err(format!("no .cu files under {}", root.display()).into());
    }
    for path in files {
        let source =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("kernel.cu");
        let compiled = nvrtc.compile(&source, name, cc, CodeKind::Ptx, &[])?;
        let ptx = compiled.ptx_text().ok_or("PTX is not UTF-8")?;
        let entries: Vec<&str> = source
            .split("__global__ void ")
            .skip(1)
            .filter_map(|rest| rest.split('(').next())
            .collect();
        for entry in &entries {
            if !ptx.contains(&format!(".entry {entry}(")) {
                return Err(format!("{name}: no `.entry {entry}(` in the PTX").into());
            }
        }
        println!(
            "{name} sm_{}: {} entries, {} bytes of PTX",
            cc.digits(),
            entries.len(),
            ptx.len()
        );
    }
    Ok(())
}

fn compile_and_check_ptx(
    nvrtc: &Nvrtc,
    kernel: &Kernel,
    cc: ComputeCapability,
) -> Result<String, Failed> {
    let started = std::time::Instant::now();
    let compiled = nvrtc.compile(kernel.source, kernel.file, cc, CodeKind::Ptx, &[])?;
    let elapsed = started.elapsed();
    let ptx = compiled.ptx_text().ok_or("PTX is not UTF-8")?.to_string();
    println!(
        "{} sm_{}: {} bytes of PTX in {:.1} ms",
        kernel.file,
        cc.digits(),
        ptx.len(),
        elapsed.as_secs_f64() * 1e3
    );

    let mut problems = Vec::new();
    let target = format!(".target sm_{}", cc.digits());
    if !ptx.contains(&target) {
        problems.push(format!("no `{target}`"));
    }
    let entry = format!(".entry {}(", kernel.entry);
    if !ptx.contains(&entry) {
        problems.push(format!("no `{entry}` (extern \"C\" entry point)"));
    }
    for (name, bytes) in kernel.static_shared {
        let found = ptx.lines().any(|l| {
            l.contains(".shared")
                && !l.contains(".extern")
                && l.contains(name)
                && l.contains(&format!("[{bytes}]"))
        });
        if !found {
            problems.push(format!(
                "no static `.shared` declaration of {name}[{bytes}]"
            ));
        }
    }
    let has_extern_shared = ptx.lines().any(|l| l.contains(".extern .shared"));
    if kernel.dynamic_shared != has_extern_shared {
        problems.push(format!(
            "`.extern .shared` present: {has_extern_shared}, source asked: {}",
            kernel.dynamic_shared
        ));
    }
    // `bar.sync` (block barrier) and `bar.warp.sync` (warp barrier) are distinct instructions.
    let barriers = ptx.matches("bar.sync").count();
    if barriers < kernel.min_block_barriers {
        problems.push(format!(
            "{barriers} `bar.sync`, source has {} block barriers",
            kernel.min_block_barriers
        ));
    }
    if kernel.global_fence != ptx.contains("membar.gl") {
        problems.push(format!(
            "`membar.gl` present: {}, source asked: {}",
            ptx.contains("membar.gl"),
            kernel.global_fence
        ));
    }
    if kernel.wave_barrier != ptx.contains("bar.warp.sync") {
        problems.push(format!(
            "`bar.warp.sync` present: {}, source asked: {}",
            ptx.contains("bar.warp.sync"),
            kernel.wave_barrier
        ));
    }
    if kernel.wave_barrier && !ptx.contains("%laneid") {
        problems.push("gm_lane_id() did not read %laneid".to_string());
    }
    if problems.is_empty() {
        Ok(ptx)
    } else {
        Err(format!(
            "{} for sm_{}: {}\n--- PTX ---\n{ptx}",
            kernel.file,
            cc.digits(),
            problems.join("; ")
        )
        .into())
    }
}

fn assemble(
    nvrtc: &Nvrtc,
    ptxas: PathBuf,
    kernel: &Kernel,
    cc: ComputeCapability,
) -> Result<(), Failed> {
    let ptx = compile_and_check_ptx(nvrtc, kernel, cc)?;
    let dir = ptxas_scratch_dir();
    std::fs::create_dir_all(&dir)?;
    let stem = format!("{}_sm{}", kernel.entry, cc.digits());
    let ptx_path = dir.join(format!("{stem}.ptx"));
    let cubin_path = dir.join(format!("{stem}.cubin"));
    std::fs::write(&ptx_path, &ptx)?;
    let output = Command::new(&ptxas)
        .arg(format!("-arch=sm_{}", cc.digits()))
        .arg(&ptx_path)
        .arg("-o")
        .arg(&cubin_path)
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "ptxas failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let cubin = std::fs::read(&cubin_path)?;
    let _ = std::fs::remove_file(&ptx_path);
    let _ = std::fs::remove_file(&cubin_path);
    if !cubin.starts_with(b"\x7fELF") {
        return Err(format!("ptxas output is not an ELF cubin ({} bytes)", cubin.len()).into());
    }
    println!(
        "ptxas sm_{}: {} -> {} byte cubin",
        cc.digits(),
        kernel.file,
        cubin.len()
    );
    Ok(())
}

fn cubin(nvrtc: &Nvrtc, kernel: &Kernel, cc: ComputeCapability) -> Result<(), Failed> {
    let compiled = nvrtc.compile(kernel.source, kernel.file, cc, CodeKind::Cubin, &[])?;
    if compiled.kind != CodeKind::Cubin || compiled.ptx_text().is_some() {
        return Err("a cubin compile must not be reported as PTX".into());
    }
    if !compiled.code.starts_with(b"\x7fELF") {
        return Err(format!("NVRTC cubin is not ELF ({} bytes)", compiled.code.len()).into());
    }
    println!(
        "{} sm_{}: {} byte cubin",
        kernel.file,
        cc.digits(),
        compiled.code.len()
    );
    Ok(())
}

fn broken_kernel(nvrtc: &Nvrtc) -> Result<(), Failed> {
    let source = r#"#include "gpu_mem.h"
extern "C" __global__ void broken(gm_array<float, 1> a) {
    a(0) = undefined_identifier_in_broken_kernel;
}
"#;
    match nvrtc.compile(
        source,
        "broken.cu",
        ComputeCapability::new(9, 0),
        CodeKind::Ptx,
        &[],
    ) {
        Ok(_) => Err("a kernel using an undefined identifier compiled".into()),
        Err(Error::Native {
            call,
            code_name,
            description,
            ..
        }) => {
            if call != "nvrtcCompileProgram" || code_name != "NVRTC_ERROR_COMPILATION" {
                return Err(format!("wrong call or code: {call} {code_name}").into());
            }
            for needle in ["undefined_identifier_in_broken_kernel", "broken.cu", "9.0"] {
                if !description.contains(needle) {
                    return Err(format!("error text lacks `{needle}`: {description}").into());
                }
            }
            println!("error: {description}");
            Ok(())
        }
        Err(other) => Err(format!("expected a Native compile error, got {other}").into()),
    }
}

/// The launcher passes `#[repr(C)] { ptr: u64, shape: [i64; N], strides: [i64; N] }`; the
/// prelude's `gm_array` must have exactly that layout. Sizes and alignment are checked by the
/// compiler itself; the fields' offsets by the PTX, where each probe kernel reads every field
/// from its parameter at `+offset` (`__builtin_offsetof` would say it in the source, but the
/// NVRTC of CUDA 13.0, seen beside an H200, does not know it).
fn array_layout(nvrtc: &Nvrtc) -> Result<(), Failed> {
    let mut source = String::from("#include \"gpu_mem.h\"\n");
    for n in 1..=4usize {
        let size = 8 + 16 * n;
        source.push_str(&format!(
            "static_assert(sizeof(gm_array<float, {n}>) == {size}, \"size N={n}\");\n\
             static_assert(alignof(gm_array<double, {n}>) == 8, \"align N={n}\");\n\
             extern \"C\" __global__ void layout_probe_{n}(gm_array<char, {n}> a, long long* out) {{\n\
                 out[0] = (long long)a.data;\n\
                 for (int i = 0; i < {n}; ++i) {{ out[1 + i] = a.shape[i]; out[1 + {n} + i] = a.strides[i]; }}\n\
             }}\n"
        ));
    }
    source.push_str(
        "extern \"C\" __global__ void layout_probe(gm_array<float, 2> a) { a(1, 1) = 0.0f; }\n",
    );
    let compiled = nvrtc.compile(
        &source,
        "layout_probe.cu",
        ComputeCapability::new(9, 0),
        CodeKind::Ptx,
        &[],
    )?;
    let ptx = compiled.ptx_text().ok_or("PTX is not UTF-8")?;
    // The kernel parameter is one 40-byte, 8-aligned struct for N = 2.
    if !ptx.contains(".param .align 8 .b8 layout_probe_param_0[40]") {
        return Err(format!("unexpected parameter declaration:\n{ptx}").into());
    }
    for n in 1..=4usize {
        let param = format!("layout_probe_{n}_param_0");
        // The pointer at 0, then N shapes and N strides of 8 bytes each.
        for offset in (0..=16 * n).step_by(8) {
            let field = if offset == 0 {
                format!("[{param}]")
            } else {
                format!("[{param}+{offset}]")
            };
            if !ptx.contains(&field) {
                return Err(format!("N={n}: no field read at {field}; the PTX:\n{ptx}").into());
            }
        }
    }
    Ok(())
}

/// Every kind of argument the launcher encodes has exactly the size and alignment NVRTC gives
/// the corresponding C parameter (read from the `.entry` parameter list of the PTX).
fn launch_parameters(nvrtc: &Nvrtc) -> Result<(), Failed> {
    let source = r#"#include "gpu_mem.h"
struct Rec { double a; int b; };
extern "C" __global__ void param_probe(gm_array<float, 2> a, Rec* r, int i, double d, char c,
                                       short s, gm_array<double, 3> b, float f,
                                       unsigned long long u, gm_array<int, 1> v) {
    if (i) { a(0, 0) = f; r->b = c + s; b(0, 0, 0) = d + (double)u; v(0) = 1; }
}
"#;
    let array = |shape: Vec<usize>, itemsize: usize| LaunchArg::Array {
        ptr: DevicePtr(0x1000),
        strides: vec![1; shape.len()],
        shape,
        min_offset: 0,
        span_len: 1,
        itemsize,
        elem: TypeId::of::<u8>(),
        dtype: "test",
    };
    let scalar = |bytes: Vec<u8>| LaunchArg::Scalar {
        bytes,
        elem: TypeId::of::<u8>(),
        dtype: "test",
    };
    let args = [
        array(vec![2, 3], 4),
        LaunchArg::Record {
            ptr: DevicePtr(0x2000),
            itemsize: 16,
            elem: TypeId::of::<u8>(),
            dtype: "Rec",
        },
        scalar(7i32.to_ne_bytes().to_vec()),
        scalar(1.5f64.to_ne_bytes().to_vec()),
        scalar(vec![3u8]),
        scalar(9i16.to_ne_bytes().to_vec()),
        array(vec![2, 3, 4], 8),
        scalar(2.5f32.to_ne_bytes().to_vec()),
        scalar(u64::MAX.to_ne_bytes().to_vec()),
        array(vec![5], 4),
    ];
    let launcher = KernelParams::build("param_probe", &args, None)?;
    let produced: Vec<PtxParam> = (0..launcher.len())
        .map(|i| PtxParam {
            size: launcher.bytes(i).map_or(0, <[u8]>::len),
            align: launcher.alignment(i).unwrap_or(0),
        })
        .collect();
    for cc in CAPABILITIES {
        let compiled = nvrtc.compile(source, "param_probe.cu", cc, CodeKind::Ptx, &[])?;
        let ptx = compiled.ptx_text().ok_or("PTX is not UTF-8")?;
        let declared = entry_params(ptx, "param_probe")?;
        println!("sm_{}: NVRTC declares {declared:?}", cc.digits());
        if declared != produced {
            return Err(format!(
                "sm_{}: launcher produces {produced:?}, NVRTC declares {declared:?}\n{ptx}",
                cc.digits()
            )
            .into());
        }
    }
    Ok(())
}

fn old_arch(nvrtc: &Nvrtc) -> Result<(), Failed> {
    // NVRTC 13 dropped compute capability 7.0; asking for it must be an error, not a panic.
    let (major, _) = nvrtc.version()?;
    let result = nvrtc.compile(
        KERNELS[0].source,
        KERNELS[0].file,
        ComputeCapability::new(3, 0),
        CodeKind::Ptx,
        &[],
    );
    match result {
        Err(Error::Native {
            call: "nvrtcCompileProgram",
            code_name,
            ..
        }) => {
            println!("NVRTC {major}: compute_30 -> {code_name}");
            Ok(())
        }
        other => Err(format!("compute_30 should be rejected, got {other:?}").into()),
    }
}
