#!/usr/bin/env bash
# GPU machine: the fixed cost of a device load in a fresh process (issue 20, item 2). The floor
# (scripts/cuda_floor.py: cuInit + primary context, through ctypes) and `cuparquet load` of the
# 100k-row two-column SNAPPY file of bench-decode_device (generated here) on cuda:0, each in a
# fresh process, RUNS times (default 5) after one load that warms the kernel cache; the CLI's
# setup breakdown and the whole process's wall time (/usr/bin/time).
# Pack first: bash ../shared/device/pack.sh -- --test stream && bash scripts/pack-bench.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
[ -f .dev/bin.tar.xz ] && [ ! -d .dev/bin ] && tar -C .dev -xJf .dev/bin.tar.xz
export CUPARQUET_KERNEL_CACHE=/tmp/cuparquet-kernels CUPARQUET_BENCH_DIR=/tmp/bench-data
f=/tmp/bench-data/small-100k-2col-snappy.parquet
if [ ! -f "$f" ]; then
  CUPARQUET_BENCH_FILES=latency CUPARQUET_BENCH_LATENCY_ROUNDS=3 .dev/bin/bench-decode_device >/dev/null 2>&1
fi
ls -l "$f"
.dev/bin/cuparquet load "$f" --device cuda:0 > /dev/null 2>&1   # warms the kernel cache
for i in $(seq "${RUNS:-5}"); do
  echo "=== run $i"
  python3 scripts/cuda_floor.py
  /usr/bin/time -f "process %e s wall, %M KiB max RSS" .dev/bin/cuparquet load "$f" --device cuda:0 2>&1 \
    | grep -E "wall|setup|process"
done
