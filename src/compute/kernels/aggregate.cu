// Partial aggregation of one batch on the device: GROUP BY keys into an open-addressing hash
// table of row numbers (a group is named by the first row that claimed its slot), SUM, COUNT,
// MIN and MAX accumulated per slot by the warp's leader of each group (the warp's rows of a
// group reduced by shuffles first), then the groups numbered and their keys and accumulators
// gathered densely for the host.
//
// Errors are flags the host reads once per batch: AGG_FULL (a row found no free slot: the
// table is grown and the batch run again).

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#define AGG_THREADS 256
#define EMPTY_SLOT 0xffffffffu
#define AGG_FULL 1u
#define AGG_OVERFLOW 2u  // exact arithmetic passed 128 bits

// key kinds
#define KEY_INT 0    // `width` bytes (1, 2, 4, 8, 16), signed or not: integers, dates,
                     // decimals, dictionary keys
#define KEY_BOOL 1   // bit-packed booleans
#define KEY_STR32 2  // strings or binary: i32 offsets (values) and characters (chars)
#define KEY_STR64 3  // the same with i64 offsets
#define KEY_VIEW 4   // string or binary views (16 bytes each) over one data buffer (chars)

// One GROUP BY column.
struct GroupKey {
    const u8* values;
    const u8* valid;  // null: every row valid
    const u8* chars;  // strings' characters
    int kind;
    int width;
};
static_assert(sizeof(GroupKey) == 32, "GroupKey");

// aggregate operations
#define AGG_COUNT_ALL 0  // COUNT(*): rows
#define AGG_COUNT 1      // COUNT(x): valid rows
#define AGG_SUM_INT 2    // exact 128-bit sum of integers (acc: lo, hi)
#define AGG_SUM_FLOAT 3  // double sum
#define AGG_MIN_INT 4    // signed 64-bit min (unsigned inputs: see sgn)
#define AGG_MAX_INT 5
#define AGG_MIN_FLOAT 6  // min / max by IEEE 754 total order (as arrow-rs's total_cmp)
#define AGG_MAX_FLOAT 7

// expression program ops (postfix over doubles; a null operand makes the row null)
#define OP_COL 0   // push column `arg`'s value (AggInput)
#define OP_LIT 1   // push the double whose bits are `lit`
#define OP_ADD 2
#define OP_SUB 3
#define OP_MUL 4
#define OP_DIV 5
#define OP_NEG 6
// integer ops (exact, 128-bit: decimals as their unscaled values; any op from 16 on makes the
// program an integer one, whose value SUM_INT adds)
#define IOP_COL 16    // push input `arg`'s value
#define IOP_LIT 17    // push the i64 `lit`
#define IOP_SCALE 18  // multiply the top by the u64 `lit` (a power of ten)
#define IOP_ADD 19
#define IOP_SUB 20
#define IOP_MUL 21
#define IOP_NEG 22
#define EXPR_STACK 8

// A numeric input column: `width` bytes, float (4 or 8) or integer (1, 2, 4, 8 bytes, signed
// or not; 16: Decimal128, for sums; MIN and MAX take the low word, the caller making sure the
// values fit 64 bits).
struct AggInput {
    const u8* values;
    const u8* valid;
    int width;
    int is_float;
    int sgn;
    int pad;
};
static_assert(sizeof(AggInput) == 32, "AggInput");

// One step of an expression program.
struct ExprOp {
    int op;
    int arg;
    u64 lit;
};
static_assert(sizeof(ExprOp) == 16, "ExprOp");

// One aggregate: its operation, its argument (input >= 0: a column of `inputs`; expr_len > 0:
// the program at `expr_start` of `ops`; neither: COUNT(*)), its accumulator per slot (16 bytes
// for AGG_SUM_INT, else 8) and its per-slot "a value was seen" flag.
struct AggJob {
    u8* acc;
    u32* seen;
    int op;
    int input;
    int expr_start;
    int expr_len;
};
static_assert(sizeof(AggJob) == 32, "AggJob");

