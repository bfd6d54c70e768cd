#!/usr/bin/env bash
# Installs the parts of CUDA that gpu-mem's CUDA tests and `cargo xtask bindgen cuda|nccl` use on
# a machine without a GPU or driver: the pinned NVIDIA wheels from PyPI (cuda.h, nvrtc.h,
# libnvrtc, ptxas from the nvcc wheel, nccl.h and libnccl.so.2 from the NCCL wheel) and libclang
# for bindgen.
#
# Idempotent: a stamp file records what was installed; a second run only checks it and exits.
#
# Where things go (printed at the end, and written to "$PREFIX/paths.env"):
#   PREFIX  = ${GPU_MEM_CUDA_WHEELS:-$HOME/.cache/gpu-mem/cuda-wheels}
#   headers = $PREFIX/nvidia/cu13/include            (GPU_MEM_CUDA_INCLUDE: bindgen, NVRTC's -I)
#   nvrtc   = $PREFIX/nvidia/cu13/lib/libnvrtc.so.13 (GPU_MEM_NVRTC_LIBRARY for the tests)
#   ptxas   = $PREFIX/nvidia/cu13/bin/ptxas          (GPU_MEM_PTXAS for the tests)
#   nccl    = $PREFIX/nvidia/nccl/lib/libnccl.so.2   (GPU_MEM_NCCL_LIBRARY for the tests)
# The tests look in the default PREFIX themselves, so exporting these is only needed when
# GPU_MEM_CUDA_WHEELS is changed.
set -euo pipefail

# Pinned versions: cuda.h from this runtime wheel has CUDA_VERSION 13050. CCCL (nv/target,
# cuda/std) is what <cooperative_groups.h> includes; its wheel is versioned on its own.
CUDA_WHEEL_VERSION=13.5.37
CCCL_WHEEL_VERSION=13.3.5.0.6
# NCCL for CUDA 13: nccl.h for `cargo xtask bindgen nccl`, libnccl.so.2 for the loader and symbol
# tests (it loads without a GPU; creating a communicator then fails with NCCL's own error).
NCCL_WHEEL_VERSION=2.32.3
WHEELS=(
    "nvidia-cuda-runtime==${CUDA_WHEEL_VERSION}"
    "nvidia-cuda-nvrtc==${CUDA_WHEEL_VERSION}"
    "nvidia-cuda-nvcc==${CUDA_WHEEL_VERSION}"
    "nvidia-cuda-cccl==${CCCL_WHEEL_VERSION}"
    "nvidia-nccl-cu13==${NCCL_WHEEL_VERSION}"
)

PREFIX="${GPU_MEM_CUDA_WHEELS:-${HOME:-/root}/.cache/gpu-mem/cuda-wheels}"
STAMP="$PREFIX/.gpu-mem-stamp"
WANTED_STAMP="${WHEELS[*]}"
CU="$PREFIX/nvidia/cu13"

log() { echo "install-cuda-parts: $*"; }

install_libclang() {
    # bindgen (xtask only) loads libclang at run time.
    if ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 \
        || ls /usr/lib/*-linux-gnu/libclang-[0-9]*.so* >/dev/null 2>&1; then
        return 0
    fi
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        log "libclang not found and cannot apt-get install it; 'cargo xtask bindgen cuda' will not work"
        return 0
    fi
    log "installing libclang-dev (for cargo xtask bindgen)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends libclang-dev >/dev/null
}

pip_cmd() {
    if python3 -m pip --version >/dev/null 2>&1; then
        echo "python3 -m pip"
        return 0
    fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get -o DPkg::Lock::Timeout=600 update -qq
        apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends python3-pip >/dev/null
        echo "python3 -m pip"
        return 0
    fi
    log "no pip available: cannot install the NVIDIA wheels" >&2
    return 1
}

install_wheels() {
    if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANTED_STAMP" ] \
        && [ -f "$CU/include/cuda.h" ] && [ -f "$CU/include/nvrtc.h" ] \
        && [ -e "$CU/lib/libnvrtc.so.13" ] && [ -f "$PREFIX/nvidia/nccl/include/nccl.h" ]; then
        log "wheels already installed in $PREFIX"
        return 0
    fi
    local pip
    pip="$(pip_cmd)"
    log "installing ${WHEELS[*]} into $PREFIX"
    # Only a folder this script made (its stamp is there) or an empty one is cleared: the
    # variable may name a folder of the user's own, such as a site-packages.
    if [ -d "$PREFIX" ] && [ ! -f "$STAMP" ] && [ -n "$(ls -A "$PREFIX")" ]; then
        log "$PREFIX is not empty and was not made by this script: refusing to clear it (point GPU_MEM_CUDA_WHEELS at an empty or new folder)" >&2
        return 1
    fi
    rm -rf "$PREFIX"
    mkdir -p "$PREFIX"
    # --target installs outside any environment, so PEP 668 (externally managed) does not apply.
    $pip install --quiet --no-input --no-deps --disable-pip-version-check \
        --target "$PREFIX" "${WHEELS[@]}"
    echo "$WANTED_STAMP" >"$STAMP"
}

write_paths() {
    local ptxas="$CU/bin/ptxas"
    {
        echo "GPU_MEM_CUDA_INCLUDE=$CU/include"
        echo "GPU_MEM_NVRTC_LIBRARY=$CU/lib/libnvrtc.so.13"
        if [ -x "$ptxas" ]; then echo "GPU_MEM_PTXAS=$ptxas"; fi
        echo "GPU_MEM_NCCL_INCLUDE=$PREFIX/nvidia/nccl/include"
        echo "GPU_MEM_NCCL_LIBRARY=$PREFIX/nvidia/nccl/lib/libnccl.so.2"
    } >"$PREFIX/paths.env"
    log "paths ($PREFIX/paths.env):"
    sed 's/^/  /' "$PREFIX/paths.env"
}

install_libclang
install_wheels
write_paths
