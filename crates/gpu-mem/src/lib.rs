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
//! The book (guide, Numba-to-gpu-mem map, soundness rules, backend notes) is in the repository's
//! [`docs/`](https://github.com/gpu-mem/gpu-mem/tree/main/docs/src): `mdbook build docs`.
//!
//! Cargo features `cuda`, `roc` and `sim` choose which backends are compiled in (all three by
//! default); asking at run time for one that is not compiled in is an error that says so.
//! [`backends`] reports each backend with its availability and the reason when it is
//! unavailable. Every failure is an [`Error`], never a panic. Feature `nccl` adds
//! [`collective`]: NCCL/RCCL collectives over arrays and streams (the simulator's model of NCCL
//! between its devices where there is no GPU).

/// The `ndarray` version gpu-mem's host arrays are made of, so a program need not match it.
pub use ndarray;

pub mod kernels;
mod runtime;

pub use gpu_mem_core::*;
pub use runtime::{BackendChoice, BackendStatus, Runtime, backends};

/// The simulator backend, for configuring it in code.
#[cfg(feature = "sim")]
pub use gpu_mem_sim as sim;

/// Interop with the cudarc crate (feature `cudarc`, CUDA only); `gpu_mem::cudarc::driver` is
/// cudarc's driver module.
#[cfg(feature = "cudarc")]
pub use gpu_mem_cuda::cudarc;

/// Everything a typical program needs.
pub mod prelude {
    pub use crate::runtime::{BackendChoice, Runtime, backends};
    pub use gpu_mem_core::{
        Device, DeviceArray, DevicePointer, DeviceRecord, Element, Error, Event, In, InOut, Kernel,
        LaunchConfig, ManagedArray, MapFlags, MappedArray, MemoryPool, Module, Order, Out,
        PinnedArray, Registered, ReshapeOrder, Result, Scalar, SmartArray, Stream, Where,
    };
    /// Closure kernels (plain or async), which only the simulator runs.
    #[cfg(feature = "sim")]
    pub use gpu_mem_sim::thread::{AsyncThreadCtx, Fence, SimKernel, ThreadCtx};
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
    #[doc = include_str!("../../../docs/src/guide/where-memory-goes.md")]
    struct WhereMemoryGoes;
    /// (Its collectives example runs on two simulated devices; the other blocks are ignored.)
    #[cfg(feature = "nccl")]
    #[doc = include_str!("../../../docs/src/guide/interop-and-multi-gpu.md")]
    struct InteropAndMultiGpu;
}

/// [`Stream::from_raw_handle`] on the simulator: a stream adopting another stream's handle.
#[cfg(all(test, feature = "sim"))]
mod borrowed_stream_tests {
    #![allow(clippy::unwrap_used)]

    use crate::prelude::*;
    use crate::{BackendKind, Error};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Keeps the original stream alive and says when it was dropped.
    struct Owner {
        _stream: Arc<Stream>,
        dropped: Arc<AtomicBool>,
    }

    impl Drop for Owner {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    fn round_trip(stream: &Stream, values: &[f32]) -> Result<Vec<f32>> {
        let dev = stream.device();
        let host = ndarray::Array1::from(values.to_vec());
        let d = stream.to_device(&host)?;
        let mut pinned = dev.pinned_array::<f32>(&[values.len()])?;
        stream.copy_to_host(&d, &mut pinned)?;
        stream.synchronize()?;
        Ok(pinned.view()?.iter().copied().collect())
    }

    #[test]
    fn adopted_handle_is_used_and_not_destroyed() {
        let dev = Runtime::open_kind(BackendKind::Sim)
            .unwrap()
            .device(0)
            .unwrap();
        let original = Arc::new(dev.stream().unwrap());
        let dropped = Arc::new(AtomicBool::new(false));
        let owner = Owner {
            _stream: Arc::clone(&original),
            dropped: Arc::clone(&dropped),
        };
        // SAFETY: the handle is a live simulator stream of `dev` from the same backend; the
        // owner keeps the `Stream` that destroys it alive until the adopted stream is dropped.
        let adopted = unsafe { Stream::from_raw_handle(&dev, original.handle(), owner) };
        assert!(!adopted.owns_handle());
        assert!(original.owns_handle());
        assert_eq!(adopted.handle(), original.handle());

        assert_eq!(
            round_trip(&adopted, &[1.0, 2.0, 3.0]).unwrap(),
            [1.0, 2.0, 3.0]
        );
        // Work left in flight at the drop: the drop waits for it, then releases the owner.
        let pending = adopted
            .to_device(&ndarray::Array1::from(vec![7.0f32; 1024]))
            .unwrap();
        assert!(!dropped.load(Ordering::SeqCst));
        drop(adopted);
        assert!(dropped.load(Ordering::SeqCst));
        assert_eq!(pending.copy_to_host().unwrap()[[1023]], 7.0);

        // The original still works: the adopted stream did not destroy the handle.
        assert_eq!(Arc::strong_count(&original), 1);
        assert_eq!(round_trip(&original, &[4.0, 5.0]).unwrap(), [4.0, 5.0]);
        let original = Arc::into_inner(original).unwrap();
        drop(original);
    }

    #[test]
    fn a_destroyed_handle_is_refused() {
        // What the test above relies on: using a handle after its stream is gone is an error.
        let dev = Runtime::open_kind(BackendKind::Sim)
            .unwrap()
            .device(0)
            .unwrap();
        let handle = dev.stream().unwrap().handle();
        // SAFETY: deliberately a destroyed handle: the simulator checks handles and refuses it
        // (the contract is broken only towards the simulator, which reports it as an error).
        let stale = unsafe { Stream::from_raw_handle(&dev, handle, ()) };
        assert!(matches!(
            stale.synchronize(),
            Err(Error::InvalidHandle { kind: "stream", .. })
        ));
        std::mem::forget(stale);
    }
}
