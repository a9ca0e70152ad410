// The BYTE_ARRAY kernels (src/decode/gpu/kernels/decode_bytes.cu, with common.cuh) run on the host
// by tests/emulated/kernels.rs, orchestrated as src/decode/gpu/ does: dictionary entries, sizes,
// DELTA_BYTE_ARRAY values, offsets (span sums, a host scan, offsets), characters, UTF-8 check;
// a kept dictionary's keys, and its values from its entries (dict_lengths, the scan,
// dict_chars).
// Input: u32 columns; per column: u64 rows, u32 optional, u32 large, u32 utf8, u32 has_dict,
//   u32 keys, i32 dict_entries, u64 dict_bytes, dict bytes.
// u32 pages; per page as in decode_fixed_main.cpp.
// Output: u32 stage (0 ok, 1 dictionary errors, 2 page errors); per dictionary u32 error bits;
//   per page u32 error bits; if ok, per column: u64 null_count, u64 first bad UTF-8 row
//   (all ones: none), u64 chars, u64 strings (rows, or a kept dictionary's entries), offsets
//   ((strings + 1) * 4 or 8 bytes), chars, validity words (when optional), and a kept
//   dictionary's keys (rows i32: the harness asks for 4-byte keys).
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
    u32 ncols = 0;
    rd(f, ncols);
    std::vector<u64> rows(ncols), nulls(ncols, 0);
    std::vector<u32> optional(ncols), large(ncols), utf8(ncols), has_dict(ncols), keys(ncols);
    std::vector<std::vector<int>> key_out(ncols);
    std::vector<u64> strings(ncols);
    std::vector<int> dict_n(ncols);
    std::vector<std::vector<u8>> dicts(ncols);
    std::vector<u64> dict_len(ncols, 0);
    auto dict_bytes_of = [&](u32 c) { return dict_len[c]; };
    std::vector<std::vector<u64>> entries(ncols);
    std::vector<std::vector<i64>> lengths(ncols);
    std::vector<std::vector<u32>> valid(ncols);
    for (u32 c = 0; c < ncols; c++) {
        u64 db;
        rd(f, rows[c]); rd(f, optional[c]); rd(f, large[c]); rd(f, utf8[c]); rd(f, has_dict[c]);
        rd(f, keys[c]); rd(f, dict_n[c]); rd(f, db);
        dict_len[c] = db;
        dicts[c].resize(db ? db : 1);  // exact: the sanitizer build catches reads past it
        if (db && std::fread(dicts[c].data(), 1, db, f) != db) return 4;
        entries[c].assign(2 * (size_t)(dict_n[c] > 0 ? dict_n[c] : 0) + 2, 0);
        // a kept dictionary's strings are its entries (their lengths from dict_lengths)
        strings[c] = keys[c] ? (u64)(dict_n[c] > 0 ? dict_n[c] : 0) : rows[c];
        lengths[c].assign(strings[c] ? strings[c] : 1, 0);
        key_out[c].assign(rows[c] ? rows[c] : 1, -1);
        valid[c].assign(rows[c] ? (rows[c] + 31) / 32 : 1, 0);
    }
    Pages pg;
    if (!pg.read(f)) return 5;
    u32 npages = pg.size();
    auto& pages = pg.jobs;
    auto& base = pg.base;
    u64 total = pg.total;
    std::fclose(f);
    FILE* o = std::fopen(argv[2], "wb");
    // 1. dictionary entries
    std::vector<u64> d_data, d_len, d_out;
    std::vector<int> d_cnt;
    std::vector<u32> d_cols;
    for (u32 c = 0; c < ncols; c++) {
        if (!has_dict[c]) continue;
        d_data.push_back((u64)dicts[c].data());
        d_len.push_back(dict_bytes_of(c));
        d_cnt.push_back(dict_n[c]);
        d_out.push_back((u64)entries[c].data());
        d_cols.push_back(c);
    }
    std::vector<u32> d_err(d_cols.size(), 0);
    if (!d_cols.empty())
        emu_launch(d_cols.size(), 128, [&] {
            dict_entries(d_data.data(), d_len.data(), d_cnt.data(), (u64* const*)d_out.data(),
                         (int)d_cols.size(), d_err.data());
        });
    bool dict_bad = false;
    for (u32 e : d_err) dict_bad |= e != 0;
    // 2. sizes
    std::vector<BytesColumn> cols(ncols);
    for (u32 c = 0; c < ncols; c++)
        cols[c] = BytesColumn{keys[c] ? (u64)key_out[c].data() : (u64)lengths[c].data(),
                              optional[c] ? (u64)valid[c].data() : 0, (u64)&nulls[c], 0,
                              keys[c] ? (u64)entries[c].data() : 0, 4};
    for (auto& j : pages) {   // each page decodes with its chunk's dictionary entries
        j.dict = has_dict[j.column] ? (u64)entries[j.column].data() : 0;
        j.dict_len = dict_n[j.column];
    }
    std::vector<u32> idx(total + 1), aux(total + 1);
    std::vector<u64> src(2 * total + 2);
    std::vector<u64> info(4 * (size_t)npages + 1, 0);
    std::vector<u32> errors(npages, 0);
    if (!dict_bad)
        emu_launch(npages, SIZES_THREADS, [&] {
            bytes_sizes(pages.data(), cols.data(), idx.data(), aux.data(), src.data(), base.data(),
                        info.data(), errors.data());
        });
    bool page_bad = false;
    for (u32 e : errors) page_bad |= e != 0;
    u32 stage = dict_bad ? 1 : (page_bad ? 2 : 0);
    std::fwrite(&stage, 4, 1, o);
    if (!d_err.empty()) std::fwrite(d_err.data(), 4, d_err.size(), o);
    if (npages) std::fwrite(errors.data(), 4, npages, o);
    if (stage) { std::fclose(o); return 0; }
    // 2b. DELTA_BYTE_ARRAY values, each page's in its own exact-size buffer
    std::vector<std::vector<u8>> dba(npages);
    std::vector<u64> page_out(npages + 1, 0);
    bool any_dba = false;
    for (u32 p = 0; p < npages; p++) {
        if (pages[p].encoding != 7) continue;
        any_dba = true;
        dba[p].assign(info[4 * p] ? info[4 * p] : 1, 0xDD);
        page_out[p] = (u64)dba[p].data();
    }
    if (any_dba) {
        // each DELTA_BYTE_ARRAY page's rows in segments of DBA_SEGMENT, a block each: the
        // blocks' (page, segment) table, as src/decode/gpu/bytes/dba.rs makes it
        std::vector<u32> blocks;
        for (u32 p = 0; p < npages; p++)
            if (pages[p].encoding == 7) {
                const long long n = pages[p].num_values > 0 ? pages[p].num_values : 0;
                const long long s = (n + DBA_SEGMENT - 1) / DBA_SEGMENT;
                for (long long k = 0; k < (s > 0 ? s : 1); k++) {
                    blocks.push_back(p);
                    blocks.push_back((u32)k);
                }
            }
        const u32 nblocks = (u32)(blocks.size() / 2);
        std::vector<u32> unres(total + 1, 0xEEEEEEEEu);
        emu_launch(nblocks, DBA_THREADS, [&] {
            dba_values(pages.data(), idx.data(), aux.data(), unres.data(), src.data(), base.data(),
                       info.data(), page_out.data(), blocks.data());
        });
        emu_launch((npages + 127) / 128, 128, [&] {
            dba_chain(pages.data(), aux.data(), unres.data(), base.data(), info.data(),
                      page_out.data(), (int)npages);
        });
        emu_launch(nblocks, DBA_THREADS, [&] {
            dba_fill(pages.data(), aux.data(), unres.data(), base.data(), info.data(),
                     page_out.data(), blocks.data());
        });
    }
    // 3. offsets (a kept dictionary's: of its entries)
    for (u32 c = 0; c < ncols; c++)
        if (keys[c] && strings[c])
            emu_launch((strings[c] + 255) / 256, 256, [&] {
                dict_lengths(entries[c].data(), strings[c], lengths[c].data());
            });
    std::vector<std::vector<i64>> off64(ncols);
    std::vector<std::vector<int>> off32(ncols);
    std::vector<std::vector<u8>> chars(ncols);
    std::vector<u64> col_off(ncols), col_chars(ncols);
    for (u32 c = 0; c < ncols; c++) {
        const u64 n = strings[c];
        u64 spans = (n + 1 + SPAN - 1) / SPAN;
        std::vector<i64> sums(spans);
        emu_launch(spans, SCAN_THREADS, [&] { span_sums(lengths[c].data(), n, sums.data()); });
        std::vector<i64> bases(spans);
        i64 at = 0;
        for (u64 s = 0; s < spans; s++) { bases[s] = at; at += sums[s]; }
        off64[c].assign(n + 1, -1);
        off32[c].assign(n + 1, -1);
        emu_launch(spans, SCAN_THREADS, [&] {
            write_offsets(lengths[c].data(), n, bases.data(), off64[c].data(),
                          large[c] ? nullptr : off32[c].data());
        });
        chars[c].assign(at ? at : 1, 0xEE);
        col_off[c] = keys[c] ? 0 : (u64)off64[c].data();   // keys' pages copy no characters
        col_chars[c] = (u64)chars[c].data();
    }
    // 4. characters
    emu_launch(npages, 256, [&] {
        bytes_chars(pages.data(), src.data(), base.data(), col_off.data(), col_chars.data());
    });
    for (u32 c = 0; c < ncols; c++)
        if (keys[c] && strings[c])
            emu_launch((strings[c] * 32 + 255) / 256, 256, [&] {
                dict_chars(entries[c].data(), strings[c], off64[c].data(), chars[c].data());
            });
    // 5. UTF-8, and the output
    for (u32 c = 0; c < ncols; c++) {
        const u64 m = strings[c];
        unsigned long long bad = ~0ull;
        if (utf8[c] && m)
            emu_launch((m + 255) / 256, 256, [&] {
                utf8_check(off64[c].data(), chars[c].data(), m, &bad);
            });
        u64 n = (u64)off64[c][m];
        std::fwrite(&nulls[c], 8, 1, o);
        std::fwrite(&bad, 8, 1, o);
        std::fwrite(&n, 8, 1, o);
        std::fwrite(&m, 8, 1, o);
        if (large[c]) std::fwrite(off64[c].data(), 8, m + 1, o);
        else std::fwrite(off32[c].data(), 4, m + 1, o);
        std::fwrite(chars[c].data(), 1, n, o);
        if (optional[c]) std::fwrite(valid[c].data(), 4, (rows[c] + 31) / 32, o);
        if (keys[c] && rows[c]) std::fwrite(key_out[c].data(), 4, rows[c], o);
    }
    std::fclose(o);
    return 0;
}
