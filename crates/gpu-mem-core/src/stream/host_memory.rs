//! What asynchronous stream operations accept as host memory.
//!
//! [`HostSource`] (read by host-to-device copies) and [`HostDestination`] (written by
//! device-to-host copies) are implemented by the page-locked types and by plain ndarray arrays.
//! Page-locked memory is used in place and truly asynchronously. Plain (pageable) arrays follow
//! the CUDA rule: a source is staged through a page-locked buffer before the call returns, so
//! the array is free again at once; a destination is filled through a staging buffer and the call
//! waits for the stream before returning.
//!
//! The traits are defined with the stream, whose copies take them, and sealed. Their
//! implementations for the page-locked types are written with those types (`host/source.rs`),
//! which sit above streams; the ones for ndarray arrays are here.

use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;
use crate::memory::HostBuffer;
use ndarray::{ArrayBase, ArrayViewD, ArrayViewMutD, Data, DataMut, Dimension};
use std::sync::Arc;

/// Host memory as a stream operation sees it.
#[derive(Debug)]
pub enum HostMemory<'a, T: Element> {
    /// Page-locked memory used in place.
    #[doc(hidden)]
    Locked(LockedMemory<'a>),
    /// Pageable memory, staged through a page-locked buffer.
    #[doc(hidden)]
    Pageable(ArrayViewD<'a, T>),
}

/// Pageable memory written by a device-to-host copy.
#[derive(Debug)]
pub enum HostMemoryMut<'a, T: Element> {
    /// Page-locked memory used in place.
    #[doc(hidden)]
    Locked(LockedMemory<'a>),
    /// Pageable memory, filled through a page-locked buffer.
    #[doc(hidden)]
    Pageable(ArrayViewMutD<'a, T>),
}

/// A page-locked buffer and the array inside it.
#[derive(Debug)]
pub struct LockedMemory<'a> {
    pub(crate) buffer: &'a Arc<HostBuffer>,
    /// Byte offset of the array's first logical element from the buffer base.
    pub(crate) first: usize,
    pub(crate) layout: &'a Layout,
}

mod sealed {
    pub trait Sealed {}
}

// What seals `HostSource` and `HostDestination`: the page-locked types implement it where they
// are defined, and nothing outside the crate can name it.
pub(crate) use sealed::Sealed;

/// Host memory a host-to-device stream copy can read.
pub trait HostSource<T: Element>: sealed::Sealed {
    /// How the operation reaches the memory.
    #[doc(hidden)]
    fn host_memory(&self) -> Result<HostMemory<'_, T>>;
}

/// Host memory a device-to-host stream copy can write.
pub trait HostDestination<T: Element>: sealed::Sealed {
    /// How the operation reaches the memory.
    #[doc(hidden)]
    fn host_memory_mut(&mut self) -> Result<HostMemoryMut<'_, T>>;
}

impl<S: Data, D: Dimension> sealed::Sealed for ArrayBase<S, D> {}
impl<S, D> HostSource<S::Elem> for ArrayBase<S, D>
where
    S: Data,
    S::Elem: Element,
    D: Dimension,
{
    fn host_memory(&self) -> Result<HostMemory<'_, S::Elem>> {
        Ok(HostMemory::Pageable(self.view().into_dyn()))
    }
}
impl<S, D> HostDestination<S::Elem> for ArrayBase<S, D>
where
    S: DataMut,
    S::Elem: Element,
    D: Dimension,
{
    fn host_memory_mut(&mut self) -> Result<HostMemoryMut<'_, S::Elem>> {
        Ok(HostMemoryMut::Pageable(self.view_mut().into_dyn()))
    }
}
