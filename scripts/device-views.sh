#!/usr/bin/env bash
# GPU machine: the DataFusion scan with string views against strings as Utf8 (issue 16), the
# tests that cover the scan first. Pack on the development machine:
#   bash ../shared/device/pack.sh -- --workspace --test gpu --test sql --test stream --test spread
#   then add the stripped bench-sql_device to .dev/bin and compress .dev/bin into
#   .dev/bin.tar.xz (tar | xz -9; the whole pack must stay under 64 MiB)
# and run with .dev carried:  PART=N bash scripts/device-views.sh
#   PART=1: the packed tests, the GPU required.
#   PART=all: the stream, SQL, GPU and spread tests (those packed), then PART=2, then
#           PART=duckdb where .dev-whl came along, in one call.
#   PART=2: bench-sql_device, Q1, Q6 (others with QUERIES=...): cuparquet's scan with views
#           (the session's default) and with Utf8 (cuparquet-utf8), DataFusion's scan, the
#           MemTable of the same batches with views and with Utf8, in turns.
#   PART=duckdb: DuckDB over the files PART=2 wrote (/tmp/bench-data; call it while the machine
#           is still warm, with .dev-whl (bash ../shared/device/wheels.sh duckdb) carried).
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
part=${PART:-1}
if [ "$part" = all ]; then
  # one call: the tests that cover the change (the stream, the SQL, the GPU decode, the
  # spread), then the bench
  bash .dev/prepare-cufile-vm.sh >/dev/null 2>&1 || echo "could not write the udev record"
  export PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing" CUPARQUET_BIN="$PWD/.dev/bin/cuparquet"
  for t in stream sql gpu spread; do
    [ -x .dev/bin/test-test-$t ] || continue
    echo "=== test-$t"
    CUPARQUET_REQUIRE_GPU=1 timeout ${TEST_LIMIT:-200} .dev/bin/test-test-$t --test-threads=2 2>&1 \
      | tee "$out/test-$t.txt" | grep -E "test result|FAILED|panicked" | head -20
  done
  # then the bench; DuckDB after it where its wheel came along (.dev-whl)
  LIMIT=${LIMIT:-300} PART=2 bash "$0"
  ls .dev-whl/duckdb*.whl >/dev/null 2>&1 && PART=duckdb LIMIT=120 bash "$0"
  exit 0
fi
case "$part" in
1)
  CUPARQUET_REQUIRE_GPU=1 timeout 560 bash .dev/run.sh --test-threads=2 2>&1 | tee "$out/tests.txt" \
    | grep -E "^===|test result|FAILED|panicked|skipping|device tests" | head -80
  ;;
2)
  CUPARQUET_BENCH_QUERIES=${QUERIES:-Q1,Q6} \
    CUPARQUET_BENCH_SCANS=${SCANS:-cuparquet,cuparquet-utf8,datafusion,memtable,memtable-utf8} \
    CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} CUPARQUET_BENCH_OUT="$out/sql.jsonl" \
    timeout ${LIMIT:-540} .dev/bin/bench-sql_device 2>&1 | tee "$out/sql.txt" | grep -v "^\s*$" | head -60
  ;;
duckdb)
  bash .dev/wheels.sh install >/dev/null && export PYTHONPATH=/tmp/site
  d=$(ls -d /tmp/bench-data/tpch-* | head -1)
  timeout ${LIMIT:-300} python3 scripts/duckdb_tpch.py "$d" ${ROUNDS:-5} 2>&1 | tee "$out/duckdb.txt"
  ;;
esac
