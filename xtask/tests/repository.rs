//! The repository's own rules, checked by the `xtask` binary as `cargo test` built it: no import
//! circles between modules (`xtask structure --check`), and the book's links and the repository
//! paths written in backticks resolve (`xtask doc-links`). Being tests, they run with the README's
//! test command; and because this target exists, `cargo test --workspace` builds the `xtask`
//! binary with the workspace's features, which CI then runs for the bindings check instead of
//! building it a second time through `cargo xtask`.

#![allow(clippy::expect_used)]

use std::process::Command;

/// Runs the built `xtask` with `args`, and fails with its output unless it succeeds.
fn xtask(args: &[&str]) {
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .output()
        .expect("the xtask binary built for this test runs");
    assert!(
        output.status.success(),
        "xtask {} failed ({}):\n{}{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn modules_import_each_other_without_circles() {
    xtask(&["structure", "--check"]);
}

#[test]
fn the_books_links_and_backticked_paths_resolve() {
    xtask(&["doc-links"]);
}
