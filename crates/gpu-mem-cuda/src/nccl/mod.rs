//! The NCCL layer (feature `nccl`): `libnccl.so.2` loaded at run time like the driver, one thin
//! function per NCCL call.
//!
//! # Contract
//!
//! * [`Nccl::load`] finds the library (`GPU_MEM_NCCL_LIBRARY`, else `libnccl.so.2`,
//!   `libnccl.so`) through the loader shared with the driver: once per process, never unloaded.
//!   A missing library is [`Error::LibraryLoad`](gpu_mem_core::Error::LibraryLoad) listing every
//!   path tried; a library without a call gpu-mem needs, or older than [`MIN_NCCL_VERSION`],
//!   is the same error naming the library and saying why, never a panic.
//! * Every symbol is resolved by its exported name into an `Option<fn>` (the generated table of
//!   `gpu-mem-nccl-sys`); nothing is declared by hand.
//! * Every `ncclResult_t` other than `ncclSuccess` becomes
//!   [`Error::Native`](gpu_mem_core::Error::Native) with the call, the code, NCCL's name of it
//!   (`ncclGetErrorString`) and NCCL's last error text (`ncclGetLastError`, 2.13 and later).
//! * Nothing here makes a context current or keeps state besides the library and its table:
//!   the backend (`backend/collective.rs`) makes the device's primary context current first,
//!   which is the context NCCL's runtime calls then use.

mod api;

pub use api::{MIN_NCCL_VERSION, NCCL_LIBRARY, Nccl, decode_version};
pub use gpu_mem_nccl_sys::nccl as sys;
