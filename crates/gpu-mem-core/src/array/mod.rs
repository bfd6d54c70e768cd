//! Device arrays: [`DeviceArray`] (Numba's `DeviceNDArray`) and [`DeviceRecord`].
//!
//! An array is a [`Layout`](crate::layout::Layout) over shared storage — device memory owned
//! by gpu-mem, or mapped host memory — plus the byte offset of its first logical element. Views
//! (slices, reshapes, splits, `view_as`) share the storage; the memory is released when the last
//! array and the last in-flight operation using it are gone.
//!
//! Arrays sit above streams: this module may use `stream`, `memory` (where the `Storage`
//! behind an array is defined), `device`, `backend` (with the kernel definitions, for the copy
//! kernel of `assign`), `layout`, `element` and `error`. It knows nothing of host arrays
//! (`host`) or of kernel arguments and launches (`kernel`), which are built on it. The
//! asynchronous copies of arrays on a stream are here (`stream_transfer`), next to the
//! synchronous ones (`transfer`).

mod assign;
mod create;
pub(crate) mod device_array;
pub(crate) mod host_layout;
mod raw;
mod record;
mod stream_transfer;
pub(crate) mod transfer;
mod views;

pub use create::LayoutSource;
pub use device_array::DeviceArray;
pub(crate) use device_array::span_bytes as span_bytes_of;
pub use raw::{ExternalUse, RawParts};
pub use record::{DeviceRecord, Field};
