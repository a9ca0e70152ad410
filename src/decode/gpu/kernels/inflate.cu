// GZIP pages on the device (appended to snappy.cu: its types and DecompressJob, a compressed
// stream and the exact output it must fill). One warp per page, INFLATE_WARPS pages a block:
// the page's gzip members (RFC 1952), each a DEFLATE stream (RFC 1951), inflated into exactly
// the page's uncompressed size, as the parquet crate's MultiGzDecoder reads them.
//
// Lane 0 reads the bit stream: member and block headers, code lengths, and the Huffman symbols
// of a block, INFLATE_QUEUE matches at a time. It writes literal bytes as it decodes them and
// queues each match (output position, length, distance), each checked first against the
// output its member has written (the distance) and the page's end (the length). The warp then
// copies the queued matches in order, 32 bytes a step (a match closer than 32 bytes behind
// copies its distance's worth a step); it copies stored blocks and fills each block's lookup
// tables together. After each member the warp computes the member's CRC-32, a segment per
// lane joined by CRC combination, and lane 0 checks it and the length against the trailer.
//
// Anything the kernel does not read to the byte — a header with FHCRC or reserved flags, a code
// set that is over-subscribed or incomplete (but for a single one-bit code, as zlib allows), a
// stream that ends early, inflates past the page or short of it, fails its trailer, or leaves
// bytes that are not another member — sets an error bit and stops the page: the caller then
// sends its chunk to the host's inflater, which reads it as arrow-rs does or names what is
// wrong. Nothing is written outside [dst, dst + dst_len).

#define G_TRUNCATED 0x1u   // the stream ends inside a header, a block or a trailer
#define G_OVERRUN   0x2u   // the data inflates past the page's uncompressed size
#define G_DISTANCE  0x4u   // a match reaches before the start of its member's output
#define G_SIZE      0x8u   // the members inflate to less than the page's size
#define G_CHECK     0x10u  // a member's CRC-32 or length differs from its trailer's
#define G_HEADER    0x20u  // not a gzip member header the kernel reads (magic, method, FHCRC,
                           // reserved flags)
#define G_CODE      0x40u  // a block type, stored length, code set or symbol DEFLATE forbids

#ifndef INFLATE_WARPS
#define INFLATE_WARPS 4              // pages per block, a warp each
#endif
#define INFLATE_THREADS (INFLATE_WARPS * 32)
#ifndef INFLATE_MIN_BLOCKS
#define INFLATE_MIN_BLOCKS 8         // blocks an SM holds at once (registers capped at 64 to let it:
#endif                               // lane 0 waits on memory; more pages at once hide it)
#define INFLATE_QUEUE 256            // matches decoded before the warp copies them
#define LBITS 10                     // literal/length codes looked up at once (longer: by count)
#define DBITS 8                      // distance codes looked up at once

