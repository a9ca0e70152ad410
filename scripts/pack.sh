#!/usr/bin/env bash
# Development machine: packs .dev/ (and .dev-whl/) for a call on the GPU machine, where
# scripts/device.sh runs from the repository root with .dev/ carried.
#   bash scripts/pack.sh WHAT... [-- CARGO-ARGS]          (bash scripts/pack.sh help)
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
shared=${SHARED:-$root/../shared/device}
export XZ_OPT=${XZ_OPT:--T0 -6}

usage() {
  cat <<'EOF'
Usage: bash scripts/pack.sh WHAT... [-- CARGO-ARGS]
Packs .dev/ for the GPU machine (carry [".dev"], and ".dev-whl" where wheels are needed; 64 MiB
in all), then runs there:  bash scripts/device.sh PART   (bash scripts/device.sh help)

WHAT, in the order given:
  tests        starts .dev/ afresh, as ../shared/device/pack.sh does (which stops in a git
               worktree): the release test binaries, .dev/bin/test-<kind>-<name> (test-test-read,
               test-test-gpu, test-lib-cuparquet, ...; CARGO-ARGS choose them: -- --workspace
               (SQL, distributed), -- --test read --test gpu), the CLI, the corpus, and
               ../shared/device's run.sh, prepare-cufile-vm.sh and wheels.sh. KEEP_SYMBOLS=1:
               the test binaries keep their symbols (names in the stacks of device.sh hang).
  bench        the release bench binaries, .dev/bin/bench-<name> (BENCHES: their names, e.g.
               "decode_device stream_device"; default every bench of the workspace).
  capi         the C API: .dev/bin/libcuparquet.so and the C example built against it
               (.dev/bin/c-stream) for device.sh c-device.
  ab COMMIT    an earlier build into .dev/old.tar.xz for device.sh ab (and the sanitizer's A/B
               loads), built in a worktree (AB_WORKTREE, default /tmp/cuparquet-ab-COMMIT): the
               benches of BENCHES (default decode_device), the tests of AB_TESTS (cargo --test
               names as they were at COMMIT, e.g. "gpu conformance"; default none) and the CLI.
  writers      pyarrow, DuckDB and Polars files (scripts/py/writers.py, ROWS rows, default 5000)
               into .dev/writers for device.sh sanitize and hardening.
  gdb          this machine's gdb with its libraries and Python's standard library (~24 MiB) as
               .dev/gdbpack.tar.xz (the GPU machine has none) for device.sh hang.
  python       the Python module's release wheel (maturin, stripped) into .dev/py/.
  s3-server    the S3-compatible server of the remote benchmark (tools/s3-server: the s3s-fs
               crate's file system, TCP_NODELAY set) as .dev/bin/s3-server, for device.sh remote.
  wheels NAME...   wheels for the GPU machine into .dev-whl/ (../shared/device/wheels.sh: kvikio,
               nvcomp, nvcomp6, duckdb, datafusion, cudf (in parts: see its header); and pyarrow;
               and pygpu: one tar of the wheels device.sh python uses — cuDF's set, CuPy,
               cuda-bindings, the CUDA runtime, NumPy, pyarrow, pytest (PYPKGS: more) — cut into
               50 MiB parts .dev-whl/partNN, each carried in a call of its own ("mkdir -p
               /tmp/whl && mv .dev-whl/partNN /tmp/whl/") before the call that runs it).
  help         this text.
Then, unless XZ=0, .dev/bin is compressed into .dev/bin.tar.xz (device.sh unpacks it).
DROP="emulated cli": test binaries left out (by <name>) to fit the 64 MiB.

Recipes:
  pack.sh tests bench                            device.sh tests; cli; bench-decode; ...
  pack.sh tests bench -- --workspace             device.sh sql; distributed
  pack.sh tests capi && pack.sh wheels pyarrow   device.sh c-device (and the cuDF parts)
  pack.sh tests bench ab COMMIT -- --test gpu    device.sh ab bench decode stream
  pack.sh tests writers                          device.sh hardening; sanitize race
  BENCHES="decode_device stream_device" pack.sh bench python wheels pygpu   device.sh python
  BENCHES="decode_device remote_device" pack.sh bench s3-server wheels kvikio   device.sh remote
EOF
}

whats=(tests bench capi ab writers gdb wheels python s3-server help)
is_what() { local w; for w in "${whats[@]}"; do [ "$w" = "$1" ] && return 0; done; return 1; }
die() { echo "pack.sh: $*" >&2; exit 2; }
# pick [test]: "kind-name<TAB>executable" of each executable artifact of cargo's JSON on stdin
# (test: those built as test harnesses only)
pick() {
  python3 -c 'import sys, json
only_tests = sys.argv[1:] == ["test"]
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") != "compiler-artifact" or not m.get("executable"): continue
    if only_tests and not m.get("profile", {}).get("test"): continue
    print(m["target"]["kind"][0] + "-" + m["target"]["name"] + "\t" + m["executable"])' "$@"
}
unpack() {
  mkdir -p .dev/bin
  if [ -f .dev/bin.tar.xz ]; then tar -C .dev -xJf .dev/bin.tar.xz && rm -f .dev/bin.tar.xz; fi
}

# the steps, parsed first (so that a wrong word stops before anything is built)
steps=()
cargo_args=()
while [ $# -gt 0 ]; do
  case $1 in
    --) shift; cargo_args=("$@"); break ;;
    ab) [ $# -ge 2 ] || die "ab needs a COMMIT"; steps+=("ab $2"); shift 2 ;;
    wheels)
      shift
      names=""
      while [ $# -gt 0 ] && [ "$1" != -- ] && ! is_what "$1"; do
        case $1 in
          kvikio | nvcomp | nvcomp6 | duckdb | datafusion | cudf | pyarrow | pygpu) names+=" $1"; shift ;;
          *) die "wheels: no '$1' (kvikio nvcomp nvcomp6 duckdb datafusion cudf pyarrow pygpu)" ;;
        esac
      done
      [ -n "$names" ] || die "wheels needs names (kvikio nvcomp nvcomp6 duckdb datafusion cudf pyarrow pygpu)"
      steps+=("wheels$names") ;;
    *) is_what "$1" || die "unknown WHAT '$1' (${whats[*]}; bash scripts/pack.sh help)"
       steps+=("$1"); shift ;;
  esac
