// The GZIP kernel (src/decode/gpu/kernels/inflate.cu, appended to snappy.cu) run on the host by
// tests/emulated_gzip.rs. Usage: inflate_emu IN OUT.
// Input file: u32 jobs, then per job u64 src_len, u64 dst_len, src bytes.
// Output file: per job u32 error bits, dst_len bytes, u32 the byte after the output (0xEE when
// untouched).
#include "cuda_host.h"
#include <cstdio>
#include "snappy.cu"
#include "inflate.cu"

int main(int argc, char** argv) {
    if (argc != 3) { std::fprintf(stderr, "usage: inflate_emu IN OUT\n"); return 2; }
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) return 3;
    u32 n = 0;
    if (std::fread(&n, 4, 1, f) != 1) return 4;
    std::vector<std::vector<u8>> srcs(n), dsts(n);
    std::vector<SnappyJob> jobs(n);
    for (u32 i = 0; i < n; i++) {
        u64 sl = 0, dl = 0;
        if (std::fread(&sl, 8, 1, f) != 1 || std::fread(&dl, 8, 1, f) != 1) return 5;
        srcs[i].resize(sl ? sl : 1);  // exact: the sanitizer build catches reads past it
        if (sl && std::fread(srcs[i].data(), 1, sl, f) != sl) return 6;
        dsts[i].assign(dl + 1, 0xEE);  // poison: bytes the kernel leaves unwritten show
        jobs[i] = SnappyJob{(u64)srcs[i].data(), sl, (u64)dsts[i].data(), dl};
    }
    std::fclose(f);
    std::vector<u32> errors(n ? n : 1, 0xdead);
    const u32 grid = (n + INFLATE_WARPS - 1) / INFLATE_WARPS;
    emu_launch(grid, INFLATE_THREADS, [&] { gzip_pages(jobs.data(), (int)n, errors.data()); });
    FILE* o = std::fopen(argv[2], "wb");
    if (!o) return 7;
    for (u32 i = 0; i < n; i++) {
        std::fwrite(&errors[i], 4, 1, o);
        std::fwrite(dsts[i].data(), 1, jobs[i].dst_len, o);
        u32 guard = dsts[i][jobs[i].dst_len];
        std::fwrite(&guard, 4, 1, o);
    }
    std::fclose(o);
    return 0;
}
