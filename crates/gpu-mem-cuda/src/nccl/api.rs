//! [`Nccl`]: the loaded NCCL library and one thin function per NCCL call.

use crate::driver::library::{self, LibrarySpec, LoadedLibrary};
use gpu_mem_core::backend::{CollectiveCall, CollectiveType, ReduceOp, UNIQUE_ID_BYTES};
use gpu_mem_core::{BackendKind, Error, Result};
use gpu_mem_nccl_sys::nccl::{
    cudaStream_t, ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclResult_t, ncclUniqueId,
};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::Path;

/// How NCCL is found: `GPU_MEM_NCCL_LIBRARY`, else its soname.
pub const NCCL_LIBRARY: LibrarySpec = LibrarySpec {
    library: "NCCL",
    override_var: "GPU_MEM_NCCL_LIBRARY",
    candidates: &["libnccl.so.2", "libnccl.so"],
};

/// The oldest NCCL gpu-mem uses: 2.7, the first with `ncclSend` / `ncclRecv`. (`ReduceOp::Avg`
/// needs 2.10, and the last-error text 2.13; older libraries refuse or omit only those.)
pub const MIN_NCCL_VERSION: (u32, u32, u32) = (2, 7, 0);

/// `(major, minor, patch)` of an `NCCL_VERSION_CODE` (shared with RCCL's loader).
pub use gpu_mem_nccl_sys::decode_version;

/// Turns the generated symbol list into the table `Symbols` (the release each entry needs is
/// documentation of the -sys crate only).
macro_rules! nccl_table {
    ($( $field:ident : $pfn:ty = [$($name:literal),+], $since:literal; )*) => {
        gpu_mem_loader::symbol_table! {
            /// Resolved NCCL function pointers (`None` = not exported by the loaded library).
            pub struct Symbols {
                $( $field: $pfn = [$($name),+], )*
            }
        }
    };
}

gpu_mem_nccl_sys::nccl_symbols!(nccl_table);

/// The calls without which the library is refused (all but the error-text helpers).
const REQUIRED: &[&str] = &[
    "ncclGetVersion",
    "ncclGetUniqueId",
    "ncclCommInitRank",
    "ncclCommInitAll",
    "ncclCommDestroy",
    "ncclAllReduce",
    "ncclReduce",
    "ncclBroadcast",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclSend",
    "ncclRecv",
    "ncclGroupStart",
    "ncclGroupEnd",
];

/// One loaded NCCL library.
pub struct Nccl {
    symbols: Symbols,
    version: (u32, u32, u32),
    /// Opened once per process and never unloaded, so the pointers above stay valid.
    library: &'static LoadedLibrary,
}

impl std::fmt::Debug for Nccl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nccl")
            .field("path", &self.library.path())
            .field("version", &self.version)
            .field("symbols", &self.symbols)
            .finish()
    }
}

macro_rules! get {
    ($self:ident . $field:ident) => {
        match $self.symbols.$field {
            Some(f) => f,
            None => {
                return Err(Error::MissingSymbol {
                    library: $self.library.name(),
                    path: $self.library.path().to_string(),
                    symbol: stringify!($field),
                    feature: "collectives",
                });
            }
        }
    };
}

impl Nccl {
    /// Loads NCCL (`GPU_MEM_NCCL_LIBRARY` or its soname) and checks it is usable.
    pub fn load() -> Result<Nccl> {
        Self::from_library(library::open(&NCCL_LIBRARY)?)
    }

    /// Loads NCCL from exactly `path`.
    pub fn load_from(path: &Path) -> Result<Nccl> {
        Self::from_library(library::open_path(&NCCL_LIBRARY, path)?)
    }

