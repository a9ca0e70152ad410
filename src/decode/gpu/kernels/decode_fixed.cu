// Fixed-width flat columns on the device: definition levels to validity, PLAIN or dictionary
// values, arrow-rs's conversions. The device twin of the fixed-width part of
// src/decode/reference.rs.
//
// One block per data page, all pages of a pass in one launch. The block decodes the page's
// RLE/bit-packed streams (definition levels, dictionary indices) into scratch arrays indexed
// by the page's rows (thread 0 walks the run headers, all threads decode the runs' values);
// then the block scans the rows to give every valid row its value index, and every thread
// converts and writes the values of the page's window (rows [skip, skip + take), at
// row_start on: an output column is one batch, which may gather pages of several row groups or
// take part of a page). Every read is checked against the page's bytes
// and every index against the dictionary; a problem sets a bit in errors[page] and the page
// writes nothing more. Output buffers are zeroed by the host, so null slots stay 0.

// Conversions (mirrored: Conversion in src/decode/gpu_plan.rs, numbered in kernels.rs).
#define C_COPY 0
#define C_TRUNC8 1
#define C_TRUNC16 2
#define C_WIDEN64 3
#define C_DAYS_TO_MILLIS 4
#define C_WIDEN128 5
#define C_WIDEN256 6
#define C_INT96 7
#define C_FIXED_BYTES 8
#define C_BE_DECIMAL 9     // FLBA big-endian two's complement → little-endian, sign-extended
#define C_BOOLEAN 10       // bit-packed (PLAIN) or RLE (encoding 3) booleans → bitmap words

struct ColumnJob {          // 40 bytes; mirrored by ColumnJob in src/decode/gpu/kernels.rs
    u64 out_values;         // rows * out_width bytes, zeroed
    u64 out_valid;          // validity bitmap (u32 words, zeroed), 0 when required
    u64 null_count;         // device address of a u64 counter
    int phys_width;
    int out_width;
    int conversion;
    int physical;           // the stored type: parquet's Type (1 INT32, 2 INT64, 4 FLOAT, ...)
};
static_assert(sizeof(ColumnJob) == 40, "ColumnJob must match its Rust mirror");

__device__ static void convert(int conv, const u8* src, int phys, u8* dst, int outw) {
    switch (conv) {
        case C_COPY: case C_TRUNC8: case C_TRUNC16: case C_FIXED_BYTES:
            for (int i = 0; i < outw; i++) dst[i] = src[i];
            return;
        case C_WIDEN64: case C_WIDEN128: case C_WIDEN256: {
            u8 fill = (src[phys - 1] & 0x80) ? 0xff : 0;
            for (int i = 0; i < outw; i++) dst[i] = i < phys ? src[i] : fill;
            return;
        }
        case C_DAYS_TO_MILLIS: {
            int d = (int)((u32)src[0] | ((u32)src[1] << 8) | ((u32)src[2] << 16) | ((u32)src[3] << 24));
            i64 v = (i64)d * 86400000LL;
            for (int i = 0; i < 8; i++) dst[i] = (u8)((u64)v >> (8 * i));
            return;
        }
        case C_BE_DECIMAL: {
            u8 fill = (src[0] & 0x80) ? 0xff : 0;
            for (int i = 0; i < outw; i++) dst[i] = i < phys ? src[phys - 1 - i] : fill;
            return;
        }
        case C_INT96: {
            u64 nanos = 0;
            for (int i = 0; i < 8; i++) nanos |= (u64)src[i] << (8 * i);
            int day = (int)((u32)src[8] | ((u32)src[9] << 8) | ((u32)src[10] << 16) | ((u32)src[11] << 24));
            // wrapping arithmetic, as arrow-rs
            u64 v = (u64)((i64)day - 2440588LL) * (u64)86400000000000LL + nanos;
            for (int i = 0; i < 8; i++) dst[i] = (u8)(v >> (8 * i));
            return;
        }
    }
}

#define BLOCK 256

