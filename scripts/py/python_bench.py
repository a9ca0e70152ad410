"""GPU machine: `cuparquet.read_table(path, device="cuda:0")` from Python against pylibcudf's
`read_parquet` on the same files, in one process, and against the Rust `load()` of the same
files measured by bench-stream_device in the same call (its JSON lines, --rust).

    python3 scripts/py/python_bench.py [--rounds N] [--rust STREAM.jsonl] [--out OUT.jsonl] NAME=FILE...

Each read: one warm-up, then N rounds (default 5), each timed from the call to the data in
device memory (cuparquet returns once its batches are complete; pylibcudf's read is followed
by cuCtxSynchronize). Prints one line per file: best and median ms of each, the Python call
over the Rust load (the binding's overhead) and cuDF over cuparquet (the speed-up), and appends
JSON lines to --out. Needs cuparquet (the wheel), and pylibcudf for the cuDF column
(../shared/device/README.md); without pylibcudf only cuparquet is measured.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
import time


def timed(fn, rounds):
    fn()  # warm-up
    out = []
    for _ in range(rounds):
        t = time.perf_counter()
        keep = fn()
        out.append((time.perf_counter() - t) * 1e3)
        del keep
    return min(out), statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rust", help="bench-stream_device's JSON lines (CUPARQUET_BENCH_OUT)")
    ap.add_argument("--out")
    ap.add_argument("files", nargs="+", help="NAME=PATH")
    a = ap.parse_args()

    import cuparquet

    rust = {}
    if a.rust:
        with open(a.rust) as f:
            for line in f:
                r = json.loads(line)
                if r.get("bench") == "stream_device" and r.get("batch_rows") is None:
                    rust[r["file"]] = (r["load_best_ms"], r["load_median_ms"])
    try:
        import pylibcudf as plc

        cuda = ctypes.CDLL("libcuda.so.1")
    except Exception as e:  # noqa: BLE001 - reported, then measured without
        print(f"no pylibcudf ({e}): cuDF not measured")
        plc = None

    def cudf_read(path):
        opts = plc.io.parquet.ParquetReaderOptions.builder(plc.io.SourceInfo([path])).build()
        t = plc.io.parquet.read_parquet(opts)
        cuda.cuCtxSynchronize()
        return t

    out = open(a.out, "a") if a.out else None
    print(f"{'file':<20} {'cuparquet (Python)':>24} {'Rust load()':>20} {'cuDF read_parquet':>22}  python/rust  cuDF/cuparquet")
    for spec in a.files:
        name, path = spec.split("=", 1)
        ours = timed(lambda: cuparquet.read_table(path, device="cuda:0"), a.rounds)
        t = cuparquet.read_table(path, device="cuda:0")
        rows, batches = t.num_rows, len(t.batches)
        del t
        theirs = timed(lambda: cudf_read(path), a.rounds) if plc else None
        r = rust.get(name)
        line = f"{name:<20} {ours[0]:>9.1f} ms ({ours[1]:>7.1f} med)"
        line += f" {r[0]:>9.1f} ms ({r[1]:>6.1f})" if r else f" {'-':>20}"
        line += f" {theirs[0]:>9.1f} ms ({theirs[1]:>7.1f})" if theirs else f" {'-':>22}"
        line += f"  {ours[0] / r[0]:>10.3f}x" if r else f"  {'-':>11}"
        line += f"  {theirs[0] / ours[0]:>13.2f}x" if theirs else ""
        print(line + f"   [{rows} rows, {batches} batches]")
        if out:
            out.write(
                json.dumps(
                    {
                        "bench": "python_read_table",
                        "file": name,
                        "path": path,
                        "rows": rows,
                        "batches": batches,
                        "python_best_ms": ours[0],
                        "python_median_ms": ours[1],
                        "rust_load_best_ms": r[0] if r else None,
                        "rust_load_median_ms": r[1] if r else None,
                        "cudf_best_ms": theirs[0] if theirs else None,
                        "cudf_median_ms": theirs[1] if theirs else None,
                        "rounds": a.rounds,
                    }
                )
                + "\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
