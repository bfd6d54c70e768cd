//! What a kernel launch carries, on every backend (the book's kernels chapter): the [`Kernel`] (its name, its
//! portable source, and the simulator's optional closure form), the [`LaunchConfig`] with its
//! [`Dim3`]s, the arguments a user passes ([`KernelArg`]: device arrays, records, [`Scalar`]s,
//! host arrays with [`In`] / [`Out`] / [`InOut`]) and what a backend receives for them
//! ([`LaunchArg`]).
//!
//! What runs *inside* a simulated thread (the closure vocabulary and the executor) lives in the
//! simulator crate; the [`Backend`](crate::Backend) trait needs only this module.
//!
//! Launching is `unsafe`, as in every GPU API: the compiler cannot check what the kernel does
//! with the memory it is given. Everything around it is checked: argument types and shapes,
//! and on the simulator out-of-bounds indices, barrier divergence and shared-memory limits.

pub(crate) mod args;
pub mod compiled;
mod config;
mod definition;
mod launch;
mod launch_arg;
mod module;
pub mod portable;
pub mod scan;
mod symbols;

pub use args::{DevicePointer, In, InOut, KernelArg, Out, Prepared, Scalar};
pub use config::{Dim3, LaunchConfig};
pub use definition::{Kernel, KernelSource, SimForm};
pub use launch_arg::{LaunchArg, check_peer_arguments};
pub use module::Module;
pub use symbols::AsModule;
