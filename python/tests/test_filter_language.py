"""The filter language as SQL writes it — BETWEEN, LIKE, DATE and TIMESTAMP literals, bare
boolean columns, column-to-column comparisons — checked row for row against DuckDB's WHERE and
pyarrow's filter expressions on the same files (written by pyarrow and by DuckDB), on the host
and, where a GPU is, on the device (LIKE runs in a kernel there)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import cuparquet
from helpers import gpu

f = pc.field

# (cuparquet's text, DuckDB's WHERE, pyarrow's expression)
CASES = [
    ("qty BETWEEN 10 AND 20", "qty BETWEEN 10 AND 20", (f("qty") >= 10) & (f("qty") <= 20)),
    ("qty NOT BETWEEN 10 AND 40", "qty NOT BETWEEN 10 AND 40", ~((f("qty") >= 10) & (f("qty") <= 40))),
    ("s LIKE 'MA%'", "s LIKE 'MA%'", pc.match_like(f("s"), "MA%")),
    ("s LIKE '%IL'", "s LIKE '%IL'", pc.match_like(f("s"), "%IL")),
    ("s LIKE '%A%'", "s LIKE '%A%'", pc.match_like(f("s"), "%A%")),
    ("s NOT LIKE '%A%'", "s NOT LIKE '%A%'", ~pc.match_like(f("s"), "%A%")),
    ("s LIKE '_cl%r'", "s LIKE '_cl%r'", pc.match_like(f("s"), "_cl%r")),
    ("s LIKE '%é%' OR s LIKE 'T_U%K'", "s LIKE '%é%' OR s LIKE 'T_U%K'",
     pc.match_like(f("s"), "%é%") | pc.match_like(f("s"), "T_U%K")),
    ("day >= DATE '1996-01-01' AND day < DATE '1996-03-01'",
     "day >= DATE '1996-01-01' AND day < DATE '1996-03-01'",
     (f("day") >= dt.date(1996, 1, 1)) & (f("day") < dt.date(1996, 3, 1))),
    ("day BETWEEN DATE '1995-02-01' AND DATE '1995-02-10'",
     "day BETWEEN DATE '1995-02-01' AND DATE '1995-02-10'",
     (f("day") >= dt.date(1995, 2, 1)) & (f("day") <= dt.date(1995, 2, 10))),
    ("ts < TIMESTAMP '2024-01-05 12:00:00'", "ts < TIMESTAMP '2024-01-05 12:00:00'",
     f("ts") < dt.datetime(2024, 1, 5, 12)),
    ("ts >= DATE '2024-01-08'", "ts >= DATE '2024-01-08'", f("ts") >= dt.datetime(2024, 1, 8)),
    ("day < TIMESTAMP '1995-01-03 10:00:00'", "day < TIMESTAMP '1995-01-03 10:00:00'",
     f("day") <= dt.date(1995, 1, 3)),
    ("ok", "ok", f("ok") == True),  # noqa: E712
    ("NOT ok", "NOT ok", ~(f("ok") == True)),  # noqa: E712
    ("ok AND qty > 40", "ok AND qty > 40", (f("ok") == True) & (f("qty") > 40)),  # noqa: E712
    ("lo < hi", "lo < hi", f("lo") < f("hi")),
    ("lo = hi OR qty IS NULL", "lo = hi OR qty IS NULL", (f("lo") == f("hi")) | f("qty").is_null()),
    ("NOT lo >= hi", "NOT lo >= hi", ~(f("lo") >= f("hi"))),
    ("qty <= lo", "qty <= lo", f("qty") <= f("lo")),
    ("s = mode", "s = mode", f("s") == f("mode")),
]


def table(n: int) -> pa.Table:
    def null(i):
        return i % 7 == 0

    words = ["AIR", "MAIL", "SHIP", "RAIL", "TRUCK", "éclair", "a_b", "FOB"]
    base = dt.datetime(2024, 1, 1)
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "qty": pa.array([None if null(i) else i % 50 for i in range(n)], pa.int32()),
            "lo": pa.array([None if i % 13 == 0 else (i * 7) % 23 for i in range(n)], pa.int32()),
            "hi": pa.array([(i * 5) % 19 for i in range(n)], pa.int32()),
            "s": pa.array([None if i % 11 == 0 else words[(i * 3) % len(words)] for i in range(n)]),
            "mode": pa.array([words[i % 5] for i in range(n)]),
            "day": pa.array([dt.date(1995, 1, 1) + dt.timedelta(days=i % 900) for i in range(n)]),
            "ts": pa.array([base + dt.timedelta(minutes=17 * i) for i in range(n)], pa.timestamp("us")),
            "ok": pa.array([None if null(i + 3) else i % 3 == 0 for i in range(n)], pa.bool_()),
        }
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("language")
    t = table(20_000)
    out = {"pyarrow": d / "pyarrow.parquet"}
    pq.write_table(t, out["pyarrow"], row_group_size=4_000)
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.register("t", t)
    out["duckdb"] = d / "duckdb.parquet"
    con.execute(f"COPY (SELECT * FROM t ORDER BY id) TO '{out['duckdb']}' (FORMAT parquet, ROW_GROUP_SIZE 3000)")
    return out


def devices() -> list[str]:
    return ["host", "cuda:0"]


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("writer", ["pyarrow", "duckdb"])
@pytest.mark.parametrize("text,where,expr", CASES, ids=[c[0] for c in CASES])
def test_filters_as_sql_writes_them(files, writer, device, text, where, expr):
    if device != "host" and not gpu():
        pytest.skip("no CUDA device: device reads not tested here")
    duckdb = pytest.importorskip("duckdb")
    path = files[writer]
    ours = cuparquet.read_table(path, filter=text, device=device).to_pyarrow()
    ids = ours.column("id").to_pylist()
    theirs_db = duckdb.sql(f"SELECT id FROM read_parquet('{path}') WHERE {where} ORDER BY id").fetchall()
    theirs_pa = pq.read_table(path, filters=expr).column("id").to_pylist()
    assert len(ids) > 0, f"{text}: no row kept (the case tests nothing)"
    assert ids == [r[0] for r in theirs_db], f"{text}: DuckDB keeps other rows"
    assert ids == theirs_pa, f"{text}: pyarrow keeps other rows"
    # every column comes back, as pyarrow reads the kept rows
    want = pq.read_table(path).filter(pc.is_in(pc.field("id"), pa.array(ids)))
    assert ours.select(want.column_names).to_pylist() == want.to_pylist()


def test_language_errors_name_what_is_wrong(files):
    for text, match in [
        ("s LIKE 5", "expected a 'pattern' after LIKE"),
        ("qty LIKE 'a%'", "LIKE takes a string column"),
        ("qty < s", "cannot compare column 'qty'"),
        ("day > DATE '1996-02-30'", "is not a date"),
        ("qty BETWEEN 1", "expected AND between BETWEEN's bounds"),
        ("qty", "cannot compare column 'qty'"),
    ]:
        with pytest.raises(cuparquet.CuparquetError, match=match):
            cuparquet.read_table(files["pyarrow"], filter=text, device="host")


def test_hive_partitions_as_pyarrow_reads_them(tmp_path):
    """A directory pyarrow's ``write_to_dataset`` partitions by two keys: the partition columns
    come after the files' own, and a filter on them reads only the directories it keeps."""
    t = table(6_000).select(["id", "qty", "s"]).append_column(
        "year", pa.array([1995 + i % 3 for i in range(6_000)], pa.int64())
    ).append_column("mode", pa.array([["AIR", "MAIL"][i % 2] for i in range(6_000)]))
    pq.write_to_dataset(t, tmp_path, partition_cols=["year", "mode"])
    ours = cuparquet.read_table(tmp_path, device="host").to_pyarrow()
    assert ours.column_names == ["id", "qty", "s", "year", "mode"]
    theirs = pq.read_table(tmp_path)
    key = lambda r: r["id"]  # noqa: E731
    assert sorted(ours.to_pylist(), key=key) == sorted(
        theirs.select(ours.column_names).to_pylist(), key=key
    )
    got = cuparquet.read_table(tmp_path, filter="year = 1996 AND mode = 'MAIL' AND qty < 10", device="host")
    rows = got.to_pyarrow().to_pylist()
    want = [r for r in t.to_pylist() if r["year"] == 1996 and r["mode"] == "MAIL" and r["qty"] is not None and r["qty"] < 10]
    assert sorted(rows, key=key) == sorted(want, key=key) and rows
    # a glob over one key's directories
    some = cuparquet.read_table(str(tmp_path / "year=1997" / "*" / "*.parquet"), device="host").to_pyarrow()
    assert some.column_names == ["id", "qty", "s", "mode"]
    assert some.num_rows == 2_000
