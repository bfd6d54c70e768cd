//! Interop with [cudarc](https://docs.rs/cudarc) (feature `cudarc`): a [`DeviceArray`] over a
//! `CudaSlice`, a `CudaView` / `CudaViewMut` of a [`DeviceArray`], a gpu-mem [`Stream`] over a
//! `CudaStream` and a `CudaStream` over a gpu-mem [`Stream`].
//!
//! Both libraries use the device's **primary context** (`cuDevicePrimaryCtxRetain`), so device
//! pointers and streams are valid in both; every function here checks that the cudarc context is
//! the primary context of the gpu-mem device's CUDA device and refuses anything else.
//!
//! **Call [`context`] (or [`ready`]) before anything else of cudarc**: cudarc loads `libcuda` on
//! its first call and *panics* when it cannot, while these functions return an [`Error`].
//!
//! What makes a use after free impossible in safe code:
//!
//! * [`array_from_slice`] takes the `CudaSlice` **by value** and drops it only after the last
//!   array view and the last gpu-mem stream operation using it are gone (a borrowing form cannot
//!   be sound: gpu-mem arrays are `'static` handles).
//! * [`view`] / [`view_mut`] borrow the array for the wrapper's lifetime. The wrapper's own
//!   `CudaSlice` is never handed out and is leaked, never dropped; the wrapper's drop first
//!   synchronizes the slice's stream, or leaks the array's memory if that fails.
//! * [`stream_from_cudarc`] keeps the `Arc<CudaStream>` alive inside the gpu-mem stream.
//! * [`cudarc_stream`] lends a `&CudaStream` bounded by the gpu-mem stream's borrow
//!   ([`BorrowedCudaStream`]); a full `Arc`, which cudarc's copies and allocations keep in every
//!   `CudaSlice`, is only offered `unsafe` ([`cudarc_stream_arc`]).
//!
//! Ordering: each library orders its own work. cudarc's streams are non-blocking, so gpu-mem's
//! synchronous operations do **not** wait for them: synchronize (or use events) between the two
//! libraries' work on the same memory. [`array_from_slice`] synchronizes the slice's pending
//! cudarc work before the array is made.
//!
//! Why each form looks as it does: the book's guide, *Interop, several GPUs and several nodes*.

use ::cudarc::driver::{
    CudaContext, CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtrMut, DriverError,
};
use gpu_mem_core::backend::{DevicePtr, StreamHandle};
use gpu_mem_core::{BackendKind, Device, DeviceArray, Element, Error, Result, Stream};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// cudarc's driver module (the version gpu-mem is built with, so none need be matched).
pub use ::cudarc::driver;

/// `CU_STREAM_PER_THREAD`: which stream it names depends on the calling thread.
const PER_THREAD_STREAM: usize = 0x2;

/// A cudarc error as gpu-mem's [`Error::Native`] (`call` names what failed). Does not format
/// `err` itself: cudarc's `Display` calls `cuGetErrorString`, which panics where cudarc cannot
/// load the driver.
pub fn driver_error(call: &'static str, err: DriverError) -> Error {
    Error::Native {
        backend: BackendKind::Cuda,
        call,
        code: err.0 as i64,
        code_name: format!("{:?}", err.0),
        description: "reported by cudarc".into(),
    }
}

/// Whether cudarc can be used here: the CUDA driver loads and initialises (gpu-mem's
/// [`crate::probe`]), reports at least one device, and cudarc finds it too (under its own
/// library names). The error says why not; nothing panics.
pub fn ready() -> Result<crate::CudaProbe> {
    let found = crate::probe()?;
    if found.device_count == 0 {
        return Err(Error::BackendUnavailable {
            backend: BackendKind::Cuda,
            reason: format!("the CUDA driver ({}) reports no devices", found.library),
        });
    }
    // SAFETY: loads the driver library (running its initialisers), as `probe` just did.
    if !unsafe { ::cudarc::driver::sys::is_culib_present() } {
        return Err(Error::BackendUnavailable {
            backend: BackendKind::Cuda,
            reason: format!(
                "gpu-mem loaded the CUDA driver from {}, but cudarc finds no `libcuda` under its \
                 names (set LD_LIBRARY_PATH)",
                found.library
            ),
        });
    }
    Ok(found)
}

/// cudarc's context for device `ordinal` — the device's primary context, as gpu-mem uses —
/// after [`ready`] has checked that cudarc can load the driver (so this returns an error where
/// `CudaContext::new` would panic).
pub fn context(ordinal: usize) -> Result<Arc<CudaContext>> {
    let found = ready()?;
    if ordinal >= found.device_count {
        return Err(Error::NoSuchDevice {
            backend: BackendKind::Cuda,
            device: ordinal,
            count: found.device_count,
        });
    }
    CudaContext::new(ordinal).map_err(|e| driver_error("CudaContext::new", e))
}