    fn from_library(library: &'static LoadedLibrary) -> Result<Nccl> {
        // SAFETY: the table's pointer types are generated from nccl.h for exactly the exported
        // names they are looked up by, and the library is never unloaded.
        let symbols = unsafe { Symbols::resolve(library.raw()) };
        let refuse = |reason: String| Error::LibraryLoad {
            library: NCCL_LIBRARY.library,
            tried: vec![library.path().to_string()],
            reason,
            present: true,
        };
        let missing: Vec<&str> = symbols
            .presence()
            .into_iter()
            .filter(|(field, _, resolved)| !resolved && REQUIRED.contains(field))
            .map(|(_, name, _)| name)
            .collect();
        if !missing.is_empty() {
            return Err(refuse(format!(
                "it does not export {} (not NCCL, or older than {}.{})",
                missing.join(", "),
                MIN_NCCL_VERSION.0,
                MIN_NCCL_VERSION.1
            )));
        }
        let mut nccl = Nccl {
            symbols,
            version: (0, 0, 0),
            library,
        };
        let code = nccl.version_code()?;
        nccl.version = decode_version(code);
        if nccl.version < MIN_NCCL_VERSION {
            let (a, b, c) = nccl.version;
            let (x, y, z) = MIN_NCCL_VERSION;
            return Err(refuse(format!(
                "NCCL {a}.{b}.{c} is too old: gpu-mem needs {x}.{y}.{z} or later"
            )));
        }
        Ok(nccl)
    }

    /// The path or soname NCCL was loaded from.
    pub fn path(&self) -> &str {
        self.library.path()
    }

    /// `(major, minor, patch)` of the loaded library.
    pub fn version(&self) -> (u32, u32, u32) {
        self.version
    }

    /// `(field, exported name, resolved)` for every call of the table.
    pub fn presence(&self) -> Vec<(&'static str, &'static str, bool)> {
        self.symbols.presence()
    }

    /// `ncclGetVersion`: the `NCCL_VERSION_CODE` of the library.
    pub fn version_code(&self) -> Result<i32> {
        let f = get!(self.ncclGetVersion);
        let mut code: c_int = 0;
        // SAFETY: the out-pointer is a live local.
        self.check("ncclGetVersion", unsafe { f(&mut code) }, None)?;
        Ok(code)
    }

    /// `ncclGetErrorString`: NCCL's text for a result code.
    pub fn error_string(&self, code: ncclResult_t) -> String {
        self.symbols
            .ncclGetErrorString
            // SAFETY: ncclGetErrorString takes a plain code and returns a static string or null.
            .and_then(|f| text(unsafe { f(code) }))
            .unwrap_or_else(|| format!("ncclResult_t {}", code.0))
    }

    /// `ncclGetLastError`: the text of the last error on `comm` (or of the thread's last
    /// error, for a null `comm`), where the library has it.
    fn last_error(&self, comm: ncclComm_t) -> Option<String> {
        let f = self.symbols.ncclGetLastError?;
        // SAFETY: ncclGetLastError accepts null or a live communicator and returns a string
        // owned by NCCL (or null), copied out at once.
        text(unsafe { f(comm) }).filter(|t| !t.trim().is_empty())
    }

    /// The [`Error::Native`] for a failed `call` (on `comm`, when it has one).
    fn error(&self, call: &'static str, code: ncclResult_t, comm: Option<ncclComm_t>) -> Error {
        let last = self.last_error(comm.unwrap_or(std::ptr::null_mut()));
        Error::Native {
            backend: BackendKind::Cuda,
            call,
            code: i64::from(code.0),
            code_name: self.error_string(code),
            description: match last {
                Some(last) => format!("NCCL's last error: {last}"),
                None => format!("{call} failed (run with NCCL_DEBUG=WARN for NCCL's reasons)"),
            },
        }
    }

    fn check(
        &self,
        call: &'static str,
        code: ncclResult_t,
        comm: Option<ncclComm_t>,
    ) -> Result<()> {
        if code == ncclResult_t::ncclSuccess {
            Ok(())
        } else {
            Err(self.error(call, code, comm))
        }
    }

    /// `ncclGetUniqueId`: works without a GPU.
    pub fn unique_id(&self) -> Result<[u8; UNIQUE_ID_BYTES]> {
        let f = get!(self.ncclGetUniqueId);
        let mut id = ncclUniqueId {
            internal: [0; UNIQUE_ID_BYTES],
        };
        // SAFETY: the out-pointer is a live local of the declared type.
        self.check("ncclGetUniqueId", unsafe { f(&mut id) }, None)?;
        Ok(id.internal.map(|c| c as u8))
    }

