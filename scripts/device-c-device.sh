#!/usr/bin/env bash
# GPU machine: the Arrow C Device Data Interface and the C API, in one call:
#   1. every packed test binary with the GPU required (../shared/device/run.sh), c_device's
#      round trips and streams on cuda:0 among them;
#   2. compute-sanitizer memcheck over c_device's release and stream tests (exported device
#      buffers freed once, by whichever thread releases them);
#   3. the C example (examples/c/stream.c, .dev/bin/c-stream) on cuda:0 and on the host;
#   4. cuDF: pylibcudf 26.10 (from the parts carried before, ../shared/device/wheels.sh cudf,
#      and a pyarrow wheel moved to /tmp/whl) imports the exported batches
#      (scripts/cudf_c_device.py).
# Pack first: bash ../shared/device/pack.sh && bash scripts/pack-capi.sh
# SKIP_TESTS=1, SKIP_SANITIZER=1, SKIP_CUDF=1 leave a part out.
set -u -o pipefail
cd "$(dirname "$0")/.."
[ -f .dev/bin.tar.xz ] && [ ! -d .dev/bin ] && tar -C .dev -xJf .dev/bin.tar.xz
out=${OUT:-/tmp/out}; mkdir -p "$out"
export INSTA_WORKSPACE_ROOT="$PWD" INSTA_UPDATE=no CUPARQUET_KERNEL_CACHE=/tmp/cuparquet-kernels
echo "=== machine"; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  echo "=== tests"
  timeout "${TEST_TIMEOUT:-300}" bash .dev/run.sh 2>&1 | tee "$out/tests.txt" \
    | grep -E "^===|test result|FAILED|panicked|device tests"
fi
export PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing"
if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
  for t in release_gives streams_of_files; do
    echo "=== compute-sanitizer memcheck: c_device $t"
    CUPARQUET_REQUIRE_GPU=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
      --print-limit 20 .dev/bin/test-test-c_device "$t" > "$out/memcheck-$t.txt" 2>&1
    echo "exit $?"
    grep -E "ERROR SUMMARY|Invalid|test result|out of bounds" "$out/memcheck-$t.txt" | head -8
  done
fi
echo "=== the C example"
.dev/bin/c-stream testdata/lineitem-sample.parquet - "l_quantity < 10" cuda:0
.dev/bin/c-stream testdata/lineitem-sample.parquet - "l_quantity < 10" host
if [ "${SKIP_CUDF:-0}" != 1 ]; then
  echo "=== cuDF imports the exported batches"
  bash .dev/wheels.sh install >/dev/null && export PYTHONPATH=/tmp/site
  python3 -c 'import pyarrow, pylibcudf; print("pyarrow", pyarrow.__version__)'
  PYTHONUNBUFFERED=1 timeout 300 python3 -X faulthandler scripts/cudf_c_device.py .dev/bin/libcuparquet.so /tmp 2>&1 \
    | tee "$out/cudf.txt"
fi
