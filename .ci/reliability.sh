#!/usr/bin/env bash
# Reliability checks beyond `cargo test` (the soak, out-of-memory and stream-order tests run
# there already):
#   1. Miri on gpu-mem-core and gpu-mem-sim (their unsafe code: element types, memory, streams);
#   2. Miri on the conformance suite over the simulator, whose streams are worker threads, so
#      Miri also sees how buffers are handed between the host and the streams;
#   3. `cargo xtask hw-matrix`: the conformance suite once per backend this machine has.
# `reliability.sh miri` runs 1 and 2, `reliability.sh matrix` runs 3, no argument all three.
#
# Miri needs a nightly toolchain. If there is none, Miri is skipped with a message saying so and
# the script goes on (and exits 0 only if everything else passed); if nightly exists but lacks
# the Miri or rust-src component, they are installed. Miri builds use their own target directory
# (GPU_MEM_MIRI_TARGET_DIR, default target/miri) so they never invalidate the normal build.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
start=$(date +%s)
step() { echo; echo "== reliability: $* ($(( $(date +%s) - start ))s)"; }

miri_target="${GPU_MEM_MIRI_TARGET_DIR:-$PWD/target/miri}"

have_nightly() {
    command -v rustup >/dev/null 2>&1 && rustup toolchain list 2>/dev/null | grep -q '^nightly'
}

run_miri() {
    local installed
    installed="$(rustup component list --toolchain nightly --installed 2>/dev/null || true)"
    if ! grep -q '^miri' <<<"$installed" || ! grep -q '^rust-src' <<<"$installed"; then
        step "installing Miri and rust-src for the nightly toolchain"
        # From static.rust-lang.org, which a machine limited to package registries cannot reach:
        # then Miri is reported as skipped, with the reason, rather than failing the run.
        if ! rustup component add --toolchain nightly miri rust-src; then
            echo "Miri SKIPPED: the nightly toolchain lacks miri or rust-src and they cannot be installed here"
            return 0
        fi
    fi
    # Builds Miri's sysroot once (quietly); later runs reuse it.
    cargo +nightly miri setup >/dev/null 2>&1 || cargo +nightly miri setup

    # One build for the three packages: each `-p` alone would resolve features differently and
    # build the shared crates again under Miri (three builds took 210 s; one takes about 90).
    local packages=(-p gpu-mem-core -p gpu-mem-sim -p gpu-mem-conformance)

    # Not the layout property tests (`gpu-mem-core/tests/layout_props.rs`): the layout math
    # has no unsafe code, so Miri would check only ndarray's, at about a minute; they run
    # natively in `cargo test`. Slow unit tests of safe-only code are ignored under Miri the
    # same way, each with that reason on its `#[cfg_attr(miri, ignore)]`.
    step "Miri: gpu-mem-core and gpu-mem-sim (unit tests, the simulator's tests)"
    CARGO_TARGET_DIR="$miri_target" cargo +nightly miri test "${packages[@]}" \
        --lib --test simulator

    step "Miri: doctests"
    CARGO_TARGET_DIR="$miri_target" cargo +nightly miri test "${packages[@]}" --doc

    step "Miri: conformance suite on the simulator (the cases that hand buffers to streams)"
    # The simulator's streams are threads and its events read the clock: isolation must be off.
    # What Miri adds here is the host buffers handed to the streams' threads and back
    # (transfers, streams, host memory, soundness, DLPack); the array, assignment, record and
    # SmartArray cases run the same core code as the first two runs and the suite without Miri.
    CARGO_TARGET_DIR="$miri_target" GPU_MEM_BACKEND=sim MIRIFLAGS=-Zmiri-disable-isolation \
        cargo +nightly miri test "${packages[@]}" --test conformance -- \
        --skip sim::arrays:: --skip sim::assign:: --skip sim::records:: --skip sim::smart::
}

part="${1:-all}"
case "$part" in
    all | miri | matrix) ;;
    *)
        echo "usage: $0 [all|miri|matrix]" >&2
        exit 2
        ;;
esac

if [ "$part" != matrix ]; then
    if have_nightly; then
        run_miri
    else
        step "Miri SKIPPED"
        echo "Miri was skipped: no nightly toolchain is installed (rustup toolchain list shows none)."
        echo "Install one with: rustup toolchain install nightly --component miri rust-src"
    fi
fi

if [ "$part" != miri ]; then
    step "hardware matrix"
    # The simulator is always there: a run where it fails to show up is a failure.
    cargo xtask hw-matrix --require sim
fi

step "done"
