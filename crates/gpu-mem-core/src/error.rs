//! The one error type of gpu-mem.
//!
//! Every fallible call returns [`Result<T>`]. Each variant says what was wrong and with which
//! values, so a message can be acted on without reading the source. Numba's Python exception
//! types map onto variants: `TypeError`/`ValueError` on bad arguments become the specific
//! variants below, `NotImplementedError` becomes [`Error::Unsupported`], `IndexError` becomes
//! [`Error::IndexOutOfBounds`] or [`Error::TooManyIndices`].

use std::fmt;

/// Which backend an error comes from (for native errors and availability).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum BackendKind {
    /// NVIDIA CUDA driver API.
    Cuda,
    /// AMD ROCm through the HSA runtime.
    Roc,
    /// The CPU simulator.
    Sim,
}

impl BackendKind {
    /// All kinds, in the order `auto` tries them.
    pub const ALL: [BackendKind; 3] = [BackendKind::Cuda, BackendKind::Roc, BackendKind::Sim];

    /// The name used by `GPU_MEM_BACKEND` and in messages.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cuda => "cuda",
            BackendKind::Roc => "roc",
            BackendKind::Sim => "sim",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Formats a shape or strides list like Numba does: `(3, 4)`, `(5,)`, `()`.
pub fn fmt_dims<T: fmt::Display>(dims: &[T]) -> String {
    match dims {
        [] => "()".to_string(),
        [one] => format!("({one},)"),
        _ => {
            let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    }
}

/// What held a device's memory when an allocation failed: attached to out-of-memory errors so
/// they say what holds the rest, not only what was asked and what was free.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryReport {
    /// Bytes held by live allocations, per kind of memory (kinds holding nothing left out).
    pub held: Vec<(&'static str, u64)>,
    /// Bytes caches keep for reuse that a trim would give back
    /// ([`MemoryPool::trim`](crate::MemoryPool::trim)).
    pub releasable_bytes: u64,
    /// The largest live allocations: bytes, kind, and where each was made.
    pub largest: Vec<(u64, &'static str, String)>,
}

impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::units::human_bytes;
        if self.held.is_empty() {
            f.write_str("; gpu-mem holds no memory on this device")?;
        } else {
            f.write_str("; held by gpu-mem: ")?;
            for (i, (kind, bytes)) in self.held.iter().enumerate() {
                let sep = if i == 0 { "" } else { ", " };
                write!(f, "{sep}{} {kind}", human_bytes(*bytes))?;
            }
        }
        if self.releasable_bytes > 0 {
            write!(
                f,
                "; {} cached by the stream-ordered pool (a trim releases it)",
                human_bytes(self.releasable_bytes)
            )?;
        }
        if !self.largest.is_empty() {
            f.write_str("; largest live allocations:")?;
            for (bytes, kind, location) in &self.largest {
                write!(
                    f,
                    "\n  {} {kind} allocated at {location}",
                    human_bytes(*bytes)
                )?;
            }
        }
        Ok(())
    }
}

/// The report's text, or nothing when there is none.
fn report_text(report: &Option<Box<MemoryReport>>) -> String {
    report.as_ref().map(|r| r.to_string()).unwrap_or_default()
}

/// Everything that can go wrong in gpu-mem.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Two arrays that must have the same element type do not.
    #[error("incompatible dtype: {expected} vs. {found}")]
    IncompatibleDtype {
        /// The element type of the array that is copied from or into.
        expected: &'static str,
        /// The element type that was given.
        found: &'static str,
    },
    /// Two arrays that must have the same shape (after dropping size-1 axes) do not.
    #[error("incompatible shape: {} vs. {}", fmt_dims(.expected), fmt_dims(.found))]
    IncompatibleShape {
        /// Shape of the array the operation is called on.
        expected: Vec<usize>,
        /// Shape of the other array.
        found: Vec<usize>,
    },
    /// Two arrays that must have the same memory layout do not (strides in bytes, as Numba prints them).
    #[error("incompatible strides: {} vs. {}", fmt_dims(.expected), fmt_dims(.found))]
    IncompatibleStrides {
        /// Byte strides of the array the operation is called on.
        expected: Vec<isize>,
        /// Byte strides of the other array.
        found: Vec<isize>,
    },
    /// A transfer needs one contiguous memory region and the array is not one.
    #[error(
        "array with shape {} and strides {} (in elements) contains non-contiguous buffer and cannot be transferred as a single memory region; make it contiguous first (e.g. ndarray's `as_standard_layout()`)",
        fmt_dims(.shape), fmt_dims(.strides)
    )]
    NonContiguous {
        /// Shape of the offending array.
        shape: Vec<usize>,
        /// Strides (elements) of the offending array.
        strides: Vec<isize>,
    },
    /// A shape argument is invalid (negative, overflowing, wrong length ...).
    #[error("invalid shape {shape}: {reason}")]
    InvalidShape {
        /// The shape as given.
        shape: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Strides given for a shape do not fit it.
    #[error("invalid strides {} for shape {}: {reason}", fmt_dims(.strides), fmt_dims(.shape))]
    InvalidStrides {
        /// The shape.
        shape: Vec<usize>,
        /// The strides as given (elements).
        strides: Vec<isize>,
        /// What is wrong.
        reason: String,
    },
    /// A reshape request cannot be satisfied.
    #[error("cannot reshape array of shape {} into {}: {reason}", fmt_dims(.from), fmt_dims(.to))]
    Reshape {
        /// Current shape.
        from: Vec<usize>,
        /// Requested shape (negative = unknown dimension).
        to: Vec<isize>,
        /// Why not (Numba's wording).
        reason: &'static str,
    },
    /// An operation Numba also refuses because it would need a copy or is not defined for this layout.
    #[error("{operation} is not supported here: {reason}")]
    Unsupported {
        /// The operation (`ravel`, `reshape`, `transpose`, ...).
        operation: &'static str,
        /// Why (Numba's wording, with the values).
        reason: String,
    },
    /// An integer index is outside its axis.
    #[error("index {index} is out of bounds for axis {axis} with size {size}")]
    IndexOutOfBounds {
        /// The index as given (may be negative).
        index: isize,
        /// The axis.
        axis: usize,
        /// That axis' length.
        size: usize,
    },
    /// More indices were given than the array has axes.
    #[error("{extra} extra indices given for an array with {ndim} dimensions")]
    TooManyIndices {
        /// How many indices too many.
        extra: usize,
        /// The array's number of axes.
        ndim: usize,
    },
    /// A slice with step 0.
    #[error("slice step cannot be zero (axis {axis})")]
    ZeroStep {
        /// The axis.
        axis: usize,
    },
    /// Assignment (`d[key] = value`) of a value with more axes than the target (Numba's wording).
    #[error("Can't assign {value_ndim}-D array to {target_ndim}-D self")]
    AssignRank {
        /// Axes of the value.
        value_ndim: usize,
        /// Axes of the target.
        target_ndim: usize,
    },
    /// Assignment of a value whose shape does not broadcast to the target's (Numba's wording;
    /// `axis` counts the target's axes, the value's shape padded with leading 1s).
    #[error("Can't copy sequence with size {size} to array axis {axis} with dimension {dimension}")]
    AssignShape {
        /// The value's length along the axis.
        size: usize,
        /// The axis.
        axis: usize,
        /// The target's length along the axis.
        dimension: usize,
    },
    /// `transpose(axes)` of a 2-d array with axes that are not a permutation (Numba's wording,
    /// the axes as a Python tuple).
    #[error("invalid axes list {}", fmt_dims(.axes))]
    InvalidAxes {
        /// The axes as given.
        axes: Vec<usize>,
    },
    /// An argument is outside what the operation accepts.
    #[error("invalid argument `{name}`: {reason}")]
    InvalidArgument {
        /// The argument's name.
        name: &'static str,
        /// What is wrong with the value.
        reason: String,
    },
    /// Viewing as another element type is not possible for this layout.
    #[error("cannot view {from} array of shape {} as {to}: {reason}", fmt_dims(.shape))]
    ViewAs {
        /// Old element type.
        from: &'static str,
        /// New element type.
        to: &'static str,
        /// The array's shape.
        shape: Vec<usize>,
        /// Numba's wording.
        reason: &'static str,
    },
    /// A device allocation did not fit.
    #[error(
        "out of device memory on {backend} device {device}: requested {requested} bytes, {free} of {total} bytes free{}",
        report_text(.report)
    )]
    OutOfMemory {
        /// Backend.
        backend: BackendKind,
        /// Device ordinal.
        device: usize,
        /// Bytes asked for.
        requested: u64,
        /// Bytes free before the request.
        free: u64,
        /// Device capacity.
        total: u64,
        /// What held the device's memory (attached by the core; backends leave it `None`).
        report: Option<Box<MemoryReport>>,
    },
    /// A device ordinal that does not exist.
    #[error("no {backend} device {device}: the backend has {count} device(s)")]
    NoSuchDevice {
        /// Backend.
        backend: BackendKind,
        /// Ordinal asked for.
        device: usize,
        /// How many there are.
        count: usize,
    },
    /// Objects from two devices (or backends) were mixed.
    #[error("{what} belongs to device {found} but the operation runs on device {expected}")]
    DeviceMismatch {
        /// What object.
        what: &'static str,
        /// Device of the operation.
        expected: usize,
        /// Device of the object.
        found: usize,
    },
    /// A host range is already registered, or is not registered when it must be.
    #[error("host memory at {address:#x} ({bytes} bytes): {reason}")]
    HostRegistration {
        /// Start address.
        address: usize,
        /// Length.
        bytes: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// A pointer passed to the backend is not inside any live allocation of the right kind.
    #[error("invalid {kind} pointer {address:#x} ({bytes} bytes): {reason}")]
    InvalidPointer {
        /// Device or host.
        kind: &'static str,
        /// The address.
        address: u64,
        /// Bytes accessed from it.
        bytes: u64,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// A handle (stream, event ...) that is not, or no longer, valid.
    #[error("invalid {kind} handle {handle:#x}")]
    InvalidHandle {
        /// Stream, event, ...
        kind: &'static str,
        /// The handle value.
        handle: u64,
    },
    /// An event was used for timing but was created without it, or not yet recorded.
    #[error("event timing unavailable: {reason}")]
    EventTiming {
        /// Why.
        reason: &'static str,
    },
    /// A backend was asked for that cannot be used here.
    #[error("backend `{backend}` is unavailable: {reason}")]
    BackendUnavailable {
        /// The backend.
        backend: BackendKind,
        /// Why (missing library, no device, not compiled in, ...).
        reason: String,
    },
    /// A backend whose library is installed but cannot be used: its driver refused to start, its
    /// device node cannot be opened, a setting of it is wrong.
    #[error("backend `{backend}` is installed but cannot be used: {reason}")]
    BackendUnusable {
        /// The backend.
        backend: BackendKind,
        /// Why, naming the library it loaded.
        reason: String,
    },
    /// `auto` found no backend it could open: each one's reason.
    #[error("no backend could be opened: {}", reasons.join("; "))]
    NoBackend {
        /// `<backend>: <why>` for each backend tried, in order.
        reasons: Vec<String>,
    },
    /// `GPU_MEM_BACKEND` (or a name) is not a backend.
    #[error(
        "unknown backend `{name}` (from GPU_MEM_BACKEND or a --backend option): valid values are auto, cuda, roc (or rocm, hsa), sim (or simulator)"
    )]
    UnknownBackend {
        /// The value given.
        name: String,
    },
    /// A shared library could not be loaded.
    #[error("cannot load {library}: tried {}: {reason}", .tried.join(", "))]
    LibraryLoad {
        /// Which library (logical name).
        library: &'static str,
        /// Paths or sonames tried, in order.
        tried: Vec<String>,
        /// Why the candidates failed (the dynamic loader's messages).
        reason: String,
        /// Some candidate is there but could not be used (a dependency missing, another
        /// architecture, rejected): the library looks installed and broken, rather than absent.
        present: bool,
    },
    /// A symbol is missing from a loaded library (an older driver, typically).
    #[error("symbol `{symbol}` is missing from {library} ({path}); {feature} is unavailable")]
    MissingSymbol {
        /// Logical library name.
        library: &'static str,
        /// The file that was loaded.
        path: String,
        /// The symbol.
        symbol: &'static str,
        /// What needs it.
        feature: &'static str,
    },
    /// A native call failed.
    #[error("{backend} call {call} failed with {code_name} ({code}): {description}")]
    Native {
        /// Backend.
        backend: BackendKind,
        /// The native function.
        call: &'static str,
        /// Numeric status.
        code: i64,
        /// Status name (`CUDA_ERROR_OUT_OF_MEMORY`, ...).
        code_name: String,
        /// The runtime's description.
        description: String,
    },
    /// Asynchronous work failed; reported at the next synchronization point.
    #[error("asynchronous {operation} on stream {stream:#x} failed: {reason}")]
    AsyncFailure {
        /// What was enqueued.
        operation: &'static str,
        /// The stream handle.
        stream: u64,
        /// Why it failed.
        reason: String,
    },
    /// The backend does not implement a feature.
    #[error("{backend} backend does not support {feature}: {reason}")]
    NotSupportedByBackend {
        /// Backend.
        backend: BackendKind,
        /// The feature.
        feature: &'static str,
        /// Why.
        reason: String,
    },
    /// A size computation overflowed.
    #[error("size overflow: {what}")]
    Overflow {
        /// What was being computed.
        what: String,
    },
    /// A launch configuration or argument list the backend cannot run.
    #[error("cannot launch kernel `{kernel}`: {reason}")]
    InvalidLaunch {
        /// Kernel name.
        kernel: String,
        /// What is wrong.
        reason: String,
    },
    /// A simulated thread did something a GPU would trap on (out-of-bounds access, wrong
    /// argument type, a panic in the kernel body).
    #[error("kernel `{kernel}` faulted in block {block:?}, thread {thread:?}: {message}")]
    KernelFault {
        /// Kernel name.
        kernel: String,
        /// Block index (x, y, z).
        block: [u32; 3],
        /// Thread index within the block (x, y, z).
        thread: [u32; 3],
        /// What happened, with the index or value involved.
        message: String,
    },
    /// Threads of a block did not meet at the same barrier (some exited, or waited at another
    /// barrier): on a GPU this hangs or is undefined; the simulator reports it.
    #[error("barrier divergence in kernel `{kernel}`, block {block:?}: {detail}")]
    BarrierDivergence {
        /// Kernel name.
        kernel: String,
        /// Block index (x, y, z).
        block: [u32; 3],
        /// Which threads were where.
        detail: String,
    },
    /// A simulated kernel called a blocking gpu-mem operation from inside itself (device code
    /// cannot call the host API; in the simulator the call would wait for its own kernel).
    #[error(
        "`{call}` was called from inside simulated kernel `{kernel}`: kernels cannot call blocking gpu-mem operations (it would wait for the kernel itself); make the call after the launch instead"
    )]
    CalledFromKernel {
        /// The operation that was refused.
        call: &'static str,
        /// The kernel that made the call.
        kernel: String,
    },
    /// Host memory (ordinary or page-locked) could not be allocated.
    #[error(
        "out of host memory: {what} needs {requested} bytes: {reason}{}",
        report_text(.report)
    )]
    HostOutOfMemory {
        /// What the memory was for.
        what: String,
        /// Bytes asked for (saturated at `u64::MAX` when the size itself overflows).
        requested: u64,
        /// Why it failed (the allocator refused, or a configured limit).
        reason: String,
        /// What held the device's memory, for page-locked memory (attached by the core).
        report: Option<Box<MemoryReport>>,
    },
    /// Kernel source that the backend's compiler rejected (NVRTC, hiprtc, or the host C++
    /// compiler of the simulator); `log` is the compiler's message, naming the kernel's file and
    /// line.
    #[error("kernel `{kernel}` does not compile with {compiler}:\n{log}")]
    KernelCompile {
        /// Kernel name.
        kernel: String,
        /// The compiler (program and version, or library).
        compiler: String,
        /// The compiler's output.
        log: String,
    },
    /// No compiler for the kernel's source could be found or run.
    #[error("no compiler for kernel source: {reason} (set {variable}; tried {})", .tried.join(", "))]
    CompilerUnavailable {
        /// The environment variable that names the compiler.
        variable: &'static str,
        /// What was tried, in order.
        tried: Vec<String>,
        /// Why none could be used.
        reason: String,
    },
    /// A device fault (an illegal address, an illegal instruction, ...) destroyed the device's
    /// context for the whole process: every later call on the device fails with this error,
    /// naming the original fault, until the device is reset.
    #[error("{backend} device {device} is lost: {fault}; to recover: {recovery}")]
    DeviceLost {
        /// Backend.
        backend: BackendKind,
        /// The device ordinal.
        device: usize,
        /// The original fault.
        fault: String,
        /// What the user can do about it.
        recovery: &'static str,
    },
    /// A collective or point-to-point call (NCCL, RCCL, the simulator's model) failed or was
    /// refused before anything was enqueued: `call` is NCCL's name of it (`ncclAllReduce`,
    /// `ncclCommInitRank`, ...), `reason` includes the engine's own text (`ncclGetLastError`).
    #[error("{call} on rank {rank} of {nranks} failed: {reason}")]
    Collective {
        /// The call.
        call: &'static str,
        /// The calling rank.
        rank: usize,
        /// Ranks in the communicator.
        nranks: usize,
        /// Why.
        reason: String,
    },
    /// Errors that happened in `Drop` and were kept for a later check.
    #[error("{count} error(s) happened while releasing resources; first: {first}")]
    DeferredRelease {
        /// How many.
        count: usize,
        /// The first one's message.
        first: String,
    },
}

/// `err` and its sources, joined with `": "`. Loader errors need this: libloading's own message
/// is only "dlopen failed", and the dynamic loader's explanation (`dlerror`) is its source. Every
/// backend reports [`Error::LibraryLoad`] reasons with it.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        let next = inner.to_string();
        // Some errors repeat their source's message in their own; say it once.
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = inner.source();
    }
    text
}

/// `Result` with gpu-mem's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
