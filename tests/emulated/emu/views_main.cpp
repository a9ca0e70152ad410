// The views of string and binary columns (make_views in src/decode/gpu/kernels/decode_bytes.cu)
// run on the host by tests/emulated/views.rs.
// Input (little-endian): u32 columns; per column: u32 wide, u64 rows, u32 has_validity,
//   (rows + 1) offsets (i64 when wide, else i32), u64 chars, the chars, then (rows + 7) / 8
//   validity bytes when it has one.
// Output: per column, rows views of 16 bytes.
#include "cuda_host.h"
#include <cstdio>
#include "common.cuh"
#include "pages.h"
#include "plain_walk.cuh"
#include "decode_bytes.cu"

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) return 3;
    u32 n = 0;
    rd(f, n);
    FILE* o = std::fopen(argv[2], "wb");
    if (!o) return 6;
    for (u32 c = 0; c < n; c++) {
        u32 wide = 0, has_validity = 0;
        u64 rows = 0, nchars = 0;
        rd(f, wide); rd(f, rows); rd(f, has_validity);
        // every buffer allocated to its exact size: ASan catches reads past it
        const u64 obytes = (rows + 1) * (wide ? 8 : 4);
        std::vector<u8> offsets(obytes);
        if (std::fread(offsets.data(), 1, obytes, f) != obytes) return 4;
        rd(f, nchars);
        std::vector<u8> chars(nchars ? nchars : 1);
        if (nchars && std::fread(chars.data(), 1, nchars, f) != nchars) return 4;
        std::vector<u8> validity;
        if (has_validity) {
            validity.resize((rows + 7) / 8 ? (rows + 7) / 8 : 1);
            if (rows && std::fread(validity.data(), 1, (rows + 7) / 8, f) != (rows + 7) / 8) return 5;
        }
        std::vector<u32> views(4 * (rows ? rows : 1), 0xdeadbeef);
        if (rows)
            emu_launch((unsigned)((rows + 255) / 256), 256, [&] {
                make_views(offsets.data(), (int)wide, chars.data(),
                           has_validity ? validity.data() : nullptr, rows, views.data());
            });
        std::fwrite(views.data(), 16, rows, o);
    }
    std::fclose(f);
    std::fclose(o);
    return 0;
}
