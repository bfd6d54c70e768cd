//! Real CUDA kernels from public collections (`tests/corpus/<collection>/*.cu`, device code
//! verbatim, each file naming its licence and origin on line 1), launched through the public
//! API on their original launch shapes at test sizes and checked against plain Rust
//! references: NVIDIA's cuda-samples, Rodinia, PolyBench-ACC and HeCBench.

mod cuda_samples;
mod cuda_samples_features;
mod cuda_samples_more;
mod hecbench;
mod polybench;
mod polybench_more;
mod rodinia;
mod rodinia_more;
mod support;

use crate::Case;

/// Every corpus case.
pub fn cases() -> Vec<Case> {
    let mut cases = cuda_samples::cases();
    cases.extend(cuda_samples_features::cases());
    cases.extend(cuda_samples_more::cases());
    cases.extend(rodinia::cases());
    cases.extend(rodinia_more::cases());
    cases.extend(polybench::cases());
    cases.extend(polybench_more::cases());
    cases.extend(hecbench::cases());
    cases
}
