#!/usr/bin/env bash
# GPU machine: every device run of the project, one PART per invocation (chain several with &&
# in one call). From the repository root, with .dev/ carried (packed by scripts/pack.sh on the
# development machine) and .dev-whl/ where wheels are needed:
#   bash scripts/device.sh PART [ARGS...]      results under $OUT; `bash scripts/device.sh help`
# Exit status: 0 when every run of the part passed, 1 when one failed (listed at the end), 2 for
# a usage error or a missing prerequisite.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat <<'EOF'
Usage: bash scripts/device.sh PART [ARGS...]
On the GPU machine, from the repository root, with .dev/ carried (bash scripts/pack.sh help);
whole outputs land under $OUT (default /tmp/out), the lines that matter are printed.

Test binaries are those pack.sh packed, .dev/bin/test-<kind>-<name>: BIN is the <name> (read,
gpu, emulated, cli, mutants, faults, sql, distributed, ...; test-lib-cuparquet: cuparquet), the
file name, or a path. A TEST is part of a test's name, looked up in every packed binary
(--list), or BIN:FILTER.

Parts:
  tests [all|BIN[,BIN...]] [ARGS...]
        every packed test binary (or those named) with the GPU required (CUPARQUET_REQUIRE_GPU=1)
        and the udev record written (UDEV=none: removed, cuFile registration fails and loads
        must stage by themselves); ARGS go to each binary: `tests read stream::`,
        `tests all gpu_ --nocapture`, `tests gpu,read --test-threads=2`. TEST_LIMIT: seconds per
        binary (300). Wheels carried are installed first (CUPARQUET_NVCOMP set where nvCOMP came);
        set CUPARQUET_REQUIRE_NVCOMP=1, CUPARQUET_MUTANTS_DEVICE=cuda:0, ... as needed.
  cli   the CLI on the bundled sample: doctor, load on cuda:0 (then with cuFile forced,
        --compat-mode off) and with the device left to it.
  bench-io      bench-io_device on one file (CUPARQUET_BENCH_FILE, default
        $CUPARQUET_BENCH_DIR/io-2304MiB.bin), KvikIO on the same file (scripts/py/kvikio_bench.py,
        where its wheels came: pack.sh wheels kvikio), then bench-io_device warm only.
  bench-decode  bench-decode_device, profiled (CUPARQUET_PROFILE=1): file -> device batches
        against arrow-rs on the host + upload. PYARROW adds pyarrow-written files.
  bench-stream  bench-stream_device (BUDGETS); PROFILE=1 then streams FILES' first file
        (default snappy-dict) once, profiled, under BUDGETS' first budget: its timeline.
  bench-filter  bench-filter_device: the exact row filter on the GPU against the host's.
  bench-aggregate  bench-aggregate_device: the partial aggregation per batch (few groups with
        Q1's aggregates, thousands, one per row), on one thread and THREADS (16), by stage.
  bench-host    host_load (criterion) and host_compare at each of BENCH_THREADS (16 4), then the
        CLI's host load of their file. Needs no GPU.
  sql   bench-sql_device (QUERIES, SCANS, TUNINGS: one run per CUPARQUET_TUNING), then DuckDB
        over the same files (scripts/py/duckdb_tpch.py) where its wheel came (pack.sh wheels
        duckdb). Pack: pack.sh tests bench -- --workspace (the SQL tests: tests sql).
  compare [decode|stream|kvikio]
        cuDF's read_parquet (scripts/py/cudf_compare.py time, pylibcudf from the cuDF parts:
        ../shared/device/README.md) on the files our bench measured in the same call:
        decode: bench-decode_device, FILES (snappy-dict,zstd-dict,lz4raw-dict,plain-uncompressed)
          and PYARROW (default "zstd lz4 delta");
        stream: bench-stream_device, FILES (all) and PYARROW (default "small");
        kvikio: KvikIO against the range reader, as bench-io.
  sanitize [memcheck|racecheck|synccheck|race] [TARGET...]
        compute-sanitizer (race: racecheck and synccheck). A TARGET is a TEST (run under the tool
        with --target-processes all, CUPARQUET_MUTANTS_DEVICE=cuda:0), or device loads of files
        by the packed CLI (and .dev/old's, where an A/B build was packed; LOAD_ARGS, default
        "--snappy-kernel"): a .parquet file, a directory (SAMPLE=N: at most N of its
        files, spread), `corpus` (the corpus files whose columns exercise the byte-array and
        fixed-width kernels) or `corpus-all` (data/ and bad_data/). Defaults: memcheck over
        the corpus tests (corpus_files_equal_arrow_rs bad_data_files_fail_clearly_or_match_arrow_rs
        gpu_large_pages_equal_arrow_rs bombs_are_refused, and gpu_nvcomp_decompresses_its_codecs
        where nvCOMP came); racecheck / synccheck / race over `corpus` and .dev/writers.
        SAN_TIMEOUT: seconds per target (200; 120 per load), DEADLINE: seconds after which no
        more loads start.
  c-device   the Arrow C Device export: the C example (.dev/bin/c-stream) on cuda:0 and the
        host, memcheck over the C API's release and stream tests, and cuDF importing the
        exported batches (scripts/py/cudf_c_device.py; pyarrow and the cuDF parts).
        Pack: pack.sh tests capi. SKIP_SANITIZER=1, SKIP_CUDF=1 leave a step out.
  distributed  the distributed tests (BIN distributed, GPU required), then
        bench-distributed_device (ROUNDS default 3). Pack: pack.sh tests bench -- --workspace.
  spread     several GPUs: doctor's ceilings, the tests named *spread*, bench-decode_device
        spread over DEVICES (default 0; 0,1 on nvidia-h200-x2) against one device, and
        `cuparquet load --devices`.
  fixed-cost  a device load's fixed cost in a fresh process, RUNS times (5): the floor
        (scripts/py/cuda_floor.py: cuInit + primary context) and `cuparquet load` of the
        100k-row latency file.
  hardening  the bad-input runs through cuda:0: the mutants (MUTANTS per class, default 1; the
        writers' files of .dev/writers too: pack.sh writers; kept in /tmp/keep), the soak
        (SOAK loads, 1000), racecheck + synccheck over corpus-all and the writers' files
        (DEADLINE default 300), memcheck over SAMPLE (60) of the kept mutants.
  remote  an S3-compatible server (tools/s3-server) on loopback serving lineitem files (ROWS, default
        8M rows): bench-remote_device (the server's ceiling and cuparquet's load at CONCURRENCY,
        default 16,64,256), KvikIO's RemoteFile and cuDF on the same objects (THREADS), then the
        8-file directory through a proxy adding DELAY_MS (20) of round trip.
        Pack: BENCHES="decode_device remote_device" pack.sh bench s3-server wheels kvikio
        (cuDF: its parts carried first, as for device.sh python).
  ab bench [BENCH...]   A/B of two builds: each bench (BENCHES, default decode; decode, stream,
        sql, filter, distributed, io) of .dev/old (pack.sh ab COMMIT) and of .dev/bin in turn,
        PAIRS (2) times, cuparquet only (CUPARQUET_BENCH_BASELINE=0), ROUNDS default 7.
  ab tests [BIN[,BIN...]] [ARGS...]   those test binaries (default: every one in .dev/old)
        of each build, GPU required.
  hang TEST|BIN:all ...   each test alone in its own process (BIN:all: the whole binary,
        THREADS test threads, SKIP a filter to skip), TIMES (2) times; one still running after
        WAIT (40) seconds gets its threads' stacks (gdb, carried as .dev/gdbpack.tar.xz by
        pack.sh gdb; else each thread's name and wait channel), then is killed. Pack with
        symbols: KEEP_SYMBOLS=1 pack.sh tests.
  python  the Python module (pack.sh bench python, with its parts moved to /tmp/whl by earlier
        calls): its wheel and the test wheels installed into /tmp/site; pytest python/tests with
        the GPU required (pylibcudf, CuPy, PyTorch where their wheels came); then the speed of
        read_table(path, device="cuda:0") against pylibcudf's read_parquet and the Rust
        load() (bench-stream_device) on the lineitem files (SNAPPY, ZSTD, uncompressed) and
        the 100k-row file (scripts/py/python_bench.py); the wheel sizes.
  help  this text.

The benches (bench-*, sql, compare, spread, ab bench):
  ROUNDS, FILES, BUDGETS, QUERIES, SCANS   CUPARQUET_BENCH_ROUNDS, _FILES, _BUDGETS, _QUERIES,
        _SCANS (every CUPARQUET_* variable set passes through, as the benches document them)
  TUNINGS='host_share=0;host_share=15;'   one run per CUPARQUET_TUNING value ('' the defaults)
  VARIANTS='CUPARQUET_NVCOMP=off;'        one run per set of VAR=VALUE words (TUNINGS' general form)
  PAIRS=N   the runs N times, in turn (variants and builds alternate)
  PYARROW='small delta nested categorical zstd lz4 snappy gzip'   pyarrow-written files
        (scripts/py/cudf_compare.py write-*, once per machine) added through CUPARQUET_BENCH_EXTRA
  LIMIT     seconds per run (400); SHOW: a grep -E pattern for the lines printed
  Bench data: CUPARQUET_BENCH_DIR (default /tmp/bench-data, kept while the machine stays warm).
EOF
}

parts=(tests cli bench-io bench-decode bench-stream bench-filter bench-host sql compare sanitize
  c-device distributed spread fixed-cost hardening ab hang python remote help)
part=${1:-}
[ -n "$part" ] || { usage >&2; exit 2; }
shift
known=0
for p in "${parts[@]}"; do if [ "$p" = "$part" ]; then known=1; fi; done
if [ "$known" != 1 ]; then
  echo "device.sh: unknown part '$part'; parts: ${parts[*]} (bash scripts/device.sh help)" >&2
  exit 2
fi
if [ "$part" = help ]; then usage; exit 0; fi

out=${OUT:-/tmp/out}
failed=()
rc=0

step() { echo "=== $* ($(date +%T))"; }
die() { echo "device.sh $part: $*" >&2; exit 2; }
# show PATTERN FILE [N]: FILE's lines matching PATTERN, at most N
show() { grep -E -- "$1" "$2" | head -n "${3:-60}" || true; }
# run_log FILE LIMIT CMD...: CMD under a time limit, its output into FILE; sets rc
run_log() {
  local file=$1 limit=$2
  shift 2
  rc=0
  timeout -k 10 "$limit" "$@" > "$file" 2>&1 || rc=$?
}
# note NAME: records the last run (rc) for the summary when it failed
note() {
  if [ "$rc" = 124 ]; then failed+=("$1: past its time limit")
  elif [ "$rc" != 0 ]; then failed+=("$1: exit $rc"); fi
}
# prefix LABEL: each line read, after [LABEL] (as it is when LABEL is empty)
prefix() { if [ -n "$1" ]; then awk -v p="[$1] " '{ print p $0 }'; else cat; fi; }

setup() {
  [ -d .dev ] || die "no .dev/ here: carry it (bash scripts/pack.sh on the development machine)"
  local a
  for a in bin old; do
    if [ -f ".dev/$a.tar.xz" ] && [ ! -d ".dev/$a" ]; then tar -C .dev -xJf ".dev/$a.tar.xz"; fi
  done
  mkdir -p "$out"
  export INSTA_WORKSPACE_ROOT="$PWD" INSTA_UPDATE=no RUST_BACKTRACE=1
  export CUPARQUET_KERNEL_CACHE=${CUPARQUET_KERNEL_CACHE:-/tmp/cuparquet-kernels}
  export CUPARQUET_BENCH_DIR=${CUPARQUET_BENCH_DIR:-/tmp/bench-data}
  export PARQUET_TESTING_DIR=${PARQUET_TESTING_DIR:-$PWD/.dev/corpus/parquet-testing}
  mkdir -p "$CUPARQUET_BENCH_DIR"
  if [ -x .dev/bin/cuparquet ]; then export CUPARQUET_BIN=${CUPARQUET_BIN:-$PWD/.dev/bin/cuparquet}; fi
  if [ -x .dev/bin/cuparquet-sql ]; then export CUPARQUET_SQL_BIN=${CUPARQUET_SQL_BIN:-$PWD/.dev/bin/cuparquet-sql}; fi
  echo "=== machine: $(nproc) cores; $(nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader 2>/dev/null | paste -sd ';' || echo 'nvidia-smi failed')"
  echo "commit: $(cat .dev/COMMIT 2> /dev/null || echo '?')"
  if [ -d .dev/old ]; then echo "A/B build (.dev/old): $(cat .dev/old/COMMIT 2> /dev/null || echo '?')"; fi
}

# the tests' environment: the GPU required, the udev record as UDEV says (as .dev/run.sh)
gpu_env() {
  if [ "${UDEV:-}" = none ]; then
    rm -rf /run/udev && echo "no udev record: cuFile cannot register files"
  elif [ -f .dev/prepare-cufile-vm.sh ]; then
    bash .dev/prepare-cufile-vm.sh > /dev/null 2>&1 || echo "could not write the udev record: cuFile will fall back"
  fi
  export CUPARQUET_REQUIRE_GPU=1
}

# wheels: installs the wheels carried in .dev-whl or moved to /tmp/whl by earlier calls into
# /tmp/site (again only when new ones came), puts it on PYTHONPATH, and nvCOMP's library where
# the loads find it (CUPARQUET_NVCOMP)
wheels() {
  local new=0 w
  for w in .dev-whl/*.whl; do
    if [ -f "$w" ] && [ ! -f "/tmp/whl/${w##*/}" ]; then new=1; fi
  done
  if compgen -G "/tmp/whl/part*" > /dev/null; then new=1; fi
  if [ ! -f /tmp/site/.installed ] && compgen -G "/tmp/whl/*.whl" > /dev/null; then new=1; fi
  if [ -f /tmp/site/.installed ] && [ -n "$(find /tmp/whl -name '*.whl' -newer /tmp/site/.installed 2> /dev/null)" ]; then
    new=1
  fi
  if [ "$new" = 1 ]; then
    [ -f .dev/wheels.sh ] || die "no .dev/wheels.sh (bash scripts/pack.sh tests puts it there)"
    if bash .dev/wheels.sh install > "$out/wheels.txt" 2>&1; then
      tail -n 1 "$out/wheels.txt"
      touch /tmp/site/.installed
    else
      tail -n 5 "$out/wheels.txt"
      failed+=("wheels: install failed")
    fi
  fi
  if [ -d /tmp/site ]; then export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}; fi
  if [ -z "${CUPARQUET_NVCOMP:-}" ] && [ -d /tmp/site/nvidia/libnvcomp/lib64 ]; then
    export CUPARQUET_NVCOMP=/tmp/site/nvidia/libnvcomp/lib64
  fi
}
py_has() { python3 -c "import $1" 2> /dev/null; }

