//! Backend-free core of gpu-mem.
//!
//! This crate has no FFI. It holds the element types, the layout math, the one error enum, the
//! object-safe [`Backend`] trait, and the user-facing types written once against that trait:
//! [`Device`], [`DeviceArray`], [`DeviceRecord`], [`PinnedArray`], [`MappedArray`],
//! [`Registered`], [`Stream`] and [`Event`].
//!
//! Soundness rules (the book's soundness chapter): no safe call lets host memory be freed, moved or written while
//! an asynchronous operation still uses it, and device memory dropped while a stream still uses
//! it is freed only after that work.

pub mod array;
pub mod backend;
mod device;
#[cfg(feature = "dlpack")]
pub mod dlpack;
pub mod element;
pub mod error;
pub mod host;
pub mod ipc;
pub mod kernel;
pub mod layout;
mod memory;
pub mod pool;
pub mod smart;
mod stream;

/// The `ndarray` version this crate's host arrays are made of.
pub use ndarray;

pub use array::{DeviceArray, DeviceRecord, ExternalUse, Field, LayoutSource, RawParts};
pub use backend::Backend;

/// The portable kernel prelude `gpu_mem.h` (the book's kernels chapter): thread indices, shared and local
/// arrays, barriers, atomics, warp collectives and the array argument type, for kernel source
/// compiled by NVRTC (CUDA), hiprtc (ROC) or the host C++ compiler (the simulator's branch).
pub const KERNEL_PRELUDE: &str = include_str!("../include/gpu_mem.h");
pub use device::Device;
pub use element::Element;
pub use error::{BackendKind, Error, Result};
pub use host::{
    HostDestination, HostSource, ManagedArray, MapFlags, MappedArray, PinnedArray, Registered,
    Rejected,
};
pub use ipc::IpcArrayHandle;
pub use kernel::{
    Dim3, DevicePointer, In, InOut, Kernel, KernelArg, LaunchConfig, Module, Out, Scalar,
};
pub use layout::{Layout, Order, ReshapeOrder};
pub use pool::MemoryPool;
pub use smart::{SmartArray, Where};
pub use stream::{AutoSynchronize, Event, Stream};
