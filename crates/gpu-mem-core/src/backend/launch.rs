//! [`Launch`]: running kernels and reaching their modules' variables, on every backend.

use super::kernel::{Kernel, LaunchArg, LaunchConfig, Module};
use super::types::{DevicePtr, StreamHandle};
use crate::error::Result;

/// Launching kernels, and the device memory of module variables.
///
/// # Safety
///
/// The core trusts these answers as it trusts the other concerns', so an implementation must
/// uphold, for every device it accepts:
///
/// * **Completion.** A launch without a stream returns only once the kernel has completed and
///   its reads and writes are visible to the calling thread; a launch on a stream is work of
///   that stream (see [`Streams`](super::Streams)).
/// * **Accesses.** Besides what the kernel's code does through its arguments, a launch touches
///   no memory the caller owns.
/// * **Module variables.** [`Launch::module_global`] returns, on `Ok`, the device address of
///   `size` bytes that stay valid while the backend lives and overlap no allocation.
pub unsafe trait Launch {
    /// Launches `kernel` over `config`'s grid with `args`. With `stream: None` the launch is
    /// synchronous — ordered after all work on the device's streams, and returning the kernel's
    /// errors — as Numba's launches on the default stream are; with a stream it is enqueued and
    /// failures surface at the stream's next synchronization.
    ///
    /// # Safety
    /// The memory of every argument stays valid until the kernel has completed (the core keeps
    /// it alive for stream launches), and the kernel's accesses stay inside its arguments.
    /// A `Some(stream)` came from [`Streams::stream_create`](super::Streams::stream_create) on
    /// this device and is not destroyed.
    unsafe fn launch(
        &self,
        device: usize,
        kernel: &Kernel,
        config: &LaunchConfig,
        args: &[LaunchArg],
        stream: Option<StreamHandle>,
    ) -> Result<()>;

    /// The device address and size in bytes of `name`, a `__device__`, `__constant__` or
    /// `__managed__` variable `module` defines at file scope (CUDA's `cuModuleGetGlobal`), the
    /// module built and loaded on `device` first where it is not yet. The memory stays valid
    /// while the backend lives (modules stay loaded); an unknown name is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming the variables the module
    /// has.
    fn module_global(
        &self,
        device: usize,
        module: &Module,
        name: &str,
    ) -> Result<(DevicePtr, usize)>;
}
