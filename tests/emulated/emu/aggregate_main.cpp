// Partial aggregation of one batch (src/compute/kernels/aggregate.cu) run on the host by
// tests/emulated/aggregate.rs, as src/compute/aggregate.rs drives it: agg_init and agg_rows
// (the table doubled and the batch run again while a row finds no slot), agg_number, then
// agg_gather per aggregate and key_gather (and key_chars for strings) per key.
// Input (little-endian): u64 rows, u64 first capacity;
//   u32 keys; per key: i32 kind, i32 width, u64 value bytes, u64 char bytes, u8 has_valid,
//     the values, the chars, ((rows + 7) / 8 validity bytes when has_valid);
//   u32 inputs; per input: i32 width, i32 is_float, i32 sgn, u8 has_valid, rows * width value
//     bytes, validity as for keys;
//   u32 ops; per op: i32 op, i32 arg, u64 lit;
//   u32 aggs; per agg: i32 op, i32 input, i32 expr_start, i32 expr_len.
// Output: u64 groups, u64 the final capacity, u64 flags (AGG_OVERFLOW); per aggregate: groups * (16 or 8) accumulator
//   bytes, groups seen bytes; per key: groups validity bytes, then groups * width values (bools:
//   a byte) or, for strings, u64 char bytes and the characters (lengths follow from
//   reading each group's string: the output gives groups i64 lengths first).
#include "cuda_host.h"
#include <cstdio>
#include <vector>
#include "aggregate.cu"
#include "read_input.h"

static bool rd_valid(FILE* f, std::vector<u8>& v, u64 rows, bool& has) {
    u8 h = 0;
    if (!rd(f, h)) return false;
    has = h != 0;
    return !has || rd_bytes(f, v, (rows + 7) / 8);
}

