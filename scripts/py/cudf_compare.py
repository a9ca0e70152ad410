"""GPU machine: cuDF's `read_parquet` on the files cuparquet's benchmarks measure, in the same run.

    python3 scripts/py/cudf_compare.py write DIR        # the pyarrow-written bench files
    python3 scripts/py/cudf_compare.py write-delta DIR  # the DELTA / BYTE_STREAM_SPLIT file
    python3 scripts/py/cudf_compare.py write-nested DIR # the nested file (lists, a struct)
    python3 scripts/py/cudf_compare.py write-categorical DIR    # the categorical-string file
    python3 scripts/py/cudf_compare.py write-codecs SRC DIR [CODEC...]  # SRC's rows by pyarrow
    python3 scripts/py/cudf_compare.py time FILE...     # cuDF read_parquet: best, median ms

`write` makes `small-row-groups-pyarrow.parquet` in DIR: 8,000,000 rows in 800 row groups of
10,000 rows (int64 key, random int64, double, a string from 20,000 distinct values), written by
pyarrow with its defaults otherwise (SNAPPY, dictionaries, 1 MiB pages). `write-delta` makes
`delta-split-pyarrow.parquet`: the same 8,000,000 rows in pyarrow's default row groups, no
dictionaries, k and v DELTA_BINARY_PACKED, x BYTE_STREAM_SPLIT, s DELTA_BYTE_ARRAY, SNAPPY (the
encodings Spark and DuckDB pick for such columns). `write-nested` makes `nested-pyarrow.parquet`:
3,000,000 rows with pyarrow's defaults (SNAPPY, dictionaries, row groups of 1Mi rows): `id`
int64; `l` list<int64> of 0-7 values, 5% null lists, 5% null values; `st`
struct<x: double, n: int64>, 5% null structs; `ls` list<string> of 0-3 strings from 10,000
distinct words, 5% null lists. `write-categorical` makes `categorical-pyarrow.parquet`: the
8,000,000 rows of `write` with `s` as a dictionary array (pandas' categorical; pyarrow stores
its Arrow type, so arrow-rs reads `Dictionary(Int32, Utf8)`) and a second one, `c`, of 12
values with 5% nulls, in pyarrow's default row groups. `write-codecs` reads SRC (the lineitem
file of bench-decode_device) and writes its rows with pyarrow's defaults (dictionaries, 1 MiB
pages, row groups of 1Mi rows) as `lineitem-pyarrow-zstd.parquet` (ZSTD, pyarrow's level) and
`lineitem-pyarrow-lz4.parquet` (pyarrow's `lz4`, stored as LZ4_RAW), or the CODECs named
(`snappy`: `lineitem-pyarrow-snappy.parquet`). `time` reads each file
with pylibcudf (one warm-up read, then ROUNDS reads, default 5), each timed from the call to the
device synchronised, and prints one line per file. Needs pylibcudf (../shared/device/wheels.sh
cudf) and pyarrow on PYTHONPATH.
"""

import os
import statistics
import sys
import time


def write(out_dir):
    import pyarrow.parquet as pq

    path = os.path.join(out_dir, "small-row-groups-pyarrow.parquet")
    pq.write_table(table_8m(), path, row_group_size=10_000)
    print(f"wrote {path}: {pq.ParquetFile(path).metadata.num_row_groups} row groups")


def table_8m():
    import pyarrow as pa
    import pyarrow.compute as pc

    n = 8_000_000
    words = pa.array([f"value-{i:06}-xyz" for i in range(20_000)])
    idx = pc.cast(pc.floor(pc.multiply(pc.random(n), 20_000)), pa.int32(), safe=False)
    return pa.table(
        {
            "k": pa.array(range(n), pa.int64()),
            "v": pc.cast(pc.multiply(pc.random(n), 2.0**62), pa.int64(), safe=False),
            "x": pc.multiply(pc.random(n), 1e6),
            "s": pc.take(words, idx),
        }
    )


def write_delta(out_dir):
    import pyarrow.parquet as pq

    path = os.path.join(out_dir, "delta-split-pyarrow.parquet")
    encodings = {
        "k": "DELTA_BINARY_PACKED",
        "v": "DELTA_BINARY_PACKED",
        "x": "BYTE_STREAM_SPLIT",
        "s": "DELTA_BYTE_ARRAY",
    }
    pq.write_table(table_8m(), path, use_dictionary=False, column_encoding=encodings)
    md = pq.ParquetFile(path).metadata
    print(f"wrote {path}: {md.num_row_groups} row groups, {md.row_group(0).column(3).encodings}")


