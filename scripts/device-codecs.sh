#!/usr/bin/env bash
# GPU machine: ZSTD and LZ4_RAW pages split between nvCOMP and the host's cores (issue 15,
# item 4) in one call. Before it, the cuDF parts (../shared/device/wheels.sh cudf: cuDF 26.10
# and the nvCOMP 5.3 it uses) and the pyarrow wheel moved to /tmp/whl by earlier calls.
#   1. `cuparquet doctor`'s nvCOMP line;
#   2. the packed test binaries with nvCOMP required (SKIP_TESTS=1 leaves them out), and
#      compute-sanitizer memcheck over the nvCOMP test (SKIP_SANITIZER=1);
#   3. the lineitem files of bench-decode_device (arrow-rs writer: ZSTD, LZ4_RAW, SNAPPY with
#      dictionaries) and the same rows written by pyarrow (scripts/cudf_compare.py
#      write-codecs); bench-decode_device on each file (cuparquet only, ROUNDS loads after a
#      warm-up) at each host share of SHARES (CUPARQUET_TUNING=host_share=N; `default` is the
#      built-in share), then once with the built-in share against arrow-rs host + upload;
#      The pyarrow-written DELTA / BYTE_STREAM_SPLIT file (write-delta) joins that last run.
#   4. cuDF's read_parquet on the same files.
# PYARROW_FILES=0 leaves the pyarrow-written files out; SKIP_FINAL=1 stops after the sweep; EXP=VAR=1
# adds a sweep line with that variable set (experiments).
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
wheels
echo "=== doctor"
.dev/bin/cuparquet doctor 2>&1 | grep -i nvcomp
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "=== tests (nvCOMP required)"
  CUPARQUET_REQUIRE_NVCOMP=1 timeout "${TEST_TIMEOUT:-300}" bash .dev/run.sh 2>&1 | tee "$out/tests.txt" \
    | grep -E "^===|test result|FAILED|panicked|device tests|skipping"
fi
if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  echo "=== compute-sanitizer memcheck: test-test-nvcomp"
  CUPARQUET_REQUIRE_GPU=1 CUPARQUET_REQUIRE_NVCOMP=1 timeout "${SAN_TIMEOUT:-200}" compute-sanitizer \
    --tool memcheck --error-exitcode 9 --print-limit 20 .dev/bin/test-test-nvcomp \
    --exact gpu_nvcomp_decompresses_its_codecs > "$out/sanitizer-nvcomp.txt" 2>&1
  echo "exit $?"
  grep -E "ERROR SUMMARY|Invalid|test result|out of bounds" "$out/sanitizer-nvcomp.txt" | head -12
fi
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  d=/tmp/bench-data
  echo "=== files"
  CUPARQUET_BENCH_FILES=zstd-dict,lz4raw-dict,snappy-dict CUPARQUET_BENCH_BASELINE=0 \
    CUPARQUET_BENCH_ROUNDS=1 timeout 300 .dev/bin/bench-decode_device 2>&1 | grep -E "data ready|panicked"
  if [ "${PYARROW_FILES:-1}" = 1 ] && [ ! -f $d/lineitem-pyarrow-zstd.parquet ]; then
    timeout 200 python3 scripts/cudf_compare.py write-codecs \
      $d/lineitem-24000000-snappy-dict.parquet $d
  fi
  ls -la $d
  extra="pyarrow-zstd=$d/lineitem-pyarrow-zstd.parquet,pyarrow-lz4=$d/lineitem-pyarrow-lz4.parquet"
  [ "${PYARROW_FILES:-1}" = 0 ] && extra=""
  # each setting's loads, and the stages of its last (profiled) load: the nvCOMP call against
  # the host's pages beside it
  sweep() {
    CUPARQUET_BENCH_FILES=zstd-dict,lz4raw-dict CUPARQUET_BENCH_EXTRA="$extra" \
      CUPARQUET_BENCH_BASELINE=0 CUPARQUET_PROFILE=1 CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} \
      timeout 200 .dev/bin/bench-decode_device 2>&1 | tee -a "$out/sweep.txt" \
      | grep -E "GB/s|panicked|stages:" \
      | sed -E "s/stages:.*(nvCOMP call [0-9.]+ ms).*(host decompression beside nvCOMP [0-9.]+ ms).*/\1, \2/" \
      | sed "s|^|$1 |"
  }
  for share in ${SHARES:-0 10 20 30 40 100}; do
    tuning=""; [ "$share" != default ] && tuning="host_share=$share"
    echo "--- host_share=$share" | tee -a "$out/sweep.txt"
    CUPARQUET_TUNING="$tuning" sweep "share=$share"
  done
  if [ -n "${EXP:-}" ]; then
    echo "--- $EXP, host_share=0" | tee -a "$out/sweep.txt"
    export "$EXP"
    CUPARQUET_TUNING=host_share=0 sweep exp
    unset "${EXP%%=*}"
  fi
  [ "${SKIP_FINAL:-0}" = 1 ] && exit 0
  delta=$d/delta-split-pyarrow.parquet
  if [ "${PYARROW_FILES:-1}" = 1 ]; then
    [ -f "$delta" ] || timeout 120 python3 scripts/cudf_compare.py write-delta $d >/dev/null
    extra="$extra,delta-split-pyarrow=$delta"
  fi
  echo "=== bench-decode_device, the built-in share, against arrow-rs host + upload"
  CUPARQUET_BENCH_FILES=zstd-dict,lz4raw-dict,snappy-dict CUPARQUET_BENCH_EXTRA="$extra" \
    CUPARQUET_PROFILE=1 CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} CUPARQUET_BENCH_OUT="$out/decode.jsonl" \
    timeout 400 .dev/bin/bench-decode_device > "$out/decode.txt" 2>&1
  grep -E "GB/s|panicked|last round" "$out/decode.txt"
  if python3 -c "import pylibcudf" 2>/dev/null; then
    echo "=== cuDF"
    timeout 200 python3 scripts/cudf_compare.py time $d/lineitem-24000000-zstd-dict.parquet \
      $d/lineitem-24000000-lz4raw-dict.parquet $d/lineitem-pyarrow-zstd.parquet \
      $d/lineitem-pyarrow-lz4.parquet $d/lineitem-24000000-snappy-dict.parquet $delta 2>&1 \
      | tee "$out/cudf.txt"
  fi
fi
