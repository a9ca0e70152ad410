#!/usr/bin/env bash
# GPU machine: issue 18's device checks in one call, after
#   PACK_XZ=1 bash ../shared/device/pack.sh -- --test gpu_decode --test conformance --test faults \
#     --test mutants --test soak --test emulated
#   python3 scripts/writers.py .dev/writers --rows 5000     (pyarrow, DuckDB, Polars files)
#   1. the packed tests with the GPU required: the kernels against arrow-rs (gpu_decode,
#      conformance's device backends), faults on the GPU (device allocation, cuFile, pread),
#      the structured mutants through cuda:0 as well as the host (CUPARQUET_MUTANTS_DEVICE,
#      the writers' files too; mutants kept for step 3), the bombs' peak memory on the GPU,
#      and the soak (CUPARQUET_SOAK loads from 16 threads, device memory before and after);
#   2. compute-sanitizer racecheck and synccheck over device loads of the writers' files and
#      the whole corpus, data/ and bad_data/ (scripts/device-racecheck.sh, FILES=all);
#   3. compute-sanitizer memcheck over a sample of the mutants (MEMCHECK_SAMPLE, default 60).
set -u -o pipefail
cd "$(dirname "$0")/.."
[ -f .dev/bin.tar.xz ] && [ ! -d .dev/bin ] && tar -C .dev -xJf .dev/bin.tar.xz
export CUPARQUET_KERNEL_CACHE=/tmp/cuparquet-kernels CUPARQUET_REQUIRE_GPU=1
export PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing" CUPARQUET_BIN="$PWD/.dev/bin/cuparquet"
W="$PWD/.dev/writers"
step() { echo "=== $* ($(date +%T))"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
bin() { ls .dev/bin/test-*"$1"* 2>/dev/null | head -1; }
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  for t in ${TESTS:-gpu_decode conformance faults emulated}; do
    step "test $t"; timeout 300 "$(bin "$t")" 2>&1 | grep -E -A2 "test result|panicked|FAILED|skipping" | head -12
  done
  step "mutants through host and cuda:0"
  rm -rf /tmp/keep
  CUPARQUET_MUTANTS_DEVICE=cuda:0 CUPARQUET_MUTANTS=${MUTANTS:-1} CUPARQUET_MUTANTS_FILES="$W" \
    CUPARQUET_MUTANTS_KEEP=/tmp/keep timeout 400 "$(bin mutants)" --nocapture --test-threads 1 2>&1 \
    | grep -vE "^test .* ok$" | tail -60
  step "soak"
  CUPARQUET_SOAK=${SOAK:-1000} CUPARQUET_SOAK_FILES="$W" timeout 300 "$(bin soak)" --nocapture 2>&1 \
    | grep -E "soak:|test result|panicked" | head
fi
if [ "${SKIP_RACECHECK:-0}" != 1 ]; then
  step "racecheck / synccheck"
  FILES=all BINS=.dev/bin/cuparquet EXTRA_FILES="$(ls "$W"/*.parquet | tr '\n' ' ')" timeout 600 bash scripts/device-racecheck.sh
fi
if [ "${SKIP_MEMCHECK:-0}" != 1 ] && [ -d /tmp/keep ]; then
  step "memcheck over mutants"
  n=0
  for f in $(ls /tmp/keep/*.parquet | awk 'NR % 7 == 1' | head -"${MEMCHECK_SAMPLE:-60}"); do
    out=$(timeout 120 compute-sanitizer --tool memcheck --print-limit 3 .dev/bin/cuparquet load --device cuda:0 --quiet "$f" 2>&1)
    echo "$(basename "$f"): $(echo "$out" | grep -E "ERROR SUMMARY" | tr '\n' ' ')"
    n=$((n + 1))
  done
  echo "memcheck: $n mutants"
fi
