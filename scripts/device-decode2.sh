#!/usr/bin/env bash
# GPU machine: the GPU decoder's encodings (DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY,
# DELTA_BYTE_ARRAY, BYTE_STREAM_SPLIT) in one call:
#   1. every packed test binary with the GPU required (../shared/device/run.sh);
#   2. compute-sanitizer memcheck over the corpus (conformance) and bad_data (errors);
#   3. cuDF 26.10 and pyarrow installed from the parts carried before (../shared/device/wheels.sh
#      cudf, then the pyarrow wheel moved to /tmp/whl by an earlier call); the pyarrow-written
#      DELTA / BYTE_STREAM_SPLIT file (scripts/cudf_compare.py write-delta);
#   4. bench-decode_device on the lineitem files and that file (GPU against arrow-rs host +
#      upload), then cuDF's read_parquet on the same files;
#   5. with an earlier build in .dev/old (its bench-decode_device, from scripts/pack-ab.sh or
#      built by hand): PAIRS of old/new bench runs, alternately, on the lineitem files.
# SKIP_TESTS=1, SKIP_SANITIZER=1, SKIP_BENCH=1, SKIP_AB=1 leave a part out.
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
[ -f .dev/old.tar.xz ] && [ ! -d .dev/old ] && tar -C .dev -xJf .dev/old.tar.xz
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "=== tests"
  timeout "${TEST_TIMEOUT:-300}" bash .dev/run.sh 2>&1 | tee "$out/tests.txt" \
    | grep -E "^===|test result|FAILED|panicked|device tests"
fi
if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  bash .dev/prepare-cufile-vm.sh >/dev/null 2>&1
  export PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing"
  for t in "test-test-conformance corpus_files_equal_arrow_rs" "test-test-errors bad_data_files_fail_clearly_or_match_arrow_rs"; do
    set -- $t
    echo "=== compute-sanitizer memcheck: $1 $2"
    CUPARQUET_REQUIRE_GPU=1 timeout "${SAN_TIMEOUT:-200}" compute-sanitizer --tool memcheck \
      --error-exitcode 9 --print-limit 20 ".dev/bin/$1" --exact "$2" > "$out/sanitizer-$1.txt" 2>&1
    echo "exit $?"
    grep -E "ERROR SUMMARY|Invalid|test result|out of bounds" "$out/sanitizer-$1.txt" | head -12
  done
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  bash .dev/wheels.sh install >/dev/null && export PYTHONPATH=/tmp/site
  delta=/tmp/bench-data/delta-split-pyarrow.parquet
  [ -f "$delta" ] || timeout 120 python3 scripts/cudf_compare.py write-delta /tmp/bench-data
  echo "=== bench-decode_device"
  CUPARQUET_BENCH_EXTRA="delta-split-pyarrow=$delta" CUPARQUET_BENCH_OUT="$out/decode.jsonl" \
    CUPARQUET_BENCH_FILES="${FILES:-snappy-dict,plain-uncompressed}" CUPARQUET_PROFILE=1 \
    CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} timeout 300 .dev/bin/bench-decode_device 2>&1 \
    | tee "$out/decode.txt"
  echo "=== cuDF"
  ls /tmp/bench-data/*.parquet
  timeout 120 python3 scripts/cudf_compare.py time "$delta" \
    /tmp/bench-data/lineitem-24000000-snappy-dict.parquet \
    /tmp/bench-data/lineitem-24000000-plain-uncompressed.parquet 2>&1 | tee "$out/cudf.txt"
fi
if [ "${SKIP_AB:-0}" != 1 ] && [ -x .dev/old/bench-decode_device ]; then
  echo "=== A/B bench-decode_device: old $(cat .dev/old/COMMIT 2>/dev/null), new $(cat .dev/COMMIT 2>/dev/null)"
  for k in $(seq 1 "${PAIRS:-2}"); do
    for build in old new; do
      bin=.dev/bin/bench-decode_device; [ $build = old ] && bin=.dev/old/bench-decode_device
      echo "--- $build, pair $k"
      CUPARQUET_BENCH_BASELINE=0 CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} \
        CUPARQUET_BENCH_FILES="${FILES:-snappy-dict,plain-uncompressed}" \
        CUPARQUET_BENCH_OUT="$out/ab-$build.jsonl" timeout 150 "$bin" 2>&1 | tee -a "$out/ab-$build.txt" \
        | grep -E "GB/s|panicked"
    done
  done
fi
