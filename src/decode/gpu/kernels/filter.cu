// The exact row filter on device batches (src/decode/gpu/filter.rs): predicate kernels write
// one byte per row (1: the row is kept), masks are combined, scanned into output positions,
// and every column is compacted to the kept rows.
//
// Every kernel is grid-strided over its rows, so any grid size is correct; the Rust side
// launches about one thread per row up to a cap.

typedef unsigned char u8;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

#define FILTER_THREADS 256
#define SCAN_PER_THREAD 16
#define FILTER_SPAN (FILTER_THREADS * SCAN_PER_THREAD)

// Operators, as CmpOp in src/plan/predicate/mod.rs is numbered by filter.rs.
#define OP_LT 0
#define OP_LE 1
#define OP_GT 2
#define OP_GE 3
#define OP_EQ 4
#define OP_NE 5

__device__ static inline bool holds(int op, int c) {
    switch (op) {
    case OP_LT: return c < 0;
    case OP_LE: return c <= 0;
    case OP_GT: return c > 0;
    case OP_GE: return c >= 0;
    case OP_EQ: return c == 0;
    default: return c != 0;
    }
}

__device__ static inline bool bit_at(const u8* bits, u64 i) {
    return (bits[i >> 3] >> (i & 7)) & 1;
}

// a null bitmap pointer means every row is valid
__device__ static inline bool valid_at(const u8* valid, u64 i) {
    return !valid || bit_at(valid, i);
}

#define GRID_STRIDE(i, n) \
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (u64)gridDim.x * blockDim.x)

// The integer at row i of `width` bytes (1, 2, 4, 8; 16: Decimal128, low word first; 0:
// bit-packed booleans), signed or not, as a 128-bit two's complement hi:lo.
__device__ static inline void int_at(const u8* values, u64 i, int width, int sgn, i64* hi, u64* lo) {
    switch (width) {
    case 0: *lo = bit_at(values, i); *hi = 0; break;
    case 1: { i64 v = sgn ? (i64)((const signed char*)values)[i] : (i64)values[i];
              *lo = (u64)v; *hi = v < 0 ? -1 : 0; break; }
    case 2: { i64 v = sgn ? (i64)((const short*)values)[i]
                          : (i64)((const unsigned short*)values)[i];
              *lo = (u64)v; *hi = v < 0 ? -1 : 0; break; }
    case 4: { i64 v = sgn ? (i64)((const int*)values)[i] : (i64)((const u32*)values)[i];
              *lo = (u64)v; *hi = v < 0 ? -1 : 0; break; }
    case 8: { u64 v = ((const u64*)values)[i];
              *lo = v; *hi = (sgn && (i64)v < 0) ? -1 : 0; break; }
    default: *lo = ((const u64*)values)[2 * i]; *hi = ((const i64*)values)[2 * i + 1]; break;
    }
}

// -1, 0 or 1 as a:al compares with b:bl, 128-bit two's complement
__device__ static inline int cmp128(i64 ah, u64 al, i64 bh, u64 bl) {
    return ah < bh ? -1 : ah > bh ? 1 : al < bl ? -1 : al > bl ? 1 : 0;
}

// the FLOAT (width 4) or DOUBLE (8) at row i, as a double
__device__ static inline double float_at(const u8* values, u64 i, int width) {
    return width == 4 ? (double)((const float*)values)[i] : ((const double*)values)[i];
}

// x op y as IEEE 754 compares: NaN satisfies only !=
__device__ static inline bool ieee_holds(int op, double x, double y) {
    bool h;
    switch (op) {
    case OP_LT: h = x < y; break;
    case OP_LE: h = x <= y; break;
    case OP_GT: h = x > y; break;
    case OP_GE: h = x >= y; break;
    case OP_EQ: h = x == y; break;
    default: h = x != y; break;
    }
    return h;
}

// Integers (int_at's widths) against the 128-bit literal (lit_hi:lit_lo, two's complement).
// mode = op | width << 4 | signed << 12.
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) pred_int(
    const u8* values, u64 n, const u8* valid, int mode, u64 lit_lo, u64 lit_hi, u8* out)
{
    int op = mode & 15, width = (mode >> 4) & 255, sgn = (mode >> 12) & 1;
    GRID_STRIDE(i, n) {
        i64 hi;
        u64 lo;
        int_at(values, i, width, sgn, &hi, &lo);
        out[i] = valid_at(valid, i) && holds(op, cmp128(hi, lo, (i64)lit_hi, lit_lo));
    }
}

