"""GPU machine (or anywhere with duckdb): the TPC-H-like queries of bench-sql_device over the
same Parquet files, with DuckDB, best and median of ROUNDS after a warm-up.

  python3 scripts/py/duckdb_tpch.py DIR [ROUNDS]

DIR is bench-sql_device's tpch-<orders> directory: lineitem/, orders/, customer/ and
queries.json (written by the bench). DuckDB reads the files in place (views over
read_parquet), with as many threads as cores.
"""
import json
import os
import statistics
import sys
import time

import duckdb

root = sys.argv[1]
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
queries = json.load(open(os.path.join(root, "queries.json")))
con = duckdb.connect()
con.execute(f"SET threads = {os.cpu_count()}")
for t in ("lineitem", "orders", "customer"):
    con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{root}/{t}/*.parquet')")
print(f"duckdb {duckdb.__version__}, {os.cpu_count()} threads")
for name, sql in queries.items():
    con.execute(sql).fetchall()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        con.execute(sql).fetchall()
        times.append((time.perf_counter() - t) * 1e3)
    print(f"| {name} | DuckDB | best {min(times):.1f} ms | median {statistics.median(times):.1f} ms |")