__constant__ u16 G_LBASE[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
__constant__ u8 G_LEXTRA[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
__constant__ u16 G_DBASE[30] = {1,    2,    3,    4,    5,    7,     9,     13,    17,  25,
                                33,   49,   65,   97,   129,  193,   257,   385,   513, 769,
                                1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
__constant__ u8 G_DEXTRA[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
__constant__ u8 G_CL_ORDER[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};

// One warp's tables: per code, the count of codes of each length, the symbols in canonical
// order, each symbol's code, and the lookup table of its short codes ((length << 9) | symbol;
// 0: a longer code, or none).
struct InflateWarp {
    u16 lfast[1 << LBITS];
    u16 dfast[1 << DBITS];
    u16 lcount[16];
    u16 dcount[16];
    u16 lsym[288];
    u16 dsym[32];
    u16 code[320];     // literal/length symbols 0..287, distances 288..319
    u8 lens[320];      // their code lengths
    u64 queue[INFLATE_QUEUE];  // (position << 32) | (length << 16) | distance
    u64 arg[4];        // lane 0 → the warp: what to do next and with what
};

#define CMD_STORED 1   // copy arg[1] bytes from the input at arg[2] to the output at arg[3]
#define CMD_CODES 2    // fill the lookup tables, then decode the block

// The bits of a page, LSB first, read by lane 0. `buf` holds the `cnt` bits from bit `bit` on;
// a refill loads the 64 bits from there at once, two aligned 8-byte words (byte by byte only in
// the words that straddle the page's ends), so a symbol costs one load's latency, not one a
// byte. Bytes past the input read as zeros; `over` says whether any of them was consumed.
struct Bits {
    const u8* src;
    u64 len;
    const u64* words;  // src rounded down to 8 bytes
    u64 lo;            // the input's bytes, counted from `words`: [lo, lo + len)
    u64 bit;           // bits consumed
    u64 buf;
    int cnt;
    __device__ void init(const u8* s, u64 n) {
        src = s;
        len = n;
        words = (const u64*)((u64)s & ~7ull);
        lo = (u64)s & 7;
        bit = 0;
        buf = 0;
        cnt = 0;
    }
    // the 8-byte word k from `words`, bytes outside the input as zeros
    __device__ u64 word(u64 k) const {
        const u64 at = k * 8;
        if (at >= lo && at + 8 <= lo + len) return __ldg(words + k);
        return edge_word(at);
    }
    // a word that straddles an end of the input (or lies past it), byte by byte (out of line:
    // the decoding loop keeps its registers)
    __device__ __noinline__ u64 edge_word(u64 at) const {
        u64 v = 0;
        for (int i = 0; i < 8; i++) {
            const u64 p = at + i;
            if (p >= lo && p < lo + len) v |= (u64)__ldg(src + (p - lo)) << (8 * i);
        }
        return v;
    }
    // at least 48 bits in `buf` (a length and a distance with their extra bits)
    __device__ void refill() {
        if (cnt >= 48) return;
        const u64 a = lo * 8 + bit;
        const u64 k = a >> 6;
        const int sh = (int)(a & 63);
        const u64 w0 = word(k);
        buf = sh ? (w0 >> sh) | (word(k + 1) << (64 - sh)) : w0;
        cnt = 64;
    }
    __device__ u32 take(int n) {  // n <= 32, cnt >= n
#if !defined(__CUDACC__)
        // the emulator (tests/emu) checks what a refill promises
        if (n > cnt) {
            std::fprintf(stderr, "inflate: %d bits taken of %d\n", n, cnt);
            std::abort();
        }
#endif
        const u32 v = (u32)(buf & ((1ull << n) - 1));
        buf = n < 64 ? buf >> n : 0;
        cnt -= n;
        bit += (u64)n;
        return v;
    }
    // whether more bits were consumed than the input holds
    __device__ bool over() const { return bit > len * 8; }
    // to the next byte boundary
    __device__ void align() {
        refill();
        take((int)((8 - (bit & 7)) & 7));
    }
    // the byte after the bits consumed (on a byte boundary)
    __device__ u64 byte_pos() const { return bit >> 3; }
    __device__ void seek(u64 p) {
        bit = p * 8;
        buf = 0;
        cnt = 0;
    }
};

// Counts, canonical order and codes of the code lengths `lens[0..n)` (lane 0). False where the
// set is over-subscribed, or incomplete but for a single one-bit code (or none at all).
__device__ bool build_code(const u8* lens, int n, u16* count, u16* sym, u16* code) {
    for (int l = 0; l < 16; l++) count[l] = 0;
    for (int s = 0; s < n; s++) count[lens[s]]++;
    int left = 1, max = 0;
    for (int l = 1; l < 16; l++) {
        left <<= 1;
        left -= count[l];
        if (left < 0) return false;
        if (count[l]) max = l;
    }
    if (left > 0 && max > 1) return false;
    u16 offs[16], next[16];
    offs[1] = 0;
    next[1] = 0;
    for (int l = 1; l < 15; l++) {
        offs[l + 1] = offs[l] + count[l];
        next[l + 1] = (u16)((next[l] + count[l]) << 1);
    }
    for (int s = 0; s < n; s++) {
        const int l = lens[s];
        if (l) {
            sym[offs[l]++] = (u16)s;
            code[s] = next[l]++;
        }
    }
    return true;
}

// The warp fills `fast` (1 << bits entries) from the codes of `lens[0..n)` no longer than
// `bits`: each code's bits reversed (DEFLATE sends codes from their top bit) and every entry
// that starts with them.
__device__ void fill_fast(u16* fast, int bits, const u8* lens, const u16* code, int n, int lane) {
    for (int i = lane; i < (1 << bits); i += 32) fast[i] = 0;
    __syncwarp();
    for (int s = lane; s < n; s += 32) {
        const int l = lens[s];
        if (l == 0 || l > bits) continue;
        const u32 r = __brev((u32)code[s]) >> (32 - l);
        for (u32 i = r; i < (1u << bits); i += 1u << l) fast[i] = (u16)((l << 9) | s);
    }
    __syncwarp();
}

// The next symbol (lane 0; at least 15 bits in `b`): by the lookup table, else code by code
// from the counts; -1 for a code the set does not have.
__device__ int decode_sym(Bits& b, const u16* fast, int bits, const u16* count, const u16* sym) {
    const u32 e = fast[b.buf & ((1u << bits) - 1)];
    if (e) {
        b.take(e >> 9);
        return (int)(e & 511);
    }
    int code = 0, first = 0, index = 0;
    for (int l = 1; l < 16; l++) {
        code |= (int)((b.buf >> (l - 1)) & 1);
        const int n = count[l];
        if (code - first < n) {
            b.take(l);
            return sym[index + code - first];
        }
        index += n;
        first = (first + n) << 1;
        code <<= 1;
    }
    return -1;
}

// The code set of a dynamic block (lane 0): its code lengths into w.lens (literal/length
// 0..287, distance 288..319), then both codes built. An error bit, or 0.
__device__ u32 read_dynamic(Bits& b, InflateWarp& w) {
    b.refill();
    const int nlen = (int)b.take(5) + 257, ndist = (int)b.take(5) + 1, ncl = (int)b.take(4) + 4;
    if (nlen > 286 || ndist > 30) return G_CODE;
    u8 cl[19];
    for (int i = 0; i < 19; i++) cl[i] = 0;
    for (int i = 0; i < ncl; i++) {
        b.refill();
        cl[G_CL_ORDER[i]] = (u8)b.take(3);
    }
    // the code-length code must be complete (its tables borrow the distance code's)
    u16 clcount[16], clsym[19], clcode[19];
    if (!build_code(cl, 19, clcount, clsym, clcode)) return G_CODE;
    int left = 1;
    for (int l = 1; l < 8; l++) left = (left << 1) - clcount[l];
    if (left != 0) return G_CODE;
    for (int i = 0; i < 320; i++) w.lens[i] = 0;
    const int total = nlen + ndist;
    // the lengths run on from the literal/length code into the distance code
#define AT(i) w.lens[(i) < nlen ? (i) : 288 + (i) - nlen]
    int i = 0;
    while (i < total) {
        b.refill();
        int code = 0, first = 0, index = 0, sym = -1;
        for (int l = 1; l < 8; l++) {
            code |= (int)((b.buf >> (l - 1)) & 1);
            const int n = clcount[l];
            if (code - first < n) {
                b.take(l);
                sym = clsym[index + code - first];
                break;
            }
            index += n;
            first = (first + n) << 1;
            code <<= 1;
        }
        if (sym < 0) return G_CODE;
        if (sym < 16) {
            AT(i) = (u8)sym;
            i++;
            continue;
        }
        u8 len = 0;
        int rep;
        if (sym == 16) {
            if (i == 0) return G_CODE;
            len = AT(i - 1);
            rep = 3 + (int)b.take(2);
        } else if (sym == 17) {
            rep = 3 + (int)b.take(3);
        } else {
            rep = 11 + (int)b.take(7);
        }
        if (i + rep > total) return G_CODE;
        for (; rep > 0; rep--, i++) AT(i) = len;
    }
#undef AT
    if (b.over()) return G_TRUNCATED;
    if (w.lens[256] == 0) return G_CODE;  // no end-of-block code
    if (!build_code(w.lens, 288, w.lcount, w.lsym, w.code)) return G_CODE;
    if (!build_code(w.lens + 288, 32, w.dcount, w.dsym, w.code + 288)) return G_CODE;
    return 0;
}

// The fixed codes (lane 0).
__device__ void fixed_codes(InflateWarp& w) {
    for (int s = 0; s < 288; s++) w.lens[s] = s < 144 ? 8 : s < 256 ? 9 : s < 280 ? 7 : 8;
    for (int s = 288; s < 320; s++) w.lens[s] = 5;
    build_code(w.lens, 288, w.lcount, w.lsym, w.code);
    build_code(w.lens + 288, 32, w.dcount, w.dsym, w.code + 288);
}

// Reads a gzip member header at `hp` (lane 0) and sets `b` after it. An error bit, or 0.
__device__ u32 read_header(Bits& b, u64 hp) {
    const u8* s = b.src;
    const u64 n = b.len;
    if (hp + 10 > n) return G_TRUNCATED;
    if (__ldg(s + hp) != 0x1f || __ldg(s + hp + 1) != 0x8b || __ldg(s + hp + 2) != 8) return G_HEADER;
    const u32 flg = __ldg(s + hp + 3);
    if (flg & 0xe2u) return G_HEADER;  // FHCRC, or reserved flags
    u64 p = hp + 10;
    if (flg & 4u) {  // FEXTRA
        if (p + 2 > n) return G_TRUNCATED;
        p += 2 + ((u64)__ldg(s + p) | ((u64)__ldg(s + p + 1) << 8));
        if (p > n) return G_TRUNCATED;
    }
    for (u32 f = 8; f <= 16; f <<= 1) {  // FNAME, FCOMMENT: zero-terminated
        if (!(flg & f)) continue;
        while (p < n && __ldg(s + p) != 0) p++;
        if (p >= n) return G_TRUNCATED;
        p++;
    }
    b.seek(p);
    return 0;
}

__device__ u32 crc_mul(u32 a, u32 b) {  // a * b modulo the CRC-32 polynomial (bit-reflected)
    u32 m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ 0xedb88320u : b >> 1;
    }
    return p;
}

// The CRC-32 of A then B, from CRC-32(A), CRC-32(B) and B's length: A's shifted by x^(8 len).
__device__ u32 crc_join(u32 a, u32 b, u64 len) {
    u32 p = 1u << 31, sq = 1u << 23;  // x^0, x^8
    while (len) {
        if (len & 1) p = crc_mul(sq, p);
        sq = crc_mul(sq, sq);
        len >>= 1;
    }
    return crc_mul(p, a) ^ b;
}

extern "C" __global__ void __launch_bounds__(INFLATE_THREADS, INFLATE_MIN_BLOCKS) gzip_pages(
    const DecompressJob* jobs, int num_jobs, u32* errors) {
    __shared__ u32 crc_table[256];
    __shared__ InflateWarp warps[INFLATE_WARPS];
    for (u32 i = threadIdx.x; i < 256; i += blockDim.x) {
        u32 c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xedb88320u : c >> 1;
        crc_table[i] = c;
    }
    __syncthreads();
    const int lane = threadIdx.x % 32;
    const int job = (int)(blockIdx.x * INFLATE_WARPS + threadIdx.x / 32);
    if (job >= num_jobs) return;
    InflateWarp& w = warps[threadIdx.x / 32];
    const DecompressJob j = jobs[job];
    u8* dst = (u8*)j.dst;
    Bits b;
    b.init((const u8*)j.src, j.src_len);
    u64 out = 0;       // lane 0's: bytes written
    u32 err = 0;       // every lane's, after each broadcast
    u64 hp = 0;        // lane 0's: the next member's header
    for (;;) {  // members
        u64 ms = out;  // the member's first output byte
        if (lane == 0) err = read_header(b, hp);
        for (;;) {  // blocks
            u64 cmd = 0;
            bool last = false;
            if (lane == 0 && !err) {
                b.refill();
                last = b.take(1) != 0;
                const u32 type = b.take(2);
                if (type == 0) {
                    b.align();
                    b.refill();
                    const u32 len = b.take(16), nlen = b.take(16);
                    const u64 p = b.byte_pos();
                    if (b.over() || p + len > b.len) err = G_TRUNCATED;
                    else if ((len ^ 0xffffu) != nlen) err = G_CODE;
                    else if (out + len > j.dst_len) err = G_OVERRUN;
                    else {
                        cmd = CMD_STORED;
                        w.arg[1] = len;
                        w.arg[2] = p;
                        w.arg[3] = out;
                        b.seek(p + len);
                        out += len;
                    }
                } else if (type == 1) {
                    fixed_codes(w);
                    cmd = CMD_CODES;
                } else if (type == 2) {
                    err = read_dynamic(b, w);
                    cmd = CMD_CODES;
                } else {
                    err = G_CODE;
                }
                w.arg[0] = err ? 0 : cmd | ((u64)last << 8);
            }
            if (lane == 0 && err) w.arg[0] = 0;
            __syncwarp();
            const u64 what = w.arg[0];
            err = __shfl_sync(0xffffffffu, err, 0);
            if (err) break;
            if ((what & 0xff) == CMD_STORED) {
                const u8* s = b.src + w.arg[2];
                u8* d = dst + w.arg[3];
                for (u64 i = lane; i < w.arg[1]; i += 32) d[i] = __ldg(s + i);
                __syncwarp();
            } else {
                fill_fast(w.lfast, LBITS, w.lens, w.code, 288, lane);
                fill_fast(w.dfast, DBITS, w.lens + 288, w.code + 288, 32, lane);
                for (;;) {  // batches of matches
                    u32 n = 0;
                    bool end = false;
                    if (lane == 0) {
                        while (n < INFLATE_QUEUE) {
                            b.refill();
                            const int sym = decode_sym(b, w.lfast, LBITS, w.lcount, w.lsym);
                            if (sym < 256) {
                                if (sym < 0) {
                                    err = G_CODE;
                                    break;
                                }
                                if (out >= j.dst_len) {
                                    err = G_OVERRUN;
                                    break;
                                }
                                dst[out++] = (u8)sym;
                                continue;
                            }
                            if (sym == 256) {
                                end = true;
                                break;
                            }
                            if (sym > 285) {
                                err = G_CODE;
                                break;
                            }
                            const u32 len = G_LBASE[sym - 257] + b.take(G_LEXTRA[sym - 257]);
                            const int ds = decode_sym(b, w.dfast, DBITS, w.dcount, w.dsym);
                            if (ds < 0 || ds > 29) {
                                err = G_CODE;
                                break;
                            }
                            const u32 dist = G_DBASE[ds] + b.take(G_DEXTRA[ds]);
                            if (dist > out - ms) {
                                err = G_DISTANCE;
                                break;
                            }
                            if (out + len > j.dst_len) {
                                err = G_OVERRUN;
                                break;
                            }
                            w.queue[n++] = (out << 32) | ((u64)len << 16) | dist;
                            out += len;
                        }
                        if (!err && b.over()) err = G_TRUNCATED;
                    }
                    __syncwarp();
                    n = __shfl_sync(0xffffffffu, n, 0);
                    end = __shfl_sync(0xffffffffu, (int)end, 0);
                    err = __shfl_sync(0xffffffffu, err, 0);
                    for (u32 q = 0; q < n; q++) {
                        const u64 e = w.queue[q];
                        u8* d = dst + (e >> 32);
                        const u32 len = (u32)(e >> 16) & 0xffffu, dist = (u32)e & 0xffffu;
                        const u8* s = d - dist;
                        if (dist >= len) {
                            for (u32 i = lane; i < len; i += 32) d[i] = s[i];
                        } else {
                            const u32 step = dist < 32 ? dist : 32;
                            for (u32 c = 0; c < len; c += step) {
                                if ((u32)lane < step && c + lane < len) d[c + lane] = s[c + lane];
                                __syncwarp();
                            }
                        }
                        __syncwarp();
                    }
                    if (err || end) break;
                }
                if (err) break;
            }
            if (what & 0x100) break;  // the final block
        }
        if (err) break;
        // the trailer, then the member's CRC-32 over its output
        u64 me = 0;
        u32 want_crc = 0;
        if (lane == 0) {
            b.align();
            b.refill();
            want_crc = b.take(32);
            b.refill();  // (it holds 48 bits at least: not two words of 32)
            const u32 isize = b.take(32);
            if (b.over()) err = G_TRUNCATED;
            else if (isize != (u32)(out - ms)) err = G_CHECK;
            me = out;
            hp = b.byte_pos();
        }
        err = __shfl_sync(0xffffffffu, err, 0);
        if (err) break;
        ms = __shfl_sync(0xffffffffu, ms, 0);
        me = __shfl_sync(0xffffffffu, me, 0);
        const u64 seg = (me - ms + 31) / 32;
        const u64 a = ms + seg * lane < me ? ms + seg * lane : me;
        const u64 e = a + seg < me ? a + seg : me;
        u32 c = 0xffffffffu;
        for (u64 p = a; p < e; p++) c = crc_table[(c ^ dst[p]) & 0xff] ^ (c >> 8);
        c = ~c;
        u64 l = e - a;
        for (int s = 1; s < 32; s <<= 1) {
            const u32 oc = __shfl_sync(0xffffffffu, c, (lane + s) & 31);
            const u64 ol = __shfl_sync(0xffffffffu, l, (lane + s) & 31);
            if ((lane & (2 * s - 1)) == 0) {
                c = crc_join(c, oc, ol);
                l += ol;
            }
        }
        u32 more = 0;
        if (lane == 0) {
            if (c != want_crc) err = G_CHECK;
            else more = hp < b.len;
        }
        err = __shfl_sync(0xffffffffu, err, 0);
        more = __shfl_sync(0xffffffffu, more, 0);
        if (err || !more) break;
    }
    if (lane == 0) {
        if (!err && out != j.dst_len) err = G_SIZE;
        errors[job] = err;
    }
}
