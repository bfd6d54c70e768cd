//! The headers every kernel build compiles against, written into the build's include directory
//! (`-I`): the prelude `gpu_mem.h`, the simulator's CUDA device vocabulary (`gm_sim/*.h`: math
//! API, intrinsics, vector types, printf, assert and traps) and the CUDA header names kernels
//! include (`<cuda_runtime.h>`, `<cooperative_groups.h>`, `<math_constants.h>`, `<assert.h>`,
//! ...), which on the simulator bring in that vocabulary. Their bytes are part of the cache key.

use gpu_mem_core::{KERNEL_PRELUDE, RTC_HEADERS};
use std::path::Path;

macro_rules! headers {
    ($($name:literal => $path:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!("../../include/", $path)))),*]
    };
}

/// (path in the include directory, contents), the prelude first.
const SIMULATOR_HEADERS: &[(&str, &str)] = headers![
    "gm_sim/device.h" => "gm_sim/device.h",
    "gm_sim/math.h" => "gm_sim/math.h",
    "gm_sim/intrinsics.h" => "gm_sim/intrinsics.h",
    "gm_sim/vector_types.h" => "gm_sim/vector_types.h",
    "gm_sim/output.h" => "gm_sim/output.h",
    "gm_sim/dynamic_shared.h" => "gm_sim/dynamic_shared.h",
    "gm_sim/checked.h" => "gm_sim/checked.h",
    "gm_sim/exchange.h" => "gm_sim/exchange.h",
    "gm_sim/regions.h" => "gm_sim/regions.h",
    "cuda_runtime.h" => "cuda/cuda_runtime.h",
    "cuda_runtime_api.h" => "cuda/cuda_runtime_api.h",
    "cuda.h" => "cuda/cuda.h",
    "device_launch_parameters.h" => "cuda/device_launch_parameters.h",
    "device_functions.h" => "cuda/device_functions.h",
    "vector_types.h" => "cuda/vector_types.h",
    "vector_functions.h" => "cuda/vector_functions.h",
    "cooperative_groups.h" => "cuda/cooperative_groups.h",
    "cooperative_groups/reduce.h" => "cuda/cooperative_groups/reduce.h",
    "cuda_fp16.h" => "cuda/cuda_fp16.h",
    "cuda/barrier" => "cuda/cuda/barrier",
    "assert.h" => "cuda/assert.h",
    "cassert" => "cuda/cassert",
];

/// Every header: the prelude, CUDA's constants, then the simulator's.
pub(crate) fn all() -> impl Iterator<Item = (&'static str, &'static str)> {
    let constants = RTC_HEADERS
        .iter()
        .copied()
        .filter(|(name, _)| *name == "math_constants.h");
    std::iter::once(("gpu_mem.h", KERNEL_PRELUDE))
        .chain(constants)
        .chain(SIMULATOR_HEADERS.iter().copied())
}

/// Writes every header under `dir`.
pub(crate) fn write_into(dir: &Path) -> std::io::Result<()> {
    for (name, text) in all() {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
    }
    Ok(())
}

/// The bytes of every header with its name, for the cache key.
pub(crate) fn fingerprint() -> Vec<u8> {
    let mut print = Vec::new();
    for (name, text) in all() {
        print.extend_from_slice(name.as_bytes());
        print.push(0);
        print.extend_from_slice(&(text.len() as u64).to_le_bytes());
        print.extend_from_slice(text.as_bytes());
    }
    print
}
