//! Sharing device arrays between processes (Numba's `DeviceNDArray.get_ipc_handle()` and
//! `cuda.open_ipc_array`).
//!
//! [`DeviceArray::ipc_handle`] exports the allocation behind an array as an [`IpcArrayHandle`]:
//! the backend's memory handle plus the array's offset, shape, strides and element type. The
//! handle is plain data ([`IpcArrayHandle::to_bytes`], [`IpcArrayHandle::to_hex`]) to send to
//! another process, which opens it with [`Device::open_ipc_array`] and gets a [`DeviceArray`]
//! over the *same* memory; dropping that array (and every view of it) closes the mapping
//! (`cuIpcCloseMemHandle`), as Numba's `IpcArrayHandle.close()` does.
//!
//! The exporting process must keep its array alive while others use the memory, and the
//! processes order their accesses themselves (events, or a message after a synchronize): no
//! process sees another's streams. Backends: CUDA `cuIpcGetMemHandle` / `cuIpcOpenMemHandle`
//! (a handle cannot be opened in the process that made it); ROC `hsa_amd_ipc_memory_create` /
//! `_attach`; the simulator shares device memory through a memory file another process maps.
//!
//! Interop on top of the core: it may use arrays, memory, devices and the backend; nothing else
//! in the core uses it.

use crate::array::DeviceArray;
use crate::backend::{DevicePtr, IpcMemHandle, require};
use crate::device::Device;
use crate::element::Element;
use crate::error::{BackendKind, Error, Result};
use crate::layout::Layout;
use crate::memory::{Release, Storage};

/// A device array exported for another process: serialisable with [`IpcArrayHandle::to_bytes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpcArrayHandle {
    /// The backend kind that exported it (only the same kind can open it).
    pub backend: BackendKind,
    /// The backend's handle of the whole allocation.
    pub memory: IpcMemHandle,
    /// Byte offset of the array's first element from the start of the allocation.
    pub offset: u64,
    /// Shape in elements.
    pub shape: Vec<usize>,
    /// Strides in elements.
    pub strides: Vec<isize>,
    /// Element type name ([`Element::dtype`]).
    pub dtype: String,
    /// Element size in bytes.
    pub itemsize: usize,
}

const MAGIC: &[u8; 6] = b"GMIPC1";

fn malformed(reason: impl Into<String>) -> Error {
    Error::InvalidArgument {
        name: "IPC handle",
        reason: reason.into(),
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.0.len() < n {
            return Err(malformed("truncated"));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn u64(&mut self) -> Result<u64> {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(bytes))
    }

    fn usize(&mut self) -> Result<usize> {
        usize::try_from(self.u64()?).map_err(|_| malformed("a size does not fit this machine"))
    }

    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.usize()?;
        Ok(self.take(n)?.to_vec())
    }
}

impl IpcArrayHandle {
    /// The handle as bytes (a little-endian format with a magic prefix and version).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.memory.data.len());
        out.extend_from_slice(MAGIC);
        out.push(match self.backend {
            BackendKind::Cuda => 0,
            BackendKind::Roc => 1,
            BackendKind::Sim => 2,
        });
        let mut put = |v: u64| out.extend_from_slice(&v.to_le_bytes());
        put(self.memory.bytes);
        put(self.offset);
        put(self.itemsize as u64);
        put(self.shape.len() as u64);
        for &n in &self.shape {
            put(n as u64);
        }
        for &s in &self.strides {
            put(s as i64 as u64);
        }
        put(self.dtype.len() as u64);
        out.extend_from_slice(self.dtype.as_bytes());
        out.extend_from_slice(&(self.memory.data.len() as u64).to_le_bytes());
        out.extend_from_slice(&self.memory.data);
        out
    }

    /// Reads a handle written by [`IpcArrayHandle::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<IpcArrayHandle> {
        let mut r = Reader(bytes);
        if r.take(MAGIC.len())? != MAGIC {
            return Err(malformed("not a gpu-mem IPC handle (bad magic)"));
        }
        let backend = match r.take(1)?[0] {
            0 => BackendKind::Cuda,
            1 => BackendKind::Roc,
            2 => BackendKind::Sim,
            other => return Err(malformed(format!("unknown backend tag {other}"))),
        };
        let size = r.u64()?;
        let offset = r.u64()?;
        let itemsize = r.usize()?;
        let ndim = r.usize()?;
        if ndim > 64 {
            return Err(malformed(format!("{ndim} dimensions")));
        }
        let shape = (0..ndim).map(|_| r.usize()).collect::<Result<Vec<_>>>()?;
        let strides = (0..ndim)
            .map(|_| r.u64().map(|v| v as i64 as isize))
            .collect::<Result<Vec<_>>>()?;
        let dtype = String::from_utf8(r.bytes()?).map_err(|_| malformed("dtype is not UTF-8"))?;
        let data = r.bytes()?;
        if !r.0.is_empty() {
            return Err(malformed("trailing bytes"));
        }
        Ok(IpcArrayHandle {
            backend,
            memory: IpcMemHandle { bytes: size, data },
            offset,
            shape,
            strides,
            dtype,
            itemsize,
        })
    }

    /// [`IpcArrayHandle::to_bytes`] as lowercase hex, for a command line or an environment
    /// variable.
    pub fn to_hex(&self) -> String {
        self.to_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads [`IpcArrayHandle::to_hex`]'s output.
    pub fn from_hex(hex: &str) -> Result<IpcArrayHandle> {
        let hex = hex.trim();
        if !hex.len().is_multiple_of(2) {
            return Err(malformed("odd number of hex digits"));
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| {
                hex.get(i..i + 2)
                    .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                    .ok_or_else(|| malformed("not hex"))
            })
            .collect::<Result<Vec<u8>>>()?;
        IpcArrayHandle::from_bytes(&bytes)
    }
}

