#!/usr/bin/env bash
# GPU machine: a same-run A/B of two builds — the binaries in .dev/old (an earlier commit, packed
# by scripts/pack-ab.sh) against those in .dev/bin (this checkout).
#   PART=bench (default): each benchmark of BENCHES (default decode_device; e.g. "decode_device
#                         stream_device sql_device") of each build, alternately, PAIRS times
#                         (without the arrow-rs baseline: the comparison is build against
#                         build); the whole output in $OUT/ab-BENCH-BUILD.txt
#   PART=tests:           test-gpu and test-conformance of each build with the GPU required
# Prepare on the development machine:
#   bash ../shared/device/pack.sh -- --test gpu --test conformance && bash scripts/pack-bench.sh \
#     && BENCHES="..." bash scripts/pack-ab.sh COMMIT
# and run with .dev carried:  PART=bench BENCHES="..." bash scripts/device-ab.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
[ -f .dev/bin.tar.xz ] && [ ! -d .dev/bin ] && tar -C .dev -xJf .dev/bin.tar.xz
[ -f .dev/old.tar.xz ] && [ ! -d .dev/old ] && tar -C .dev -xJf .dev/old.tar.xz
out=${OUT:-/tmp/out}; mkdir -p "$out"
export CUPARQUET_KERNEL_CACHE=/tmp/cuparquet-kernels CUPARQUET_BENCH_DIR=/tmp/bench-data
echo "=== machine"; nproc; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "old: $(cat .dev/old/COMMIT 2>/dev/null)  new: $(cat .dev/COMMIT 2>/dev/null)"
case "${PART:-bench}" in
bench)
  export CUPARQUET_BENCH_BASELINE=0 CUPARQUET_BENCH_ROUNDS=${ROUNDS:-7}
  for b in ${BENCHES:-decode_device}; do
    for k in $(seq 1 "${PAIRS:-2}"); do
      for build in old new; do
        bin=.dev/bin/bench-$b; [ $build = old ] && bin=.dev/old/bench-$b
        echo "=== $b, $build, pair $k ($(date +%T))"
        timeout 300 "$bin" 2>&1 | tee -a "$out/ab-$b-$build.txt" \
          | grep -E "${SHOW:-GB/s|median|data ready|panicked|first batch|scan alone| ms}" | head -40
      done
    done
  done
  ;;
tests)
  bash .dev/prepare-cufile-vm.sh >/dev/null 2>&1 || echo "could not write the udev record"
  export CUPARQUET_REQUIRE_GPU=1 PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing" RUST_BACKTRACE=1
  for build in old new; do
    dir=.dev/bin; prefix=test-test-; [ $build = old ] && dir=.dev/old && prefix=test-
    for t in gpu conformance; do
      echo "=== $build test-$t"
      "$dir/$prefix$t" 2>&1 | tee "$out/ab-tests-$build-$t.txt" | grep -E "test result|FAILED|panicked|equal|round-tripped|cases equal"
    done
  done
  ;;
esac
