#!/usr/bin/env bash
# Compiles every kernel module with NVRTC for sm_90 and sm_80 on a machine without a GPU (the
# `kernels_compile_with_nvrtc` unit test, which skips where NVRTC is missing): NVRTC comes from
# the nvidia-cuda-nvrtc-cu12 wheel (pip download, unpacked under target/nvrtc), nothing
# installed. With REGISTERS=1 it also prints ptxas's registers, spills and shared memory per
# kernel of MODULE (default decompress: snappy.cu and inflate.cu).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=target/nvrtc
if [ ! -e $dir/lib/libnvrtc.so ]; then
  mkdir -p $dir/whl
  pip download --quiet --no-deps nvidia-cuda-nvrtc-cu12 -d $dir/whl
  python3 -m zipfile -e $dir/whl/*.whl $dir/x
  mkdir -p $dir/lib
  cp $dir/x/nvidia/cuda_nvrtc/lib/* $dir/lib/
  ln -sf libnvrtc.so.12 $dir/lib/libnvrtc.so
fi
export LD_LIBRARY_PATH="$PWD/$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cargo test --lib compile_with_nvrtc -- --nocapture
if [ "${REGISTERS:-0}" = 1 ]; then
  case "${MODULE:-decompress}" in
    decompress) files="snappy.cu inflate.cu" ;;
    *) files="common.cuh ${MODULE}.cu" ;;
  esac
  # shellcheck disable=SC2086  # $files: several names
  (cd src/decode/gpu/kernels && cat $files) > $dir/module.cu
  python3 - "$dir/lib/libnvrtc.so" "$dir/module.cu" <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
src = open(sys.argv[2], "rb").read()
prog = ctypes.c_void_p()
assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"module.cu", 0, None, None) == 0
opts = [b"--gpu-architecture=sm_90", b"--ptxas-options=-v", b"--std=c++17"]
rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
n = ctypes.c_size_t()
lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
log = ctypes.create_string_buffer(n.value)
lib.nvrtcGetProgramLog(prog, log)
print("nvrtc:", "ok" if rc == 0 else f"failed ({rc})")
for line in log.value.decode().splitlines():
    if "Compiling entry" in line or "Used" in line or "spill" in line or "error" in line:
        print(line)
PY
fi
