//! [`KernelArg`]: what can be passed to a kernel, and how each kind travels (Numba's
//! argument handling).
//!
//! * Device arrays, records and mapped arrays are passed as they are: no copy.
//! * [`Scalar`] values are passed by copy.
//! * Host arrays are transferred: a bare `&mut` host array is copied in and copied back after
//!   the kernel ([`InOut`]); [`In`] only copies in; [`Out`] only copies back (its device buffer
//!   starts zeroed on the simulator, undefined on GPUs). Non-contiguous host arrays are refused,
//!   as in Numba.
//!
//! Each kind is prepared from what lies below `kernel`: device arrays and records (`array`), host
//! arrays (`host`), and the memory a stream keeps alive (`memory`).

use crate::array::host_layout::layout_of;
use crate::array::{DeviceArray, DeviceRecord};
use crate::device::Device;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::host::{ManagedArray, MappedArray};
use crate::kernel::LaunchArg;
use crate::memory::{HostBuffer, KeepAlive, Storage};
use ndarray::{ArrayBase, Data, DataMut, Dimension};
use std::any::TypeId;
use std::sync::Arc;

/// One prepared argument: what the backend receives, and what must stay alive or be copied back.
#[derive(Debug)]
pub struct Prepared {
    pub(crate) arg: LaunchArg,
    /// Keeps device memory alive while a stream launch is in flight.
    pub(crate) keep: Option<KeepAlive>,
    /// Mapped host memory the kernel may write.
    pub(crate) mapped: Option<Arc<HostBuffer>>,
    /// A temporary device copy of a host argument (a `DeviceArray<T>`).
    pub(crate) staged: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl Prepared {
    fn plain(arg: LaunchArg) -> Prepared {
        Prepared {
            arg,
            keep: None,
            mapped: None,
            staged: None,
        }
    }

    /// What the backend receives.
    pub fn launch_arg(&self) -> &LaunchArg {
        &self.arg
    }
}

/// Something a kernel can take as an argument.
pub trait KernelArg {
    /// Before the launch: makes the device side ready (copying host data in when needed).
    fn prepare(&mut self, device: &Device) -> Result<Prepared>;

    /// After the kernel completed: copies results back when needed.
    fn finish(&mut self, prepared: Prepared) -> Result<()> {
        drop(prepared);
        Ok(())
    }

    /// Whether [`KernelArg::finish`] has work to do (a stream launch then waits for the kernel).
    fn needs_finish(&self) -> bool {
        false
    }
}

pub(crate) fn array_arg<T: Element>(array: &DeviceArray<T>) -> LaunchArg {
    LaunchArg::Array {
        ptr: array.device_ptr(),
        shape: array.shape().to_vec(),
        strides: array.strides().to_vec(),
        min_offset: array.layout().min_offset(),
        span_len: array.layout().span_len(),
        itemsize: T::itemsize(),
        elem: TypeId::of::<T>(),
        dtype: T::dtype(),
    }
}

pub(crate) fn prepare_array<T: Element>(
    array: &DeviceArray<T>,
    device: &Device,
) -> Result<Prepared> {
    // An array of another device of the same backend is the backend's to accept or refuse: it
    // can be addressed once peer access is enabled (`Device::enable_peer_access`).
    let peer = device.same_backend(array.device())
        && device.can_access_peer(array.device()).unwrap_or(false);
    if !peer {
        array.check_device(device)?;
    }
    Ok(Prepared {
        arg: array_arg(array),
        keep: Some(array.storage.keep_alive()),
        mapped: match &array.storage {
            Storage::Mapped(buffer) => Some(Arc::clone(buffer)),
            Storage::Device(_) | Storage::Foreign(_) => None,
        },
        staged: None,
    })
}

impl<T: Element> KernelArg for DeviceArray<T> {
    fn prepare(&mut self, device: &Device) -> Result<Prepared> {
        prepare_array(self, device)
    }
}

impl<T: Element> KernelArg for MappedArray<T> {
    fn prepare(&mut self, device: &Device) -> Result<Prepared> {
        prepare_array(&self.device_view(), device)
    }
}

impl<T: Element> KernelArg for ManagedArray<T> {
    fn prepare(&mut self, device: &Device) -> Result<Prepared> {
        prepare_array(&self.device_view(), device)
    }
}

impl<T: Element> KernelArg for DeviceRecord<T> {
    fn prepare(&mut self, device: &Device) -> Result<Prepared> {
        let array = self.as_array();
        array.check_device(device)?;
        let mut prepared = prepare_array(array, device)?;
        prepared.arg = LaunchArg::Record {
            ptr: array.device_ptr(),
            itemsize: T::itemsize(),
            elem: TypeId::of::<T>(),
            dtype: T::dtype(),
        };
        Ok(prepared)
    }
}

/// A raw device address passed where a kernel declares a pointer (`T*`): memory another
/// library allocated (interop). Nothing is checked or kept alive: the memory must stay valid
/// until the kernel has run, as the launch's safety contract says of everything it touches.
#[derive(Debug, Clone, Copy)]
pub struct DevicePointer<T: Element> {
    ptr: crate::backend::DevicePtr,
    _elem: std::marker::PhantomData<fn() -> T>,
}

impl<T: Element> DevicePointer<T> {
    /// The address `ptr` of one or more `T`s in device memory.
    pub fn new(ptr: crate::backend::DevicePtr) -> DevicePointer<T> {
        DevicePointer {
            ptr,
            _elem: std::marker::PhantomData,
        }
    }

