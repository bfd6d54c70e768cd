//! What a launch runs: the kernel's code in the form the simulator runs, owned, so that a stream
//! can keep it until the kernel has run.
//!
//! A kernel with portable source runs its compiled program (`crate::source`): that is what a
//! GPU runs, so it is preferred; a kernel written only for the simulator runs its closure, plain
//! or async (`crate::thread`). The executor receives the code as an [`executor::Code`] and
//! decides there, once, how the threads run (`executor::plan`).

use crate::executor;
use crate::source::{self, SourceProgram};
use crate::thread::{AsyncBody, ClosureBody, ClosureForm, closure_form};
use gpu_mem_core::kernel::LaunchArg;
use gpu_mem_core::{BackendKind, Error, Kernel, Result};
use std::sync::Arc;

/// A launch's code, owned.
pub(crate) enum LaunchCode {
    /// Compiled portable source.
    Source(Arc<SourceProgram>),
    /// A closure kernel.
    Closure(Arc<ClosureBody>),
    /// An async closure kernel.
    Async(Arc<AsyncBody>),
}

impl LaunchCode {
    /// The code `kernel` runs on the simulator (compiling its source the first time, the way
    /// `build` says).
    pub(crate) fn of(kernel: &Kernel, build: source::Build) -> Result<LaunchCode> {
        if let Some(source) = kernel.source() {
            return Ok(LaunchCode::Source(source::program(kernel, source, build)?));
        }
        match closure_form(kernel) {
            Some(ClosureForm::Blocking(body)) => Ok(LaunchCode::Closure(body)),
            Some(ClosureForm::Async(body)) => Ok(LaunchCode::Async(body)),
            None => Err(Error::NotSupportedByBackend {
                backend: BackendKind::Sim,
                feature: "kernels without code",
                reason: format!(
                    "kernel `{}` has neither portable source (Kernel::with_source) nor a closure (SimKernel::sim, SimKernel::sim_async)",
                    kernel.name()
                ),
            }),
        }
    }

    /// Checks `args` against the compiled entry's parameters (closures take any).
    pub(crate) fn check_args(&self, kernel: &str, args: &[LaunchArg]) -> Result<()> {
        match self {
            LaunchCode::Source(program) => program.check_args(kernel, args),
            LaunchCode::Closure(_) | LaunchCode::Async(_) => Ok(()),
        }
    }

    /// Whether it is compiled code (whose accesses a checked build sees one by one).
    pub(crate) fn is_compiled(&self) -> bool {
        matches!(self, LaunchCode::Source(_))
    }

    /// Bytes of static `__shared__` arrays a block of it declares.
    pub(crate) fn static_shared(&self) -> usize {
        match self {
            LaunchCode::Source(program) => program.static_shared,
            LaunchCode::Closure(_) | LaunchCode::Async(_) => 0,
        }
    }

    /// The code as the executor runs it.
    pub(crate) fn code(&self) -> executor::Code<'_> {
        match self {
            LaunchCode::Source(program) => executor::Code::Compiled(program.compiled()),
            LaunchCode::Closure(body) => executor::Code::Closure(&*body.0),
            LaunchCode::Async(body) => executor::Code::Async(&*body.0),
        }
    }
}
