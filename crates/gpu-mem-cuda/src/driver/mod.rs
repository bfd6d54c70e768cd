//! The CUDA driver layer: `libcuda.so.1` loaded at run time, one thin function per call.
//!
//! # Contract
//!
//! * [`CudaDriver::load`] finds the driver (`GPU_MEM_CUDA_LIBRARY`, else `libcuda.so.1`); a
//!   missing library is [`Error::LibraryLoad`](gpu_mem_core::Error::LibraryLoad) listing every
//!   path tried, never a panic.
//! * Every symbol is resolved by its exported name into an `Option<fn>` when the library is
//!   loaded. Symbols are bound at the versions old drivers export (see `gpu-mem-cuda-sys`); a
//!   symbol the driver lacks only makes the calls that need it fail with
//!   [`Error::MissingSymbol`](gpu_mem_core::Error::MissingSymbol).
//! * Every `CUresult` other than success becomes
//!   [`Error::Native`](gpu_mem_core::Error::Native) with the code's name and description.
//! * Nothing here keeps state besides the library and its symbol table; contexts, streams and
//!   policy live in the backend.

mod api;
pub mod library;
mod result;
pub(crate) mod symbols;

pub use api::{CUDA_DRIVER_LIBRARY, CudaDriver, DEVICE_LOST_RECOVERY, is_device_fault};
pub use gpu_mem_cuda_sys::driver as sys;
