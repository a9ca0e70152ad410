// The SNAPPY kernels (src/decode/gpu/kernels/snappy.cu) run on the host by tests/emulated.rs.
// Usage: snappy_emu IN OUT [pages|split|fragments|lz4] (default pages).
// Input file: u32 jobs, then per job u64 src_len, u64 dst_len, src bytes.
// Output file, pages / fragments: per job u32 error bits, dst_len bytes, u32 the byte after the
//   output (0xEE when untouched). split: per job u32 error bits, then ceil(dst_len / 65536) u64
//   split entries. lz4 (lz4_check, the jobs LZ4 blocks): per job u32 error bits.
#include "cuda_host.h"
#include <cstdio>
#include <cstring>
#include "snappy.cu"

int main(int argc, char** argv) {
    if (argc != 3 && argc != 4) { std::fprintf(stderr, "usage: snappy_emu IN OUT [MODE]\n"); return 2; }
    const char* mode = argc == 4 ? argv[3] : "pages";
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
    std::vector<u32> errors(n, 0);
    FILE* o = std::fopen(argv[2], "wb");
    if (!o) return 7;
    if (std::strcmp(mode, "lz4") == 0) {
        emu_launch(n, SNAPPY_THREADS, [&] { lz4_check(jobs.data(), (int)n, errors.data()); });
        std::fwrite(errors.data(), 4, n, o);
    } else if (std::strcmp(mode, "split") == 0) {
        std::vector<u64> base(n + 1, 0);
        for (u32 i = 0; i < n; i++) base[i + 1] = base[i] + (jobs[i].dst_len + SNAPPY_FRAGMENT - 1) / SNAPPY_FRAGMENT;
        std::vector<u64> splits(base[n] ? base[n] : 1, ~0ull);
        splits.resize(base[n]);  // exact size
        emu_launch(n, SNAPPY_THREADS, [&] {
            snappy_split(jobs.data(), (int)n, splits.data(), base.data(), errors.data());
        });
        for (u32 i = 0; i < n; i++) {
            std::fwrite(&errors[i], 4, 1, o);
            if (base[i + 1] > base[i]) std::fwrite(splits.data() + base[i], 8, base[i + 1] - base[i], o);
        }
    } else {
        const bool frag = std::strcmp(mode, "fragments") == 0;
        emu_launch(n, SNAPPY_THREADS, [&] {
            if (frag) snappy_fragments(jobs.data(), (int)n, errors.data());
            else snappy_pages(jobs.data(), (int)n, errors.data());
        });
        for (u32 i = 0; i < n; i++) {
            std::fwrite(&errors[i], 4, 1, o);
            std::fwrite(dsts[i].data(), 1, jobs[i].dst_len, o);
            // the byte after the output must be untouched
            u32 guard = dsts[i][jobs[i].dst_len];
            std::fwrite(&guard, 4, 1, o);
        }
    }
    std::fclose(o);
    return 0;
}