__device__ static inline bool valid_at(const u8* valid, u64 i) {
    return !valid || ((valid[i >> 3] >> (i & 7)) & 1);
}

__device__ static inline u64 mix(u64 h, u64 v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 29;
    return h;
}

// a fixed-width value's 64-bit words (the 16-byte case gives both)
__device__ static inline void words_at(const u8* v, u64 i, int width, u64* lo, u64* hi) {
    *hi = 0;
    switch (width) {
    case 1: *lo = v[i]; break;
    case 2: *lo = ((const unsigned short*)v)[i]; break;
    case 4: *lo = ((const u32*)v)[i]; break;
    case 8: *lo = ((const u64*)v)[i]; break;
    default: *lo = ((const u64*)v)[2 * i]; *hi = ((const u64*)v)[2 * i + 1]; break;
    }
}

// row i's string: its first byte and length
__device__ static inline const u8* str_at(const GroupKey& k, u64 i, u64* len) {
    if (k.kind == KEY_STR32) {
        const int* o = (const int*)k.values;
        *len = (u64)(o[i + 1] - o[i]);
        return k.chars + o[i];
    }
    if (k.kind == KEY_STR64) {
        const i64* o = (const i64*)k.values;
        *len = (u64)(o[i + 1] - o[i]);
        return k.chars + o[i];
    }
    const u8* view = k.values + 16 * i;
    u32 l = *(const u32*)view;
    *len = l;
    return l <= 12 ? view + 4 : k.chars + *(const u32*)(view + 12);
}

__device__ static u64 row_hash(const GroupKey* keys, int nkeys, u64 r) {
    u64 h = 0x2545f4914f6cdd1dull;
    for (int k = 0; k < nkeys; k++) {
        const GroupKey& key = keys[k];
        if (!valid_at(key.valid, r)) {
            h = mix(h, 0x8000000000000000ull + (u64)k);
            continue;
        }
        switch (key.kind) {
        case KEY_INT: {
            u64 lo, hi;
            words_at(key.values, r, key.width, &lo, &hi);
            h = mix(mix(h, lo), hi);
            break;
        }
        case KEY_BOOL: h = mix(h, (key.values[r >> 3] >> (r & 7)) & 1); break;
        default: {
            u64 len;
            const u8* c = str_at(key, r, &len);
            u64 w = len;
            for (u64 j = 0; j < len; j++) {
                w = w * 0x100000001b3ull ^ c[j];
            }
            h = mix(h, w);
            break;
        }
        }
    }
    return h;
}

// whether rows a and b have equal keys (nulls equal to nulls, as GROUP BY wants)
__device__ static bool same_keys(const GroupKey* keys, int nkeys, u64 a, u64 b) {
    for (int k = 0; k < nkeys; k++) {
        const GroupKey& key = keys[k];
        bool va = valid_at(key.valid, a), vb = valid_at(key.valid, b);
        if (va != vb) return false;
        if (!va) continue;
        switch (key.kind) {
        case KEY_INT: {
            u64 alo, ahi, blo, bhi;
            words_at(key.values, a, key.width, &alo, &ahi);
            words_at(key.values, b, key.width, &blo, &bhi);
            if (alo != blo || ahi != bhi) return false;
            break;
        }
        case KEY_BOOL:
            if (((key.values[a >> 3] >> (a & 7)) & 1) != ((key.values[b >> 3] >> (b & 7)) & 1))
                return false;
            break;
        default: {
            u64 al, bl;
            const u8* ac = str_at(key, a, &al);
            const u8* bc = str_at(key, b, &bl);
            if (al != bl) return false;
            for (u64 j = 0; j < al; j++) {
                if (ac[j] != bc[j]) return false;
            }
            break;
        }
        }
    }
    return true;
}

