#!/usr/bin/env bash
# GPU machine: the ramp (ReaderBuilder::with_first_batch_rows; the DataFusion scan's
# first_batch_rows) and what views would save DataFusion's operators (issue 16). Pack on the
# development machine:
#   bash ../shared/device/pack.sh -- --workspace --test gpu --test sql --test stream \
#     --test conformance --test errors --test spread --test cli
#   bash scripts/pack-bench.sh          # the release benches, .dev/bin compressed
#   git rev-parse --short HEAD > .dev/COMMIT
# and run with .dev carried:  PART=N bash scripts/device-ramp.sh
#   PART=1: the packed tests, the GPU required.
#   PART=all: the stream, SQL, GPU and spread tests, then PART=2, in one call.
#   PART=2: bench-sql_device, Q1, Q6 (then Q3, Q12 with QUERIES=...): cuparquet's scan with the
#           ramp (default) and without it (cuparquet-noramp), DataFusion's scan, the MemTable of
#           the same batches and the MemTable of those batches with views, in turns.
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
part=${PART:-1}
if [ "$part" = all ]; then
  # one call: the tests that cover the change (the stream, the SQL, the GPU decode, the
  # spread), then the bench
  bash .dev/prepare-cufile-vm.sh >/dev/null 2>&1 || echo "could not write the udev record"
  export PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing" CUPARQUET_BIN="$PWD/.dev/bin/cuparquet"
  for t in stream sql gpu spread; do
    echo "=== test-$t"
    CUPARQUET_REQUIRE_GPU=1 timeout ${TEST_LIMIT:-100} .dev/bin/test-test-$t --test-threads=2 2>&1 \
      | tee "$out/test-$t.txt" | grep -E "test result|FAILED|panicked" | head -20
  done
  part=2
  LIMIT=${LIMIT:-300}
fi
case "$part" in
1)
  CUPARQUET_REQUIRE_GPU=1 timeout 560 bash .dev/run.sh --test-threads=2 2>&1 | tee "$out/tests.txt" \
    | grep -E "^===|test result|FAILED|panicked|skipping|device tests" | head -80
  ;;
2)
  CUPARQUET_BENCH_QUERIES=${QUERIES:-Q1,Q6} \
    CUPARQUET_BENCH_SCANS=${SCANS:-cuparquet,cuparquet-noramp,cuparquet-utf8,datafusion,memtable,memtable-utf8} \
    CUPARQUET_BENCH_ROUNDS=${ROUNDS:-5} CUPARQUET_BENCH_OUT="$out/sql.jsonl" \
    timeout ${LIMIT:-540} .dev/bin/bench-sql_device 2>&1 | tee "$out/sql.txt" | grep -v "^\s*$" | head -60
  ;;
esac
