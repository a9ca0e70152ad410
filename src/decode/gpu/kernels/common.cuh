// Shared by the value-decoding kernels (decode_fixed.cu, decode_bytes.cu); prepended to each
// when it is embedded (src/decode/gpu/kernels.rs).

typedef unsigned char u8;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// Error bits (mirrored in src/decode/gpu/kernels.rs).
#define E_LEVELS      0x1u   // definition levels run past the page
#define E_RLE         0x2u   // an RLE/bit-packed run is cut short or malformed
#define E_DICT_INDEX  0x4u   // a dictionary index out of range
#define E_VALUES      0x8u   // values run past the page
#define E_ENCODING    0x10u  // an encoding this kernel does not decode
#define E_BIT_WIDTH   0x20u  // a bit width over 32
#define E_NO_DICT     0x40u  // dictionary-encoded values without a dictionary

struct PageJob {            // 80 bytes; mirrored by PageJob in src/decode/gpu/kernels.rs
    u64 data;               // device address of the page data (levels + values)
    u64 data_len;
    u64 row_start;          // the output row of the page's row `skip`
    u64 dict;               // its chunk's dictionary (fixed: values; bytes: entry table), 0 if none
    int num_values;         // rows of the page (flat columns)
    int encoding;           // 0 PLAIN, 2 PLAIN_DICTIONARY, 8 RLE_DICTIONARY
    int max_def;            // 0 (required) or 1 (optional)
    int v2;                 // 1: levels at [rep_len, rep_len + def_len) without a length prefix
    int def_len;            // v2
    int rep_len;            // v2
    int column;             // index into the column jobs (one output column of a batch)
    int dict_len;           // dictionary entries
    int skip;               // rows of the page before the ones written
    int take;               // rows written: the page's rows [skip, skip + take)
    int pad[2];
};
static_assert(sizeof(PageJob) == 80, "PageJob must match its Rust mirror");

// Where a data page's definition levels and its values start in `data`: v1 pages of an
// optional column begin with the levels' 4-byte length, then the levels; v2 pages hold
// repetition then definition levels with the lengths the header gives (non-negative: the
// page-header parser checks). lv_len is 0 for a required column. E_LEVELS when the levels run
// past the page, else 0.
__device__ static inline u32 page_levels(const PageJob& pj, const u8* data, u64* lv_at,
                                         u64* lv_len, u64* val_at) {
    *lv_at = 0;
    *lv_len = 0;
    *val_at = 0;
    if (pj.v2) {
        *val_at = (u64)pj.rep_len + (u64)pj.def_len;
        if (pj.max_def > 0) {
            *lv_at = (u64)pj.rep_len;
            *lv_len = (u64)pj.def_len;
        }
        return *val_at > pj.data_len ? E_LEVELS : 0u;
    }
    if (pj.max_def == 0) return 0;
    if (pj.data_len < 4) return E_LEVELS;
    *lv_len = (u64)data[0] | ((u64)data[1] << 8) | ((u64)data[2] << 16) | ((u64)data[3] << 24);
    *lv_at = 4;
    *val_at = 4 + *lv_len;
    return *lv_len > pj.data_len - 4 ? E_LEVELS : 0u;
}

__device__ static bool varint(const u8* p, u64 len, u64& pos, u64& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (pos >= len) return false;
        u32 b = p[pos++];
        v |= (u64)(b & 0x7f) << shift;
        if (!(b & 0x80)) return true;
    }
    return false;
}

// Decodes n values of `bw` bits from the hybrid stream p[0..len) into out[0..n).
__device__ static u32 rle_hybrid(const u8* p, u64 len, int bw, u32* out, int n) {
    if (bw < 0 || bw > 32) return E_BIT_WIDTH;
    u64 pos = 0;
    int got = 0;
    int bytew = (bw + 7) / 8;
    while (got < n) {
        u64 h;
        if (!varint(p, len, pos, h)) return E_RLE;
        if (h & 1) {
            u64 groups = h >> 1;
            u64 bytes = groups * (u64)bw;
            if (groups > (1ull << 40) || bytes > len - pos) return E_RLE;
            const u8* run = p + pos;
            u64 count = groups * 8;
            for (u64 k = 0; k < count && got < n; k++) {
                u64 bit = k * (u64)bw;
                u64 v = 0;
                for (int b = 0; b < bw; b++) {
                    u64 at = bit + b;
                    v |= (u64)((run[at >> 3] >> (at & 7)) & 1) << b;
                }
                out[got++] = (u32)v;
            }
            pos += bytes;
        } else {
            u64 count = h >> 1;
            if (count == 0 || (u64)bytew > len - pos) return E_RLE;
            u32 v = 0;
            for (int i = 0; i < bytew; i++) v |= (u32)p[pos + i] << (8 * i);
            if (bw < 32 && (v >> bw) != 0) return E_RLE;
            pos += bytew;
            for (u64 k = 0; k < count && got < n; k++) out[got++] = v;
        }
    }
    return 0;
}


