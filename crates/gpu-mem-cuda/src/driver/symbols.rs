//! The tables of resolved function pointers, one field per bound native call.
//!
//! # Contract
//!
//! * The fields and their types come from the generated tables of `gpu-mem-cuda-sys`
//!   (`cuda_driver_symbols!`, `cuda_nvrtc_symbols!`); nothing is declared by hand.
//! * Every field is an `Option`: a symbol the loaded library lacks is `None`, and only the calls
//!   that need it fail (with [`Error::MissingSymbol`](gpu_mem_core::Error::MissingSymbol)).
//! * A table is only ever stored next to the [`LoadedLibrary`] it was resolved from, so its
//!   pointers never outlive the library.

use super::library::LoadedLibrary;

/// Expands a generated symbol list into a struct of nullable function pointers plus a resolver
/// and the list of exported names per field (for error messages).
macro_rules! symbol_table {
    ($( $field:ident : $pfn:ty = [$($name:literal),+], $since:literal; )*) => {
        /// Resolved function pointers (`None` = not exported by the loaded library).
        #[allow(non_snake_case)]
        #[derive(Clone, Copy)]
        pub struct Symbols {
            $( pub $field: $pfn, )*
        }

        impl Symbols {
            /// Resolves every symbol of the table in `library`.
            pub fn resolve(library: &LoadedLibrary) -> Symbols {
                Symbols {
                    $(
                        // SAFETY: `$pfn` is the generated pointer type of exactly these exported
                        // names (same table entry), so the signature matches.
                        $field: unsafe { library.function::<$pfn>(&[$($name),+]) },
                    )*
                }
            }

            /// `(field, first exported name, present)` for every entry, in table order.
            pub fn presence(&self) -> Vec<(&'static str, &'static str, bool)> {
                vec![ $( (stringify!($field), first_name!($($name),+), self.$field.is_some()), )* ]
            }
        }

        impl std::fmt::Debug for Symbols {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let present = self.presence().iter().filter(|(_, _, p)| *p).count();
                write!(f, "Symbols {{ {present} of {} resolved }}", self.presence().len())
            }
        }
    };
}

macro_rules! first_name {
    ($first:literal $(, $rest:literal)*) => {
        $first
    };
}

/// The CUDA driver API table.
pub mod driver {
    use super::LoadedLibrary;
    gpu_mem_cuda_sys::cuda_driver_symbols!(symbol_table);
}

/// The NVRTC table.
pub mod nvrtc {
    use super::LoadedLibrary;
    gpu_mem_cuda_sys::cuda_nvrtc_symbols!(symbol_table);
}
