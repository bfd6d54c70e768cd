#!/usr/bin/env bash
# gpu-mem hardware bundle (built by `cargo xtask hw-bundle`): checks gpu-mem on this machine with
# no Rust toolchain and no network.
#
#   bash run.sh [--require cuda|roc|sim]... [RESULTS_DIR]
#
# RESULTS_DIR defaults to $OUT (what a device machine sends back), else ./results. A machine
# that shows an NVIDIA GPU (/dev/nvidia0 or nvidia-smi) requires the CUDA backend, one that
# shows /dev/kfd the ROC backend, as if --require had named them: a GPU run never reads "ok"
# with its GPU skipped.
#
# 1. finds the drivers and compilers (libcuda, NVRTC from the system, the CUDA toolkit or Python
#    wheels' nvidia/*/lib; libhsa-runtime64, hiprtc; the host C++ compiler) and reports them;
# 2. runs the hardware matrix (the conformance suite): all cases in one process, then each case
#    that failed or went unreported alone, so that a device fault cannot fail the cases after it;
# 3. the backends' native tests, the examples, `gpu-mem bench --json`, compute-sanitizer (where
#    installed) and the numba-cuda comparison (where numba-cuda is installed);
# 4. writes everything under RESULTS_DIR (8 files at most) and prints a summary table.
# Every step has its own time limit; the whole run fits in GPU_MEM_BUNDLE_BUDGET seconds
# (default 530). Exit status: 1 when a step failed or a required backend is unavailable.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$HERE/bin
REQUIRE=()
RESULTS=${OUT:-$HERE/results}
require() {
    case "$1" in
        cuda|roc|sim) REQUIRE+=("$1") ;;
        *) echo "run.sh: --require takes cuda, roc or sim, not '$1'" >&2; exit 2 ;;
    esac
}
while [ $# -gt 0 ]; do
    case "$1" in
        --require)
            [ $# -ge 2 ] || { echo "run.sh: --require needs cuda, roc or sim" >&2; exit 2; }
            require "$2"; shift 2 ;;
        --require=*) require "${1#--require=}"; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) RESULTS=$1; shift ;;
    esac
done
if [ -e /dev/nvidia0 ] || nvidia-smi -L >/dev/null 2>&1; then REQUIRE+=(cuda); fi
if [ -e /dev/kfd ]; then REQUIRE+=(roc); fi
mkdir -p "$RESULTS" || exit 2
RESULTS=$(cd "$RESULTS" && pwd)
SUMMARY=$RESULTS/summary.txt
ENVIRONMENT=$RESULTS/environment.txt
MATRIX=$RESULTS/matrix.txt
NATIVE=$RESULTS/native.txt
EXAMPLES=$RESULTS/examples.txt
BENCH=$RESULTS/bench.json
SANITIZER=$RESULTS/sanitizer.txt
NUMBA=$RESULTS/numba.txt
for f in "$SUMMARY" "$ENVIRONMENT" "$MATRIX" "$NATIVE" "$EXAMPLES" "$BENCH" "$SANITIZER" "$NUMBA"; do
    : > "$f"
done

START=$(date +%s)
BUDGET=${GPU_MEM_BUNDLE_BUDGET:-530}
FAILED=0
ROWS=()
export GPU_MEM_SOURCE_ROOT=$HERE/src
export GPU_MEM_LOG=${GPU_MEM_LOG:-warn}

elapsed() { echo $(( $(date +%s) - START )); }
# limit WANTED [RESERVE]: WANTED seconds, or less so that RESERVE seconds stay for later steps.
limit() {
    local want=$1 reserve=${2:-10} left
    left=$(( BUDGET - $(elapsed) - reserve ))
    if [ "$left" -lt "$want" ]; then want=$left; fi
    if [ "$want" -lt 1 ]; then want=1; fi
    echo "$want"
}
out_of_time() { [ $(( BUDGET - $(elapsed) )) -le "${1:-10}" ]; }
# row STEP STATUS DETAIL: one line of the summary table. FAIL marks the run failed.
row() {
    ROWS+=("$1|$2|$3")
    if [ "$2" = FAIL ]; then FAILED=1; fi
}
section() { printf '\n===== %s (%ss)\n' "$1" "$(elapsed)" >> "$2"; }
say() { echo "[$(elapsed)s] $*" >&2; }
# run_limited SECONDS CMD...: the command under timeout (status 124 or 137 when it ran too long).
run_limited() {
    local secs=$1; shift
    timeout --kill-after=5 "$secs" "$@"
}

