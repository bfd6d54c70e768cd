//! Host memory the device can use directly: [`PinnedArray`] (Numba's `pinned_array`),
//! [`MappedArray`] (`mapped_array`), and [`Registered`] (the `pinned()`, `mapped()` and ROC's
//! `register()` guards over existing arrays).
//!
//! These are what the asynchronous stream operations accept, because their memory is
//! page-locked and its lifetime is shared with the stream (the book's soundness chapter): a stream keeps the
//! buffer alive until its work is done, and host access waits for that work.
//!
//! Mapped memory is also visible to the device while the host holds it, so its host side is
//! reached by copying ([`MappedArray::read`], [`MappedArray::write`]) or through `unsafe`
//! views whose contract is that no device work touches the memory meanwhile.
//!
//! This module sits above arrays and streams: mapped and managed memory and registrations give
//! device views ([`DeviceArray`](crate::DeviceArray)), and the page-locked types are the host
//! memory of stream copies (`source`, for the traits `stream` defines). It may use `array`,
//! `stream`, `memory`, `device`, `backend`, `layout`, `element` and `error`; only `kernel` and
//! the interop modules above use it.

pub(crate) mod managed;
mod managed_hints;
pub(crate) mod mapped;
pub(crate) mod pinned;
mod registered;
mod source;

pub use crate::stream::{HostDestination, HostSource};
pub use managed::ManagedArray;
pub use managed_hints::{Advice, MemoryLocation};
pub use mapped::{MapFlags, MappedArray};
pub use pinned::PinnedArray;
pub use registered::{Registered, Rejected};

use crate::array::LayoutSource;
use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;

/// Page-locked, mapped and managed arrays are host arrays to Numba (`device_array_like(pinned)`),
/// and give their layout as such, without waiting for stream work on them.
macro_rules! host_array_layout_source {
    ($($array:ident),*) => {$(
        impl<T: Element> LayoutSource for $array<T> {
            type Elem = T;
            fn source_layout(&self) -> Result<Layout> {
                Ok(self.layout.clone())
            }
        }
    )*};
}
host_array_layout_source!(PinnedArray, MappedArray, ManagedArray);
