//! A table of optional function pointers, one per generated declaration.
//!
//! The -sys crates list their functions through a macro (`gpu_mem_hsa_sys_functions!`, ...);
//! [`define_symbol_table!`] turns that list into a struct whose fields are `Option<PFN_f>`,
//! resolved one by one so a symbol an older runtime lacks only disables what needs it.

/// Defines `$table` with one `Option<fn>` field per listed function.
macro_rules! define_symbol_table {
    ($(#[$meta:meta])* $table:ident { $($name:ident: $ty:path,)* }) => {
        $(#[$meta])*
        #[allow(non_snake_case)]
        #[derive(Clone, Copy)]
        pub struct $table {
            $(
                #[doc = concat!("`", stringify!($name), "`, when the library exports it.")]
                pub $name: Option<$ty>,
            )*
        }

        impl $table {
            /// Looks every function up in `library`; missing ones stay `None`.
            ///
            /// # Safety
            /// Each symbol `library` exports under a listed name must have the listed signature
            /// (the generated declarations describe the pinned headers of that library).
            pub unsafe fn resolve(library: &libloading::Library) -> Self {
                Self {
                    $(
                        // SAFETY: the caller guarantees the exported symbol has this type; the
                        // pointer is only used while `library` stays loaded (the table is stored
                        // next to it and dropped with it).
                        $name: unsafe { library.get::<$ty>(stringify!($name)) }
                            .ok()
                            .map(|symbol| *symbol),
                    )*
                }
            }

            /// Every listed name with whether it was resolved, in list order.
            pub fn entries(&self) -> Vec<(&'static str, bool)> {
                vec![$((stringify!($name), self.$name.is_some()),)*]
            }
        }

        impl std::fmt::Debug for $table {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let entries = self.entries();
                let resolved = entries.iter().filter(|(_, present)| *present).count();
                f.debug_struct(stringify!($table))
                    .field("resolved", &resolved)
                    .field("listed", &entries.len())
                    .finish()
            }
        }
    };
}

pub(crate) use define_symbol_table;
