#!/usr/bin/env python3
"""`cuparquet load --where` against pyarrow's `filters=` and DuckDB's `WHERE` on the same files.

Writes files the way users write them (pyarrow's and DuckDB's defaults: nulls, strings, dates,
timestamps with and without a time zone, decimals, several row groups), then for each predicate
loads the file with `cuparquet load --where P --output` and checks the rows equal what pyarrow
(`pyarrow.parquet.read_table(filters=...)`) and DuckDB (`SELECT * ... WHERE ...`) return.

Usage: python3 scripts/py/row_filter_oracle.py [--device host|cuda:0] [--bin PATH]
Installs pyarrow and duckdb with pip (into /tmp/cuparquet-oracle-site) when they are missing.
The binary: --bin, else $CUPARQUET_BIN, else target/release/cuparquet or target/debug/cuparquet.
Exit status 0 when every case agrees.
"""
import argparse
import datetime as dt
import decimal
import os
import subprocess
import sys
import tempfile

SITE = "/tmp/cuparquet-oracle-site"


def ensure_modules():
    if os.path.isdir(SITE):
        sys.path.insert(0, SITE)
    try:
        import duckdb  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        subprocess.check_call(
            [sys.executable, "-m", "pip", "install", "--quiet", "--target", SITE, "pyarrow", "duckdb"]
        )
        sys.path.insert(0, SITE)


def binary(arg):
    for p in [arg, os.environ.get("CUPARQUET_BIN"), "target/release/cuparquet", "target/debug/cuparquet"]:
        if p and os.path.exists(p):
            return p
    sys.exit("no cuparquet binary: build it (cargo build --release) or pass --bin")


def table(n):
    import pyarrow as pa

    def null(i):
        return i % 7 == 0

    base = dt.datetime(2024, 1, 1)
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "qty": pa.array([None if null(i) else i % 50 for i in range(n)], pa.int32()),
            "flag": pa.array([None if i % 11 == 0 else "ANR"[i % 3] for i in range(n)], pa.string()),
            "mode": pa.array([["AIR", "MAIL", "SHIP", "RAIL", "TRUCK"][i % 5] for i in range(n)]),
            "day": pa.array([dt.date(1995, 1, 1) + dt.timedelta(days=i % 900) for i in range(n)]),
            "ts": pa.array([base + dt.timedelta(minutes=17 * i) for i in range(n)], pa.timestamp("us")),
            "ts_utc": pa.array(
                [None if null(i) else base + dt.timedelta(seconds=97 * i) for i in range(n)],
                pa.timestamp("ms", tz="UTC"),
            ),
            "price": pa.array(
                [decimal.Decimal(i * 37 % 100000) / 100 for i in range(n)], pa.decimal128(12, 2)
            ),
            "big": pa.array([decimal.Decimal(i) / 1000 for i in range(n)], pa.decimal128(30, 3)),
            "ok": pa.array([None if null(i + 3) else i % 3 == 0 for i in range(n)], pa.bool_()),
        }
    )


def dec(text, precision, scale):
    import pyarrow as pa

    return pa.scalar(decimal.Decimal(text), pa.decimal128(precision, scale))