# testbin NAME [DIR]: the packed test binary NAME (read, test-test-read, a path)
testbin() {
  local n=$1 d=${2:-.dev/bin} c
  local -a cands=("$d/test-test-$n" "$d/test-$n" "$d/test-lib-$n")
  case $n in
    */*) cands+=("$n") ;;
    test-*) cands+=("$d/$n") ;;
  esac
  for c in "${cands[@]}"; do
    if [ -f "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  echo "device.sh $part: no test binary '$n' in $d (packed: $(testbins "$d" | sed 's|.*/||' | paste -sd ' '))" >&2
  return 1
}
testbins() { local t; for t in "${1:-.dev/bin}"/test-*; do if [ -f "$t" ] && [ -x "$t" ]; then echo "$t"; fi; done; }
# benchbin NAME [DIR]: the packed bench binary (decode, decode_device, bench-decode_device)
benchbin() {
  local n=${1#bench-} d=${2:-.dev/bin} c
  for c in "$d/bench-$n" "$d/bench-${n}_device"; do
    if [ -f "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  die "no bench-$n or bench-${n}_device in $d (bash scripts/pack.sh bench)"
}
# tests_named PATTERN: "BIN<TAB>TEST" for each test of the packed binaries whose name contains PATTERN
tests_named() {
  local t
  while read -r t; do
    "$t" --list 2> /dev/null | sed -n 's/: test$//p' | grep -F -- "$1" | awk -v b="$t" '{ print b "\t" $0 }' || true
  done < <(testbins)
}
# targets TEST...: "BIN<TAB>FILTER" per binary that holds a test named so (BIN:FILTER as given);
# "-<TAB>TEST" for a TEST no packed binary holds
targets() {
  local t b
  for t; do
    if [[ $t =~ ^([^:]+):([^:].*)?$ ]]; then # BIN:FILTER (a test's own path has ::)
      b=$(testbin "${BASH_REMATCH[1]}") || exit 2
      printf '%s\t%s\n' "$b" "${BASH_REMATCH[2]}"
    else
      b=$(tests_named "$t" | cut -f1 | sort -u)
      if [ -z "$b" ]; then printf -- '-\t%s\n' "$t"; else echo "$b" | awk -v f="$t" '{ print $0 "\t" f }'; fi
    fi
  done
}

# bench_env: the shorthands' CUPARQUET_BENCH_* variables
bench_env() {
  local v
  for v in ROUNDS FILES BUDGETS QUERIES SCANS; do
    if [ -n "${!v:-}" ]; then export "CUPARQUET_BENCH_$v=${!v}"; fi
  done
}
# variants: one line per run's settings (VAR=VALUE words): VARIANTS or TUNINGS, ';'-separated
# (empty entries kept: the defaults); one empty line when neither is set
variants() {
  local s prefix=""
  if [ -n "${VARIANTS:-}" ]; then s=$VARIANTS
  elif [ -n "${TUNINGS:-}" ]; then s=$TUNINGS; prefix=CUPARQUET_TUNING=
  else echo; return 0; fi
  while :; do
    printf '%s\n' "${prefix}${s%%;*}"
    [ "$s" = "${s#*;}" ] && break
    s=${s#*;}
  done
}
build_of() { case $1 in .dev/old/*) echo old ;; *) echo new ;; esac; }
# bench_runs NAME SHOW BIN...: each BIN (builds, in turn) under each variant, PAIRS times; every
# run's output appended to $OUT/NAME.txt (JSON lines to NAME[-BUILD].jsonl unless
# CUPARQUET_BENCH_OUT is set), the lines matching SHOW printed with the run's label
bench_runs() {
  local name=$1 pat=${SHOW:-$2} k v b label jsonl tmp=$out/.run.txt
  shift 2
  local -a vs
  mapfile -t vs < <(variants)
  for k in $(seq "${PAIRS:-1}"); do
    for b in "$@"; do
      for v in "${vs[@]}"; do
        label=""
        [ $# -gt 1 ] && label="$(build_of "$b")"
        if [ "${#vs[@]}" -gt 1 ]; then
          local shown=${v//CUPARQUET_/}
          [[ -z $v || $v =~ ^[A-Z_]+=$ ]] && shown=defaults
          label="${label:+$label }$shown"
        fi
        [ "${PAIRS:-1}" -gt 1 ] && label="${label:+$label }pair $k"
        jsonl=$out/$name.jsonl
        [ $# -gt 1 ] && jsonl=$out/$name-$(build_of "$b").jsonl
        step "${b##*/}${label:+ [$label]}"
        echo "--- ${b##*/}${label:+ [$label]}" >> "$out/$name.txt"
        # shellcheck disable=SC2086  # a variant is VAR=VALUE words
        run_log "$tmp" "${LIMIT:-400}" env CUPARQUET_BENCH_OUT="${CUPARQUET_BENCH_OUT:-$jsonl}" $v "$b"
        cat "$tmp" >> "$out/$name.txt"
        note "${b##*/}${label:+ [$label]}"
        show "$pat" "$tmp" 80 | prefix "$label"
        [ "$rc" = 0 ] || tail -n 5 "$tmp"
      done
    done
  done
  rm -f "$tmp"
}

# bench_file NAME: the generated bench file of a CUPARQUET_BENCH_FILES name
bench_file() {
  case $1 in
    small-row-groups) echo "$CUPARQUET_BENCH_DIR/small-row-groups-8m-800rg-snappy.parquet" ;;
    latency) echo "$CUPARQUET_BENCH_DIR/small-100k-2col-snappy.parquet" ;;
    *) echo "$CUPARQUET_BENCH_DIR/lineitem-${CUPARQUET_BENCH_ROWS:-24000000}-$1.parquet" ;;
  esac
}
# ensure_files NAME...: writes bench-decode_device's files missing (one quick run of it)
ensure_files() {
  local n missing=() b
  for n; do [ -f "$(bench_file "$n")" ] || missing+=("$n"); done
  [ ${#missing[@]} -gt 0 ] || return 0
  b=$(benchbin decode)
  step "writing the bench files ${missing[*]}"
  run_log "$out/bench-files.txt" 400 env CUPARQUET_BENCH_FILES="$(IFS=,; echo "${missing[*]}")" \
    CUPARQUET_BENCH_BASELINE=0 CUPARQUET_BENCH_ROUNDS=1 CUPARQUET_BENCH_LATENCY_ROUNDS=1 \
    CUPARQUET_BENCH_EXTRA= CUPARQUET_BENCH_OUT=/dev/null "$b"
  note "writing ${missing[*]}"
}
# pyarrow_files WHICH...: the pyarrow-written files (written once per machine); sets $extra
# (name=path,... for CUPARQUET_BENCH_EXTRA) and $extra_paths
pyarrow_files() {
  extra=""
  extra_paths=()
  [ $# -gt 0 ] || return 0
  wheels
  if ! py_has pyarrow; then
    echo "no pyarrow (a wheel in .dev-whl: bash scripts/pack.sh wheels pyarrow): pyarrow files left out"
    failed+=("pyarrow files: no pyarrow")
    return 0
  fi
  local w p d=$CUPARQUET_BENCH_DIR
  local -a cmd
  for w; do
    case $w in
      small) p=$d/small-row-groups-pyarrow.parquet; cmd=(write "$d") ;;
      delta) p=$d/delta-split-pyarrow.parquet; cmd=(write-delta "$d") ;;
      nested) p=$d/nested-pyarrow.parquet; cmd=(write-nested "$d") ;;
      categorical) p=$d/categorical-pyarrow.parquet; cmd=(write-categorical "$d") ;;
      zstd | lz4 | snappy | gzip)
        p=$d/lineitem-pyarrow-$w.parquet
        ensure_files snappy-dict
        cmd=(write-codecs "$(bench_file snappy-dict)" "$d" "$w") ;;
      *) die "PYARROW: no file '$w' (small delta nested categorical zstd lz4 snappy gzip)" ;;
    esac
    if [ ! -f "$p" ]; then
      step "pyarrow writes $w"
      run_log "$out/pyarrow-$w.txt" 300 python3 scripts/py/cudf_compare.py "${cmd[@]}"
      note "pyarrow $w"
      if [ "$rc" != 0 ]; then rm -f "$p"; tail -n 3 "$out/pyarrow-$w.txt"; fi
    fi
    if [ -f "$p" ]; then
      extra+="${extra:+,}$(basename "$p" .parquet)=$p"
      extra_paths+=("$p")
    fi
  done
}
with_extra() { echo "${CUPARQUET_BENCH_EXTRA:+$CUPARQUET_BENCH_EXTRA,}$extra"; }

