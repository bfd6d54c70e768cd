//! [`DeviceRecord`]: one structured value in device memory (Numba's `DeviceRecord`).

use crate::array::DeviceArray;
use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::layout::Layout;
use std::fmt;
use std::marker::PhantomData;

/// A single `T` in device memory: a 0-d array with record semantics. `T` is any `Pod` struct
/// (`#[derive(Pod, Zeroable)] #[repr(C)]`), the Rust form of Numba's structured dtypes.
#[derive(Debug)]
pub struct DeviceRecord<T: Element> {
    array: DeviceArray<T>,
}

impl Device {
    /// Copies `value` to the device (Numba's `cuda.to_device(np_record)`).
    #[track_caller]
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

/// One field of the record type `T`, of type `F`, at a byte offset (Numba's `rec['f']` names a
/// field by string; here the [`field!`](crate::field) macro names it by path, so the field's
/// type comes from the struct and its offset from [`core::mem::offset_of!`]):
///
/// ```
/// # #[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
/// # #[repr(C)]
/// # struct Particle { id: i32, mass: f32, pos: [f32; 2] }
/// let mass = gpu_mem_core::field!(Particle, mass); // Field<Particle, f32>, offset 4
/// assert_eq!(mass.offset(), 4);
/// ```
///
/// Every use checks that the field lies inside `T` and is aligned for `F`, so a `Field` made by
/// hand with [`Field::at`] cannot reach outside a record.
pub struct Field<T, F> {
    offset: usize,
    _types: PhantomData<fn(&T) -> &F>,
}

impl<T, F> Clone for Field<T, F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, F> Copy for Field<T, F> {}

impl<T: Element, F: Element> fmt::Debug for Field<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Field")
            .field("record", &T::dtype())
            .field("type", &F::dtype())
            .field("offset", &self.offset)
            .finish()
    }
}

impl<T: Element, F: Element> Field<T, F> {
    /// The field of type `F` at byte `offset` of `T` (checked when used).
    pub const fn at(offset: usize) -> Field<T, F> {
        Field {
            offset,
            _types: PhantomData,
        }
    }

    /// Used by [`field!`](crate::field): `witness` ties `F` to the named field's type.
    #[doc(hidden)]
    pub const fn of(offset: usize, witness: fn(&T) -> &F) -> Field<T, F> {
        let _ = witness;
        Field::at(offset)
    }

    /// Byte offset within `T`.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// `Ok` when the field lies inside `T`, is aligned for `F`, and is not zero-sized.
    fn check(&self) -> Result<()> {
        let size = std::mem::size_of::<F>();
        let fits = self
            .offset
            .checked_add(size)
            .is_some_and(|end| end <= std::mem::size_of::<T>());
        let reason = if size == 0 {
            "the field type has no bytes"
        } else if !fits {
            "the field does not lie inside the record"
        } else if !self.offset.is_multiple_of(std::mem::align_of::<F>()) {
            "the offset is not aligned for the field type"
        } else {
            return Ok(());
        };
        Err(Error::InvalidArgument {
            name: "field",
            reason: format!(
                "{} ({} bytes) at offset {} of {} ({} bytes): {reason}",
                F::dtype(),
                size,
                self.offset,
                T::dtype(),
                std::mem::size_of::<T>()
            ),
        })
    }
}

/// A [`Field`] of a record type, by name: `field!(Particle, mass)`, or a nested field
/// `field!(Outer, inner.x)`. The type is checked by the compiler, the offset is
/// [`core::mem::offset_of!`]'s.
#[macro_export]
macro_rules! field {
    ($record:ty, $($path:tt)+) => {
        $crate::array::Field::<$record, _>::of(
            ::core::mem::offset_of!($record, $($path)+),
            |record: &$record| &record.$($path)+,
        )
    };
}

impl<T: Element> DeviceRecord<T> {
    /// A view of the field's bytes as a 0-d array of `F` (sharing memory).
    fn field_view<F: Element>(&self, field: Field<T, F>) -> Result<DeviceArray<F>> {
        field.check()?;
        let offset = self.array.offset + field.offset;
        if !self
            .array
            .storage
            .is_aligned(offset, std::mem::align_of::<F>())
        {
            return Err(Error::InvalidArgument {
                name: "field",
                reason: format!(
                    "the field's device address is not aligned for {}",
                    F::dtype()
                ),
            });
        }
        Ok(DeviceArray {
            storage: self.array.storage.clone(),
            offset,
            layout: Layout::scalar(),
            _element: PhantomData,
        })
    }

