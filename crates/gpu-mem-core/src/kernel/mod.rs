//! Kernels: what a launch needs on every backend, and the device-side vocabulary of the
//! simulator (DESIGN.md §5).
//!
//! A [`Kernel`] carries each backend's form of the code: a Rust closure run once per simulated
//! thread (the simulator), and portable source text compiled with the `gpu_mem.h` prelude
//! (CUDA through NVRTC, ROC through hiprtc). A backend that lacks its form says so at launch.
//!
//! Launching is `unsafe`, as in every GPU API: the compiler cannot check what the kernel does
//! with the memory it is given. Everything around it is checked: argument types and shapes on
//! the simulator, out-of-bounds indices, barrier divergence, shared-memory limits.

pub(crate) mod args;
mod atomics;
mod config;
mod device_arrays;
mod launch;
mod launch_arg;
mod local_arrays;
pub mod portable;
mod program;
mod thread;

pub use args::{In, InOut, KernelArg, Out, Prepared, Scalar};
pub use atomics::AtomicElement;
pub use config::{Dim3, LaunchConfig};
pub use device_arrays::{GlobalArray, GlobalRecord};
pub use launch_arg::LaunchArg;
pub use local_arrays::{LocalArray, SharedArray};
pub use program::{Kernel, KernelSource, SimKernelFn};
pub use thread::{ArgView, BarrierScope, Fence, ThreadCtx, ThreadOps};
