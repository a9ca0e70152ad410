# Sourced by scripts/device.sh for its `remote` part (see its help): an S3-compatible server
# (tools/s3-server, packed as .dev/bin/s3-server) on the machine's loopback serving lineitem files, read into
# device memory by bench-remote_device at several concurrencies against the server's own
# ceiling, and by KvikIO's RemoteFile and cuDF (scripts/py/remote_peers.py) in the same call;
# then the directory again through a proxy adding 20 ms of round trip (DELAY_MS). SOURCES: a
# subset of "snappy plain dir".
# shellcheck shell=bash
part_remote() {
  [ -x .dev/bin/s3-server ] || die "no .dev/bin/s3-server (bash scripts/pack.sh s3-server)"
  local b root=/tmp/s3root port=9000 lport=9001 delay=${DELAY_MS:-20} srv prx k
  b=$(benchbin remote)
  wheels
  gpu_env
  bench_env
  # 8 row groups of 1,000,000 rows per file unless ROWS says otherwise
  export CUPARQUET_BENCH_ROWS=${ROWS:-8000000}
  ensure_files snappy-dict plain-uncompressed
  rm -rf "$root" && mkdir -p "$root/bench/dir"
  cp "$(bench_file snappy-dict)" "$root/bench/snappy.parquet"
  cp "$(bench_file plain-uncompressed)" "$root/bench/plain.parquet"
  for k in 0 1 2 3 4 5 6 7; do ln "$root/bench/snappy.parquet" "$root/bench/dir/part-$k.parquet"; done
  du -sh "$root/bench"/*.parquet
  export AWS_ACCESS_KEY_ID=cuparquet AWS_SECRET_ACCESS_KEY=cuparquet-secret
  export AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1 AWS_ALLOW_HTTP=true
  export AWS_ENDPOINT_URL=http://127.0.0.1:$port
  .dev/bin/s3-server "$root" "127.0.0.1:$port" "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" \
    > "$out/s3-server.txt" 2>&1 &
  srv=$!
  "$b" proxy "127.0.0.1:$lport" "127.0.0.1:$port" "$delay" > "$out/proxy.txt" 2>&1 &
  prx=$!
  sleep 2
  local dir_urls
  dir_urls=$(for k in 0 1 2 3 4 5 6 7; do printf 's3://bench/dir/part-%s.parquet,' "$k"; done)
  dir_urls=${dir_urls%,}
  local j=$out/remote.jsonl s
  local -a ours=() peers=()
  for s in ${SOURCES:-snappy plain dir}; do
    case $s in
      dir) ours+=(dir=s3://bench/dir/); peers+=("dir=$dir_urls") ;;
      *) ours+=("$s=s3://bench/$s.parquet"); peers+=("$s=s3://bench/$s.parquet") ;;
    esac
  done
  step "bench-remote_device: the ceiling and cuparquet's load ($(nproc) cores)"
  run_log "$out/remote-bench.txt" "${LIMIT:-300}" env CUPARQUET_BENCH_OUT="$j" \
    CUPARQUET_BENCH_ROUNDS="${ROUNDS:-3}" CUPARQUET_BENCH_CONCURRENCY="${CONCURRENCY:-16,64,256}" \
    "$b" "${ours[@]}"
  note bench-remote_device
  cat "$out/remote-bench.txt" | tail -n 40
  if py_has pylibcudf || py_has kvikio; then
    step "KvikIO RemoteFile and cuDF over the same objects"
    run_log "$out/remote-peers.txt" "${LIMIT:-300}" python3 scripts/py/remote_peers.py \
      --rounds "${ROUNDS:-3}" --threads "${THREADS:-16,64}" --out "$j" "${peers[@]}"
    note remote_peers
    tail -n 40 "$out/remote-peers.txt"
  else
    echo "no KvikIO / pylibcudf wheels (pack.sh wheels cudf kvikio): peers not measured"
  fi
  step "the directory through a proxy adding ${delay} ms of round trip"
  export AWS_ENDPOINT_URL=http://127.0.0.1:$lport
  run_log "$out/remote-latency.txt" "${LIMIT:-300}" env CUPARQUET_BENCH_OUT="$j" \
    CUPARQUET_BENCH_LABEL="${delay}ms " CUPARQUET_BENCH_ROUNDS="${ROUNDS:-3}" \
    CUPARQUET_BENCH_CONCURRENCY="${LATENCY_CONCURRENCY:-64,256}" "$b" dir=s3://bench/dir/
  note "bench-remote_device ${delay} ms"
  tail -n 20 "$out/remote-latency.txt"
  if py_has kvikio; then
    run_log "$out/remote-peers-latency.txt" "${LIMIT:-300}" python3 scripts/py/remote_peers.py \
      --rounds "${ROUNDS:-3}" --threads "${THREADS:-16,64}" --label "${delay}ms " --out "$j" \
      "dir=$dir_urls"
    note "remote_peers ${delay} ms"
    tail -n 20 "$out/remote-peers-latency.txt"
  fi
  kill "$prx" "$srv" 2> /dev/null || true
  wait 2> /dev/null || true
}
