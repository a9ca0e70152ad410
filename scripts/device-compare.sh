#!/usr/bin/env bash
# GPU machine: the streaming reader against cuDF and against an earlier build, in one run.
#   1. cuDF 26.10 and pyarrow installed from the parts carried before (../shared/device/wheels.sh
#      cudf; the pyarrow wheel moved to /tmp/whl by an earlier call);
#   2. the pyarrow-written small-row-groups file (scripts/cudf_compare.py write);
#   3. bench-stream_device with that file added (CUPARQUET_BENCH_EXTRA), then cuDF's
#      read_parquet on the same files (scripts/cudf_compare.py time);
#   4. PAIRS of bench-decode_device runs of the old build (.dev/old, scripts/pack-ab.sh) and this
#      one, alternately (the load() A/B on the lineitem files).
set -u -o pipefail
cd "$(dirname "$0")/.."
[ -f .dev/bin.tar.xz ] && [ ! -d .dev/bin ] && tar -C .dev -xJf .dev/bin.tar.xz
[ -f .dev/old.tar.xz ] && [ ! -d .dev/old ] && tar -C .dev -xJf .dev/old.tar.xz
out=${OUT:-/tmp/out}; mkdir -p "$out"
export CUPARQUET_KERNEL_CACHE=/tmp/cuparquet-kernels CUPARQUET_BENCH_DIR=/tmp/bench-data
mkdir -p /tmp/bench-data
echo "=== machine"; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "old: $(cat .dev/old/COMMIT 2>/dev/null)  new: $(cat .dev/COMMIT 2>/dev/null)"
bash .dev/wheels.sh install && export PYTHONPATH=/tmp/site
pa=/tmp/bench-data/small-row-groups-pyarrow.parquet
[ -f "$pa" ] || timeout 120 python3 scripts/cudf_compare.py write /tmp/bench-data
echo "=== bench-stream_device"
CUPARQUET_BENCH_EXTRA="small-row-groups-pyarrow=$pa" CUPARQUET_BENCH_OUT="$out/stream.jsonl" \
  CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} timeout 300 .dev/bin/bench-stream_device 2>&1 | tee "$out/stream.txt"
echo "=== cuDF"
timeout 120 python3 scripts/cudf_compare.py time "$pa" /tmp/bench-data/small-row-groups-8m-800rg-snappy.parquet \
  /tmp/bench-data/lineitem-24000000-snappy-dict.parquet /tmp/bench-data/lineitem-24000000-plain-uncompressed.parquet \
  2>&1 | tee "$out/cudf.txt"
echo "=== A/B bench-decode_device (old, new)"
export CUPARQUET_BENCH_BASELINE=0 CUPARQUET_BENCH_ROUNDS=5 CUPARQUET_BENCH_FILES=snappy-dict,zstd-dict,plain-uncompressed,latency
for k in $(seq 1 "${PAIRS:-2}"); do
  for build in old new; do
    bin=.dev/bin/bench-decode_device; [ $build = old ] && bin=.dev/old/bench-decode_device
    echo "--- $build, pair $k"
    CUPARQUET_BENCH_OUT="$out/ab-$build.jsonl" timeout 150 "$bin" 2>&1 | tee -a "$out/ab-$build.txt" \
      | grep -E "GB/s|median|panicked"
  done
done
