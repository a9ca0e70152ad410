// BYTE_ARRAY flat columns on the device (Utf8 / Binary, 32- or 64-bit offsets): sizes first,
// one allocation, then the characters written in place. The device twin of the byte-array
// part of src/decode/reference.rs.
//
//   dict_entries:  one block per dictionary page walks its PLAIN entries → (start, len) pairs.
//   bytes_sizes:   one block per data page: levels → validity; each valid row's source
//                  (start, len) found (PLAIN: walking the length prefixes; dictionary: the
//                  decoded index's entry; DELTA_LENGTH_BYTE_ARRAY: a sum of the decoded
//                  lengths); lengths[row] written (0 for nulls) for the rows of the page's
//                  window [skip, skip + take), from row_start on.
//   dba_values, dba_chain, dba_fill: DELTA_BYTE_ARRAY pages only: their values put together
//                  in a scratch (its size from bytes_sizes), segments of a page in parallel,
//                  each valid row's source pointed there.
//   (the host, or a scan kernel, turns lengths into offsets)
//   bytes_chars:   one block per data page: every row's bytes copied to chars + offsets[row].
// Kept dictionaries (a column with dict_base): bytes_sizes writes each row's key (its entry's
// index in the column's dictionary tables, put end to end from dict_base) instead of its
// length; dict_lengths and dict_chars turn those tables into the dictionary's values.
// Every length is checked against the page; errors are bits in errors[page].

struct BytesColumn {        // 48 bytes; mirrored by BytesColumn in src/decode/gpu/kernels.rs
    u64 lengths;            // i64 per row of the output column (one batch); a kept
                            // dictionary's: its keys, key_width bytes each
    u64 out_valid;          // validity words, 0 when required
    u64 null_count;         // u64 counter
    u64 only_delta;         // 1: FIXED_LEN_BYTE_ARRAY values, which only DELTA_BYTE_ARRAY pages
                            // hold as the sizes stage reads them
    u64 dict_base;          // a kept dictionary: its entry tables (16 bytes an entry, the
                            // chunks' one after another), every page dictionary-encoded;
                            // 0 otherwise
    u64 key_width;          // a kept dictionary's bytes per key: 1, 2, 4 or 8 (the keys are
                            // below 2^31: zero-extended or narrowed without loss)
};
static_assert(sizeof(BytesColumn) == 48, "BytesColumn must match its Rust mirror");

// One block per dictionary page: entries[k] = (device address, length) of entry k.
extern "C" __global__ void dict_entries(
    const u64* dict_data, const u64* dict_len_bytes, const int* dict_count,
    u64* const* entries_out, int num_dicts, u32* errors)
{
    const int d = blockIdx.x;
    if (d >= num_dicts) return;
    const u8* p = (const u8*)dict_data[d];
    const u64 len = dict_len_bytes[d];
    const int count = dict_count[d] > 0 ? dict_count[d] : 0;
    u64* out = entries_out[d];
    if (len >= WALK_MAX_BYTES) {   // offsets are kept in 32 bits (pages are smaller)
        if (threadIdx.x == 0) errors[d] |= E_VALUES;
        return;
    }
    // the walk's offsets go to the first half of each entry, then become (address, length)
    u32* pos = (u32*)out;
    __shared__ u32 end;
    const u32 e = find_plain(p, (u32)len, count, pos, &end);
    if (e) {
        if (threadIdx.x == 0) errors[d] |= e;
        return;
    }
    // entry k's offset sits in the u32 at index k, inside entry k / 4's slots: read them all
    // before any entry is rewritten, from the back so no offset is overwritten unread
    for (int base = (count - 1) / blockDim.x * blockDim.x; base >= 0; base -= blockDim.x) {
        const int k = base + threadIdx.x;
        u64 at = 0, n = 0;
        if (k < count) {
            at = pos[k];
            n = (u64)p[at] | ((u64)p[at + 1] << 8) | ((u64)p[at + 2] << 16) | ((u64)p[at + 3] << 24);
        }
        __syncthreads();
        if (k < count) {
            out[2 * k] = (u64)(p + at + 4);
            out[2 * k + 1] = n;
        }
        __syncthreads();
    }
}

