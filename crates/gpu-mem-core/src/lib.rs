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

mod accounting;
pub mod allocator;
pub mod array;
pub mod backend;
#[cfg(feature = "collectives")]
pub mod collective;
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
#[doc(hidden)]
pub mod sync;
#[cfg(feature = "testing")]
pub mod testing;
mod units;
pub mod usage;

/// The `ndarray` version this crate's host arrays are made of.
pub use ndarray;

pub use array::{DeviceArray, DeviceRecord, ExternalUse, Field, LayoutSource, RawParts};
pub use backend::Backend;

/// The portable kernel prelude `gpu_mem.h` (the book's kernels chapter): thread indices, shared and local
/// arrays, barriers, atomics, warp collectives and the array argument type, for kernel source
/// compiled by NVRTC (CUDA), hiprtc (ROC) or the host C++ compiler (the simulator's branch).
pub const KERNEL_PRELUDE: &str = include_str!("../include/gpu_mem.h");

/// The headers NVRTC and hiprtc are given by name besides the prelude, `(include name,
/// contents)`: the C library's (`<math.h>`, `<stdio.h>`, `<assert.h>`, `<stdint.h>`,
/// `<time.h>`, their `<c...>` forms and the limits), which kernels include and those compilers lack (their
/// functions are built in there), and CUDA's `<math_constants.h>`. The simulator's host
/// compiler has the C library's real ones, and takes `math_constants.h` from here too.
pub const RTC_HEADERS: &[(&str, &str)] = &[
    ("math.h", include_str!("../include/rtc/math.h")),
    ("cmath", include_str!("../include/rtc/cmath")),
    ("stdio.h", include_str!("../include/rtc/stdio.h")),
    ("cstdio", include_str!("../include/rtc/cstdio")),
    ("stdlib.h", include_str!("../include/rtc/stdlib.h")),
    ("cstdlib", include_str!("../include/rtc/cstdlib")),
    ("string.h", include_str!("../include/rtc/string.h")),
    ("cstring", include_str!("../include/rtc/cstring")),
    ("assert.h", include_str!("../include/rtc/assert.h")),
    ("cassert", include_str!("../include/rtc/cassert")),
    ("stdint.h", include_str!("../include/rtc/stdint.h")),
    ("cstdint", include_str!("../include/rtc/cstdint")),
    ("float.h", include_str!("../include/rtc/float.h")),
    ("cfloat", include_str!("../include/rtc/cfloat")),
    ("limits.h", include_str!("../include/rtc/limits.h")),
    ("climits", include_str!("../include/rtc/climits")),
    ("stddef.h", include_str!("../include/rtc/stddef.h")),
    ("cstddef", include_str!("../include/rtc/cstddef")),
    ("time.h", include_str!("../include/rtc/time.h")),
    ("ctime", include_str!("../include/rtc/ctime")),
    (
        "math_constants.h",
        include_str!("../include/rtc/math_constants.h"),
    ),
];
pub use allocator::DeviceAllocator;
pub use device::Device;
pub use element::Element;
pub use error::{BackendKind, Error, Result};
pub use host::{
    Advice, HostDestination, HostSource, ManagedArray, MapFlags, MappedArray, MemoryLocation,
    PinnedArray, Registered, Rejected,
};
pub use ipc::IpcArrayHandle;
pub use kernel::{
    DevicePointer, Dim3, In, InOut, Kernel, KernelArg, LaunchConfig, Module, Out, Scalar,
};
pub use layout::{Layout, Order, ReshapeOrder};
pub use memory::RawDeviceMemory;
pub use pool::MemoryPool;
pub use smart::{SmartArray, Where};
pub use stream::{AutoSynchronize, Event, Stream};
pub use usage::{MemoryKind, MemorySnapshot, MemoryStats, assert_no_leaks};
