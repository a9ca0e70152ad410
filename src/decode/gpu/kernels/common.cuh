// Shared by the value-decoding kernels (decode_fixed.cu, decode_bytes.cu); prepended to each
// when it is embedded (src/decode/gpu/kernels.rs).

typedef unsigned char u8;
typedef unsigned short u16;
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
#define E_DELTA       0x80u  // a DELTA_BINARY_PACKED header or block is malformed
#define E_PREFIX      0x100u // a DELTA_BYTE_ARRAY prefix longer than the value before it
#define E_WIDTH       0x200u // a value longer than its decimal, or not its fixed size
#define E_NULLS       0x400u // a v2 page's levels count more present values than its header

struct PageJob {            // 80 bytes; mirrored by PageJob in src/decode/gpu/kernels.rs
    u64 data;               // device address of the page data (levels + values)
    u64 data_len;
    u64 row_start;          // the output row of the page's row `skip`
    u64 dict;               // its chunk's dictionary (fixed: values; bytes: entry table), 0 if none
    int num_values;         // rows of the page (flat columns)
    int encoding;           // 0 PLAIN, 2 PLAIN_DICTIONARY, 8 RLE_DICTIONARY
    int max_def;            // maximum definition level: 0 (required), 1 (optional) or a
                            // nested leaf's (up to 255)
    int v2;                 // 1: levels at [rep_len, rep_len + def_len) without a length prefix
    int def_len;            // v2
    int rep_len;            // v2
    int column;             // index into the column jobs (one output column of a batch)
    int dict_len;           // dictionary entries
    int skip;               // rows of the page before the ones written
    int take;               // rows written: the page's rows [skip, skip + take)
    int max_rep;            // 0, or a nested leaf's maximum repetition level (v1 pages hold
                            // repetition levels, length-prefixed, before the definition levels)
    int v2_values;          // a v2 page's values that are not null by its header (num_values -
                            // num_nulls; levels counting more present is an error), else -1
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
    u64 at = 0;
    if (pj.max_rep > 0) {   // a nested leaf's repetition levels come first
        if (pj.data_len < 4) return E_LEVELS;
        u64 rl = (u64)data[0] | ((u64)data[1] << 8) | ((u64)data[2] << 16) | ((u64)data[3] << 24);
        if (rl > pj.data_len - 4) return E_LEVELS;
        at = 4 + rl;
        *val_at = at;
    }
    if (pj.max_def == 0) return 0;
    if (pj.data_len - at < 4) return E_LEVELS;
    const u8* d = data + at;
    *lv_len = (u64)d[0] | ((u64)d[1] << 8) | ((u64)d[2] << 16) | ((u64)d[3] << 24);
    *lv_at = at + 4;
    *val_at = at + 4 + *lv_len;
    return *lv_len > pj.data_len - at - 4 ? E_LEVELS : 0u;
}

// Bits of a level stream whose maximum is `max` (0 for 0).
__device__ static inline int level_bits(int max) {
    int b = 0;
    while (b < 31 && (max >> b) != 0) b++;
    return b;
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

// Inclusive sum of v over the block (blockDim.x a multiple of 32, at most 1024 threads), the
// block's total in *total; `warp_sums` is shared scratch of 32 entries. Every thread of the
// block must call it.
__device__ static u64 block_inclusive_sum(u64 v, u64* warp_sums, u64* total) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int o = 1; o < 32; o <<= 1) {
        const u64 y = __shfl_sync(0xffffffffu, v, lane >= o ? lane - o : lane);
        if (lane >= o) v += y;
    }
    if (lane == 31) warp_sums[w] = v;
    __syncthreads();
    u64 base = 0, tot = 0;
    for (int x = 0; x < nw; x++) {
        if (x < w) base += warp_sums[x];
        tot += warp_sums[x];
    }
    __syncthreads();
    *total = tot;
    return base + v;
}