/// Checks that `ctx` is the primary context of `device`'s CUDA device.
fn check_context(device: &Device, ctx: &CudaContext) -> Result<()> {
    if device.kind() != BackendKind::Cuda {
        return Err(Error::NotSupportedByBackend {
            backend: device.kind(),
            feature: "cudarc interop",
            reason: "cudarc works with CUDA devices only".into(),
        });
    }
    if !ctx.is_primary() {
        return Err(Error::InvalidArgument {
            name: "context",
            reason: "a cudarc context that is not the device's primary context (gpu-mem uses \
                     the primary context: make it with CudaContext::new)"
                .into(),
        });
    }
    if ctx.ordinal() != device.ordinal() {
        return Err(Error::DeviceMismatch {
            what: "cudarc context",
            expected: device.ordinal(),
            found: ctx.ordinal(),
        });
    }
    // The same primary context through gpu-mem's driver (another `libcuda` would differ).
    let driver = crate::CudaDriver::load()?;
    let ordinal = i32::try_from(device.ordinal()).map_err(|_| Error::InvalidArgument {
        name: "device",
        reason: format!("ordinal {} is out of range", device.ordinal()),
    })?;
    let cu_device = driver.device_get(ordinal)?;
    let primary = driver.primary_ctx_retain(cu_device)?;
    // SAFETY: balances the retain just above; nothing of the context is used through it.
    unsafe { driver.primary_ctx_release(cu_device) }?;
    if !std::ptr::eq(primary.cast::<()>(), ctx.cu_ctx().cast::<()>()) {
        return Err(Error::InvalidArgument {
            name: "context",
            reason: format!(
                "cudarc's context {:#x} is not the primary context {:#x} gpu-mem's driver ({}) \
                 has for device {}",
                ctx.cu_ctx() as usize,
                primary as usize,
                driver.path(),
                device.ordinal()
            ),
        });
    }
    Ok(())
}

/// A one-dimensional [`DeviceArray`] of `device` over a cudarc allocation, which gpu-mem takes
/// over: the slice is dropped (cudarc frees it on its stream) after the last array view and
/// the last gpu-mem stream operation using it are gone. cudarc work still pending on the slice
/// is waited for first (the slice's stream is synchronized after waiting for its recorded
/// uses). On an error the slice is dropped.
pub fn array_from_slice<T: Element>(
    device: &Device,
    mut slice: CudaSlice<T>,
) -> Result<DeviceArray<T>> {
    check_context(device, slice.context())?;
    let len = slice.len();
    let stream = Arc::clone(slice.stream());
    let ptr = {
        // Makes `stream` wait for every read and write cudarc recorded on the slice.
        let (ptr, _record) = slice.device_ptr_mut(&stream);
        ptr
    };
    stream
        .synchronize()
        .map_err(|e| driver_error("cuStreamSynchronize", e))?;
    // `ptr` starts a live cudarc allocation of `len` `T`s in `device`'s primary context
    // (checked), 256-byte aligned; cudarc's pending work on it is complete (synchronized).
    // SAFETY: as just said; the slice is the owner, dropped after the last array and operation.
    unsafe { DeviceArray::from_raw_parts(device, DevicePtr(ptr), &[len], &[1], slice) }
}

/// A `CudaSlice` over a gpu-mem array's memory that cudarc never frees, and what keeps that
/// memory alive until cudarc's work on it is complete.
struct Upgraded<T: Element> {
    slice: ManuallyDrop<CudaSlice<T>>,
    memory: ManuallyDrop<DeviceArray<T>>,
}

impl<T: Element> Upgraded<T> {
    fn new(array: &DeviceArray<T>, stream: &Arc<CudaStream>) -> Result<Upgraded<T>> {
        check_context(array.device(), stream.context())?;
        if !(array.is_c_contiguous() || array.is_f_contiguous()) {
            return Err(Error::NonContiguous {
                shape: array.shape().to_vec(),
                strides: array.strides().to_vec(),
            });
        }
        if stream.cu_stream() as usize == PER_THREAD_STREAM {
            return Err(per_thread_refused());
        }
        let (ptr, len) = (array.device_ptr().0, array.size());
        // `upgrade_device_ptr` creates two events with `unwrap` when event tracking is on: its
        // panic becomes an error.
        let slice = std::panic::catch_unwind(AssertUnwindSafe(|| {
            // `ptr` is the first of `len` contiguous `Pod` `T`s of a live allocation of the same
            // primary context (checked), kept alive by `memory`.
            // SAFETY: as just said; the slice is only ever leaked, so cudarc never frees it.
            unsafe { stream.upgrade_device_ptr::<T>(ptr, len) }
        }))
        .map_err(|_| Error::Native {
            backend: BackendKind::Cuda,
            call: "CudaStream::upgrade_device_ptr",
            code: -1,
            code_name: "panic".into(),
            description: "cudarc could not create the view's events".into(),
        })?;
        Ok(Upgraded {
            slice: ManuallyDrop::new(slice),
            memory: ManuallyDrop::new(array.view()),
        })
    }
}

