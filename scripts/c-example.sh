#!/usr/bin/env bash
# CI and development machines: builds the C API's shared library (the `capi` feature), compiles
# the C example against it with a plain C compiler (warnings are errors), and runs it on the
# bundled sample in host memory: its row count and its sum over an int64 column, read in C from
# the exported buffers, must match the CLI's load of the same rows.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo rustc --lib --features capi --crate-type cdylib
cc=${CC:-cc}
# the build's folder: CARGO_TARGET_DIR where it is set
t=${CARGO_TARGET_DIR:-target}
case $t in /*) ;; *) t=$PWD/$t ;; esac
"$cc" -std=c11 -Wall -Wextra -Werror -Iinclude examples/c/stream.c -L"$t/debug" -lcuparquet \
  -Wl,-rpath,"$t/debug" -o "$t/c-stream"
sample=testdata/lineitem-sample.parquet
where="l_quantity < 10"
out=$("$t/c-stream" "$sample" "l_orderkey, l_quantity" "$where" host)
echo "$out"
rows=$(echo "$out" | sed -n 's/^rows: \([0-9]*\) in .*/\1/p')
sum=$(echo "$out" | sed -n 's/^sum(l_orderkey) = \(-\?[0-9]*\)$/\1/p')
cli=$(cargo run -q -- load "$sample" --columns l_orderkey --where "$where" --device host)
want_rows=$(echo "$cli" | sed -n 's/^  rows \([0-9]*\),.*/\1/p')
# shellcheck disable=SC2015  # either test failing is the error
[ -n "$rows" ] && [ "$rows" = "$want_rows" ] || { echo "C example: $rows rows, the CLI: $want_rows"; exit 1; }
# errors: a missing file exits 1 with the C API's message
if "$t/c-stream" no-such-file.parquet 2>"$t/c-stream.err"; then echo "no error"; exit 1; fi
grep -q "no-such-file.parquet" "$t/c-stream.err"
[ -n "$sum" ] || { echo "C example: no sum printed"; exit 1; }
echo "C example: $rows rows as the CLI reads them, sum(l_orderkey) = $sum"