# (cuparquet predicate, pyarrow filter, DuckDB WHERE); pyarrow's decimal literals at the
# column's scale (`big > 12.3456` on a scale-3 column is `big > 12.345`: no value lies between)
def cases():
    import pyarrow.compute as pc

    f = pc.field
    utc = dt.timezone.utc
    return [
        ("qty > 20 AND qty <= 30", (f("qty") > 20) & (f("qty") <= 30), "qty > 20 AND qty <= 30"),
        ("flag = 'A' OR qty IS NULL", (f("flag") == "A") | f("qty").is_null(), "flag = 'A' OR qty IS NULL"),
        ("mode IN ('AIR', 'MAIL')", f("mode").isin(["AIR", "MAIL"]), "mode IN ('AIR', 'MAIL')"),
        ("mode NOT IN ('AIR', 'MAIL') AND flag != 'N'", ~f("mode").isin(["AIR", "MAIL"]) & (f("flag") != "N"),
         "mode NOT IN ('AIR', 'MAIL') AND flag <> 'N'"),
        ("NOT (qty < 10)", ~(f("qty") < 10), "NOT (qty < 10)"),
        ("day >= '1996-01-01' AND day < '1996-03-01'",
         (f("day") >= dt.date(1996, 1, 1)) & (f("day") < dt.date(1996, 3, 1)),
         "day >= DATE '1996-01-01' AND day < DATE '1996-03-01'"),
        ("ts < '2024-01-05T12:00:00'", f("ts") < dt.datetime(2024, 1, 5, 12), "ts < TIMESTAMP '2024-01-05 12:00:00'"),
        ("ts_utc >= '2024-01-02T00:00:00Z'", f("ts_utc") >= dt.datetime(2024, 1, 2, tzinfo=utc),
         "ts_utc >= TIMESTAMPTZ '2024-01-02 00:00:00+00'"),
        ("ts_utc < '2024-01-02T02:00:00+02:00'", f("ts_utc") < dt.datetime(2024, 1, 2, tzinfo=utc),
         "ts_utc < TIMESTAMPTZ '2024-01-02 00:00:00+00'"),
        ("price >= 250.5 AND price < 500",
         (f("price") >= dec("250.50", 12, 2)) & (f("price") < dec("500.00", 12, 2)),
         "price >= 250.5 AND price < 500"),
        ("big > 12.3456", f("big") > dec("12.345", 30, 3), "big > 12.3456"),
        ("ok = true", f("ok") == True, "ok = true"),  # noqa: E712
        ("ok IS NOT NULL AND NOT ok = true", f("ok").is_valid() & ~(f("ok") == True), "ok IS NOT NULL AND NOT ok"),  # noqa: E712
        ("id = 0.5", f("id") == 0.5, "id = 0.5"),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="host")
    ap.add_argument("--bin")
    ap.add_argument("--rows", type=int, default=20000)
    args = ap.parse_args()
    ensure_modules()
    import duckdb
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    exe = binary(args.bin)
    tmp = tempfile.mkdtemp(prefix="cuparquet-oracle-")
    t = table(args.rows)
    files = {}
    files["pyarrow"] = os.path.join(tmp, "pyarrow.parquet")
    pq.write_table(t, files["pyarrow"], row_group_size=4000)
    files["duckdb"] = os.path.join(tmp, "duckdb.parquet")
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.register("t", t)
    con.execute(f"COPY (SELECT * FROM t ORDER BY id) TO '{files['duckdb']}' (FORMAT parquet, ROW_GROUP_SIZE 3000)")
    failures = 0
    for writer, path in files.items():
        for pred, expr, where in cases():
            out = os.path.join(tmp, "out.arrow")
            r = subprocess.run(
                [exe, "load", path, "--device", args.device, "--quiet", "--where", pred, "--output", out],
                capture_output=True, text=True,
            )
            if r.returncode != 0:
                print(f"FAIL {writer}: {pred}: exit {r.returncode}: {r.stderr.strip()}")
                failures += 1
                continue
            ours = ipc.open_file(out).read_all()
            want_pa = pq.read_table(path, filters=expr)
            want_db = con.sql(f"SELECT * FROM read_parquet('{path}') WHERE {where}").to_arrow_table()
            got = {c: ours.column(c).to_pylist() for c in ours.column_names}
            ok = True
            for name, want in [("pyarrow", want_pa), ("duckdb", want_db)]:
                w = {c: want.column(c).to_pylist() for c in want.column_names}
                if len(got["id"]) != len(w["id"]) or any(got[c] != w[c] for c in ["id", "qty", "flag", "price"]):
                    print(f"FAIL {writer}: {pred}: {len(got['id'])} rows, {name} {len(w['id'])}")
                    ok = False
            failures += not ok
            if ok:
                print(f"ok   {writer}: {pred}: {len(got['id'])} rows, as pyarrow and DuckDB")
    print("all agree" if failures == 0 else f"{failures} case(s) disagree")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
