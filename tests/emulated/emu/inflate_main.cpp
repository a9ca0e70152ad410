// The GZIP kernel (src/decode/gpu/kernels/inflate.cu, appended to snappy.cu) run on the host by
// tests/emulated/gzip.rs. Usage: inflate_emu IN OUT.
// Input file: u32 jobs, then per job u64 src_len, u64 dst_len, src bytes.
// Output file: per job u32 error bits, dst_len bytes, u32 the byte after the output (0xEE when
// untouched).
#include "cuda_host.h"
#include <cstdio>
#include "snappy.cu"
#include "inflate.cu"
#include "streams.h"

int main(int argc, char** argv) {
    if (argc != 3) { std::fprintf(stderr, "usage: inflate_emu IN OUT\n"); return 2; }
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) return 3;
    u32 n = 0;
    if (std::fread(&n, 4, 1, f) != 1) return 4;
    Streams st;
    if (!read_streams(f, n, st)) return 5;
    std::vector<DecompressJob>& jobs = st.jobs;
    std::fclose(f);
    std::vector<u32> errors(n ? n : 1, 0xdead);
    const u32 grid = (n + INFLATE_WARPS - 1) / INFLATE_WARPS;
    emu_launch(grid, INFLATE_THREADS, [&] { gzip_pages(jobs.data(), (int)n, errors.data()); });
    FILE* o = std::fopen(argv[2], "wb");
    if (!o) return 7;
    write_outputs(o, st, errors);
    std::fclose(o);
    return 0;
}