// DELTA_BINARY_PACKED, block-parallel. The header (block size, miniblocks per block, total
// values, first value) and every block's header (min delta, one bit width per miniblock) are
// walked by thread 0 into a shared table of up to MINIS miniblocks at a time; then every thread
// unpacks deltas of those miniblocks, and one block-wide sum per BLOCK-sized tile turns deltas
// into values (wrapping, as the stored type wraps). `width` is the stored type's bits (32: the
// first value and min deltas must fit 32 bits and bit widths are at most 32, as arrow-rs checks;
// 64). Decodes the first n values into out[0..n) (their low `width` bits are the values); the
// stream must hold at least n. *end (shared memory, the same for every thread after the call)
// gets the offset just past the stream's last block: after every block that holds one of the
// header's values, counting the full size of each miniblock that holds one (arrow-rs's
// get_offset). Returns the error bits (E_DELTA, E_VALUES when the stream holds fewer than n
// values), the same for every thread. Every thread of the block must call it.
#define MINIS 64
struct Mini {
    u64 at;         // byte offset of the miniblock's packed deltas
    u64 min_delta;
    int bw;
    int pad;
};
struct DeltaState {
    u64 pos;        // the walk: the next byte to read
    u64 total;      // values the header gives
    u64 vpm;        // values per miniblock
    u64 mpb;        // miniblocks per block
    u64 next_mini;  // global index of the next miniblock to walk
    u64 block_min;  // the current block's min delta
    u64 widths_at;  // its bit widths
    u64 carry;      // the value before the next delta
    u64 m0;         // the table's first miniblock
    int in_block;   // the next miniblock's index in its block (mpb: a new block starts)
    int count;      // miniblocks in the table
    u32 err;
    int done;       // every miniblock with a delta to decode is walked
};

__device__ static bool zigzag(const u8* p, u64 len, u64& pos, u64& v) {
    u64 u;
    if (!varint(p, len, pos, u)) return false;
    v = (u >> 1) ^ (0 - (u & 1));
    return true;
}

// The value fits the stored type (32 bits: as a signed 32-bit integer).
__device__ static inline bool fits(u64 v, int width) {
    return width == 64 || ((i64)v >= -2147483648LL && (i64)v <= 2147483647LL);
}

// Thread 0: the next miniblock (reading its block's header first when it starts a block): its
// packed deltas' offset and bit width; the walk moves past its full size. False (st.err set) on
// a malformed stream.
__device__ static bool delta_mini(const u8* p, u64 len, int width, DeltaState& st, u64* at,
                                  int* bw) {
    if (st.pos > len) {   // a previous miniblock's padding ran past the stream
        st.err |= E_VALUES;
        return false;
    }
    if (st.in_block == (int)st.mpb) {
        u64 md;
        if (!zigzag(p, len, st.pos, md) || !fits(md, width) || st.mpb > len - st.pos) {
            st.err |= E_DELTA;
            return false;
        }
        st.block_min = md;
        st.widths_at = st.pos;
        st.pos += st.mpb;
        st.in_block = 0;
    }
    *bw = p[st.widths_at + st.in_block];
    if (*bw > width) {
        st.err |= E_DELTA;
        return false;
    }
    *at = st.pos;
    // past len only for a last miniblock's padding; the stream's end is checked by the caller
    st.pos += (u64)*bw * st.vpm / 8;
    st.next_mini++;
    st.in_block++;
    return true;
}

// Thread 0: walks the miniblocks that hold one of the first `deltas` deltas into the table,
// up to MINIS of them; st.done once all are walked.
__device__ static void delta_walk(const u8* p, u64 len, int width, u64 deltas, DeltaState& st,
                                  Mini* table) {
    st.count = 0;
    st.m0 = st.next_mini;
    while (!st.err) {
        const u64 m = st.next_mini;
        if (m * st.vpm >= deltas) {
            st.done = 1;
            return;
        }
        if (st.count == MINIS) return;
        u64 at;
        int bw;
        if (!delta_mini(p, len, width, st, &at, &bw)) return;
        // the bytes of the deltas decoded must be there (a last miniblock's padding need not)
        const u64 left = deltas - m * st.vpm;
        const u64 k = left < st.vpm ? left : st.vpm;
        if (((u64)bw * k + 7) / 8 > len - at) {
            st.err |= E_VALUES;
            return;
        }
        Mini& e = table[st.count++];
        e.at = at;
        e.min_delta = st.block_min;
        e.bw = bw;
    }
}