// Block-parallel twin of rle_hybrid: thread 0 walks the run headers into a shared table (up
// to RUNS runs at a time), then every thread of the block decodes values of those runs. All
// threads of the block must call it (it synchronises); the result is the same for every
// thread. `table` is shared scratch of RUNS entries.
#define RUNS 128
struct Run {
    u32 out_start;   // first value index
    u32 count;       // values (already clipped to n)
    u64 at;          // byte offset of the run's data (bit-packed) in p
    u32 value;       // RLE value
    int packed;      // 1: bit-packed
};

__device__ static u32 rle_hybrid_block(const u8* p, u64 len, int bw, u32* out, int n,
                                       Run* table, u32* shared_state) {
    // shared_state: [0] error, [1] runs in the table, [2] values decoded so far, [3] byte pos lo,
    // [4] byte pos hi
    if (threadIdx.x == 0) {
        shared_state[0] = (bw < 0 || bw > 32) ? E_BIT_WIDTH : 0;
        shared_state[2] = 0;
        shared_state[3] = 0;
        shared_state[4] = 0;
    }
    __syncthreads();
    int bytew = (bw + 7) / 8;
    while (true) {
        if (threadIdx.x == 0) {
            u32 err = shared_state[0];
            int got = (int)shared_state[2];
            u64 pos = (u64)shared_state[3] | ((u64)shared_state[4] << 32);
            int runs = 0;
            while (!err && got < n && runs < RUNS) {
                u64 h;
                if (!varint(p, len, pos, h)) { err |= E_RLE; break; }
                Run r;
                r.out_start = (u32)got;
                if (h & 1) {
                    u64 groups = h >> 1;
                    u64 bytes = groups * (u64)bw;
                    if (groups > (1ull << 40) || bytes > len - pos) { err |= E_RLE; break; }
                    u64 count = groups * 8;
                    if (count > (u64)(n - got)) count = (u64)(n - got);
                    r.count = (u32)count;
                    r.at = pos;
                    r.value = 0;
                    r.packed = 1;
                    pos += bytes;
                } else {
                    u64 count = h >> 1;
                    if (count == 0 || (u64)bytew > len - pos) { err |= E_RLE; break; }
                    u32 v = 0;
                    for (int i = 0; i < bytew; i++) v |= (u32)p[pos + i] << (8 * i);
                    if (bw < 32 && (v >> bw) != 0) { err |= E_RLE; break; }
                    pos += bytew;
                    if (count > (u64)(n - got)) count = (u64)(n - got);
                    r.count = (u32)count;
                    r.at = 0;
                    r.value = v;
                    r.packed = 0;
                }
                table[runs++] = r;
                got += (int)r.count;
            }
            shared_state[0] = err;
            shared_state[1] = (u32)runs;
            shared_state[2] = (u32)got;
            shared_state[3] = (u32)pos;
            shared_state[4] = (u32)(pos >> 32);
        }
        __syncthreads();
        u32 err = shared_state[0];
        int runs = (int)shared_state[1];
        int got = (int)shared_state[2];
        if (!err) {
            for (int r = 0; r < runs; r++) {
                Run run = table[r];
                if (run.packed) {
                    const u8* data = p + run.at;
                    for (u32 k = threadIdx.x; k < run.count; k += blockDim.x) {
                        u64 bit = (u64)k * (u64)bw;
                        u64 v = 0;
                        // up to 5 bytes hold a value of at most 32 bits starting at any bit
                        u64 byte = bit >> 3;
                        int shift = (int)(bit & 7);
                        int need = (shift + bw + 7) / 8;
                        for (int b = 0; b < need; b++) v |= (u64)data[byte + b] << (8 * b);
                        v >>= shift;
                        out[run.out_start + k] = bw == 32 ? (u32)v : (u32)(v & ((1ull << bw) - 1));
                    }
                } else {
                    for (u32 k = threadIdx.x; k < run.count; k += blockDim.x)
                        out[run.out_start + k] = run.value;
                }
            }
        }
        __syncthreads();
        if (err || got >= n || runs == 0) return err;
    }
}

// Validity bits of a warp's 32 consecutive rows, lane j's row being `rel0 + j` rows after
// `base` (rel0 may be negative: the lanes before a page's window pass valid = false): one
// ballot, then lane 0 sets them with at most two atomics (the rows may straddle two words)
// instead of one per row. Every lane of the warp must call it; `valid`: this lane's row exists,
// is written and is valid.
__device__ static inline void set_valid_bits(u32* words, u64 base, i64 rel0, bool valid) {
    unsigned bits = __ballot_sync(0xffffffffu, valid);
    if ((threadIdx.x & 31) == 0 && bits) {
        if (rel0 < 0) {
            bits = rel0 <= -32 ? 0u : bits >> (unsigned)(-rel0);
            rel0 = 0;
        }
        if (!bits) return;
        const u64 row0 = base + (u64)rel0;
        const u64 w = row0 >> 5;
        const unsigned s = (unsigned)(row0 & 31);
        atomicOr(&words[w], bits << s);
        if (s && (bits >> (32 - s))) atomicOr(&words[w + 1], bits >> (32 - s));
    }
}
