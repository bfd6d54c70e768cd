//! A module's variables from the host: `__device__`, `__constant__` and `__managed__` variables
//! read and written by name (CUDA's `cudaMemcpyToSymbol` / `cudaMemcpyFromSymbol` /
//! `cudaGetSymbolAddress`), as device arrays over the variable's memory on one device.
//!
//! Contract: the module is built and loaded on the device first where it is not yet (so a value
//! written before the first launch is what the kernels read); a variable of `n` bytes is an
//! array of `n / size_of::<T>()` elements, and `n` must be a multiple of the element size;
//! copies are synchronous, as a Numba or CUDA default-stream copy is.

use crate::array::DeviceArray;
use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::kernel::{Kernel, Module};
use crate::memory::Release;
use ndarray::ArrayView1;

/// What names a module: a [`Module`], or a [`Kernel`] made from source.
pub trait AsModule {
    /// The module, or `None` (a closure kernel has none).
    fn as_module(&self) -> Option<&Module>;
}

impl AsModule for Module {
    fn as_module(&self) -> Option<&Module> {
        Some(self)
    }
}

impl AsModule for Kernel {
    fn as_module(&self) -> Option<&Module> {
        self.module()
    }
}

fn module_of<M: AsModule + ?Sized>(module: &M) -> Result<&Module> {
    module.as_module().ok_or_else(|| Error::InvalidArgument {
        name: "module",
        reason: "a closure kernel has no module, and so no variables: make the kernel from source"
            .into(),
    })
}

impl Device {
    /// The variable `name` of `module` (a [`Module`] or a source [`Kernel`]) on this device, as
    /// a one-dimensional array of its bytes' `T`s (a `__constant__ float c[4][4]` is 16 `f32`s).
    pub fn symbol<T: Element, M: AsModule + ?Sized>(
        &self,
        module: &M,
        name: &str,
    ) -> Result<DeviceArray<T>> {
        let module = module_of(module)?;
        let (ptr, bytes) = self.backend().module_global(self.ordinal(), module, name)?;
        let size = T::itemsize();
        if size == 0 || !bytes.is_multiple_of(size) {
            return Err(Error::InvalidArgument {
                name: "symbol",
                reason: format!(
                    "the variable `{name}` holds {bytes} bytes, not a whole number of {} ({size} bytes)",
                    T::dtype()
                ),
            });
        }
        let len = bytes / size;
        // The module is never unloaded before the backend, which the array's device keeps alive.
        // SAFETY: the backend gave the variable's address and size on this device; the memory
        // lives as long as the backend; work that touches it is ordered as any device memory's.
        unsafe {
            DeviceArray::foreign(
                self,
                ptr,
                &[len],
                &[1],
                Release::Owner(Box::new(module.clone())),
                // The module's own memory: no allocation of gpu-mem's to count.
                None,
            )
        }
    }

    /// Writes `values` to the start of the variable `name` of `module` on this device (CUDA's
    /// `cudaMemcpyToSymbol`); they must fit in it.
    pub fn copy_to_symbol<T: Element, M: AsModule + ?Sized>(
        &self,
        module: &M,
        name: &str,
        values: &[T],
    ) -> Result<()> {
        let symbol = self.symbol::<T, M>(module, name)?;
        let len = symbol.shape()[0];
        if values.len() > len {
            return Err(Error::InvalidArgument {
                name: "values",
                reason: format!(
                    "{} values of {} do not fit in `{name}`, which holds {len}",
                    values.len(),
                    T::dtype()
                ),
            });
        }
        let mut target = symbol.slice(ndarray::s![..values.len()])?;
        target.copy_from_host(&ArrayView1::from(values))
    }

    /// The variable `name` of `module` on this device, as `T`s (CUDA's
    /// `cudaMemcpyFromSymbol`).
    pub fn copy_from_symbol<T: Element, M: AsModule + ?Sized>(
        &self,
        module: &M,
        name: &str,
    ) -> Result<Vec<T>> {
        let symbol = self.symbol::<T, M>(module, name)?;
        Ok(symbol.copy_to_host()?.into_raw_vec_and_offset().0)
    }
}