template <typename T>
__device__ static u32 delta_block(const u8* p, u64 len, int width, int n, T* out, Mini* table,
                                  DeltaState& st, u64* warp_sums, u64* end) {
    if (threadIdx.x == 0) {
        st.err = 0;
        st.pos = 0;
        st.done = 0;
        u64 bs, mpb, total, first;
        if (!varint(p, len, st.pos, bs) || !varint(p, len, st.pos, mpb) ||
            !varint(p, len, st.pos, total) || !zigzag(p, len, st.pos, first)) {
            st.err = E_DELTA;
        } else if (mpb == 0 || bs == 0 || bs % 128 != 0 || bs > (1u << 30) || bs % mpb != 0 ||
                   (bs / mpb) % 32 != 0 || total > 0x7fffffffu || !fits(first, width)) {
            st.err = E_DELTA;
        } else if (total < (u64)n) {
            st.err = E_VALUES;
        } else {
            st.total = total;
            st.vpm = bs / mpb;
            st.mpb = mpb;
            st.next_mini = 0;
            st.in_block = (int)mpb;
            st.carry = first;
            if (n > 0) out[0] = (T)first;
        }
        *end = st.pos;
    }
    __syncthreads();
    const u32 e0 = st.err;
    __syncthreads();   // every thread has read it before the walk below writes st again
    if (e0) return e0;
    const u64 deltas = n > 1 ? (u64)(n - 1) : 0;
    while (true) {
        if (threadIdx.x == 0) delta_walk(p, len, width, deltas, st, table);
        __syncthreads();
        const u32 err = st.err;
        const int count = st.count;
        const int done = st.done;
        const u64 d0 = st.m0 * st.vpm;               // the table's first delta
        u64 d1 = d0 + (u64)count * st.vpm;           // past its last
        if (d1 > deltas) d1 = deltas;
        u64 carry = st.carry;
        const u64 vpm = st.vpm;
        if (err) return err;
        // the deltas [d0, d1) into values [d0 + 1, d1 + 1), a tile of blockDim.x at a time
        for (u64 t0 = d0; t0 < d1; t0 += blockDim.x) {
            const u64 d = t0 + threadIdx.x;
            u64 v = 0;
            if (d < d1) {
                const Mini e = table[(d - d0) / vpm];
                const u64 o = (d - d0) % vpm;
                u64 packed = 0;
                if (e.bw) {
                    const u64 bit = o * (u64)e.bw;
                    const u8* q = p + e.at + (bit >> 3);
                    const int shift = (int)(bit & 7);
                    const int need = (shift + e.bw + 7) / 8;   // at most 9
                    u64 lo = 0;
                    for (int b = 0; b < need && b < 8; b++) lo |= (u64)q[b] << (8 * b);
                    packed = lo >> shift;
                    if (need > 8) packed |= (u64)q[8] << (64 - shift);
                    if (e.bw < 64) packed &= (1ull << e.bw) - 1;
                }
                v = e.min_delta + packed;
            }
            u64 tile_total;
            const u64 incl = block_inclusive_sum(v, warp_sums, &tile_total);
            if (d < d1) out[d + 1] = (T)(carry + incl);
            carry += tile_total;
        }
        __syncthreads();   // every thread has read the table and st
        if (threadIdx.x == 0) st.carry = carry;
        if (done) break;
    }
    if (threadIdx.x == 0) {
        // the miniblocks past the ones decoded, up to the stream's end
        const u64 all_deltas = st.total > 1 ? st.total - 1 : 0;
        while (!st.err && st.next_mini * st.vpm < all_deltas) {
            u64 at;
            int bw;
            delta_mini(p, len, width, st, &at, &bw);
        }
        if (!st.err && st.pos > len) st.err = E_VALUES;
        *end = st.pos;
    }
    __syncthreads();
    return st.err;
}