extern "C" __global__ void __launch_bounds__(BLOCK) decode_fixed_pages(
    const PageJob* pages,
    const ColumnJob* cols,
    u8* def_scratch,        // one byte per row of the pass (row_start-indexed per column space)
    u32* idx_scratch,       // one u32 per row of the pass
    u64* wide_scratch,      // one u64 per row of the pass when it holds DELTA pages, else unused
    const u64* scratch_base,// per page: base index into the scratch arrays
    u32* errors)            // per page
{
    const PageJob pj = pages[blockIdx.x];
    const ColumnJob cj = cols[pj.column];
    const u8* data = (const u8*)pj.data;
    u8* defs = def_scratch + scratch_base[blockIdx.x];
    u32* idxs = idx_scratch + scratch_base[blockIdx.x];
    __shared__ u32 err;
    __shared__ u64 values_at;
    __shared__ u64 values_len;
    __shared__ u64 lv_at_s, lv_len_s;
    __shared__ int present;
    __shared__ int scan[BLOCK / 32];
    __shared__ Run runs[RUNS];
    __shared__ u32 rle_state[5];
    __shared__ Mini minis[MINIS];
    __shared__ DeltaState delta;
    __shared__ u64 warp_sums[32];
    __shared__ u64 delta_end;
    __shared__ u64 stride;   // BYTE_STREAM_SPLIT: values per stream
    int n = pj.num_values;
    // 1. where the levels and the values are (thread 0)
    if (threadIdx.x == 0) {
        u64 lv_at, lv_len, val_at;
        const u32 e = page_levels(pj, data, &lv_at, &lv_len, &val_at);
        err = e;
        lv_at_s = lv_at;
        lv_len_s = lv_len;
        values_at = val_at;
        values_len = e ? 0 : pj.data_len - val_at;
        present = pj.max_def > 0 ? 0 : n;
    }
    __syncthreads();
    if (err) {
        if (threadIdx.x == 0) errors[blockIdx.x] |= err;
        return;
    }
    // 2. definition levels (block-parallel), narrowed to bytes, valid rows counted
    if (pj.max_def > 0) {
        u32 e = rle_hybrid_block(data + lv_at_s, lv_len_s, level_bits(pj.max_def), idxs, n, runs,
                                 rle_state);
        if (e) {
            if (threadIdx.x == 0) errors[blockIdx.x] |= e;
            return;
        }
        int c = 0;
        for (int i = threadIdx.x; i < n; i += BLOCK) {
            defs[i] = (u8)idxs[i];
            c += idxs[i] == (u32)pj.max_def;
        }
        if (c) atomicAdd(&present, c);
    }
    __syncthreads();
    const int cnt = present;
    // a v2 page whose levels count more present values than its header's nulls leave (a
    // level changed): its values would run out, or be read from the wrong place
    if (pj.v2_values >= 0 && cnt > pj.v2_values) {
        if (threadIdx.x == 0) errors[blockIdx.x] |= E_NULLS;
        return;
    }
    // 3. values: dictionary indices (block-parallel) or checks of the PLAIN / RLE layout
    if (pj.encoding == 2 || pj.encoding == 8) {
        if (!pj.dict) {
            if (threadIdx.x == 0) err |= E_NO_DICT;
        } else if (cnt > 0) {
            if (values_len < 1) {
                if (threadIdx.x == 0) err |= E_RLE;
            } else {
                int bw = data[values_at];
                u32 e = rle_hybrid_block(data + values_at + 1, values_len - 1, bw, idxs, cnt,
                                         runs, rle_state);
                if (e) {
                    if (threadIdx.x == 0) err |= e;
                } else {
                    bool bad = false;
                    for (int i = threadIdx.x; i < cnt; i += BLOCK)
                        bad |= idxs[i] >= (u32)pj.dict_len;
                    if (bad) atomicOr(&err, E_DICT_INDEX);
                }
            }
        }
    } else if (pj.encoding == 0) {
        u64 need = cj.conversion == C_BOOLEAN ? ((u64)cnt + 7) / 8
                                               : (u64)cnt * (u64)cj.phys_width;
        if (threadIdx.x == 0 && need > values_len) err |= E_VALUES;
    } else if (pj.encoding == 3 && cj.conversion == C_BOOLEAN) {
        // RLE booleans: 4-byte length, then a hybrid stream of 1-bit values
        if (values_len < 4) {
            if (threadIdx.x == 0) err |= E_VALUES;
        } else {
            const u8* v = data + values_at;
            u64 l = (u64)v[0] | ((u64)v[1] << 8) | ((u64)v[2] << 16) | ((u64)v[3] << 24);
            if (l > values_len - 4) {
                if (threadIdx.x == 0) err |= E_VALUES;
            } else if (cnt > 0) {
                u32 e = rle_hybrid_block(v + 4, l, 1, idxs, cnt, runs, rle_state);
                if (e && threadIdx.x == 0) err |= e;
            }
        }
    } else if (pj.encoding == 5) {
        // DELTA_BINARY_PACKED (INT32, INT64): every value into the wide scratch
        if (cj.physical != 1 && cj.physical != 2) {
            if (threadIdx.x == 0) err |= E_ENCODING;
        } else if (cnt > 0) {
            u32 e = delta_block<u64>(data + values_at, values_len, cj.physical == 1 ? 32 : 64, cnt,
                                     wide_scratch + scratch_base[blockIdx.x], minis, delta,
                                     warp_sums, &delta_end);
            if (e && threadIdx.x == 0) err |= e;
        }
    } else if (pj.encoding == 9) {
        // BYTE_STREAM_SPLIT (INT32, INT64, FLOAT, DOUBLE, FIXED_LEN_BYTE_ARRAY): byte b of value
        // k at b * stride + k, stride being the values' bytes / the width (as arrow-rs)
        if (threadIdx.x == 0) {
            const bool typed = cj.physical == 1 || cj.physical == 2 || cj.physical == 4 ||
                               cj.physical == 5 || cj.physical == 7;
            if (!typed || cj.phys_width <= 0 || (cj.phys_width > 32 && cj.conversion != C_FIXED_BYTES))
                err |= E_ENCODING;
            else {
                stride = values_len / (u64)cj.phys_width;
                if ((u64)cnt > stride) err |= E_VALUES;
            }
        }
    } else {
        if (threadIdx.x == 0) err |= E_ENCODING;
    }
    __syncthreads();
    if (err) {
        if (threadIdx.x == 0) errors[blockIdx.x] |= err;
        return;
    }
    const u64* wides = wide_scratch + scratch_base[blockIdx.x];
    // every row: valid?, its value index (block-wide exclusive scan, tile by tile)
    int carry = 0;
    u32* valid_words = (u32*)cj.out_valid;
    u8* out = (u8*)cj.out_values;
    const u8* vals = data + values_at;
    int nulls = 0;
    const bool dense = pj.max_def == 0 || cnt == n;
    const int lo = pj.skip, hi = pj.skip + pj.take;   // the rows written
    const u8* dict = (const u8*)pj.dict;
    for (int tile = 0; tile < n; tile += BLOCK) {
        int i = tile + threadIdx.x;
        int v = i < n && (dense || defs[i] == (u8)pj.max_def);
        const bool in = i >= lo && i < hi && i < n;
        int k, tile_total;
        if (dense) {
            k = i;   // no nulls: row i holds value i
            tile_total = 0;
        } else {
            // exclusive index of this row's value: ballots within warps, warp totals across
            unsigned ballot = __ballot_sync(0xffffffffu, v);
            int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
            int before = __popc(ballot & ((1u << lane) - 1u));
            if (lane == 0) scan[w] = __popc(ballot);
            __syncthreads();
            int warp_base = 0;
            tile_total = 0;
            for (int x = 0; x < BLOCK / 32; x++) {
                if (x < w) warp_base += scan[x];
                tile_total += scan[x];
            }
            __syncthreads();
            k = carry + warp_base + before;
        }
        if (in) {
            u64 row = pj.row_start + (u64)(i - lo);
            if (v) {
                if (cj.conversion == C_BOOLEAN) {
                    u32 bit;
                    if (pj.encoding == 0) bit = (vals[k >> 3] >> (k & 7)) & 1;
                    else if (pj.encoding == 3) bit = idxs[k] & 1;
                    else bit = (dict[idxs[k] >> 3] >> (idxs[k] & 7)) & 1;  // PLAIN dictionary
                    if (bit) atomicOr(&((u32*)out)[row >> 5], 1u << (row & 31));
                } else if (pj.encoding == 9) {
                    u8* dst = out + row * cj.out_width;
                    const int w = cj.phys_width;
                    if (cj.conversion == C_FIXED_BYTES) {
                        for (int b = 0; b < w; b++) dst[b] = vals[(u64)b * stride + k];
                    } else {
                        u8 tmp[32];
                        for (int b = 0; b < w; b++) tmp[b] = vals[(u64)b * stride + k];
                        convert(cj.conversion, tmp, w, dst, cj.out_width);
                    }
                } else {
                    const u8* src;
                    if (pj.encoding == 0) src = vals + (u64)k * cj.phys_width;
                    else if (pj.encoding == 5) src = (const u8*)&wides[k];   // little-endian
                    else src = dict + (u64)idxs[k] * cj.phys_width;
                    convert(cj.conversion, src, cj.phys_width, out + row * cj.out_width, cj.out_width);
                }
            } else {
                nulls++;
            }
        }
        if (valid_words)   // the same for the whole block: every lane gets here
            set_valid_bits(valid_words, pj.row_start,
                           (i64)(tile + (threadIdx.x & ~31)) - lo, v && in);
        carry += tile_total;
    }
    if (nulls) atomicAdd((unsigned long long*)cj.null_count, (unsigned long long)nulls);
}

