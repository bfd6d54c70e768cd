#!/usr/bin/env python3
"""gpu-mem vs numba-cuda, side by side (part of the hardware bundle, see run.sh).

Runs with numba-cuda the work that `hw-bench all` runs with gpu-mem:
  * to_device / copy_to_host, pageable (numpy) and pinned (cuda.pinned_array), 4 KiB .. 256 MiB;
  * the tiled matmul (Numba's fast_matmul, 16x16 tiles), n = 256 .. 4096: kernel time between two
    timing events, and the first launch including compilation;
  * the stream round trip: a one-thread launch and the stream's synchronize, and the synchronize
    of an empty stream;
and prints gpu-mem's figure, numba-cuda's, and the ratio gpu-mem / numba (below 1: gpu-mem faster).

  numba_compare.py --gpu-mem-json FILE     gpu-mem's figures (hw-bench's JSON output)
"""
import argparse
import json
import sys
import time

# Exit status when nothing was compared (run.sh reports the step as skipped, not ok).
SKIPPED = 3


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def repeat_ms(fn, budget_ms):
    samples = [fn()]
    count = int(min(50, max(3, budget_ms / max(samples[0], 1e-3))))
    while len(samples) < count:
        samples.append(fn())
    return median(samples)


def huge_page_switch(np):
    """NumPy's switch for its huge-page advice (`_set_madvise_hugepage`), or None."""
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return getattr(__import__(module, fromlist=["_set_madvise_hugepage"]),
                           "_set_madvise_hugepage")
        except (ImportError, AttributeError):
            continue
    return None


def numba_transfers(cuda, np, sizes):
    rows = []
    for nbytes in sizes:
        host = np.full(nbytes, 7, dtype=np.uint8)
        back = np.zeros(nbytes, dtype=np.uint8)
        pinned = cuda.pinned_array(nbytes, dtype=np.uint8)
        pinned[:] = 7
        dev = cuda.to_device(host)
        stream = cuda.stream()

        def timed(fn):
            def run():
                t = time.perf_counter()
                fn()
                return (time.perf_counter() - t) * 1e3
            return run

        row = {"bytes": nbytes}
        row["to_device_pageable_ms"] = repeat_ms(timed(lambda: dev.copy_to_device(host)), 200)
        row["copy_to_host_pageable_ms"] = repeat_ms(timed(lambda: dev.copy_to_host(back)), 200)

        def pinned_h2d():
            dev.copy_to_device(pinned, stream=stream)
            stream.synchronize()

        def pinned_d2h():
            dev.copy_to_host(pinned, stream=stream)
            stream.synchronize()

        row["to_device_pinned_ms"] = repeat_ms(timed(pinned_h2d), 200)
        row["copy_to_host_pinned_ms"] = repeat_ms(timed(pinned_d2h), 200)
        if nbytes >= 64 << 20:
            # NumPy advises transparent huge pages for large arrays, which the driver's pageable
            # copies may profit from; gpu-mem's side (ndarray, plain malloc) has no such advice.
            # The same copies from arrays made with the advice off tell how much that is.
            advise = huge_page_switch(np)
            if advise is not None:
                before = advise(False)
                try:
                    plain = np.full(nbytes, 7, dtype=np.uint8)
                    plain_back = np.zeros(nbytes, dtype=np.uint8)
                finally:
                    advise(before)
                row["to_device_pageable_no_thp_ms"] = repeat_ms(
                    timed(lambda: dev.copy_to_device(plain)), 200)
                row["copy_to_host_pageable_no_thp_ms"] = repeat_ms(
                    timed(lambda: dev.copy_to_host(plain_back)), 200)
        rows.append(row)
        print(f"numba: transfers {nbytes} B done", file=sys.stderr)
    return rows


