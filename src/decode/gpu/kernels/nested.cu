// Nested fields on the device: the leaves' repetition and definition levels, then the offsets,
// validity bitmaps and leaf values of the Arrow arrays they describe
// (src/decode/gpu/nested.rs; the shapes: src/decode/gpu_plan/nested.rs).
//
//   nested_levels: one block per data page of a nested leaf: its repetition and definition
//                  levels (block-parallel RLE/bit-packed decoding) narrowed to one byte per
//                  level entry; the entries of the page's window [skip, skip + take) written
//                  from row_start on in the leaf's arrays (a batch that cuts a row group takes
//                  the entries of its rows).
//   nest_count:    one block per NEST_TILE entries of a unit (one leaf of one batch): for each
//                  list depth k, the entries that are slots at depth k (rep <= k, def reaching
//                  the depth's element level), counted; the levels checked to form rows.
//   nest_scatter:  the same tiles: each slot's index at every depth (the host turned the tile
//                  counts into bases), then the unit's tasks: validity bits, list offsets,
//                  the leaf's values gathered from its entries to its slots.
// Problems are bits in errors[page] (nested_levels) or errors[unit] (nest_count).

#define NEST_THREADS 256
#define NEST_PER 4
#define NEST_TILE (NEST_THREADS * NEST_PER)
#define NEST_DEPTHS 8    // list depths 0..7 (MAX_DEPTH in src/decode/gpu_plan/nested.rs)

#define E_LEVEL_MAX   0x400u  // a level above the column's maximum
#define E_NESTING     0x800u  // levels that do not form rows (a repetition without its list)

struct LevelOut {           // 16 bytes; mirrored by LevelOut in src/decode/gpu/kernels.rs
    u64 rep;                // one byte per entry of the leaf's batch
    u64 def;
};
static_assert(sizeof(LevelOut) == 16, "LevelOut must match its Rust mirror");

extern "C" __global__ void __launch_bounds__(NEST_THREADS) nested_levels(
    const PageJob* pages,
    const LevelOut* outs,   // per column job
    u32* scratch,           // one u32 per entry of the pages
    const u64* scratch_base,// per page
    u32* errors)            // per page
{
    const PageJob pj = pages[blockIdx.x];
    const LevelOut lo = outs[pj.column];
    const u8* data = (const u8*)pj.data;
    u32* tmp = scratch + scratch_base[blockIdx.x];
    __shared__ Run runs[RUNS];
    __shared__ u32 rle_state[5];
    __shared__ u64 at_s[2], len_s[2];
    __shared__ u32 err;
    const int n = pj.num_values;
    if (threadIdx.x == 0) {
        u32 e = 0;
        at_s[0] = len_s[0] = at_s[1] = len_s[1] = 0;
        if (n < 0 || pj.skip < 0 || pj.take < 0 || pj.skip > n - pj.take) e |= E_LEVELS;
        if (pj.v2) {
            at_s[0] = 0;
            len_s[0] = (u64)pj.rep_len;
            at_s[1] = (u64)pj.rep_len;
            len_s[1] = (u64)pj.def_len;
            if ((u64)pj.rep_len + (u64)pj.def_len > pj.data_len) e |= E_LEVELS;
        } else {
            u64 at = 0;
            for (int s = 0; s < 2 && !e; s++) {
                const int max = s == 0 ? pj.max_rep : pj.max_def;
                if (max == 0) continue;
                if (pj.data_len - at < 4) { e |= E_LEVELS; break; }
                const u8* p = data + at;
                u64 l = (u64)p[0] | ((u64)p[1] << 8) | ((u64)p[2] << 16) | ((u64)p[3] << 24);
                if (l > pj.data_len - at - 4) { e |= E_LEVELS; break; }
                at_s[s] = at + 4;
                len_s[s] = l;
                at = at + 4 + l;
            }
        }
        err = e;
    }
    __syncthreads();
    if (err) {
        if (threadIdx.x == 0) errors[blockIdx.x] |= err;
        return;
    }
    const int lo_i = pj.skip, hi_i = pj.skip + pj.take;   // the entries written
    for (int s = 0; s < 2; s++) {
        const int max = s == 0 ? pj.max_rep : pj.max_def;
        u8* out = (u8*)(s == 0 ? lo.rep : lo.def) + pj.row_start;   // entry lo_i's place
        if (max == 0) {
            for (int i = lo_i + threadIdx.x; i < hi_i; i += NEST_THREADS) out[i - lo_i] = 0;
            continue;
        }
        u32 e = rle_hybrid_block(data + at_s[s], len_s[s], level_bits(max), tmp, n, runs,
                                 rle_state);
        if (e) {
            if (threadIdx.x == 0) errors[blockIdx.x] |= e;
            return;
        }
        bool bad = false;
        for (int i = threadIdx.x; i < n; i += NEST_THREADS) {
            bad |= tmp[i] > (u32)max;
            if (i >= lo_i && i < hi_i) out[i - lo_i] = (u8)tmp[i];
        }
        if (bad) atomicOr(&err, E_LEVEL_MAX);
        __syncthreads();   // tmp is reused; err read by all
        if (err) {
            if (threadIdx.x == 0) errors[blockIdx.x] |= err;
            return;
        }
    }
}