// Two columns of one type, row by row: integers (int_at's widths but booleans), signed or not,
// or (bit 13) FLOAT (width 4) / DOUBLE (8) as IEEE 754 compares, with nan_too (bit 14) a NaN
// on either side holding as well. A row null on either side does not hold.
// mode = op | width << 4 | sgn << 12 | float << 13 | nan_too << 14.
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) pred_cols(
    const u8* a, const u8* b, u64 n, const u8* va, const u8* vb, int mode, u8* out)
{
    int op = mode & 15, width = (mode >> 4) & 255, sgn = (mode >> 12) & 1;
    int is_float = (mode >> 13) & 1, nan_too = (mode >> 14) & 1;
    GRID_STRIDE(i, n) {
        bool h;
        if (is_float) {
            double x = float_at(a, i, width), y = float_at(b, i, width);
            h = ieee_holds(op, x, y) || (nan_too && (x != x || y != y));
        } else {
            i64 ah, bh;
            u64 al, bl;
            int_at(a, i, width, sgn, &ah, &al);
            int_at(b, i, width, sgn, &bh, &bl);
            h = holds(op, cmp128(ah, al, bh, bl));
        }
        out[i] = valid_at(va, i) && valid_at(vb, i) && h;
    }
}

// FLOAT (width 4) or DOUBLE (8) against a double (its bits), as IEEE 754 compares: NaN
// satisfies only !=; with nan_too, NaN rows hold as well. mode = op | width << 4 | nan_too << 12.
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) pred_float(
    const u8* values, u64 n, const u8* valid, int mode, u64 lit_bits, u8* out)
{
    int op = mode & 15, width = (mode >> 4) & 255, nan_too = (mode >> 12) & 1;
    double lit = __longlong_as_double((i64)lit_bits);
    GRID_STRIDE(i, n) {
        double x = float_at(values, i, width);
        out[i] = valid_at(valid, i) && (ieee_holds(op, x, lit) || (nan_too && x != x));
    }
}

// Strings (i32 offsets, or i64 when large) against the literal's bytes, compared bytewise
// (shorter first on a common prefix). mode = op | large << 4.
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) pred_bytes(
    const u8* offsets, const u8* chars, u64 n, const u8* valid, int mode, const u8* lit,
    u64 lit_len, u8* out)
{
    int op = mode & 15, large = (mode >> 4) & 1;
    GRID_STRIDE(i, n) {
        i64 a = large ? ((const i64*)offsets)[i] : ((const int*)offsets)[i];
        i64 b = large ? ((const i64*)offsets)[i + 1] : ((const int*)offsets)[i + 1];
        u64 len = (u64)(b - a);
        u64 k = len < lit_len ? len : lit_len;
        int c = 0;
        for (u64 j = 0; j < k && c == 0; j++) {
            u8 x = chars[a + j], y = lit[j];
            c = x < y ? -1 : x > y ? 1 : 0;
        }
        if (c == 0) c = len < lit_len ? -1 : len > lit_len ? 1 : 0;
        out[i] = valid_at(valid, i) && holds(op, c);
    }
}

// The length of the UTF-8 sequence a byte leads (1 for a byte that leads none).
__device__ static inline u64 utf8_len(u8 b) {
    return b >= 0xF0 && b <= 0xF7 ? 4 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xC0 && b <= 0xDF ? 2 : 1;
}

// Strings against a LIKE pattern compiled by LikePattern (src/plan/predicate/like.rs): per
// token a kind (0 the byte in `bytes`, 1 `_`: one UTF-8 character, 2 `%`: any run). The same
// walk as LikePattern::matches: forward, going back only to the last `%`, which takes one more
// character each time. mode bit 0: 64-bit offsets; bit 1: NOT LIKE. Null rows: 0.
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) pred_like(
    const u8* offsets, const u8* chars, u64 n, const u8* valid, int mode, const u8* kinds,
    const u8* bytes, u64 pat_len, u8* out)
{
    int large = mode & 1, negated = (mode >> 1) & 1;
    GRID_STRIDE(i, n) {
        i64 a = large ? ((const i64*)offsets)[i] : ((const int*)offsets)[i];
        i64 b = large ? ((const i64*)offsets)[i + 1] : ((const int*)offsets)[i + 1];
        const u8* s = chars + a;
        u64 len = b > a ? (u64)(b - a) : 0;
        u64 x = 0, j = 0, star_j = 0, star_x = 0;
        bool star = false, ok = true;
        while (x < len) {
            if (j < pat_len && kinds[j] == 0 && bytes[j] == s[x]) {
                x++;
                j++;
            } else if (j < pat_len && kinds[j] == 1) {
                x += utf8_len(s[x]);
                j++;
            } else if (j < pat_len && kinds[j] == 2) {
                star = true;
                star_j = j;
                star_x = x;
                j++;
            } else if (star) {
                star_x += utf8_len(s[star_x]);
                x = star_x;
                j = star_j + 1;
            } else {
                ok = false;
                break;
            }
        }
        if (ok) {
            while (j < pat_len && kinds[j] == 2) j++;
            ok = x == len && j == pat_len;
        }
        out[i] = valid_at(valid, i) && (ok != (negated != 0));
    }
}