    /// The null pointer (`nullptr`), for kernels that take an optional buffer and test it.
    pub fn null() -> DevicePointer<T> {
        DevicePointer::new(crate::backend::DevicePtr(0))
    }
}

impl<T: Element> KernelArg for DevicePointer<T> {
    fn prepare(&mut self, _device: &Device) -> Result<Prepared> {
        Ok(Prepared::plain(LaunchArg::Record {
            ptr: self.ptr,
            itemsize: T::itemsize(),
            elem: TypeId::of::<T>(),
            dtype: T::dtype(),
        }))
    }
}

/// A value passed to a kernel by copy (`Scalar(2.5f32)`).
#[derive(Debug, Clone, Copy)]
pub struct Scalar<T: Element>(pub T);

impl<T: Element> KernelArg for Scalar<T> {
    fn prepare(&mut self, _device: &Device) -> Result<Prepared> {
        Ok(Prepared::plain(LaunchArg::Scalar {
            bytes: bytemuck::bytes_of(&self.0).to_vec(),
            elem: TypeId::of::<T>(),
            dtype: T::dtype(),
        }))
    }
}

/// A host array copied to the device before the kernel, not back (Numba's `cuda.In`).
#[derive(Debug)]
pub struct In<'a, A: ?Sized>(pub &'a A);

/// A host array copied back from the device after the kernel, not in (Numba's `cuda.Out`).
#[derive(Debug)]
pub struct Out<'a, A: ?Sized>(pub &'a mut A);

/// A host array copied in before and back after the kernel (Numba's `cuda.InOut`, the default
/// for a bare `&mut` host array).
#[derive(Debug)]
pub struct InOut<'a, A: ?Sized>(pub &'a mut A);

fn stage_in<S, D>(host: &ArrayBase<S, D>, device: &Device) -> Result<Prepared>
where
    S: Data,
    S::Elem: Element,
    D: Dimension,
{
    let temp = device.to_device(host)?;
    let arg = array_arg(&temp);
    Ok(Prepared {
        arg,
        keep: Some(temp.storage.keep_alive()),
        mapped: None,
        staged: Some(Box::new(temp)),
    })
}

fn stage_out<S, D>(host: &ArrayBase<S, D>, device: &Device) -> Result<Prepared>
where
    S: Data,
    S::Elem: Element,
    D: Dimension,
{
    let layout = layout_of(host)?;
    if !layout.core().is_contiguous() {
        return Err(crate::array::transfer::non_contiguous(&layout));
    }
    let temp = DeviceArray::<S::Elem>::allocate(device, layout)?;
    let arg = array_arg(&temp);
    Ok(Prepared {
        arg,
        keep: Some(temp.storage.keep_alive()),
        mapped: None,
        staged: Some(Box::new(temp)),
    })
}

fn copy_back<S, D>(host: &mut ArrayBase<S, D>, prepared: Prepared) -> Result<()>
where
    S: DataMut,
    S::Elem: Element,
    D: Dimension,
{
    let staged = prepared.staged.ok_or(Error::InvalidArgument {
        name: "kernel argument",
        reason: "a host argument was finished without being prepared".into(),
    })?;
    let temp = staged
        .downcast::<DeviceArray<S::Elem>>()
        .map_err(|_| Error::InvalidArgument {
            name: "kernel argument",
            reason: "the staged copy of a host argument has the wrong type".into(),
        })?;
    temp.copy_to_host_into(host)
}

impl<S, D> KernelArg for In<'_, ArrayBase<S, D>>
where
    S: Data,
    S::Elem: Element,
    D: Dimension,
{
    fn prepare(&mut self, device: &Device) -> Result<Prepared> {
        stage_in(self.0, device)
    }
}

impl<S, D> KernelArg for Out<'_, ArrayBase<S, D>>
where
    S: DataMut,
    S::Elem: Element,
    D: Dimension,
{
    fn prepare(&mut self, device: &Device) -> Result<Prepared> {
        stage_out(self.0, device)
    }
    fn finish(&mut self, prepared: Prepared) -> Result<()> {
        copy_back(self.0, prepared)
    }
    fn needs_finish(&self) -> bool {
        true
    }
}

impl<S, D> KernelArg for InOut<'_, ArrayBase<S, D>>
where
    S: DataMut,
    S::Elem: Element,
    D: Dimension,
{
    fn prepare(&mut self, device: &Device) -> Result<Prepared> {
        stage_in(self.0, device)
    }
    fn finish(&mut self, prepared: Prepared) -> Result<()> {
        copy_back(self.0, prepared)
    }
    fn needs_finish(&self) -> bool {
        true
    }
}

/// A bare host array is [`InOut`], as in Numba.
impl<S, D> KernelArg for ArrayBase<S, D>
where
    S: DataMut,
    S::Elem: Element,
    D: Dimension,
{
    fn prepare(&mut self, device: &Device) -> Result<Prepared> {
        InOut(self).prepare(device)
    }
    fn finish(&mut self, prepared: Prepared) -> Result<()> {
        InOut(self).finish(prepared)
    }
    fn needs_finish(&self) -> bool {
        true
    }
}
