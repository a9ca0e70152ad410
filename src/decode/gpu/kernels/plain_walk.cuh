// The walks that locate PLAIN byte arrays' values in a page for the byte-array kernels
// (decode_bytes.cu, which follows this file in its module): thread 0 hopping through a ring in
// shared memory (walk_plain), or the whole block by pointer doubling where values are short
// (walk_plain_doubling); find_plain picks one.

// PLAIN byte arrays are length-prefixed, so where value k starts depends on every value before
// it: one thread (thread 0) must hop from prefix to prefix. It hops in shared memory, through a
// ring of two WALK_WINDOW-byte windows of the values (windows aligned to 4 bytes of the
// values' address, so loads are whole aligned words): while it walks one window, the other
// warps load the next, so the walk never waits for a load except after a value longer than a
// window (then the window it landed in is loaded by every thread first). A prefix that
// straddles two windows is read from global memory. The offsets found in a round (of each
// value's 4-byte prefix, from `vals`) collect in shared memory and the block writes them to
// pos[k] between rounds; the offset just past the last value goes to *end (shared memory, read
// by the block after the call). Every length is checked against `vlen` (< WALK_MAX_BYTES,
// checked by the callers); returns E_VALUES (to every thread) when the values run past it.
#define WALK_WINDOW 4096
#define WALK_WORDS (WALK_WINDOW / 4)
#define RING_HALF (WALK_WORDS + 1)   // a window's words and a pad word
#define WALK_MAX_BYTES 0x7ffffff0u   // values longer than this are refused (a page is < 2^31)
struct WalkState {
    u32 at;        // the next prefix's offset; ~0 once every value is found
    u32 err;
    int loaded;    // the window the ring holds for the walker (-1: none)
    int found;     // offsets found in the last round, waiting in `found`
    int found_k;   // the index of the first of them
};

#define DBL_W 1024
#define DBL_LEVELS 8                 // 2^8 = 256: the most values a window holds (4 bytes each)
#define DBL_OUT ((u16)DBL_W)         // the value leaves the window
#define DBL_BAD ((u16)(DBL_W + 1))   // the value runs past vlen
#ifndef DOUBLING_MAX_STRIDE
#define DOUBLING_MAX_STRIDE 32u
#endif
static_assert((1 << DBL_LEVELS) * 4 >= DBL_W, "a window's values must be countable");

// The two walks' shared memory, one buffer for both (each call has it to itself, between its
// first and last barriers), so a kernel holding both walks takes the larger, not the sum:
// walk_plain's ring and offsets found, or walk_plain_doubling's hop tables and window.
#define WALK_PLAIN_WORDS (2 * RING_HALF + WALK_WINDOW / 4)
#define JT_WORDS ((DBL_LEVELS * (DBL_W + 2) + 1) / 2)
#define DOUBLING_WORDS (JT_WORDS + (DBL_W + 4 + 3) / 4)
#define WALK_SMEM_WORDS (WALK_PLAIN_WORDS > DOUBLING_WORDS ? WALK_PLAIN_WORDS : DOUBLING_WORDS)
__shared__ u32 walk_smem[WALK_SMEM_WORDS];

