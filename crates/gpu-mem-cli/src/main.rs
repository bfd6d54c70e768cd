//! `gpu-mem`: backend and device information, a bandwidth benchmark, and saved memory
//! snapshots read back.
//!
//! The backend is chosen as the library does: `GPU_MEM_BACKEND=auto|cuda|roc|sim` (default
//! `auto`), or `--backend`, which wins over the environment.

/// `println!` that never panics: a closed stdout (`gpu-mem info | head -3`) ends the program
/// quietly with success, and any other write error ends it with a message and failure.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics: a message nobody can read is dropped.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::error_line(format_args!($($arg)*))
    };
}

mod bench;
mod info;
mod memory;
mod output;
mod plot;
mod selftest;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "gpu-mem",
    version,
    about = "GPU memory management over CUDA, ROCm and a CPU simulator"
)]
struct Cli {
    /// Backend to use; default: $GPU_MEM_BACKEND, or auto when it is unset.
    #[arg(long, global = true, value_enum, ignore_case = true)]
    backend: Option<BackendArg>,
    #[command(subcommand)]
    command: Command,
}

/// The `--backend` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BackendArg {
    /// The first available of cuda, roc, sim.
    Auto,
    /// NVIDIA CUDA.
    Cuda,
    /// AMD ROCm (HSA).
    #[value(alias = "rocm", alias = "hsa")]
    Roc,
    /// The CPU simulator.
    #[value(alias = "simulator")]
    Sim,
}

impl From<BackendArg> for gpu_mem::BackendChoice {
    fn from(arg: BackendArg) -> Self {
        use gpu_mem::{BackendChoice, BackendKind};
        match arg {
            BackendArg::Auto => BackendChoice::Auto,
            BackendArg::Cuda => BackendChoice::Only(BackendKind::Cuda),
            BackendArg::Roc => BackendChoice::Only(BackendKind::Roc),
            BackendArg::Sim => BackendChoice::Only(BackendKind::Sim),
        }
    }
}

/// The backend choice and what set it.
#[derive(Debug, Clone, Copy)]
pub struct Selection {
    /// The choice.
    pub choice: gpu_mem::BackendChoice,
    /// Where it came from.
    pub source: Source,
}

/// What set the backend choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `--backend`.
    Flag,
    /// `GPU_MEM_BACKEND`.
    Environment,
    /// Neither: `auto`.
    Default,
}

impl std::fmt::Display for Selection {
    /// As a user would write it, and who did: `set by the environment: GPU_MEM_BACKEND=auto`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.source {
            Source::Flag => write!(f, "set by the flag: --backend {}", self.choice),
            Source::Environment => {
                write!(f, "set by the environment: GPU_MEM_BACKEND={}", self.choice)
            }
            Source::Default => write!(
                f,
                "default: {}, as neither --backend nor GPU_MEM_BACKEND is set",
                self.choice
            ),
        }
    }
}

fn selection(flag: Option<BackendArg>) -> gpu_mem::Result<Selection> {
    if let Some(arg) = flag {
        return Ok(Selection {
            choice: arg.into(),
            source: Source::Flag,
        });
    }
    let source = if std::env::var_os("GPU_MEM_BACKEND").is_some() {
        Source::Environment
    } else {
        Source::Default
    };
    Ok(Selection {
        choice: gpu_mem::BackendChoice::from_env()?,
        source,
    })
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Lists backends (with why each unavailable one is), devices, memory and warp size.
    Info {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Measures host-to-device, device-to-host and device-to-device bandwidth for pageable,
    /// pinned and mapped host memory (like CUDA's bandwidthTest).
    Bench(bench::BenchArgs),
    /// Runs a quick end-to-end check of the backend: transfers, streams, mapped memory, a kernel.
    Selftest {
        /// Device ordinal.
        #[arg(long, default_value_t = 0)]
        device: usize,
    },
    /// Prints the summary of a memory snapshot saved as JSON (`Device::memory_snapshot`) and
    /// draws its live memory over time by kind as SVG.
    Memory(memory::MemoryArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("GPU_MEM_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = selection(cli.backend).and_then(|selected| match cli.command {
        Command::Info { json } => info::run(selected, json),
        Command::Bench(args) => bench::run(selected.choice, &args),
        Command::Selftest { device } => selftest::run(selected.choice, device),
        Command::Memory(args) => memory::run(&args),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            errln!("gpu-mem: {error}");
            ExitCode::FAILURE
        }
    }
}
