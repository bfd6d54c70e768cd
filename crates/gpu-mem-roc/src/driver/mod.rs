//! Driver layer: the HSA runtime and HIP libraries loaded at run time.
//!
//! # Contract
//!
//! * Libraries are opened with `libloading`; nothing links against ROCm at build time.
//! * Every function of the generated declarations (`gpu-mem-hsa-sys`, `gpu-mem-hip-sys`) is
//!   resolved into an `Option<fn>` of a table defined with `gpu_mem_loader::symbol_table!`
//!   (shared with the CUDA backend); a missing library or symbol is an
//!   [`Error`](gpu_mem_core::Error) naming it and the paths tried, never a panic. A symbol an
//!   older runtime lacks only disables what needs it.
//! * One thin method per native call, converting status codes into `Result` with the runtime's
//!   own text. No policy lives here: which pool to use, how to order work, is the backend's job.

pub mod comgr;
pub mod hip;
pub mod hsa;
mod loader;

pub use comgr::Comgr;
pub use hip::Hip;
pub use hsa::Hsa;
pub use loader::Opened;
