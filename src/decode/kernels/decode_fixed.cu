// Fixed-width flat columns on the device: definition levels to validity, PLAIN or dictionary
// values, arrow-rs's conversions. The device twin of the fixed-width part of
// src/decode/reference.rs.
//
// One block per data page, all pages of a pass in one launch. Thread 0 decodes the page's
// RLE/bit-packed streams (definition levels, dictionary indices) into scratch arrays indexed
// by the page's rows; then the block scans the rows to give every valid row its value index,
// and every thread converts and writes values. Every read is checked against the page's bytes
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

struct ColumnJob {          // 48 bytes; mirrored by ColumnJob in src/decode/kernels.rs
    u64 out_values;         // rows * out_width bytes, zeroed
    u64 out_valid;          // validity bitmap (u32 words, zeroed), 0 when required
    u64 dict;               // dictionary values (dict_len * phys_width bytes), 0 when none
    u64 null_count;         // device address of a u64 counter
    int dict_len;
    int phys_width;
    int out_width;
    int conversion;
};
static_assert(sizeof(ColumnJob) == 48, "ColumnJob must match its Rust mirror");

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
    __shared__ int present;
    __shared__ int scan[BLOCK];
    int n = pj.num_values;
    if (threadIdx.x == 0) {
        err = 0;
        u64 lv_at = 0, lv_len = 0, val_at = 0;
        if (pj.max_def > 0) {
            if (pj.v2) {
                lv_at = (u64)pj.rep_len;
                lv_len = (u64)pj.def_len;
                if (lv_at + lv_len > pj.data_len) err |= E_LEVELS;
                val_at = lv_at + lv_len;
            } else {
                if (pj.data_len < 4) err |= E_LEVELS;
                else {
                    lv_len = (u64)data[0] | ((u64)data[1] << 8) | ((u64)data[2] << 16) | ((u64)data[3] << 24);
                    lv_at = 4;
                    if (lv_len > pj.data_len - 4) err |= E_LEVELS;
                    val_at = 4 + lv_len;
                }
            }
        } else {
            val_at = pj.v2 ? (u64)pj.rep_len + (u64)pj.def_len : 0;
            if (val_at > pj.data_len) err |= E_LEVELS;
        }
        int cnt = n;
        if (!err && pj.max_def > 0) {
            // levels decoded as u32 into the index scratch, then narrowed to bytes
            err |= rle_hybrid(data + lv_at, lv_len, 1, idxs, n);
            cnt = 0;
            for (int i = 0; i < n && !err; i++) {
                defs[i] = (u8)idxs[i];
                cnt += idxs[i] == (u32)pj.max_def;
            }
        }
        present = cnt;
        values_at = val_at;
        values_len = err ? 0 : pj.data_len - val_at;
        if (!err) {
            if (pj.encoding == 2 || pj.encoding == 8) {
                if (!cj.dict) err |= E_NO_DICT;
                else if (cnt > 0) {
                    if (values_len < 1) err |= E_RLE;
                    else {
                        int bw = data[val_at];
                        err |= rle_hybrid(data + val_at + 1, values_len - 1, bw, idxs, cnt);
                        for (int i = 0; i < cnt && !err; i++)
                            if (idxs[i] >= (u32)cj.dict_len) err |= E_DICT_INDEX;
                    }
                }
            } else if (pj.encoding == 0) {
                u64 need = cj.conversion == C_BOOLEAN ? ((u64)cnt + 7) / 8
                                                       : (u64)cnt * (u64)cj.phys_width;
                if (need > values_len) err |= E_VALUES;
            } else if (pj.encoding == 3 && cj.conversion == C_BOOLEAN) {
                // RLE booleans: 4-byte length, then a hybrid stream of 1-bit values
                if (values_len < 4) err |= E_VALUES;
                else {
                    const u8* v = data + val_at;
                    u64 l = (u64)v[0] | ((u64)v[1] << 8) | ((u64)v[2] << 16) | ((u64)v[3] << 24);
                    if (l > values_len - 4) err |= E_VALUES;
                    else if (cnt > 0) err |= rle_hybrid(v + 4, l, 1, idxs, cnt);
                }
            } else {
                err |= E_ENCODING;
            }
        }
        if (err) errors[blockIdx.x] |= err;
    }
    __syncthreads();
    if (err) return;
    // every row: valid?, its value index (block-wide exclusive scan, tile by tile)
    int carry = 0;
    u32* valid_words = (u32*)cj.out_valid;
    u8* out = (u8*)cj.out_values;
    const u8* vals = data + values_at;
    int nulls = 0;
    for (int tile = 0; tile < n; tile += BLOCK) {
        int i = tile + threadIdx.x;
        int v = i < n && (pj.max_def == 0 || defs[i] == (u8)pj.max_def);
        scan[threadIdx.x] = v;
        __syncthreads();
        for (int off = 1; off < BLOCK; off <<= 1) {
            int add = threadIdx.x >= off ? scan[threadIdx.x - off] : 0;
            __syncthreads();
            scan[threadIdx.x] += add;
            __syncthreads();
        }
        int k = carry + scan[threadIdx.x] - v;   // exclusive index of this row's value
        int tile_total = scan[BLOCK - 1];
        __syncthreads();
        if (i < n) {
            u64 row = pj.row_start + (u64)i;
            if (v) {
                if (cj.conversion == C_BOOLEAN) {
                    u32 bit;
                    if (pj.encoding == 0) bit = (vals[k >> 3] >> (k & 7)) & 1;
                    else if (pj.encoding == 3) bit = idxs[k] & 1;
                    else bit = (((const u8*)cj.dict)[idxs[k] >> 3] >> (idxs[k] & 7)) & 1;  // PLAIN dictionary
                    if (bit) atomicOr(&((u32*)out)[row >> 5], 1u << (row & 31));
                } else {
                    const u8* src;
                    if (pj.encoding == 0) src = vals + (u64)k * cj.phys_width;
                    else src = (const u8*)cj.dict + (u64)idxs[k] * cj.phys_width;
                    convert(cj.conversion, src, cj.phys_width, out + row * cj.out_width, cj.out_width);
                }
                if (valid_words) atomicOr(&valid_words[row >> 5], 1u << (row & 31));
            } else {
                nulls++;
            }
        }
        carry += tile_total;
    }
    if (nulls) atomicAdd((unsigned long long*)cj.null_count, (unsigned long long)nulls);
    (void)present;
}
