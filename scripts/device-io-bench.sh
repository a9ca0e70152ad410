#!/usr/bin/env bash
# GPU machine: the range-reader benchmark (benches/io_device.rs) and KvikIO on the same file in
# the same run (scripts/kvikio_bench.py, wheels carried in .dev-whl). Results land in $OUT.
# Prepare on the development machine: pack as for scripts/device-run.sh, plus the wheels
# (see ../shared/device/README.md) in .dev-whl; run with carry [".dev", ".dev-whl"].
set -u -o pipefail
cd "$(dirname "$0")/.."
[ -d .dev/bin ] || tar -C .dev -xJf .dev/bin.tar.xz
out=${OUT:-/tmp/out}; mkdir -p "$out"
export CUPARQUET_BENCH_OUT="$out/io-bench.jsonl"
file=${CUPARQUET_BENCH_FILE:-target/bench-data/io-2304MiB.bin}
export CUPARQUET_BENCH_FILE=$file
.dev/bin/bench-io_device --prepare-only
cat "$file" > /dev/null   # warm the page cache
echo "=== cuparquet (pass 1)"
.dev/bin/bench-io_device 2>&1 | tee "$out/io-bench.txt"
if ls .dev-whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .dev-whl/*.whl 2>&1 | tail -2
  echo "=== KvikIO"
  PYTHONPATH=/tmp/site timeout 400 python3 scripts/kvikio_bench.py --file "$file" --rounds 5 \
    --out "$out/kvikio.jsonl" 2>&1 | tee "$out/kvikio.txt"
else
  echo "no KvikIO wheels in .dev-whl: KvikIO not measured"
fi
echo "=== cuparquet (pass 2, warm only)"
CUPARQUET_BENCH_COLD=0 .dev/bin/bench-io_device 2>&1 | tee -a "$out/io-bench.txt"
