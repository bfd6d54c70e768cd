//! DLPack export and import (feature `dlpack`, built on `dlpark`'s DLPack 1.x declarations).
//!
//! [`DeviceArray::to_dlpack`], [`PinnedArray::to_dlpack`] and [`MappedArray::to_dlpack`] give a
//! [`DlpackTensor`]: an owned `DLManagedTensorVersioned` whose manager context keeps gpu-mem's
//! memory alive until the consumer calls its deleter (dropping the `DlpackTensor` unconsumed
//! calls it too). [`DlpackTensor::into_raw`] hands the pointer to a consumer (PyTorch's
//! `from_dlpack`, CuPy, JAX through a capsule); [`DeviceArray::from_dlpack`] takes a producer's
//! tensor and returns a device array over the same memory that calls the producer's deleter
//! when its last view is gone.
//!
//! Device types: CUDA device memory is `kDLCUDA`, managed memory `kDLCUDAManaged`, page-locked
//! or mapped host memory `kDLCUDAHost`; ROC device memory is `kDLROCM` and host memory
//! `kDLROCMHost`. The simulator's device memory is `kDLExtDev` (its addresses are not host
//! addresses, so no other library can dereference them) and its page-locked and mapped host
//! memory `kDLCPU`. `device_id` is the device ordinal. Element types map to DLPack's
//! `int`/`uint`/`float` codes with one lane; other element types (records) cannot be
//! exported. Strides are in elements, as DLPack's are.
//!
//! Interop on top of the core: it may use arrays, host arrays, memory, devices and the backend;
//! nothing else in the core uses it.

use crate::array::DeviceArray;
use crate::backend::DevicePtr;
use crate::device::Device;
use crate::element::Element;
use crate::error::{BackendKind, Error, Result};
use crate::host::{MappedArray, PinnedArray};
use crate::layout::Layout;
use crate::memory::{Access, KeepAlive, Release};
/// The DLPack types this module's API names (from the `dlpark` crate), so that a producer or
/// consumer need not depend on it to build or read a tensor.
pub use dlpark::DlpackFlags;
use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLPackVersion};
pub use dlpark::ffi::{DLManagedTensorVersioned, DLTensor};
use std::any::TypeId;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

/// An owned DLPack tensor (`DLManagedTensorVersioned`): its deleter runs when it is dropped,
/// unless it was handed on with [`DlpackTensor::into_raw`].
#[derive(Debug)]
pub struct DlpackTensor {
    raw: NonNull<DLManagedTensorVersioned>,
}

// SAFETY: a DLPack tensor is a description of memory plus a deleter; DLPack lets the consumer
// call the deleter from any thread, and gpu-mem's own manager context is `Send + Sync`.
unsafe impl Send for DlpackTensor {}
// SAFETY: shared access only reads the descriptor.
unsafe impl Sync for DlpackTensor {}

impl DlpackTensor {
    /// Takes ownership of a producer's tensor.
    ///
    /// # Safety
    /// `raw` points to a valid `DLManagedTensorVersioned` whose ownership passes to the result
    /// (its deleter, if any, is called once, when the result — or the array made from it — is
    /// dropped). Its major version is 1 (`DLPACK_MAJOR_VERSION`): DLPack lets a consumer read
    /// nothing but the version and the deleter of another major version, whose layout differs.
    pub unsafe fn from_raw(raw: NonNull<DLManagedTensorVersioned>) -> DlpackTensor {
        DlpackTensor { raw }
    }

