#!/usr/bin/env python3
"""KvikIO read benchmark (reference numbers for cuparquet's own I/O path).

Measures, with KvikIO's Python API (`kvikio.CuFile`):

a) "warm-large": the whole --file read into one preallocated cupy uint8 device
   buffer of the file's size with `CuFile.pread(buf).get()`, for num_threads
   1, 4 and 16, once with compat mode ON (KvikIO's own POSIX + bounce-buffer
   path) and once with compat mode AUTO (cuFile/GDS if KvikIO can use it,
   otherwise a silent fallback to POSIX - see `backend_bytes` in the output).
   One untimed warm-up read (which also warms the page cache), then --rounds
   timed reads; best and median are reported.
b) "small-random": --small-reads reads (default 20000) at random page-aligned
   offsets (fixed seed) of 4 KiB, 16 KiB and 64 KiB from --small-file (or
   --file), each into its own slice of one preallocated device buffer; all are
   submitted as `pread` futures and then `.get()`-ed; threads 1 and 16,
   compat ON. The timed region includes KvikIO's per-call Python overhead.

The clock (time.perf_counter) stops after cupy deviceSynchronize(). Each result
is printed and appended as one JSON object per line to --out. A failing
measurement prints an "ERROR ..." line and the run continues.

Usage: python3 kvikio_bench.py --file PATH --rounds N --out OUT.jsonl
                              [--small-file PATH] [--small-reads 20000]
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

# libkvikio.load_library() preloads librapids_logger.so only when cuda.pathfinder
# is importable; without it `import kvikio` fails with "libkvikio.so: cannot open
# shared object file". Preloading it ourselves is harmless either way.
try:
    import rapids_logger

    rapids_logger.load_library()
except Exception:
    pass

import numpy as np  # noqa: E402
import kvikio  # noqa: E402
import kvikio.defaults as kd  # noqa: E402  (not imported by kvikio/__init__.py)

try:
    import cupy as cp
except Exception as e:  # the run still prints meta info and errors
    cp = None
    print(f"WARNING: cupy import failed: {e!r}")

PAGE = 4096
CM = getattr(kvikio, "CompatMode", None)  # OFF / ON / AUTO since 24.12


def set_threads(n):
    if hasattr(kd, "set"):
        kd.set({"num_threads": n})  # 26.x: alias of "thread_pool_nthreads"
    else:
        kd.num_threads_reset(n)  # pre-25.02 API


def get_threads():
    return kd.get("num_threads") if hasattr(kd, "get") else kd.num_threads()


def set_compat(name):
    """name: "ON" or "AUTO". Must be called before opening the CuFile: the
    handle picks its mode at construction time."""
    if CM is not None and hasattr(kd, "set"):
        kd.set({"compat_mode": getattr(CM, name)})
    elif CM is not None and hasattr(kd, "compat_mode_reset"):
        kd.compat_mode_reset(getattr(CM, name))
    else:  # very old API: bool, AUTO ~ False
        kd.compat_mode_reset(name == "ON")


def get_compat():
    v = kd.get("compat_mode") if hasattr(kd, "get") else kd.compat_mode()
    try:
        return CM(v).name if CM is not None else str(v)
    except Exception:
        return str(v)


def try_call(fn, *a):
    try:
        return fn(*a)
    except Exception as e:
        return f"n/a ({type(e).__name__}: {e})"


def sync():
    if cp is not None:
        cp.cuda.runtime.deviceSynchronize()


def alloc(nbytes):
    if cp is None:
        raise RuntimeError("cupy not available")
    return cp.empty(nbytes, dtype=cp.uint8)


def backend_bytes(fn):
    """Run fn() under kvikio.SummaryMonitor (26.x) and return bytes per backend
    (tells whether cuFile or POSIX carried the I/O). Used on warm-up only."""
    mon_cls = getattr(kvikio, "SummaryMonitor", None)
    if mon_cls is None:
        fn()
        return None
    with mon_cls() as mon:
        fn()
        s = mon.get()
    # keys in 26.10: POSIX, GDS, MMAP, REMOTE_HTTP, REMOTE_HDFS; keep non-zero
    return {k: v["bytes_transferred"] for k, v in s.by_backend.items()
            if v.get("bytes_transferred") or v.get("num_ops")}


def time_rounds(fn, rounds):
    times = []
    for _ in range(rounds):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def emit(out, rec, human):
    print(human, flush=True)
    with open(out, "a") as fh:
        fh.write(json.dumps(rec) + "\n")


def warm_large(args, mode, threads):
    set_compat(mode)
    set_threads(threads)
    size = os.path.getsize(args.file)
    buf = alloc(size)

    def once():
        got = f.pread(buf).get()
        if got != size:
            raise RuntimeError(f"short read {got} != {size}")

    with kvikio.CuFile(args.file, "r") as f:
        backends = backend_bytes(once)  # warm-up, untimed
        best, med = time_rounds(once, args.rounds)
        direct = try_call(getattr(f, "is_direct_io_supported", lambda: "n/a"))
    rec = dict(tool="kvikio", workload="warm-large", threads=threads,
               compat_mode=mode, compat_mode_reported=get_compat(),
               bytes=size, seconds=best, gbps=size / best / 1e9,
               median_seconds=med, median_gbps=size / med / 1e9,
               rounds=args.rounds, backend_bytes=backends,
               direct_io_supported=direct, kvikio_version=kvikio.__version__)
    emit(args.out, rec,
         f"warm-large compat={mode}({rec['compat_mode_reported']}) threads={threads:2d} "
         f"{size / 1e6:.1f} MB best {best * 1e3:.2f} ms = {rec['gbps']:.2f} GB/s, "
         f"median {rec['median_gbps']:.2f} GB/s, backends={backends}")
    del buf


def small_random(args, read_size, threads):
    set_compat("ON")
    set_threads(threads)
    path = args.small_file or args.file
    fsize = os.path.getsize(path)
    if fsize < read_size:
        raise RuntimeError(f"{path} ({fsize} B) smaller than read size {read_size}")
    n = args.small_reads
    npages = (fsize - read_size) // PAGE + 1
    rng = np.random.default_rng(12345)
    offsets = [int(p) * PAGE for p in rng.integers(0, npages, size=n)]
    buf = alloc(n * read_size)
    slices = [buf[i * read_size:(i + 1) * read_size] for i in range(n)]  # untimed
    expect = n * read_size

    def once():
        futs = [f.pread(s, read_size, off) for s, off in zip(slices, offsets)]
        got = sum(fu.get() for fu in futs)
        if got != expect:
            raise RuntimeError(f"short read {got} != {expect}")

    with kvikio.CuFile(path, "r") as f:
        backends = backend_bytes(once)  # warm-up, untimed
        best, med = time_rounds(once, args.rounds)
    rec = dict(tool="kvikio", workload="small-random", threads=threads,
               compat_mode="ON", compat_mode_reported=get_compat(),
               bytes=expect, seconds=best, gbps=expect / best / 1e9,
               reads_per_s=n / best, read_size=read_size, reads=n,
               median_seconds=med, median_reads_per_s=n / med,
               rounds=args.rounds, backend_bytes=backends,
               file_bytes=fsize, kvikio_version=kvikio.__version__)
    emit(args.out, rec,
         f"small-random {read_size // 1024:3d} KiB threads={threads:2d} {n} reads: "
         f"best {best * 1e3:.1f} ms = {rec['reads_per_s']:,.0f} reads/s, "
         f"{rec['gbps']:.3f} GB/s (median {rec['median_reads_per_s']:,.0f} reads/s)")
    del slices, buf


def guarded(label, fn, *a):
    try:
        fn(*a)
    except Exception as e:
        print(f"ERROR {label}: {type(e).__name__}: {e}", flush=True)
        traceback.print_exc(file=sys.stdout)
    finally:
        try:
            if cp is not None:
                cp.get_default_memory_pool().free_all_blocks()
        except Exception:
            pass


def print_meta():
    print(f"kvikio {kvikio.__version__} (git {getattr(kvikio, '__git_commit__', '?')})")
    print(f"env KVIKIO_COMPAT_MODE={os.environ.get('KVIKIO_COMPAT_MODE')!r} "
          f"KVIKIO_NTHREADS={os.environ.get('KVIKIO_NTHREADS')!r}")
    print(f"defaults: compat_mode={try_call(get_compat)} num_threads={try_call(get_threads)}"
          f" task_size={try_call(kd.get, 'task_size')}"
          f" gds_threshold={try_call(kd.get, 'gds_threshold')}"
          f" bounce_buffer_size={try_call(kd.get, 'bounce_buffer_size')}")
    if hasattr(kd, "is_compat_mode_preferred"):
        print(f"is_compat_mode_preferred (AUTO would use POSIX): "
              f"{try_call(kd.is_compat_mode_preferred)}")
    try:
        import kvikio.cufile_driver as cfd

        print(f"cuFile: libcufile_version={try_call(cfd.libcufile_version)} "
              f"is_gds_available={try_call(cfd.get, 'is_gds_available')} "
              f"allow_compat_mode(cufile.json)={try_call(cfd.get, 'allow_compat_mode')}")
    except Exception as e:
        print(f"cuFile driver info n/a: {e!r}")
    if cp is not None:
        try:
            props = cp.cuda.runtime.getDeviceProperties(0)
            print(f"GPU0: {props['name'].decode()}  cupy {cp.__version__}  "
                  f"CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}")
        except Exception as e:
            print(f"GPU info n/a: {e!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", required=True)
    ap.add_argument("--small-file")
    ap.add_argument("--small-reads", type=int, default=20000)
    args = ap.parse_args()
    args.rounds = max(1, args.rounds)

    guarded("meta", print_meta)
    for mode in ("ON", "AUTO"):
        for t in (1, 4, 16):
            guarded(f"warm-large compat={mode} threads={t}", warm_large, args, mode, t)
    for rs in (4096, 16384, 65536):
        for t in (1, 16):
            guarded(f"small-random {rs} B threads={t}", small_random, args, rs, t)


if __name__ == "__main__":
    main()
