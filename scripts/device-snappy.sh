#!/usr/bin/env bash
# GPU machine: the SNAPPY kernel's runs, one call per PART. Before it, the nvCOMP and pyarrow
# wheels moved to /tmp/whl by earlier calls (.dev-whl/nv, .dev-whl/pa).
#   PART=tests: the packed test binaries with the GPU and nvCOMP required (the mutants through
#     cuda:0 too), then compute-sanitizer memcheck over the large-page test;
#   PART=sweep: the lineitem SNAPPY file of bench-decode_device (arrow-rs writer), the same
#     rows written by pyarrow (scripts/cudf_compare.py write-codecs) and the 800-row-group file
#     of bench-stream_device, at each share of SHARES (CUPARQUET_TUNING=host_share=N, which
#     applies to nvCOMP's codecs; it measured the SNAPPY pages shared with the host's cores,
#     since removed): bench-decode_device (load(), cuparquet only, the stages of a profiled
#     load), then bench-stream_device (load(), batches(), first batch; budgets BUDGETS);
#   PART=ab: bench-decode_device of this build against the one before (old-bench-decode_device),
#     same files and the pyarrow DELTA / BYTE_STREAM_SPLIT file (write-delta), alternately;
#   PART=race: scripts/device-racecheck.sh over the corpus and the writers' files (.dev/writers);
#   PART=first: bench-stream_device on the lineitem SNAPPY file (and the pyarrow one when it is
#     there), the SNAPPY placement by the model against every page on the kernel
#     (CUPARQUET_TUNING=snappy=device), alternately, PAIRS times: load(), batches(), first batch;
#   PART=lz4: bench-decode_device on the lineitem LZ4_RAW file (nvCOMP installed), profiled: the
#     load and its stages (the LZ4 block checks before nvCOMP, the nvCOMP call), ROUNDS rounds;
#   PART=split: bench-stream_device on the lineitem SNAPPY file, this build against the one
#     before (.dev/bin/old-bench-stream_device), alternately, PAIRS times (load(), batches(),
#     first batch, BUDGETS), then one profiled stream of each (the waves' stages); then
#     bench-decode_device's load() of this build and of the build before, alternately;
#   PART=budget: bench-stream_device under BUDGETS on the lineitem SNAPPY and uncompressed
#     files, PAIRS times; then one profiled stream under the first budget (its timeline: each
#     pass's reads, decodes and live bytes). (Its run of 2026-12-03 compared passes of a half,
#     a third and a quarter of the budget, and the largest pages split or not, with switches
#     since removed: benches/history/2026-12-03.md.)
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
wheels
d=/tmp/bench-data
case "${PART:-tests}" in
tests)
  echo "=== tests (GPU and nvCOMP required)"
  CUPARQUET_MUTANTS_DEVICE=cuda:0 CUPARQUET_REQUIRE_NVCOMP=1 timeout "${TEST_TIMEOUT:-400}" bash .dev/run.sh 2>&1 | tee "$out/tests.txt" \
    | grep -E "^===|test result|FAILED|panicked|device tests|skipping"
  echo "=== compute-sanitizer memcheck: gpu_large_pages_equal_arrow_rs"
  CUPARQUET_REQUIRE_GPU=1 timeout "${SAN_TIMEOUT:-150}" compute-sanitizer --tool memcheck \
    --error-exitcode 9 --print-limit 20 .dev/bin/test-test-gpu --exact gpu_large_pages_equal_arrow_rs \
    > "$out/sanitizer.txt" 2>&1
  echo "exit $?"
  grep -E "ERROR SUMMARY|Invalid|test result|out of bounds" "$out/sanitizer.txt" | head -12
  ;;
