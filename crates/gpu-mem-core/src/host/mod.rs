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

pub(crate) mod managed;
pub(crate) mod mapped;
pub(crate) mod pinned;
mod registered;
pub(crate) mod source;

pub use managed::ManagedArray;
pub use mapped::{MapFlags, MappedArray};
pub use pinned::PinnedArray;
pub use registered::{Registered, Rejected};
pub use source::{HostDestination, HostSource};
