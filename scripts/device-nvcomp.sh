#!/usr/bin/env bash
# GPU machine: nvCOMP page decompression (issue 15, item 4) in one call. Before it, one call that
# carries the nvCOMP wheel (../shared/device/wheels.sh nvcomp, or nvcomp6) with
#   carry [".dev-whl"], command "mkdir -p /tmp/whl && mv .dev-whl/*.whl /tmp/whl/"
# and, for cuDF in the same run, the cuDF parts and the pyarrow wheel (see device-decode2.sh).
#   1. `cuparquet doctor`'s nvCOMP line;
#   2. the packed test binaries with nvCOMP required (CUPARQUET_REQUIRE_NVCOMP=1): every device
#      backend of the conformance test then has nvCOMP decompress ZSTD, LZ4_RAW and GZIP pages;
#   3. compute-sanitizer memcheck over the nvCOMP test, and with SANITIZE_CORPUS=1 over the
#      corpus and bad_data (SKIP_SANITIZER=1 leaves it out);
#   4. bench-decode_device on the lineitem files (ZSTD, LZ4_RAW, SNAPPY, uncompressed) against
#      arrow-rs host + upload; ZSTD without nvCOMP (CUPARQUET_NVCOMP=off) and with it, PAIRS
#      times alternately; then cuDF on the same files where it was installed (SKIP_BENCH=1
#      leaves 4 out).
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
wheels
echo "=== doctor"
.dev/bin/cuparquet doctor 2>&1 | grep -i nvcomp
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "=== tests (nvCOMP required)"
  CUPARQUET_REQUIRE_NVCOMP=1 timeout "${TEST_TIMEOUT:-300}" bash .dev/run.sh --nocapture 2>&1 | tee "$out/tests.txt" \
    | grep -E "^===|test result|FAILED|panicked|device tests|skipping|damaged"
fi
if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  export PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing"
  sans="test-test-nvcomp:gpu_nvcomp_decompresses_its_codecs"
  [ "${SANITIZE_CORPUS:-0}" = 1 ] && sans="$sans test-test-conformance:corpus_files_equal_arrow_rs test-test-errors:bad_data_files_fail_clearly_or_match_arrow_rs"
  for t in $sans; do
    t=${t/:/ }
    set -- $t
    echo "=== compute-sanitizer memcheck: $1 $2"
    CUPARQUET_REQUIRE_GPU=1 timeout "${SAN_TIMEOUT:-150}" compute-sanitizer --tool memcheck \
      --error-exitcode 9 --print-limit 20 ".dev/bin/$1" --exact "$2" > "$out/sanitizer-$1.txt" 2>&1
    echo "exit $?"
    grep -E "ERROR SUMMARY|Invalid|test result|out of bounds" "$out/sanitizer-$1.txt" | head -12
  done
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  files=${FILES:-zstd-dict,lz4raw-dict,snappy-dict,plain-uncompressed}
  echo "=== bench-decode_device with nvCOMP, baseline arrow-rs host + upload"
  CUPARQUET_BENCH_FILES="$files" CUPARQUET_PROFILE=1 CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} \
    CUPARQUET_BENCH_OUT="$out/decode.jsonl" timeout 400 .dev/bin/bench-decode_device 2>&1 | tee "$out/decode.txt"
  for k in $(seq 1 "${PAIRS:-2}"); do
    echo "--- pair $k: ZSTD without nvCOMP, then with"
    for nv in off "$CUPARQUET_NVCOMP"; do
      CUPARQUET_NVCOMP=$nv CUPARQUET_BENCH_BASELINE=0 CUPARQUET_BENCH_FILES=zstd-dict \
        CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} timeout 150 .dev/bin/bench-decode_device 2>&1 \
        | grep -E "GB/s|nvCOMP|panicked" | sed "s|^|nvcomp=${nv##*/} |"
    done
  done
  if python3 -c "import pylibcudf" 2>/dev/null; then
    echo "=== cuDF"
    timeout 150 python3 scripts/cudf_compare.py time \
      /tmp/bench-data/lineitem-24000000-zstd-dict.parquet \
      /tmp/bench-data/lineitem-24000000-lz4raw-dict.parquet \
      /tmp/bench-data/lineitem-24000000-snappy-dict.parquet \
      /tmp/bench-data/lineitem-24000000-plain-uncompressed.parquet 2>&1 | tee "$out/cudf.txt"
  fi
fi
