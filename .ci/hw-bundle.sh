#!/usr/bin/env bash
# Builds the hardware bundle (`cargo xtask hw-bundle`) and runs its run.sh on this machine.
# Kept out of .ci/run: the release builds take about 3 minutes on 2 cores.
#
# Without a GPU (hosted CI, development machines) run.sh must reach its summary with the
# simulator passing and the CUDA and ROC backends reported unavailable with their reasons; with
# `--require cuda` or `--require roc` (the self-hosted GPU jobs) that backend must be there and pass.
#   .ci/hw-bundle.sh [--require KIND]...      (BUNDLE_DIR, RESULTS_DIR override the folders)
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE_DIR=${BUNDLE_DIR:-target/hw-bundle}
RESULTS_DIR=${RESULTS_DIR:-target/hw-bundle-results}

start=$(date +%s)
cargo xtask hw-bundle --out "$BUNDLE_DIR"
echo "hw-bundle: built in $(( $(date +%s) - start ))s; size $(du -sh "$BUNDLE_DIR" | cut -f1)"
size=$(du -sb "$BUNDLE_DIR" | cut -f1)
if [ "$size" -ge $((60 << 20)) ]; then
    echo "hw-bundle: $size bytes, over 60 MiB" >&2
    exit 1
fi

run_start=$(date +%s)
status=0
"$BUNDLE_DIR/run.sh" "$@" "$RESULTS_DIR" || status=$?
echo "hw-bundle: run.sh took $(( $(date +%s) - run_start ))s (status $status)"
summary="$RESULTS_DIR/summary.txt"
grep -q '^RESULT: ' "$summary" || { echo "run.sh did not reach its summary" >&2; exit 1; }
files=$(find "$RESULTS_DIR" -type f | wc -l)
[ "$files" -le 8 ] || { echo "run.sh wrote $files result files (at most 8)" >&2; exit 1; }
grep -q '^matrix sim  *ok ' "$summary" || { echo "the simulator's matrix did not pass" >&2; exit 1; }
if [ $# -eq 0 ]; then
    # No GPU expected: each GPU backend is either there or unavailable with a reason.
    for kind in cuda roc; do
        if ! grep -Eq "^backend $kind +(ok +available|skip +unavailable: .+)$" "$summary"; then
            echo "backend $kind: neither available nor unavailable with a reason" >&2
            exit 1
        fi
    done
fi
exit $status