// 1 where the row is valid (want 1) or null (want 0); a null bitmap: every row valid.
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) pred_valid(
    const u8* valid, u64 n, int want, u8* out)
{
    GRID_STRIDE(i, n) out[i] = valid_at(valid, i) == (want != 0);
}

// a = a AND b (mode bit 0 clear) or a OR b (set); bit 1: b is a validity bitmap instead of
// a mask (a null one: every row valid); bit 2: a = NOT a (b unread).
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) mask_combine(
    u8* a, const u8* b, u64 n, int mode)
{
    int is_or = mode & 1, bits = (mode >> 1) & 1, invert = (mode >> 2) & 1;
    GRID_STRIDE(i, n) {
        if (invert) {
            a[i] = !a[i];
            continue;
        }
        u8 y = bits ? (u8)valid_at(b, i) : b[i];
        a[i] = is_or ? (a[i] | y) : (a[i] & y);
    }
}

__device__ static i64 block_exclusive_scan(i64 v, i64* shared, i64* total) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int off = 1; off < FILTER_THREADS; off <<= 1) {
        i64 add = threadIdx.x >= off ? shared[threadIdx.x - off] : 0;
        __syncthreads();
        shared[threadIdx.x] += add;
        __syncthreads();
    }
    *total = shared[FILTER_THREADS - 1];
    return shared[threadIdx.x] - v;
}

// Scans, one block per span of FILTER_SPAN rows: of mask bytes (mask != 0) or of i64 values
// (mask == 0). `span_total`: each span's sum. `span_scan`: out[i] = bases[span] + the values
// before i in its span, for every row i, and out[n] (the last span).
__device__ static i64 value_at(const u8* mask, const i64* values, u64 i) {
    return mask ? (i64)mask[i] : values[i];
}

// This thread's SCAN_PER_THREAD rows of the block's span start at *first; returns the sum of
// the span's rows before them, and the span's sum in *total.
__device__ static i64 span_prefix(const u8* mask, const i64* values, u64 n, i64* shared,
                                  u64* first, i64* total) {
    *first = (u64)blockIdx.x * FILTER_SPAN + (u64)threadIdx.x * SCAN_PER_THREAD;
    i64 mine = 0;
    for (int k = 0; k < SCAN_PER_THREAD; k++)
        if (*first + k < n) mine += value_at(mask, values, *first + k);
    return block_exclusive_scan(mine, shared, total);
}

extern "C" __global__ void __launch_bounds__(FILTER_THREADS) span_total(
    const u8* mask, const i64* values, u64 n, i64* sums)
{
    __shared__ i64 sh[FILTER_THREADS];
    u64 first;
    i64 total;
    span_prefix(mask, values, n, sh, &first, &total);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

extern "C" __global__ void __launch_bounds__(FILTER_THREADS) span_scan(
    const u8* mask, const i64* values, u64 n, const i64* bases, i64* out)
{
    __shared__ i64 sh[FILTER_THREADS];
    u64 first;
    i64 total;
    i64 at = bases[blockIdx.x] + span_prefix(mask, values, n, sh, &first, &total);
    for (int k = 0; k < SCAN_PER_THREAD; k++) {
        u64 i = first + k;
        if (i < n) {
            out[i] = at;
            at += value_at(mask, values, i);
        } else if (i == n) {
            out[i] = at;
        }
    }
}

// Values of `width` bytes (1, 2, 4, 8, 16 or 32) of the kept rows, to their positions.
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) compact_fixed(
    const u8* in, int width, u64 n, const u8* mask, const i64* pos, u8* out)
{
    GRID_STRIDE(i, n) {
        if (!mask[i]) continue;
        u64 p = (u64)pos[i];
        switch (width) {
        case 1: out[p] = in[i]; break;
        case 2: ((unsigned short*)out)[p] = ((const unsigned short*)in)[i]; break;
        case 4: ((u32*)out)[p] = ((const u32*)in)[i]; break;
        case 8: ((u64*)out)[p] = ((const u64*)in)[i]; break;
        default:
            for (int w = 0; w < width / 8; w++)
                ((u64*)out)[p * (width / 8) + w] = ((const u64*)in)[i * (width / 8) + w];
            break;
        }
    }
}

