//! A compiled kernel's parameters as the C++ compiler saw them, checked against a launch's
//! arguments before anything runs: the count, and for each parameter its kind (`gm_array<T, N>`,
//! pointer, value), rank, element size and element kind. An array passed to a pointer parameter
//! must be contiguous from its first element, which the pointer receives.

use gpu_mem_core::kernel::LaunchArg;
use std::ffi::{CStr, c_char, c_int};

/// `gm_sim_param` (the prelude's layout).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawParam {
    kind: c_int,
    elem_kind: c_int,
    elem_size: u64,
    ndim: c_int,
    size: u64,
    type_name: *const c_char,
}

/// What a parameter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParamKind {
    Value,
    Array,
    Pointer,
}

/// The kind of a scalar type: signed or unsigned integer, floating point, bool, a pointer, or
/// anything else (structs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ElemKind {
    Other,
    Signed,
    Unsigned,
    Float,
    Bool,
    Pointer,
}

/// One parameter of the entry point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Param {
    pub(crate) kind: ParamKind,
    pub(crate) elem_kind: ElemKind,
    pub(crate) elem_size: usize,
    pub(crate) ndim: usize,
    pub(crate) size: usize,
    /// The compiler's spelling of the type (`gm_array<float, 2>`).
    pub(crate) type_name: String,
}

impl Param {
    /// Decodes the prelude's description.
    ///
    /// # Safety
    /// `raw.type_name` is null or a NUL-terminated string.
    pub(crate) unsafe fn from_raw(raw: &RawParam) -> Param {
        let pretty = if raw.type_name.is_null() {
            String::new()
        } else {
            // SAFETY: the caller's contract.
            unsafe { CStr::from_ptr(raw.type_name) }
                .to_string_lossy()
                .into_owned()
        };
        Param {
            kind: match raw.kind {
                1 => ParamKind::Array,
                2 => ParamKind::Pointer,
                _ => ParamKind::Value,
            },
            elem_kind: match raw.elem_kind {
                1 => ElemKind::Signed,
                2 => ElemKind::Unsigned,
                3 => ElemKind::Float,
                4 => ElemKind::Bool,
                5 => ElemKind::Pointer,
                _ => ElemKind::Other,
            },
            elem_size: usize::try_from(raw.elem_size).unwrap_or(usize::MAX),
            ndim: usize::try_from(raw.ndim).unwrap_or(0),
            size: usize::try_from(raw.size).unwrap_or(usize::MAX),
            type_name: type_from_pretty_function(&pretty),
        }
    }
}

/// The `T` of `__PRETTY_FUNCTION__` of `gm_sim_type_name<T>()`: GCC writes
/// `... [with T = gm_array<float, 2>]`, clang `... [T = gm_array<float, 2>]`.
fn type_from_pretty_function(pretty: &str) -> String {
    let Some(start) = pretty.find("T = ") else {
        return pretty.to_string();
    };
    let rest = &pretty[start + 4..];
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            '>' | ')' => depth -= 1,
            ']' | ';' if depth == 0 => return rest[..i].trim().to_string(),
            ']' => depth -= 1,
            _ => {}
        }
    }
    rest.trim().to_string()
}

/// The kind of a Rust element type, by its name; `None` for structs and other `Pod` types,
/// which only their size describes.
fn rust_kind(dtype: &str) -> Option<ElemKind> {
    Some(match dtype {
        "i8" | "i16" | "i32" | "i64" | "isize" | "i128" => ElemKind::Signed,
        "u8" | "u16" | "u32" | "u64" | "usize" | "u128" => ElemKind::Unsigned,
        "f32" | "f64" => ElemKind::Float,
        "bool" => ElemKind::Bool,
        _ => return None,
    })
}

/// `Ok` when `param` can receive `arg`; otherwise why not.
fn accepts(param: &Param, arg: &LaunchArg) -> Result<(), String> {
    // One-byte integers stand for C's `bool` and `char` (whose signedness the platform decides):
    // Rust has no `bool` array element, and `u8` is what such data is on the host.
    let integral =
        |kind: ElemKind| matches!(kind, ElemKind::Signed | ElemKind::Unsigned | ElemKind::Bool);
    let element_ok = |dtype: &str, itemsize: usize| {
        param.elem_size == itemsize
            && rust_kind(dtype).is_none_or(|kind| {
                kind == param.elem_kind
                    || (itemsize == 1 && integral(kind) && integral(param.elem_kind))
            })
    };
    match arg {
        // An array (0-d too) is its first element's address (`T*`), as on the GPU backends.
        LaunchArg::Array {
            itemsize, dtype, ..
        } if param.kind == ParamKind::Pointer => {
            pointee_ok(param, dtype, *itemsize)?;
            arg.pointer_address()?;
        }
        LaunchArg::Array {
            shape,
            itemsize,
            dtype,
            ..
        } => {
            if param.kind != ParamKind::Array {
                return Err(
                    "an array is passed to a pointer (T*) or a gm_array<T, N>, not by value"
                        .to_string(),
                );
            }
            if param.ndim != shape.len() {
                return Err(format!(
                    "the array has {} dimension(s), the parameter {}",
                    shape.len(),
                    param.ndim
                ));
            }
            if !element_ok(dtype, *itemsize) {
                return Err(format!(
                    "its elements are {dtype} ({itemsize} bytes), the parameter's are {} bytes{}",
                    param.elem_size,
                    kind_note(param.elem_kind)
                ));
            }
        }
        LaunchArg::Record {
            itemsize, dtype, ..
        } => {
            if param.kind != ParamKind::Pointer {
                return Err("a device record or pointer is passed as a pointer T*".to_string());
            }
            pointee_ok(param, dtype, *itemsize)?;
        }
        LaunchArg::Scalar { bytes, dtype, .. } => {
            if param.kind != ParamKind::Value {
                return Err(format!(
                    "a scalar {dtype} is passed by value, not as an array or pointer"
                ));
            }
            if !element_ok(dtype, bytes.len()) || param.size != bytes.len() {
                return Err(format!(
                    "the scalar is {dtype} ({} bytes), the parameter {} bytes{}",
                    bytes.len(),
                    param.size,
                    kind_note(param.elem_kind)
                ));
            }
        }
    }
    Ok(())
}

