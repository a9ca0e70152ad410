// The nested kernels (src/decode/gpu/kernels/nested.cu, with common.cuh) run on the host by
// tests/emulated/kernels.rs: nest_count over units of levels, the tile counts turned into bases as
// src/decode/gpu/nested.rs does, then nest_scatter over each unit's tasks, NEST_TASKS (8) at
// a time.
// Input (little-endian): u32 units; per unit: u64 entries, u64 elem_defs, i32 depths, then
//   entries bytes of repetition levels and entries bytes of definition levels.
// u32 tasks; per task: u32 unit, i32 kind, level, def, width, u64 out_bytes, u64 out_valid_bytes
//   (0: none), u64 src_bytes, src bytes, u64 src_valid_bytes (0: none), src_valid bytes.
// Output: per unit u32 error bits and NEST_DEPTHS u64 slot totals; per task u64 null count,
//   out_bytes of out, out_valid_bytes of out_valid.
// With a third argument `levels`, nested_levels instead: input u32 columns, per column u64
// entries; then the page jobs (pages.h). Output: per column its entries' repetition levels then
// their definition levels (a byte each), then per page u32 error bits.
#include "cuda_host.h"
#include <cstdio>
#include <string>
#include "common.cuh"
#include "pages.h"
#include "nested.cu"

struct UnitIn {
    u64 entries, elem_defs;
    int depths;
    std::vector<u8> rep, def;
};

struct TaskIn {
    u32 unit;
    int kind, level, def, width;
    std::vector<u8> out, out_valid, src, src_valid;
    u64 nulls = 0;
};

static bool bytes(FILE* f, std::vector<u8>& v, u64 n) {
    v.assign(n, 0);  // exact: the sanitizer build catches accesses past it
    return n == 0 || std::fread(v.data(), 1, n, f) == n;
}

static int levels(FILE* f, const char* out_path) {
    u32 ncols = 0;
    rd(f, ncols);
    std::vector<std::vector<u8>> reps(ncols), defs(ncols);
    std::vector<LevelOut> outs(ncols);
    for (u32 c = 0; c < ncols; c++) {
        u64 n = 0;
        rd(f, n);
        reps[c].assign(n ? n : 1, 0xEE);   // exact (one byte when empty): the sanitizers watch
        defs[c].assign(n ? n : 1, 0xEE);
        outs[c] = LevelOut{(u64)reps[c].data(), (u64)defs[c].data()};
    }
    Pages pg;
    if (!pg.read(f)) return 5;
    std::fclose(f);
    std::vector<u32> scratch(pg.total + 1);
    std::vector<u32> errors(pg.size() + 1, 0);
    if (pg.size())
        emu_launch(pg.size(), NEST_THREADS, [&] {
            nested_levels(pg.jobs.data(), outs.data(), scratch.data(), pg.base.data(),
                          errors.data());
        });
    FILE* o = std::fopen(out_path, "wb");
    for (u32 c = 0; c < ncols; c++) {
        std::fwrite(reps[c].data(), 1, reps[c].size(), o);
        std::fwrite(defs[c].data(), 1, defs[c].size(), o);
    }
    if (pg.size()) std::fwrite(errors.data(), 4, pg.size(), o);
    std::fclose(o);
    return 0;
}