sweep)
  echo "=== files"
  CUPARQUET_BENCH_FILES=snappy-dict CUPARQUET_BENCH_BASELINE=0 CUPARQUET_BENCH_ROUNDS=1 \
    timeout 200 .dev/bin/bench-decode_device 2>&1 | grep -E "data ready|panicked"
  if [ ! -f $d/lineitem-pyarrow-snappy.parquet ]; then
    timeout 200 python3 scripts/cudf_compare.py write-codecs $d/lineitem-24000000-snappy-dict.parquet \
      $d snappy 2>&1 | tail -2
  fi
  [ -f $d/delta-split-pyarrow.parquet ] || timeout 120 python3 scripts/cudf_compare.py write-delta $d >/dev/null
  small=$d/small-row-groups-8m-800rg-snappy.parquet
  [ -f $small ] || CUPARQUET_BENCH_FILES=small-row-groups CUPARQUET_BENCH_ROUNDS=1 \
    CUPARQUET_BENCH_BUDGETS=none timeout 200 .dev/bin/bench-stream_device 2>&1 | grep -E "panicked" 
  ls -la $d
  extra="pyarrow-snappy=$d/lineitem-pyarrow-snappy.parquet"
  for share in ${SHARES:-0 10 15 25 40}; do
    tuning=""; [ "$share" != default ] && tuning="host_share=$share"
    echo "--- host_share=$share" | tee -a "$out/sweep.txt"
    CUPARQUET_TUNING="$tuning" CUPARQUET_BENCH_FILES=snappy-dict \
      CUPARQUET_BENCH_EXTRA="$extra,small-row-groups=$small" CUPARQUET_BENCH_BASELINE=0 \
      CUPARQUET_PROFILE=1 CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} \
      timeout 200 .dev/bin/bench-decode_device 2>&1 | tee -a "$out/sweep.txt" \
      | grep -E "GB/s|panicked|stages:" \
      | sed -E "s/stages:.*(SNAPPY kernels [0-9.]+ ms).*(host decompression beside the SNAPPY kernels [0-9.]+ ms).*/\1, \2/" \
      | sed "s|^|$share |"
    CUPARQUET_TUNING="$tuning" CUPARQUET_BENCH_FILES=snappy-dict CUPARQUET_BENCH_EXTRA="$extra" \
      CUPARQUET_BENCH_BUDGETS=${BUDGETS:-2GiB,512MiB} CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} \
      CUPARQUET_BENCH_OUT="$out/stream-$share.jsonl" \
      timeout 300 .dev/bin/bench-stream_device 2>&1 | tee -a "$out/sweep.txt" \
      | grep -E "batch rows|budget|panicked" | sed "s|^|$share |"
  done
  ;;
ab)
  # the SNAPPY kernel of this checkout against the one before (.dev/bin/old-bench-decode_device,
  # packed beside it), alternately, PAIRS times, at the built-in share and at share 0 (every page
  # on the kernel)
  extra="pyarrow-snappy=$d/lineitem-pyarrow-snappy.parquet,small-row-groups=$d/small-row-groups-8m-800rg-snappy.parquet,delta-split-pyarrow=$d/delta-split-pyarrow.parquet"
  for k in $(seq 1 "${PAIRS:-2}"); do
    for build in old new; do
      bin=.dev/bin/bench-decode_device; [ $build = old ] && bin=.dev/bin/old-bench-decode_device
      for share in default 0; do
        tuning=""; [ "$share" != default ] && tuning="host_share=$share"
        CUPARQUET_TUNING="$tuning" CUPARQUET_BENCH_FILES=snappy-dict CUPARQUET_BENCH_EXTRA="$extra"           CUPARQUET_BENCH_BASELINE=0 CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5}           timeout 200 "$bin" 2>&1 | tee -a "$out/ab.txt" | grep -E "GB/s|panicked"           | sed "s|^|$build share=$share pair $k |"
      done
    done
  done
  ;;
first)
  extra=""; [ -f $d/lineitem-pyarrow-snappy.parquet ] && extra="pyarrow-snappy=$d/lineitem-pyarrow-snappy.parquet"
  for k in $(seq 1 "${PAIRS:-2}"); do
    for tuning in "" snappy=device; do
      CUPARQUET_TUNING="$tuning" CUPARQUET_BENCH_FILES=snappy-dict CUPARQUET_BENCH_EXTRA="$extra" \
        CUPARQUET_BENCH_BUDGETS=${BUDGETS:-2GiB} CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} \
        timeout 200 .dev/bin/bench-stream_device 2>&1 | tee -a "$out/first.txt" \
        | grep -E "batch rows|budget|panicked|first" | sed "s|^|${tuning:-model} pair $k |"
    done
  done
  ;;
lz4)
  CUPARQUET_BENCH_FILES=lz4raw-dict CUPARQUET_BENCH_BASELINE=0 CUPARQUET_PROFILE=1 \
    CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} timeout 300 .dev/bin/bench-decode_device 2>&1 \
    | tee -a "$out/lz4.txt" | grep -E "GB/s|panicked|stages|data ready" \
    | sed -E 's/stages:.*(nvCOMP call [0-9.]+ ms).*/\1/; s/(LZ4 block checks [0-9.]+ ms)/\n  \1/'
  grep -oE "LZ4 block checks [0-9.]+ ms|nvCOMP call [0-9.]+ ms" "$out/lz4.txt" | sort | uniq -c | head -20
  ;;
