//! The portable kernel sources shipped with gpu-mem, written once against `gpu_mem.h` for
//! NVRTC and hiprtc. `gpu_mem::kernels` pairs each with its simulator form.

/// Tiled matrix multiply with 16x16 shared tiles (entry `matmul_tiled`).
pub const MATMUL_TILED: &str = include_str!("../../../kernels/matmul_tiled.cu");
/// Shared-memory block reduction (entry `block_sum`).
pub const BLOCK_SUM: &str = include_str!("../../../kernels/block_sum.cu");
/// ROC-style kernel with a global-fence barrier and a wave barrier (entry `barrier_wave`).
pub const BARRIER_WAVE: &str = include_str!("../../../kernels/barrier_wave.cu");
/// The strided copy behind `DeviceArray::assign` and `fill` (entry `gm_assign`): byte-wise
/// element copy between two arrays of any strides, with broadcast source axes.
pub const ASSIGN: &str = include_str!("../../../kernels/assign.cu");
