//! The tables of resolved function pointers, one field per bound native call.
//!
//! # Contract
//!
//! * The fields and their types come from the generated tables of `gpu-mem-cuda-sys`
//!   (`cuda_driver_symbols!`, `cuda_nvrtc_symbols!`); nothing is declared by hand. The tables
//!   are defined by the loader's `gpu_mem_loader::symbol_table!`, shared with the ROC backend.
//! * Every field is an `Option`: a symbol the loaded library lacks is `None`, and only the calls
//!   that need it fail (with [`Error::MissingSymbol`](gpu_mem_core::Error::MissingSymbol)).
//! * A table is only ever stored next to the `LoadedLibrary` it was resolved from, so its
//!   pointers never outlive the library.

/// Turns a generated symbol list (`field: PFN = [exported names], "since";`) into the table
/// `Symbols`: the CUDA version each entry needs is documentation of the -sys crate only.
macro_rules! cuda_table {
    ($( $field:ident : $pfn:ty = [$($name:literal),+], $since:literal; )*) => {
        gpu_mem_loader::symbol_table! {
            /// Resolved function pointers (`None` = not exported by the loaded library).
            pub struct Symbols {
                $( $field: $pfn = [$($name),+], )*
            }
        }
    };
}

/// The CUDA driver API table.
pub mod driver {
    gpu_mem_cuda_sys::cuda_driver_symbols!(cuda_table);
}

/// The NVRTC table.
pub mod nvrtc {
    gpu_mem_cuda_sys::cuda_nvrtc_symbols!(cuda_table);
}