# ---- 1. environment -------------------------------------------------------------------------
say "looking for drivers and compilers"
{
    echo "gpu-mem hardware bundle, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "host: $(uname -srm); $(nproc 2>/dev/null || echo '?') CPUs"
    [ -r /etc/os-release ] && . /etc/os-release && echo "os: ${PRETTY_NAME:-?}"
} >> "$ENVIRONMENT"

# first_file PATTERN...: the first existing file among the (glob) patterns, newest version first.
first_file() {
    local pattern f
    for pattern in "$@"; do
        # shellcheck disable=SC2086
        for f in $(ls -1d $pattern 2>/dev/null | sort -rV); do
            if [ -f "$f" ]; then echo "$f"; return 0; fi
        done
    done
    return 1
}
ldconfig_lib() { ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n { print $NF; exit }'; }
python_site_dirs() {
    command -v python3 >/dev/null 2>&1 || return 0
    python3 - <<'EOF' 2>/dev/null
import site, sys
dirs = list(getattr(site, "getsitepackages", lambda: [])())
user = getattr(site, "getusersitepackages", lambda: None)()
if user: dirs.append(user)
dirs += [p for p in sys.path if p.endswith("site-packages") or p.endswith("dist-packages")]
seen = set()
for d in dirs:
    if d not in seen:
        seen.add(d); print(d)
EOF
}
# report NAME VARIABLE FILE SEARCHED: exports VARIABLE=FILE when found and says what was found.
report() {
    local name=$1 var=$2 file=$3 searched=$4
    if [ -n "${!var:-}" ]; then
        echo "$name: ${!var} (from \$$var)" >> "$ENVIRONMENT"
    elif [ -n "$file" ]; then
        export "$var=$file"
        echo "$name: $file" >> "$ENVIRONMENT"
    else
        echo "$name: not found (searched: $searched)" >> "$ENVIRONMENT"
    fi
}

CUDA_DIRS="${CUDA_HOME:-} ${CUDA_PATH:-} /usr/local/cuda /usr/local/cuda-* /opt/cuda"
libcuda=$(ldconfig_lib libcuda.so.1)
[ -n "$libcuda" ] || libcuda=$(first_file /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 \
    /usr/lib/libcuda.so.1 /usr/lib/wsl/lib/libcuda.so.1 /usr/local/nvidia/lib64/libcuda.so.1 \
    /usr/local/cuda/compat/libcuda.so.1)
report "CUDA driver (libcuda)" GPU_MEM_CUDA_LIBRARY "$libcuda" "ldconfig, /usr/lib*, /usr/lib/wsl/lib, /usr/local/nvidia, cuda/compat"

nvrtc_patterns=()
for d in $CUDA_DIRS; do
    [ -n "$d" ] && nvrtc_patterns+=("$d/lib64/libnvrtc.so.[0-9]*" "$d/lib/libnvrtc.so.[0-9]*" "$d/targets/*/lib/libnvrtc.so.[0-9]*")
done
nvrtc_patterns+=("/usr/lib/x86_64-linux-gnu/libnvrtc.so.[0-9]*" "/usr/lib64/libnvrtc.so.[0-9]*")
while IFS= read -r site_dir; do
    [ -n "$site_dir" ] && nvrtc_patterns+=("$site_dir/nvidia/*/lib/libnvrtc.so.[0-9]*" "$site_dir/nvidia/cu*/lib/libnvrtc.so.[0-9]*")
done < <(python_site_dirs; echo "${GPU_MEM_CUDA_WHEELS:-$HOME/.cache/gpu-mem/cuda-wheels}")
nvrtc=$(first_file "${nvrtc_patterns[@]}")
if [ -z "$nvrtc" ]; then nvrtc=$(ldconfig_lib libnvrtc.so.13); fi
if [ -z "$nvrtc" ]; then nvrtc=$(ldconfig_lib libnvrtc.so.12); fi
report "NVRTC" GPU_MEM_NVRTC_LIBRARY "$nvrtc" "\$CUDA_HOME, /usr/local/cuda*, /usr/lib*, python site-packages and pip --target dirs nvidia/*/lib, ldconfig"
if [ -n "${GPU_MEM_NVRTC_LIBRARY:-}" ]; then
    # NVRTC loads its builtins library from its own directory.
    export LD_LIBRARY_PATH="$(dirname "$GPU_MEM_NVRTC_LIBRARY")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# The NVRTC tests check their PTX with the toolkit's ptxas where there is one.
ptxas=""
for d in $CUDA_DIRS; do
    if [ -n "$d" ] && [ -x "$d/bin/ptxas" ]; then ptxas=$d/bin/ptxas; break; fi
done
[ -n "$ptxas" ] || ptxas=$(command -v ptxas 2>/dev/null || true)
report "ptxas" GPU_MEM_PTXAS "$ptxas" "\$CUDA_HOME/bin, /usr/local/cuda*/bin, PATH"

# NCCL for the collectives (gpu_mem::collective): not in the bundle (the library alone is ~340 MB),
# so the machine's own: a pip-installed nvidia-nccl-cu12/cu13 wheel (PyTorch brings one), the CUDA
# toolkit's, or the system's.
nccl_patterns=()
for d in $CUDA_DIRS; do
    [ -n "$d" ] && nccl_patterns+=("$d/lib64/libnccl.so.2" "$d/lib/libnccl.so.2")
done
nccl_patterns+=("/usr/lib/x86_64-linux-gnu/libnccl.so.2" "/usr/lib64/libnccl.so.2")
while IFS= read -r site_dir; do
    [ -n "$site_dir" ] && nccl_patterns+=("$site_dir/nvidia/nccl/lib/libnccl.so.2")
done < <(python_site_dirs; echo "${GPU_MEM_CUDA_WHEELS:-$HOME/.cache/gpu-mem/cuda-wheels}")
nccl=$(first_file "${nccl_patterns[@]}")
if [ -z "$nccl" ]; then nccl=$(ldconfig_lib libnccl.so.2); fi
report "NCCL" GPU_MEM_NCCL_LIBRARY "$nccl" "\$CUDA_HOME, /usr/local/cuda*, /usr/lib*, python site-packages nvidia/nccl/lib, ldconfig"

hsa=$(first_file /opt/rocm/lib/libhsa-runtime64.so.1 /opt/rocm-*/lib/libhsa-runtime64.so.1)
[ -n "$hsa" ] || hsa=$(ldconfig_lib libhsa-runtime64.so.1)
report "HSA runtime (libhsa-runtime64)" GPU_MEM_HSA_LIBRARY "$hsa" "/opt/rocm*/lib, ldconfig"
hiprtc=$(first_file /opt/rocm/lib/libhiprtc.so.[0-9]* /opt/rocm-*/lib/libhiprtc.so.[0-9]* /opt/rocm/lib/libamdhip64.so.[0-9]*)
[ -n "$hiprtc" ] || hiprtc=$(ldconfig_lib libamdhip64.so.5)
report "hiprtc" GPU_MEM_HIPRTC_LIBRARY "$hiprtc" "/opt/rocm*/lib, ldconfig"

# The simulator's own search: GPU_MEM_SIM_CXX, else c++, g++, clang++.
CXX_FOUND=""
if [ -n "${GPU_MEM_SIM_CXX:-}" ]; then CXX_FOUND=$GPU_MEM_SIM_CXX
else
    for cxx in c++ g++ clang++; do
        if command -v "$cxx" >/dev/null 2>&1; then CXX_FOUND=$(command -v "$cxx"); break; fi
    done
fi
echo "host C++ compiler (simulator kernels): ${CXX_FOUND:-not found (the simulator cannot build portable-source kernels)}" >> "$ENVIRONMENT"

SANITIZER_BIN=$(command -v compute-sanitizer 2>/dev/null || true)
if [ -z "$SANITIZER_BIN" ]; then
    SANITIZER_BIN=$(first_file ${CUDA_HOME:+$CUDA_HOME/bin/compute-sanitizer} /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer)
fi
echo "compute-sanitizer: ${SANITIZER_BIN:-not found}" >> "$ENVIRONMENT"
PYTHON=$(command -v python3 2>/dev/null || true)
NUMBA_STATE="python3 not found"
if [ -n "$PYTHON" ]; then
    NUMBA_STATE=$(run_limited 30 "$PYTHON" -c 'import numba_cuda, numba; print("numba-cuda", getattr(numba_cuda, "__version__", "?"), "numba", numba.__version__)' 2>/dev/null \
        || run_limited 30 "$PYTHON" -c 'import numba; from numba import cuda; print("numba (built-in numba.cuda)", numba.__version__)' 2>/dev/null \
        || echo "not installed")
fi
echo "python3: ${PYTHON:-not found}; numba-cuda: $NUMBA_STATE" >> "$ENVIRONMENT"
for dev in /dev/nvidia0 /dev/nvidiactl /dev/kfd /dev/dri; do
    if [ -e "$dev" ]; then echo "$dev: present" >> "$ENVIRONMENT"; else echo "$dev: absent" >> "$ENVIRONMENT"; fi
done
if command -v nvidia-smi >/dev/null 2>&1; then
    section "nvidia-smi" "$ENVIRONMENT"
    run_limited 20 nvidia-smi >> "$ENVIRONMENT" 2>&1
fi
section "gpu-mem info" "$ENVIRONMENT"
run_limited 60 "$BIN/gpu-mem" info >> "$ENVIRONMENT" 2>&1
row environment ok "drivers and compilers in environment.txt"

# ---- 2. which backends this machine has ------------------------------------------------------
# The conformance binary prints `skipping the <kind> backend: <reason>` for a backend it cannot
# open; a filter that matches nothing makes it run no case.
AVAILABLE=()
CRASHED=()
declare -A REASON
for kind in cuda roc sim; do
    probe=$(GPU_MEM_BACKEND=$kind run_limited 60 "$BIN/conformance" --exact __no_such_case__ 2>&1)
    status=$?
    reason=$(printf '%s\n' "$probe" | sed -n "s/^skipping the $kind backend: //p" | head -n 1)
    if [ $status -ne 0 ]; then
        # A crash (or a bad setting) is not "not installed": it fails the run below.
        REASON[$kind]="opening the backend ended with status $status: $(printf '%s' "$probe" | tail -n 1)"
        CRASHED+=("$kind")
    elif [ -n "$reason" ]; then
        REASON[$kind]=$reason
    else
        AVAILABLE+=("$kind")
    fi
done
for kind in cuda roc sim; do
    if [[ " ${AVAILABLE[*]} " == *" $kind "* ]]; then
        row "backend $kind" ok "available"
    else
        status=skip
        for required in "${REQUIRE[@]}"; do [ "$required" = "$kind" ] && status=FAIL; done
        # The simulator needs nothing of the machine: unavailable, it is broken. So is any
        # backend whose probe crashed.
        [ "$kind" = sim ] && status=FAIL
        [[ " ${CRASHED[*]} " == *" $kind "* ]] && status=FAIL
        row "backend $kind" "$status" "unavailable: ${REASON[$kind]}"
    fi
done
GPUS=()
for kind in "${AVAILABLE[@]}"; do [ "$kind" != sim ] && GPUS+=("$kind"); done

# ---- 3. hardware matrix: the whole suite, then each failing case alone ----------------------------
# One process runs every case of a backend (its threads share the module cache, so this takes a
# fraction of one process per case); each case that failed, or that the process never reported
# (it crashed or ran out of time), then runs alone, so that a device fault cannot fail the cases
# after it and every failure is its own. The GPU backends first; the simulator (the reference,
# which CI runs in full) gets what time is left.
matrix_backend() {
    local kind=$1 share=$2 deadline names name out status passed=0 failed=0 ignored=0 notrun=0 t0
    local whole verdict again=()
    declare -A first
    deadline=$(( $(elapsed) + share ))
    section "conformance on $kind: the whole suite in one process" "$MATRIX"
    names=$(GPU_MEM_BACKEND=$kind run_limited 60 "$BIN/conformance" --list 2>/dev/null | sed -n "s/^\(\[$kind\] \)\{0,1\}\($kind::.*\): test\$/\2/p")
    if [ -z "$names" ]; then
        echo "no cases listed" >> "$MATRIX"
        row "matrix $kind" FAIL "the suite listed no case"
        return
    fi
    t0=$(date +%s)
    whole=$(GPU_MEM_BACKEND=$kind run_limited "$(limit $(( share * 2 / 3 )) 150)" "$BIN/conformance" 2>&1)
    status=$?
    echo "status $status after $(( $(date +%s) - t0 ))s; $(printf '%s\n' "$whole" | grep '^test result:' | tail -n 1)" >> "$MATRIX"
    while IFS='|' read -r name verdict; do
        [ -n "$name" ] && first[$name]=$verdict
    done < <(printf '%s\n' "$whole" | sed -n "s/^test \(\[$kind\] \)\{0,1\}\($kind::[^ ]*\) *\.\.\. \(ok\|FAILED\|ignored\).*/\2|\3/p")
    # The failures' messages, as the whole run printed them.
    printf '%s\n' "$whole" | sed -n '/^failures:$/,/^test result:/p' | head -n 400 | sed 's/^/    /' >> "$MATRIX"
    section "conformance on $kind: per case (failing and unreported cases re-run alone)" "$MATRIX"
    for name in $names; do
        case ${first[$name]:-} in
            ok) passed=$((passed + 1)); echo "$name: ok" >> "$MATRIX" ;;
            ignored) ignored=$((ignored + 1)); echo "$name: ignored" >> "$MATRIX" ;;
            *) again+=("$name") ;;
        esac
    done
    for name in "${again[@]}"; do
        if [ "$(elapsed)" -ge "$deadline" ] || out_of_time 150; then
            notrun=$((notrun + 1)); echo "$name: NOT RUN (time budget; whole run: ${first[$name]:-unreported})" >> "$MATRIX"; continue
        fi
        t0=$(date +%s)
        out=$(GPU_MEM_BACKEND=$kind run_limited "$(limit 60 150)" "$BIN/conformance" --exact "$name" 2>&1)
        status=$?
        if [ $status -eq 0 ] && printf '%s\n' "$out" | grep -q '^test result: ok\. 1 passed'; then
            # Passing alone after failing beside the others is a finding, not a pass.
            if [ "${first[$name]:-}" = FAILED ]; then
                failed=$((failed + 1)); echo "$name: FAILED in the whole run, ok alone ($(( $(date +%s) - t0 ))s)" >> "$MATRIX"
            else
                passed=$((passed + 1)); echo "$name: ok alone, unreported in the whole run ($(( $(date +%s) - t0 ))s)" >> "$MATRIX"
            fi
        elif [ $status -eq 0 ] && printf '%s\n' "$out" | grep -q '1 ignored'; then
            ignored=$((ignored + 1)); echo "$name: ignored: $(printf '%s\n' "$out" | grep '^skipping' | head -n 3 | tr '\n' ' ')" >> "$MATRIX"
        else
            failed=$((failed + 1))
            case $status in 124|137) echo "$name: FAILED alone (timed out; whole run: ${first[$name]:-unreported})" >> "$MATRIX" ;;
                *) echo "$name: FAILED alone (status $status; whole run: ${first[$name]:-unreported})" >> "$MATRIX" ;; esac
            printf '%s\n' "$out" | tail -n 40 | sed 's/^/    /' >> "$MATRIX"
        fi
    done
    local status=ok required
    [ $failed -gt 0 ] && status=FAIL
    [ $passed -eq 0 ] && [ $failed -eq 0 ] && status=FAIL
    # Cases of a required backend left for lack of time are not a pass.
    for required in "${REQUIRE[@]}"; do
        [ "$required" = "$kind" ] && [ $notrun -gt 0 ] && status=FAIL
    done
    row "matrix $kind" "$status" "$passed passed, $failed failed, $ignored ignored, $notrun not run (time)"
}
say "hardware matrix on: ${AVAILABLE[*]:-no backend}"
for kind in "${GPUS[@]}"; do matrix_backend "$kind" 240; done
for kind in "${AVAILABLE[@]}"; do
    [ "$kind" = sim ] || continue
    if [ -z "$CXX_FOUND" ]; then
        row "matrix sim" skip "no host C++ compiler (c++, g++, clang++): portable-source kernels cannot be built"
    elif [ ${#GPUS[@]} -gt 0 ]; then
        matrix_backend sim 60
    else
        matrix_backend sim 240
    fi
done

# ---- 4. native tests of the backends ------------------------------------------------------------
say "native tests"
for test in roc-native cuda-loader cuda-nvrtc_kernels cuda-nvrtc_corpus; do
    [ -x "$BIN/$test" ] || { row "native $test" skip "not in the bundle"; continue; }
    if out_of_time 120; then row "native $test" skip "time budget spent"; continue; fi
    section "$test" "$NATIVE"
    out=$(run_limited "$(limit 60 120)" "$BIN/$test" 2>&1); status=$?
    printf '%s\n' "$out" >> "$NATIVE"
    result=$(printf '%s\n' "$out" | grep '^test result:' | tail -n 1 | sed 's/^test result: //; s/; 0 measured.*//')
    passed_n=$(printf '%s\n' "$result" | sed -n 's/^ok\. \([0-9]*\) passed.*/\1/p')
    ignored_n=$(printf '%s\n' "$result" | sed -n 's/.* \([0-9]*\) ignored.*/\1/p')
    if [ $status -ne 0 ]; then row "native $test" FAIL "status $status: ${result:-no summary}"
    elif [ "${passed_n:-0}" -eq 0 ]; then row "native $test" skip "nothing ran: ${result:-no summary}"
    elif [ "${ignored_n:-0}" -gt 0 ]; then row "native $test" partial "${result} (the reasons in native.txt)"
    else row "native $test" ok "${result:-no summary}"; fi
done

# ---- 5. examples ---------------------------------------------------------------------------------
say "examples"
EXAMPLE_LIST="matmul_tiled block_sum barrier_wave diagnostics all_reduce"
for kind in "${AVAILABLE[@]}"; do
    if [ "$kind" = sim ] && [ -z "$CXX_FOUND" ]; then
        row "examples sim" skip "no host C++ compiler (c++, g++, clang++): portable-source kernels cannot be built"; continue
    fi
    passed=0; failedlist=""
    for example in $EXAMPLE_LIST; do
        [ -x "$BIN/$example" ] || continue
        if out_of_time 100; then failedlist="$failedlist $example(not run: time)"; continue; fi
        section "$example on $kind" "$EXAMPLES"
        GPU_MEM_BACKEND=$kind run_limited "$(limit 60 100)" "$BIN/$example" >> "$EXAMPLES" 2>&1
        status=$?
        if [ $status -eq 0 ]; then passed=$((passed + 1)); else failedlist="$failedlist $example(status $status)"; fi
    done
    if [ -z "$failedlist" ]; then row "examples $kind" ok "$passed passed"
    else row "examples $kind" FAIL "$passed passed; failed:$failedlist"; fi
done

# A one-rank communicator on each GPU backend: ncclCommInitAll over the device (the example's
# default), then ncclCommInitRank with a unique id passed through a file (its --threads form).
# The example says "no collectives here" and exits 0 where the engine does not load: a skip.
for kind in "${AVAILABLE[@]}"; do
    [ "$kind" = sim ] && continue
    [ -x "$BIN/all_reduce" ] || { row "collectives $kind" skip "all_reduce not in the bundle"; continue; }
    if out_of_time 90; then row "collectives $kind" skip "time budget spent"; continue; fi
    section "collectives on $kind: one rank" "$EXAMPLES"
    idfile=$(mktemp -u)
    out=$( { GPU_MEM_BACKEND=$kind CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} run_limited "$(limit 60 90)" "$BIN/all_reduce" \
             && GPU_MEM_BACKEND=$kind CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} run_limited "$(limit 60 90)" "$BIN/all_reduce" --threads --file "$idfile"; } 2>&1)
    status=$?
    rm -f "$idfile" "$idfile.partial"
    printf '%s\n' "$out" >> "$EXAMPLES"
    engine=$(printf '%s\n' "$out" | sed -n 's/.*engine: //p' | head -n 1)
    if printf '%s\n' "$out" | grep -q "no collectives here"; then
        row "collectives $kind" skip "$(printf '%s\n' "$out" | grep -m1 "no collectives here")"
    elif [ $status -ne 0 ]; then row "collectives $kind" FAIL "status $status (examples.txt)"
    else row "collectives $kind" ok "one rank, InitAll and InitRank: ${engine:-engine not named}"; fi