    /// Hands the tensor to a consumer, which must call its deleter once.
    pub fn into_raw(self) -> NonNull<DLManagedTensorVersioned> {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    /// The tensor descriptor.
    pub fn tensor(&self) -> &DLTensor {
        // SAFETY: `raw` is valid while `self` owns it.
        unsafe { &self.raw.as_ref().dl_tensor }
    }

    /// The shape.
    pub fn shape(&self) -> Vec<i64> {
        let t = self.tensor();
        let n = usize::try_from(t.ndim).unwrap_or(0);
        if n == 0 || t.shape.is_null() {
            return Vec::new();
        }
        // SAFETY: DLPack guarantees `shape` holds `ndim` values.
        unsafe { std::slice::from_raw_parts(t.shape, n).to_vec() }
    }

    /// The strides in elements (`None`: compact C order).
    pub fn strides(&self) -> Option<Vec<i64>> {
        let t = self.tensor();
        let n = usize::try_from(t.ndim).unwrap_or(0);
        if t.strides.is_null() {
            return None;
        }
        // SAFETY: DLPack guarantees a non-null `strides` holds `ndim` values.
        Some(unsafe { std::slice::from_raw_parts(t.strides, n).to_vec() })
    }
}

impl Drop for DlpackTensor {
    fn drop(&mut self) {
        // SAFETY: the tensor is owned by `self`; its deleter is called once, here.
        unsafe {
            if let Some(deleter) = self.raw.as_ref().deleter {
                deleter(self.raw.as_ptr());
            }
        }
    }
}

/// What an exported tensor keeps: the memory, and the shape and strides the descriptor points to.
struct Context {
    _keep: KeepAlive,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

unsafe extern "C" fn delete_exported(tensor: *mut DLManagedTensorVersioned) {
    if tensor.is_null() {
        return;
    }
    // SAFETY: `tensor` and its manager context were made by `export` with `Box::into_raw` and
    // the deleter is called once (DLPack's rule), so both are reclaimed once.
    unsafe {
        let tensor = Box::from_raw(tensor);
        drop(Box::from_raw(tensor.manager_ctx.cast::<Context>()));
    }
}

/// The DLPack element type of `T`.
fn dl_dtype<T: Element>() -> Result<DLDataType> {
    let id = TypeId::of::<T>();
    let ints = [
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
    ];
    let uints = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
    ];
    let code = if ints.contains(&id) {
        DLDataTypeCode::INT
    } else if uints.contains(&id) {
        DLDataTypeCode::UINT
    } else if id == TypeId::of::<f32>() || id == TypeId::of::<f64>() {
        DLDataTypeCode::FLOAT
    } else {
        return Err(Error::Unsupported {
            operation: "DLPack export",
            reason: format!("{} has no DLPack element type", T::dtype()),
        });
    };
    Ok(DLDataType {
        code,
        bits: (T::itemsize() * 8) as u8,
        lanes: 1,
    })
}

fn export(
    data: *mut c_void,
    device: DLDevice,
    layout: &Layout,
    dtype: DLDataType,
    keep: KeepAlive,
) -> DlpackTensor {
    let mut ctx = Box::new(Context {
        _keep: keep,
        shape: layout.shape().iter().map(|&n| n as i64).collect(),
        strides: layout.strides().iter().map(|&s| s as i64).collect(),
    });
    let mut tensor = Box::new(DLManagedTensorVersioned {
        version: DLPackVersion {
            major: dlpark::ffi::DLPACK_MAJOR_VERSION,
            minor: dlpark::ffi::DLPACK_MINOR_VERSION,
        },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete_exported),
        flags: DlpackFlags::empty(),
        dl_tensor: DLTensor {
            // DLPack: the data pointer of a tensor of no elements should be null (an empty
            // host buffer's base is a dangling, possibly misaligned address).
            data: if layout.size() == 0 {
                std::ptr::null_mut()
            } else {
                data
            },
            device,
            ndim: layout.ndim() as i32,
            dtype,
            shape: ctx.shape.as_mut_ptr(),
            strides: ctx.strides.as_mut_ptr(),
            byte_offset: 0,
        },
    });
    tensor.manager_ctx = Box::into_raw(ctx).cast::<c_void>();
    DlpackTensor {
        raw: NonNull::from(Box::leak(tensor)),
    }
}