def numba_matmul(cuda, np, float32, sizes):
    TPB = 16

    @cuda.jit
    def fast_matmul(A, B, C):
        sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
        sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
        x, y = cuda.grid(2)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        bpg = cuda.gridDim.x
        tmp = float32(0.)
        for i in range(bpg):
            sA[ty, tx] = 0
            sB[ty, tx] = 0
            if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
                sA[ty, tx] = A[y, tx + i * TPB]
            if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
                sB[ty, tx] = B[ty + i * TPB, x]
            cuda.syncthreads()
            for j in range(TPB):
                tmp += sA[ty, j] * sB[j, tx]
            cuda.syncthreads()
        if y < C.shape[0] and x < C.shape[1]:
            C[y, x] = tmp

    rows = []
    for index, n in enumerate(sizes):
        i, j = np.indices((n, n))
        a = (((i * 7 + j * 3) % 11) - 5.0).astype(np.float32)
        b = (((i * 5 + j * 2) % 13) * 0.5).astype(np.float32)
        da, db = cuda.to_device(a), cuda.to_device(b)
        dc = cuda.device_array((n, n), dtype=np.float32)
        blocks = (n + TPB - 1) // TPB
        stream = cuda.stream()
        t = time.perf_counter()
        fast_matmul[(blocks, blocks), (TPB, TPB), stream](da, db, dc)
        stream.synchronize()
        first = (time.perf_counter() - t) * 1e3

        def kernel():
            start, end = cuda.event(timing=True), cuda.event(timing=True)
            start.record(stream)
            fast_matmul[(blocks, blocks), (TPB, TPB), stream](da, db, dc)
            end.record(stream)
            end.synchronize()
            return cuda.event_elapsed_time(start, end)

        rows.append({"n": n, "first_launch_ms": first, "includes_compile": index == 0,
                     "kernel_ms": repeat_ms(kernel, 500)})
        print(f"numba: matmul n={n} done", file=sys.stderr)
    return rows


def numba_round_trip(cuda, np):
    @cuda.jit
    def touch(counter):
        counter[0] += 1

    counter = cuda.to_device(np.zeros(1, dtype=np.int32))
    stream = cuda.stream()
    launches = [0]

    def launch_sync():
        t = time.perf_counter()
        touch[1, 1, stream](counter)
        stream.synchronize()
        launches[0] += 1
        return (time.perf_counter() - t) * 1e3

    def empty_sync():
        t = time.perf_counter()
        stream.synchronize()
        return (time.perf_counter() - t) * 1e3

    launch_sync()  # compiles
    row = {"launch_sync_ms": repeat_ms(launch_sync, 200), "empty_sync_ms": repeat_ms(empty_sync, 100)}
    if counter.copy_to_host()[0] != launches[0]:
        raise RuntimeError("numba round trip: the counter missed launches")
    print("numba: round trip done", file=sys.stderr)
    return row


def ratio(ours, theirs):
    if ours is None or theirs is None or theirs <= 0:
        return "-"
    return f"{ours / theirs:.2f}"


