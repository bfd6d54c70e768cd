//! `hw-buggy`: the hardware bundle's buggy kernels (`tests/kernels/buggy/*.cu`), one per run,
//! so that the simulator's checks and compute-sanitizer judge the same launches.
//!
//! ```text
//! hw-buggy list                        every case: name, the check that must report it
//! hw-buggy run NAME --deliberately     launches case NAME on GPU_MEM_BACKEND; prints `NAME: ok`
//!                                      or `NAME: error: ...` (exit status 0 or 1)
//! ```
//!
//! Each file's first comment lines say how it is launched:
//!
//! ```text
//! // kernel: stencil                         the entry
//! // launch: 2 128 [SHARED]                  grid and block (`2x2`, `16x16` for 2-D), dynamic
//! //                                         shared bytes
//! // args: f32[256]=1 f32[256]=0 i32=256     arrays TYPE[N]=VALUE (or =uninit: allocated, never
//! //                                         written; =iotaK: i % K), then scalars TYPE=VALUE
//! // expect: memcheck: ...                   memcheck | racecheck | initcheck | clean
//! ```
//!
//! The kernels are wrong on purpose: `run` needs `--deliberately`, and is meant for the
//! simulator with its checks on (which stop every bad access before it lands) or a GPU under
//! compute-sanitizer, in a process of its own.

use gpu_mem::BackendKind;
use gpu_mem::kernel::KernelArg;
use gpu_mem::ndarray::Array1;
use gpu_mem::prelude::*;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("hw-buggy: {message}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    match args.first().map(String::as_str) {
        Some("list") => {
            for case in cases()? {
                println!("{} {}", case.name, case.expect);
            }
            Ok(ExitCode::SUCCESS)
        }
        Some("run") => {
            let name = args.get(1).ok_or("run needs a case name")?;
            if !args.iter().any(|a| a == "--deliberately") {
                return Err(
                    "the cases are buggy kernels: run one with --deliberately, on the simulator with checks or under compute-sanitizer"
                        .into(),
                );
            }
            let case = cases()?
                .into_iter()
                .find(|c| &c.name == name)
                .ok_or_else(|| format!("no case `{name}` (hw-buggy list)"))?;
            match launch(&case) {
                Ok(()) => {
                    println!("{name}: ok");
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => {
                    println!("{name}: error: {}", error.replace('\n', " | "));
                    Ok(ExitCode::FAILURE)
                }
            }
        }
        _ => Err("usage: hw-buggy list | hw-buggy run NAME --deliberately".into()),
    }
}

/// Where the cases are: `$GPU_MEM_SOURCE_ROOT/tests/kernels/buggy` (the bundle's copy), else
/// this checkout's.
fn case_dir() -> PathBuf {
    let root = std::env::var_os("GPU_MEM_SOURCE_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".."));
    root.join("tests/kernels/buggy")
}

/// One buggy (or clean) kernel and how to launch it.
#[derive(Debug, Clone, PartialEq)]
struct Case {
    name: String,
    code: String,
    kernel: String,
    grid: (u32, u32),
    block: (u32, u32),
    shared: usize,
    args: Vec<Arg>,
    /// The check that must report it (`clean`: none may).
    expect: String,
}

/// One argument of a case.
#[derive(Debug, Clone, PartialEq)]
enum Arg {
    F32Array(usize, Fill),
    I32Array(usize, Fill),
    F32(f32),
    I32(i32),
}

/// How an array starts.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Fill {
    Value(f64),
    /// Element `i` is `i % k`.
    Iota(usize),
    /// Allocated and never written.
    Uninit,
}

fn cases() -> Result<Vec<Case>, String> {
    let dir = case_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "cu"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            let code =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default();
            parse_case(name, &code).map_err(|e| format!("{}: {e}", path.display()))
        })
        .collect()
}

/// Reads a case's header comment.
fn parse_case(name: &str, code: &str) -> Result<Case, String> {
    let field = |key: &str| -> Result<&str, String> {
        code.lines()
            .take_while(|l| l.starts_with("//"))
            .find_map(|l| l.trim_start_matches('/').trim().strip_prefix(key))
            .map(str::trim)
            .ok_or_else(|| format!("no `// {key}` line"))
    };
    let launch: Vec<&str> = field("launch:")?.split_whitespace().collect();
    let dims = |text: &str| -> Result<(u32, u32), String> {
        let mut parts = text.split('x').map(|p| p.parse::<u32>());
        match (parts.next(), parts.next(), parts.next()) {
            (Some(Ok(x)), None, None) => Ok((x, 1)),
            (Some(Ok(x)), Some(Ok(y)), None) => Ok((x, y)),
            _ => Err(format!("launch: `{text}` is not N or NxM")),
        }
    };
    let (grid, block) = match launch[..] {
        [grid, block] | [grid, block, _] => (dims(grid)?, dims(block)?),
        _ => return Err("launch: GRID BLOCK [SHARED]".into()),
    };
    let shared = match launch.get(2) {
        Some(bytes) => bytes.parse().map_err(|e| format!("launch: shared: {e}"))?,
        None => 0,
    };
    let args = field("args:")?
        .split_whitespace()
        .map(parse_arg)
        .collect::<Result<_, _>>()?;
    // The check's name: the first word, before any `:` or note.
    let expect = field("expect:")?
        .split([':', ' '])
        .next()
        .unwrap_or_default()
        .to_string();
    Ok(Case {
        name: name.to_string(),
        code: code.to_string(),
        kernel: field("kernel:")?.to_string(),
        grid,
        block,
        shared,
        args,
        expect,
    })
}