done

# ---- 6. benchmarks --------------------------------------------------------------------------------
say "gpu-mem bench --json"
echo "{" >> "$BENCH"
first=1
for kind in "${AVAILABLE[@]}"; do
    if out_of_time 90; then row "bench $kind" skip "time budget spent"; continue; fi
    if [ "$kind" = sim ]; then args=(--max 4MiB --millis 5); else args=(--max 256MiB --millis 20); fi
    errors=$(mktemp)
    out=$(run_limited "$(limit 90 90)" "$BIN/gpu-mem" --backend "$kind" bench --json "${args[@]}" 2>"$errors"); status=$?
    if [ -s "$errors" ]; then section "gpu-mem bench on $kind: its messages" "$ENVIRONMENT"; cat "$errors" >> "$ENVIRONMENT"; fi
    rm -f "$errors"
    [ $first -eq 1 ] || echo "," >> "$BENCH"
    first=0
    if [ $status -eq 0 ] && [ -n "$out" ]; then
        printf '"%s": %s\n' "$kind" "$out" >> "$BENCH"; row "bench $kind" ok "bandwidth table in bench.json"
    else
        printf '"%s": null\n' "$kind" >> "$BENCH"; row "bench $kind" FAIL "gpu-mem bench ended with status $status (its messages in environment.txt)"
    fi
