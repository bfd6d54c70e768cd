//! gpu-mem: Numba's GPU memory-management API for Rust, over NVIDIA CUDA, AMD ROCm (HSA) and a
//! CPU simulator, with the backend chosen at run time.
//!
//! ```
//! use gpu_mem::prelude::*;
//! use ndarray::array;
//!
//! # #[cfg(feature = "sim")] // runs wherever a backend can open: the simulator always can
//! # fn main() -> gpu_mem::Result<()> {
//! let runtime = Runtime::from_env()?;          // GPU_MEM_BACKEND=auto|cuda|roc|sim
//! let device = runtime.device(0)?;
//! let host = array![[1.0f32, 2.0], [3.0, 4.0]];
//! let mut d = device.to_device(&host)?;        // cuda.to_device
//! d.set(&[0, 1], 20.0)?;                       // d[0, 1] = 20
//! assert_eq!(d.copy_to_host()?, array![[1.0f32, 20.0], [3.0, 4.0]].into_dyn());
//! # Ok(()) }
//! # #[cfg(not(feature = "sim"))]
//! # fn main() {}
//! ```
//!
//! Cargo features `cuda`, `roc` and `sim` choose which backends are compiled in (all three by
//! default); asking at run time for one that is not compiled in is an error that says so. [`backends`] reports each backend with its availability and the reason when it is
//! unavailable.

pub mod kernels;
mod runtime;

pub use gpu_mem_core::*;
pub use runtime::{BackendChoice, BackendStatus, Runtime, backends};

/// The simulator backend, for configuring it in code.
#[cfg(feature = "sim")]
pub use gpu_mem_sim as sim;

/// Everything a typical program needs.
pub mod prelude {
    pub use crate::runtime::{BackendChoice, Runtime, backends};
    pub use gpu_mem_core::{
        Device, DeviceArray, DeviceRecord, Element, Error, Event, In, InOut, Kernel, LaunchConfig,
        MapFlags, MappedArray, Order, Out, PinnedArray, Registered, ReshapeOrder, Result, Scalar,
        SmartArray, Stream, Where,
    };
    /// Closure kernels, which only the simulator runs.
    #[cfg(feature = "sim")]
    pub use gpu_mem_sim::thread::{Fence, SimKernel, ThreadCtx};
    pub use ndarray::s;
}

/// The README's examples, compiled and run as doctests (they need a backend that opens on any
/// machine: the simulator).
#[cfg(all(doctest, feature = "sim"))]
#[doc = include_str!("../../../README.md")]
struct ReadmeDoctests;

/// The book's guide pages, whose examples are compiled and run as doctests.
#[cfg(all(doctest, feature = "sim"))]
mod book_doctests {
    #[doc = include_str!("../../../docs/src/guide/getting-started.md")]
    struct GettingStarted;
    #[doc = include_str!("../../../docs/src/guide/choosing-a-backend.md")]
    struct ChoosingABackend;
    #[doc = include_str!("../../../docs/src/guide/arrays-and-transfers.md")]
    struct ArraysAndTransfers;
    #[doc = include_str!("../../../docs/src/guide/host-memory.md")]
    struct HostMemory;
    #[doc = include_str!("../../../docs/src/guide/streams-and-events.md")]
    struct StreamsAndEvents;
    #[doc = include_str!("../../../docs/src/guide/kernels.md")]
    struct Kernels;
}