struct NestUnit {           // 64 bytes; mirrored by NestUnit in src/decode/gpu/kernels.rs
    u64 rep;                // the leaf's levels, one byte per entry
    u64 def;
    u64 entries;
    u64 elem_defs;          // byte k: the definition level a slot at depth k needs (byte 0: 0)
    u64 counts;             // u32 [tiles][NEST_DEPTHS]: slots per tile and depth (nest_count)
    u64 bases;              // u64 [tiles][NEST_DEPTHS]: slots before the tile (nest_scatter)
    int depths;             // max_rep + 1
    int first_block;        // the unit's first block in the grid
    int first_task;         // its tasks: tasks[first_task .. first_task + num_tasks)
    int num_tasks;
};
static_assert(sizeof(NestUnit) == 64, "NestUnit must match its Rust mirror");

// What nest_scatter writes for the slots of a unit at depth `level`.
#define T_VALID 0          // bit j of out: def reaches `def` (nulls counted)
#define T_OFFSETS 1        // out[j] (i32 or i64: width 4 / 8): slots at depth level + 1 before
                           // slot j's entry; out[slots] = all of them
#define T_GATHER 2         // the leaf's entry i (src, width bytes) to slot j; validity from
                           // src_valid (entry bits) to out_valid (slot bits)
#define T_GATHER_BITS 3    // booleans: bit i of src to bit j of out; validity as T_GATHER
#define T_GATHER_OFFSETS 4 // byte arrays: out[j] = src[i] (i32 or i64); out[slots] = src[entries]

struct NestTask {           // 64 bytes; mirrored by NestTask in src/decode/gpu/kernels.rs
    u64 out;
    u64 out_valid;          // gathers: the slots' validity bitmap (u32 words, zeroed), or 0
    u64 src;
    u64 src_valid;          // gathers: the entries' validity bitmap, or 0 (all valid)
    u64 null_count;         // a u64 counter, or 0
    int kind;
    int level;
    int def;
    int width;
    int pad[2];
};
static_assert(sizeof(NestTask) == 64, "NestTask must match its Rust mirror");

__device__ static inline int elem_def_at(const NestUnit& u, int k) {
    return (int)((u.elem_defs >> (8 * k)) & 0xff);
}

__device__ static inline bool slot_at(const NestUnit& u, int k, int rep, int def) {
    return rep <= k && def >= elem_def_at(u, k);
}

extern "C" __global__ void __launch_bounds__(NEST_THREADS) nest_count(
    const NestUnit* units,
    const u32* block_unit,  // per block: its unit
    u32* errors)            // per unit
{
    const u32 ui = block_unit[blockIdx.x];
    const NestUnit u = units[ui];
    const u8* rep = (const u8*)u.rep;
    const u8* def = (const u8*)u.def;
    const u64 tile = (u64)(blockIdx.x - u.first_block);
    __shared__ u32 counts[NEST_DEPTHS];
    if (threadIdx.x < NEST_DEPTHS) counts[threadIdx.x] = 0;
    __syncthreads();
    u32 mine[NEST_DEPTHS];
    for (int k = 0; k < NEST_DEPTHS; k++) mine[k] = 0;
    bool bad = false;
    const u64 first = tile * NEST_TILE + (u64)threadIdx.x * NEST_PER;
    for (int x = 0; x < NEST_PER; x++) {
        const u64 i = first + x;
        if (i >= u.entries) break;
        const int r = rep[i], d = def[i];
        // an entry continuing the list at depth r - 1 is one of its elements; the first
        // entry starts a row
        if (r >= u.depths || (i == 0 && r != 0) || (r > 0 && d < elem_def_at(u, r))) bad = true;
        for (int k = 0; k < u.depths; k++) mine[k] += slot_at(u, k, r, d);
    }
    for (int k = 0; k < u.depths; k++)
        if (mine[k]) atomicAdd(&counts[k], mine[k]);
    if (bad) atomicOr(&errors[ui], E_NESTING);
    __syncthreads();
    if (threadIdx.x < NEST_DEPTHS)
        ((u32*)u.counts)[tile * NEST_DEPTHS + threadIdx.x] = counts[threadIdx.x];
}

__device__ static inline void set_bit(u32* words, u64 j) {
    atomicOr(&words[j >> 5], 1u << (j & 31));
}

__device__ static inline bool get_bit(const u32* words, u64 i) {
    return (words[i >> 5] >> (i & 31)) & 1u;
}

