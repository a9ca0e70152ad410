// LIKE on strings (pred_like in src/decode/gpu/kernels/filter.cu) run on the host by
// tests/emulated/like.rs.
// Input (little-endian): u32 cases; per case: u32 wide, u32 negated, u64 pattern length, the
//   token kinds, the token bytes, u64 rows, (rows + 1) offsets (i64 when wide, else i32),
//   u64 chars, the chars, then (rows + 7) / 8 validity bytes.
// Output: per case, rows bytes (1: the row is kept).
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
        u32 wide = 0, negated = 0;
        u64 pat_len = 0, rows = 0, nchars = 0;
        std::vector<u8> kinds, bytes, offsets, chars, valid;
        if (!rd(f, wide) || !rd(f, negated) || !rd(f, pat_len)) return 4;
        if (!rd_bytes(f, kinds, pat_len) || !rd_bytes(f, bytes, pat_len)) return 4;
        if (!rd(f, rows) || !rd_bytes(f, offsets, (rows + 1) * (wide ? 8 : 4))) return 4;
        if (!rd(f, nchars) || !rd_bytes(f, chars, nchars)) return 4;
        if (!rd_bytes(f, valid, (rows + 7) / 8)) return 4;
        std::vector<u8> out(rows ? rows : 1, 0xee);
        emu_launch((unsigned)((rows + FILTER_THREADS - 1) / FILTER_THREADS), FILTER_THREADS, [&] {
            pred_like(offsets.data(), chars.data(), rows, valid.data(), (int)(wide | negated << 1),
                      kinds.data(), bytes.data(), pat_len, out.data());
        });
        std::fwrite(out.data(), 1, rows, o);
    }
    std::fclose(f);
    std::fclose(o);
    return 0;
}
