// Reading the emulators' inputs (tests/emulated/emu/*_main.cpp): little-endian values and page jobs.
// Include after common.cuh (PageJob).
#pragma once
#include <cstdio>
#include <vector>

template <typename T> static bool rd(FILE* f, T& v) { return std::fread(&v, sizeof(T), 1, f) == 1; }

// The data page jobs of a pass: u32 jobs; per job u32 column, i32 num_values, encoding, max_def,
// v2, def_len, rep_len, skip, take, max_rep, u64 row_start, u64 data_len, data bytes (the dictionary is
// the column's, set by the emulator's main). Each page's data gets its own
// exact-size allocation (the sanitizer build catches reads past it); `base` is the prefix sum
// of the pages' values (the kernels' scratch index), `total` their sum.
struct Pages {
    std::vector<PageJob> jobs;
    std::vector<std::vector<u8>> data;
    std::vector<u64> base;
    u64 total = 0;

    bool read(FILE* f) {
        u32 n = 0;
        if (!rd(f, n)) return false;
        jobs.resize(n);
        data.resize(n);
        base.resize(n);
        for (u32 p = 0; p < n; p++) {
            u32 col;
            int nv, enc, md, v2, dl, rl, skip, take, mr;
            u64 rs, len;
            if (!(rd(f, col) && rd(f, nv) && rd(f, enc) && rd(f, md) && rd(f, v2) && rd(f, dl) &&
                  rd(f, rl) && rd(f, skip) && rd(f, take) && rd(f, mr) && rd(f, rs) &&
                  rd(f, len)))
                return false;
            data[p].resize(len ? len : 1);
            if (len && std::fread(data[p].data(), 1, len, f) != len) return false;
            jobs[p] = PageJob{(u64)data[p].data(), len, rs, 0, nv, enc, md, v2, dl, rl, (int)col,
                              0, skip, take, mr, -1};  // v2_values: not checked here
            base[p] = total;
            total += nv > 0 ? (u64)nv : 0;
        }
        return true;
    }
    u32 size() const { return (u32)jobs.size(); }
};