// Calls f(i, k) for every valid row i of a page of n rows (src[2 * i] != 0 marks it), k being
// the index of its value among the page's values: the compaction of the marks, a tile of
// SIZES_THREADS rows at a time (ballots, then the warps' counts); k = i when every row is valid.
// Every thread of the block must call it.
#define SIZES_THREADS 128
template <typename F>
__device__ static void for_each_valid(int n, bool dense, const u64* src, int* warp_counts, F f)
{
    int carry = 0;
    for (int tile = 0; tile < n; tile += SIZES_THREADS) {
        const int i = tile + threadIdx.x;
        const int v = i < n && src[2 * i] != 0;
        int k, tile_total = 0;
        if (dense) k = i;
        else {
            const unsigned ballot = __ballot_sync(0xffffffffu, v);
            const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
            if (lane == 0) warp_counts[w] = __popc(ballot);
            __syncthreads();
            int base = 0;
            for (int x = 0; x < SIZES_THREADS / 32; x++) {
                if (x < w) base += warp_counts[x];
                tile_total += warp_counts[x];
            }
            __syncthreads();
            k = carry + base + __popc(ballot & ((1u << lane) - 1u));
        }
        if (v) f(i, k);
        carry += tile_total;
    }
}

// DELTA_LENGTH_BYTE_ARRAY (a DELTA_BINARY_PACKED stream of the lengths, then the bytes end to
// end) and DELTA_BYTE_ARRAY (a stream of prefix lengths, then the suffixes as
// DELTA_LENGTH_BYTE_ARRAY), the first `cnt` values of a page of n rows whose valid rows are
// marked in src (src[2i] != 0). The lengths go to idxs, then become each value's start in the
// bytes (an in-place exclusive sum; each length non-negative, the bytes inside the page); the
// prefix lengths (DELTA_BYTE_ARRAY) are read into pre, each checked against the value before it
// (the first value's is 0), and pre then gets each value's offset among the page's values put
// together (an exclusive sum of prefix + suffix lengths: a value's prefix length is the
// difference of its offsets less that of its suffix starts). DELTA_LENGTH_BYTE_ARRAY: every
// valid row gets its source (address, length) in src. DELTA_BYTE_ARRAY: every valid row gets
// (its value's index + 1, its full length) — the values are put together by dba_values — and
// info (4 u64 for the page) gets the bytes of all its values, the suffixes' address, their
// bytes and cnt. Returns the error bits, the same for every thread; every thread of the block
// must call it.
__device__ static u32 delta_lengths(const u8* vals, u32 vlen, int cnt, bool prefixed, u32* idxs,
                                    u32* pre, u64* src, int n, u64* info, Mini* minis,
                                    DeltaState& delta, u64* warp_sums, u64* end, int* warp_counts)
{
    const u8* q = vals;
    u64 qlen = vlen;
    u64 prefix_total = 0;
    if (prefixed) {
        const u32 e = delta_block<u32>(q, qlen, 32, cnt, pre, minis, delta, warp_sums, end);
        if (e) return e;
        prefix_total = delta.total;
        q += *end;
        qlen -= *end;
        __syncthreads();
    }
    u32 e = delta_block<u32>(q, qlen, 32, cnt, idxs, minis, delta, warp_sums, end);
    if (e) return e;
    if (prefixed && delta.total != prefix_total) return E_DELTA;   // as many suffixes as prefixes
    const u8* bytes = q + *end;
    const u64 blen = qlen - *end;
    __syncthreads();
    // lengths → starts; the prefixes checked, the full lengths summed
    __shared__ u64 last_full;   // the full length of the tile's last value, for the next tile
    u64 carry = 0, full = 0;
    bool bad = false, bad_prefix = false;
    if (threadIdx.x == 0) last_full = 0;
    __syncthreads();
    for (int k0 = 0; k0 < cnt; k0 += blockDim.x) {
        const int k = k0 + threadIdx.x;
        u64 v = 0, p = 0;
        if (k < cnt) {
            v = idxs[k];
            bad |= (v >> 31) != 0;
            if (prefixed) {
                p = pre[k];
                bad_prefix |= (p >> 31) != 0;
            }
        }
        // the value before this one: its full length (prefix + suffix); idxs[k - 1] is still a
        // length inside the tile, the tile before's last is in last_full
        u64 before = 0;
        if (prefixed && k < cnt && k > 0)
            before = threadIdx.x == 0 ? last_full : (u64)pre[k - 1] + (u64)idxs[k - 1];
        if (prefixed && k < cnt) bad_prefix |= p > before;
        u64 tile, tile_full;
        const u64 incl = block_inclusive_sum(v, warp_sums, &tile);
        const u64 incl_full = block_inclusive_sum(v + p, warp_sums, &tile_full);
        // (the sums' barriers: every thread has read idxs[k - 1], pre[k - 1] and last_full)
        if (k < cnt) idxs[k] = (u32)(carry + incl - v);
        if (prefixed && k < cnt) pre[k] = (u32)(full + incl_full - (v + p));
        if (threadIdx.x == blockDim.x - 1) last_full = v + p;
        carry += tile;
        full += tile_full;
        __syncthreads();
    }
    __shared__ int flags;
    if (threadIdx.x == 0) flags = 0;
    __syncthreads();
    if (bad) atomicOr(&flags, 1);
    if (bad_prefix) atomicOr(&flags, 2);
    __syncthreads();
    if (flags & 1 || carry > blen) return E_VALUES;
    if (flags & 2) return E_PREFIX;
    const u32 total = (u32)carry;
    for_each_valid(n, cnt == n, src, warp_counts, [&](int i, int k) {
        const u64 at = idxs[k];
        const u64 next = k + 1 < cnt ? idxs[k + 1] : total;
        if (prefixed) {
            src[2 * i] = (u64)k + 1;
            src[2 * i + 1] = (k + 1 < cnt ? (u64)pre[k + 1] : full) - pre[k];
        } else {
            src[2 * i] = (u64)(bytes + at);
            src[2 * i + 1] = next - at;
        }
    });
    if (prefixed && threadIdx.x == 0) {
        info[0] = full;
        info[1] = (u64)bytes;
        info[2] = total;
        info[3] = (u64)cnt;
    }
    return 0;
}

