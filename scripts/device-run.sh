#!/usr/bin/env bash
# GPU machine: one full test run. Unpacks the binaries, runs every test binary with the GPU
# required (../shared/device/run.sh) with the udev record, then the GPU tests again without it
# (cuFile registration fails: the reader must stage by itself), then CLI and doctor checks.
# Prepare on the development machine:
#   touch src/main.rs && bash ../shared/device/pack.sh && bash scripts/pack-bench.sh
# and run with .dev carried:  bash scripts/device-run.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
[ -f .dev/bin.tar.xz ] && tar -C .dev -xJf .dev/bin.tar.xz
out=${OUT:-/tmp/out}; mkdir -p "$out"
# insta finds snapshots from the repo root here, not from the build machine's path
export INSTA_WORKSPACE_ROOT="$PWD" INSTA_UPDATE=no CUPARQUET_KERNEL_CACHE=/tmp/cuparquet-kernels
echo "=== machine"; nproc; free -g | head -2; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "=== tests (udev record written: cuFile can register files)"
bash .dev/run.sh 2>&1 | tee "$out/tests.txt" | grep -E "^===|test result|FAILED|panicked|device tests"
echo "=== GPU tests without the udev record (registration fails)"
UDEV=none bash .dev/run.sh gpu_ --nocapture 2>&1 | tee "$out/tests-noudev.txt" \
  | grep -E "^===|test result|FAILED|panicked|device tests|registration|cuFile counters|byte-exact"
bash .dev/prepare-cufile-vm.sh >/dev/null 2>&1 || echo "could not restore the udev record"
echo "=== GPU tests with the record again, verbose"
PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing" CUPARQUET_REQUIRE_GPU=1 \
  .dev/bin/test-test-gpu --nocapture > "$out/tests-gpu-verbose.txt" 2>&1
echo "test-gpu exit $? (a signal at exit would show here)"
grep -E "test result|FAILED|panicked|registration|cuFile counters|byte-exact|page headers on the GPU|decoded on the GPU|equal to the reference|round-tripped" "$out/tests-gpu-verbose.txt"
cp -f cufile.log "$out/" 2>/dev/null
echo "=== cuparquet load --device cuda:0 --report on the bundled sample"
.dev/bin/cuparquet load testdata/lineitem-sample.parquet --device cuda:0 --output /tmp/s.arrow 2>&1 | tee "$out/load-sample.txt"
echo "=== the same, compat_mode=off (cuFile forced)"
.dev/bin/cuparquet load testdata/lineitem-sample.parquet --device cuda:0 --compat-mode off 2>&1 | tee -a "$out/load-sample.txt"
echo "=== auto"
.dev/bin/cuparquet load testdata/lineitem-sample.parquet 2>&1 | tee -a "$out/load-sample.txt"
echo "=== doctor"
.dev/bin/cuparquet doctor --path "$PWD/testdata/lineitem-sample.parquet" 2>&1 | tee "$out/doctor.txt"
