// Batches joined end to end (concat_bits and concat_offsets in src/decode/gpu/kernels/filter.cu)
// run on the host by tests/emulated/concat.rs.
// Input (little-endian): u32 cases; per case: u32 kind (0: bits, 1: offsets, 2: dictionary
//   keys), u32 large, u32 parts, u64 total (bits, or rows); per part: u64 n, u32 present, then
//   (present) (n + 7) / 8 bytes of bits, (n + 1) offsets or n keys (i64 when large, else i32),
//   and i64 base.
// Output: per case, the bits as (total + 31) / 32 u32 words, the (total + 1) offsets or the
//   total keys.
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
        u32 kind = 0, large = 0, parts = 0;
        u64 total = 0;
        if (!rd(f, kind) || !rd(f, large) || !rd(f, parts) || !rd(f, total)) return 4;
        u64 w = large ? 8 : 4;
        u64 extra = kind == 1 ? 1 : 0;
        u64 out_len = kind == 0 ? (total + 31) / 32 * 4 : (total + extra) * w;
        std::vector<u8> out(out_len ? out_len : 1, kind == 0 ? 0 : 0xee);
        u64 at = 0;
        for (u32 p = 0; p < parts; p++) {
            u64 n = 0;
            u32 present = 0;
            i64 base = 0;
            std::vector<u8> in;
            if (!rd(f, n) || !rd(f, present)) return 4;
            if (present && !rd_bytes(f, in, kind == 0 ? (n + 7) / 8 : (n + extra) * w)) return 4;
            if (!rd(f, base)) return 4;
            if (kind == 0) {
                emu_launch((unsigned)((n + FILTER_THREADS - 1) / FILTER_THREADS + 1), FILTER_THREADS, [&] {
                    concat_bits(present ? in.data() : nullptr, n, at, (u32*)out.data());
                });
            } else {
                emu_launch((unsigned)((n + 1 + FILTER_THREADS - 1) / FILTER_THREADS), FILTER_THREADS, [&] {
                    concat_offsets(in.data(), n, (int)(large | (kind == 2) << 1), base, out.data() + at * w);
                });
            }
            at += n;
        }
        std::fwrite(out.data(), 1, out_len, o);
    }
    std::fclose(f);
    std::fclose(o);
    return 0;
}
