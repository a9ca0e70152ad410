#!/usr/bin/env bash
# GPU machine: the streaming reader's runs. PART=tests: the GPU tests (every packed test binary,
# the GPU required); PART=bench: bench-stream_device (load, batches(), first batch, memory
# budgets), then a CUPARQUET_PROFILE'd load of the small-row-groups file; PART=profile: the
# stream of the SNAPPY lineitem file with CUPARQUET_PROFILE (each wave's read and decode spans);
# PART=budget: the memory budgets' runs and one budgeted stream's timeline (FILES, BUDGETS).
# Prepare on the development machine:
#   bash ../shared/device/pack.sh -- --test gpu --test gpu_decode --test conformance --test stream \
#     && bash scripts/pack-bench.sh
# and run with .dev carried:  PART=tests bash scripts/device-stream.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
[ -f .dev/bin.tar.xz ] && [ ! -d .dev/bin ] && tar -C .dev -xJf .dev/bin.tar.xz
out=${OUT:-/tmp/out}; mkdir -p "$out"
export CUPARQUET_KERNEL_CACHE=/tmp/cuparquet-kernels CUPARQUET_BENCH_DIR=/tmp/bench-data
echo "=== machine"; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
case "${PART:-tests}" in
tests)
  bash .dev/prepare-cufile-vm.sh >/dev/null 2>&1 || echo "could not write the udev record"
  export CUPARQUET_REQUIRE_GPU=1 PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing" RUST_BACKTRACE=1
  export CUPARQUET_BIN="$PWD/.dev/bin/cuparquet"
  for t in .dev/bin/test-test-*; do
    echo "=== $t"
    timeout 300 "$t" --test-threads=2 2>&1 | tee "$out/$(basename "$t").txt" \
      | grep -E "test result|FAILED|panicked|cases equal|peaked|equal to the reference" | head -40
  done
  ;;
bench)
  echo "=== bench-stream_device"
  CUPARQUET_BENCH_OUT="$out/stream.jsonl" CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} \
    timeout 420 .dev/bin/bench-stream_device 2>&1 | tee "$out/stream.txt"
  f=/tmp/bench-data/small-row-groups-8m-800rg-snappy.parquet
  echo "=== profile of one small-row-groups load"
  [ -f "$f" ] && CUPARQUET_PROFILE=1 .dev/bin/cuparquet load "$f" --device cuda:0 2>&1 | head -12
  ;;
profile)
  # the stream's first batch of the SNAPPY lineitem file, with each wave's read and decode spans
  echo "=== profile of batches() on snappy-dict"
  CUPARQUET_BENCH_FILES=snappy-dict CUPARQUET_BENCH_ROUNDS=2 CUPARQUET_BENCH_BUDGETS=none \
    CUPARQUET_PROFILE=1 timeout 300 .dev/bin/bench-stream_device > "$out/profile.txt" 2>&1
  grep -E "batch rows|timeline|^  wave 0" "$out/profile.txt" | tail -30
  ;;
budget)
  # the memory budget's runs on the lineitem files (with each row group's estimate against its
  # real high-water mark), then one budgeted stream of the SNAPPY file with its timeline
  echo "=== bench-stream_device, budgets"
  CUPARQUET_BENCH_FILES=${FILES:-snappy-dict,plain-uncompressed} CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} \
    CUPARQUET_BENCH_BUDGETS=${BUDGETS:-2GiB,512MiB} CUPARQUET_BENCH_OUT="$out/budget.jsonl" \
    timeout 420 .dev/bin/bench-stream_device 2>&1 | tee "$out/budget.txt"
  echo "=== timeline of a 2 GiB stream of snappy-dict"
  CUPARQUET_BENCH_FILES=snappy-dict CUPARQUET_BENCH_ROUNDS=1 CUPARQUET_BENCH_BUDGETS=2GiB \
    CUPARQUET_PROFILE=1 timeout 300 .dev/bin/bench-stream_device > "$out/budget-profile.txt" 2>&1
  grep -A2 "passes under" "$out/budget-profile.txt" | tail -6 | cut -c1-3000
  ;;
esac
