#!/usr/bin/env bash
# GPU machine (or any): host-load benchmarks, cuparquet Device::Host against arrow-rs on the
# same generated ~280 MB file, at several thread counts. Needs .dev/bin (scripts/device-run.sh).
set -u -o pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/out}; mkdir -p "$out"
mkdir -p target/bench-data
for t in ${BENCH_THREADS:-16 4}; do
  echo "=== host_load (criterion), $t threads"
  CUPARQUET_BENCH_THREADS=$t .dev/bin/bench-host_load --bench --warm-up-time 2 --measurement-time 8 2>&1 \
    | grep -E "^host_load|time:|thrpt:|^file " | grep -v "change" | tee -a "$out/host-bench.txt"
  echo "=== host_compare (interleaved), $t threads"
  CUPARQUET_BENCH_THREADS=$t CUPARQUET_BENCH_UNITS=${BENCH_UNITS:-8388608,33554432} CUPARQUET_BENCH_SERIAL=1 \
    .dev/bin/bench-host_compare 2>&1 | tee -a "$out/host-bench.txt"
done
.dev/bin/cuparquet load target/bench-data/host_load_lineitem_plain.parquet --device host | tee -a "$out/host-bench.txt"
