// A column against a column of the same type (pred_cols in src/decode/gpu/kernels/filter.cu)
// run on the host by tests/emulated/pred_cols.rs.
// Input (little-endian): u32 cases; per case: u32 mode, u32 width, u64 rows, the left values
//   (rows * width bytes), the right values, then each side's (rows + 7) / 8 validity bytes.
// Output: per case, rows bytes (1: the row holds).
#include "cuda_host.h"
#include <cstdio>
#include <vector>
#include "filter.cu"
#include "read_input.h"

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* f = std::fopen(argv[1], "rb");
    FILE* o = std::fopen(argv[2], "wb");
    if (!f || !o) return 3;
    u32 cases = 0;
    if (!rd(f, cases)) return 4;
    for (u32 c = 0; c < cases; c++) {
        u32 mode = 0, width = 0;
        u64 rows = 0;
        std::vector<u8> a, b, va, vb;
        if (!rd(f, mode) || !rd(f, width) || !rd(f, rows)) return 4;
        if (!rd_bytes(f, a, rows * width) || !rd_bytes(f, b, rows * width)) return 4;
        if (!rd_bytes(f, va, (rows + 7) / 8) || !rd_bytes(f, vb, (rows + 7) / 8)) return 4;
        std::vector<u8> out(rows ? rows : 1, 0xee);
        emu_launch((unsigned)((rows + FILTER_THREADS - 1) / FILTER_THREADS), FILTER_THREADS, [&] {
            pred_cols(a.data(), b.data(), rows, va.data(), vb.data(), (int)mode, out.data());
        });
        std::fwrite(out.data(), 1, rows, o);
    }
    std::fclose(f);
    std::fclose(o);
    return 0;
}
