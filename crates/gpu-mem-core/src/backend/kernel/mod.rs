//! What a kernel launch carries to a [`Backend`](super::Backend), on every backend (the book's
//! kernels chapter): the [`Kernel`] (its name, its portable source as an entry point of a
//! [`Module`], and the simulator's optional closure form), the [`LaunchConfig`] with its
//! [`Dim3`]s, and the arguments as the backend receives them ([`LaunchArg`]). Also what backends
//! read kernel code with: the declaration scanner ([`scan`]) and the names in compiled code
//! ([`compiled`]), and the portable sources gpu-mem ships ([`portable`]).
//!
//! Plain data: this module depends on `backend`'s `types` ([`DevicePtr`](super::DevicePtr)) and
//! on `error` only. It sits here, below the [`Backend`](super::Backend) trait that takes it; its
//! items are public through `crate::kernel`, which adds what the user passes and launches with
//! ([`KernelArg`](crate::KernelArg), [`Device::launch`](crate::Device::launch)) and sits above
//! the arrays and streams those are made of.

pub mod compiled;
mod config;
mod definition;
mod launch_arg;
mod module;
mod params;
pub mod portable;
pub mod scan;

pub use config::{Dim3, LaunchConfig};
pub use definition::{Kernel, KernelSource, SimForm};
pub use launch_arg::{LaunchArg, check_peer_arguments};
pub use module::Module;
pub use params::{CParameter, encode_parameters, encode_parameters_at};
