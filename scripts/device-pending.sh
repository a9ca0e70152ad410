#!/usr/bin/env bash
# GPU machine: the device work queued on 2026-12-04, when no device was lent, in two calls of at
# most ten minutes. Build the branch wip/device-next (main + the shared pinned pool of issue 19 +
# the CUPARQUET_EXP_EDGES knob of issue 14) on the development machine:
#   git checkout wip/device-next
#   PACK_XZ=0 bash ../shared/device/pack.sh -- --test gpu --test conformance --test errors \
#     --test mutants --test spread --test cli --test stream --test nvcomp
#   bash scripts/pack-bench.sh        (bench-decode_device, bench-stream_device, …)
#   AB_TESTS="" BENCHES=decode_device bash scripts/pack-ab.sh wip/inflate-pairs && \
#     mv .dev/old .dev/pairs     (the pairs variant of the GZIP kernel, for PAIRS=1), then
#   AB_TESTS="" BENCHES=decode_device bash scripts/pack-ab.sh 07caacf   (.dev/old: GZIP on the
#     host's inflater, before the kernel)
# and carry .dev (with the cuDF and pyarrow wheels moved to /tmp/whl by earlier calls where a
# cuDF figure is wanted).
#   PART=1: every packed test with the GPU required; memcheck over the GZIP kernel's tests; the
#           GZIP bench (host share swept, against arrow-rs, the build before, cuDF); the spread
#           over this machine's devices (DEVICES=0 on one GPU, 0,1 on nvidia-h200-x2).
#   PART=2: issue 14's edges: bench-stream_device on the 2 GiB budget, CUPARQUET_EXP_EDGES none,
#           first, last and first,last in turn (ROUNDS each); with PAIRS=1, the GZIP bench of the
#           pairs variant beside main's kernel, alternately.
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
case "${PART:-1}" in
1)
  bash .dev/prepare-cufile-vm.sh >/dev/null 2>&1 || echo "could not write the udev record"
  echo "=== tests (GPU required)"
  CUPARQUET_REQUIRE_GPU=1 timeout 360 bash .dev/run.sh 2>&1 | tee "$out/tests.txt" \
    | grep -E "^===|test result|FAILED|panicked|skipping" | head -60
  SKIP_TESTS=1 ROUNDS=${ROUNDS:-3} bash scripts/device-gzip.sh
  DEVICES=${DEVICES:-0} ROUNDS=${ROUNDS:-3} bash scripts/device-spread.sh
  ;;
2)
  for edges in none first last first,last; do
    echo "--- CUPARQUET_EXP_EDGES=$edges"
    e=$edges; [ "$e" = none ] && e=""
    CUPARQUET_EXP_EDGES=$e CUPARQUET_BENCH_FILES=${FILES:-plain-uncompressed,snappy-dict} \
      CUPARQUET_BENCH_BUDGETS=2GiB CUPARQUET_BENCH_ROUNDS=${ROUNDS:-3} \
      timeout 150 .dev/bin/bench-stream_device 2>&1 | tee -a "$out/edges.txt" \
      | grep -E "budget|GB/s|panicked" | head -12
  done
  if [ "${PAIRS:-0}" = 1 ] && [ -x .dev/pairs/bench-decode_device ]; then
    for round in 1 2; do
      for b in .dev/bin .dev/pairs; do
        echo "--- GZIP kernel of $b (round $round)"
        CUPARQUET_BENCH_FILES=gzip-dict CUPARQUET_BENCH_BASELINE=0 CUPARQUET_BENCH_ROUNDS=${ROUNDS:-3} \
          timeout 120 $b/bench-decode_device 2>&1 | grep -E "GB/s|panicked"
      done
    done
  fi
  ;;
esac
