//! hiprtc compiles kernels with shared memory and barriers into AMD GPU code objects, without
//! a GPU: checked as ELF (machine, ISA flags, kernel symbols) and disassembled with LLVM.

use crate::elf::{EM_AMDGPU, Elf};
use crate::newer_hip::{self, FETCH_HINT};
use crate::support::{Outcome, crates_dir, ensure, hip_or_skip, llvm_objdump};
use gpu_mem_core::Error;
use gpu_mem_roc::hiprtc::{self, CodeObject};
use libtest_mimic::{Completion, Failed};

/// The ISAs every kernel is compiled for: a CDNA2 part (wave64), an RDNA2 part (wave32 by
/// default) and an RDNA3 part. hiprtc 5.2.3's code-object manager (comgr 2.4) predates gfx11, so
/// on Debian 12 the gfx1100 trials run under Debian 13's HIP 5.7.1 ([`newer_hip`]), or are
/// reported as ignored with that reason when it is not unpacked.
pub const ARCHS: &[&str] = &["gfx90a", "gfx1030", "gfx1100"];

/// `EF_AMDGPU_MACH_*` (low byte of e_flags) for each ISA, from the AMDGPU ELF documentation.
fn expected_mach(arch: &str) -> Option<u32> {
    match arch {
        "gfx90a" => Some(0x3f),
        "gfx1030" => Some(0x36),
        "gfx1100" => Some(0x41),
        _ => None,
    }
}

/// A kernel of this crate's own with static shared memory, block barriers and a wave barrier.
pub const PROBE_SOURCE: &str = r#"
extern "C" __global__ void gm_barrier_probe(float* out, const float* in, int n) {
    __shared__ float tile[256];
    unsigned t = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + t;
    tile[t] = i < (unsigned)n ? in[i] : 0.0f;
    __syncthreads();
    __builtin_amdgcn_wave_barrier();
    float v = tile[(t + 1) % blockDim.x];
    __syncthreads();
    if (i < (unsigned)n) out[i] = v * 2.0f;
}
"#;

/// Names of `extern "C" __global__` functions in `source`.
fn kernel_names(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("__global__") {
        rest = &rest[at + "__global__".len()..];
        // `__global__ void name(` possibly with attributes in between: the identifier before `(`.
        if let Some(paren) = rest.find('(') {
            let head = &rest[..paren];
            if let Some(name) = head.split_whitespace().last() {
                let name = name.trim_start_matches('*');
                if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    names.push(name.to_string());
                }
            }
        }
    }
    names
}

/// Whether the source asks for a block barrier (which must show up as `s_barrier`).
fn wants_block_barrier(source: &str) -> bool {
    let without_wave = source
        .replace("wavebarrier", "")
        .replace("wave_barrier", "");
    without_wave.contains("__syncthreads(")
        || without_wave.contains("syncthreads(")
        || without_wave.contains("barrier(")
}

/// Checks one code object; returns a one-line summary.
fn check_code_object(co: &CodeObject, kernels: &[String], barrier: bool) -> Result<String, Failed> {
    let elf = Elf::parse(&co.code)?;
    let machine = elf.machine()?;
    ensure(machine == EM_AMDGPU, || {
        format!(
            "{}: e_machine {machine}, expected EM_AMDGPU {EM_AMDGPU}",
            co.arch
        )
    })?;
    let mach = elf.flags()? & 0xff;
    if let Some(expected) = expected_mach(&co.arch) {
        ensure(mach == expected, || {
            format!(
                "{}: EF_AMDGPU_MACH {mach:#x}, expected {expected:#x}",
                co.arch
            )
        })?;
    }
    let symbols = elf.symbols(false)?;
    // Code object v3+: the kernel's code is an STT_FUNC named like the kernel, its descriptor
    // an STT_OBJECT named `<kernel>.kd` (what hsa_executable_get_symbol_by_name looks up).
    const STT_OBJECT: u8 = 1;
    const STT_FUNC: u8 = 2;
    for kernel in kernels {
        for (wanted, kind) in [
            (kernel.clone(), STT_FUNC),
            (format!("{kernel}.kd"), STT_OBJECT),
        ] {
            ensure(
                symbols
                    .iter()
                    .any(|s| s.name == wanted && s.defined && s.kind == kind),
                || {
                    format!(
                        "{}: symbol {wanted} (type {kind}) missing from the code object",
                        co.arch
                    )
                },
            )?;
        }
    }
    let disassembly = match llvm_objdump() {
        Some(objdump) => {
            let file = std::env::temp_dir().join(format!(
                "gpu-mem-roc-{}-{}-{}.co",
                std::process::id(),
                co.arch,
                kernels.first().map(String::as_str).unwrap_or("k")
            ));
            std::fs::write(&file, &co.code)
                .map_err(|e| format!("write {}: {e}", file.display()))?;
            let out = std::process::Command::new(&objdump)
                .arg("-d")
                .arg(format!("--mcpu={}", co.arch))
                .arg(&file)
                .output()
                .map_err(|e| format!("run {}: {e}", objdump.display()))?;
            let _ = std::fs::remove_file(&file);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            ensure(out.status.success(), || {
                format!(
                    "{} failed: {}",
                    objdump.display(),
                    String::from_utf8_lossy(&out.stderr)
                )
            })?;
            let barriers = text.lines().filter(|l| l.contains("s_barrier")).count();
            if barrier {
                ensure(barriers > 0, || {
                    format!("{}: no s_barrier in the disassembly:\n{text}", co.arch)
                })?;
            }
            format!("{barriers} s_barrier")
        }
        None => "not disassembled (no llvm-objdump-15+)".to_string(),
    };
    Ok(format!(
        "{}: {} bytes, EF_AMDGPU_MACH {mach:#x}, kernels {kernels:?}, {disassembly}",
        co.arch,
        co.code.len()
    ))
}

