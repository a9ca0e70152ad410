#!/usr/bin/env bash
# GPU machine: several GPUs (issue 19) in one call. On the one-GPU machine: test-spread (one
# device; the two-device test skips, saying so), `cuparquet load --devices cuda:0` of a lineitem
# file, and bench-decode_device with CUPARQUET_BENCH_DEVICES=0 (the spread's cost against a plain
# load, and a directory of 8 links to each file streamed on one device and spread). On the
# two-GPU machine (nvidia-h200-x2): the same with two devices, and doctor's ceilings (page-cache
# read, each GPU's pinned copy: `cuparquet doctor --bench`) in the same call.
# Prepare on the development machine:
#   PACK_XZ=0 bash ../shared/device/pack.sh -- --test spread --test cli && bash scripts/pack-bench.sh
# and run with .dev carried:  DEVICES=0 bash scripts/device-spread.sh   (DEVICES=0,1 on two)
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
devices=${DEVICES:-0}
list=$(echo "$devices" | sed 's/\([0-9]\+\)/cuda:\1/g')
export CUPARQUET_REQUIRE_GPU=1 PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing" RUST_BACKTRACE=1
export CUPARQUET_BIN="$PWD/.dev/bin/cuparquet"
echo "=== doctor"
.dev/bin/cuparquet doctor 2>&1 | grep -iE "device|pinned|page cache|read" | head -12
for t in spread cli; do
  echo "=== test-$t"
  timeout 300 .dev/bin/test-test-$t --nocapture 2>&1 | tee "$out/test-$t.txt" \
    | grep -E "test result|FAILED|panicked|skipping|spread over" | head -20
done
echo "=== bench-decode_device, spread over $devices against one device"
CUPARQUET_BENCH_DEVICES=$devices CUPARQUET_BENCH_FILES=${FILES:-snappy-dict,plain-uncompressed} \
  CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} CUPARQUET_BENCH_BASELINE=0 timeout 400 .dev/bin/bench-decode_device 2>&1 \
  | tee "$out/decode-spread.txt" | grep -E "GB/s|spread over|directory of|panicked"
f=/tmp/bench-data/lineitem-24000000-snappy-dict.parquet
echo "=== cuparquet load --devices $list"
[ -f "$f" ] && .dev/bin/cuparquet load "$f" --devices "$list" 2>&1 | tail -8
