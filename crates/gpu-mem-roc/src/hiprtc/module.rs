//! A module's CUDA C++ source as hiprtc compiles it: the prelude in front (its `#line` keeps
//! the source's own line numbers), gpu-mem's C library headers and math constants
//! (`gpu_mem_core::RTC_HEADERS`), the CUDA header names kernels include made HIP's
//! (`include/`: `<cuda_runtime.h>` and friends, and `<cooperative_groups.h>`, which hiprtc 5.2
//! lacks), and the module's name expressions lowered.

use super::{CodeObject, compile, processor};
use crate::driver::Hip;
use gpu_mem_core::kernel::Module;
use gpu_mem_core::{KERNEL_PRELUDE, RTC_HEADERS, Result};

/// The name kernel sources include the prelude by.
pub const PRELUDE_NAME: &str = "gpu_mem.h";

/// CUDA's header names, for hiprtc.
const HIP_HEADERS: &[(&str, &str)] = &[
    (
        "cuda_runtime.h",
        include_str!("../../include/cuda_runtime.h"),
    ),
    (
        "cuda_runtime_api.h",
        include_str!("../../include/cuda_runtime_api.h"),
    ),
    ("cuda.h", include_str!("../../include/cuda.h")),
    (
        "device_launch_parameters.h",
        include_str!("../../include/device_launch_parameters.h"),
    ),
    (
        "device_functions.h",
        include_str!("../../include/device_functions.h"),
    ),
    (
        "vector_types.h",
        include_str!("../../include/vector_types.h"),
    ),
    (
        "vector_functions.h",
        include_str!("../../include/vector_functions.h"),
    ),
    (
        "cooperative_groups.h",
        include_str!("../../include/cooperative_groups.h"),
    ),
    (
        "cooperative_groups/reduce.h",
        include_str!("../../include/cooperative_groups/reduce.h"),
    ),
    ("cuda_fp16.h", include_str!("../../include/cuda_fp16.h")),
    ("cuda/barrier", include_str!("../../include/cuda/barrier")),
];

/// The complete translation unit hiprtc compiles: the prelude, then the module's source with
/// its own line numbers (`#include "gpu_mem.h"` in it is a no-op thanks to the include guard).
pub fn translation_unit(code: &str, file: &str) -> String {
    format!("{KERNEL_PRELUDE}\n#line 1 \"{file}\"\n{code}")
}

/// Compiles `module` for `arch` (an agent name such as `gfx90a`).
pub fn compile_module(module: &Module, arch: &str) -> Result<CodeObject> {
    let hip = Hip::shared()?;
    let file = format!("{}.hip", module.name());
    let mut headers = vec![(PRELUDE_NAME, KERNEL_PRELUDE)];
    headers.extend(RTC_HEADERS.iter().copied());
    headers.extend(HIP_HEADERS.iter().copied());
    let code = compile(
        &hip,
        &translation_unit(module.code(), &file),
        &file,
        processor(arch),
        &headers,
        &[],
        module.name_expressions(),
    )?;
    if !code.log.is_empty() {
        tracing::debug!(module = module.name(), log = %code.log, "hiprtc warnings");
    }
    Ok(code)
}
