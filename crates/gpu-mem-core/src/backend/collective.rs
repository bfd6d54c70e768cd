//! [`Collectives`]: NCCL-style collective communication between devices (optional, through
//! [`Backend::collectives`](super::Backend::collectives)), and the plain data its calls carry.
//!
//! The engine is the vendor's (NCCL on CUDA, RCCL on ROC) or, on the simulator, a model of
//! NCCL's contract between simulated devices of one process. This trait only moves the calls
//! across: the core checks types, sizes, contiguity and devices before a call reaches it, and
//! keeps the arrays alive until the stream's work is done.

use super::types::{DevicePtr, StreamHandle};
use crate::error::Result;
use std::fmt;

/// A backend's communicator handle (an `ncclComm_t` on CUDA, a simulator id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommHandle(pub u64);

/// The size of [`UniqueId`] (`NCCL_UNIQUE_ID_BYTES`).
pub const UNIQUE_ID_BYTES: usize = 128;

/// What ranks of one communicator share before they join it (`ncclUniqueId`): made once by one
/// rank ([`Collectives::unique_id`]) and sent to the others by the user (a file, a socket, MPI).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueId(pub [u8; UNIQUE_ID_BYTES]);

impl fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UniqueId({}…)", &self.to_hex()[..16])
    }
}

impl UniqueId {
    /// The id as bytes, to send to the other ranks.
    pub fn to_bytes(&self) -> [u8; UNIQUE_ID_BYTES] {
        self.0
    }

    /// The id from bytes another rank sent; `None` unless there are exactly
    /// [`UNIQUE_ID_BYTES`].
    pub fn from_bytes(bytes: &[u8]) -> Option<UniqueId> {
        <[u8; UNIQUE_ID_BYTES]>::try_from(bytes).ok().map(UniqueId)
    }

    /// The id as lowercase hexadecimal text (256 characters), for a file or a command line.
    pub fn to_hex(&self) -> String {
        use std::fmt::Write as _;
        let mut text = String::with_capacity(2 * UNIQUE_ID_BYTES);
        for byte in self.0 {
            let _ = write!(text, "{byte:02x}");
        }
        text
    }

    /// The id from [`UniqueId::to_hex`]'s text (surrounding whitespace ignored); `None` when it
    /// is not 256 hexadecimal digits.
    pub fn from_hex(text: &str) -> Option<UniqueId> {
        let text = text.trim();
        if text.len() != 2 * UNIQUE_ID_BYTES || !text.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; UNIQUE_ID_BYTES];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(UniqueId(bytes))
    }
}

/// A reduction (`ncclRedOp_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// `ncclSum`.
    Sum,
    /// `ncclProd`.
    Prod,
    /// `ncclMax`.
    Max,
    /// `ncclMin`.
    Min,
    /// `ncclAvg` (NCCL 2.10 and later): the sum divided by the number of ranks.
    Avg,
}

impl ReduceOp {
    /// NCCL's name for it.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Avg => "avg",
        }
    }
}

/// An element type the engines reduce and move (`ncclDataType_t`, without the 16-bit floats,
/// which gpu-mem has no element type for).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CollectiveType {
    /// `ncclInt8`.
    I8,
    /// `ncclUint8`.
    U8,
    /// `ncclInt32`.
    I32,
    /// `ncclUint32`.
    U32,
    /// `ncclInt64`.
    I64,
    /// `ncclUint64`.
    U64,
    /// `ncclFloat32`.
    F32,
    /// `ncclFloat64`.
    F64,
}

impl CollectiveType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            CollectiveType::I8 | CollectiveType::U8 => 1,
            CollectiveType::I32 | CollectiveType::U32 | CollectiveType::F32 => 4,
            CollectiveType::I64 | CollectiveType::U64 | CollectiveType::F64 => 8,
        }
    }

    /// The Rust name of the element type.
    pub fn name(self) -> &'static str {
        match self {
            CollectiveType::I8 => "i8",
            CollectiveType::U8 => "u8",
            CollectiveType::I32 => "i32",
            CollectiveType::U32 => "u32",
            CollectiveType::I64 => "i64",
            CollectiveType::U64 => "u64",
            CollectiveType::F32 => "f32",
            CollectiveType::F64 => "f64",
        }
    }
}

