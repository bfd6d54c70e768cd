//! Tables of optional function pointers resolved from a loaded library: [`symbol_table!`](crate::symbol_table).
//!
//! The -sys crates list the functions they bind through a generated macro
//! (`cuda_driver_symbols!`, `gpu_mem_hsa_sys_functions!`, ...) that calls back a macro of the
//! backend with the whole list; the backend's callback hands the list to [`symbol_table!`](crate::symbol_table),
//! which defines one struct per library. Every field is an `Option`: a symbol the loaded library
//! lacks is `None`, so only what needs it fails, not the whole library. A table is stored next
//! to the library it was resolved from, which is never unloaded (the crate's contract), so its
//! pointers stay valid.

/// Defines a table of nullable function pointers, resolved one by one from a loaded library.
///
/// ```no_run
/// use std::ffi::{c_char, c_int};
///
/// gpu_mem_loader::symbol_table! {
///     /// Two functions of the C library.
///     pub struct Libc {
///         // field: pointer type = [exported names, tried in order],
///         strlen: Option<unsafe extern "C" fn(*const c_char) -> usize> = ["strlen"],
///         abs: Option<unsafe extern "C" fn(c_int) -> c_int> = ["abs_v2", "abs"],
///     }
/// }
///
/// let library = gpu_mem_loader::open_among("the C library", "", &["libc.so.6"], &|_| Ok(()))?;
/// // SAFETY: these are the C library's signatures of `strlen` and `abs`.
/// let libc = unsafe { Libc::resolve(library.raw()) };
/// assert!(libc.strlen.is_some());
/// assert_eq!(libc.presence()[1], ("abs", "abs_v2", true));
/// # Ok::<(), gpu_mem_core::Error>(())
/// ```
///
/// Each pointer type is an `Option<unsafe extern "C" fn(..)>` (bindgen's `PFN_` aliases are
/// either that or the bare `fn`, to be wrapped in `Option<..>` by the caller); the exported names
/// are `&'static str` expressions (`stringify!(name)` when the field is named as the export).
///
/// The struct (`Clone`, `Copy`) gets one public field per entry and:
///
/// * `unsafe fn resolve(library: &libloading::Library) -> Self`: looks every field up, taking
///   the first listed name the library exports ([`lookup`]); fields whose names
///   it exports none of stay `None`. Safety: each listed name that `library` exports has the
///   field's signature (the declarations were generated from that library's headers).
/// * `fn presence(&self) -> Vec<(&'static str, &'static str, bool)>`: `(field, first listed
///   name, resolved)` for every entry, in list order, for messages and missing-symbol errors.
/// * `Debug`, counting resolved and listed entries rather than printing every pointer.
#[macro_export]
macro_rules! symbol_table {
    (
        $(#[$meta:meta])*
        $vis:vis struct $table:ident {
            $( $field:ident : $pfn:ty = [$($name:expr),+ $(,)?] ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[allow(non_snake_case)]
        #[derive(Clone, Copy)]
        $vis struct $table {
            $(
                #[doc = concat!("`", stringify!($field), "`, when the library exports it.")]
                pub $field: $pfn,
            )*
        }

        impl $table {
            /// Looks every function up in `library` (the first listed name it exports); missing
            /// ones stay `None`.
            ///
            /// # Safety
            /// Each listed name `library` exports must have the listed signature (the generated
            /// declarations describe the headers of that library).
            #[allow(dead_code)]
            pub unsafe fn resolve(library: &$crate::libloading::Library) -> Self {
                Self {
                    $(
                        // SAFETY: the caller guarantees each exported name has this pointer's
                        // signature; the pointer is only used while `library` stays loaded (the
                        // table is stored next to it, and it is never unloaded).
                        $field: unsafe { $crate::lookup::<$pfn>(library, &[$($name),+]) },
                    )*
                }
            }

            /// `(field, first listed name, resolved)` for every entry, in list order.
            #[allow(dead_code)]
            pub fn presence(&self) -> ::std::vec::Vec<(&'static str, &'static str, bool)> {
                ::std::vec![
                    $( (stringify!($field), [$($name),+][0], self.$field.is_some()), )*
                ]
            }
        }

        impl ::std::fmt::Debug for $table {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                let presence = self.presence();
                let resolved = presence.iter().filter(|(_, _, resolved)| *resolved).count();
                f.debug_struct(stringify!($table))
                    .field("resolved", &resolved)
                    .field("listed", &presence.len())
                    .finish()
            }
        }
    };
}

/// Looks up the first of `names` that `library` exports, as a nullable function pointer (`None`
/// when it exports none of them). The pointer stays valid as long as `library` stays loaded
/// (for the libraries of this crate: for the rest of the process).
///
/// # Safety
/// `F` must be an `Option<unsafe extern "C" fn(..)>` type whose signature matches the real C
/// signature of every one of `names` that the library exports.
pub unsafe fn lookup<F: Copy + Default>(library: &libloading::Library, names: &[&str]) -> F {
    const { assert!(size_of::<F>() == size_of::<*mut std::ffi::c_void>()) };
    for name in names {
        // SAFETY: the caller guarantees `F` is the pointer type of this symbol; the pointer is
        // copied out and is valid while the library stays loaded.
        if let Ok(symbol) = unsafe { library.get::<F>(*name) } {
            return *symbol;
        }
    }
    F::default()
}

#[cfg(test)]
mod tests {
    use std::ffi::{c_char, c_int};

    crate::symbol_table! {
        /// Functions of the C library, one under a fallback name and one it lacks.
        struct Libc {
            strlen: Option<unsafe extern "C" fn(*const c_char) -> usize> = [stringify!(strlen)],
            abs: Option<unsafe extern "C" fn(c_int) -> c_int> = ["gpu_mem_no_such_abs", "abs"],
            missing: Option<unsafe extern "C" fn()> = ["gpu_mem_definitely_missing"],
        }
    }

    /// A table resolves present names (a later name when the first is not exported), leaves
    /// absent ones `None`, and reports each entry under its first listed name.
    #[test]
    fn tables_resolve_fallbacks_and_leave_missing_symbols_none() {
        let library =
            crate::open_among(
                "the C library (table test)",
                "",
                &["libc.so.6"],
                &|_| Ok(()),
            )
            .expect("libc opens");
        // SAFETY: `strlen` and `abs` have these signatures in the C library; the missing name is
        // exported by nothing.
        let libc = unsafe { Libc::resolve(library.raw()) };
        let strlen = libc.strlen.expect("libc exports strlen");
        let abs = libc.abs.expect("libc exports abs");
        // SAFETY: a NUL-terminated string; `abs` takes any int but INT_MIN.
        let (len, absolute) = unsafe { (strlen(c"four".as_ptr()), abs(-7)) };
        assert_eq!((len, absolute), (4, 7));
        assert!(libc.missing.is_none());
        assert_eq!(
            libc.presence(),
            vec![
                ("strlen", "strlen", true),
                ("abs", "gpu_mem_no_such_abs", true),
                ("missing", "gpu_mem_definitely_missing", false),
            ]
        );
        assert_eq!(format!("{libc:?}"), "Libc { resolved: 2, listed: 3 }");
    }
}
