#!/usr/bin/env bash
# GPU machine: the GPU decode benchmark (bench-decode_device: three 24M-row lineitem files and
# a 100k-row latency file, against arrow-rs on the host + upload), then compute-sanitizer
# memcheck over the corpus (good files through the conformance suite, bad_data through the
# error suite) with the GPU required. BIN: where the binaries are (default .dev/bin).
set -u -o pipefail
cd "$(dirname "$0")/.."
[ -f .dev/bin.tar.xz ] && [ ! -d .dev/bin ] && tar -C .dev -xJf .dev/bin.tar.xz
BIN=${BIN:-.dev/bin}
out=${OUT:-/tmp/out}; mkdir -p "$out"
export CUPARQUET_KERNEL_CACHE=/tmp/cuparquet-kernels CUPARQUET_BENCH_DIR=/tmp/bench-data
export CUPARQUET_BENCH_OUT="$out/decode.jsonl" CUPARQUET_PROFILE=1   # stage times in the report
echo "=== machine"; nproc; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  echo "=== bench-decode_device"
  timeout "${BENCH_TIMEOUT:-400}" "$BIN/bench-decode_device" 2>&1 | tee "$out/bench-decode.txt"
fi
if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  bash .dev/prepare-cufile-vm.sh >/dev/null 2>&1 || bash .devx/prepare-cufile-vm.sh >/dev/null 2>&1
  export PARQUET_TESTING_DIR="${PARQUET_TESTING_DIR:-$PWD/.dev/corpus/parquet-testing}" CUPARQUET_REQUIRE_GPU=1
  for t in "test-conformance corpus_files_equal_arrow_rs" "test-errors bad_data_files_fail_clearly_or_match_arrow_rs"; do
    set -- $t
    echo "=== compute-sanitizer memcheck: $1 $2"
    timeout "${SAN_TIMEOUT:-200}" compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 20 \
      "$BIN/$1" --exact "$2" > "$out/sanitizer-$1.txt" 2>&1
    echo "exit $?"
    grep -E "ERROR SUMMARY|Invalid|test result|out of bounds" "$out/sanitizer-$1.txt" | head -12
  done
fi
