//! gpu-mem: Numba's GPU memory-management API for Rust, over NVIDIA CUDA, AMD ROCm (HSA) and a
//! CPU simulator, with the backend chosen at run time (`GPU_MEM_BACKEND=auto|cuda|roc|sim`).
//!
//! Allocation, transfers, a stream with page-locked memory, assignment to a view, and a kernel
//! written once as portable source:
//!
//! ```
//! use gpu_mem::prelude::*;
//! use gpu_mem::ndarray::{Array1, array}; // ndarray, re-exported: no version to match
//!
//! # #[cfg(feature = "sim")] // runs wherever a backend can open: the simulator always can
//! # fn main() -> gpu_mem::Result<()> {
//! let dev = Runtime::from_env()?.device(0)?;            // a GPU, or the simulator
//! let mut d = dev.device_array::<f32>(&[4], Order::C)?; // cuda.device_array(4)
//! d.copy_from_host(&array![1.0f32, 2.0, 3.0, 4.0])?;    // d.copy_to_device(host)
//! d.slice(s![..;2])?.fill(0.0)?;                        // d[::2] = 0
//!
//! let stream = dev.stream()?;                           // cuda.stream()
//! let mut pinned = dev.pinned_array::<f32>(&[4])?;      // cuda.pinned_array(4)
//! stream.copy_to_host(&d, &mut pinned)?;                // async D2H into page-locked memory
//! stream.synchronize()?;
//! assert_eq!(pinned.view()?.iter().copied().collect::<Vec<_>>(), [0.0, 2.0, 0.0, 4.0]);
//!
//! const SCALE: &str = r#"
//! #include "gpu_mem.h"
//! extern "C" __global__ void scale(gm_array<float, 1> a, float k) {
//!     const long long i = grid(1);
//!     if (i < a.shape[0]) a(i) *= k;
//! }"#;
//! let kernel = Kernel::from_source(SCALE, "scale");      // NVRTC, hiprtc or the host C++ compiler
//! // SAFETY: the kernel touches a(i) only for i < len.
//! unsafe { dev.launch(&kernel, LaunchConfig::for_items(4, 128), &mut [&mut d, &mut Scalar(10.0f32)])? };
//! assert_eq!(d.copy_to_host()?, Array1::from(vec![0.0f32, 20.0, 0.0, 40.0]).into_dyn());
//! # Ok(()) }
//! # #[cfg(not(feature = "sim"))]
//! # fn main() {}
//! ```
//!
//! The book — guide, Numba-to-gpu-mem map, soundness rules, backend notes — is in the
//! repository's [`docs/`](https://github.com/gpu-mem/gpu-mem/tree/main/docs/src) (`mdbook build
//! docs`).
//!
//! Cargo features `cuda`, `roc` and `sim` choose which backends are compiled in (all three by
//! default); asking at run time for one that is not compiled in is an error that says so.
//! [`backends`] reports each backend with its availability and the reason when it is
//! unavailable. Every failure is an [`Error`], never a panic.

/// The `ndarray` version gpu-mem's host arrays are made of, so a program need not match it.
pub use ndarray;

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
        ManagedArray, MapFlags, MappedArray, MemoryPool, Order, Out, PinnedArray, Registered,
        ReshapeOrder, Result, Scalar, SmartArray, Stream, Where,
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