// Per data page (one block of SIZES_THREADS): validity, and for every row its source
// (address, length) in src_scratch (2 u64 per row, indexed from scratch_base[page]) and its
// length in lengths[row]. Levels and dictionary indices are decoded block-parallel; PLAIN
// values are found by the block's walk (walk_plain).
extern "C" __global__ void __launch_bounds__(SIZES_THREADS) bytes_sizes(
    const PageJob* pages, const BytesColumn* cols, u32* idx_scratch, u32* aux_scratch,
    u64* src_scratch, const u64* scratch_base, u64* page_info, u32* errors)
{
    const PageJob pj = pages[blockIdx.x];
    const BytesColumn cj = cols[pj.column];
    const u8* data = (const u8*)pj.data;
    u32* idxs = idx_scratch + scratch_base[blockIdx.x];
    u64* src = src_scratch + 2 * scratch_base[blockIdx.x];
    i64* lengths = (i64*)cj.lengths;
    u32* valid_words = (u32*)cj.out_valid;
    const int n = pj.num_values;
    __shared__ u32 err;
    __shared__ u64 lv_at_s, lv_len_s, val_at_s;
    __shared__ int present;
    __shared__ unsigned long long nulls_s;
    __shared__ int warp_counts[SIZES_THREADS / 32];
    __shared__ Run runs[RUNS];
    __shared__ u32 rle_state[5];
    __shared__ Mini minis[MINIS];
    __shared__ DeltaState delta;
    __shared__ u64 warp_sums[32];
    __shared__ u64 delta_end;
    if (threadIdx.x == 0) {
        u64 lv_at, lv_len, val_at;
        const u32 e = page_levels(pj, data, &lv_at, &lv_len, &val_at);
        err = e;
        lv_at_s = lv_at;
        lv_len_s = lv_len;
        val_at_s = val_at;
        present = pj.max_def > 0 ? 0 : n;
        nulls_s = 0;
    }
    __syncthreads();
    if (err) {
        if (threadIdx.x == 0) errors[blockIdx.x] |= err;
        return;
    }
    // validity marks: src[2i] = 1 for valid rows (replaced by the source address below)
    if (pj.max_def > 0) {
        u32 e = rle_hybrid_block(data + lv_at_s, lv_len_s, level_bits(pj.max_def), idxs, n, runs,
                                 rle_state);
        if (e) {
            if (threadIdx.x == 0) errors[blockIdx.x] |= e;
            return;
        }
        int c = 0;
        for (int i = threadIdx.x; i < n; i += SIZES_THREADS) {
            int v = idxs[i] == (u32)pj.max_def;
            src[2 * i] = v;
            src[2 * i + 1] = 0;
            c += v;
        }
        if (c) atomicAdd(&present, c);
    } else {
        for (int i = threadIdx.x; i < n; i += SIZES_THREADS) {
            src[2 * i] = 1;
            src[2 * i + 1] = 0;
        }
    }
    __syncthreads();
    const int cnt = present;
    // a v2 page whose levels count more present values than its header's nulls leave (a
    // level changed): its values would run out, or be read from the wrong place
    if (pj.v2_values >= 0 && cnt > pj.v2_values) {
        if (threadIdx.x == 0) errors[blockIdx.x] |= E_NULLS;
        return;
    }
    const u64 vlen = pj.data_len - val_at_s;
    const u8* vals = data + val_at_s;
    if ((cj.only_delta && pj.encoding != 7) ||
        (cj.dict_base && pj.encoding != 2 && pj.encoding != 8)) {
        if (threadIdx.x == 0) err |= E_ENCODING;
    } else if (pj.encoding == 0) {
        // value k's prefix offset into idxs[k] (free again: the marks are in src), then every
        // valid row gets its value through the same compaction as dictionary indices
        __shared__ u32 end;
        u32 e = vlen >= WALK_MAX_BYTES ? E_VALUES : find_plain(vals, (u32)vlen, cnt, idxs, &end);
        if (e) {
            if (threadIdx.x == 0) err |= e;
        } else {
            // values lie end to end: value k's length is where value k + 1 starts (or where the
            // walk ended), less value k's start and prefix; no load from the values themselves
            const u32 walk_end = end;
            for_each_valid(n, cnt == n, src, warp_counts, [&](int i, int k) {
                const u64 at = idxs[k];
                const u64 next = k + 1 < cnt ? idxs[k + 1] : walk_end;
                src[2 * i] = (u64)(vals + at + 4);
                src[2 * i + 1] = next - at - 4;
            });
        }
    } else if (pj.encoding == 2 || pj.encoding == 8) {
        if (!pj.dict) {
            if (threadIdx.x == 0) err |= E_NO_DICT;
        } else if (cnt > 0) {
            if (vlen < 1) {
                if (threadIdx.x == 0) err |= E_RLE;
            } else {
                int bw = vals[0];
                u32 e = rle_hybrid_block(vals + 1, vlen - 1, bw, idxs, cnt, runs, rle_state);
                if (e) {
                    if (threadIdx.x == 0) err |= e;
                } else {
                    const u64* entries = (const u64*)pj.dict;
                    // a kept dictionary's key: the entry's index among the column's tables
                    const u64 key_base = cj.dict_base ? (pj.dict - cj.dict_base) / 16 : 0;
                    bool bad = false;
                    for_each_valid(n, cnt == n, src, warp_counts, [&](int i, int k) {
                        const u32 ix = idxs[k];
                        if (ix >= (u32)pj.dict_len) bad = true;
                        else {
                            src[2 * i] = entries[2 * ix];
                            src[2 * i + 1] = cj.dict_base ? key_base + ix : entries[2 * ix + 1];
                        }
                    });
                    if (bad) atomicOr(&err, E_DICT_INDEX);
                }
            }
        }
    } else if (pj.encoding == 6 || pj.encoding == 7) {
        u32 e = vlen >= WALK_MAX_BYTES ? E_VALUES : 0u;
        if (!e && cnt > 0)
            e = delta_lengths(vals, (u32)vlen, cnt, pj.encoding == 7, idxs,
                              aux_scratch + scratch_base[blockIdx.x], src, n,
                              page_info + 4 * blockIdx.x, minis, delta, warp_sums, &delta_end,
                              warp_counts);
        if (e && threadIdx.x == 0) err |= e;
    } else {
        if (threadIdx.x == 0) err |= E_ENCODING;
    }
    __syncthreads();
    if (err) {
        if (threadIdx.x == 0) errors[blockIdx.x] |= err;
        return;
    }
    // lengths, and validity: a valid row has a non-zero source address (even an empty
    // string's), a null row a zero one
    unsigned long long nulls = 0;
    const int lo = pj.skip, hi = pj.skip + pj.take;   // the rows written
    for (int i0 = 0; i0 < n; i0 += SIZES_THREADS) {
        const int i = i0 + threadIdx.x;
        bool valid = false;
        const bool in = i >= lo && i < hi && i < n;
        if (in) {
            const u64 row = pj.row_start + (u64)(i - lo);
            if (cj.dict_base) {   // a key (0 when null)
                const u64 key = src[2 * i + 1];
                switch (cj.key_width) {
                    case 1: ((u8*)cj.lengths)[row] = (u8)key; break;
                    case 2: ((unsigned short*)cj.lengths)[row] = (unsigned short)key; break;
                    case 8: ((u64*)cj.lengths)[row] = key; break;
                    default: ((u32*)cj.lengths)[row] = (u32)key; break;
                }
            } else {
                lengths[row] = (i64)src[2 * i + 1];
            }
            valid = pj.max_def == 0 || src[2 * i] != 0;
            if (!valid) nulls++;
        }
        if (valid_words)   // the same for the whole block: every lane gets here
            set_valid_bits(valid_words, pj.row_start, (i64)(i0 + (threadIdx.x & ~31)) - lo,
                           valid);
    }
    if (nulls) atomicAdd(&nulls_s, nulls);
    __syncthreads();
    if (threadIdx.x == 0 && nulls_s) atomicAdd((unsigned long long*)cj.null_count, nulls_s);
}

