#!/usr/bin/env bash
# GPU machine: GZIP pages on the device by our inflate kernel (issue 15, item 4), in one call.
# Pack with `bash ../shared/device/pack.sh -- --test gpu --test conformance --test errors
# --test mutants` plus bench-decode_device; the cuDF and pyarrow wheels moved to /tmp/whl by an
# earlier call (../shared/device/wheels.sh cudf) give the pyarrow-written file and cuDF's time.
#   1. the packed tests, GPU required (SKIP_TESTS=1 leaves them out);
#   2. compute-sanitizer memcheck over the large-page test (GZIP among its codecs) and the
#      decompression bombs (a GZIP page inflating to 64 MiB past its claim) (SKIP_SANITIZER=1);
#   3. bench-decode_device on the arrow-rs-written GZIP lineitem file and pyarrow's (its
#      default gzip level): the host's share beside the kernel swept (SHARES), then the
#      built-in share against arrow-rs host + upload, ROUNDS loads after a warm-up; the
#      build before the kernel (.dev/old, scripts/pack-ab.sh: GZIP pages on the host's
#      inflater) on the same files; and cuDF's read_parquet.
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
python3 -c "import pyarrow" 2>/dev/null || wheels
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "=== tests (GPU required)"
  CUPARQUET_REQUIRE_GPU=1 timeout "${TEST_TIMEOUT:-300}" bash .dev/run.sh 2>&1 | tee "$out/tests.txt" \
    | grep -E "^===|test result|FAILED|panicked|device tests|skipping"
fi
if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  for t in "test-gpu gpu_large_pages_equal_arrow_rs" "test-mutants bombs"; do
    set -- $t
    [ -x .dev/bin/test-$1 ] || { echo "no .dev/bin/test-$1 packed: memcheck of $1 left out"; continue; }
    echo "=== compute-sanitizer memcheck: $1 $2"
    # the mutants load through the CLI in a child process (CUPARQUET_BIN; the sanitizer follows
    # it) and on the device only with CUPARQUET_MUTANTS_DEVICE
    CUPARQUET_REQUIRE_GPU=1 CUPARQUET_BIN="$PWD/.dev/bin/cuparquet" CUPARQUET_MUTANTS_DEVICE=cuda:0 \
      PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing" \
      timeout "${SAN_TIMEOUT:-200}" compute-sanitizer --tool memcheck --target-processes all \
      --error-exitcode 9 --print-limit 20 .dev/bin/test-$1 "$2" --nocapture > "$out/sanitizer-$1.txt" 2>&1
    rc=$?; echo "exit $rc"
    [ $rc = 0 ] || tail -n 15 "$out/sanitizer-$1.txt"
    grep -E "ERROR SUMMARY|Invalid|test result|out of bounds" "$out/sanitizer-$1.txt" | head -12
  done
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  d=/tmp/bench-data
  CUPARQUET_BENCH_FILES=gzip-dict CUPARQUET_BENCH_BASELINE=0 CUPARQUET_BENCH_ROUNDS=1 \
    timeout 300 .dev/bin/bench-decode_device 2>&1 | grep -E "data ready|panicked"
  extra=""
  if python3 -c "import pyarrow" 2>/dev/null; then
    [ -f $d/lineitem-pyarrow-gzip.parquet ] || timeout 200 python3 scripts/cudf_compare.py \
      write-codecs $d/lineitem-24000000-gzip-dict.parquet $d gzip
    extra="pyarrow-gzip=$d/lineitem-pyarrow-gzip.parquet"
  fi
  # the host's share of the largest pages beside the kernel (CUPARQUET_TUNING=host_share=N)
  for share in ${SHARES:-0 15 30 100}; do
    echo "--- host_share=$share"
    CUPARQUET_TUNING=host_share=$share CUPARQUET_BENCH_FILES=gzip-dict \
      CUPARQUET_BENCH_EXTRA="$extra" CUPARQUET_BENCH_BASELINE=0 CUPARQUET_PROFILE=1 \
      CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} timeout 200 .dev/bin/bench-decode_device 2>&1 \
      | tee -a "$out/sweep.txt" | grep -E "GB/s|panicked"
  done
  echo "=== bench-decode_device: GZIP, against arrow-rs host + upload"
  CUPARQUET_BENCH_FILES=gzip-dict CUPARQUET_BENCH_EXTRA="$extra" CUPARQUET_PROFILE=1 \
    CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} CUPARQUET_BENCH_OUT="$out/decode.jsonl" \
    timeout 400 .dev/bin/bench-decode_device > "$out/decode.txt" 2>&1
  grep -E "GB/s|panicked|last round" "$out/decode.txt"
  if [ -d .dev/old ]; then
    echo "=== the build before (GZIP on the host's inflater), same files"
    # (that build's bench has no gzip-dict variant: the same file as an extra one)
    old_extra="gzip-dict=$d/lineitem-24000000-gzip-dict.parquet${extra:+,$extra}"
    CUPARQUET_BENCH_FILES=gzip-dict CUPARQUET_BENCH_EXTRA="$old_extra" CUPARQUET_BENCH_BASELINE=0 \
      CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} timeout 300 .dev/old/bench-decode_device 2>&1 \
      | grep -E "GB/s|panicked"
  fi
  if python3 -c "import pylibcudf" 2>/dev/null; then
    echo "=== cuDF"
    files="$d/lineitem-24000000-gzip-dict.parquet"
    [ -n "$extra" ] && files="$files $d/lineitem-pyarrow-gzip.parquet"
    timeout 200 python3 scripts/cudf_compare.py time $files 2>&1 | tee "$out/cudf.txt"
  fi
fi
