"""cuparquet from Python, checked against pyarrow.parquet on the same files: files pyarrow
writes, the Apache parquet-testing corpus, filters in both forms, the PyCapsule interface and
errors. Host reads run everywhere; device reads where a GPU is (CUPARQUET_REQUIRE_GPU=1 makes
their absence a failure)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import cuparquet
from helpers import gpu

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO.parent / "shared" / "parquet-testing" / "data"


def plain(t: pa.Table) -> pa.Table:
    """`t` without schema metadata, its chunks merged: for comparing values."""
    return t.replace_schema_metadata(None).combine_chunks()


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    """10,000 rows in row groups of 1,000: ints, floats with nulls, strings, dates, bools."""
    n = 10_000
    t = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "x": pa.array([i % 97 for i in range(n)], pa.int32()),
            "f": pa.array([None if i % 11 == 0 else i / 8 for i in range(n)], pa.float64()),
            "s": pa.array([["a", "b", "c", "it's"][i % 4] for i in range(n)]),
            "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 400) for i in range(n)]),
            "b": pa.array([i % 3 == 0 for i in range(n)]),
        }
    )
    path = tmp_path_factory.mktemp("data") / "sample.parquet"
    pq.write_table(t, path, row_group_size=1_000, compression="snappy")
    return path


def test_read_table_equals_pyarrow(sample):
    ours = cuparquet.read_table(sample, device="host")
    assert ours.num_rows == 10_000
    assert ours.device == "host"
    assert ours.column_names == ["id", "x", "f", "s", "d", "b"]
    assert plain(ours.to_pyarrow()).equals(plain(pq.read_table(sample)))
    # the PyCapsule stream, consumed by pyarrow without a copy
    assert plain(pa.table(ours)).equals(plain(pq.read_table(sample)))


def test_columns_and_batches(sample):
    ours = cuparquet.read_table(str(sample), columns=["s", "id"], device="host", batch_rows=2_500)  # row groups gathered whole: 2 a batch
    # the columns come in the file's order, as arrow-rs projects them
    theirs = pq.read_table(sample, columns=["id", "s"])
    assert ours.column_names == ["id", "s"]
    assert plain(ours.to_pyarrow()).equals(plain(theirs))
    assert [b.num_rows for b in ours.batches] == [2_000] * 5
    b = ours.batches[1]
    assert b.device == "host" and b.rows[0][0] == 2  # starts at row group 2
    assert Path(b.file) == sample
    # a batch through __arrow_c_array__
    assert pa.record_batch(b).equals(theirs.slice(2_000, 2_000).combine_chunks().to_batches()[0])


@pytest.mark.parametrize(
    "dnf",
    [
        [("x", ">", 50)],
        [("x", ">=", 10), ("s", "in", ["a", "it's"])],
        [[("id", "<", 100)], [("id", ">=", 9_990)]],
        [("s", "not in", ["a", "b"])],
        [("f", "!=", 2.5), ("b", "==", True)],
        [("d", "<", dt.date(2024, 2, 1))],
        [("x", "in", [])],
    ],
)
def test_dnf_filters_equal_pyarrows(sample, dnf):
    ours = cuparquet.read_table(sample, filter=dnf, device="host").to_pyarrow()
    theirs = pq.read_table(sample, filters=dnf)
    assert plain(ours).equals(plain(theirs)), cuparquet.filter_text(dnf)


def test_text_filter(sample):
    ours = cuparquet.read_table(sample, filter="x = 3 AND s <> 'b'", device="host").to_pyarrow()
    t = pq.read_table(sample)
    theirs = t.filter(pc.and_(pc.equal(t["x"], 3), pc.not_equal(t["s"], "b")))
    assert ours.num_rows > 0
    assert plain(ours).equals(plain(theirs))


def test_scan_yields_the_tables_batches(sample, tmp_path):
    # a directory and a list of files are one scan
    for i in range(3):
        pq.write_table(pq.read_table(sample).slice(i * 1_000, 1_000), tmp_path / f"part-{i}.parquet")
    batches = list(cuparquet.scan(tmp_path, device="host", batch_rows=700))
    assert sum(b.num_rows for b in batches) == 3_000
    got = pa.Table.from_batches([b.to_pyarrow() for b in batches])
    assert plain(got).equals(plain(pq.read_table(sample).slice(0, 3_000)))
    files = [tmp_path / f"part-{i}.parquet" for i in (2, 0)]
    s = cuparquet.scan(files, device="host")
    reader = pa.RecordBatchReader.from_stream(s)
    got = reader.read_all()
    want = pa.concat_tables([pq.read_table(f) for f in files])
    assert plain(got).equals(plain(want))
    with pytest.raises(ValueError, match="consumed"):
        pa.RecordBatchReader.from_stream(s)


def test_report_is_a_dict(sample):
    r = cuparquet.read_table(sample, device="host").report
    (load,) = r["loads"]
    assert load["rows"] == 10_000
    assert load["row_groups"] == 10
    assert load["device"]["location"] == "host"
    assert load["device"]["requested"] == "host" and load["device"]["reason"]
    assert load["bytes_read"] > 0


# Where pyarrow and arrow-rs (cuparquet's oracle, which the Rust tests hold it to) read a
# corpus file differently: the file, and why.
KNOWN = {
    "repeated_no_annotation.parquet": "its footer counts 0 rows (parquet-rs 0.3.0): arrow-rs "
    "reads 0 rows as the footer says, pyarrow reads the column chunks' 6",
    "int96_from_spark.parquet": "INT96 values past the nanosecond range: arrow-rs and pyarrow "
    "wrap them to different int64 values",
}


def same(a: pa.Table, b: pa.Table) -> bool:
    """Equal values, NaN equal to NaN."""
    if a.equals(b):
        return True
    try:
        return repr(a.to_pylist()) == repr(b.to_pylist())
    except (ValueError, OverflowError):
        return False


def corpus_files():
    if not CORPUS.is_dir():
        return []
    return sorted(CORPUS.glob("*.parquet"))


def test_corpus_equals_pyarrow():
    files = corpus_files()
    if not files:
        pytest.skip(f"no corpus at {CORPUS}")
    compared, differ = 0, []
    for f in files:
        try:
            theirs = pq.read_table(f)
        except Exception:
            continue  # pyarrow cannot read it: nothing to compare with
        try:
            ours = cuparquet.read_table(f, device="host").to_pyarrow()
        except cuparquet.CuparquetError as e:
            # a clear refusal names the file
            assert f.name in str(e), str(e)
            continue
        compared += 1
        a, b = plain(ours), plain(theirs)
        if a.schema != b.schema:
            try:
                a = a.cast(b.schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                differ.append(f"{f.name}: {a.schema} != {b.schema}")
                continue
        if not same(a, b) and f.name not in KNOWN:
            differ.append(f"{f.name}: values differ")
    assert compared >= 30, compared
    assert not differ, "\n".join(differ)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda d: d / "missing.parquet", "missing.parquet"),
        (lambda d: (d / "not.parquet").write_bytes(b"hello, not parquet" * 10) and d / "not.parquet", "not.parquet"),
    ],
)
def test_bad_files_raise_naming_the_file(tmp_path, make, match):
    with pytest.raises(cuparquet.CuparquetError, match=match):
        cuparquet.read_table(make(tmp_path), device="host")


def test_truncated_file_raises(sample, tmp_path):
    data = sample.read_bytes()
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(cuparquet.CuparquetError, match="cut.parquet"):
        cuparquet.read_table(cut, device="host")


def test_bad_arguments(sample):
    with pytest.raises(cuparquet.CuparquetError, match="nope"):
        cuparquet.read_table(sample, columns=["nope"], device="host")
    with pytest.raises(cuparquet.CuparquetError):
        cuparquet.read_table(sample, filter="x >>> 3", device="host")
    with pytest.raises(ValueError, match="operator"):
        cuparquet.read_table(sample, filter=[("x", "~", 3)], device="host")
    with pytest.raises(ValueError, match="device"):
        cuparquet.read_table(sample, device="tpu")
    with pytest.raises(TypeError, match="unexpected keyword argument 'colums'"):
        cuparquet.read_table(sample, colums=["x"])
    with pytest.raises(TypeError, match="source"):
        cuparquet.read_table(42)


def test_device_read_hands_over_device_capsules(sample):
    if not gpu():
        pytest.skip("no CUDA device: device reads not tested here")
    t = cuparquet.read_table(sample, device="cuda:0")
    assert t.device == "cuda:0"
    assert plain(t.to_pyarrow()).equals(plain(pq.read_table(sample)))
    b = t.batches[0]
    schema, array = b.__arrow_c_device_array__()
    assert schema is not None and array is not None
    # a host consumer asking for host data is told how to get a copy (pyarrow itself prefers
    # __arrow_c_device_array__ and refuses CUDA memory on its own terms)
    with pytest.raises(ValueError, match="to_pyarrow"):
        b.__arrow_c_array__()
    with pytest.raises(Exception):
        pa.record_batch(b)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> list[Path]:
    """The same 20,000 rows written by DuckDB (ZSTD) and Polars (LZ4 and SNAPPY): nested,
    decimal, temporal and string columns with nulls, in several row groups."""
    # scripts/python-test.sh installs both; the GPU machine's run may lack them
    duckdb = pytest.importorskip("duckdb")
    pl = pytest.importorskip("polars")

    d = tmp_path_factory.mktemp("writers")
    out = []
    duck = d / "duckdb.parquet"
    duckdb.sql(
        """COPY (SELECT i::BIGINT AS i,
                        CASE WHEN i % 7 = 0 THEN NULL ELSE i / 3.0 END AS f,
                        'name-' || (i % 113)::VARCHAR AS s,
                        DATE '2024-01-01' + (i % 500)::INTEGER AS day,
                        TIMESTAMP '2024-01-01 00:00:00' + to_seconds(i * 37) AS ts,
                        (i % 10000)::DECIMAL(12, 2) / 4 AS price,
                        CASE WHEN i % 5 = 0 THEN NULL ELSE [i, i + 1] END AS l,
                        {'a': i % 3, 'b': 'x' || (i % 4)::VARCHAR} AS st
                 FROM range(20000) t(i))
           TO 'DEST' (FORMAT parquet, ROW_GROUP_SIZE 5000, COMPRESSION zstd)""".replace(
            "DEST", str(duck)
        )
    )
    out.append(duck)
    n = 20_000
    df = pl.DataFrame(
        {
            "i": list(range(n)),
            "f": [None if i % 7 == 0 else i / 3 for i in range(n)],
            "s": [f"name-{i % 113}" for i in range(n)],
            "day": [dt.date(2024, 1, 1) + dt.timedelta(days=i % 500) for i in range(n)],
            "l": [None if i % 5 == 0 else [i, i + 1] for i in range(n)],
            "cat": [["red", "green", "blue"][i % 3] for i in range(n)],
        }
    ).with_columns(pl.col("cat").cast(pl.Categorical))
    for codec in ("lz4", "snappy"):
        p = d / f"polars-{codec}.parquet"
        df.write_parquet(p, compression=codec, row_group_size=4_000, statistics=True)
        out.append(p)
    return out


def test_duckdb_and_polars_files_equal_pyarrow(written):
    for f in written:
        ours = plain(cuparquet.read_table(f, device="host").to_pyarrow())
        theirs = plain(pq.read_table(f))
        if ours.schema != theirs.schema:
            ours = ours.cast(theirs.schema)
        assert same(ours, theirs), f.name
        # a device read where there is a GPU
        if gpu():
            dev = plain(cuparquet.read_table(f, device="cuda:0").to_pyarrow())
            if dev.schema != theirs.schema:
                dev = dev.cast(theirs.schema)
            assert same(dev, theirs), f"{f.name} on cuda:0"


@pytest.mark.parametrize(
    "dnf",
    [
        [("i", ">=", 19_000)],
        [("s", "in", ["name-1", "name-100"]), ("f", ">", 1_000.0)],
        [[("day", "<", dt.date(2024, 1, 5))], [("i", "<", 10)]],
    ],
)
def test_dnf_filters_on_duckdb_and_polars_files(written, dnf):
    for f in written:
        ours = plain(cuparquet.read_table(f, filter=dnf, device="host").to_pyarrow())
        theirs = plain(pq.read_table(f, filters=dnf))
        if ours.schema != theirs.schema:
            ours = ours.cast(theirs.schema)
        assert ours.num_rows == theirs.num_rows > 0, f"{f.name}: {cuparquet.filter_text(dnf)}"
        assert same(ours, theirs), f"{f.name}: {cuparquet.filter_text(dnf)}"