split)
  for k in $(seq 1 "${PAIRS:-2}"); do
    for build in old new; do
      bin=.dev/bin/bench-stream_device; [ $build = old ] && bin=.dev/bin/old-bench-stream_device
      CUPARQUET_BENCH_FILES=snappy-dict CUPARQUET_BENCH_BUDGETS=${BUDGETS:-2GiB} \
        CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} timeout 200 "$bin" 2>&1 | tee -a "$out/split.txt" \
        | grep -E "batch rows|budget|panicked|first" | sed "s|^|$build pair $k |"
    done
  done
  for build in old new; do
    bin=.dev/bin/bench-stream_device; [ $build = old ] && bin=.dev/bin/old-bench-stream_device
    CUPARQUET_PROFILE=1 CUPARQUET_BENCH_FILES=snappy-dict CUPARQUET_BENCH_BUDGETS=none \
      CUPARQUET_BENCH_ROUNDS=1 timeout 200 "$bin" > "$out/split-profile-$build.txt" 2>&1
    grep -oE "kernel snappy_[a-z]+ [0-9.]+ ms" "$out/split-profile-$build.txt" | head -16 | sed "s|^|$build |"
  done
  for k in $(seq 1 "${PAIRS:-2}"); do
    for run in old new; do
      bin=.dev/bin/bench-decode_device; [ $run = old ] && bin=.dev/bin/old-bench-decode_device
      CUPARQUET_BENCH_FILES=snappy-dict CUPARQUET_BENCH_BASELINE=0 \
        CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} timeout 200 "$bin" 2>&1 | tee -a "$out/split-load.txt" \
        | grep -E "GB/s|panicked" | sed "s|^|$run pair $k |"
    done
  done
  ;;
budget)
  for k in $(seq 1 "${PAIRS:-2}"); do
    CUPARQUET_BENCH_FILES=snappy-dict,plain-uncompressed CUPARQUET_BENCH_BUDGETS=${BUDGETS:-2GiB,512MiB} \
      CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} timeout 250 .dev/bin/bench-stream_device 2>&1 \
      | tee -a "$out/budget.txt" | grep -E "budget|no budget|batch rows|panicked" | sed "s|^|pair $k |"
  done
  CUPARQUET_PROFILE=1 CUPARQUET_BENCH_FILES=snappy-dict CUPARQUET_BENCH_BUDGETS=${BUDGETS%%,*} \
    CUPARQUET_BENCH_ROUNDS=1 timeout 200 .dev/bin/bench-stream_device > "$out/budget-profile.txt" 2>&1
  grep -E "budget" "$out/budget-profile.txt"
  ;;
budgetab)
  # the memory budget of this build against the one before (.dev/bin/old-bench-stream_device),
  # both lineitem files (SNAPPY, uncompressed) under BUDGETS, alternately, PAIRS times
  for k in $(seq 1 "${PAIRS:-2}"); do
    for build in old new; do
      bin=.dev/bin/bench-stream_device; [ $build = old ] && bin=.dev/bin/old-bench-stream_device
      CUPARQUET_BENCH_FILES=snappy-dict,plain-uncompressed CUPARQUET_BENCH_BUDGETS=${BUDGETS:-2GiB,512MiB} \
        CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} timeout 250 "$bin" 2>&1 | tee -a "$out/budgetab.txt" \
        | grep -E "budget|no budget|batch rows|panicked" | sed "s|^|$build pair $k |"
    done
  done
  ;;
sync)
  # compute-sanitizer synccheck and racecheck over the SNAPPY large-page and split tests
  for tool in synccheck racecheck; do
    for t in ${SYNC_TESTS:-gpu_large_pages_equal_arrow_rs}; do
      CUPARQUET_REQUIRE_GPU=1 timeout "${SAN_TIMEOUT:-150}" compute-sanitizer --tool $tool \
        --error-exitcode 9 --print-limit 20 .dev/bin/test-test-gpu --exact "$t" > "$out/$tool-$t.txt" 2>&1
      echo "$tool $t: exit $?"
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Barrier error|test result" "$out/$tool-$t.txt" | head -6
    done
  done
  ;;
race)
  # racecheck and synccheck over the corpus's byte-array and SNAPPY files and the writers' files
  # (scripts/writers.py, packed in .dev/writers), this build and the one before
  EXTRA_FILES="$(ls .dev/writers/*.parquet 2>/dev/null | tr '\n' ' ')" bash scripts/device-racecheck.sh
  ;;
esac
