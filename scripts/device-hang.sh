#!/usr/bin/env bash
# GPU machine: tests/stream.rs tests that ran past their limit, each alone in its own process;
# where one is still running after WAIT seconds, the threads' stacks (gdb where there is one,
# else each thread's name and kernel wait channel), then it is killed.
# Pack: bash ../shared/device/pack.sh -- --workspace --test stream; run with .dev carried.
# The device has no gdb: for stacks, carry the development machine's as .dev/gdbpack.tar.xz
# (a folder gdbpack/ holding gdb, lib/ with the libraries `ldd /usr/bin/gdb` names except
# libc, libm and libpthread, and py/lib/python3.11 without its tests and site-packages: gdb
# will not start without Python's standard library), and pack the test binary with its
# symbols (`strip --strip-debug`, not `strip`), or the stacks have no names.
# Found with it (benches/history/2026-12-05.md (XI)): a budgeted stream's decode waiting for itself.
set -u -o pipefail
cd "$(dirname "$0")/.."
source scripts/device-env.sh
export CUPARQUET_REQUIRE_GPU=1 PARQUET_TESTING_DIR="$PWD/.dev/corpus/parquet-testing"
which gdb eu-stack 2>/dev/null
# a gdb carried from the development machine (.dev/gdbpack.tar.xz: gdb and its libraries)
if [ -f .dev/gdbpack.tar.xz ] && ! command -v gdb >/dev/null; then
  tar -C /tmp -xJf .dev/gdbpack.tar.xz
  printf '#!/bin/sh\nPYTHONHOME=/tmp/gdbpack/py LD_LIBRARY_PATH=/tmp/gdbpack/lib exec /tmp/gdbpack/gdb -nx "$@"\n' > /tmp/gdbpack/run-gdb
  chmod +x /tmp/gdbpack/run-gdb; export PATH="/tmp/gdbpack/bin:$PATH"; mkdir -p /tmp/gdbpack/bin
  ln -sf /tmp/gdbpack/run-gdb /tmp/gdbpack/bin/gdb
  grep PRETTY /etc/os-release; gdb --version 2>&1 | head -2
fi
# TESTS: names run alone (--exact), or "all" (the whole binary, THREADS test threads)
for t in ${TESTS:-kept_dictionaries_never_span_row_groups gpu_memory_budget_bounds_the_live_device_memory}; do
  for k in $(seq ${TIMES:-2}); do
    echo "=== $t (try $k)"
    start=$(date +%s)
    if [ "$t" = all ]; then
      .dev/bin/test-test-stream --test-threads=${THREADS:-2} ${SKIP:+--skip $SKIP} > "$out/$t-$k.txt" 2>&1 &
    else
      .dev/bin/test-test-stream --exact "$t" --test-threads=1 > "$out/$t-$k.txt" 2>&1 &
    fi
    pid=$!
    for _ in $(seq $((${WAIT:-40} * 10))); do
      kill -0 $pid 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 $pid 2>/dev/null; then
      echo "still running after ${WAIT:-40} s: stacks"
      if command -v gdb >/dev/null; then
        timeout 60 gdb -p $pid -batch -ex "thread apply all bt 30" > "$out/gdb-$t-$k.txt" 2>&1
        grep -E "^Thread|^#" "$out/gdb-$t-$k.txt" | grep -vE " in (syscall|__futex|futex_wait|pthread_cond|__GI___|std::sys::)" \
          | sed -E 's/ \(.*//; s/0x[0-9a-f]+ in //' | cut -c1-160 | head -220
      else
        for task in /proc/$pid/task/*; do
          echo "$(cat $task/comm) $(cat $task/wchan 2>/dev/null) $(awk '{print $3}' $task/stat)"
        done | sort | uniq -c | head -40
      fi
      nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
      kill -9 $pid
    fi
    wait $pid 2>/dev/null; rc=$?
    echo "rc=$rc after $(( $(date +%s) - start )) s"
    grep -E "^test |test result|panicked|FAILED" "$out/$t-$k.txt" | head -12
  done
done
