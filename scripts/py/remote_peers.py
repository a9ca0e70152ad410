"""GPU machine: the peers of bench-remote_device over the same S3-compatible server, in one
process: KvikIO's remote reader (`kvikio.RemoteFile`) reading the same objects whole into
device memory, and cuDF (pylibcudf's `read_parquet` of the same `s3://` URLs, which libcudf
reads through KvikIO's `RemoteHandle`).

    python3 scripts/py/remote_peers.py [--rounds N] [--threads 16,64] [--label L] [--out OUT.jsonl] NAME=URL...

A directory is given as NAME=URL1,URL2,... (its objects). The endpoint and credentials come from the AWS_* environment
(AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION), as for
cuparquet. Each read: one warm-up, then N rounds (default 5), timed to the data in device memory
(a device synchronize after). Prints one line per peer and thread count, and appends JSON lines
to --out. A peer that cannot run prints why and the others go on.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import traceback

from python_bench import timed  # the same timing as read_table's bench (this folder)


def objects(url):
    """The s3:// URLs a NAME=URL names: one, or a comma-separated list."""
    return url.split(",")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", default="16,64")
    ap.add_argument("--label", default="")
    ap.add_argument("--out")
    ap.add_argument("sources", nargs="+", help="NAME=URL")
    a = ap.parse_args()
    out = open(a.out, "a") if a.out else None
    cuda = ctypes.CDLL("libcuda.so.1")

    def emit(rec, text):
        print(f"{a.label}{text}", flush=True)
        if out:
            out.write(json.dumps({"bench": "remote_peers", "label": a.label, **rec}) + "\n")
            out.flush()

    try:
        import rapids_logger

        rapids_logger.load_library()
    except Exception:  # noqa: BLE001 - only a preload
        pass
    try:
        import cupy as cp
        import kvikio
        import kvikio.defaults as kd
    except Exception as e:  # noqa: BLE001 - reported, then the others
        print(f"no KvikIO ({e}): KvikIO not measured")
        kvikio = None
    try:
        import pylibcudf as plc
    except Exception as e:  # noqa: BLE001
        print(f"no pylibcudf ({e}): cuDF not measured")
        plc = None

    def set_threads(n):
        try:
            kd.set({"num_threads": n})
        except Exception:  # noqa: BLE001 - older API
            kd.num_threads_reset(n)

    for spec in a.sources:
        name, url = spec.split("=", 1)
        urls = objects(url)
        for n in [int(x) for x in a.threads.split(",")]:
            if kvikio is None:
                break
            try:
                set_threads(n)
                files = [kvikio.RemoteFile.open_s3_url(u) for u in urls]
                sizes = [f.nbytes() for f in files]
                bufs = [cp.empty(s, dtype=cp.uint8) for s in sizes]

                def kv():
                    futs = [f.pread(b, s, 0) for f, b, s in zip(files, bufs, sizes)]
                    got = sum(fu.get() for fu in futs)
                    cp.cuda.runtime.deviceSynchronize()
                    assert got == sum(sizes), (got, sizes)
                    return got

                best, med = timed(kv, a.rounds)
                total = sum(sizes)
                emit(
                    {"source": name, "what": "kvikio", "threads": n, "bytes": total,
                     "objects": len(urls), "best_ms": best, "median_ms": med},
                    f"{name} kvikio RemoteFile threads={n}: {best:.1f} ms best, {med:.1f} median, "
                    f"{total / best / 1e6:.2f} GB/s ({len(urls)} objects, {total >> 20} MiB whole)",
                )
                del files, bufs
            except Exception:  # noqa: BLE001
                print(f"{name} kvikio threads={n}: ERROR")
                traceback.print_exc()
        if plc is not None:
            for n in [int(x) for x in a.threads.split(",")]:
                try:
                    if kvikio is not None:
                        set_threads(n)

                    def cudf_read():
                        opts = plc.io.parquet.ParquetReaderOptions.builder(
                            plc.io.SourceInfo(urls)
                        ).build()
                        t = plc.io.parquet.read_parquet(opts)
                        cuda.cuCtxSynchronize()
                        return t

                    best, med = timed(cudf_read, a.rounds)
                    rows = cudf_read().tbl.num_rows()
                    emit(
                        {"source": name, "what": "cudf", "threads": n, "rows": rows,
                         "objects": len(urls), "best_ms": best, "median_ms": med},
                        f"{name} cuDF read_parquet(s3://) kvikio threads={n}: {best:.1f} ms best, "
                        f"{med:.1f} median ({rows} rows)",
                    )
                except Exception:  # noqa: BLE001
                    print(f"{name} cuDF threads={n}: ERROR")
                    traceback.print_exc()
    return 0


if __name__ == "__main__":
    sys.exit(main())