done
[ ${#steps[@]} -gt 0 ] || { usage >&2; exit 2; }
for s in "${steps[@]}"; do [ "$s" = help ] && { usage; exit 0; }; done
for ((i = 1; i < ${#steps[@]}; i++)); do
  [ "${steps[i]}" != tests ] || die "tests first: it starts .dev/ afresh"
done
if [ ${#cargo_args[@]} -gt 0 ] && [ "${steps[0]}" != tests ]; then die "CARGO-ARGS go to tests"; fi

mkdir -p .dev # .dev/ and .dev-whl/ are in .gitignore

pack_tests() {
  [ -f "$shared/run.sh" ] || die "no $shared/run.sh (SHARED: the folder of the device scripts)"
  [ -d "$shared/../parquet-testing" ] || die "no corpus at $shared/../parquet-testing"
  rm -rf .dev
  mkdir -p .dev/bin .dev/corpus
  local name exe stripper=(strip)
  [ "${KEEP_SYMBOLS:-0}" = 1 ] && stripper=(strip --strip-debug)
  cargo build --release --bins --message-format=json-render-diagnostics "${cargo_args[@]}" | pick \
    | while IFS=$'\t' read -r name exe; do
      case $name in bin-*) cp "$exe" ".dev/bin/${name#bin-}" && strip ".dev/bin/${name#bin-}" ;; esac
    done
  cargo test --release --no-run --message-format=json-render-diagnostics "${cargo_args[@]}" | pick test > .dev/tests.tsv
  while IFS=$'\t' read -r name exe; do
    cp "$exe" ".dev/bin/test-$name" && "${stripper[@]}" ".dev/bin/test-$name"
  done < .dev/tests.tsv
  cp -r "$shared/../parquet-testing" .dev/corpus/
  cp "$shared/run.sh" "$shared/prepare-cufile-vm.sh" "$shared/wheels.sh" .dev/
  echo "$(wc -l < .dev/tests.tsv) test binaries: $(cut -f1 .dev/tests.tsv | paste -sd ' ')"
}

pack_bench() {
  unpack
  local -a sel=(--workspace)
  local b name exe
  for b in ${BENCHES:-}; do sel+=(--bench "$b"); done
  # remote_device needs the object-store feature (every bench is built with it)
  sel+=(--features cuparquet/object-store)
  cargo bench --no-run --message-format=json-render-diagnostics "${sel[@]}" | pick \
    | while IFS=$'\t' read -r name exe; do
      case $name in bench-*) cp "$exe" ".dev/bin/$name" && strip ".dev/bin/$name" ;; esac
    done
  compgen -G ".dev/bin/bench-*" > /dev/null || die "no bench binary built"
  echo "benches: $(cd .dev/bin && echo bench-*)"
}

pack_s3s() {
  unpack
  # device.sh remote installs the wheels carried with it
  cp "$shared/wheels.sh" .dev/
  cargo build --release --manifest-path tools/s3-server/Cargo.toml
  cp tools/s3-server/target/release/cuparquet-s3-server .dev/bin/s3-server
}

pack_capi() {
  unpack
  cargo rustc --release --lib --features capi --crate-type cdylib
  cp target/release/libcuparquet.so .dev/bin/libcuparquet.so && strip .dev/bin/libcuparquet.so
  # shellcheck disable=SC2016  # $ORIGIN is the loader's
  cc -std=c11 -O2 -Wall -Wextra -Werror -Iinclude examples/c/stream.c -L.dev/bin -lcuparquet \
    -Wl,-rpath,'$ORIGIN' -o .dev/bin/c-stream
}

pack_ab() {
  local commit=$1 wt name exe b t
  wt=${AB_WORKTREE:-/tmp/cuparquet-ab-${commit//\//-}}
  [ -d "$wt" ] || git worktree add --detach "$wt" "$commit"
  rm -rf .dev/old
  mkdir -p .dev/old
  git -C "$wt" rev-parse --short HEAD > .dev/old/COMMIT
  local -a benches=() tests=()
  for b in ${BENCHES:-decode_device}; do benches+=(--bench "$b"); done
  for t in ${AB_TESTS:-}; do tests+=(--test "$t"); done
  (
    cd "$wt"
    cargo bench --no-run --workspace "${benches[@]}" --message-format=json-render-diagnostics | pick
    if [ ${#tests[@]} -gt 0 ]; then
      cargo test --release --no-run --workspace "${tests[@]}" --message-format=json-render-diagnostics | pick test
    fi
    cargo build --release --bin cuparquet --message-format=json-render-diagnostics | pick
  ) | while IFS=$'\t' read -r name exe; do
    case $name in
      bench-*) cp "$exe" ".dev/old/$name" ;;
      test-*) cp "$exe" ".dev/old/test-$name" ;;
      bin-cuparquet) cp "$exe" .dev/old/cuparquet ;;
      *) continue ;;
    esac
  done
  strip .dev/old/* 2> /dev/null || true
  echo "old build $(cat .dev/old/COMMIT): $(cd .dev/old && echo bench-* test-* cuparquet)"
  tar -C .dev -cJf .dev/old.tar.xz old && rm -rf .dev/old
}

pack_writers() {
  rm -rf .dev/writers
  python3 scripts/py/writers.py .dev/writers --rows "${ROWS:-5000}"
  du -sh .dev/writers
}

pack_gdb() {
  local gdb tmp py
  gdb=$(command -v gdb) || die "no gdb on this machine"
  tmp=$(mktemp -d)
  mkdir -p "$tmp/gdbpack/lib" "$tmp/gdbpack/py/lib"
  cp "$gdb" "$tmp/gdbpack/gdb"
  # its libraries but glibc's own (the GPU machine's are newer)
  ldd "$gdb" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' \
    | grep -vE '/lib(c|m|pthread|dl|rt)\.so' | xargs -I{} cp -L {} "$tmp/gdbpack/lib/"
  # gdb does not start without Python's standard library (tests and packages left out)
  py=$(ldd "$gdb" | grep -oE 'libpython3\.[0-9]+' | head -n 1 | sed 's/^lib//')
  if [ -z "$py" ] || [ ! -d "/usr/lib/$py" ]; then die "gdb's Python library not found"; fi
  tar -C /usr/lib --exclude='test' --exclude='*-packages' --exclude='__pycache__' \
    --exclude='idlelib' --exclude='tkinter' --exclude='ensurepip' --exclude='lib2to3' \
    --exclude='config-*' --exclude='pydoc_data' --exclude='distutils' --exclude='unittest' \
    -cf - "$py" | tar -C "$tmp/gdbpack/py/lib" -xf -
  tar -C "$tmp" -cJf .dev/gdbpack.tar.xz gdbpack
  rm -rf "$tmp"
  du -sh .dev/gdbpack.tar.xz
}

pack_wheels() {
  local n
  mkdir -p .dev-whl
  for n; do
    case $n in
      pygpu) pack_python_wheels ;;
      pyarrow)
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
          --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
          -d .dev-whl pyarrow ;;
      *)
        # the shared script appends to .git/info/exclude, a path a worktree lacks (and .gitignore
        # has .dev-whl/): that line left out
        bash <(sed 's#^grep -qxF ./\.dev-whl/. \.git/info/exclude.*$#:#' "$shared/wheels.sh") "$n" ;;
    esac
  done
}

pack_python() {
  unpack
  local venv=${VENV:-target/py-venv}
  if [ ! -x "$venv/bin/maturin" ]; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet "maturin>=1.9,<2"
  fi
  rm -rf .dev/py && mkdir -p .dev/py
  "$venv/bin/maturin" build --release --strip --quiet -m python/Cargo.toml -o .dev/py
  echo "wheel: $(cd .dev/py && ls -l -- *.whl)"
}

# the wheels of device.sh python in one tar cut into 50 MiB parts (.dev-whl/partNN): its
# `python` part unpacks the parts moved to /tmp/whl as one stream
pack_python_wheels() {
  local w
  w=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$w" \
    kvikio-cu13==26.10.0 libkvikio-cu13==26.10.0 libcudf-cu13==26.10.2 pylibcudf-cu13==26.10.2 \
    librmm-cu13==26.10.0 rmm-cu13==26.10.0 nvidia-libnvcomp-cu13==5.3.0.16 rapids-logger==0.3.0 nvtx \
    cupy-cuda13x fastrlock cuda-pathfinder "cuda-bindings==13.0.*" "nvidia-cuda-runtime==13.0.*" \
    "numpy<2.6" pyarrow pytest iniconfig pluggy packaging pygments ${PYPKGS:-}
  mkdir -p .dev-whl && rm -f .dev-whl/part*
  tar -C "$w" -cf - . | split -b 50M -d - .dev-whl/part
  rm -rf "$w"
  ls -l .dev-whl/part*
}

for s in "${steps[@]}"; do
  echo "=== pack.sh $s"
  case $s in
    tests) pack_tests ;;
    bench) pack_bench ;;
    capi) pack_capi ;;
    ab\ *) pack_ab "${s#ab }" ;;
    writers) pack_writers ;;
    gdb) pack_gdb ;;
    python) pack_python ;;
    s3-server) pack_s3s ;;
    wheels\ *) read -r -a names <<< "${s#wheels }"; pack_wheels "${names[@]}" ;;
  esac
done

git rev-parse --short HEAD > .dev/COMMIT
git diff --quiet HEAD 2> /dev/null || sed -i 's/$/+changes/' .dev/COMMIT
if [ -d .dev/bin ]; then
  for d in ${DROP:-}; do rm -f ".dev/bin/test-test-$d" ".dev/bin/test-$d"; done
  if [ "${XZ:-1}" = 1 ]; then
    tar -C .dev -cJf .dev/bin.tar.xz bin && rm -rf .dev/bin
  fi
fi
size=$(du -sm .dev | cut -f1)
whl=0
[ -d .dev-whl ] && whl=$(du -sm .dev-whl | cut -f1)
echo "packed .dev/: $size MiB (commit $(cat .dev/COMMIT))$([ "$whl" = 0 ] || echo "; .dev-whl/: $whl MiB")"
if [ $((size + whl)) -ge 60 ]; then
  echo "WARNING: near or over the 64 MiB that can travel: pack fewer tests (-- --test read --test gpu), DROP=..., or carry .dev-whl in a call of its own"
fi