done
# gpu-mem's side of the numba comparison and the allocation-strategy bench, on each GPU backend
# (the simulator only runs a small smoke check of the same binary).
for kind in "${GPUS[@]}" sim; do
    [[ " ${AVAILABLE[*]} " == *" $kind "* ]] || continue
    if [ "$kind" = sim ]; then
        [ -n "$CXX_FOUND" ] || { row "hw-bench sim" skip "no host C++ compiler"; continue; }
        args=(all --max 64KiB --sizes 32,64 --rounds 5)
    else
        args=(all)
    fi
    if out_of_time 80; then row "hw-bench $kind" skip "time budget spent"; continue; fi
    errors=$(mktemp)
    out=$(GPU_MEM_BACKEND=$kind run_limited "$(limit 120 80)" "$BIN/hw-bench" "${args[@]}" 2>"$errors"); status=$?
    if [ -s "$errors" ]; then section "hw-bench on $kind: its messages" "$ENVIRONMENT"; cat "$errors" >> "$ENVIRONMENT"; fi
    rm -f "$errors"
    [ $first -eq 1 ] || echo "," >> "$BENCH"
    first=0
    if [ $status -eq 0 ] && [ -n "$out" ]; then
        printf '"hw-bench %s": %s\n' "$kind" "$out" >> "$BENCH"; row "hw-bench $kind" ok "transfers, matmul, allocators in bench.json"
        # The numba comparison is with numba-cuda: CUDA's figures.
        [ "$kind" = cuda ] && HW_BENCH_JSON=$out
    else
        printf '"hw-bench %s": null\n' "$kind" >> "$BENCH"; row "hw-bench $kind" FAIL "status $status (its messages in environment.txt)"
    fi