impl<T: Element> Drop for Upgraded<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; `self.slice` is not used again.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        let stream = Arc::clone(slice.stream());
        // Makes `stream` wait for the slice's recorded reads and writes; frees nothing.
        let _ = slice.leak();
        match stream.synchronize() {
            Ok(()) => {
                // SAFETY: taken once, here; `self.memory` is not used again.
                drop(unsafe { ManuallyDrop::take(&mut self.memory) });
            }
            Err(err) => {
                // cudarc's work may still use the memory: keep it allocated for good.
                tracing::warn!(%err, "synchronizing a cudarc view's stream failed; its memory is leaked");
            }
        }
    }
}

/// A cudarc view of a gpu-mem array (see [`view`]); borrows the array for `'a`.
pub struct CudarcView<'a, T: Element> {
    inner: Upgraded<T>,
    _array: PhantomData<&'a DeviceArray<T>>,
}

/// A mutable cudarc view of a gpu-mem array (see [`view_mut`]); borrows the array mutably for
/// `'a`.
pub struct CudarcViewMut<'a, T: Element> {
    inner: Upgraded<T>,
    _array: PhantomData<&'a mut DeviceArray<T>>,
}

impl<T: Element> std::fmt::Debug for CudarcView<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudarcView")
            .field("array", &*self.inner.memory)
            .finish()
    }
}

impl<T: Element> std::fmt::Debug for CudarcViewMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudarcViewMut")
            .field("array", &*self.inner.memory)
            .finish()
    }
}

impl<T: Element> CudarcView<'_, T> {
    /// The cudarc view: the array's elements in memory order.
    pub fn view(&self) -> CudaView<'_, T> {
        self.inner.slice.as_view()
    }
}

impl<T: Element> CudarcViewMut<'_, T> {
    /// The cudarc view: the array's elements in memory order.
    pub fn view(&self) -> CudaView<'_, T> {
        self.inner.slice.as_view()
    }

    /// The mutable cudarc view: the array's elements in memory order.
    pub fn view_mut(&mut self) -> CudaViewMut<'_, T> {
        self.inner.slice.as_view_mut()
    }
}

/// A `CudaView` of a contiguous (C or Fortran order) gpu-mem CUDA array, its elements in memory
/// order, for cudarc work ordered on `stream` (the stream cudarc ties the view to; uses on
/// other streams are tracked by cudarc's events when its event tracking is on). The wrapper's
/// drop synchronizes `stream`. gpu-mem work on the array must be complete (or ordered before
/// cudarc's with an event) when cudarc uses the view.
pub fn view<'a, T: Element>(
    array: &'a DeviceArray<T>,
    stream: &Arc<CudaStream>,
) -> Result<CudarcView<'a, T>> {
    Ok(CudarcView {
        inner: Upgraded::new(array, stream)?,
        _array: PhantomData,
    })
}

/// As [`view`], mutable.
pub fn view_mut<'a, T: Element>(
    array: &'a mut DeviceArray<T>,
    stream: &Arc<CudaStream>,
) -> Result<CudarcViewMut<'a, T>> {
    Ok(CudarcViewMut {
        inner: Upgraded::new(array, stream)?,
        _array: PhantomData,
    })
}

fn per_thread_refused() -> Error {
    Error::InvalidArgument {
        name: "stream",
        reason: "the per-thread default stream names a different stream on every thread; use \
                 CudaContext::new_stream or default_stream"
            .into(),
    }
}

/// A gpu-mem stream of `device` over a cudarc stream, which it keeps alive (the `Arc` is
/// dropped after the gpu-mem stream's last synchronization; cudarc destroys the stream when
/// its last `Arc` goes). Work of both libraries on it is ordered by the stream. cudarc's streams
/// are non-blocking: gpu-mem's synchronous operations do not wait for them.
pub fn stream_from_cudarc(device: &Device, stream: Arc<CudaStream>) -> Result<Stream> {
    check_context(device, stream.context())?;
    let handle = stream.cu_stream() as usize;
    if handle == PER_THREAD_STREAM {
        return Err(per_thread_refused());
    }
    // `handle` is a live `CUstream` of `device`'s primary context (checked; null is the legacy
    // stream), not the per-thread stream (checked).
    // SAFETY: as just said; the `Arc` owner keeps it alive until the gpu-mem stream's last sync.
    Ok(unsafe { Stream::from_raw_handle(device, StreamHandle(handle as u64), stream) })
}