// input column value as a double (floats as they are, integers converted)
__device__ static inline double input_double(const AggInput& in, u64 r) {
    if (in.is_float) {
        return in.width == 4 ? (double)((const float*)in.values)[r] : ((const double*)in.values)[r];
    }
    switch (in.width) {
    case 1: return in.sgn ? (double)((const signed char*)in.values)[r] : (double)in.values[r];
    case 2: return in.sgn ? (double)((const short*)in.values)[r]
                          : (double)((const unsigned short*)in.values)[r];
    case 4: return in.sgn ? (double)((const int*)in.values)[r] : (double)((const u32*)in.values)[r];
    default: return in.sgn ? (double)((const i64*)in.values)[r] : (double)((const u64*)in.values)[r];
    }
}

// an integer input (1, 2, 4, 8 bytes) sign- or zero-extended to 64 bits; of 16 bytes
// (Decimal128), its low word
__device__ static inline i64 input_int(const AggInput& in, u64 r) {
    switch (in.width) {
    case 1: return in.sgn ? (i64)((const signed char*)in.values)[r] : (i64)in.values[r];
    case 2: return in.sgn ? (i64)((const short*)in.values)[r]
                          : (i64)((const unsigned short*)in.values)[r];
    case 4: return in.sgn ? (i64)((const int*)in.values)[r] : (i64)((const u32*)in.values)[r];
    case 8: return ((const i64*)in.values)[r];
    default: return ((const i64*)in.values)[2 * r];
    }
}

// a double as a signed 64-bit integer ordered as IEEE 754's totalOrder (arrow-rs's total_cmp)
__device__ static inline i64 total_order(double x) {
    i64 b = __double_as_longlong(x);
    return b < 0 ? b ^ 0x7fffffffffffffffll : b;
}

// evaluates program `ops[start..start+len]` at row r; false when an operand is null
__device__ static bool eval(const ExprOp* ops, int start, int len, const AggInput* inputs, u64 r,
                            double* out) {
    double st[EXPR_STACK];
    int sp = 0;
    for (int i = start; i < start + len; i++) {
        ExprOp o = ops[i];
        switch (o.op) {
        case OP_COL:
            if (!valid_at(inputs[o.arg].valid, r)) return false;
            st[sp++] = input_double(inputs[o.arg], r);
            break;
        case OP_LIT: st[sp++] = __longlong_as_double((i64)o.lit); break;
        case OP_NEG: st[sp - 1] = -st[sp - 1]; break;
        default: {
            double b = st[--sp], a = st[sp - 1];
            st[sp - 1] = o.op == OP_ADD ? a + b : o.op == OP_SUB ? a - b : o.op == OP_MUL ? a * b : a / b;
            break;
        }
        }
    }
    *out = st[0];
    return true;
}

// an input column's value at r as a 128-bit integer (Decimal128 whole)
__device__ static inline __int128 input_i128(const AggInput& in, u64 r) {
    if (in.width == 16) {
        u64 lo = ((const u64*)in.values)[2 * r];
        i64 hi = ((const i64*)in.values)[2 * r + 1];
        return (__int128)(((unsigned __int128)(u64)hi << 64) | lo);
    }
    i64 v = input_int(in, r);
    return in.sgn || in.width < 8 ? (__int128)v : (__int128)(u64)v;
}

// a * b, false when it passes 128 bits
__device__ static inline bool mul128(__int128 a, __int128 b, __int128* out) {
    unsigned __int128 ua = a < 0 ? -(unsigned __int128)a : (unsigned __int128)a;
    unsigned __int128 ub = b < 0 ? -(unsigned __int128)b : (unsigned __int128)b;
    // operands below 2^63 (every decimal of up to 18 digits): the product is below 2^126;
    // otherwise a 128-bit division (slow, rare) says whether it fits
    if ((ua >> 63) != 0 || (ub >> 63) != 0) {
        const unsigned __int128 lim = ((unsigned __int128)1 << 127) - 1;
        if (ua != 0 && ub > lim / ua) return false;
    }
    unsigned __int128 m = ua * ub;
    *out = (a < 0) != (b < 0) ? -(__int128)m : (__int128)m;
    return true;
}

