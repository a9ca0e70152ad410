// The page-header kernel (src/decode/gpu/kernels/page_headers.cu) run on the host by
// tests/emulated/kernels.rs: the count pass, then the fill pass, as src/decode/gpu/ launches them.
// Input: u32 chunks; per chunk u64 len, bytes (laid end to end in one buffer).
// Output: per chunk u32 error bits (of either pass), i32 pages; then every PageInfo (64 bytes)
//   of the chunks without errors, in chunk order.
#include "cuda_host.h"
#include <cstdio>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#endif
#include "page_headers.cu"

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) return 3;
    unsigned n = 0;
    if (std::fread(&n, 4, 1, f) != 1) return 4;
    std::vector<u8> buf;
    std::vector<u64> offs(n + 1), lens(n + 1);
    for (unsigned c = 0; c < n; c++) {
        u64 len = 0;
        if (std::fread(&len, 8, 1, f) != 1) return 5;
        offs[c] = buf.size();
        lens[c] = len;
        // 64 guard bytes after every chunk (poisoned in the sanitizer build: a read past a
        // chunk's end is an error there)
        buf.resize(buf.size() + len + 64, 0xAB);
        if (len && std::fread(buf.data() + offs[c], 1, len, f) != len) return 6;
    }
    std::fclose(f);
    for (unsigned c = 0; c < n; c++) POISON(buf.data() + offs[c] + lens[c], 64);
    std::vector<int> counts(n + 1, 0);
    std::vector<u32> errors(n + 1, 0);
    unsigned grid = (n + 127) / 128;
    emu_launch(grid, 128, [&] {
        page_headers(buf.data(), offs.data(), lens.data(), (int)n, counts.data(), nullptr, nullptr,
                     errors.data());
    });
    std::vector<long long> start(n + 1, 0);
    long long total = 0;
    for (unsigned c = 0; c < n; c++) { start[c] = total; total += counts[c] > 0 ? counts[c] : 0; }
    std::vector<PageInfo> pages(total + 1);
    emu_launch(grid, 128, [&] {
        page_headers(buf.data(), offs.data(), lens.data(), (int)n, counts.data(), start.data(),
                     pages.data(), errors.data());
    });
    FILE* o = std::fopen(argv[2], "wb");
    for (unsigned c = 0; c < n; c++) {
        std::fwrite(&errors[c], 4, 1, o);
        std::fwrite(&counts[c], 4, 1, o);
    }
    for (unsigned c = 0; c < n; c++)
        if (!errors[c]) std::fwrite(&pages[start[c]], sizeof(PageInfo), counts[c], o);
    std::fclose(o);
    return 0;
}