fn device_type(kind: BackendKind, managed: bool) -> DLDeviceType {
    match (kind, managed) {
        (BackendKind::Cuda, false) => DLDeviceType::CUDA,
        (BackendKind::Cuda, true) => DLDeviceType::CUDAMANAGED,
        (BackendKind::Roc, _) => DLDeviceType::ROCM,
        (BackendKind::Sim, _) => DLDeviceType::EXTDEV,
    }
}

fn host_device_type(kind: BackendKind) -> DLDeviceType {
    match kind {
        BackendKind::Cuda => DLDeviceType::CUDAHOST,
        BackendKind::Roc => DLDeviceType::ROCMHOST,
        BackendKind::Sim => DLDeviceType::CPU,
    }
}

fn dl_device(device: &Device, device_type: DLDeviceType) -> DLDevice {
    DLDevice {
        device_type,
        device_id: device.ordinal() as i32,
    }
}

/// Host memory's DLPack device: DLPack sets the id of CPU and pinned memory to 0, whichever
/// GPU it was allocated for.
fn host_dl_device(device: &Device) -> DLDevice {
    DLDevice {
        device_type: host_device_type(device.kind()),
        device_id: 0,
    }
}

impl<T: Element> DeviceArray<T> {
    /// Exports the array as a DLPack tensor over the same memory (no copy), which keeps the
    /// memory alive until its deleter runs. Work gpu-mem enqueued on streams is not waited for:
    /// synchronize (or hand the consumer the stream) first.
    pub fn to_dlpack(&self) -> Result<DlpackTensor> {
        let managed = self.is_managed();
        let kind = self.device().kind();
        let device = dl_device(self.device(), device_type(kind, managed));
        Ok(export(
            self.device_ptr().0 as usize as *mut c_void,
            device,
            &self.layout,
            dl_dtype::<T>()?,
            self.storage.keep_alive(),
        ))
    }