def fmt(value):
    return "-" if value is None else f"{value:.4f}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu-mem-json", required=True)
    args = parser.parse_args()
    try:
        with open(args.gpu_mem_json) as f:
            ours = json.load(f)
    except (OSError, ValueError) as error:
        print(f"no gpu-mem figures ({error}); numba-cuda alone follows")
        ours = {}
    try:
        import numpy as np
        # NumPy 2.4 removed `row_stack`, which numba-cuda 0.30 still names when it compiles its
        # first kernel (seen with numpy 2.5.2 beside an H200): the alias NumPy had lets it load.
        if not hasattr(np, "row_stack"):
            np.row_stack = np.vstack
        from numba import cuda, float32
    except ImportError as error:
        print(f"skipped: numba-cuda cannot be imported: {error}")
        return SKIPPED
    if not cuda.is_available():
        print("skipped: numba-cuda sees no CUDA device")
        return SKIPPED
    our_transfers = {r["bytes"]: r for r in ours.get("transfers", [])}
    our_matmul = {r["n"]: r for r in ours.get("matmul", [])}
    sizes = sorted(our_transfers) or [4 << 10 << (2 * k) for k in range(8)]
    ns = sorted(our_matmul) or [256, 512, 1024, 2048, 4096]
    failures = []

    def part(name, fn, empty):
        # One part's failure leaves the others' figures standing.
        try:
            return fn()
        except Exception as error:  # noqa: BLE001 - reported, and the exit status says so
            failures.append(f"{name}: {type(error).__name__}: {error}")
            print(f"numba: {name} failed: {type(error).__name__}: {error}", file=sys.stderr)
            return empty

    theirs_t = part("transfers", lambda: numba_transfers(cuda, np, sizes), [])
    theirs_m = part("matmul", lambda: numba_matmul(cuda, np, float32, ns), [])
    theirs_r = part("round trip", lambda: numba_round_trip(cuda, np), {})

    print(f"device: {cuda.get_current_device().name.decode() if hasattr(cuda.get_current_device().name, 'decode') else cuda.get_current_device().name}")
    print("\ntransfers (ms, median; ratio = gpu-mem / numba-cuda)")
    print(f"{'bytes':>11} {'what':<26} {'gpu-mem':>10} {'numba':>10} {'ratio':>6}")
    for row in theirs_t:
        mine = our_transfers.get(row["bytes"], {})
        for key in ("to_device_pageable_ms", "copy_to_host_pageable_ms", "to_device_pinned_ms",
                    "copy_to_host_pinned_ms"):
            print(f"{row['bytes']:>11} {key[:-3]:<26} {fmt(mine.get(key)):>10} "
                  f"{fmt(row[key]):>10} {ratio(mine.get(key), row[key]):>6}")
    no_thp = [r for r in theirs_t if "to_device_pageable_no_thp_ms" in r]
    if no_thp:
        print("\npageable transfers from NumPy arrays made without its huge-page advice (ms)")
        print(f"{'bytes':>11} {'what':<26} {'gpu-mem':>10} {'numba':>10} {'ratio':>6}")
        for row in no_thp:
            mine = our_transfers.get(row["bytes"], {})
            for key in ("to_device_pageable", "copy_to_host_pageable"):
                theirs = row[key + "_no_thp_ms"]
                print(f"{row['bytes']:>11} {key:<26} {fmt(mine.get(key + '_ms')):>10} "
                      f"{fmt(theirs):>10} {ratio(mine.get(key + '_ms'), theirs):>6}")
    print("\ntiled matmul (ms; first launch includes compilation for the first size)")
    print(f"{'n':>6} {'what':<16} {'gpu-mem':>10} {'numba':>10} {'ratio':>6}")
    for row in theirs_m:
        mine = our_matmul.get(row["n"], {})
        for key in ("kernel_ms", "first_launch_ms"):
            print(f"{row['n']:>6} {key[:-3]:<16} {fmt(mine.get(key)):>10} {fmt(row[key]):>10} "
                  f"{ratio(mine.get(key), row[key]):>6}")
    print("\nstream round trip (ms, median)")
    print(f"{'what':<24} {'gpu-mem':>10} {'numba':>10} {'ratio':>6}")
    mine = ours.get("round_trip", {}) or {}
    for key in ("launch_sync_ms", "empty_sync_ms"):
        print(f"{key[:-3]:<24} {fmt(mine.get(key)):>10} {fmt(theirs_r.get(key)):>10} "
              f"{ratio(mine.get(key), theirs_r.get(key)):>6}")
    allocators = ours.get("alloc", [])
    if allocators:
        print("\ngpu-mem allocation strategies (GPU_MEM_CUDA_ALLOCATOR; ms, median)")
        for entry in allocators:
            for r in entry.get("result", []) or []:
                print(f"{entry['allocator']:>6} {r['bytes']:>10} B  alloc+free {r['alloc_free_ms']:.4f}"
                      f"  alloc+use+sync+free {r['alloc_use_sync_free_ms']:.4f}")
            if "error" in entry:
                print(f"{entry['allocator']:>6} error: {entry['error']}")
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
