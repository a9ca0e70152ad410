// The fixed-width decode kernel (src/decode/gpu/kernels/decode_fixed.cu, with common.cuh) run on
// the host by tests/emulated/kernels.rs.
// Input (little-endian): u32 columns; per column: i32 conversion, phys_width, out_width, physical,
//   u64 rows, u32 optional, u32 has_dict, i32 dict_entries, u64 dict_bytes, dict bytes,
//   u64 alloc_bytes.
// u32 pages; per page: u32 column, i32 num_values, encoding, max_def, v2, def_len, rep_len,
//   u64 row_start, u64 data_len, data bytes.
// Output: per column u64 null_count, alloc_bytes of values, validity words (rows/32 rounded
//   up, 4 bytes each; none when not optional); then per page u32 error bits.
#include "cuda_host.h"
#include <cstdio>
#include "common.cuh"
#include "pages.h"
#include "decode_fixed.cu"


int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) return 3;
    u32 ncols = 0;
    rd(f, ncols);
    std::vector<ColumnJob> cols(ncols);
    std::vector<std::vector<u8>> dicts(ncols), values(ncols);
    std::vector<std::vector<u32>> valid(ncols);
    std::vector<u64> nulls(ncols, 0), rows(ncols), alloc(ncols);
    std::vector<u32> optional(ncols);
    std::vector<u64> col_dict(ncols, 0);
    std::vector<int> col_dict_n(ncols, 0);
    for (u32 c = 0; c < ncols; c++) {
        int conv, pw, ow, phys, dn;
        u32 has_dict;
        u64 db;
        rd(f, conv); rd(f, pw); rd(f, ow); rd(f, phys); rd(f, rows[c]); rd(f, optional[c]); rd(f, has_dict);
        rd(f, dn); rd(f, db);
        dicts[c].resize(db ? db : 1);  // exact: the sanitizer build catches reads past it
        if (db && std::fread(dicts[c].data(), 1, db, f) != db) return 4;
        rd(f, alloc[c]);
        values[c].assign(alloc[c] ? alloc[c] : 1, 0);
        valid[c].assign(rows[c] ? (rows[c] + 31) / 32 : 1, 0);
        cols[c] = ColumnJob{(u64)values[c].data(), optional[c] ? (u64)valid[c].data() : 0,
                            (u64)&nulls[c], pw, ow, conv, phys};
        col_dict[c] = has_dict ? (u64)dicts[c].data() : 0;
        col_dict_n[c] = dn;
    }
    Pages pg;
    if (!pg.read(f)) return 5;
    for (auto& j : pg.jobs) {   // each page decodes with its chunk's dictionary
        j.dict = col_dict[j.column];
        j.dict_len = col_dict_n[j.column];
    }
    u32 npages = pg.size();
    auto& pages = pg.jobs;
    auto& base = pg.base;
    u64 total = pg.total;
    std::fclose(f);
    std::vector<u8> defs(total + 1);
    std::vector<u32> idxs(total + 1);
    std::vector<u64> wides(total + 1);
    std::vector<u32> errors(npages, 0);
    emu_launch(npages, 256, [&] {
        decode_fixed_pages(pages.data(), cols.data(), defs.data(), idxs.data(), wides.data(),
                           base.data(), errors.data());
    });
    FILE* o = std::fopen(argv[2], "wb");
    for (u32 c = 0; c < ncols; c++) {
        std::fwrite(&nulls[c], 8, 1, o);
        std::fwrite(values[c].data(), 1, alloc[c], o);
        if (optional[c]) std::fwrite(valid[c].data(), 4, (rows[c] + 31) / 32, o);
    }
    if (npages) std::fwrite(errors.data(), 4, npages, o);
    std::fclose(o);
    return 0;
}
