//! Writing the tool's output without panicking.
//!
//! `println!` panics when stdout is a closed pipe (`gpu-mem info | head -3`), since Rust ignores
//! `SIGPIPE`. Every line goes through [`line`] instead: a broken pipe means the reader has all it
//! wanted, so the program ends quietly with success; any other write error ends it with a
//! message and failure.

use std::fmt;
use std::io::{ErrorKind, Write};

/// Writes one line to stdout (see the module docs).
pub fn line(args: fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let written = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    if let Err(error) = written {
        drop(out);
        if error.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        error_line(format_args!("gpu-mem: cannot write output: {error}"));
        std::process::exit(1);
    }
}

/// Writes one line to stderr, dropping it if stderr cannot be written.
pub fn error_line(args: fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}