// evaluates integer program `ops[start..start+len]` at row r: 1 a value, 0 a null operand,
// -1 an overflow
__device__ static int eval_int(const ExprOp* ops, int start, int len, const AggInput* inputs,
                               u64 r, __int128* out) {
    __int128 st[EXPR_STACK];
    int sp = 0;
    for (int i = start; i < start + len; i++) {
        ExprOp o = ops[i];
        switch (o.op) {
        case IOP_COL:
            if (!valid_at(inputs[o.arg].valid, r)) return 0;
            st[sp++] = input_i128(inputs[o.arg], r);
            break;
        case IOP_LIT: st[sp++] = (__int128)(i64)o.lit; break;
        case IOP_NEG: st[sp - 1] = -st[sp - 1]; break;
        case IOP_SCALE:
            if (!mul128(st[sp - 1], (__int128)o.lit, &st[sp - 1])) return -1;
            break;
        case IOP_MUL: {
            __int128 b = st[--sp];
            if (!mul128(st[sp - 1], b, &st[sp - 1])) return -1;
            break;
        }
        default: {
            __int128 b = st[--sp], a = st[sp - 1];
            __int128 c = (__int128)((unsigned __int128)a + (o.op == IOP_ADD ? (unsigned __int128)b
                                                                          : -(unsigned __int128)b));
            // overflow: operands of one sign (after the sign of b for SUB) give the other
            bool bneg = o.op == IOP_ADD ? b < 0 : b > 0;
            if ((a < 0) == bneg && (c < 0) != (a < 0)) return -1;
            st[sp - 1] = c;
            break;
        }
        }
    }
    *out = st[0];
    return 1;
}

// the slot of row r's group, claimed when new; EMPTY_SLOT when the table is (nearly) full:
// no free slot or its own within `probes` slots of its hash
__device__ static u32 find_slot(const GroupKey* keys, int nkeys, u64 r, u32* slot_row, u64 cap,
                                u64 probes) {
    u64 s = row_hash(keys, nkeys, r) & (cap - 1);
    if (probes > cap) probes = cap;
    for (u64 step = 0; step < probes; step++) {
        u32 cur = ((volatile u32*)slot_row)[s];
        if (cur == EMPTY_SLOT) {
            cur = atomicCAS(&slot_row[s], EMPTY_SLOT, (u32)r);
            if (cur == EMPTY_SLOT) return (u32)s;
        }
        if (same_keys(keys, nkeys, cur, r)) return (u32)s;
        s = (s + 1) & (cap - 1);
    }
    return EMPTY_SLOT;
}

// Sets every slot empty and every accumulator to its identity. Grid-stride over slots.
extern "C" __global__ void __launch_bounds__(AGG_THREADS) agg_init(
    u32* slot_row, u64 cap, const AggJob* aggs, int naggs)
{
    for (u64 s = (u64)blockIdx.x * blockDim.x + threadIdx.x; s < cap;
         s += (u64)gridDim.x * blockDim.x) {
        slot_row[s] = EMPTY_SLOT;
        for (int a = 0; a < naggs; a++) {
            AggJob j = aggs[a];
            j.seen[s] = 0;
            switch (j.op) {
            case AGG_SUM_INT: ((u64*)j.acc)[2 * s] = 0; ((u64*)j.acc)[2 * s + 1] = 0; break;
            case AGG_SUM_FLOAT: ((double*)j.acc)[s] = 0.0; break;
            case AGG_MIN_INT: case AGG_MIN_FLOAT: ((i64*)j.acc)[s] = 0x7fffffffffffffffll; break;
            case AGG_MAX_INT: case AGG_MAX_FLOAT:
                ((i64*)j.acc)[s] = (i64)0x8000000000000000ull; break;
            default: ((u64*)j.acc)[s] = 0; break;
            }
        }
    }
}