/// `f32[256]=1`, `i32[128]=iota17`, `f32[64]=uninit`, `i32=256`.
fn parse_arg(text: &str) -> Result<Arg, String> {
    let (kind, value) = text
        .split_once('=')
        .ok_or_else(|| format!("argument `{text}`: TYPE=VALUE or TYPE[N]=FILL"))?;
    if let Some((ty, len)) = kind.split_once('[') {
        let len: usize = len
            .trim_end_matches(']')
            .parse()
            .map_err(|e| format!("argument `{text}`: {e}"))?;
        let fill = match value {
            "uninit" => Fill::Uninit,
            _ => match value.strip_prefix("iota") {
                Some(k) => Fill::Iota(k.parse().map_err(|e| format!("argument `{text}`: {e}"))?),
                None => Fill::Value(
                    value
                        .parse()
                        .map_err(|e| format!("argument `{text}`: {e}"))?,
                ),
            },
        };
        return match ty {
            "f32" => Ok(Arg::F32Array(len, fill)),
            "i32" => Ok(Arg::I32Array(len, fill)),
            _ => Err(format!("argument `{text}`: arrays are f32 or i32")),
        };
    }
    let bad = |e: String| format!("argument `{text}`: {e}");
    match kind {
        "f32" => Ok(Arg::F32(value.parse().map_err(|e| bad(format!("{e}")))?)),
        "i32" => Ok(Arg::I32(value.parse().map_err(|e| bad(format!("{e}")))?)),
        _ => Err(bad("scalars are f32 or i32".into())),
    }
}

/// A device array of `len` elements filled as `fill` says (`from` turns a fill value into `T`).
fn array<T: Element + Clone>(
    device: &Device,
    len: usize,
    fill: Fill,
    from: impl Fn(f64) -> T,
) -> Result<DeviceArray<T>, String> {
    let host = match fill {
        Fill::Uninit => {
            return device
                .device_array::<T>(&[len], Order::C)
                .map_err(|e| e.to_string());
        }
        Fill::Value(v) => Array1::from_elem(len, from(v)),
        Fill::Iota(k) => Array1::from_shape_fn(len, |i| from((i % k.max(1)) as f64)),
    };
    device.to_device(&host).map_err(|e| e.to_string())
}

/// Launches `case` once and waits for it.
fn launch(case: &Case) -> Result<(), String> {
    let runtime = Runtime::from_env().map_err(|e| e.to_string())?;
    if runtime.kind() == BackendKind::Sim {
        // The simulator runs kernels inside this process: unchecked, a bad access of a buggy
        // kernel would land in the process's own memory.
        let checks = std::env::var("GPU_MEM_SIM_CHECK").unwrap_or_default();
        if !gpu_mem::sim::Checks::parse(&checks).is_ok_and(|c| c.any()) {
            return Err(
                "on the simulator the buggy kernels run only with checks on (GPU_MEM_SIM_CHECK=memcheck,racecheck,initcheck)"
                    .into(),
            );
        }
    }
    let device = runtime.device(0).map_err(|e| e.to_string())?;
    let mut owned: Vec<Box<dyn KernelArg>> = Vec::new();
    for arg in &case.args {
        owned.push(match *arg {
            Arg::F32Array(len, fill) => Box::new(array(&device, len, fill, |v| v as f32)?),
            Arg::I32Array(len, fill) => Box::new(array(&device, len, fill, |v| v as i32)?),
            Arg::F32(v) => Box::new(Scalar(v)),
            Arg::I32(v) => Box::new(Scalar(v)),
        });
    }
    let mut args: Vec<&mut dyn KernelArg> = Vec::with_capacity(owned.len());
    for arg in &mut owned {
        args.push(arg.as_mut());
    }
    let kernel = Kernel::from_source(&case.code, &case.kernel);
    let config = LaunchConfig::new(case.grid, case.block).with_shared_bytes(case.shared);
    // SAFETY: not safe, on purpose: the kernel is buggy. `run` is only made with
    // `--deliberately`, in a process of its own, on the simulator with checks (which stop each
    // bad access before it lands and name it) or on a GPU under compute-sanitizer; what the
    // kernel can touch there is device memory of this throwaway process.
    unsafe { device.launch(&kernel, config, &mut args) }.map_err(|e| e.to_string())?;
    device.synchronize().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_reads() {
        let cases = cases().unwrap();
        assert!(cases.len() >= 12, "{} cases", cases.len());
        for case in &cases {
            assert!(
                ["memcheck", "racecheck", "initcheck", "clean"].contains(&case.expect.as_str()),
                "{}: expect {}",
                case.name,
                case.expect
            );
            assert!(case.code.contains(&case.kernel), "{}", case.name);
        }
    }

    #[test]
    fn arguments_read_as_written() {
        assert_eq!(
            parse_arg("f32[256]=1").unwrap(),
            Arg::F32Array(256, Fill::Value(1.0))
        );
        assert_eq!(
            parse_arg("i32[128]=iota17").unwrap(),
            Arg::I32Array(128, Fill::Iota(17))
        );
        assert_eq!(
            parse_arg("f32[64]=uninit").unwrap(),
            Arg::F32Array(64, Fill::Uninit)
        );
        assert_eq!(parse_arg("i32=256").unwrap(), Arg::I32(256));
        assert!(parse_arg("u8=1").is_err());
        assert!(parse_arg("f32[x]=1").is_err());
    }
}
