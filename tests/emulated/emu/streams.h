// The compressed streams the decompression emulators read (snappy_main.cpp, inflate_main.cpp):
// u32 jobs, then per job u64 src_len, u64 dst_len, src bytes. Each source ends where its
// allocation ends (the sanitizer build catches reads past it) and starts job % 8 bytes into it,
// those bytes poisoned for AddressSanitizer (reads before it are caught too, and kernels see
// sources at every alignment, as page data lies in a load's buffer); each output is one byte
// longer, filled with 0xEE (bytes the kernel leaves unwritten show, and the byte after must
// stay).
#pragma once
#include <cstdio>
#include <vector>

struct Streams {
    std::vector<std::vector<u8>> srcs, dsts;
    std::vector<DecompressJob> jobs;
};

// The jobs of `f`, or false when it ends early.
inline bool read_streams(FILE* f, u32 n, Streams& s) {
    s.srcs.resize(n);
    s.dsts.resize(n);
    s.jobs.resize(n);
    for (u32 i = 0; i < n; i++) {
        u64 sl = 0, dl = 0;
        if (std::fread(&sl, 8, 1, f) != 1 || std::fread(&dl, 8, 1, f) != 1) return false;
        const u64 skip = i % 8;
        s.srcs[i].resize(skip + (sl ? sl : 1));
        u8* src = s.srcs[i].data() + skip;
        if (sl && std::fread(src, 1, sl, f) != sl) return false;
#if EMU_ASAN
        if (skip) ASAN_POISON_MEMORY_REGION(s.srcs[i].data(), skip);
#endif
        s.dsts[i].assign(dl + 1, 0xEE);
        s.jobs[i] = DecompressJob{(u64)src, sl, (u64)s.dsts[i].data(), dl};
    }
    return true;
}

// Per job: u32 error bits, dst_len bytes, u32 the byte after the output.
inline void write_outputs(FILE* o, const Streams& s, const std::vector<u32>& errors) {
    for (size_t i = 0; i < s.jobs.size(); i++) {
        std::fwrite(&errors[i], 4, 1, o);
        std::fwrite(s.dsts[i].data(), 1, s.jobs[i].dst_len, o);
        u32 guard = s.dsts[i][s.jobs[i].dst_len];
        std::fwrite(&guard, 4, 1, o);
    }
}