int main(int argc, char** argv) {
    if (argc != 3 && argc != 4) return 2;
    FILE* f = std::fopen(argv[1], "rb");
    if (!f) return 3;
    if (argc == 4 && std::string(argv[3]) == "levels") return levels(f, argv[2]);
    u32 nu = 0;
    rd(f, nu);
    std::vector<UnitIn> us(nu);
    for (auto& u : us) {
        rd(f, u.entries);
        rd(f, u.elem_defs);
        rd(f, u.depths);
        if (!bytes(f, u.rep, u.entries) || !bytes(f, u.def, u.entries)) return 4;
    }
    u32 nt = 0;
    rd(f, nt);
    std::vector<TaskIn> ts(nt);
    for (auto& t : ts) {
        u64 ol, ovl, sl, svl;
        rd(f, t.unit); rd(f, t.kind); rd(f, t.level); rd(f, t.def); rd(f, t.width);
        rd(f, ol); rd(f, ovl);
        t.out.assign(ol, 0);
        t.out_valid.assign(ovl, 0);
        rd(f, sl);
        if (!bytes(f, t.src, sl)) return 5;
        rd(f, svl);
        if (!bytes(f, t.src_valid, svl)) return 6;
    }
    std::fclose(f);
    // count
    std::vector<u32> tiles(nu);
    u32 all = 0;
    for (u32 i = 0; i < nu; i++) {
        tiles[i] = (u32)((us[i].entries + NEST_TILE - 1) / NEST_TILE);
        all += tiles[i];
    }
    std::vector<u32> counts((size_t)all * NEST_DEPTHS + 1, 0);
    std::vector<u64> bases((size_t)all * NEST_DEPTHS + 1, 0);
    std::vector<NestUnit> units(nu);
    std::vector<u32> block_unit;
    u32 at = 0;
    for (u32 i = 0; i < nu; i++) {
        units[i] = NestUnit{(u64)us[i].rep.data(), (u64)us[i].def.data(), us[i].entries,
                            us[i].elem_defs, (u64)(counts.data() + (size_t)at * NEST_DEPTHS),
                            (u64)(bases.data() + (size_t)at * NEST_DEPTHS), us[i].depths,
                            (int)at, 0, 0};
        for (u32 t = 0; t < tiles[i]; t++) block_unit.push_back(i);
        at += tiles[i];
    }
    std::vector<u32> errors(nu ? nu : 1, 0);
    if (all)
        emu_launch(all, NEST_THREADS, [&] {
            nest_count(units.data(), block_unit.data(), errors.data());
        });
    std::vector<std::vector<u64>> totals(nu, std::vector<u64>(NEST_DEPTHS, 0));
    for (u32 i = 0; i < nu; i++)
        for (int k = 0; k < NEST_DEPTHS; k++) {
            u64 sum = 0;
            for (u32 t = units[i].first_block; t < units[i].first_block + tiles[i]; t++) {
                bases[(size_t)t * NEST_DEPTHS + k] = sum;
                sum += counts[(size_t)t * NEST_DEPTHS + k];
            }
            totals[i][k] = sum;
        }
    // scatter: each unit's tasks, 8 at a time
    std::vector<NestTask> tasks;
    std::vector<NestUnit> scatter;
    std::vector<u32> sblock;
    u32 blocks = 0;
    for (u32 i = 0; i < nu; i++) {
        std::vector<u32> mine;
        for (u32 t = 0; t < nt; t++)
            if (ts[t].unit == i) mine.push_back(t);
        for (size_t g = 0; g < mine.size(); g += 8) {
            NestUnit u = units[i];
            u.first_task = (int)tasks.size();
            u.num_tasks = (int)std::min<size_t>(8, mine.size() - g);
            u.first_block = (int)blocks;
            for (int x = 0; x < u.num_tasks; x++) {
                TaskIn& t = ts[mine[g + x]];
                tasks.push_back(NestTask{(u64)t.out.data(),
                                         t.out_valid.empty() ? 0 : (u64)t.out_valid.data(),
                                         (u64)t.src.data(),
                                         t.src_valid.empty() ? 0 : (u64)t.src_valid.data(),
                                         (u64)&t.nulls, t.kind, t.level, t.def, t.width, {0, 0}});
            }
            for (u32 b = 0; b < tiles[i]; b++) sblock.push_back((u32)scatter.size());
            blocks += tiles[i];
            scatter.push_back(u);
        }
    }
    if (blocks)
        emu_launch(blocks, NEST_THREADS, [&] {
            nest_scatter(scatter.data(), sblock.data(), tasks.data());
        });
    FILE* o = std::fopen(argv[2], "wb");
    for (u32 i = 0; i < nu; i++) {
        std::fwrite(&errors[i], 4, 1, o);
        std::fwrite(totals[i].data(), 8, NEST_DEPTHS, o);
    }
    for (auto& t : ts) {
        std::fwrite(&t.nulls, 8, 1, o);
        if (!t.out.empty()) std::fwrite(t.out.data(), 1, t.out.size(), o);
        if (!t.out_valid.empty()) std::fwrite(t.out_valid.data(), 1, t.out_valid.size(), o);
    }
    std::fclose(o);
    return 0;
}
