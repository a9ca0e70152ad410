#!/usr/bin/env bash
# GPU machine: cuparquet's scan under datafusion-distributed (issue 21). The loopback tests
# with the GPU required (2 and 3 workers in one process, all on the one GPU), then
# bench-distributed_device: Q1, Q3, Q6, Q12 on one machine, 1 worker and 2 workers sharing the
# GPU (each with its own budget, CUPARQUET_BENCH_WORKER_BUDGET), DataFusion's own scan beside.
# Packed binaries: .dev/bin/test-test-distributed, .dev/bin/bench-distributed_device.
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
echo "=== distributed tests (GPU required)"
CUPARQUET_REQUIRE_GPU=1 timeout "${TEST_TIMEOUT:-200}" .dev/bin/test-test-distributed --nocapture \
  > "$out/distributed-tests.txt" 2>&1
echo "exit $?"
grep -E "test result|FAILED|panicked|batches decoded|a dead worker|mid-query" "$out/distributed-tests.txt" | head -30
echo "=== bench-distributed_device"
CUPARQUET_BENCH_ROUNDS=${ROUNDS:-3} timeout "${BENCH_TIMEOUT:-300}" .dev/bin/bench-distributed_device 2>&1 \
  | tee "$out/distributed-bench.txt" | grep -vE "^\s*$" | head -40
