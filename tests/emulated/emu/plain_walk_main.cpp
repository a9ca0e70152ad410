// The two walks over PLAIN byte arrays (src/decode/gpu/kernels/plain_walk.cuh): thread 0
// hopping (walk_plain) and the block's pointer doubling (walk_plain_doubling), on the same
// value streams, run on the host by tests/emulated/kernels.rs, which checks that they agree.
// Input: u32 cases; per case: u32 count, u32 bytes, the bytes.
// Output: per case, per walk (walk_plain, then walk_plain_doubling): u32 error bits, u32 end,
//   then count u32 positions (0 where a walk with an error left them).
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
    FILE* o = std::fopen(argv[2], "wb");
    if (!o) return 4;
    u32 cases = 0;
    rd(f, cases);
    for (u32 c = 0; c < cases; c++) {
        u32 count = 0, len = 0;
        if (!rd(f, count) || !rd(f, len)) return 5;
        // exactly the bytes: a walk reading past them stops the run under the sanitizers
        std::vector<u8> bytes(len ? len : 1);
        if (len && std::fread(bytes.data(), 1, len, f) != len) return 6;
        for (int which = 0; which < 2; which++) {
            std::vector<u32> pos(count, 0);
            u32 err = 0, end_out = 0;
            emu_launch(1, SIZES_THREADS, [&] {
                __shared__ u32 end;
                const u8* vals = len ? bytes.data() : nullptr;
                const u32 e = which == 0
                    ? walk_plain(vals, len, (int)count, pos.data(), &end)
                    : walk_plain_doubling(vals, len, (int)count, pos.data(), &end);
                if (threadIdx.x == 0) {
                    err = e;
                    end_out = end;
                }
            });
            std::fwrite(&err, 4, 1, o);
            std::fwrite(&end_out, 4, 1, o);
            if (count) std::fwrite(pos.data(), 4, count, o);
        }
    }
    std::fclose(o);
    return 0;
}