// DELTA_BYTE_ARRAY values, put together end to end at page_out[page] (a scratch of
// page_info[4 * page] bytes, below 2^32), in three launches, so that a page's values spread over
// many blocks. Value k is the first p[k] bytes of value k - 1, then its suffix; pre[k] (from
// bytes_sizes) is its offset in the scratch, so p[k] = (pre[k+1] - pre[k]) - (start[k+1] -
// start[k]). The values are cut into segments of DBA_SEGMENT, one block each (block b's page and
// segment are blocks[2b] and blocks[2b + 1]: the DELTA_BYTE_ARRAY pages' segments only):
//   dba_values: each value's suffix copied, and its prefix gathered back along its batch of
//     DBA_THREADS values — bytes [p[j], t) from value j's suffix, for the nearest j before k whose
//     prefix is shorter than t (t starting at p[k], then p[j]) — and what is left, bytes [0, t),
//     from the value before the batch where that one has them. Bytes that come from before the
//     segment cannot be had yet: a value's first unres[k] bytes (the least prefix length from
//     the segment's first value to it) are those of the value before the segment. Also points
//     each valid row of the block's rows at its value (its mark is the value's index + 1).
//   dba_chain: a thread per page completes, segment after segment, the last value of each
//     (its unresolved bytes from the last value of the segment before, complete by then).
//   dba_fill: every value's unresolved bytes copied from the value before its segment.
// The sizes kernel checked every prefix against the value before it, so every byte read is one
// of the value it is read from, and written before it is read.
#define DBA_THREADS 128
#ifndef DBA_SEGMENT   // (the emulated tests build it smaller)
#define DBA_SEGMENT 2048
#endif
extern "C" __global__ void __launch_bounds__(DBA_THREADS) dba_values(
    const PageJob* pages, const u32* idx_scratch, const u32* aux_scratch, u32* unres_scratch,
    u64* src_scratch, const u64* scratch_base, const u64* page_info, const u64* page_out,
    const u32* blocks)
{
    const int page = (int)blocks[2 * blockIdx.x], seg = (int)blocks[2 * blockIdx.x + 1];
    const PageJob pj = pages[page];
    if (pj.encoding != 7) return;
    const u64* info = page_info + 4 * page;
    const u64 full_total = info[0];
    const u8* suf = (const u8*)info[1];
    const u32 suf_total = (u32)info[2];
    const int cnt = (int)info[3];
    u8* out = (u8*)page_out[page];
    const u64 base = scratch_base[page];
    const u32* starts = idx_scratch + base;
    const u32* offs = aux_scratch + base;
    u32* unres = unres_scratch + base;
    u64* src = src_scratch + 2 * base;
    const int t = threadIdx.x;
    const long long lo = (long long)seg * DBA_SEGMENT;
    // the sources of the segment's rows: a valid row's mark is its value's index + 1
    const long long rows_hi = lo + DBA_SEGMENT < pj.num_values ? lo + DBA_SEGMENT : pj.num_values;
    for (long long i = lo + t; i < rows_hi; i += DBA_THREADS) {
        const u64 m = src[2 * i];
        if (m) src[2 * i] = (u64)(out + offs[m - 1]);
    }
    const int k_lo = (int)(lo < cnt ? lo : cnt);
    const int k_hi = (int)(lo + DBA_SEGMENT < cnt ? lo + DBA_SEGMENT : cnt);
    __shared__ u32 s_pre[DBA_THREADS];
    __shared__ u32 s_start[DBA_THREADS];
    __shared__ u32 prev_off;     // the offset of the value before the batch
    __shared__ u32 prev_unres;   // its bytes not yet in place (all: the segment's first batch)
    if (t == 0) {
        prev_off = 0;
        prev_unres = 0xffffffffu;
    }
    __syncthreads();
    for (int k0 = k_lo; k0 < k_hi; k0 += DBA_THREADS) {
        const int k = k0 + t;
        u32 p = 0, st = 0, sl = 0, off = 0;
        if (k < k_hi) {
            st = starts[k];
            sl = (k + 1 < cnt ? starts[k + 1] : suf_total) - st;
            off = offs[k];
            p = (u32)((k + 1 < cnt ? (u64)offs[k + 1] : full_total) - off) - sl;
        }
        s_pre[t] = p;
        s_start[t] = st;
        __syncthreads();
        u32 left = 0;
        if (k < k_hi) {
            u8* dst = out + off;
            const u8* from = suf + st;
            for (u32 b = 0; b < sl; b++) dst[p + b] = from[b];
            u32 th = p;
            for (int j = t - 1; th > 0 && j >= 0; j--) {
                const u32 pj2 = s_pre[j];
                if (pj2 < th) {
                    const u8* f = suf + s_start[j] - pj2;
                    for (u32 b = pj2; b < th; b++) dst[b] = f[b];
                    th = pj2;
                }
            }
            left = prev_unres < th ? prev_unres : th;
            const u8* f = out + prev_off;
            for (u32 b = left; b < th; b++) dst[b] = f[b];
            unres[k] = left;
        }
        __syncthreads();   // the batch's values are in place, prev_off and prev_unres read
        const int last = (k_hi - k0 < DBA_THREADS ? k_hi - k0 : DBA_THREADS) - 1;
        if (t == last) {
            prev_off = off;
            prev_unres = left;
        }
        __syncthreads();
    }
}