// Every row into its group's slot and accumulators; a row that finds neither its group nor a
// free slot within `probes` slots sets AGG_FULL (the table is then grown: the largest, of 2n
// slots, is probed whole). The warp's 32 rows go together: the lanes
// of one group (__match_any_sync on the slot) are reduced by shuffles and their lowest lane
// adds the result to the slot with one atomic per aggregate.
extern "C" __global__ void __launch_bounds__(AGG_THREADS) agg_rows(
    const GroupKey* keys, int nkeys, u64 n, u32* slot_row, u64 cap, u64 probes,
    const AggInput* inputs, const ExprOp* ops, const AggJob* aggs, int naggs, u32* flags)
{
    const u32 lane = threadIdx.x & 31;
    const u64 warp = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const u64 warps = ((u64)gridDim.x * blockDim.x) >> 5;
    for (u64 base = warp * 32; base < n; base += warps * 32) {
        // a full table: the batch is run again with a larger one, so stop here
        if (__ballot_sync(0xffffffffu, (*(volatile u32*)flags & AGG_FULL) != 0)) return;
        u64 r = base + lane;
        u32 s = EMPTY_SLOT;
        if (r < n) {
            s = find_slot(keys, nkeys, r, slot_row, cap, probes);
            if (s == EMPTY_SLOT) atomicOr(flags, AGG_FULL);
        }
        u32 peers = __match_any_sync(0xffffffffu, s);
        bool lead = s != EMPTY_SLOT && (u32)(__ffs(peers) - 1) == lane;
        // every row of the warp a group of its own (many groups): no reduction to do
        bool alone = __ballot_sync(0xffffffffu, s == EMPTY_SLOT || __popc(peers) == 1) ==
                     0xffffffffu;
        for (int a = 0; a < naggs; a++) {
            AggJob j = aggs[a];
            // this lane's value
            bool has = false;
            double f = 0.0;
            i64 v = 0, vh = 0;
            if (s != EMPTY_SLOT) {
                if (j.expr_len > 0 && ops[j.expr_start].op >= IOP_COL) {
                    __int128 x = 0;
                    int e = eval_int(ops, j.expr_start, j.expr_len, inputs, r, &x);
                    if (e < 0) atomicOr(flags, AGG_OVERFLOW);
                    has = e > 0;
                    v = (i64)(u64)(unsigned __int128)x;
                    vh = (i64)(u64)((unsigned __int128)x >> 64);
                } else if (j.expr_len > 0) {
                    has = eval(ops, j.expr_start, j.expr_len, inputs, r, &f);
                } else if (j.input >= 0) {
                    const AggInput& in = inputs[j.input];
                    has = valid_at(in.valid, r);
                    if (has && j.op != AGG_COUNT) {
                        if (in.is_float) {
                            f = input_double(in, r);
                        } else {
                            v = input_int(in, r);
                            vh = in.width == 16 ? ((const i64*)in.values)[2 * r + 1]
                                 : in.sgn && v < 0 ? -1 : 0;
                        }
                    }
                } else {
                    has = true;
                }
                if (has && (j.op == AGG_MIN_FLOAT || j.op == AGG_MAX_FLOAT)) v = total_order(f);
            }
            u32 haves = __ballot_sync(0xffffffffu, has) & peers;
            if (j.op == AGG_COUNT_ALL || j.op == AGG_COUNT) {
                if (lead && haves) atomicAdd(&((u64*)j.acc)[s], (u64)__popc(haves));
                continue;
            }
            // the group's lanes reduced: each lane takes every peer's value in turn
            double fsum = 0.0;
            u64 lo = 0, hi = 0;
            i64 best = j.op == AGG_MIN_INT || j.op == AGG_MIN_FLOAT ? 0x7fffffffffffffffll
                                                                    : (i64)0x8000000000000000ull;
            for (int src = alone ? lane : 0; src < (alone ? (int)lane + 1 : 32); src++) {
                double fo = alone ? f : __shfl_sync(0xffffffffu, f, src);
                i64 vo = alone ? v : __shfl_sync(0xffffffffu, v, src);
                i64 vho = alone ? vh : j.op == AGG_SUM_INT ? __shfl_sync(0xffffffffu, vh, src) : 0;
                if (!((haves >> src) & 1)) continue;
                switch (j.op) {
                case AGG_SUM_FLOAT: fsum += fo; break;
                case AGG_SUM_INT: {
                    u64 l = lo + (u64)vo;
                    hi += (u64)vho + (l < lo ? 1 : 0);
                    lo = l;
                    break;
                }
                case AGG_MIN_INT: case AGG_MIN_FLOAT: best = vo < best ? vo : best; break;
                default: best = vo > best ? vo : best; break;
                }
            }
            if (!lead || !haves) continue;
            atomicOr(&j.seen[s], 1u);
            switch (j.op) {
            case AGG_SUM_FLOAT: atomicAdd(&((double*)j.acc)[s], fsum); break;
            case AGG_SUM_INT: {
                u64* p = &((u64*)j.acc)[2 * s];
                u64 old = atomicAdd(&p[0], lo);
                atomicAdd(&p[1], hi + (old + lo < old ? 1 : 0));
                break;
            }
            case AGG_MIN_INT: case AGG_MIN_FLOAT: atomicMin(&((i64*)j.acc)[s], best); break;
            default: atomicMax(&((i64*)j.acc)[s], best); break;
            }
        }
    }
}

