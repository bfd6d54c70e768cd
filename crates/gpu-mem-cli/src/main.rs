//! `gpu-mem`: backend and device information, and a bandwidth benchmark.
//!
//! The backend is chosen as the library does: `GPU_MEM_BACKEND=auto|cuda|roc|sim` (default
//! `auto`), or `--backend`.

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
mod output;
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
    /// Backend to use (auto, cuda, roc, sim); default: $GPU_MEM_BACKEND or auto.
    #[arg(long, global = true)]
    backend: Option<String>,
    #[command(subcommand)]
    command: Command,
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
    let choice = match cli.backend.as_deref() {
        Some(name) => name.parse(),
        None => gpu_mem::BackendChoice::from_env(),
    };
    let result = choice.and_then(|choice| match cli.command {
        Command::Info { json } => info::run(choice, json),
        Command::Bench(args) => bench::run(choice, &args),
        Command::Selftest { device } => selftest::run(choice, device),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            errln!("gpu-mem: {error}");
            ExitCode::FAILURE
        }
    }
}
