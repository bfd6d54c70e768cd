#!/usr/bin/env bash
# Installs the ROCm 5.2.3 parts Debian 12 ships that gpu-mem-roc's GPU-less tests use:
#   * libhsa-runtime64-1           the HSA runtime (ROCr) the loader opens; hsa_init fails without /dev/kfd
#   * libhsa-runtime-dev           hsa.h / hsa_ext_amd.h, the pinned headers of `cargo xtask bindgen hsa`
#   * libamdhip64-5 / -dev         libamdhip64.so.5 (hiprtc lives in it) and the pinned HIP headers
#   * libhiprtc-builtins5          the headers hiprtc compiles against at run time
#   * rocm-device-libs             the device bitcode hiprtc links (compiles fail without it)
#   * llvm-15                      llvm-objdump / llvm-readelf with the AMDGPU target (gfx90a, gfx1100)
#
# With `--bindgen` it also installs libclang-15-dev (and names libamd-comgr-dev, whose amd_comgr.h
# is pinned too; libamdhip64-dev already pulls it in), which only `cargo xtask bindgen hsa|hip --check`
# needs (plain builds and tests never run bindgen).
#
# Idempotent: packages already installed are not touched and apt-get update is skipped. Runs as root,
# non-interactively (CI=true, no stdin). Prints the installed versions and writes them, with the tool
# paths the tests use, to target/rocm-parts.env (key=value lines).
set -euo pipefail

want_bindgen=0
for arg in "$@"; do
    case "$arg" in
        --bindgen) want_bindgen=1 ;;
        *) echo "usage: $0 [--bindgen]" >&2; exit 2 ;;
    esac
done

packages=(
    libhsa-runtime64-1
    libhsa-runtime-dev
    libamdhip64-5
    libamdhip64-dev
    libhiprtc-builtins5
    rocm-device-libs
    llvm-15
)
if [ "$want_bindgen" = 1 ]; then
    packages+=(libclang-15-dev libamd-comgr-dev)
fi

is_installed() {
    [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

missing=()
for p in "${packages[@]}"; do
    is_installed "$p" || missing+=("$p")
done

if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "install-rocm-parts: need root to install: ${missing[*]}" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    echo "install-rocm-parts: installing ${missing[*]}"
    # Another apt run (a sibling CI script) may hold the dpkg lock: wait for it instead of failing.
    apt_opts=(-o DPkg::Lock::Timeout=900)
    apt-get "${apt_opts[@]}" update -qq </dev/null
    apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fi

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
env_dir="${CARGO_TARGET_DIR:-$repo_root/target}"
mkdir -p "$env_dir"
env_file="$env_dir/rocm-parts.env"
{
    for p in "${packages[@]}"; do
        echo "version.$p=$(dpkg-query -W -f='${Version}' "$p")"
    done
    echo "hsa_library=$(ls /usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1 2>/dev/null || true)"
    echo "hip_library=$(ls /usr/lib/x86_64-linux-gnu/libamdhip64.so.5 2>/dev/null || true)"
    echo "llvm_objdump=$(command -v llvm-objdump-15 || ls /usr/lib/llvm-15/bin/llvm-objdump 2>/dev/null || true)"
    echo "llvm_readelf=$(command -v llvm-readelf-15 || ls /usr/lib/llvm-15/bin/llvm-readelf 2>/dev/null || true)"
} >"$env_file"
echo "install-rocm-parts: versions and paths (also in $env_file):"
sed 's/^/  /' "$env_file"
