#!/usr/bin/env bash
# GPU machine: the host-load benchmark (cuparquet Device::Host vs arrow-rs), the CLI's device
# probe, and the CLI on the bundled sample. Build first on the development machine:
#   bash ../shared/device/pack.sh && bash scripts/pack-bench.sh
# then run there with .dev carried:  bash scripts/device-host-bench.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "cores: $(nproc)"; free -g | head -2
echo "=== cuparquet load (auto) on the sample"
.dev/bin/cuparquet load testdata/lineitem-sample.parquet --report | tee "$out/load-sample.txt"
echo "=== cuparquet load --device cuda:0 (must be a clear error until GPU loading lands)"
.dev/bin/cuparquet load testdata/lineitem-sample.parquet --device cuda:0; echo "exit $?"
mkdir -p target/bench-data
for t in ${BENCH_THREADS:-16 4 1}; do
  echo "=== host_load bench, $t threads"
  CUPARQUET_BENCH_THREADS=$t .dev/bin/bench-host_load --bench --warm-up-time 2 --measurement-time 10 2>&1 \
    | grep -E "^host_load|time:|thrpt:|^file " | tee -a "$out/host-bench.txt"
done
.dev/bin/cuparquet load target/bench-data/host_load_lineitem_plain.parquet --device host | tee -a "$out/host-bench.txt"