/// One rank's part of a collective or point-to-point call, with device addresses. Counts are in
/// elements of the call's [`CollectiveType`]; for the gathering and scattering calls `count` is
/// the per-rank part, as in NCCL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectiveCall {
    /// `ncclAllReduce`: `recv` (count) = op over every rank's `send` (count).
    AllReduce {
        /// Source.
        send: DevicePtr,
        /// Destination (may equal `send`).
        recv: DevicePtr,
        /// Elements.
        count: usize,
        /// Reduction.
        op: ReduceOp,
    },
    /// `ncclReduce`: `recv` of `root` = op over every rank's `send`.
    Reduce {
        /// Source.
        send: DevicePtr,
        /// Destination, written on `root` only.
        recv: DevicePtr,
        /// Elements.
        count: usize,
        /// Reduction.
        op: ReduceOp,
        /// The rank that receives.
        root: usize,
    },
    /// `ncclBroadcast`: every rank's `recv` = `root`'s `send`.
    Broadcast {
        /// Source, read on `root` only.
        send: DevicePtr,
        /// Destination.
        recv: DevicePtr,
        /// Elements.
        count: usize,
        /// The rank that sends.
        root: usize,
    },
    /// `ncclAllGather`: `recv` (count × ranks) = every rank's `send` (count), in rank order.
    AllGather {
        /// Source.
        send: DevicePtr,
        /// Destination.
        recv: DevicePtr,
        /// Elements per rank.
        count: usize,
    },
    /// `ncclReduceScatter`: `recv` (count) = part `rank` of op over every rank's `send`
    /// (count × ranks).
    ReduceScatter {
        /// Source.
        send: DevicePtr,
        /// Destination.
        recv: DevicePtr,
        /// Elements per rank.
        count: usize,
        /// Reduction.
        op: ReduceOp,
    },
    /// `ncclSend` of `buf` to `peer`.
    Send {
        /// Source.
        buf: DevicePtr,
        /// Elements.
        count: usize,
        /// The receiving rank.
        peer: usize,
    },
    /// `ncclRecv` into `buf` from `peer`.
    Recv {
        /// Destination.
        buf: DevicePtr,
        /// Elements.
        count: usize,
        /// The sending rank.
        peer: usize,
    },
}

impl CollectiveCall {
    /// NCCL's name of the call (`ncclAllReduce`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            CollectiveCall::AllReduce { .. } => "ncclAllReduce",
            CollectiveCall::Reduce { .. } => "ncclReduce",
            CollectiveCall::Broadcast { .. } => "ncclBroadcast",
            CollectiveCall::AllGather { .. } => "ncclAllGather",
            CollectiveCall::ReduceScatter { .. } => "ncclReduceScatter",
            CollectiveCall::Send { .. } => "ncclSend",
            CollectiveCall::Recv { .. } => "ncclRecv",
        }
    }
}

/// Collective communication between devices (NCCL, RCCL, or the simulator's model of them).
///
/// # Safety
///
/// An implementation must uphold [`Backend`](super::Backend)'s contract, and:
///
/// * **Ranges.** [`Collectives::enqueue`] reads and writes only the ranges its call names, sized
///   by the counts and type given, on the communicator's device (`send` ranges are only read).
/// * **Ordering.** Enqueued work is work of its stream: ordered after that stream's earlier
///   work, and complete when a synchronization or query of the stream (or of the device)
///   reports it so.
/// * **Handles.** A [`CommHandle`] returned by an init call stays valid until
///   [`Collectives::comm_destroy`] is called on it, and belongs to the device it was made for.
pub unsafe trait Collectives: Send + Sync {
    /// The engine and its version ("NCCL 2.32.3", "gpu-mem simulator"), or why it cannot be
    /// used (the library is missing or too old).
    fn engine(&self) -> Result<String>;

    /// A new unique id (`ncclGetUniqueId`), for [`Collectives::comm_init_rank`].
    fn unique_id(&self) -> Result<UniqueId>;

    /// Joins rank `rank` of `nranks` of the communicator named by `id`, on `device`
    /// (`ncclCommInitRank`). Returns once every rank has joined, or fails.
    fn comm_init_rank(
        &self,
        device: usize,
        id: &UniqueId,
        nranks: usize,
        rank: usize,
    ) -> Result<CommHandle>;

    /// One communicator over `devices` of this process, rank `i` on `devices[i]`
    /// (`ncclCommInitAll`).
    fn comm_init_all(&self, devices: &[usize]) -> Result<Vec<CommHandle>>;

    /// Destroys a communicator (`ncclCommDestroy`), once its enqueued work is complete.
    ///
    /// # Safety
    /// `comm` came from an init call of this backend and is destroyed only once.
    unsafe fn comm_destroy(&self, device: usize, comm: CommHandle) -> Result<()>;

    /// Whether the communicator is still usable (`ncclCommGetAsyncError`): an error that
    /// happened after calls were enqueued (a peer gone, a network failure; on the simulator, a
    /// rank that never called) makes it unusable, and is returned here.
    ///
    /// # Safety
    /// `comm` came from an init call of this backend for `device` and is not destroyed.
    unsafe fn comm_check(&self, device: usize, comm: CommHandle) -> Result<()>;

    /// Enqueues `call` of rank `rank` of `nranks` on `stream` (`ncclAllReduce`, ...).
    ///
    /// # Safety
    /// `comm` is live and was made for `device`; `stream` came from
    /// [`Streams::stream_create`](super::Streams::stream_create) on `device` and is not
    /// destroyed; every range the call names lies in live memory of `device` that stays
    /// allocated, and unaliased by host code, until the work completes.
    unsafe fn enqueue(
        &self,
        device: usize,
        comm: CommHandle,
        call: &CollectiveCall,
        dtype: CollectiveType,
        stream: StreamHandle,
    ) -> Result<()>;

    /// Opens a group (`ncclGroupStart`): the calls made on this thread until the matching
    /// [`Collectives::group_end`] are issued together.
    fn group_start(&self) -> Result<()>;

    /// Closes a group (`ncclGroupEnd`), issuing its calls.
    fn group_end(&self) -> Result<()>;
}
