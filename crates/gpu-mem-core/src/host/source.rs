//! The page-locked types as host memory for asynchronous stream operations: [`HostSource`] and
//! [`HostDestination`] (defined with the stream, whose copies take them) for [`PinnedArray`],
//! [`MappedArray`] and [`Registered`], whose memory the copies use in place.

use crate::element::Element;
use crate::error::Result;
use crate::host::{MappedArray, PinnedArray, Registered};
use crate::stream::{HostDestination, HostMemory, HostMemoryMut, HostSource, LockedMemory, Sealed};
use ndarray::Dimension;

impl<T: Element> Sealed for PinnedArray<T> {}
impl<T: Element> HostSource<T> for PinnedArray<T> {
    fn host_memory(&self) -> Result<HostMemory<'_, T>> {
        Ok(HostMemory::Locked(LockedMemory {
            buffer: &self.buffer,
            first: 0,
            layout: &self.layout,
        }))
    }
}
impl<T: Element> HostDestination<T> for PinnedArray<T> {
    fn host_memory_mut(&mut self) -> Result<HostMemoryMut<'_, T>> {
        Ok(HostMemoryMut::Locked(LockedMemory {
            buffer: &self.buffer,
            first: 0,
            layout: &self.layout,
        }))
    }
}

impl<T: Element> Sealed for MappedArray<T> {}
impl<T: Element> HostSource<T> for MappedArray<T> {
    fn host_memory(&self) -> Result<HostMemory<'_, T>> {
        Ok(HostMemory::Locked(LockedMemory {
            buffer: &self.buffer,
            first: 0,
            layout: &self.layout,
        }))
    }
}
impl<T: Element> HostDestination<T> for MappedArray<T> {
    fn host_memory_mut(&mut self) -> Result<HostMemoryMut<'_, T>> {
        Ok(HostMemoryMut::Locked(LockedMemory {
            buffer: &self.buffer,
            first: 0,
            layout: &self.layout,
        }))
    }
}

impl<T: Element, D: Dimension> Sealed for Registered<T, D> {}
impl<T: Element, D: Dimension + 'static> HostSource<T> for Registered<T, D> {
    fn host_memory(&self) -> Result<HostMemory<'_, T>> {
        Ok(HostMemory::Locked(self.locked()))
    }
}
impl<T: Element, D: Dimension + 'static> HostDestination<T> for Registered<T, D> {
    fn host_memory_mut(&mut self) -> Result<HostMemoryMut<'_, T>> {
        Ok(HostMemoryMut::Locked(self.locked()))
    }
}

impl<T: Element, D: Dimension + 'static> Registered<T, D> {
    fn locked(&self) -> LockedMemory<'_> {
        LockedMemory {
            buffer: &self.buffer,
            first: self.layout.min_offset().unsigned_abs() * T::itemsize(),
            layout: &self.layout,
        }
    }
}