# cudf_time FILE...: cuDF's read_parquet on the files there are
cudf_time() {
  local f files=()
  for f; do [ -f "$f" ] && files+=("$f"); done
  if ! py_has pylibcudf; then
    echo "no pylibcudf (the cuDF parts: ../shared/device/README.md): cuDF not measured"
    failed+=("cuDF: no pylibcudf")
    return 0
  fi
  step "cuDF read_parquet: ${files[*]##*/}"
  run_log "$out/cudf.txt" "${LIMIT:-400}" env ROUNDS="${ROUNDS:-5}" python3 scripts/py/cudf_compare.py time "${files[@]}"
  note cuDF
  cat "$out/cudf.txt"
}

# --- compute-sanitizer
# san_test TOOL BIN FILTER
san_test() {
  local tool=$1 bin=$2 filter=$3 f
  f="$out/$tool-${bin##*/}-${filter//[^A-Za-z0-9_.-]/_}.txt"
  step "compute-sanitizer $tool: ${bin##*/} $filter"
  run_log "$f" "${SAN_TIMEOUT:-200}" compute-sanitizer --tool "$tool" --target-processes all \
    --error-exitcode 9 --print-limit 20 "$bin" "$filter" --nocapture
  echo "exit $rc"
  note "$tool ${bin##*/} $filter"
  show "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|out of bounds|Barrier error|Race reported|test result|panicked" "$f" 12
  [ "$rc" = 0 ] || tail -n 15 "$f"
}
# cli_bins: the CLIs the loads go through: .dev/old's (an A/B build) first, then this build's
cli_bins() {
  local b
  for b in .dev/old/cuparquet .dev/bin/cuparquet; do if [ -x "$b" ]; then echo "$b"; fi; done
}
# files_of TARGET: the files of a file target, one a line
files_of() {
  local d=$PARQUET_TESTING_DIR/data x
  case $1 in
    corpus)
      for x in lz4_raw_compressed_larger hadoop_lz4_compressed_larger alltypes_tiny_pages_plain \
        alltypes_dictionary alltypes_plain.snappy binary byte_array_decimal delta_byte_array \
        delta_length_byte_array delta_encoding_optional_column rle-dict-snappy-checksum \
        plain-dict-uncompressed-checksum datapage_v2.snappy fixed_length_byte_array \
        nested_lists.snappy; do
        echo "$d/$x.parquet"
      done ;;
    corpus-all) ls "$d"/*.parquet "$PARQUET_TESTING_DIR"/bad_data/*.parquet ;;
    *)
      if [ -d "$1" ]; then
        # SAMPLE=N: every k-th file, at most N
        local -a all
        mapfile -t all < <(compgen -G "$1/*.parquet" | sort)
        local n=${SAMPLE:-0} k=1 i
        if [ "$n" -gt 0 ] && [ "${#all[@]}" -gt "$n" ]; then k=$(((${#all[@]} + n - 1) / n)); fi
        for ((i = 0; i < ${#all[@]}; i += k)); do echo "${all[i]}"; done
      else
        echo "$1"
      fi ;;
  esac
}
# san_loads TOOL... -- FILE...: each TOOL over `cuparquet load --device cuda:0` of each file
san_loads() {
  local tools=() b f t n o summary line hazards=""
  while [ "$1" != -- ]; do tools+=("$1"); shift; done
  shift
  local -a load_args
  read -r -a load_args <<< "${LOAD_ARGS---snappy-kernel}"
  while read -r b; do
    step "compute-sanitizer ${tools[*]} over $# device loads by $b"
    n=0
    for f; do
      if [ -n "${DEADLINE:-}" ] && [ $((SECONDS - started)) -ge "$DEADLINE" ]; then
        echo "DEADLINE: stopped after $n of $# files"; break
      fi
      n=$((n + 1))
      line="${f##*/}:"
      for t in "${tools[@]}"; do
        rc=0
        o=$(timeout -k 10 "${SAN_TIMEOUT:-120}" compute-sanitizer --tool "$t" --error-exitcode 9 --print-limit 5 \
          "$b" load --device cuda:0 --quiet "${load_args[@]}" "$f" 2>&1) || rc=$?
        printf '=== %s %s\n%s\n' "$t" "$f" "$o" >> "$out/$t-loads.txt"
        summary=$(echo "$o" | grep -E "ERROR SUMMARY|RACECHECK SUMMARY" | sed 's/^=* *//' | paste -sd ' ' || true)
        line+=" $t exit $rc ($summary)"
        # 9: the tool found errors; 124: past the limit; other codes are the load's own (a refused file)
        if [ "$rc" = 9 ] || [ "$rc" = 124 ]; then
          note "$t $b ${f##*/}"
          hazards+=$(echo "$o" | grep -E "Race reported|Barrier error|Invalid|Error:" | sort | uniq -c | head -n 4 || true)
        fi
      done
      echo "$line"
      if [ -n "$hazards" ]; then echo "$hazards"; hazards=""; fi
    done
    echo "covered $n files"
  done < <(cli_bins)
}
# sanitize TOOL TARGET...
sanitize() {
  local tool=$1 t
  shift
  local -a tools files=() tests=()
  case $tool in
    memcheck | racecheck | synccheck) tools=("$tool") ;;
    race) tools=(racecheck synccheck) ;;
    *) die "sanitize: no tool '$tool' (memcheck, racecheck, synccheck, race)" ;;
  esac
  command -v compute-sanitizer > /dev/null || die "no compute-sanitizer on the PATH"
  for t; do
    if [ "$t" = corpus ] || [ "$t" = corpus-all ] || [ -d "$t" ] || [[ $t == *.parquet ]]; then
      mapfile -t -O "${#files[@]}" files < <(files_of "$t")
    else
      tests+=("$t")
    fi
  done
  if [ ${#tests[@]} -gt 0 ]; then
    local b f
    while IFS=$'\t' read -r b f; do
      if [ "$b" = - ]; then
        echo "no packed test is named *$f*"
        failed+=("sanitize: no test *$f*")
        continue
      fi
      for t in "${tools[@]}"; do san_test "$t" "$b" "$f"; done
    done < <(targets "${tests[@]}")
  fi
  if [ ${#files[@]} -gt 0 ]; then
    [ -n "$(cli_bins)" ] || die "no .dev/bin/cuparquet packed"
    san_loads "${tools[@]}" -- "${files[@]}"
  fi
}

# --- the parts

part_tests() {
  local sel=all b n
  if [ $# -gt 0 ] && [[ $1 != -* ]]; then sel=$1; shift; fi
  local -a bins=() names
  if [ "$sel" = all ]; then
    mapfile -t bins < <(testbins)
  else
    IFS=, read -r -a names <<< "$sel"
    for n in "${names[@]}"; do
      b=$(testbin "$n") || die "to give every binary a filter: tests all $sel $*"
      bins+=("$b")
    done
  fi
  [ ${#bins[@]} -gt 0 ] || die "no test binaries in .dev/bin (bash scripts/pack.sh tests)"
  gpu_env
  wheels
  for b in "${bins[@]}"; do
    step "${b##*/} $*"
    run_log "$out/${b##*/}.txt" "${TEST_LIMIT:-300}" "$b" "$@"
    note "${b##*/}"
    show "${SHOW:-test result|FAILED|panicked|skipping|left:|right:}" "$out/${b##*/}.txt" 40
    [ "$rc" != 124 ] || tail -n 10 "$out/${b##*/}.txt"
  done
  echo "device tests: $([ ${#failed[@]} = 0 ] && echo all passed || echo SOME FAILED)"
}

part_cli() {
  gpu_env
  local c=.dev/bin/cuparquet s=testdata/lineitem-sample.parquet
  [ -x "$c" ] || die "no .dev/bin/cuparquet packed"
  local -a runs=("doctor --path $PWD/$s" "load $s --device cuda:0 --report"
    "load $s --device cuda:0 --compat-mode off" "load $s")
  local r k=0
  for r in "${runs[@]}"; do
    k=$((k + 1))
    step "cuparquet $r"
    # shellcheck disable=SC2086  # the command's words
    run_log "$out/cli-$k.txt" 200 "$c" $r
    note "cuparquet $r"
    head -n 60 "$out/cli-$k.txt"
  done
  if [ -f cufile.log ]; then cp -f cufile.log "$out/"; fi
}

part_bench_io() {
  local b f
  b=$(benchbin io)
  bench_env
  export CUPARQUET_BENCH_FILE=${CUPARQUET_BENCH_FILE:-$CUPARQUET_BENCH_DIR/io-2304MiB.bin}
  f=$CUPARQUET_BENCH_FILE
  run_log "$out/io-prepare.txt" 300 "$b" --prepare-only
  note "bench-io_device --prepare-only"
  cat "$f" > /dev/null # warms the page cache
  SHOW=${SHOW:-[^[:space:]]} bench_runs io "" "$b"
  wheels
  if py_has kvikio; then
    step "KvikIO on the same file"
    run_log "$out/kvikio.txt" "${LIMIT:-400}" python3 scripts/py/kvikio_bench.py --file "$f" \
      --rounds "${ROUNDS:-5}" --out "$out/kvikio.jsonl"
    note KvikIO
    cat "$out/kvikio.txt"
  else
    echo "no KvikIO (carry .dev-whl: bash scripts/pack.sh wheels kvikio): KvikIO not measured"
  fi
  echo "=== pass 2: warm only (CUPARQUET_BENCH_COLD=0)" | tee -a "$out/io.txt"
  VARIANTS=CUPARQUET_BENCH_COLD=0 SHOW=${SHOW:-[^[:space:]]} bench_runs io "" "$b"
}

decode_show="GB/s|panicked|last round|data ready|spread over|directory of|error"
stream_show="GB/s|batch rows|budget|first batch|panicked|error"

part_bench_decode() {
  bench_env
  export CUPARQUET_PROFILE=${CUPARQUET_PROFILE:-1}
  # shellcheck disable=SC2086
  pyarrow_files ${PYARROW:-}
  local b
  b=$(benchbin decode)
  CUPARQUET_BENCH_EXTRA=$(with_extra) bench_runs decode "$decode_show" "$b"
}

part_bench_stream() {
  bench_env
  # shellcheck disable=SC2086
  pyarrow_files ${PYARROW:-}
  local b
  b=$(benchbin stream)
  CUPARQUET_BENCH_EXTRA=$(with_extra) bench_runs stream "$stream_show" "$b"
  if [ "${PROFILE:-0}" = 1 ]; then
    local first=${FILES:-snappy-dict} budget=${BUDGETS:-2GiB}
    first=${first%%,*}
    budget=${budget%%,*}
    step "one profiled stream of $first under $budget"
    run_log "$out/stream-profile.txt" "${LIMIT:-400}" env CUPARQUET_PROFILE=1 CUPARQUET_BENCH_ROUNDS=1 \
      CUPARQUET_BENCH_FILES="$first" CUPARQUET_BENCH_BUDGETS="$budget" CUPARQUET_BENCH_EXTRA= \
      CUPARQUET_BENCH_OUT=/dev/null "$b"
    note "profiled stream"
    show "batch rows|timeline|^  wave 0|passes under|budget" "$out/stream-profile.txt" 40 | cut -c1-3000
  fi
}

part_bench_filter() {
  local b
  b=$(benchbin filter)
  bench_env
  bench_runs filter "[^[:space:]]" "$b"
}

part_bench_aggregate() {
  local b
  b=$(benchbin aggregate)
  bench_env
  bench_runs aggregate "[^[:space:]]" "$b"
}

part_bench_host() {
  local t l c
  l=$(benchbin host_load)
  c=$(benchbin host_compare)
  for t in ${BENCH_THREADS:-16 4}; do
    step "host_load (criterion), $t threads"
    run_log "$out/host-load-$t.txt" "${LIMIT:-400}" env CUPARQUET_BENCH_THREADS="$t" "$l" --bench \
      --warm-up-time 2 --measurement-time 8
    note "host_load $t threads"
    grep -E "^host_load|time:|thrpt:|^file " "$out/host-load-$t.txt" | grep -v change || true
    step "host_compare (interleaved), $t threads"
    run_log "$out/host-compare-$t.txt" "${LIMIT:-400}" env CUPARQUET_BENCH_THREADS="$t" \
      CUPARQUET_BENCH_UNITS="${BENCH_UNITS:-8388608,33554432}" CUPARQUET_BENCH_SERIAL=1 "$c"
    note "host_compare $t threads"
    cat "$out/host-compare-$t.txt"
  done
  t=${CUPARQUET_BENCH_FILE:-target/bench-data/host_load_lineitem_plain.parquet}
  if [ -x .dev/bin/cuparquet ] && [ -f "$t" ]; then
    step "cuparquet load --device host"
    run_log "$out/host-cli.txt" 200 .dev/bin/cuparquet load "$t" --device host
    note "cuparquet load --device host"
    cat "$out/host-cli.txt"
  fi
}

part_sql() {
  local b
  b=$(benchbin sql)
  bench_env
  bench_runs sql "[^[:space:]]" "$b"
  wheels
  if py_has duckdb; then
    local d=("$CUPARQUET_BENCH_DIR"/tpch-*)
    if [ -d "${d[0]}" ]; then
      step "DuckDB over ${d[0]}"
      run_log "$out/duckdb.txt" "${LIMIT:-400}" python3 scripts/py/duckdb_tpch.py "${d[0]}" "${ROUNDS:-5}"
      note DuckDB
      cat "$out/duckdb.txt"
    fi
  else
    echo "no DuckDB (carry .dev-whl: bash scripts/pack.sh wheels duckdb): DuckDB not measured"
  fi
}

part_compare() {
  local what=${1:-decode} f b files=() names
  bench_env
  case $what in
    decode)
      export CUPARQUET_BENCH_FILES=${CUPARQUET_BENCH_FILES:-snappy-dict,zstd-dict,lz4raw-dict,plain-uncompressed}
      export CUPARQUET_PROFILE=${CUPARQUET_PROFILE:-1}
      # shellcheck disable=SC2086
      pyarrow_files ${PYARROW-zstd lz4 delta}
      b=$(benchbin decode)
      CUPARQUET_BENCH_EXTRA=$(with_extra) bench_runs decode "$decode_show" "$b" ;;
    stream)
      export CUPARQUET_BENCH_FILES=${CUPARQUET_BENCH_FILES:-small-row-groups,snappy-dict,plain-uncompressed}
      # shellcheck disable=SC2086
      pyarrow_files ${PYARROW-small}
      b=$(benchbin stream)
      CUPARQUET_BENCH_EXTRA=$(with_extra) bench_runs stream "$stream_show" "$b" ;;
    kvikio) part_bench_io; return 0 ;;
    *) die "compare: decode, stream or kvikio, not '$what'" ;;
  esac
  IFS=, read -r -a names <<< "$CUPARQUET_BENCH_FILES"
  for f in "${names[@]}"; do files+=("$(bench_file "$f")"); done
  cudf_time "${files[@]}" "${extra_paths[@]}"
}

part_sanitize() {
  local tool=${1:-memcheck}
  [ $# -gt 0 ] && shift
  gpu_env
  wheels
  export CUPARQUET_MUTANTS_DEVICE=${CUPARQUET_MUTANTS_DEVICE:-cuda:0}
  if [ $# -eq 0 ]; then
    if [ "$tool" = memcheck ]; then
      set -- corpus_files_equal_arrow_rs bad_data_files_fail_clearly_or_match_arrow_rs \
        gpu_large_pages_equal_arrow_rs bombs_are_refused
      if [ -n "${CUPARQUET_NVCOMP:-}" ]; then set -- "$@" gpu_nvcomp_decompresses_its_codecs; fi
    else
      set -- corpus
      if [ -d .dev/writers ]; then set -- "$@" .dev/writers; fi
    fi
  fi
  sanitize "$tool" "$@"
}

part_c_device() {
  gpu_env
  local lib=.dev/bin/libcuparquet.so cs=.dev/bin/c-stream d
  if [ ! -x "$cs" ] || [ ! -f "$lib" ]; then die "no C API in .dev/bin: bash scripts/pack.sh tests capi"; fi
  for d in cuda:0 host; do
    step "the C example (examples/c/stream.c) on $d"
    run_log "$out/c-stream-$d.txt" 120 "$cs" testdata/lineitem-sample.parquet - "l_quantity < 10" "$d"
    note "c-stream $d"
    cat "$out/c-stream-$d.txt"
  done
  if [ "${SKIP_SANITIZER:-0}" != 1 ]; then
    sanitize memcheck release_gives_every_share_back streams_of_files_and_directories
  fi
  if [ "${SKIP_CUDF:-0}" != 1 ]; then
    wheels
    if py_has pylibcudf && py_has pyarrow; then
      step "cuDF imports the exported batches"
      run_log "$out/cudf-c-device.txt" 300 env PYTHONUNBUFFERED=1 python3 -X faulthandler \
        scripts/py/cudf_c_device.py "$lib" /tmp
      note "cuDF import"
      cat "$out/cudf-c-device.txt"
    else
      echo "no pylibcudf or pyarrow (the cuDF parts and a pyarrow wheel): cuDF's import not checked"
      failed+=("c-device: cuDF not installed")
    fi
  fi
}

part_distributed() {
  gpu_env
  local t
  t=$(testbin distributed) || die "pack it: bash scripts/pack.sh tests bench -- --workspace"
  step "the distributed tests (GPU required)"
  run_log "$out/distributed-tests.txt" "${TEST_LIMIT:-300}" "$t" --nocapture
  note "${t##*/}"
  show "test result|FAILED|panicked|batches decoded|a dead worker|mid-query" "$out/distributed-tests.txt" 30
  local b
  b=$(benchbin distributed)
  bench_env
  export CUPARQUET_BENCH_ROUNDS=${CUPARQUET_BENCH_ROUNDS:-3}
  bench_runs distributed "[^[:space:]]" "$b"
}

part_spread() {
  gpu_env
  local devices=${DEVICES:-0} list b f decode
  list=$(echo "$devices" | sed -E 's/([0-9]+)/cuda:\1/g')
  decode=$(benchbin decode)
  if [ -x .dev/bin/cuparquet ]; then
    step "doctor"
    run_log "$out/doctor.txt" 200 .dev/bin/cuparquet doctor
    note doctor
    show "device|pinned|page cache|read" "$out/doctor.txt" 16
  fi
  local found=0
  while IFS=$'\t' read -r b f; do
    found=1
    step "${b##*/} $f"
    run_log "$out/${b##*/}-spread.txt" "${TEST_LIMIT:-300}" "$b" "$f" --nocapture
    note "${b##*/} $f"
    show "test result|FAILED|panicked|skipping|spread over" "$out/${b##*/}-spread.txt" 20
  done < <(targets "${SPREAD_TESTS:-spread}")
  [ "$found" = 1 ] || echo "no packed test named *${SPREAD_TESTS:-spread}*"
  bench_env
  export CUPARQUET_BENCH_FILES=${CUPARQUET_BENCH_FILES:-snappy-dict,plain-uncompressed}
  export CUPARQUET_BENCH_BASELINE=${CUPARQUET_BENCH_BASELINE:-0}
  CUPARQUET_BENCH_DEVICES=$devices bench_runs spread "$decode_show" "$decode"
  f=$(bench_file snappy-dict)
  if [ -f "$f" ] && [ -x .dev/bin/cuparquet ]; then
    step "cuparquet load --devices $list"
    run_log "$out/load-spread.txt" 200 .dev/bin/cuparquet load "$f" --devices "$list"
    note "load --devices $list"
    tail -n 8 "$out/load-spread.txt"
  fi
}

part_fixed_cost() {
  local f i c=.dev/bin/cuparquet
  [ -x "$c" ] || die "no .dev/bin/cuparquet packed"
  f=$(bench_file latency)
  ensure_files latency
  ls -l "$f"
  "$c" load "$f" --device cuda:0 > /dev/null 2>&1 || true # warms the kernel cache
  for i in $(seq "${RUNS:-5}"); do
    echo "=== run $i"
    rc=0
    python3 scripts/py/cuda_floor.py || rc=$?
    note "cuda_floor.py"
    if [ -x /usr/bin/time ]; then
      /usr/bin/time -f "process %e s wall, %M KiB max RSS" "$c" load "$f" --device cuda:0 2>&1 \
        | grep -E "wall|setup|process" || true
    else
      { time "$c" load "$f" --device cuda:0; } 2>&1 | grep -E "wall|setup|real" || true
    fi
  done
}

part_hardening() {
  gpu_env
  local w=$PWD/.dev/writers keep=/tmp/keep b f
  local -a files_env=()
  if [ -d "$w" ]; then
    files_env=(CUPARQUET_MUTANTS_FILES="$w" CUPARQUET_SOAK_FILES="$w")
  else
    echo "no .dev/writers (bash scripts/pack.sh writers): the harness's own files only"
  fi
  rm -rf "$keep"
  while IFS=$'\t' read -r b f; do
    step "mutants through the host and cuda:0: ${b##*/} $f"
    run_log "$out/mutants.txt" "${TEST_LIMIT:-400}" env CUPARQUET_MUTANTS_DEVICE=cuda:0 \
      CUPARQUET_MUTANTS="${MUTANTS:-1}" CUPARQUET_MUTANTS_KEEP="$keep" "${files_env[@]}" \
      "$b" "$f" --nocapture --test-threads 1
    note "mutants"
    grep -vE "^test .* ok$" "$out/mutants.txt" | tail -n 60 || true
  done < <(targets mutants_load)
  while IFS=$'\t' read -r b f; do
    step "soak: ${b##*/} $f"
    run_log "$out/soak.txt" "${TEST_LIMIT:-300}" env CUPARQUET_SOAK="${SOAK:-1000}" "${files_env[@]}" \
      "$b" "$f" --nocapture
    note "soak"
    show "soak:|test result|panicked" "$out/soak.txt" 12
  done < <(targets many_loads_from_many_threads)
  local -a extra=()
  if [ -d "$w" ]; then extra=("$w"); fi
  started=$SECONDS
  DEADLINE=${DEADLINE:-300} sanitize race corpus-all "${extra[@]}"
  if [ -d "$keep" ]; then
    DEADLINE='' SAMPLE=${SAMPLE:-60} LOAD_ARGS='' sanitize memcheck "$keep"
  fi
}

part_ab() {
  [ -d .dev/old ] || die "no .dev/old (nor .dev/old.tar.xz): bash scripts/pack.sh ab COMMIT"
  local what=${1:-bench} n b i
  [ $# -gt 0 ] && shift
  case $what in
    bench)
      local -a names
      if [ $# -gt 0 ]; then names=("$@"); else read -r -a names <<< "${BENCHES:-decode}"; fi
      bench_env
      export CUPARQUET_BENCH_BASELINE=${CUPARQUET_BENCH_BASELINE:-0}
      export CUPARQUET_BENCH_ROUNDS=${CUPARQUET_BENCH_ROUNDS:-7}
      local -a pairs=()
      for n in "${names[@]}"; do # every binary found before any runs
        b=$(benchbin "$n" .dev/old)
        pairs+=("$b")
        b=$(benchbin "$n" .dev/bin)
        pairs+=("$b")
      done
      for ((i = 0; i < ${#pairs[@]}; i += 2)); do
        n=${pairs[i]##*/bench-}
        PAIRS=${PAIRS:-2} bench_runs "ab-${n%_device}" \
          "GB/s|median|data ready|panicked|first batch|scan alone| ms" "${pairs[i]}" "${pairs[i + 1]}"
      done ;;
    tests)
      local sel="" build
      if [ $# -gt 0 ] && [[ $1 != -* ]]; then sel=$1; shift; fi
      local -a names
      if [ -n "$sel" ]; then IFS=, read -r -a names <<< "$sel"
      else mapfile -t names < <(testbins .dev/old | sed 's|.*/||'); fi
      [ ${#names[@]} -gt 0 ] || die "no test binaries in .dev/old (pack.sh ab packs AB_TESTS)"
      gpu_env
      for n in "${names[@]}"; do
        for build in old new; do
          local dir=.dev/bin
          [ $build = old ] && dir=.dev/old
          b=$(testbin "$n" "$dir") || { echo "($build has no $n)"; continue; }
          step "$build ${b##*/} $*"
          run_log "$out/ab-tests-$build-${b##*/}.txt" "${TEST_LIMIT:-300}" "$b" "$@"
          note "$build ${b##*/}"
          show "${SHOW:-test result|FAILED|panicked|equal|round-tripped}" "$out/ab-tests-$build-${b##*/}.txt" 30
        done
      done ;;
    *) die "ab: bench or tests, not '$what'" ;;
  esac
}

gdb_setup() {
  if command -v gdb > /dev/null || [ ! -f .dev/gdbpack.tar.xz ]; then return 0; fi
  # a gdb carried from the development machine: gdb, its libraries and Python's standard library
  tar -C /tmp -xJf .dev/gdbpack.tar.xz
  mkdir -p /tmp/gdbpack/bin
  printf '#!/bin/sh\nPYTHONHOME=/tmp/gdbpack/py LD_LIBRARY_PATH=/tmp/gdbpack/lib exec /tmp/gdbpack/gdb -nx "$@"\n' \
    > /tmp/gdbpack/bin/gdb
  chmod +x /tmp/gdbpack/bin/gdb
  export PATH="/tmp/gdbpack/bin:$PATH"
  gdb --version 2>&1 | head -n 1 || true
}

part_hang() {
  [ $# -gt 0 ] || die "hang: name the tests (TEST, BIN:TEST or BIN:all)"
  gpu_env
  gdb_setup
  local -a runs=()
  local t b name
  for t; do
    if [[ $t == *:all ]]; then
      b=$(testbin "${t%:all}") || exit 2
      runs+=("$b"$'\t'all)
    elif [[ $t =~ ^([^:]+):([^:].*)?$ ]]; then
      b=$(testbin "${BASH_REMATCH[1]}") || exit 2
      mapfile -t -O "${#runs[@]}" runs < <("$b" --list 2> /dev/null | sed -n 's/: test$//p' \
        | grep -F -- "${BASH_REMATCH[2]}" | awk -v b="$b" '{ print b "\t" $0 }' || true)
    else
      mapfile -t -O "${#runs[@]}" runs < <(tests_named "$t")
    fi
  done
  [ ${#runs[@]} -gt 0 ] || die "no packed test named $*"
  local r k pid start f task
  for r in "${runs[@]}"; do
    b=${r%%$'\t'*}
    name=${r#*$'\t'}
    for k in $(seq "${TIMES:-2}"); do
      f="$out/hang-${b##*/}-${name//[^A-Za-z0-9_.-]/_}-$k.txt"
      step "${b##*/} $name (try $k)"
      start=$(date +%s)
      if [ "$name" = all ]; then
        "$b" --test-threads="${THREADS:-2}" ${SKIP:+--skip "$SKIP"} > "$f" 2>&1 &
      else
        "$b" --exact "$name" --test-threads=1 > "$f" 2>&1 &
      fi
      pid=$!
      for _ in $(seq $((${WAIT:-40} * 10))); do
        kill -0 "$pid" 2> /dev/null || break
        sleep 0.1
      done
      local hung=0
      if kill -0 "$pid" 2> /dev/null; then
        hung=1
        echo "still running after ${WAIT:-40} s: stacks"
        failed+=("${b##*/} $name: still running after ${WAIT:-40} s")
        if command -v gdb > /dev/null; then
          timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt 30" > "${f%.txt}-gdb.txt" 2>&1 || true
          grep -E "^Thread|^#" "${f%.txt}-gdb.txt" \
            | grep -vE " in (syscall|__futex|futex_wait|pthread_cond|__GI___|std::sys::)" \
            | sed -E 's/ \(.*//; s/0x[0-9a-f]+ in //' | cut -c1-160 | head -n 220 || true
        else
          for task in /proc/"$pid"/task/*; do
            echo "$(cat "$task/comm") $(cat "$task/wchan" 2> /dev/null) $(awk '{ print $3 }' "$task/stat")"
          done | sort | uniq -c | head -n 40 || true
        fi
        nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader || true
        kill -9 "$pid"
      fi
      rc=0
      wait "$pid" 2> /dev/null || rc=$?
      echo "rc=$rc after $(($(date +%s) - start)) s"
      [ "$hung" = 1 ] || note "${b##*/} $name"
      show "^test |test result|panicked|FAILED" "$f" 12
    done
  done
}

# part_python: scripts/device-python.sh (sourced)

setup
started=$SECONDS
case $part in
  tests) part_tests "$@" ;;
  cli) part_cli ;;
  bench-io) part_bench_io ;;
  bench-decode) part_bench_decode ;;
  bench-stream) part_bench_stream ;;
  bench-filter) part_bench_filter ;;
  bench-aggregate) part_bench_aggregate ;;
  bench-host) part_bench_host ;;
  sql) part_sql ;;
  compare) part_compare "$@" ;;
  sanitize) part_sanitize "$@" ;;
  c-device) part_c_device ;;
  distributed) part_distributed ;;
  spread) part_spread ;;
  fixed-cost) part_fixed_cost ;;
  hardening) part_hardening ;;
  ab) part_ab "$@" ;;
  hang) part_hang "$@" ;;
  python) . scripts/device-python.sh && part_python ;;
  remote) . scripts/device-remote.sh && part_remote ;;
esac
if [ -f cufile.log ]; then cp -f cufile.log "$out/" 2> /dev/null || true; fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "=== device.sh $part: ${#failed[@]} failed"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "=== device.sh $part: all passed"