    /// `ncclCommInitRank` on the current device (the current context's).
    ///
    /// # Safety
    /// A context of the device the rank runs on is current on this thread.
    pub unsafe fn comm_init_rank(
        &self,
        nranks: usize,
        id: &[u8; UNIQUE_ID_BYTES],
        rank: usize,
    ) -> Result<ncclComm_t> {
        let f = get!(self.ncclCommInitRank);
        let (nranks, rank) = (int("nranks", nranks)?, int("rank", rank)?);
        let id = ncclUniqueId {
            internal: id.map(|b| b as c_char),
        };
        let mut comm: ncclComm_t = std::ptr::null_mut();
        self.check(
            "ncclCommInitRank",
            // SAFETY: the out-pointer is a live local; the id is passed by value; the caller
            // made the device's context current.
            unsafe { f(&mut comm, nranks, id, rank) },
            None,
        )?;
        Ok(comm)
    }

    /// `ncclCommInitAll` over CUDA device ordinals `devices`.
    pub fn comm_init_all(&self, devices: &[c_int]) -> Result<Vec<ncclComm_t>> {
        let f = get!(self.ncclCommInitAll);
        let mut comms: Vec<ncclComm_t> = vec![std::ptr::null_mut(); devices.len()];
        let n = int("devices", devices.len())?;
        self.check(
            "ncclCommInitAll",
            // SAFETY: `comms` has room for one communicator per device, `devices` is read only.
            unsafe { f(comms.as_mut_ptr(), n, devices.as_ptr()) },
            None,
        )?;
        Ok(comms)
    }

    /// `ncclCommDestroy`.
    ///
    /// # Safety
    /// `comm` is live and destroyed only once; the device's context is current.
    pub unsafe fn comm_destroy(&self, comm: ncclComm_t) -> Result<()> {
        let f = get!(self.ncclCommDestroy);
        // SAFETY: the caller's contract.
        self.check("ncclCommDestroy", unsafe { f(comm) }, None)
    }

    /// `ncclCommGetAsyncError`: `Ok` while `comm` is usable (or still initialising), else the
    /// error that made it unusable, with NCCL's last-error text.
    ///
    /// # Safety
    /// `comm` is live.
    pub unsafe fn comm_async_error(&self, comm: ncclComm_t) -> Result<()> {
        let f = get!(self.ncclCommGetAsyncError);
        let mut state = ncclResult_t::ncclSuccess;
        // SAFETY: the caller guarantees a live communicator; the out-pointer is a live local.
        let code = unsafe { f(comm, &mut state) };
        self.check("ncclCommGetAsyncError", code, Some(comm))?;
        if state == ncclResult_t::ncclSuccess || state == ncclResult_t::ncclInProgress {
            Ok(())
        } else {
            Err(self.error("ncclCommGetAsyncError", state, Some(comm)))
        }
    }

    /// Enqueues one rank's `call` on `stream` (`ncclAllReduce`, ...).
    ///
    /// # Safety
    /// `comm` is live and belongs to the current context's device; `stream` is a live stream of
    /// that context; every range the call names (its counts times `dtype`'s size) lies in device
    /// memory of that device that stays allocated until the work completes.
    pub unsafe fn enqueue(
        &self,
        comm: ncclComm_t,
        call: &CollectiveCall,
        dtype: CollectiveType,
        stream: cudaStream_t,
    ) -> Result<()> {
        let t = data_type(dtype);
        let ptr = |p: gpu_mem_core::backend::DevicePtr| p.0 as usize as *mut c_void;
        let name = call.name();
        // In every arm: the caller's contract holds; the pointers are device addresses NCCL
        // reads or writes on `stream`, sized by the counts.
        let code = match *call {
            CollectiveCall::AllReduce {
                send,
                recv,
                count,
                op,
            } => {
                let f = get!(self.ncclAllReduce);
                // SAFETY: see above: the caller's contract covers the ranges, comm and stream.
                unsafe { f(ptr(send), ptr(recv), count, t, red_op(op), comm, stream) }
            }
            CollectiveCall::Reduce {
                send,
                recv,
                count,
                op,
                root,
            } => {
                let f = get!(self.ncclReduce);
                let root = int("root", root)?;
                // SAFETY: see above: the caller's contract covers the ranges, comm and stream.
                unsafe {
                    f(
                        ptr(send),
                        ptr(recv),
                        count,
                        t,
                        red_op(op),
                        root,
                        comm,
                        stream,
                    )
                }
            }
            CollectiveCall::Broadcast {
                send,
                recv,
                count,
                root,
            } => {
                let f = get!(self.ncclBroadcast);
                let root = int("root", root)?;
                // SAFETY: see above: the caller's contract covers the ranges, comm and stream.
                unsafe { f(ptr(send), ptr(recv), count, t, root, comm, stream) }
            }
            CollectiveCall::AllGather { send, recv, count } => {
                let f = get!(self.ncclAllGather);
                // SAFETY: see above: the caller's contract covers the ranges, comm and stream.
                unsafe { f(ptr(send), ptr(recv), count, t, comm, stream) }
            }
            CollectiveCall::ReduceScatter {
                send,
                recv,
                count,
                op,
            } => {
                let f = get!(self.ncclReduceScatter);
                // SAFETY: see above: the caller's contract covers the ranges, comm and stream.
                unsafe { f(ptr(send), ptr(recv), count, t, red_op(op), comm, stream) }
            }
            CollectiveCall::Send { buf, count, peer } => {
                let f = get!(self.ncclSend);
                let peer = int("peer", peer)?;
                // SAFETY: see above: the caller's contract covers the ranges, comm and stream.
                unsafe { f(ptr(buf), count, t, peer, comm, stream) }
            }
            CollectiveCall::Recv { buf, count, peer } => {
                let f = get!(self.ncclRecv);
                let peer = int("peer", peer)?;
                // SAFETY: see above: the caller's contract covers the ranges, comm and stream.
                unsafe { f(ptr(buf), count, t, peer, comm, stream) }
            }
        };
        self.check(name, code, Some(comm))
    }