// Numbers the claimed slots: group g's slot and first row (order of numbering is arbitrary).
extern "C" __global__ void __launch_bounds__(AGG_THREADS) agg_number(
    const u32* slot_row, u64 cap, u32* count, u32* group_slot, u32* group_row)
{
    for (u64 s = (u64)blockIdx.x * blockDim.x + threadIdx.x; s < cap;
         s += (u64)gridDim.x * blockDim.x) {
        u32 r = slot_row[s];
        if (r == EMPTY_SLOT) continue;
        u32 g = atomicAdd(count, 1u);
        group_slot[g] = (u32)s;
        group_row[g] = r;
    }
}

// Each group's accumulator of one aggregate (`width` 8 or 16 bytes) and its seen flag, densely.
extern "C" __global__ void __launch_bounds__(AGG_THREADS) agg_gather(
    const u8* acc, const u32* seen, int width, const u32* group_slot, u64 groups, u8* out,
    u8* out_seen)
{
    for (u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
         g += (u64)gridDim.x * blockDim.x) {
        u64 s = group_slot[g];
        const u64* from = (const u64*)(acc + s * width);
        u64* to = (u64*)(out + g * width);
        to[0] = from[0];
        if (width == 16) to[1] = from[1];
        out_seen[g] = seen[s] ? 1 : 0;
    }
}

// One key column at the groups' first rows: its validity (a byte per group), its fixed-width
// value or boolean (as a byte), or its string's length (i64).
extern "C" __global__ void __launch_bounds__(AGG_THREADS) key_gather(
    const GroupKey* key, const u32* group_row, u64 groups, u8* out, u8* out_valid)
{
    GroupKey k = *key;
    for (u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
         g += (u64)gridDim.x * blockDim.x) {
        u64 r = group_row[g];
        bool v = valid_at(k.valid, r);
        out_valid[g] = v;
        switch (k.kind) {
        case KEY_INT: {
            for (int b = 0; b < k.width; b++) out[g * k.width + b] = v ? k.values[r * k.width + b] : 0;
            break;
        }
        case KEY_BOOL: out[g] = v && ((k.values[r >> 3] >> (r & 7)) & 1); break;
        default: {
            u64 len;
            str_at(k, r, &len);
            ((i64*)out)[g] = v ? (i64)len : 0;
            break;
        }
        }
    }
}

// A string key's characters at the groups' first rows, to `offsets` (i64, from key_gather's
// lengths). A warp per group.
extern "C" __global__ void __launch_bounds__(AGG_THREADS) key_chars(
    const GroupKey* key, const u32* group_row, u64 groups, const i64* offsets, u8* out)
{
    GroupKey k = *key;
    const u32 lane = threadIdx.x & 31;
    const u64 warp = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const u64 warps = ((u64)gridDim.x * blockDim.x) >> 5;
    for (u64 g = warp; g < groups; g += warps) {
        u64 len = (u64)(offsets[g + 1] - offsets[g]);
        if (len == 0) continue;
        u64 l;
        const u8* c = str_at(k, group_row[g], &l);
        for (u64 j = lane; j < len; j += 32) out[offsets[g] + j] = c[j];
    }
}
