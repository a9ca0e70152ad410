// The decimal precision check (decimal_check in src/decode/gpu/kernels/decode_fixed.cu) run on
// the host by tests/emulated/kernels.rs.
// Input (little-endian): u32 arrays, i32 blocks per array; per array: u64 len, u64 width,
//   u64 max limbs x4, u32 has_validity, len * width value bytes, then (len + 7) / 8 validity
//   bytes when it has one.
// Output: per array u64, the least index of a valid value past the maximum (~0 for none).
#include "cuda_host.h"
#include <cstdio>
#include "common.cuh"
#include "pages.h"
#include "decode_fixed.cu"

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) return 3;
    u32 n = 0;
    int per = 1;
    rd(f, n);
    rd(f, per);
    std::vector<DecimalCheck> checks(n);
    std::vector<std::vector<u8>> values(n), validity(n);
    for (u32 a = 0; a < n; a++) {
        DecimalCheck& c = checks[a];
        u32 has_validity = 0;
        rd(f, c.len); rd(f, c.width);
        rd(f, c.max0); rd(f, c.max1); rd(f, c.max2); rd(f, c.max3);
        rd(f, has_validity);
        values[a].resize(c.len * c.width ? c.len * c.width : 1);  // exact: ASan catches overreads
        if (c.len && std::fread(values[a].data(), 1, c.len * c.width, f) != c.len * c.width) return 4;
        c.values = (u64)values[a].data();
        c.validity = 0;
        if (has_validity) {
            validity[a].resize((c.len + 7) / 8 ? (c.len + 7) / 8 : 1);
            if (c.len && std::fread(validity[a].data(), 1, (c.len + 7) / 8, f) != (c.len + 7) / 8) return 5;
            c.validity = (u64)validity[a].data();
        }
    }
    std::fclose(f);
    std::vector<u64> bad(n ? n : 1, ~0ull);
    if (n) emu_launch((unsigned)per * n, 256, [&] { decimal_check(checks.data(), (int)n, per, bad.data()); });
    FILE* o = std::fopen(argv[2], "wb");
    if (!o) return 6;
    std::fwrite(bad.data(), 8, n, o);
    std::fclose(o);
    return 0;
}