done
echo "}" >> "$BENCH"

# ---- 7. compute-sanitizer ---------------------------------------------------------------------------
if [[ " ${AVAILABLE[*]} " != *" cuda "* ]]; then
    row sanitizer skip "CUDA unavailable: ${REASON[cuda]:-}"
elif [ -z "$SANITIZER_BIN" ]; then
    row sanitizer skip "compute-sanitizer not installed"
else
    say "compute-sanitizer"
    clean=0; dirty=""
    for tool in "memcheck --leak-check full" racecheck synccheck; do
        for target in "gpu-mem --backend cuda selftest" "matmul_tiled 64" "block_sum"; do
            if out_of_time 70; then dirty="$dirty [$tool: $target: not run (time)]"; continue; fi
            set -- $target
            exe=$BIN/$1; shift
            section "compute-sanitizer --tool $tool $target" "$SANITIZER"
            # shellcheck disable=SC2086
            out=$(GPU_MEM_BACKEND=cuda run_limited "$(limit 60 70)" "$SANITIZER_BIN" --tool $tool --error-exitcode 99 "$exe" "$@" 2>&1); status=$?
            printf '%s\n' "$out" | tail -n 60 >> "$SANITIZER"
            if [ $status -eq 0 ]; then clean=$((clean + 1)); else dirty="$dirty [$tool: $target: status $status]"; fi
        done
    done
    if [ -z "$dirty" ]; then row sanitizer ok "$clean runs clean (memcheck+leaks, racecheck, synccheck)"
    else row sanitizer FAIL "$clean clean;$dirty"; fi