    /// A device array over a producer's DLPack tensor (no copy). The tensor (and so the
    /// producer's memory) is kept until the array and its views are gone; then its deleter runs.
    ///
    /// # Safety
    /// The tensor describes memory of `device` as the DLPack contract says (its data pointer,
    /// byte offset, shape and strides address valid `T`s of one allocation that stays valid
    /// until the deleter runs), and the producer's pending work on it is complete or ordered
    /// before gpu-mem's (DLPack's stream exchange).
    #[track_caller]
    pub unsafe fn from_dlpack(device: &Device, tensor: DlpackTensor) -> Result<DeviceArray<T>> {
        // SAFETY: `tensor` owns a valid managed tensor (its constructor's contract).
        let managed = unsafe { tensor.raw.as_ref() };
        if managed.version.major != dlpark::ffi::DLPACK_MAJOR_VERSION {
            // Of another major version only the version and the deleter may be read (dropping
            // `tensor` calls the deleter).
            return Err(Error::InvalidArgument {
                name: "DLPack tensor",
                reason: format!(
                    "has DLPack major version {}; this library reads version {}",
                    managed.version.major,
                    dlpark::ffi::DLPACK_MAJOR_VERSION
                ),
            });
        }
        if managed.flags.contains(DlpackFlags::READ_ONLY) {
            // A device array may be written through (and through its views): importing a
            // read-only tensor would let safe code break the producer's promise.
            return Err(Error::InvalidArgument {
                name: "DLPack tensor",
                reason: "is read-only; a device array over it could be written".into(),
            });
        }
        let t = tensor.tensor();
        let expected = device_type(device.kind(), false);
        let managed = device_type(device.kind(), true);
        // Managed memory is reachable from every device, and DLPack producers set its id to
        // 0 (the spec's rule) or to the GPU it was allocated for: any id is accepted for it.
        let managed_elsewhere = managed != expected && t.device.device_type == managed;
        if (t.device.device_type != expected && t.device.device_type != managed)
            || (t.device.device_id != device.ordinal() as i32 && !managed_elsewhere)
        {
            return Err(Error::InvalidArgument {
                name: "DLPack tensor",
                reason: format!(
                    "lives on device type {} id {}, not on {} device {} (device type {})",
                    t.device.device_type.0,
                    t.device.device_id,
                    device.kind(),
                    device.ordinal(),
                    expected.0
                ),
            });
        }
        let want = dl_dtype::<T>()?;
        if t.dtype.code != want.code || t.dtype.bits != want.bits || t.dtype.lanes != 1 {
            return Err(Error::InvalidArgument {
                name: "DLPack tensor",
                reason: format!(
                    "holds dtype code {} bits {} lanes {}, not {}",
                    t.dtype.code.0,
                    t.dtype.bits,
                    t.dtype.lanes,
                    T::dtype()
                ),
            });
        }
        if t.ndim < 0 || (t.ndim > 0 && t.shape.is_null()) {
            return Err(Error::InvalidArgument {
                name: "DLPack tensor",
                reason: format!(
                    "malformed: ndim {} with {} shape",
                    t.ndim,
                    if t.shape.is_null() { "a null" } else { "a" }
                ),
            });
        }
        let to_usize = |v: i64| {
            usize::try_from(v).map_err(|_| Error::InvalidArgument {
                name: "DLPack tensor",
                reason: format!("negative extent {v}"),
            })
        };
        let shape = tensor
            .shape()
            .into_iter()
            .map(to_usize)
            .collect::<Result<Vec<_>>>()?;
        let layout = match tensor.strides() {
            Some(strides) => {
                let strides: Vec<isize> = strides.iter().map(|&s| s as isize).collect();
                Layout::with_strides(&shape, &strides)?
            }
            None => Layout::contiguous(&shape, crate::layout::Order::C)?,
        };
        let ptr = DevicePtr((t.data as usize as u64).wrapping_add(t.byte_offset));
        let strides = layout.strides().to_vec();
        // SAFETY: the caller guarantees the tensor's memory contract; the tensor is kept (its
        // deleter delayed) until the last array and operation using the memory are gone.
        unsafe {
            DeviceArray::foreign(
                device,
                ptr,
                &shape,
                &strides,
                Release::Owner(Box::new(tensor)),
                Some(crate::accounting::MemoryKind::Foreign),
            )
        }
    }
}

impl<T: Element> PinnedArray<T> {
    /// Exports the host memory as a DLPack tensor (`kDLCUDAHost`, `kDLROCMHost`, or `kDLCPU` on
    /// the simulator), kept alive until its deleter runs. Stream work writing the array is
    /// waited for first; the consumer must not use the memory while gpu-mem work does.
    pub fn to_dlpack(&self) -> Result<DlpackTensor> {
        self.buffer.pending().wait_for_host(Access::Write)?;
        let device = host_dl_device(self.device());
        Ok(export(
            self.buffer.base().as_ptr().cast::<c_void>(),
            device,
            &self.layout,
            dl_dtype::<T>()?,
            KeepAlive::Host(Arc::clone(&self.buffer)),
        ))
    }
}

impl<T: Element> MappedArray<T> {
    /// Exports the host side of the mapped memory as a DLPack tensor (as
    /// [`PinnedArray::to_dlpack`]); its device side is [`MappedArray::device_view`]'s
    /// [`DeviceArray::to_dlpack`].
    pub fn to_dlpack(&self) -> Result<DlpackTensor> {
        self.buffer.pending().wait_for_host(Access::Write)?;
        let device = host_dl_device(self.device());
        Ok(export(
            self.buffer.base().as_ptr().cast::<c_void>(),
            device,
            &self.layout,
            dl_dtype::<T>()?,
            KeepAlive::Host(Arc::clone(&self.buffer)),
        ))
    }
}