/// Compiles with hiprtc, turning "comgr does not know this ISA" into a skip with the reason.
fn compile_or_skip(
    hip: &gpu_mem_roc::driver::Hip,
    source: &str,
    name: &str,
    arch: &str,
    headers: &[(&str, &str)],
    options: &[&str],
) -> Result<Result<CodeObject, Completion>, Failed> {
    match hiprtc::compile(hip, source, name, arch, headers, options, &[]) {
        Ok(co) => Ok(Ok(co)),
        Err(e @ Error::NotSupportedByBackend { .. }) => Ok(Err(Completion::ignored_with(format!(
            "{arch} cannot be compiled by the installed hiprtc: {e} ({FETCH_HINT})"
        )))),
        Err(e) => Err(Failed::from(format!("{name} for {arch}: {e}"))),
    }
}

/// The trials' names for [`newer_hip`]'s child processes (see [`run_by_name`]).
const PROBE_TRIAL: &str = "probe";
const PORTABLE_TRIAL: &str = "portable";

/// The child trial compiling the portable kernels for `arch` (see [`run_by_name`]).
pub fn portable_trial(arch: &str) -> String {
    format!("{PORTABLE_TRIAL}:{arch}")
}

/// Runs the compile trial `name` for `arch` in this process (a child process of the test
/// binary).
pub fn run_by_name(name: &str, arch: &str) -> Option<Outcome> {
    let arch: &'static str = ARCHS.iter().find(|a| **a == arch)?;
    match name {
        PROBE_TRIAL => Some(probe_kernel_compiles(arch)()),
        PORTABLE_TRIAL => Some(portable_kernels_compile(arch)()),
        _ => None,
    }
}

