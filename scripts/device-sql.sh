#!/usr/bin/env bash
# GPU machine: cuparquet-datafusion's runs. PART=tests: the SQL tests (the GPU required) and
# the core's GPU tests that cover device→host copies; PART=bench: bench-sql_device (TPC-H-like
# queries: cuparquet's scan, DataFusion's scan and a MemTable of the same batches, then the
# device→host copy of Q1's columns) and DuckDB over the same files (wheels.sh duckdb, carried
# in .dev-whl). PART=all: both.
# Prepare on the development machine:
#   bash ../shared/device/pack.sh -- --workspace --test gpu --test sql && bash scripts/pack-bench.sh
# and run with .dev (and .dev-whl for DuckDB) carried:  PART=all bash scripts/device-sql.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
[ -f .dev/bin.tar.xz ] && [ ! -d .dev/bin ] && tar -C .dev -xJf .dev/bin.tar.xz
out=${OUT:-/tmp/out}; mkdir -p "$out"
export CUPARQUET_KERNEL_CACHE=/tmp/cuparquet-kernels CUPARQUET_BENCH_DIR=/tmp/bench-data
echo "=== machine"; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
part=${PART:-tests}
if [ "$part" = tests ] || [ "$part" = all ]; then
  bash .dev/prepare-cufile-vm.sh >/dev/null 2>&1 || echo "could not write the udev record"
  export CUPARQUET_REQUIRE_GPU=1 PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing" RUST_BACKTRACE=1
  for t in .dev/bin/test-test-*; do
    echo "=== $t"
    timeout 300 "$t" --test-threads=2 --nocapture 2>&1 | tee "$out/$(basename "$t").txt" \
      | grep -E "test result|FAILED|panicked|batches decoded on a GPU|corpus files read" | head -40
  done
fi
if [ "$part" = bench ] || [ "$part" = all ]; then
  # TUNINGS: CUPARQUET_TUNING values to run the bench under, one process each (';'-separated;
  # an empty entry: the defaults)
  IFS=';' read -r -a tunings <<< "${TUNINGS:-}"
  [ ${#tunings[@]} -eq 0 ] && tunings=("")
  for tu in "${tunings[@]}"; do
    echo "=== bench-sql_device CUPARQUET_TUNING=$tu"
    CUPARQUET_TUNING="$tu" CUPARQUET_BENCH_OUT="$out/sql.jsonl" CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} \
      timeout 250 .dev/bin/bench-sql_device 2>&1 | tee -a "$out/sql.txt"
  done
  if ls .dev-whl/duckdb*.whl >/dev/null 2>&1; then
    echo "=== DuckDB"
    bash .dev/wheels.sh install >/dev/null && export PYTHONPATH=/tmp/site
    d=$(ls -d /tmp/bench-data/tpch-* | head -1)
    timeout 200 python3 scripts/duckdb_tpch.py "$d" ${ROUNDS:-5} 2>&1 | tee "$out/duckdb.txt"
  fi
fi
