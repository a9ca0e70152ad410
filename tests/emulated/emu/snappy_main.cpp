// The SNAPPY kernels (src/decode/gpu/kernels/snappy.cu) run on the host by tests/emulated/kernels.rs.
// Usage: snappy_emu IN OUT [pages|split|fragments|lz4|hadoop] (default pages).
// Input file: u32 jobs, then per job u64 src_len, u64 dst_len, src bytes.
// split: then per job u64 bytes per segment and u64 segments (segments_of in decompress/snappy.rs).
// Output file, pages / fragments: per job u32 error bits, dst_len bytes, u32 the byte after the
//   output (0xEE when untouched). split (snappy_walk, then snappy_split): per job u32 error
//   bits, then ceil(dst_len / 65536) u64 split entries. lz4 (lz4_check, the jobs LZ4 blocks):
//   per job u32 error bits. hadoop (lz4_hadoop_blocks): per job its i32 count of LZ4 blocks
//   (-1: left to the host), then per block u64 source offset, length, output offset, length.
#include "cuda_host.h"
#include <cstdio>
#include <cstring>
#include "snappy.cu"
#include "streams.h"

int main(int argc, char** argv) {
    if (argc != 3 && argc != 4) { std::fprintf(stderr, "usage: snappy_emu IN OUT [MODE]\n"); return 2; }
    const char* mode = argc == 4 ? argv[3] : "pages";
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) return 3;
    u32 n = 0;
    if (std::fread(&n, 4, 1, f) != 1) return 4;
    Streams st;
    if (!read_streams(f, n, st)) return 5;
    std::vector<DecompressJob>& jobs = st.jobs;
    std::vector<u32> seg_size(n), seg_base(n + 1, 0), seg_page;
    if (std::strcmp(mode, "split") == 0) {
        for (u32 i = 0; i < n; i++) {
            u64 size = 0, count = 0;
            if (std::fread(&size, 8, 1, f) != 1 || std::fread(&count, 8, 1, f) != 1) return 8;
            seg_size[i] = (u32)size;
            seg_base[i + 1] = seg_base[i] + (u32)count;
            seg_page.insert(seg_page.end(), count, i);
        }
    }
    std::fclose(f);
    std::vector<u32> errors(n, 0);
    FILE* o = std::fopen(argv[2], "wb");
    if (!o) return 7;
    if (std::strcmp(mode, "hadoop") == 0) {
        // lz4_hadoop_blocks: counting, then writing from each page's base
        std::vector<int> counts(n ? n : 1, -7);
        counts.resize(n);
        const u32 per = 128, grid = (n + per - 1) / per;
        emu_launch(grid, per, [&] {
            lz4_hadoop_blocks(jobs.data(), (int)n, nullptr, nullptr, counts.data());
        });
        std::vector<u64> base(n, 0);
        u64 total = 0;
        for (u32 i = 0; i < n; i++) {
            base[i] = total;
            if (counts[i] > 0) total += (u64)counts[i];
        }
        std::vector<DecompressJob> blocks(total ? total : 1);
        blocks.resize(total);  // exact: the sanitizer build catches writes past it
        std::vector<int> unused(n ? n : 1, -7);
        emu_launch(grid, per, [&] {
            lz4_hadoop_blocks(jobs.data(), (int)n, base.data(), blocks.data(), unused.data());
        });
        for (u32 i = 0; i < n; i++) {
            std::fwrite(&counts[i], 4, 1, o);
            for (int k = 0; k < counts[i]; k++) {
                const DecompressJob& b = blocks[base[i] + k];
                const u64 rel[4] = {b.src - jobs[i].src, b.src_len, b.dst - jobs[i].dst, b.dst_len};
                std::fwrite(rel, 8, 4, o);
            }
        }
    } else if (std::strcmp(mode, "lz4") == 0) {
        emu_launch(n, SNAPPY_THREADS, [&] { lz4_check(jobs.data(), (int)n, errors.data()); });
        std::fwrite(errors.data(), 4, n, o);
    } else if (std::strcmp(mode, "split") == 0) {
        std::vector<u64> base(n + 1, 0);
        for (u32 i = 0; i < n; i++) base[i + 1] = base[i] + (jobs[i].dst_len + SNAPPY_FRAGMENT - 1) / SNAPPY_FRAGMENT;
        std::vector<u64> splits(base[n] ? base[n] : 1, ~0ull);
        splits.resize(base[n]);  // exact size
        // the host's loop (fragments in snappy.rs): walk, join, walk again where walks did
        // not meet (rewalks), join, then split
        const u32 segs = seg_base[n];
        std::vector<u32> zones((size_t)segs * 2 * SEG_ZONE, NOT_ON_CHAIN), all(segs);
        std::vector<u64> starts(segs, NO_START), firsts(2 * (size_t)segs, 0), meets(2 * (size_t)segs, 0);
        for (u32 g = 0; g < segs; g++) all[g] = g;
        auto walk = [&](const std::vector<u32>& list) {
            emu_launch((u32)list.size(), SNAPPY_THREADS, [&] {
                snappy_walk(jobs.data(), seg_page.data(), seg_base.data(), seg_size.data(),
                            list.data(), (int)list.size(), starts.data(), zones.data(),
                            firsts.data());
            });
            emu_launch(segs, 32, [&] {
                snappy_join(seg_page.data(), seg_base.data(), seg_size.data(), starts.data(),
                            zones.data(), firsts.data(), meets.data(), (int)segs);
            });
        };
        walk(all);
        for (int round = 0; round < 3; round++) {   // REWALKS in decompress/snappy.rs
            std::vector<u32> again;
            for (u32 p = 0; p < n; p++)
                for (u32 g = seg_base[p] + 1; g < seg_base[p + 1]; g++) {
                    const bool after = !again.empty() && again.back() + 1 == g;
                    if (meets[2 * g] == NO_START && firsts[2 * (g - 1)] < jobs[p].src_len && !after)
                        again.push_back(g);
                }
            if (again.empty()) break;
            for (u32 g : again) {
                starts[g] = firsts[2 * (g - 1)];
                if (g + 1 < segs && seg_page[g + 1] == seg_page[g]) starts[g + 1] = NO_START;
            }
            walk(again);
        }
        emu_launch(segs, SNAPPY_THREADS, [&] {
            snappy_split(jobs.data(), seg_page.data(), seg_base.data(), (int)segs, meets.data(),
                         splits.data(), base.data(), errors.data());
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
        write_outputs(o, st, errors);
    }
    std::fclose(o);
    return 0;
}