// A thread per page: the last value of each segment from the third on gets its unresolved
// bytes from the last value of the segment before (complete: the first segment's are, and
// each is completed before the next is read).
extern "C" __global__ void dba_chain(const PageJob* pages, const u32* aux_scratch,
                                     const u32* unres_scratch, const u64* scratch_base,
                                     const u64* page_info, const u64* page_out, int npages)
{
    const int page = blockIdx.x * blockDim.x + threadIdx.x;
    if (page >= npages || pages[page].encoding != 7) return;
    const long long cnt = (long long)page_info[4 * page + 3];
    u8* out = (u8*)page_out[page];
    const u32* offs = aux_scratch + scratch_base[page];
    const u32* unres = unres_scratch + scratch_base[page];
    for (long long s = 2; s * DBA_SEGMENT < cnt; s++) {
        const long long l = s * DBA_SEGMENT - 1, before = l - DBA_SEGMENT;
        const u32 u = unres[l];
        const u8* f = out + offs[before];
        u8* d = out + offs[l];
        for (u32 b = 0; b < u; b++) d[b] = f[b];
    }
}

// One block per segment (from the second on): each value's unresolved bytes copied from the
// value before its segment, complete after dba_chain.
extern "C" __global__ void __launch_bounds__(DBA_THREADS) dba_fill(
    const PageJob* pages, const u32* aux_scratch, const u32* unres_scratch,
    const u64* scratch_base, const u64* page_info, const u64* page_out, const u32* blocks)
{
    const int page = (int)blocks[2 * blockIdx.x], seg = (int)blocks[2 * blockIdx.x + 1];
    if (seg == 0 || pages[page].encoding != 7) return;
    const long long cnt = (long long)page_info[4 * page + 3];
    const long long lo = (long long)seg * DBA_SEGMENT;
    if (lo >= cnt) return;
    const long long hi = lo + DBA_SEGMENT < cnt ? lo + DBA_SEGMENT : cnt;
    u8* out = (u8*)page_out[page];
    const u32* offs = aux_scratch + scratch_base[page];
    const u32* unres = unres_scratch + scratch_base[page];
    const u8* f = out + offs[lo - 1];
    for (long long k = lo + threadIdx.x; k < hi; k += DBA_THREADS) {
        const u32 u = unres[k];
        u8* d = out + offs[k];
        for (u32 b = 0; b < u; b++) d[b] = f[b];
    }
}