// Decimals within their declared precision (what arrow-rs's validate_decimal_precision asks of
// the host path's arrays): a value of a decoded array whose magnitude passes 10^precision - 1
// (a corrupt page, or a file whose schema contradicts its data) would make an invalid Arrow
// array.
struct DecimalCheck {       // 64 bytes; mirrored by DecimalCheck in src/decode/gpu/kernels.rs
    u64 values;             // device address of the values (little-endian two's complement)
    u64 validity;           // device address of the validity bitmap (LSB first), 0 when none
    u64 len;                // values
    u64 width;              // bytes per value: 4, 8, 16 or 32
    u64 max0;               // 10^precision - 1, little-endian 64-bit limbs
    u64 max1;
    u64 max2;
    u64 max3;
};
static_assert(sizeof(DecimalCheck) == 64, "DecimalCheck must match its Rust mirror");

// `per` blocks per array (block b checks array b / per), a thread per value in turn: bad[a]
// becomes the least index of a valid value of array a past its precision (it starts at ~0).
extern "C" __global__ void decimal_check(const DecimalCheck* arrays, int n, int per, u64* bad)
{
    const int a = (int)(blockIdx.x / (u32)per);
    if (a >= n) return;
    const DecimalCheck c = arrays[a];
    const u64 max[4] = {c.max0, c.max1, c.max2, c.max3};
    const int limbs = c.width <= 8 ? 1 : (int)(c.width / 8);
    const u64 step = (u64)per * blockDim.x;
    for (u64 i = (u64)(blockIdx.x % (u32)per) * blockDim.x + threadIdx.x; i < c.len; i += step) {
        if (c.validity && !((((const u8*)c.validity)[i >> 3] >> (i & 7)) & 1)) continue;
        u64 v[4];
        if (c.width == 4) v[0] = (u64)(long long)((const int*)c.values)[i];
        else
            for (int k = 0; k < limbs; k++) v[k] = ((const u64*)c.values)[i * (u64)limbs + k];
        const u64 ext = (long long)v[limbs - 1] < 0 ? ~0ull : 0ull;
        for (int k = limbs; k < 4; k++) v[k] = ext;
        if (ext) {   // the magnitude: two's complement negated (the least value stays above max)
            u64 carry = 1;
            for (int k = 0; k < 4; k++) {
                v[k] = ~v[k] + carry;
                carry = carry && v[k] == 0;
            }
        }
        bool over = false;
        for (int k = 3; k >= 0; k--)
            if (v[k] != max[k]) { over = v[k] > max[k]; break; }
        if (over) atomicMin((unsigned long long*)&bad[a], (unsigned long long)i);
    }
}