static unsigned blocks(u64 items) {
    u64 b = (items + AGG_THREADS - 1) / AGG_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 64 ? 64 : b);
}

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    FILE* f = std::fopen(argv[1], "rb");
    FILE* o = std::fopen(argv[2], "wb");
    if (!f || !o) return 3;
    u64 rows = 0, cap = 0;
    if (!rd(f, rows) || !rd(f, cap)) return 4;
    u32 nkeys = 0;
    if (!rd(f, nkeys)) return 4;
    std::vector<std::vector<u8>> kv(nkeys), kc(nkeys), kval(nkeys);
    std::vector<GroupKey> keys(nkeys ? nkeys : 1);
    for (u32 k = 0; k < nkeys; k++) {
        int kind = 0, width = 0;
        u64 vbytes = 0, cbytes = 0;
        bool has = false;
        if (!rd(f, kind) || !rd(f, width) || !rd(f, vbytes) || !rd(f, cbytes)) return 4;
        if (!rd_bytes(f, kv[k], vbytes) || !rd_bytes(f, kc[k], cbytes)) return 4;
        if (!rd_valid(f, kval[k], rows, has)) return 4;
        keys[k] = GroupKey{kv[k].data(), has ? kval[k].data() : nullptr, kc[k].data(), kind, width};
    }
    u32 ninputs = 0;
    if (!rd(f, ninputs)) return 4;
    std::vector<std::vector<u8>> iv(ninputs), ival(ninputs);
    std::vector<AggInput> inputs(ninputs ? ninputs : 1);
    for (u32 i = 0; i < ninputs; i++) {
        int width = 0, is_float = 0, sgn = 0;
        bool has = false;
        if (!rd(f, width) || !rd(f, is_float) || !rd(f, sgn)) return 4;
        u8 h = 0;
        if (!rd(f, h)) return 4;
        has = h != 0;
        if (!rd_bytes(f, iv[i], rows * (u64)width)) return 4;
        if (has && !rd_bytes(f, ival[i], (rows + 7) / 8)) return 4;
        inputs[i] = AggInput{iv[i].data(), has ? ival[i].data() : nullptr, width, is_float, sgn, 0};
    }
    u32 nops = 0;
    if (!rd(f, nops)) return 4;
    std::vector<ExprOp> ops(nops ? nops : 1);
    for (u32 i = 0; i < nops; i++) {
        if (!rd(f, ops[i].op) || !rd(f, ops[i].arg) || !rd(f, ops[i].lit)) return 4;
    }
    u32 naggs = 0;
    if (!rd(f, naggs)) return 4;
    std::vector<AggJob> aggs(naggs ? naggs : 1);
    for (u32 a = 0; a < naggs; a++) {
        if (!rd(f, aggs[a].op) || !rd(f, aggs[a].input) || !rd(f, aggs[a].expr_start) ||
            !rd(f, aggs[a].expr_len))
            return 4;
    }
    std::fclose(f);

    std::vector<u32> slot_row;
    u64 run_flags = 0;
    std::vector<std::vector<u8>> acc(naggs);
    std::vector<std::vector<u32>> seen(naggs);
    for (;;) {
        slot_row.assign(cap, 0);
        for (u32 a = 0; a < naggs; a++) {
            acc[a].assign(cap * (aggs[a].op == AGG_SUM_INT ? 16 : 8), 0xee);
            seen[a].assign(cap, 7);
            aggs[a].acc = acc[a].data();
            aggs[a].seen = seen[a].data();
        }
        u32 flags = 0;
        emu_launch(blocks(cap), AGG_THREADS, [&] {
            agg_init(slot_row.data(), cap, aggs.data(), (int)naggs);
        });
        if (rows > 0) {
            emu_launch(blocks(rows), AGG_THREADS, [&] {
                u64 most = 2;
                while (most < 2 * rows) most *= 2;
                agg_rows(keys.data(), (int)nkeys, rows, slot_row.data(), cap,
                         cap < most ? 256 : cap, inputs.data(),
                         ops.data(), aggs.data(), (int)naggs, &flags);
            });
        }
        if ((flags & AGG_FULL) && cap < 2 * rows && !(flags & AGG_OVERFLOW)) {
            cap *= 8;
            if (cap > 2 * rows) {
                u64 c = 1;
                while (c < 2 * rows) c *= 2;
                cap = c;
            }
            continue;
        }
        if (flags & ~AGG_OVERFLOW) return 5;
        run_flags = flags;
        break;
    }
    u32 count = 0;
    std::vector<u32> group_slot(rows ? rows : 1), group_row(rows ? rows : 1);
    emu_launch(blocks(cap), AGG_THREADS, [&] {
        agg_number(slot_row.data(), cap, &count, group_slot.data(), group_row.data());
    });
    u64 groups = count;
    std::fwrite(&groups, 8, 1, o);
    std::fwrite(&cap, 8, 1, o);
    std::fwrite(&run_flags, 8, 1, o);
    for (u32 a = 0; a < naggs; a++) {
        int width = aggs[a].op == AGG_SUM_INT ? 16 : 8;
        std::vector<u8> out(groups * width + 1), out_seen(groups + 1);
        emu_launch(blocks(groups), AGG_THREADS, [&] {
            agg_gather(acc[a].data(), seen[a].data(), width, group_slot.data(), groups,
                       out.data(), out_seen.data());
        });
        std::fwrite(out.data(), 1, groups * width, o);
        std::fwrite(out_seen.data(), 1, groups, o);
    }
    for (u32 k = 0; k < nkeys; k++) {
        int kind = keys[k].kind;
        u64 width = kind == KEY_INT ? keys[k].width : kind == KEY_BOOL ? 1 : 8;
        std::vector<u8> out(groups * width + 1), valid(groups + 1);
        emu_launch(blocks(groups), AGG_THREADS, [&] {
            key_gather(&keys[k], group_row.data(), groups, out.data(), valid.data());
        });
        std::fwrite(valid.data(), 1, groups, o);
        std::fwrite(out.data(), 1, groups * width, o);
        if (kind >= KEY_STR32) {
            std::vector<i64> offsets(groups + 1, 0);
            for (u64 g = 0; g < groups; g++) {
                i64 len;
                std::memcpy(&len, out.data() + 8 * g, 8);
                offsets[g + 1] = offsets[g] + len;
            }
            u64 total = (u64)offsets[groups];
            std::vector<u8> chars(total + 1, 0xee);
            emu_launch(blocks(groups * 32), AGG_THREADS, [&] {
                key_chars(&keys[k], group_row.data(), groups, offsets.data(), chars.data());
            });
            std::fwrite(&total, 8, 1, o);
            std::fwrite(chars.data(), 1, total, o);
        }
    }
    std::fclose(o);
    return 0;
}
