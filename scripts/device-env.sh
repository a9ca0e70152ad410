# Sourced from the repository root by the device-*.sh scripts on the GPU machine: unpacks the
# packed binaries (.dev/bin.tar.xz), sets $out (OUT, default /tmp/out), the tests' and the
# benches' environment (bench files in /tmp/bench-data), and prints the machine and the commit.
[ -f .dev/bin.tar.xz ] && [ ! -d .dev/bin ] && tar -C .dev -xJf .dev/bin.tar.xz
out=${OUT:-/tmp/out}; mkdir -p "$out"
export INSTA_WORKSPACE_ROOT="$PWD" INSTA_UPDATE=no CUPARQUET_KERNEL_CACHE=/tmp/cuparquet-kernels
export CUPARQUET_BENCH_DIR=/tmp/bench-data
mkdir -p /tmp/bench-data
echo "=== machine"; nproc; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "commit: $(cat .dev/COMMIT 2>/dev/null)"
# The wheels earlier calls moved to /tmp/whl (cuDF, KvikIO, nvCOMP, pyarrow), installed into
# /tmp/site for python and nvCOMP found there by the loads.
wheels() {
  bash .dev/wheels.sh install >/dev/null && export PYTHONPATH=/tmp/site \
    CUPARQUET_NVCOMP=/tmp/site/nvidia/libnvcomp/lib64
}