def write_nested(out_dir):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    n = 3_000_000

    def rand_ints(k, hi):
        return pc.cast(pc.floor(pc.multiply(pc.random(k), hi)), pa.int64(), safe=False)

    def mask(k, share):
        return pc.less(pc.random(k), share)

    def lists(values_of, max_len):
        lens = pc.cast(rand_ints(n, max_len + 1), pa.int32())
        ends = pc.cumulative_sum(lens)
        offsets = pa.concat_arrays([pa.array([0], pa.int32()), ends])
        total = ends[-1].as_py()
        return pa.ListArray.from_arrays(offsets, values_of(total), mask=mask(n, 0.05))

    def ints(k):
        v = pc.subtract(rand_ints(k, 2.0**41), 2**40)
        return pc.if_else(mask(k, 0.05), pa.scalar(None, pa.int64()), v)

    words = pa.array([f"word-{i:05}" for i in range(10_000)])

    def strings(k):
        return pc.take(words, rand_ints(k, 10_000))

    st = pa.StructArray.from_arrays(
        [pc.multiply(pc.random(n), 1e6), rand_ints(n, 2.0**50)],
        names=["x", "n"],
        mask=mask(n, 0.05),
    )
    table = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "l": lists(ints, 7),
            "st": st,
            "ls": lists(strings, 3),
        }
    )
    path = os.path.join(out_dir, "nested-pyarrow.parquet")
    pq.write_table(table, path)
    md = pq.ParquetFile(path).metadata
    print(f"wrote {path}: {md.num_row_groups} row groups, {md.num_rows} rows")


def write_categorical(out_dir):
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    t = table_8m()
    n = t.num_rows
    colors = pa.array([f"colour-{i}" for i in range(12)])
    idx = pc.cast(pc.floor(pc.multiply(pc.random(n), 12)), pa.int32(), safe=False)
    c = pc.if_else(pc.less(pc.random(n), 0.05), pa.scalar(None, pa.string()), pc.take(colors, idx))
    t = t.set_column(3, "s", pc.dictionary_encode(t.column("s")))
    t = t.append_column("c", pc.dictionary_encode(c))
    path = os.path.join(out_dir, "categorical-pyarrow.parquet")
    pq.write_table(t, path)
    md = pq.ParquetFile(path).metadata
    print(f"wrote {path}: {md.num_row_groups} row groups, {md.num_rows} rows, {t.schema}")


def write_codecs(src, out_dir, names=("zstd", "lz4")):
    import pyarrow.parquet as pq

    table = pq.read_table(src)
    for name in names:
        codec = name
        path = os.path.join(out_dir, f"lineitem-pyarrow-{name}.parquet")
        pq.write_table(table, path, compression=codec)
        md = pq.ParquetFile(path).metadata
        stored = md.row_group(0).column(0).compression
        print(f"wrote {path}: {md.num_row_groups} row groups, {stored}")


def time_files(paths):
    import ctypes

    import pylibcudf as plc

    rounds = int(os.environ.get("ROUNDS", "5"))
    # the device synchronised through the driver: libcudf's runtime made its context current
    cuda = ctypes.CDLL("libcuda.so.1")

    def read(path):
        opts = plc.io.parquet.ParquetReaderOptions.builder(plc.io.SourceInfo([path])).build()
        t = time.perf_counter()
        tbl = plc.io.parquet.read_parquet(opts)
        rc = cuda.cuCtxSynchronize()
        dt = time.perf_counter() - t
        if rc != 0:
            raise RuntimeError(f"cuCtxSynchronize: {rc}")
        return dt, tbl

    for path in paths:
        read(path)  # warm-up: page cache, kernels
        times = []
        rows = 0
        for _ in range(rounds):
            dt, tbl = read(path)
            rows = tbl.tbl.num_rows()
            times.append(dt)
            del tbl
        best, med = min(times) * 1e3, statistics.median(times) * 1e3
        print(f"cudf {os.path.basename(path):<45} best {best:8.2f} ms, median {med:8.2f} ms, rows {rows}")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "write":
        write(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "write-delta":
        write_delta(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "write-nested":
        write_nested(sys.argv[2])
    elif len(sys.argv) >= 3 and sys.argv[1] == "write-categorical":
        write_categorical(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "write-codecs":
        write_codecs(sys.argv[2], sys.argv[3], *([sys.argv[4:]] if len(sys.argv) > 4 else []))
    elif len(sys.argv) >= 3 and sys.argv[1] == "time":
        time_files(sys.argv[2:])
    else:
        print(__doc__)
        sys.exit(2)
