//! Kernels from the user's side (the book's kernels chapter): the arguments a user passes
//! ([`KernelArg`]: device arrays, records, [`Scalar`]s, host arrays with [`In`] / [`Out`] /
//! [`InOut`]), launching ([`Device::launch`](crate::Device::launch),
//! [`Stream::launch`](crate::Stream::launch)), and a module's variables from the host
//! ([`Device::symbol`](crate::Device::symbol)).
//!
//! What a launch carries to the backend — the [`Kernel`], its [`Module`], the [`LaunchConfig`]
//! and the [`LaunchArg`]s — is defined in `backend::kernel`, below the
//! [`Backend`](crate::Backend) trait that takes it, and re-exported here with the source scanner
//! ([`scan`]), the compiled-code names ([`compiled`]) and the shipped sources ([`portable`]).
//! This module sits on top: it may use arrays, host arrays, streams, memory and devices, and
//! nothing below it uses it. What runs *inside* a simulated thread (the closure vocabulary and
//! the executor) lives in the simulator crate.
//!
//! Launching is `unsafe`, as in every GPU API: the compiler cannot check what the kernel does
//! with the memory it is given. Everything around it is checked: argument types and shapes,
//! and on the simulator out-of-bounds indices, barrier divergence and shared-memory limits.

pub(crate) mod args;
mod launch;
mod symbols;

pub use crate::backend::kernel::{
    CParameter, Dim3, Kernel, KernelSource, LaunchArg, LaunchConfig, Module, SimForm,
    check_peer_arguments, compiled, encode_parameters, encode_parameters_at, portable, scan,
};
pub use args::{DevicePointer, In, InOut, KernelArg, Out, Prepared, Scalar};
pub use symbols::AsModule;
