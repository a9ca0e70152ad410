#!/usr/bin/env bash
# Development machine, after ../shared/device/pack.sh: adds the C API to .dev/ for the GPU
# machine: the release shared library (.dev/bin/libcuparquet.so, stripped) and the C example
# built against it (.dev/bin/c-stream, finding the library beside it through its rpath). The
# test binaries that need no GPU (CI runs them) are left out, and .dev/bin compressed, to fit
# the 64 MiB that can travel.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .dev/bin
cargo rustc --release --lib --features capi --crate-type cdylib
cp target/release/libcuparquet.so .dev/bin/libcuparquet.so && strip .dev/bin/libcuparquet.so
cc -std=c11 -O2 -Wall -Wextra -Werror -Iinclude examples/c/stream.c -L.dev/bin -lcuparquet \
  -Wl,-rpath,'$ORIGIN' -o .dev/bin/c-stream
(cd .dev/bin && rm -f test-test-emulated test-test-reference test-test-plan test-test-page_header \
  test-test-gpu_plan test-test-layout)
XZ_OPT="-T0 -6" tar -C .dev -cJf .dev/bin.tar.xz bin && rm -rf .dev/bin
du -sh .dev
