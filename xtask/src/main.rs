//! `cargo xtask <command>`: project automation that is not part of the library.
//!
//! * `bindgen [cuda|hsa|hip|all] [--check]` — regenerate the committed FFI declarations from the
//!   pinned headers (or, with `--check`, verify the committed files match).
//! * `hw-matrix [--json] [--json-file <path>] [--require <kind>]... [--release]` — run the conformance suite once per
//!   backend this machine has and print the hardware matrix (see `hw_matrix`).
//! * `hw-bundle --out DIR` — build the hardware bundle: stripped release binaries (CLI, conformance
//!   suite, native tests, examples, hw-bench) and `run.sh`, for a GPU machine without Rust (see
//!   `hw_bundle`).
//! * `doc-links [<book dir>]` — check the relative links of the mdBook (default `docs`) and the
//!   repository paths written in backticks in it and in the README.
//! * `structure [--check] [--dot FILE]` — draw each crate's module tree with the edges between
//!   sibling modules and list the import circles (see `structure`).
//! * `bench [kernels|executor|transfers]... [--json]` — run the benchmarks that check the speed targets.

mod bench;
mod bindgen;
mod doc_links;
mod hw_bundle;
mod hw_matrix;
mod structure;

use std::process::ExitCode;

fn usage() -> &'static str {
    "usage: cargo xtask <command>\n\
     commands:\n  \
       bindgen [cuda|hsa|hip|all] [--check]   regenerate (or check) the committed FFI bindings\n  \
       hw-matrix [--json] [--json-file <path>] [--require <kind>]... [--release]\n                                          \
       run the conformance suite on every backend here and print the matrix\n  \
       hw-bundle --out DIR                    build the hardware bundle (run.sh + stripped binaries)\n  \
       doc-links [<book dir>]                 check the mdBook's links and backticked repository paths\n  \
       structure [--check] [--dot FILE]       module tree, sibling edges and import circles\n  \
       bench [kernels|executor|transfers]... [--json]  the benchmarks behind the speed targets\n"
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("bindgen") => bindgen::run(&args[1..]),
        Some("hw-matrix") => hw_matrix::run(&args[1..]),
        Some("hw-bundle") => hw_bundle::run(&args[1..]),
        Some("doc-links") => doc_links::run(&args[1..]),
        Some("structure") => structure::run(&args[1..]),
        Some("bench") => bench::run(&args[1..]),
        Some("-h" | "--help") | None => {
            print!("{}", usage());
            return ExitCode::SUCCESS;
        }
        Some(other) => Err(format!("unknown command `{other}`\n{}", usage())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}
