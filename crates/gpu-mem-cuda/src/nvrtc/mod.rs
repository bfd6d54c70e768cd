//! NVRTC: compiling kernel source (with the portable prelude `gpu_mem.h`) to PTX or a cubin.
//!
//! # Contract
//!
//! * [`Nvrtc::load`] finds the library (`GPU_MEM_NVRTC_LIBRARY`, else the first that opens of
//!   the sonames `libnvrtc.so.13`, `.12`, `.11.2`, `libnvrtc.so`); [`Nvrtc::load_for_driver`],
//!   what the backend uses, takes the newest whose code the driver runs
//!   ([`driver_runs_code_of`]). Failures list every path tried. Symbols are optional as in the
//!   driver layer.
//! * [`Nvrtc::compile`] compiles one source for one compute capability: PTX for
//!   `compute_XY` (`--gpu-architecture=compute_XY`) or a cubin for `sm_XY`, and always its PTX
//!   text (what the backend reads kernels' parameters and names from). The prelude is offered
//!   to the source as the header `gpu_mem.h` (`#include "gpu_mem.h"`), the C library's headers
//!   as gpu-mem's (`gpu_mem_core::RTC_HEADERS`), and the CUDA headers from the folders
//!   [`include_dirs`] finds. Name expressions (template instantiations) get their lowered
//!   names.
//! * A compile error is [`Error::Native`](gpu_mem_core::Error::Native) for `nvrtcCompileProgram`
//!   whose description holds NVRTC's complete compile log.
//! * The NVRTC program object is destroyed on every path.

mod api;
mod compile;
mod includes;

pub use api::{NVRTC_LIBRARY, Nvrtc, driver_runs_code_of};
pub use compile::{
    CodeKind, CompileRequest, Compiled, ComputeCapability, PRELUDE, PRELUDE_NAME, choose_target,
};
pub use includes::{INCLUDE_VARIABLE, include_dirs};