extern "C" __global__ void __launch_bounds__(NEST_THREADS) nest_scatter(
    const NestUnit* units,
    const u32* block_unit,
    const NestTask* tasks)
{
    const u32 ui = block_unit[blockIdx.x];
    const NestUnit u = units[ui];
    const u8* rep = (const u8*)u.rep;
    const u8* def = (const u8*)u.def;
    const u64 tile = (u64)(blockIdx.x - u.first_block);
    const u64* bases = (const u64*)u.bases + tile * NEST_DEPTHS;
    // each thread's slots per depth, then an inclusive scan over the block (Hillis-Steele)
    __shared__ u32 scan[NEST_DEPTHS][NEST_THREADS];
    const u64 first = tile * NEST_TILE + (u64)threadIdx.x * NEST_PER;
    for (int k = 0; k < NEST_DEPTHS; k++) {
        u32 c = 0;
        if (k < u.depths)
            for (int x = 0; x < NEST_PER; x++) {
                const u64 i = first + x;
                if (i < u.entries) c += slot_at(u, k, rep[i], def[i]);
            }
        scan[k][threadIdx.x] = c;
    }
    __syncthreads();
    for (int step = 1; step < NEST_THREADS; step <<= 1) {
        u32 add[NEST_DEPTHS];
        for (int k = 0; k < u.depths; k++)
            add[k] = threadIdx.x >= (u32)step ? scan[k][threadIdx.x - step] : 0;
        __syncthreads();
        for (int k = 0; k < u.depths; k++) scan[k][threadIdx.x] += add[k];
        __syncthreads();
    }
    // pos[k]: the index of the next slot at depth k
    u64 pos[NEST_DEPTHS];
    for (int k = 0; k < u.depths; k++) {
        u32 own = 0;
        for (int x = 0; x < NEST_PER; x++) {
            const u64 i = first + x;
            if (i < u.entries) own += slot_at(u, k, rep[i], def[i]);
        }
        pos[k] = bases[k] + scan[k][threadIdx.x] - own;
    }
    u64 nulls[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int x = 0; x < NEST_PER; x++) {
        const u64 i = first + x;
        if (i >= u.entries) break;
        const int r = rep[i], d = def[i];
        const bool last = i + 1 == u.entries;
        for (int t = 0; t < u.num_tasks; t++) {
            const NestTask tk = tasks[u.first_task + t];
            const int k = tk.level;
            const bool slot = slot_at(u, k, r, d);
            const u64 j = pos[k];
            switch (tk.kind) {
                case T_VALID:
                    if (slot) {
                        if (d >= tk.def) set_bit((u32*)tk.out, j);
                        else nulls[t & 7]++;
                    }
                    break;
                case T_OFFSETS: {
                    // the slots at depth k + 1 before entry i; after it, when it is the last
                    const u64 v = pos[k + 1];
                    const u64 after = v + slot_at(u, k + 1, r, d);
                    if (tk.width == 4) {
                        if (slot) ((int*)tk.out)[j] = (int)v;
                        if (last) ((int*)tk.out)[j + slot] = (int)after;
                    } else {
                        if (slot) ((i64*)tk.out)[j] = (i64)v;
                        if (last) ((i64*)tk.out)[j + slot] = (i64)after;
                    }
                    break;
                }
                case T_GATHER:
                case T_GATHER_BITS:
                case T_GATHER_OFFSETS:
                    if (slot) {
                        const bool valid = !tk.src_valid || get_bit((const u32*)tk.src_valid, i);
                        if (tk.out_valid && valid) set_bit((u32*)tk.out_valid, j);
                        if (!valid) nulls[t & 7]++;
                        if (tk.kind == T_GATHER) {
                            const u8* s = (const u8*)tk.src + i * (u64)tk.width;
                            u8* o = (u8*)tk.out + j * (u64)tk.width;
                            for (int b = 0; b < tk.width; b++) o[b] = s[b];
                        } else if (tk.kind == T_GATHER_BITS) {
                            if (get_bit((const u32*)tk.src, i)) set_bit((u32*)tk.out, j);
                        } else if (tk.width == 4) {
                            ((int*)tk.out)[j] = ((const int*)tk.src)[i];
                        } else {
                            ((i64*)tk.out)[j] = ((const i64*)tk.src)[i];
                        }
                    }
                    if (tk.kind == T_GATHER_OFFSETS && last) {
                        if (tk.width == 4)
                            ((int*)tk.out)[j + slot] = ((const int*)tk.src)[i + 1];
                        else
                            ((i64*)tk.out)[j + slot] = ((const i64*)tk.src)[i + 1];
                    }
                    break;
            }
        }
        for (int k = 0; k < u.depths; k++) pos[k] += slot_at(u, k, r, d);
    }
    for (int t = 0; t < u.num_tasks && t < 8; t++)
        if (nulls[t] && tasks[u.first_task + t].null_count)
            atomicAdd((unsigned long long*)tasks[u.first_task + t].null_count,
                      (unsigned long long)nulls[t]);
}