// Per data page: every row of its window copied to chars + offsets[row] (offsets are i64 here;
// 32-bit offset columns get theirs from write_offsets). Each warp takes 32 rows; its lanes split
// each row's bytes (coalesced loads and stores), CHARS_BATCH rows at a time: the first 32 bytes
// of each row of a batch are loaded before any is stored, so a warp has that many loads in
// flight instead of one (the stores could alias the loads, so the compiler keeps them in
// order); the bytes past 32 of a longer row follow, row by row.
#define CHARS_BATCH 8
extern "C" __global__ void bytes_chars(
    const PageJob* pages, const u64* src_scratch, const u64* scratch_base,
    const u64* col_offsets, const u64* col_chars)
{
    const PageJob pj = pages[blockIdx.x];
    const u64* src = src_scratch + 2 * scratch_base[blockIdx.x];
    const i64* offsets = (const i64*)col_offsets[pj.column];
    if (!offsets) return;   // a kept dictionary's keys: its values come from dict_chars
    u8* chars = (u8*)col_chars[pj.column];
    const int lane = threadIdx.x & 31;
    const int lo = pj.skip, hi = pj.skip + pj.take;   // the rows written
    for (int i0 = lo + threadIdx.x - lane; i0 < hi; i0 += blockDim.x) {
        const int i = i0 + lane;
        u64 len = 0, from = 0, to = 0;
        if (i < hi) {
            len = src[2 * i + 1];
            from = src[2 * i];
            to = (u64)(chars + offsets[pj.row_start + (u64)(i - lo)]);
        }
        for (int r0 = 0; r0 < 32; r0 += CHARS_BATCH) {
            u64 l[CHARS_BATCH], f[CHARS_BATCH], t[CHARS_BATCH];
            u8 v[CHARS_BATCH];
#pragma unroll
            for (int j = 0; j < CHARS_BATCH; j++) {
                l[j] = __shfl_sync(0xffffffffu, len, r0 + j);
                f[j] = __shfl_sync(0xffffffffu, from, r0 + j);
                t[j] = __shfl_sync(0xffffffffu, to, r0 + j);
                v[j] = (u64)lane < l[j] ? ((const u8*)f[j])[lane] : 0;
            }
#pragma unroll
            for (int j = 0; j < CHARS_BATCH; j++)
                if ((u64)lane < l[j]) ((u8*)t[j])[lane] = v[j];
#pragma unroll
            for (int j = 0; j < CHARS_BATCH; j++)
                for (u64 b = 32 + lane; b < l[j]; b += 32) ((u8*)t[j])[b] = ((const u8*)f[j])[b];
        }
    }
}

