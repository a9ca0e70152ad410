# Sourced by scripts/device.sh for its `python` part (see its help): the Python module's wheel
# and the test wheels installed into /tmp/site, pytest with the GPU required, the wheel sizes,
# and read_table's speed against the Rust load and pylibcudf (scripts/py/python_bench.py).
# shellcheck shell=bash
part_python() {
  mkdir -p /tmp/whl
  if compgen -G "/tmp/whl/part*" > /dev/null; then (cd /tmp/whl && cat part* | tar -xf - && rm -f part*); fi
  compgen -G ".dev/py/*.whl" > /dev/null || die "no .dev/py/*.whl (bash scripts/pack.sh python)"
  rm -f /tmp/whl/cuparquet-*.whl && cp .dev/py/*.whl /tmp/whl/
  step "installing $(find /tmp/whl -name '*.whl' | wc -l) wheels into /tmp/site"
  run_log "$out/pip.txt" 300 python3 -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target /tmp/site /tmp/whl/*.whl
  note "pip install"
  tail -n 3 "$out/pip.txt"
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  if [ -z "${CUPARQUET_NVCOMP:-}" ] && [ -d /tmp/site/nvidia/libnvcomp/lib64 ]; then
    export CUPARQUET_NVCOMP=/tmp/site/nvidia/libnvcomp/lib64
  fi
  local m
  for m in cuparquet pyarrow numpy cupy torch pylibcudf; do
    python3 -c "import $m; print('$m', getattr($m, '__version__', '?'))" 2>&1 | tail -n 1
  done
  gpu_env
  step "pytest python/tests (the GPU required)"
  run_log "$out/pytest.txt" "${LIMIT:-400}" python3 -m pytest -q -rs -p no:cacheprovider python/tests
  note pytest
  tail -n 25 "$out/pytest.txt"
  step "wheel sizes"
  du -b .dev/py/*.whl | awk '{ printf "cuparquet wheel: %.1f MB %s\n", $1 / 1e6, $2 }'
  find /tmp/whl \( -name 'libcudf*' -o -name 'pylibcudf*' -o -name 'librmm*' -o -name 'rmm*' \
    -o -name '*kvikio*' -o -name 'nvidia_libnvcomp*' -o -name 'rapids_logger*' \) -printf '%s\n' \
    | awk '{ s += $1 } END { printf "cuDF wheel set (cudf, rmm, kvikio, nvcomp): %.1f MB\n", s / 1e6 }'
  bench_env
  ensure_files snappy-dict zstd-dict plain-uncompressed latency
  local j=$out/python-bench.jsonl
  step "bench-stream_device: the Rust load() of the same files"
  run_log "$out/stream.txt" "${LIMIT:-400}" env CUPARQUET_BENCH_FILES=snappy-dict,plain-uncompressed \
    CUPARQUET_BENCH_EXTRA="zstd-dict=$(bench_file zstd-dict),latency=$(bench_file latency)" \
    CUPARQUET_BENCH_BUDGETS=none CUPARQUET_BENCH_OUT="$j" "$(benchbin stream)"
  note bench-stream_device
  show "batch rows" "$out/stream.txt"
  step "read_table from Python against pylibcudf's read_parquet"
  run_log "$out/python-bench.txt" "${LIMIT:-400}" python3 scripts/py/python_bench.py \
    --rounds "${ROUNDS:-5}" --rust "$j" --out "$j" "snappy-dict=$(bench_file snappy-dict)" \
    "zstd-dict=$(bench_file zstd-dict)" "plain-uncompressed=$(bench_file plain-uncompressed)" \
    "latency=$(bench_file latency)"
  note python_bench
  cat "$out/python-bench.txt"
}