/// Whether a pointer parameter may point to elements of `dtype` (`itemsize` bytes): the same
/// size and kind (`void*` takes any); never a pointer to pointers, whose device addresses the
/// simulator's threads could not follow (they reach device memory at host addresses).
fn pointee_ok(param: &Param, dtype: &str, itemsize: usize) -> Result<(), String> {
    if param.elem_kind == ElemKind::Pointer {
        return Err("the parameter points to pointers: an array of device addresses cannot be followed on the simulator, whose threads reach device memory at host addresses (pass the arrays as separate parameters)".to_string());
    }
    let integral =
        |kind: ElemKind| matches!(kind, ElemKind::Signed | ElemKind::Unsigned | ElemKind::Bool);
    let same = param.elem_size == itemsize
        && rust_kind(dtype).is_none_or(|kind| {
            kind == param.elem_kind
                || (itemsize == 1 && integral(kind) && integral(param.elem_kind))
                || param.elem_kind == ElemKind::Other
        });
    if param.elem_size == 0 || same {
        Ok(())
    } else {
        Err(format!(
            "its elements are {dtype} ({itemsize} bytes), the pointee {} bytes{}",
            param.elem_size,
            kind_note(param.elem_kind)
        ))
    }
}

fn kind_note(kind: ElemKind) -> &'static str {
    match kind {
        ElemKind::Signed => " (signed integer)",
        ElemKind::Unsigned => " (unsigned integer)",
        ElemKind::Float => " (floating point)",
        ElemKind::Bool => " (bool)",
        ElemKind::Pointer => " (a pointer)",
        ElemKind::Other => "",
    }
}

/// Checks a launch's arguments against the entry's parameters; the error says which argument
/// and why.
pub(crate) fn check(params: &[Param], args: &[LaunchArg]) -> Result<(), String> {
    if params.len() != args.len() {
        let list: Vec<&str> = params.iter().map(|p| p.type_name.as_str()).collect();
        return Err(format!(
            "the kernel takes {} parameter(s) ({}) but the launch passes {} argument(s)",
            params.len(),
            list.join(", "),
            args.len()
        ));
    }
    for (index, (param, arg)) in params.iter().zip(args).enumerate() {
        accepts(param, arg).map_err(|why| {
            format!(
                "argument {index} ({}) does not match parameter {index} `{}`: {why}",
                arg.describe(),
                param.type_name
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_from_both_compilers() {
        assert_eq!(
            type_from_pretty_function(
                "const char* gm_sim_type_name() [with T = gm_array<float, 2>]"
            ),
            "gm_array<float, 2>"
        );
        assert_eq!(
            type_from_pretty_function("const char *gm_sim_type_name() [T = int *]"),
            "int *"
        );
        assert_eq!(
            type_from_pretty_function("f() [with T = float; U = int]"),
            "float"
        );
    }

    fn param(kind: ParamKind, elem_kind: ElemKind, elem_size: usize, ndim: usize) -> Param {
        Param {
            kind,
            elem_kind,
            elem_size,
            ndim,
            size: if kind == ParamKind::Array {
                8 + 16 * ndim
            } else {
                elem_size
            },
            type_name: "T".into(),
        }
    }

    fn array(dtype: &'static str, itemsize: usize, ndim: usize) -> LaunchArg {
        LaunchArg::Array {
            ptr: gpu_mem_core::backend::DevicePtr(256),
            shape: vec![2; ndim],
            strides: vec![1; ndim],
            min_offset: 0,
            span_len: 2,
            itemsize,
            elem: std::any::TypeId::of::<()>(),
            dtype,
        }
    }

    #[test]
    fn arrays_match_by_rank_size_and_kind() {
        let p = param(ParamKind::Array, ElemKind::Float, 4, 2);
        assert!(check(std::slice::from_ref(&p), &[array("f32", 4, 2)]).is_ok());
        let wrong_rank = check(std::slice::from_ref(&p), &[array("f32", 4, 1)]).unwrap_err();
        assert!(
            wrong_rank.contains("1 dimension(s), the parameter 2"),
            "{wrong_rank}"
        );
        let wrong_kind = check(std::slice::from_ref(&p), &[array("i32", 4, 2)]).unwrap_err();
        assert!(wrong_kind.contains("i32"), "{wrong_kind}");
        // A struct element is described by its size alone.
        let pod = param(ParamKind::Array, ElemKind::Other, 8, 1);
        assert!(check(&[pod], &[array("my::Pair", 8, 1)]).is_ok());
    }

    #[test]
    fn counts_and_scalars() {
        let p = param(ParamKind::Value, ElemKind::Signed, 4, 0);
        let scalar = |dtype: &'static str, n: usize| LaunchArg::Scalar {
            bytes: vec![0; n],
            elem: std::any::TypeId::of::<()>(),
            dtype,
        };
        assert!(check(std::slice::from_ref(&p), &[scalar("i32", 4)]).is_ok());
        assert!(check(std::slice::from_ref(&p), &[scalar("f32", 4)]).is_err());
        assert!(check(std::slice::from_ref(&p), &[scalar("i64", 8)]).is_err());
        let count = check(&[p], &[]).unwrap_err();
        assert!(count.contains("takes 1 parameter"), "{count}");
    }
}
