//! What a kernel's own `#include`s bring into its program, for the disk cache's key: a library
//! built from a header that has changed since must not be loaded again.
//!
//! The compiler finds a header the kernel names in quotes or angle brackets (other than the
//! prelude, `gpu_mem.h`) at an absolute path, or in the directories of `CPATH` and
//! `CPLUS_INCLUDE_PATH` (the scratch directory a kernel is built in holds nothing else). The
//! fingerprint is those variables and the contents of every such header found, in order; the
//! compiler's own headers (`<vector>`) are not in those directories and cost nothing. Headers
//! that those headers include are not followed.

use std::path::{Path, PathBuf};

/// The variables through which GCC and clang find headers outside their own.
const INCLUDE_VARIABLES: [&str; 3] = ["CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH"];

/// Bytes that change when a header `code` includes (directly) changes, or when the variables
/// that decide where headers are found do.
pub(crate) fn fingerprint(code: &str) -> Vec<u8> {
    let mut print = Vec::new();
    let mut dirs = Vec::new();
    for variable in INCLUDE_VARIABLES {
        if let Some(value) = std::env::var_os(variable) {
            print.extend_from_slice(variable.as_bytes());
            print.push(b'=');
            print.extend_from_slice(value.as_encoded_bytes());
            print.push(0);
            dirs.extend(std::env::split_paths(&value).filter(|d| !d.as_os_str().is_empty()));
        }
    }
    for name in included(code) {
        for path in candidates(name, &dirs) {
            if let Ok(contents) = std::fs::read(&path) {
                print.extend_from_slice(path.as_os_str().as_encoded_bytes());
                print.push(0);
                print.extend_from_slice(&(contents.len() as u64).to_le_bytes());
                print.extend_from_slice(&contents);
            }
        }
    }
    print
}

/// The header names of `code`'s `#include` lines, the prelude aside.
fn included(code: &str) -> impl Iterator<Item = &str> {
    code.lines().filter_map(|line| {
        let rest = line.trim_start().strip_prefix('#')?.trim_start();
        let rest = rest.strip_prefix("include")?.trim_start();
        let (open, close) = match rest.chars().next()? {
            '"' => ('"', '"'),
            '<' => ('<', '>'),
            _ => return None,
        };
        let name = rest.strip_prefix(open)?;
        let name = &name[..name.find(close)?];
        (name != "gpu_mem.h" && !name.is_empty()).then_some(name)
    })
}

/// The C and C++ library headers whose macros a kernel's code may name without reading a
/// thread's index through them (they know nothing of `threadIdx`).
const STANDARD_HEADERS: [&str; 40] = [
    "assert.h",
    "ctype.h",
    "errno.h",
    "float.h",
    "limits.h",
    "math.h",
    "stdbool.h",
    "stddef.h",
    "stdint.h",
    "stdio.h",
    "stdlib.h",
    "string.h",
    "cassert",
    "cctype",
    "cerrno",
    "cfloat",
    "climits",
    "cmath",
    "cstddef",
    "cstdint",
    "cstdio",
    "cstdlib",
    "cstring",
    "algorithm",
    "array",
    "atomic",
    "cfenv",
    "complex",
    "functional",
    "initializer_list",
    "iostream",
    "iterator",
    "limits",
    "memory",
    "new",
    "numeric",
    "tuple",
    "type_traits",
    "utility",
    "vector",
];

/// Whether every header `code` includes is the simulator's own (the prelude, its CUDA header
/// names: `super::headers`) or the C and C++ library's: none of the user's, whose macros the
/// rewrites cannot read.
pub(crate) fn only_known_headers(code: &str) -> bool {
    included(code).all(|name| {
        STANDARD_HEADERS.contains(&name) || super::headers::all().any(|(known, _)| known == name)
    })
}

/// Where the compiler may find `name`: itself when absolute, else in each of `dirs`.
fn candidates(name: &str, dirs: &[PathBuf]) -> Vec<PathBuf> {
    let path = Path::new(name);
    if path.is_absolute() {
        vec![path.to_path_buf()]
    } else {
        dirs.iter().map(|dir| dir.join(name)).collect()
    }
}

// Safe code only, so nothing for Miri to check (and text-heavy tests take minutes under it).
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn include_lines_are_read_as_the_preprocessor_reads_them() {
        let code = "#include \"gpu_mem.h\"\n  #  include <vector>\n#include \"/opt/k/a.h\" // x\n\
                    #define X 1\n#include MACRO\n#include \"\"\n";
        let names: Vec<&str> = included(code).collect();
        assert_eq!(names, ["vector", "/opt/k/a.h"]);
    }

    /// The key changes with the contents of a header included by absolute path.
    #[cfg(not(miri))]
    #[test]
    fn a_changed_header_changes_the_fingerprint() {
        let dir = std::env::temp_dir().join(format!("gpu-mem-includes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let header = dir.join("scale.h");
        std::fs::write(&header, "#define SCALE 2\n").unwrap_or_else(|e| panic!("{e}"));
        let code = format!(
            "#include \"gpu_mem.h\"\n#include \"{}\"\n",
            header.display()
        );
        let before = fingerprint(&code);
        assert_eq!(
            fingerprint(&code),
            before,
            "the same header, the same print"
        );
        std::fs::write(&header, "#define SCALE 3\n").unwrap_or_else(|e| panic!("{e}"));
        let after = fingerprint(&code);
        let _ = std::fs::remove_dir_all(&dir);
        assert_ne!(before, after, "an edited header must change the cache key");
    }
}
