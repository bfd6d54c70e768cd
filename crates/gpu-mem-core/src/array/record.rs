//! [`DeviceRecord`]: one structured value in device memory (Numba's `DeviceRecord`).

use crate::array::DeviceArray;
use crate::device::Device;
use crate::element::Element;
use crate::error::Result;
use crate::layout::Layout;

/// A single `T` in device memory: a 0-d array with record semantics. `T` is any `Pod` struct
/// (`#[derive(Pod, Zeroable)] #[repr(C)]`), the Rust form of Numba's structured dtypes.
#[derive(Debug)]
pub struct DeviceRecord<T: Element> {
    array: DeviceArray<T>,
}

impl Device {
    /// Copies `value` to the device (Numba's `cuda.to_device(np_record)`).
    pub fn to_device_record<T: Element>(&self, value: &T) -> Result<DeviceRecord<T>> {
        let mut array = DeviceArray::<T>::allocate(self, Layout::scalar())?;
        array.set(&[], *value)?;
        Ok(DeviceRecord { array })
    }
}

impl<T: Element> DeviceRecord<T> {
    /// Copies the value back (Numba's `rec.copy_to_host()`).
    pub fn copy_to_host(&self) -> Result<T> {
        self.array.get(&[])
    }

    /// Copies the value into `target` in place (Numba's `rec.copy_to_host(hostrec)`).
    pub fn copy_to_host_into(&self, target: &mut T) -> Result<()> {
        *target = self.array.get(&[])?;
        Ok(())
    }

    /// Overwrites the device value (Numba's `rec.copy_to_device(np_void)`).
    pub fn copy_from_host(&mut self, value: &T) -> Result<()> {
        self.array.set(&[], *value)
    }

    /// The record as a 0-d device array (for kernel arguments and raw access).
    pub fn as_array(&self) -> &DeviceArray<T> {
        &self.array
    }

    /// Size in bytes (Numba's `alloc_size` = `dtype.itemsize`).
    pub fn alloc_size(&self) -> usize {
        self.array.alloc_size()
    }

    /// The device it lives on.
    pub fn device(&self) -> &Device {
        self.array.device()
    }
}