fi

# ---- 7b. the buggy kernels: the simulator's checks beside compute-sanitizer --------------------------
# Each case of tests/kernels/buggy is launched in a process of its own: on the simulator with every
# check on, and on CUDA under compute-sanitizer's tool for the bug (memcheck for the clean one).
# The simulator's verdict must be the check the case names; compute-sanitizer's is recorded as it
# is (its racecheck watches shared memory only, so a race in global memory is not its finding).
buggy_cases=$(run_limited 20 "$BIN/hw-buggy" list 2>/dev/null)
if [ -z "$buggy_cases" ]; then
    row "buggy kernels" FAIL "hw-buggy listed no case"
elif [ -z "$CXX_FOUND" ]; then
    row "buggy kernels" skip "no host C++ compiler for the simulator's side"
else
    say "buggy kernels"
    section "buggy kernels: case | expected | simulator (all checks) | compute-sanitizer" "$SANITIZER"
    sim_right=0; sim_wrong=""; cs_found=0; cs_runs=0
    with_cuda=0
    [[ " ${AVAILABLE[*]} " == *" cuda "* ]] && [ -n "$SANITIZER_BIN" ] && with_cuda=1
    while read -r name expect; do
        [ -n "$name" ] || continue
        if out_of_time 40; then echo "$name | $expect | not run (time) |" >> "$SANITIZER"; sim_wrong="$sim_wrong $name(time)"; continue; fi
        sim=$(GPU_MEM_BACKEND=sim GPU_MEM_SIM_CHECK=memcheck,racecheck,initcheck run_limited "$(limit 30 40)" "$BIN/hw-buggy" run "$name" --deliberately 2>&1 | head -n 1)
        if { [ "$expect" = clean ] && [ "$sim" = "$name: ok" ]; } || [[ "$sim" == *": $expect: "* ]]; then
            sim_right=$((sim_right + 1))
        else
            sim_wrong="$sim_wrong $name"
        fi
        cs="-"
        if [ $with_cuda -eq 1 ] && ! out_of_time 40; then
            tool=$expect; [ "$tool" = clean ] && tool=memcheck
            cs_out=$(GPU_MEM_BACKEND=cuda run_limited "$(limit 40 40)" "$SANITIZER_BIN" --tool "$tool" --error-exitcode 99 "$BIN/hw-buggy" run "$name" --deliberately 2>&1)
            cs_status=$?
            cs_runs=$((cs_runs + 1))
            first=$(printf '%s\n' "$cs_out" | grep -m1 -E '^========= +(Invalid|Misaligned|Race|Uninitialized|Error|Warning|Program hit)' | sed 's/^========= *//')
            summary=$(printf '%s\n' "$cs_out" | grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' | sed 's/^========= *//')
            [ $cs_status -eq 99 ] && cs_found=$((cs_found + 1))
            cs="$tool, status $cs_status: ${first:-nothing reported}; ${summary:-no summary}"
            printf '%s\n' "$cs_out" | grep '^=========' | head -n 12 | sed "s/^/    [$name] /" >> "$SANITIZER.details"
        fi
        echo "$name | $expect | ${sim:0:300} | $cs" >> "$SANITIZER"
    done <<< "$buggy_cases"
    if [ -f "$SANITIZER.details" ]; then
        section "buggy kernels: compute-sanitizer's first lines per case" "$SANITIZER"
        cat "$SANITIZER.details" >> "$SANITIZER"; rm -f "$SANITIZER.details"
    fi
    detail="simulator: $sim_right right${sim_wrong:+, wrong:$sim_wrong}"
    if [ $with_cuda -eq 1 ]; then detail="$detail; compute-sanitizer reported $cs_found of $cs_runs"; fi
    if [ -z "$sim_wrong" ]; then row "buggy kernels" ok "$detail (sanitizer.txt)"
    else row "buggy kernels" FAIL "$detail"; fi
fi

# ---- 8. numba-cuda side by side ----------------------------------------------------------------------
if [[ " ${AVAILABLE[*]} " != *" cuda "* ]]; then
    row "numba comparison" skip "CUDA unavailable: ${REASON[cuda]:-}"
    echo "skipped: gpu-mem's CUDA backend is unavailable: ${REASON[cuda]:-}" >> "$NUMBA"
elif [ -z "$PYTHON" ] || [ "$NUMBA_STATE" = "not installed" ]; then
    row "numba comparison" skip "numba-cuda not installed (python3: ${PYTHON:-none})"
    echo "skipped: numba-cuda not installed" >> "$NUMBA"
elif out_of_time 20; then
    row "numba comparison" skip "time budget spent"
else
    say "numba-cuda comparison"
    # Outside RESULTS: only the eight result files go back from a device machine.
    side=$(mktemp /tmp/gpu-mem-side.XXXXXX.json)
    printf '%s\n' "${HW_BENCH_JSON:-}" > "$side"
    run_limited "$(limit 200 15)" "$PYTHON" "$HERE/numba_compare.py" --gpu-mem-json "$side" >> "$NUMBA" 2>&1
    status=$?
    rm -f "$side"
    case $status in
        0) row "numba comparison" ok "table in numba.txt" ;;
        3) row "numba comparison" skip "numba-cuda cannot run here (numba.txt says why)" ;;
        *) row "numba comparison" FAIL "numba_compare.py ended with status $status" ;;
    esac
fi

# ---- 9. summary ---------------------------------------------------------------------------------------
for required in "${REQUIRE[@]}"; do
    [[ " ${AVAILABLE[*]} " == *" $required "* ]] || FAILED=1
done
{
    printf '%-26s %-5s %s\n' STEP STATUS DETAIL
    for r in "${ROWS[@]}"; do
        IFS='|' read -r step status detail <<< "$r"
        printf '%-26s %-5s %s\n' "$step" "$status" "$detail"
    done
    echo
    echo "total: $(elapsed)s of a ${BUDGET}s budget; results in $RESULTS"
    if [ $FAILED -eq 0 ]; then echo "RESULT: ok"; else echo "RESULT: FAILED"; fi
} > "$SUMMARY"
cat "$SUMMARY"
exit $FAILED