// Bits (validity, or boolean values) of the kept rows, to their positions in `out` (32-bit
// words, zeroed); `zeros` counts the kept rows whose bit is 0 (a validity's null count).
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) compact_bits(
    const u8* in, u64 n, const u8* mask, const i64* pos, u32* out, u64* zeros)
{
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 base = (u64)blockIdx.x * blockDim.x; base < n; base += stride) {
        u64 i = base + threadIdx.x;
        bool kept = i < n && mask[i];
        bool bit = kept && bit_at(in, i);
        if (bit) {
            u64 p = (u64)pos[i];
            atomicOr(&out[p >> 5], 1u << (p & 31));
        }
        unsigned zero = __ballot_sync(0xffffffffu, kept && !bit);
        if ((threadIdx.x & 31) == 0 && zero) atomicAdd(zeros, (u64)__popc(zero));
    }
}

// The kept rows' string lengths (0 for the others): offsets i32, or i64 when large.
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) kept_lengths(
    const u8* offsets, int large, u64 n, const u8* mask, i64* lengths)
{
    GRID_STRIDE(i, n) {
        i64 a = large ? ((const i64*)offsets)[i] : ((const int*)offsets)[i];
        i64 b = large ? ((const i64*)offsets)[i + 1] : ((const int*)offsets)[i + 1];
        lengths[i] = mask[i] ? b - a : 0;
    }
}

// The output offsets (i32, or i64 when large) from `starts` (the kept rows' characters'
// output starts, by input row; starts[n]: the total), for the `m` kept rows.
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) compact_offsets(
    const i64* starts, u64 n, const u8* mask, const i64* pos, u64 m, int large, u8* out)
{
    GRID_STRIDE(i, n + 1) {
        if (i == n) {
            if (large) ((i64*)out)[m] = starts[n]; else ((int*)out)[m] = (int)starts[n];
        } else if (mask[i]) {
            u64 p = (u64)pos[i];
            if (large) ((i64*)out)[p] = starts[i]; else ((int*)out)[p] = (int)starts[i];
        }
    }
}

// The kept rows' characters to their output starts: one warp per row.
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) compact_chars(
    const u8* offsets, int large, const u8* chars, u64 n, const u8* mask, const i64* starts,
    u8* out)
{
    u64 warp = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    u64 warps = ((u64)gridDim.x * blockDim.x) >> 5;
    int lane = threadIdx.x & 31;
    for (u64 i = warp; i < n; i += warps) {
        if (!mask[i]) continue;
        i64 a = large ? ((const i64*)offsets)[i] : ((const int*)offsets)[i];
        i64 b = large ? ((const i64*)offsets)[i + 1] : ((const int*)offsets)[i + 1];
        u8* dst = out + starts[i];
        for (i64 j = lane; j < b - a; j += 32) dst[j] = chars[a + j];
    }
}

// Batches joined end to end (gathering a filter's small batches): the `n` bits of `in` (every
// bit set when `in` is null: a part without nulls) set at bits `at ..` of `out` (zeroed words).
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) concat_bits(
    const u8* in, u64 n, u64 at, u32* out)
{
    GRID_STRIDE(i, n) {
        if (in == nullptr || bit_at(in, i)) {
            u64 p = at + i;
            atomicOr(&out[p >> 5], 1u << (p & 31));
        }
    }
}

// The n + 1 offsets of `in` (i32, or i64 when mode bit 0 is set) plus `base` (the values or
// children before this part) into `out`; mode bit 1: n entries (dictionary keys), not n + 1.
extern "C" __global__ void __launch_bounds__(FILTER_THREADS) concat_offsets(
    const u8* in, u64 n, int mode, i64 base, u8* out)
{
    int large = mode & 1;
    u64 count = (mode & 2) ? n : n + 1;
    GRID_STRIDE(i, count) {
        if (large) ((i64*)out)[i] = ((const i64*)in)[i] + base;
        else ((int*)out)[i] = (int)(((const int*)in)[i] + base);
    }
}