/// Compiles the probe kernel for `arch` and checks the code object. For an ISA the system's comgr
/// does not know, runs under a newer HIP userland when one is unpacked ([`newer_hip`]).
pub fn probe_kernel_compiles(arch: &'static str) -> impl FnOnce() -> Outcome + Send + 'static {
    move || {
        if let Some(outcome) = newer_hip::for_unknown_isa(PROBE_TRIAL, arch) {
            return outcome;
        }
        let hip = match hip_or_skip() {
            Ok(h) => h,
            Err(skip) => return Ok(skip),
        };
        if llvm_objdump().is_none() {
            return Ok(Completion::ignored_with(
                "llvm-objdump from LLVM 15+ not installed (`.ci/install-rocm-parts.sh` installs llvm-15)",
            ));
        }
        let kernels = kernel_names(PROBE_SOURCE);
        ensure(kernels == ["gm_barrier_probe"], || {
            format!("kernel names {kernels:?}")
        })?;
        let started = std::time::Instant::now();
        let co = match compile_or_skip(&hip, PROBE_SOURCE, "gm_barrier_probe.hip", arch, &[], &[])?
        {
            Ok(co) => co,
            Err(skip) => return Ok(skip),
        };
        let ms = started.elapsed().as_millis();
        let summary = check_code_object(&co, &kernels, true)?;
        println!("    {summary}, compiled in {ms} ms");
        Ok(Completion::Completed)
    }
}

/// An ISA comgr does not list is refused with an error instead of reaching hiprtc (which would
/// abort the process).
pub fn unknown_isa_is_refused() -> Outcome {
    let hip = match hip_or_skip() {
        Ok(h) => h,
        Err(skip) => return Ok(skip),
    };
    let list = hiprtc::supported_isas()?;
    ensure(list.isas.iter().any(|i| i == "gfx90a"), || {
        format!("gfx90a not among {:?}", list.isas)
    })?;
    println!(
        "    comgr {}.{} ({}) lists {} ISAs: {}",
        list.version.0,
        list.version.1,
        list.library,
        list.isas.len(),
        list.isas.join(" ")
    );
    for arch in ["gfx9999", "gfx1100"] {
        if list.isas.iter().any(|i| i == arch) {
            continue;
        }
        match hiprtc::compile(&hip, PROBE_SOURCE, "probe.hip", arch, &[], &[], &[]) {
            Err(Error::NotSupportedByBackend { reason, .. }) => {
                ensure(reason.contains(arch), || {
                    format!("reason does not name {arch}: {reason}")
                })?;
            }
            Err(other) => return Err(Failed::from(format!("{arch}: unexpected error {other}"))),
            Ok(co) => {
                return Err(Failed::from(format!(
                    "{arch} compiled ({} bytes) although comgr does not list it",
                    co.code.len()
                )));
            }
        }
    }
    Ok(Completion::Completed)
}

pub fn broken_kernel_reports_log() -> Outcome {
    let hip = match hip_or_skip() {
        Ok(h) => h,
        Err(skip) => return Ok(skip),
    };
    let source =
        "extern \"C\" __global__ void broken(float* out) { out[0] = gm_undeclared_name; }\n";
    match hiprtc::compile(&hip, source, "broken.hip", "gfx90a", &[], &[], &[]) {
        Ok(co) => Err(Failed::from(format!(
            "broken kernel compiled ({} bytes)",
            co.code.len()
        ))),
        Err(Error::Native {
            call,
            code_name,
            description,
            ..
        }) => {
            ensure(call == "hiprtcCompileProgram", || format!("call {call}"))?;
            ensure(code_name == "HIPRTC_ERROR_COMPILATION", || {
                format!("code name {code_name}")
            })?;
            ensure(description.contains("gm_undeclared_name"), || {
                format!("log does not name the undeclared identifier: {description}")
            })?;
            println!(
                "    {code_name}: {}",
                description.lines().next().unwrap_or("")
            );
            Ok(Completion::Completed)
        }
        Err(other) => Err(Failed::from(format!("unexpected error: {other}"))),
    }
}

/// Compiles every portable kernel (`crates/gpu-mem-core/kernels/*.cu` and `tests/kernels/*.cu`
/// with the `gpu_mem.h` prelude) for `arch` and checks each code object (under a newer HIP
/// userland for an ISA the system's comgr does not know, as [`probe_kernel_compiles`]).
pub fn portable_kernels_compile(arch: &'static str) -> impl FnOnce() -> Outcome + Send + 'static {
    move || {
        if let Some(outcome) = newer_hip::for_unknown_isa(PORTABLE_TRIAL, arch) {
            return outcome;
        }
        let core = crates_dir().join("gpu-mem-core");
        let prelude_path = core.join("include").join("gpu_mem.h");
        let kernel_dir = core.join("kernels");
        if !prelude_path.exists() || !kernel_dir.is_dir() {
            return Ok(Completion::ignored_with(format!(
                "portable kernels not present ({} / {})",
                prelude_path.display(),
                kernel_dir.display()
            )));
        }
        let hip = match hip_or_skip() {
            Ok(h) => h,
            Err(skip) => return Ok(skip),
        };
        let prelude = std::fs::read_to_string(&prelude_path)
            .map_err(|e| format!("{}: {e}", prelude_path.display()))?;
        // The library's kernels and the conformance suite's (`tests/kernels`): the same sources
        // the simulator's host compiler builds.
        let conformance = crates_dir().join("..").join("tests").join("kernels");
        let mut sources = Vec::new();
        for dir in [&kernel_dir, &conformance] {
            sources.extend(
                std::fs::read_dir(dir)
                    .map_err(|e| format!("{}: {e}", dir.display()))?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|x| x == "cu")),
            );
        }
        sources.sort();
        ensure(!sources.is_empty(), || {
            format!("no .cu files in {}", kernel_dir.display())
        })?;
        let mut failures = Vec::new();
        for path in &sources {
            let source =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("kernel.cu");
            let kernels = kernel_names(&source);
            ensure(!kernels.is_empty(), || {
                format!("{name}: no __global__ kernels found")
            })?;
            let co = match compile_portable(&hip, &source, name, arch, &prelude)? {
                Ok(co) => co,
                Err(skip) => return Ok(skip),
            };
            match check_code_object(&co, &kernels, wants_block_barrier(&source)) {
                Ok(summary) => println!("    {name} {summary}"),
                Err(f) => {
                    failures.push(format!("{name}: {}", f.message().unwrap_or("check failed")))
                }
            }
        }
        ensure(failures.is_empty(), || failures.join("\n"))?;
        Ok(Completion::Completed)
    }
}

fn compile_portable(
    hip: &gpu_mem_roc::driver::Hip,
    source: &str,
    name: &str,
    arch: &str,
    prelude: &str,
) -> Result<Result<CodeObject, Completion>, Failed> {
    let include_dir = crates_dir().join("gpu-mem-core").join("include");
    let include = format!("-I{}", include_dir.display());
    compile_or_skip(
        hip,
        source,
        name,
        arch,
        &[("gpu_mem.h", prelude)],
        &[include.as_str()],
    )
}
