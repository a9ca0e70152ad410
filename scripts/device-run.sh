#!/usr/bin/env bash
# GPU machine: one full run. Unpacks the binaries, runs every test binary with the GPU required
# (../shared/device/run.sh), then the host benchmarks. Prepare on the development machine:
#   bash ../shared/device/pack.sh && bash scripts/pack-bench.sh
# and run with .dev carried:  bash scripts/device-run.sh
set -u -o pipefail
cd "$(dirname "$0")/.."
[ -f .dev/bin.tar.xz ] && tar -C .dev -xJf .dev/bin.tar.xz
out=${OUT:-/tmp/out}; mkdir -p "$out"
# insta finds snapshots from the repo root here, not from the build machine's path
export INSTA_WORKSPACE_ROOT="$PWD" INSTA_UPDATE=no
echo "=== machine"; nproc; free -g | head -2; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "=== tests"
bash .dev/run.sh 2>&1 | tee "$out/tests.txt" | grep -E "^===|test result|FAILED|panicked|device tests"
echo "=== cuparquet load (auto) on the bundled sample"
.dev/bin/cuparquet load testdata/lineitem-sample.parquet --report 2>&1 | tee "$out/load-sample.txt"
echo "=== --device cuda:0 (a clear error until GPU loading lands)"
.dev/bin/cuparquet load testdata/lineitem-sample.parquet --device cuda:0; echo "exit $?"
bash scripts/device-host-bench.sh