/// A cudarc stream over a gpu-mem stream's handle, usable while the gpu-mem stream is borrowed
/// (see [`cudarc_stream`]). Derefs to `CudaStream` only: the `Arc` cudarc's allocations and
/// copies would clone stays inside, so nothing can keep the handle past the gpu-mem stream.
pub struct BorrowedCudaStream<'a> {
    stream: Arc<CudaStream>,
    _borrow: PhantomData<&'a Stream>,
}

impl std::fmt::Debug for BorrowedCudaStream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BorrowedCudaStream")
            .field(
                "cu_stream",
                &format_args!("{:#x}", self.stream.cu_stream() as usize),
            )
            .finish()
    }
}

impl Deref for BorrowedCudaStream<'_> {
    type Target = CudaStream;
    fn deref(&self) -> &CudaStream {
        &self.stream
    }
}

/// The handle of a gpu-mem CUDA stream as a cudarc `CudaStream` of `ctx` (the device's primary
/// context), borrowed for the gpu-mem stream's borrow. cudarc's launches
/// (`stream.launch_builder(&f)`), events, `join`, `wait` and `synchronize` take `&CudaStream`;
/// its copies and allocations need an `Arc` (see [`cudarc_stream_arc`]). Work enqueued through
/// it is not tracked by gpu-mem: pass gpu-mem arrays to it through views ([`view`]) or
/// [`Stream::enqueue_external`].
pub fn cudarc_stream<'a>(
    stream: &'a Stream,
    ctx: &Arc<CudaContext>,
) -> Result<BorrowedCudaStream<'a>> {
    // SAFETY: no clone of the `Arc` leaves the wrapper, which lives at most as long as the
    // borrow of the gpu-mem stream, which destroys the handle only when it is dropped.
    let stream = unsafe { cudarc_stream_arc(stream, ctx) }?;
    Ok(BorrowedCudaStream {
        stream,
        _borrow: PhantomData,
    })
}

/// The handle of a gpu-mem CUDA stream as an `Arc<CudaStream>` of `ctx` that never destroys it
/// (`CudaContext::wrap_borrowed_stream`).
///
/// # Safety
/// Every clone of the returned `Arc` — including those kept by `CudaSlice`s allocated or
/// copied on it, which free their memory on it when dropped — is dropped before `stream` (or,
/// for a stream adopted with [`Stream::from_raw_handle`], before its owner destroys the
/// handle).
pub unsafe fn cudarc_stream_arc(
    stream: &Stream,
    ctx: &Arc<CudaContext>,
) -> Result<Arc<CudaStream>> {
    check_context(stream.device(), ctx)?;
    let handle = stream.handle().0 as usize;
    // Every gpu-mem CUDA stream is created in (or adopted from) the primary context, which is
    // `ctx` (checked); work of both libraries on it is ordered by the stream itself.
    // SAFETY: as just said; the caller keeps every clone within the gpu-mem stream's life.
    Ok(unsafe { ctx.wrap_borrowed_stream(handle as ::cudarc::driver::sys::CUstream) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe-first path: where gpu-mem cannot use the driver, `context` returns the same
    /// error instead of reaching cudarc (whose `CudaContext::new` would panic without
    /// `libcuda`); where it can, a context of device 0 opens and an ordinal past the last
    /// device is refused by name.
    #[test]
    fn context_checks_the_driver_first() {
        match ready() {
            Err(expected) => {
                let got = context(0).err().map(|e| e.to_string());
                assert_eq!(got, Some(expected.to_string()));
            }
            Ok(found) => {
                assert!(context(0).is_ok());
                assert!(matches!(
                    context(found.device_count),
                    Err(Error::NoSuchDevice { device, .. }) if device == found.device_count
                ));
            }
        }
    }

    #[test]
    fn driver_errors_keep_the_code() {
        let err = driver_error(
            "cuStreamSynchronize",
            DriverError(driver::sys::CUresult::CUDA_ERROR_INVALID_HANDLE),
        );
        match err {
            Error::Native {
                backend,
                call,
                code,
                code_name,
                ..
            } => {
                assert_eq!(backend, BackendKind::Cuda);
                assert_eq!(call, "cuStreamSynchronize");
                assert_eq!(code, 400);
                assert_eq!(code_name, "CUDA_ERROR_INVALID_HANDLE");
            }
            other => panic!("not a native error: {other}"),
        }
    }
}