// A kept dictionary's values from its entry tables (count entries of (address, length)):
// dict_lengths writes each entry's length (a thread each), the offsets come from the scan
// below, and dict_chars copies each entry's bytes to chars + offsets[k] (a warp each, its
// lanes across the bytes).
extern "C" __global__ void dict_lengths(const u64* entries, u64 count, i64* lengths)
{
    const u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < count) lengths[k] = (i64)entries[2 * k + 1];
}

extern "C" __global__ void dict_chars(const u64* entries, u64 count, const i64* offsets, u8* chars)
{
    const u64 k = ((u64)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (k >= count) return;
    const u8* from = (const u8*)entries[2 * k];
    const u64 len = entries[2 * k + 1];
    u8* to = chars + offsets[k];
    for (u64 b = lane; b < len; b += 32) to[b] = from[b];
}

// Columns of fixed-width values whose bytes the sizes stage found as a string's (decimals
// stored as BYTE_ARRAY; FIXED_LEN_BYTE_ARRAY pages in DELTA_BYTE_ARRAY): one block per data
// page (pages of other columns, whose `values` is 0, return at once); every valid row of its
// window written at its output row: fixed-size bytes copied (a value must be exactly `phys`
// bytes), big-endian decimals sign-extended to `width` little-endian bytes (at most `width`
// bytes; an empty one is 0, as arrow-rs reads it). Null rows stay zero.
struct FixedOut {           // 24 bytes; mirrored by FixedOut in src/decode/gpu/kernels.rs
    u64 values;             // rows * width bytes, zeroed; 0: not such a column
    int width;
    int conversion;         // C_FIXED_BYTES (8) or C_BE_DECIMAL (9)
    int phys;               // FIXED_LEN_BYTE_ARRAY: its length; BYTE_ARRAY: 0
    int pad;
};
static_assert(sizeof(FixedOut) == 24, "FixedOut must match its Rust mirror");

extern "C" __global__ void bytes_fixed(
    const PageJob* pages, const u64* src_scratch, const u64* scratch_base, const FixedOut* outs,
    u32* errors)
{
    const PageJob pj = pages[blockIdx.x];
    const FixedOut o = outs[pj.column];
    if (!o.values) return;
    const u64* src = src_scratch + 2 * scratch_base[blockIdx.x];
    u8* out = (u8*)o.values;
    bool bad = false;
    for (int i = pj.skip + threadIdx.x; i < pj.skip + pj.take; i += blockDim.x) {
        const u8* from = (const u8*)src[2 * i];
        const u64 len = src[2 * i + 1];
        if (!from) continue;   // null
        u8* dst = out + (pj.row_start + (u64)(i - pj.skip)) * (u64)o.width;
        if (o.phys > 0 && len != (u64)o.phys) { bad = true; continue; }
        if (o.conversion == 8) {
            for (u64 b = 0; b < len && b < (u64)o.width; b++) dst[b] = from[b];
        } else {
            if (len > (u64)o.width) { bad = true; continue; }
            if (len == 0) continue;
            const u8 fill = (from[0] & 0x80) ? 0xff : 0;
            for (int b = 0; b < o.width; b++) dst[b] = (u64)b < len ? from[len - 1 - b] : fill;
        }
    }
    if (bad) atomicOr(&errors[blockIdx.x], E_WIDTH);
}

// One thread per row: is the row's string valid UTF-8 (as Rust's str::from_utf8 defines it: no
// overlong forms, no surrogates, nothing above U+10FFFF)? The first bad row is kept in
// *first_bad (initialised to all ones by the host).
extern "C" __global__ void utf8_check(
    const i64* offsets, const u8* chars, u64 rows, unsigned long long* first_bad)
{
    u64 r = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const u8* s = chars + offsets[r];
    i64 n = offsets[r + 1] - offsets[r];
    i64 i = 0;
    while (i < n) {
        u32 c = s[i];
        if (c < 0x80) { i++; continue; }
        int need;
        u32 cp, min;
        if ((c & 0xE0) == 0xC0) { need = 1; cp = c & 0x1F; min = 0x80; }
        else if ((c & 0xF0) == 0xE0) { need = 2; cp = c & 0x0F; min = 0x800; }
        else if ((c & 0xF8) == 0xF0) { need = 3; cp = c & 0x07; min = 0x10000; }
        else { atomicMin(first_bad, (unsigned long long)r); return; }
        if (n - i - 1 < need) { atomicMin(first_bad, (unsigned long long)r); return; }
        for (int k = 1; k <= need; k++) {
            u32 b = s[i + k];
            if ((b & 0xC0) != 0x80) { atomicMin(first_bad, (unsigned long long)r); return; }
            cp = (cp << 6) | (b & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            atomicMin(first_bad, (unsigned long long)r);
            return;
        }
        i += need + 1;
    }
}

// Offsets from lengths on the device, in two launches around a tiny host scan:
//   span_sums:     block b sums the lengths of rows [b * SPAN, (b + 1) * SPAN);
//   (the host scans the block sums into bases, checking the total)
//   write_offsets: block b writes off64[i] = bases[b] + the lengths before i in its span, for
//                  every row i of the span, and off64[rows] (last block); off32 (when not 0)
//                  gets the same values as 32-bit offsets.
#define SCAN_THREADS 256
#define SCAN_PER_THREAD 16
#define SPAN (SCAN_THREADS * SCAN_PER_THREAD)

__device__ static i64 block_exclusive_scan(i64 v, i64* shared, i64* total) {
    shared[threadIdx.x] = v;
    __syncthreads();
    for (int off = 1; off < SCAN_THREADS; off <<= 1) {
        i64 add = threadIdx.x >= off ? shared[threadIdx.x - off] : 0;
        __syncthreads();
        shared[threadIdx.x] += add;
        __syncthreads();
    }
    *total = shared[SCAN_THREADS - 1];
    return shared[threadIdx.x] - v;
}

// The block's span: this thread's SCAN_PER_THREAD rows start at *first; returns the lengths of
// the span's rows before them, and the span's total in *total.
__device__ static i64 span_prefix(const i64* lengths, u64 rows, i64* shared, u64* first,
                                  i64* total) {
    *first = (u64)blockIdx.x * SPAN + (u64)threadIdx.x * SCAN_PER_THREAD;
    i64 mine = 0;
    for (int k = 0; k < SCAN_PER_THREAD; k++)
        if (*first + k < rows) mine += lengths[*first + k];
    return block_exclusive_scan(mine, shared, total);
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS) span_sums(
    const i64* lengths, u64 rows, i64* sums)
{
    __shared__ i64 sh[SCAN_THREADS];
    u64 first;
    i64 total;
    span_prefix(lengths, rows, sh, &first, &total);
    if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS) write_offsets(
    const i64* lengths, u64 rows, const i64* bases, i64* off64, int* off32)
{
    __shared__ i64 sh[SCAN_THREADS];
    u64 first;
    i64 total;
    i64 at = bases[blockIdx.x] + span_prefix(lengths, rows, sh, &first, &total);
    for (int k = 0; k < SCAN_PER_THREAD; k++) {
        u64 i = first + k;
        if (i < rows) {
            off64[i] = at;
            if (off32) off32[i] = (int)at;
            at += lengths[i];
        }
        if (i == rows) {
            off64[i] = at;
            if (off32) off32[i] = (int)at;
        }
    }
}

// One thread per row: the row's 16-byte view (Arrow's Utf8View / BinaryView layout) from its
// offsets (i64 when wide, else i32) into `chars`, which the views address as their one data
// buffer (buffer 0; the host checks that its offsets fit 32 bits): the length, then up to 12
// bytes inline, or the first 4 bytes, the buffer index and the offset. A null row (its bit of
// `validity` clear, when there is one) gets an empty view.
extern "C" __global__ void make_views(
    const u8* offsets, int wide, const u8* chars, const u8* validity, u64 rows, u32* views)
{
    u64 r = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    u32 w[4] = {0, 0, 0, 0};
    bool valid = !validity || ((validity[r >> 3] >> (r & 7)) & 1);
    if (valid) {
        i64 start, end;
        if (wide) {
            start = ((const i64*)offsets)[r];
            end = ((const i64*)offsets)[r + 1];
        } else {
            start = ((const int*)offsets)[r];
            end = ((const int*)offsets)[r + 1];
        }
        u32 len = (u32)(end - start);
        const u8* s = chars + start;
        w[0] = len;
        if (len <= 12) {
            for (u32 i = 0; i < len; i++) w[1 + i / 4] |= (u32)s[i] << (8 * (i % 4));
        } else {
            w[1] = (u32)s[0] | ((u32)s[1] << 8) | ((u32)s[2] << 16) | ((u32)s[3] << 24);
            w[2] = 0;
            w[3] = (u32)start;
        }
    }
    u32* v = views + 4 * r;
    v[0] = w[0];
    v[1] = w[1];
    v[2] = w[2];
    v[3] = w[3];
}
