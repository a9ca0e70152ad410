#!/usr/bin/env bash
# GPU machine: the device work queued on 2026-12-04, when no device was lent, in three calls of
# at most ten minutes. Build the branch wip/device-next (main + the shared pinned pool of issue 19 +
# the CUPARQUET_EXP_EDGES knob of issue 14) on the development machine:
#   git checkout wip/device-next
#   PACK_XZ=0 bash ../shared/device/pack.sh -- --test gpu --test conformance --test errors \
#     --test mutants --test spread --test cli --test stream --test nvcomp
#   the release bench-decode_device and bench-stream_device into .dev/bin (as pack-bench.sh
#     does, without its compression step);
#   AB_TESTS="" BENCHES=decode_device bash scripts/pack-ab.sh wip/inflate-pairs, its
#     .dev/old.tar.xz unpacked and renamed .dev/pairs (the pairs variant of the GZIP kernel,
#     for PAIRS=1); then the same for 07caacf, unpacked as .dev/old (GZIP on the host's
#     inflater, before the kernel);
#   tar -C .dev -cf - bin old pairs | xz -T2 --lzma2=preset=6,dict=256MiB > .devrun/bin.tar.xz,
#     with .dev's corpus, run.sh, prepare-cufile-vm.sh and wheels.sh beside it (~22 MiB);
# carry .devrun (and .dev-whl for nvCOMP) and run `mv .devrun .dev && PART=N bash
# scripts/device-pending.sh` (the cuDF and pyarrow wheels moved to /tmp/whl by earlier calls
# where a cuDF figure is wanted).
#   PART=1: every packed test with the GPU required (about five minutes).
#   PART=2: the GZIP run: memcheck over the GZIP kernel's tests, the GZIP lineitem files written
#           (arrow-rs's and pyarrow's, once), the host share swept (0, 15, 100), the bench
#           against arrow-rs, the build before and cuDF (scripts/device-gzip.sh).
#   PART=3: the spread over this machine's devices (DEVICES=0 on one GPU, 0,1 on
#           nvidia-h200-x2: scripts/device-spread.sh); issue 14's edges (bench-stream_device on
#           the 2 GiB budget, CUPARQUET_EXP_EDGES none, first, last and first,last in turn); with
#           PAIRS=1, the GZIP bench of the pairs variant beside main's kernel, alternately
#           (SPREAD=0 leaves the spread out).
#   PART=4: issue 14's budgeted stream: bench-stream_device of this build (.dev/bin) and the
#           build before (.dev/old), alternately, two rounds (512 MiB and 2 GiB budgets).
# Chain the calls quickly (the machine is given back after 30 idle seconds, and with it the
# files written under /tmp/bench-data).
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
case "${PART:-1}" in
1)
  bash .dev/prepare-cufile-vm.sh >/dev/null 2>&1 || echo "could not write the udev record"
  echo "=== tests (GPU required)"
  CUPARQUET_REQUIRE_GPU=1 timeout 560 bash .dev/run.sh 2>&1 | tee "$out/tests.txt" \
    | grep -E "^===|test result|FAILED|panicked|skipping|device tests" | head -80
  ;;
2)
  SKIP_TESTS=1 SHARES=${SHARES:-"0 15 100"} ROUNDS=${ROUNDS:-3} bash scripts/device-gzip.sh
  ;;
3)
  [ "${SPREAD:-1}" = 1 ] && DEVICES=${DEVICES:-0} ROUNDS=${ROUNDS:-3} bash scripts/device-spread.sh
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
4)
  # issue 14: the budgeted stream read as one stream into an allocation per pass (this build)
  # against wave by wave (.dev/old: the build before), alternately, same files
  for round in 1 2; do
    for b in .dev/bin ${AB_EXTRA:-} .dev/old; do
      [ -x $b/bench-stream_device ] || continue
      echo "--- $b (round $round)"
      CUPARQUET_BENCH_FILES=${FILES:-plain-uncompressed,snappy-dict} \
        CUPARQUET_BENCH_BUDGETS=${BUDGETS:-512MiB,2GiB} CUPARQUET_BENCH_ROUNDS=${ROUNDS:-3} \
        timeout 200 $b/bench-stream_device 2>&1 | tee -a "$out/stream-ab.txt" \
        | grep -E "budget|GB/s|panicked" | head -12
    done
  done
  ;;
esac
