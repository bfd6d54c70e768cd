//! A module's CUDA C++ source as hiprtc compiles it: the prelude in front (its `#line` keeps
//! the source's own line numbers), gpu-mem's C library headers and math constants
//! (`gpu_mem_core::RTC_HEADERS`), the CUDA header names kernels include made HIP's
//! (`include/`: `<cuda_runtime.h>` and friends, and `<cooperative_groups.h>`, which hiprtc 5.2
//! lacks and which replaces the built-in one of later versions), and the module's name
//! expressions lowered.

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

/// Keeps hiprtc's own cooperative groups out: from 5.5 on (5.7.1 in Ubuntu 24.04 and Debian 13)
/// its built-in header defines them, guarded by this macro, before any of the kernel's includes,
/// and gpu-mem's `<cooperative_groups.h>` (tiles larger than the wavefront, `reduce`,
/// `labeled_partition`, `block_tile_memory`) would be a second definition of every class.
/// Defined first, the guard makes the built-in part empty; hiprtc 5.2 has no such part.
const OWN_COOPERATIVE_GROUPS: &str = "-DHIP_INCLUDE_HIP_AMD_DETAIL_HIP_COOPERATIVE_GROUPS_H";

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
        &[OWN_COOPERATIVE_GROUPS],
        module.name_expressions(),
    )?;
    if !code.log.is_empty() {
        tracing::debug!(module = module.name(), log = %code.log, "hiprtc warnings");
    }
    Ok(code)
}