    /// `ncclGroupStart`.
    pub fn group_start(&self) -> Result<()> {
        let f = get!(self.ncclGroupStart);
        // SAFETY: no arguments; NCCL keeps the group per thread.
        self.check("ncclGroupStart", unsafe { f() }, None)
    }

    /// `ncclGroupEnd`: issues the group's calls.
    pub fn group_end(&self) -> Result<()> {
        let f = get!(self.ncclGroupEnd);
        // SAFETY: no arguments; the calls of the group were checked when they were made.
        self.check("ncclGroupEnd", unsafe { f() }, None)
    }
}

/// A NUL-terminated string NCCL returned, copied (`None` for null).
fn text(ptr: *const c_char) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: NCCL returns NUL-terminated strings it owns; copied at once.
    Some(
        unsafe { CStr::from_ptr(ptr) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// `value` as NCCL's `int`, or an error naming the argument.
fn int(name: &'static str, value: usize) -> Result<c_int> {
    c_int::try_from(value).map_err(|_| Error::InvalidArgument {
        name,
        reason: format!("{value} does not fit NCCL's int"),
    })
}

/// NCCL's data type of a collective element type.
pub(crate) fn data_type(t: CollectiveType) -> ncclDataType_t {
    match t {
        CollectiveType::I8 => ncclDataType_t::ncclInt8,
        CollectiveType::U8 => ncclDataType_t::ncclUint8,
        CollectiveType::I32 => ncclDataType_t::ncclInt32,
        CollectiveType::U32 => ncclDataType_t::ncclUint32,
        CollectiveType::I64 => ncclDataType_t::ncclInt64,
        CollectiveType::U64 => ncclDataType_t::ncclUint64,
        CollectiveType::F32 => ncclDataType_t::ncclFloat32,
        CollectiveType::F64 => ncclDataType_t::ncclFloat64,
    }
}

/// NCCL's reduction.
pub(crate) fn red_op(op: ReduceOp) -> ncclRedOp_t {
    match op {
        ReduceOp::Sum => ncclRedOp_t::ncclSum,
        ReduceOp::Prod => ncclRedOp_t::ncclProd,
        ReduceOp::Max => ncclRedOp_t::ncclMax,
        ReduceOp::Min => ncclRedOp_t::ncclMin,
        ReduceOp::Avg => ncclRedOp_t::ncclAvg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_codes_decode_in_both_schemes() {
        assert_eq!(decode_version(2708), (2, 7, 8));
        assert_eq!(decode_version(20903), (2, 9, 3));
        assert_eq!(decode_version(23203), (2, 32, 3));
        assert!(decode_version(2604) < MIN_NCCL_VERSION);
        assert!(decode_version(2700) >= MIN_NCCL_VERSION);
    }
}
