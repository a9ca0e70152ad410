#!/usr/bin/env bash
# GPU machine: nested fields and kept dictionaries decoded on the GPU (issue 15, items 2 and 3)
# in one call:
#   1. the packed test binaries with the GPU required (../shared/device/run.sh; TESTS=a name
#      filter every binary gets);
#   2. the nested and categorical files written by pyarrow (scripts/cudf_compare.py
#      write-nested, write-categorical; pyarrow from the wheels installed by `bash
#      .dev/wheels.sh install`), bench-decode_device on them and the lineitem SNAPPY file (GPU
#      against arrow-rs host + upload), again with every load keeping its dictionaries
#      (CUPARQUET_BENCH_KEEP_DICTIONARIES=1), then cuDF's read_parquet on the same files when
#      pylibcudf is installed;
#   3. compute-sanitizer memcheck over the generated files, the corpus and the kept
#      dictionaries through the device backends (conformance).
# SKIP_TESTS=1, SKIP_SANITIZER=1, SKIP_BENCH=1 leave a part out.
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "=== tests"
  # shellcheck disable=SC2086
  timeout "${TEST_TIMEOUT:-300}" bash .dev/run.sh ${TESTS:-} 2>&1 | tee "$out/tests.txt" \
    | grep -E "^===|test result|FAILED|panicked|device tests|left:|right:" | head -80
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  bash .dev/wheels.sh install >/dev/null && export PYTHONPATH=/tmp/site
  nested=/tmp/bench-data/nested-pyarrow.parquet
  categorical=/tmp/bench-data/categorical-pyarrow.parquet
  [ -f "$nested" ] || timeout 120 python3 scripts/cudf_compare.py write-nested /tmp/bench-data
  [ -f "$categorical" ] || timeout 120 python3 scripts/cudf_compare.py write-categorical /tmp/bench-data
  for keep in 0 1; do
    echo "=== bench-decode_device (keep dictionaries: $keep)"
    CUPARQUET_BENCH_EXTRA="nested-pyarrow=$nested,categorical-pyarrow=$categorical" \
      CUPARQUET_BENCH_KEEP_DICTIONARIES=$keep CUPARQUET_BENCH_OUT="$out/decode.jsonl" \
      CUPARQUET_BENCH_FILES="${FILES:-snappy-dict}" CUPARQUET_PROFILE=1 \
      CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} timeout 300 .dev/bin/bench-decode_device 2>&1 \
      | tee "$out/decode-keep$keep.txt"
  done
  echo "=== nested file in batches that cut its row groups (CLI, 5 loads each)"
  for rows in 1048576 262144 100000; do
    for k in 1 2 3 4 5; do
      .dev/bin/cuparquet load "$nested" --device cuda:0 --batch-rows "$rows" 2>&1 \
        | grep -E "^  wall|on the host|decoded on" | sed "s/^/batch-rows $rows: /"
    done
  done
  if python3 -c "import pylibcudf" 2>/dev/null; then
    echo "=== cuDF"
    timeout 120 python3 scripts/cudf_compare.py time "$nested" "$categorical" \
      /tmp/bench-data/lineitem-24000000-snappy-dict.parquet 2>&1 | tee "$out/cudf.txt"
  fi
fi
if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  bash .dev/prepare-cufile-vm.sh >/dev/null 2>&1
  export PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing"
  for t in ${SAN_TESTS:-generated_files_equal_arrow_rs corpus_files_equal_arrow_rs kept_dictionaries_equal_arrow_rs_dictionary_reads}; do
    echo "=== compute-sanitizer memcheck: conformance $t"
    CUPARQUET_REQUIRE_GPU=1 timeout "${SAN_TIMEOUT:-150}" compute-sanitizer --tool memcheck \
      --error-exitcode 9 --print-limit 20 .dev/bin/test-test-conformance \
      --exact "$t" > "$out/sanitizer-$t.txt" 2>&1
    echo "exit $?"
    grep -E "ERROR SUMMARY|Invalid|test result|out of bounds" "$out/sanitizer-$t.txt" | head -12
  done
fi
