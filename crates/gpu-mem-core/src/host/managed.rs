//! [`ManagedArray`]: managed (unified) memory, one allocation the host and the device both
//! address (Numba's `cuda.managed_array`).
//!
//! Backends: CUDA `cuMemAllocManaged(CU_MEM_ATTACH_GLOBAL)` (the host and device addresses are
//! the same); ROC: fine-grained system memory every agent may access; the simulator: a device
//! allocation counted against the device's capacity whose memory the host reaches too.
//!
//! The soundness rules are those of mapped memory: the device may read and write the memory at
//! any time while work is in flight, so the host side is reached by copying
//! ([`ManagedArray::read`], [`ManagedArray::write`], ordered after the device's work) or through
//! `unsafe` views whose contract is that no device work touches the memory meanwhile. Kernels and
//! stream copies use it through [`ManagedArray::device_view`], or take the array itself as a
//! launch argument. Where the memory should live is hinted with [`ManagedArray::prefetch`] and
//! [`ManagedArray::advise`] (`managed_hints`).

use crate::array::{DeviceArray, LayoutSource};
use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::host::pinned::allocate_zeroed;
use crate::layout::{Layout, Order};
use crate::memory::{Access, HostBuffer};
use ndarray::{ArrayBase, ArrayD, ArrayViewD, ArrayViewMutD, Data, Dimension};
use std::marker::PhantomData;
use std::sync::Arc;

/// An array in managed memory, reachable from the host and from kernels at once (Numba's
/// `cuda.managed_array`).
#[derive(Debug)]
pub struct ManagedArray<T: Element> {
    pub(crate) buffer: Arc<HostBuffer>,
    pub(crate) layout: Layout,
    _element: PhantomData<T>,
}

impl Device {
    /// Allocates a zero-filled, C-ordered managed array (Numba's `cuda.managed_array(shape,
    /// dtype)`, with `attach_global=True`).
    #[track_caller]
    pub fn managed_array<T: Element>(&self, shape: &[usize]) -> Result<ManagedArray<T>> {
        self.managed_array_with_order(shape, Order::C)
    }

    /// Allocates a zero-filled managed array in C or Fortran order.
    #[track_caller]
    pub fn managed_array_with_order<T: Element>(
        &self,
        shape: &[usize],
        order: Order,
    ) -> Result<ManagedArray<T>> {
        self.managed_array_with_layout(Layout::contiguous(shape, order)?)
    }

    /// Allocates a zero-filled managed array shaped like `like` (a host or device array), with
    /// the strides `device_array_like` gives.
    #[track_caller]
    pub fn managed_array_like<L: LayoutSource>(&self, like: &L) -> Result<ManagedArray<L::Elem>> {
        self.managed_array_with_layout(like.source_layout()?.like())
    }

    #[track_caller]
    fn managed_array_with_layout<T: Element>(&self, layout: Layout) -> Result<ManagedArray<T>> {
        let buffer = allocate_zeroed::<T>(self, &layout, None)?;
        if buffer.bytes() > 0 && buffer.device_ptr().is_none() {
            return Err(Error::NotSupportedByBackend {
                backend: self.kind(),
                feature: "managed memory",
                reason: "the driver returned no device address for the managed allocation".into(),
            });
        }
        Ok(ManagedArray {
            buffer: Arc::new(buffer),
            layout,
            _element: PhantomData,
        })
    }
}

crate::host::mapped::device_reachable_host_array!(ManagedArray);