impl<T: Element> DeviceArray<T> {
    /// Exports the array for another process (Numba's `get_ipc_handle()`). The whole allocation
    /// behind the array is shared; the handle records where the array lies in it. Only memory
    /// gpu-mem allocated on the device can be exported (not mapped, managed or foreign memory).
    pub fn ipc_handle(&self) -> Result<IpcArrayHandle> {
        let Storage::Device(alloc) = &self.storage else {
            return Err(Error::Unsupported {
                operation: "get_ipc_handle",
                reason: "only device allocations made by gpu-mem can be exported, not mapped, managed or foreign memory".into(),
            });
        };
        let device = alloc.device();
        if alloc.ptr().is_null() {
            return Err(Error::InvalidArgument {
                name: "array",
                reason: "an empty array has no memory to export".into(),
            });
        }
        let backend = device.backend();
        let memory = require(backend.as_ref(), backend.ipc(), "IPC memory handles")?
            .ipc_get_handle(device.ordinal(), alloc.ptr())?;
        Ok(IpcArrayHandle {
            backend: device.kind(),
            memory,
            offset: self.offset as u64,
            shape: self.shape().to_vec(),
            strides: self.strides().to_vec(),
            dtype: T::dtype().to_string(),
            itemsize: T::itemsize(),
        })
    }
}

impl Device {
    /// Opens an array another process exported with [`DeviceArray::ipc_handle`] (Numba's
    /// `open_ipc_array` / `IpcArrayHandle.open()`): a device array over the same memory, mapped
    /// into this device until the array and its views are dropped.
    #[track_caller]
    pub fn open_ipc_array<T: Element>(&self, handle: &IpcArrayHandle) -> Result<DeviceArray<T>> {
        if handle.backend != self.kind() {
            return Err(Error::InvalidArgument {
                name: "IPC handle",
                reason: format!(
                    "exported by the {} backend, opened on the {} backend",
                    handle.backend,
                    self.kind()
                ),
            });
        }
        if handle.dtype != T::dtype() || handle.itemsize != T::itemsize() {
            return Err(Error::InvalidArgument {
                name: "IPC handle",
                reason: format!(
                    "holds {} ({} bytes), opened as {} ({} bytes)",
                    handle.dtype,
                    handle.itemsize,
                    T::dtype(),
                    T::itemsize()
                ),
            });
        }
        let layout = Layout::with_strides(&handle.shape, &handle.strides)?;
        let span = crate::array::span_bytes_of::<T>(&layout)?;
        let low = (handle.offset as i128) + (layout.min_offset() as i128) * (T::itemsize() as i128);
        if layout.size() > 0
            && (low < 0 || low as u128 + span as u128 > u128::from(handle.memory.bytes))
        {
            return Err(Error::InvalidArgument {
                name: "IPC handle",
                reason: format!(
                    "the array (offset {}, shape {:?}, strides {:?}) does not lie inside the {}-byte allocation",
                    handle.offset, handle.shape, handle.strides, handle.memory.bytes
                ),
            });
        }
        // Also for an array with no element: its address is computed below.
        if handle.offset > handle.memory.bytes {
            return Err(Error::InvalidArgument {
                name: "IPC handle",
                reason: format!(
                    "offset {} lies past the {}-byte allocation",
                    handle.offset, handle.memory.bytes
                ),
            });
        }
        if !(handle.offset as usize).is_multiple_of(std::mem::align_of::<T>()) {
            return Err(Error::InvalidArgument {
                name: "IPC handle",
                reason: format!("offset {} is not aligned for {}", handle.offset, T::dtype()),
            });
        }
        let backend = self.backend();
        let ipc = require(backend.as_ref(), backend.ipc(), "IPC memory handles")?;
        let base = ipc.ipc_open_handle(self.ordinal(), &handle.memory)?;
        // `base` maps `handle.memory.bytes` bytes at an aligned address (the offset was checked
        // above) until `Release::IpcMapping` closes it, after the last array and operation.
        let array = match base.0.checked_add(handle.offset) {
            // SAFETY: as just said; the array's span was checked to lie inside the mapping.
            Some(first) => unsafe {
                DeviceArray::foreign(
                    self,
                    DevicePtr(first),
                    &handle.shape,
                    &handle.strides,
                    Release::IpcMapping { base },
                    Some(crate::accounting::MemoryKind::IpcOpened),
                )
            },
            None => Err(Error::Overflow {
                what: format!(
                    "the IPC array's address ({:#x} + {})",
                    base.0, handle.offset
                ),
            }),
        };
        if array.is_err() {
            // SAFETY: `base` was just opened and nothing uses it.
            let _ = unsafe { ipc.ipc_close_handle(self.ordinal(), base) };
        }
        array
    }
}