// Threads t0, t0 + nt, ... load window w of the values (x: byte offset from `base`, valid in
// [lo, hi)) into its half of the ring; bytes outside [lo, hi) read as 0.
__device__ static void load_window(const u8* base, u32 lo, u32 hi, int w, u32* ring, int t0,
                                   int nt)
{
    u32* half = ring + (w & 1) * RING_HALF;
    const u32 x_w = (u32)w * WALK_WINDOW;
    for (int i0 = t0; i0 < WALK_WORDS; i0 += 4 * nt) {
        u32 v[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {   // the loads first, then the stores: one round trip
            const int i = i0 + j * nt;
            const u32 x = x_w + 4 * (u32)i;
            v[j] = 0;
            if (i >= WALK_WORDS) continue;
            if (x >= lo && x + 4 <= hi) v[j] = __ldg((const u32*)(base + x));
            else
                for (u32 b = 0; b < 4; b++)
                    if (x + b >= lo && x + b < hi) v[j] |= (u32)base[x + b] << (8 * b);
        }
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (i0 + j * nt < WALK_WORDS) half[i0 + j * nt] = v[j];
    }
}

__device__ static u32 walk_plain(const u8* vals, u32 vlen, int count, u32* pos, u32* end)
{
    // each half of the ring is followed by a pad word (never written after the start): the
    // walk's second load past a half's last word reads its pad, not the other half, which
    // the loaders are writing meanwhile (a shared-memory race, if a harmless one: the value
    // read there is never used)
    u32* const ring = walk_smem;                       // 2 * RING_HALF words
    u32* const found = walk_smem + 2 * RING_HALF;      // WALK_WINDOW / 4: a round finds at
                                                       // most one value per 4 bytes
    __shared__ WalkState st;
    const int t = threadIdx.x;
    // loaders: the warps after the walker's, so the walk is never interleaved with their loads
    const int first_loader = blockDim.x >= 64 ? 32 : 1;
    const int loaders = (int)blockDim.x - first_loader;
    const u32 mis = (u32)((u64)vals & 3);
    const u8* base = vals - mis;
    const u32 lo = mis, hi = mis + vlen;
    const int last = (int)((hi + WALK_WINDOW - 1) / WALK_WINDOW) - 1;
    // the walker's own state, in thread 0's registers; the block sees it through `st`, which
    // thread 0 writes only between a round's second barrier and the next round's first
    u32 at = 0, e = 0;
    int k = 0;
    if (t == 0) {
        *end = 0;
        st.at = count > 0 ? 0 : ~0u;
        st.err = 0;
        ring[WALK_WORDS] = 0;
        ring[RING_HALF + WALK_WORDS] = 0;
        st.loaded = -1;
        st.found = 0;
        st.found_k = 0;
    }
    while (true) {
        __syncthreads();
        const u32 at0 = st.at;
        const int held = st.loaded;
        if (st.err || at0 == ~0u) break;
        const int w = (int)((at0 + mis) / WALK_WINDOW);
        int now_held;
        if (w != held) {
            // the walker's window is not in the ring (the first, or after a long value): load it
            load_window(base, lo, hi, w, ring, t, (int)blockDim.x);
            if (t == 0) st.found = 0;
            now_held = w;
        } else {
            const int next = w + 1;
            if (t == 0) {
                const u32 w_end = (u32)(w + 1) * WALK_WINDOW;   // in x
                const u32 lim = w_end < hi ? w_end : hi;       // prefixes wholly before it are fast
                u32 x = at + mis;
                u32* f = found;
                const int k0 = k;
                while (true) {
                    // the hot loop: no branch but its condition. The ring is indexed by x itself
                    // (window w sits in half w & 1), a half's pad word takes the second load
                    // when x is its last word's start (the funnel shift then ignores it), and a
                    // length is clamped to hi so that x + 4 + len cannot wrap (hi < 2^31 - 8): a
                    // bad length ends the loop with x > hi
                    while (k < count && x + 4 <= lim) {
                        const u32 wi = x >> 2;
                        const u32* q = ring + (wi & (WALK_WORDS - 1)) + ((wi / WALK_WORDS) & 1) * RING_HALF;
                        const u32 len = __funnelshift_r(q[0], q[1], 8 * (x & 3));
                        *f++ = x - mis;
                        k++;
                        x += 4 + min(len, hi);
                    }
                    if (x > hi) { e = E_VALUES; break; }
                    if (k >= count) break;
                    if (x >= w_end) break;   // past this window: the next round
                    if (x + 4 > hi) { e = E_VALUES; break; }
                    // the prefix straddles into the window being loaded: from global memory
                    const u8* q = vals + (x - mis);
                    const u32 len = (u32)q[0] | ((u32)q[1] << 8) | ((u32)q[2] << 16) | ((u32)q[3] << 24);
                    if (len > hi - x - 4) { e = E_VALUES; break; }
                    *f++ = x - mis;
                    k++;
                    x += 4 + len;
                }
                at = x - mis;
                st.found = (int)(f - found);
                st.found_k = k0;
            } else if (t >= first_loader && next <= last) {
                load_window(base, lo, hi, next, ring, t - first_loader, loaders);
            }
            now_held = next;
        }
        __syncthreads();
        const int n_found = st.found, k_found = st.found_k;
        for (int i = t; i < n_found; i += blockDim.x) pos[k_found + i] = found[i];
        if (t == 0) {
            st.at = k < count ? at : ~0u;
            st.err = e;
            st.loaded = now_held;
            if (k == count) *end = at;
        }
    }
    const u32 err = st.err;
    __syncthreads();
    return err;
}

// PLAIN byte arrays of short values, located by the whole block instead of one thread: the
// values from the walk's position `at` are staged a window of DBL_W bytes at a time, and for
// every byte r of the window the offset after a value starting there is found at once
// (nxt[r]: r + 4 + its length, or a terminal: the value leaves the window, or runs past
// `vlen`). The chain from r = 0 (a value's start) is then followed by pointer doubling:
// jt[l][r] is 2^l hops from r (terminals map to themselves), so value i of the window lies at
// jt[] composed by the bits of i, each found by its own thread in DBL_LEVELS lookups, and the
// count of the window's values by one thread the same way. The next window starts at the value
// after the window's last. A window costs DBL_LEVELS + 3 barriers whatever its values, so the
// callers take it for pages whose average value (with its prefix) is at most
// DOUBLING_MAX_STRIDE bytes, where it holds enough values; longer values keep walk_plain.
// Same contract as walk_plain: pos[k] = value k's prefix offset, *end = the offset after the
// last of `count` values, E_VALUES (to every thread) when a value runs past `vlen`.

__device__ static u32 walk_plain_doubling(const u8* vals, u32 vlen, int count, u32* pos,
                                          u32* end)
{
    u16 (*const jt)[DBL_W + 2] = (u16 (*)[DBL_W + 2])walk_smem;   // DBL_LEVELS rows
    u8* const buf = (u8*)(walk_smem + JT_WORDS);                  // DBL_W + 4 bytes
    __shared__ u32 s_at, s_err, s_n, s_last;
    __shared__ int s_k;
    const int t = threadIdx.x, nt = (int)blockDim.x;
    if (t == 0) {
        s_at = 0;
        s_k = 0;
        s_err = 0;
        *end = 0;
    }
    __syncthreads();
    while (true) {
        const u32 at = s_at;
        const int k = s_k;
        if (s_err || k >= count) break;   // the same for every thread: read after a barrier
        for (int i = t; i < DBL_W + 4; i += nt) {
            const u64 x = (u64)at + (u64)i;
            buf[i] = x < vlen ? vals[x] : 0;
        }
        __syncthreads();
        for (int r = t; r < DBL_W + 2; r += nt) {
            u16 v = (u16)r;   // the terminals map to themselves
            if (r < DBL_W) {
                const u64 x = (u64)at + (u64)r;
                if (x + 4 > vlen) {
                    v = DBL_BAD;
                } else {
                    const u32 len = (u32)buf[r] | ((u32)buf[r + 1] << 8) |
                                    ((u32)buf[r + 2] << 16) | ((u32)buf[r + 3] << 24);
                    const u64 nx = x + 4 + (u64)len;
                    v = nx > vlen ? DBL_BAD : nx - at < DBL_W ? (u16)(nx - at) : DBL_OUT;
                }
            }
            jt[0][r] = v;
        }
        __syncthreads();
        for (int l = 1; l < DBL_LEVELS; l++) {
            for (int r = t; r < DBL_W + 2; r += nt) jt[l][r] = jt[l - 1][jt[l - 1][r]];
            __syncthreads();
        }
        if (t == 0) {   // the window's values: the hops from 0 that stay inside it
            u32 p = 0, c = 0;
            for (int l = DBL_LEVELS - 1; l >= 0; l--) {
                const u16 q = jt[l][p];
                if (q < DBL_W) {
                    p = q;
                    c += 1u << l;
                }
            }
            s_n = c + 1;
            s_last = p;
        }
        __syncthreads();
        const int take = min((int)s_n, count - k);
        for (int i = t; i < take; i += nt) {
            u32 p = 0;
            for (int l = 0; l < DBL_LEVELS; l++)
                if ((i >> l) & 1) p = jt[l][p];
            pos[k + i] = at + p;
        }
        if (t == 0) {
            u32 p = s_last;
            if (take < (int)s_n) {   // `count` values end inside the window
                p = 0;
                for (int l = 0; l < DBL_LEVELS; l++)
                    if (((take - 1) >> l) & 1) p = jt[l][p];
            }
            if (jt[0][p] == DBL_BAD) {
                s_err = E_VALUES;
            } else {
                const u32 len = (u32)buf[p] | ((u32)buf[p + 1] << 8) | ((u32)buf[p + 2] << 16) |
                                ((u32)buf[p + 3] << 24);
                const u32 next = at + p + 4 + len;   // <= vlen: checked in nxt
                s_at = next;
                s_k = k + take;
                if (k + take == count) *end = next;
            }
        }
        __syncthreads();
    }
    const u32 err = s_err;
    __syncthreads();
    return err;
}

// The block's walk over `count` PLAIN values: by pointer doubling where they are short
// (walk_plain_doubling), by thread 0 hopping otherwise (walk_plain).
__device__ static u32 find_plain(const u8* vals, u32 vlen, int count, u32* pos, u32* end)
{
    if (count > 0 && (u64)vlen <= (u64)DOUBLING_MAX_STRIDE * (u64)count)
        return walk_plain_doubling(vals, vlen, count, pos, end);
    return walk_plain(vals, vlen, count, pos, end);
}
