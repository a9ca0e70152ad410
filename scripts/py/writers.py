#!/usr/bin/env python3
"""Parquet files the way users' tools write them: pyarrow, DuckDB and Polars, each with its own
defaults (pyarrow and DuckDB: SNAPPY; Polars: ZSTD) and a few of their usual options (pyarrow's
DELTA / BYTE_STREAM_SPLIT encodings, data page v2, small row groups; DuckDB's ZSTD). Flat and
nested columns, nulls, low- and high-cardinality strings, strings longer than the GPU walk's
4 KiB window, decimals, dates and timestamps.

Used by the hardening work (issue 18): the mutation harness's full run (tests/mutants with
CUPARQUET_MUTANTS_FILES) and compute-sanitizer racecheck on the GPU (`bash scripts/pack.sh
writers`, then `bash scripts/device.sh sanitize race` or `hardening` there).

    python3 scripts/py/writers.py OUT_DIR [--rows N]

Installs pyarrow, duckdb and polars with pip when they are missing. Deterministic (seeded).
"""
import argparse
import importlib
import os
import subprocess
import sys


def need(*mods):
    missing = []
    for m in mods:
        try:
            importlib.import_module(m)
        except ImportError:
            missing.append(m)
    if missing:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *missing])


def table(pa, n, seed):
    import random

    r = random.Random(seed)
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    ids = list(range(n))
    vals = [r.randrange(-(1 << 40), 1 << 40) for _ in ids]
    small = [r.randrange(0, 1000) if r.random() > 0.1 else None for _ in ids]
    xs = [r.random() * 1e6 for _ in ids]
    flags = [r.random() > 0.5 if r.random() > 0.05 else None for _ in ids]
    cats = [words[r.randrange(len(words))] if r.random() > 0.1 else None for _ in ids]
    # unique strings of 5..60 characters, and every 997th one longer than a 4 KiB window
    uniq = []
    for i in ids:
        s = "%08x-" % r.getrandbits(32) + "x" * r.randrange(0, 52)
        if i % 997 == 0:
            s = s * 120
        uniq.append(s if r.random() > 0.05 else None)
    lists = []
    for _ in ids:
        k = r.random()
        if k < 0.1:
            lists.append(None)
        elif k < 0.2:
            lists.append([])
        else:
            lists.append([r.randrange(-1000, 1000) for _ in range(r.randrange(1, 6))])
    str_lists = [
        None if r.random() < 0.1 else [words[r.randrange(8)] for _ in range(r.randrange(0, 4))]
        for _ in ids
    ]
    structs = [
        None if r.random() < 0.1 else {"a": r.random(), "b": r.randrange(0, 1 << 20)} for _ in ids
    ]
    import datetime
    import decimal

    base = datetime.date(2020, 1, 1)
    dates = [base + datetime.timedelta(days=r.randrange(0, 2000)) for _ in ids]
    ts = [datetime.datetime(2021, 1, 1) + datetime.timedelta(seconds=r.randrange(0, 10**8)) for _ in ids]
    decs = [decimal.Decimal(r.randrange(-10**9, 10**9)).scaleb(-2) for _ in ids]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array(vals, pa.int64()),
            "small": pa.array(small, pa.int32()),
            "x": pa.array(xs, pa.float64()),
            "flag": pa.array(flags, pa.bool_()),
            "cat": pa.array(cats, pa.string()),
            "s": pa.array(uniq, pa.string()),
            "d": pa.array(dates, pa.date32()),
            "ts": pa.array(ts, pa.timestamp("us")),
            "dec": pa.array(decs, pa.decimal128(12, 2)),
            "l": pa.array(lists, pa.list_(pa.int64())),
            "ls": pa.array(str_lists, pa.list_(pa.string())),
            "st": pa.array(structs, pa.struct([("a", pa.float64()), ("b", pa.int64())])),
        }
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--rows", type=int, default=20_000)
    a = ap.parse_args()
    need("pyarrow", "duckdb", "polars")
    import duckdb
    import polars as pl
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(a.out, exist_ok=True)
    t = table(pa, a.rows, 18)
    flat = t.select(["id", "v", "small", "x", "flag", "cat", "s", "d", "ts", "dec"])
    out = lambda name: os.path.join(a.out, name)

    # pyarrow: defaults, then its usual options
    pq.write_table(t, out("pyarrow-default.parquet"))
    pq.write_table(t, out("pyarrow-v2-zstd.parquet"), data_page_version="2.0", compression="zstd")
    pq.write_table(t, out("pyarrow-small-groups.parquet"), row_group_size=max(a.rows // 40, 1))
    pq.write_table(
        t, out("pyarrow-gzip-plain.parquet"), compression="gzip", use_dictionary=False
    )
    pq.write_table(
        flat.select(["id", "v", "small", "x", "s", "cat"]),
        out("pyarrow-delta-bss.parquet"),
        use_dictionary=False,
        column_encoding={
            "id": "DELTA_BINARY_PACKED",
            "v": "DELTA_BINARY_PACKED",
            "small": "DELTA_BINARY_PACKED",
            "x": "BYTE_STREAM_SPLIT",
            "s": "DELTA_BYTE_ARRAY",
            "cat": "DELTA_LENGTH_BYTE_ARRAY",
        },
    )
    pq.write_table(
        flat, out("pyarrow-lz4-page-index.parquet"), compression="lz4", write_page_index=True,
        data_page_size=8 << 10,
    )
    maps = pa.table(
        {
            "id": t["id"],
            "m": pa.array(
                [None if i % 11 == 0 else [("k%d" % (i % 7), i), ("z", -i)] for i in range(a.rows)],
                pa.map_(pa.string(), pa.int64()),
            ),
        }
    )
    pq.write_table(maps, out("pyarrow-map.parquet"))

    # DuckDB: its own writer, from the same Arrow table
    con = duckdb.connect()
    con.register("t", t)
    con.execute(f"COPY (SELECT * FROM t) TO '{out('duckdb-default.parquet')}' (FORMAT parquet)")
    con.execute(
        f"COPY (SELECT * FROM t) TO '{out('duckdb-zstd.parquet')}' (FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {max(a.rows // 4, 1)})"
    )
    con.register("m", maps)
    con.execute(f"COPY (SELECT * FROM m) TO '{out('duckdb-map.parquet')}' (FORMAT parquet)")

    # Polars: ZSTD by default, its own statistics and page layout
    df = pl.from_arrow(t)
    df.write_parquet(out("polars-default.parquet"))
    df.write_parquet(out("polars-snappy-groups.parquet"), compression="snappy", row_group_size=max(a.rows // 8, 1))
    pl.from_arrow(flat).write_parquet(out("polars-lz4-flat.parquet"), compression="lz4")
    for f in sorted(os.listdir(a.out)):
        print(f, os.path.getsize(os.path.join(a.out, f)))


if __name__ == "__main__":
    main()