    /// Reads one field (Numba's `rec['f']` for a scalar field: copied D→H).
    pub fn get<F: Element>(&self, field: Field<T, F>) -> Result<F> {
        self.field_view(field)?.get(&[])
    }

    /// Writes one field, leaving the others untouched (Numba's `rec['f'] = v`).
    pub fn set<F: Element>(&mut self, field: Field<T, F>, value: F) -> Result<()> {
        self.field_view(field)?.set(&[], value)
    }

    /// A nested record field as a record view sharing memory (Numba's `rec['inner']` returning a
    /// `DeviceRecord`), so `rec.record(field!(Outer, inner))?.set(field!(Inner, i), 1)` is
    /// Numba's `rec['inner']['i'] = 1`.
    pub fn record<F: Element>(&self, field: Field<T, F>) -> Result<DeviceRecord<F>> {
        Ok(DeviceRecord {
            array: self.field_view(field)?,
        })
    }

    /// A subarray field `[E; N]` as a 1-d device array of `N` elements sharing memory (Numba's
    /// `rec['h']` for `('h', f4, 2)`: shape `(2,)`, strides `(4,)`).
    pub fn subarray<E: Element, const N: usize>(
        &self,
        field: Field<T, [E; N]>,
    ) -> Result<DeviceArray<E>>
    where
        [E; N]: Element,
    {
        let view = self.field_view(field)?;
        Ok(DeviceArray {
            storage: view.storage,
            offset: view.offset,
            layout: Layout::contiguous(&[N], crate::layout::Order::C)?,
            _element: PhantomData,
        })
    }
}

impl<T: Element> DeviceArray<T> {
    /// One element of a record array as a [`DeviceRecord`] view sharing memory (Numba's
    /// `d_struct[i]`). Negative indices count from the end.
    pub fn record(&self, index: &[isize]) -> Result<DeviceRecord<T>> {
        let offset = self.layout.offset_of(index)?;
        let byte = (offset as i64)
            .checked_mul(T::itemsize() as i64)
            .and_then(|b| b.checked_add(self.offset as i64))
            .and_then(|b| usize::try_from(b).ok())
            .ok_or_else(|| Error::Overflow {
                what: "record offset".into(),
            })?;
        Ok(DeviceRecord {
            array: self.with_layout(Layout::scalar(), byte),
        })
    }

    /// One field of every record, as a strided view sharing memory (numpy's `ary['f']`; Numba's
    /// `DeviceNDArray` refuses it with a `TypeError`). The view has this array's shape; its
    /// strides are the records' strides counted in `F`s, so the record size must be a multiple
    /// of the field's size ([`Error::Unsupported`] otherwise: strides are in elements).
    pub fn field<F: Element>(&self, field: Field<T, F>) -> Result<DeviceArray<F>> {
        field.check()?;
        if std::mem::align_of::<F>() > super::device_array::DEVICE_ALIGN {
            // As `view_as`: host copies are staged in memory aligned to no more than this.
            return Err(Error::Unsupported {
                operation: "field view",
                reason: format!(
                    "{} needs {}-byte alignment; device memory is aligned to {} bytes",
                    F::dtype(),
                    std::mem::align_of::<F>(),
                    super::device_array::DEVICE_ALIGN
                ),
            });
        }
        let record = T::itemsize() as isize;
        let size = F::itemsize() as isize;
        if record % size != 0 {
            return Err(Error::Unsupported {
                operation: "field view",
                reason: format!(
                    "{} records are {record} bytes, not a multiple of the field's {} ({size} bytes)",
                    T::dtype(),
                    F::dtype()
                ),
            });
        }
        let scale = record / size;
        let strides: Vec<isize> = self
            .strides()
            .iter()
            .map(|&s| {
                s.checked_mul(scale).ok_or_else(|| Error::Overflow {
                    what: "field view strides".into(),
                })
            })
            .collect::<Result<_>>()?;
        let layout = Layout::with_strides(self.shape(), &strides)?;
        let offset = self.offset + field.offset;
        if self.size() > 0 && !self.storage.is_aligned(offset, std::mem::align_of::<F>()) {
            return Err(Error::InvalidArgument {
                name: "field",
                reason: format!(
                    "the field's device address is not aligned for {}",
                    F::dtype()
                ),
            });
        }
        Ok(DeviceArray {
            storage: self.storage.clone(),
            offset,
            layout,
            _element: PhantomData,
        })
    }
}
