// SNAPPY page decompression on the device: one warp per page.
//
// All 32 lanes parse each element tag in lockstep (broadcast loads); they split its bytes. A copy of `len`
// bytes from `off` bytes back may overlap itself; byte i of it equals out[pos - off + i % off],
// which lies before `pos` (written by earlier elements, made visible by __syncwarp), so every
// lane computes its bytes independently. Every length and offset is checked against the
// input, the output and the bytes already written; a problem sets a bit in errors[page].

typedef unsigned char u8;
typedef unsigned int u32;
typedef unsigned long long u64;

#define S_TRUNCATED  0x1u   // the input ends inside an element
#define S_OVERRUN    0x2u   // an element writes past the expected output size
#define S_BAD_OFFSET 0x4u   // a copy reaches before the start of the output (or offset 0)
#define S_SIZE       0x8u   // the stream's own length, or the bytes written, differ from the page's

struct SnappyJob {          // 32 bytes; mirrored by SnappyJob in src/decode/kernels.rs
    u64 src;
    u64 src_len;
    u64 dst;
    u64 dst_len;
};
static_assert(sizeof(SnappyJob) == 32, "SnappyJob must match its Rust mirror");

// Byte i of the input, or 0 past its end (every lane of the warp reads the same address: one
// broadcast load).
__device__ static inline u32 at(const u8* in, u64 len, u64 i) {
    return i < len ? (u32)__ldg(in + i) : 0u;
}

extern "C" __global__ void snappy_pages(const SnappyJob* jobs, int num_jobs, u32* errors) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (warp >= num_jobs) return;
    const SnappyJob j = jobs[warp];
    const u8* in = (const u8*)j.src;
    u8* out = (u8*)j.dst;
    const u64 n_in = j.src_len, n_out = j.dst_len;
    u64 ip = 0, op = 0;
    u32 err = 0;
    // Every lane parses the same element in lockstep (uniform control flow, broadcast loads,
    // no shuffles); the lanes then split the element's bytes.
    {
        u64 n = 0;
        int shift = 0;
        bool done = false;
        while (ip < n_in && shift < 35) {
            u32 b = at(in, n_in, ip++);
            n |= (u64)(b & 0x7f) << shift;
            shift += 7;
            if (!(b & 0x80)) { done = true; break; }
        }
        if (!done) err |= S_TRUNCATED;
        else if (n != n_out) err |= S_SIZE;
    }
    while (!err && ip < n_in) {
        // the tag and the 4 bytes after it, loaded at once
        u32 tag = at(in, n_in, ip), b1 = at(in, n_in, ip + 1), b2 = at(in, n_in, ip + 2),
            b3 = at(in, n_in, ip + 3), b4 = at(in, n_in, ip + 4);
        u64 rest = n_in - ip - 1;   // bytes after the tag
        u32 t = tag & 3;
        u64 len, off = 0;
        if (t == 0) {
            u32 l = tag >> 2;
            u32 nb = l < 60 ? 0 : l - 59;
            if (nb > rest) { err |= S_TRUNCATED; break; }
            if (nb == 0) len = l + 1;
            else {
                u64 v = b1;
                if (nb > 1) v |= (u64)b2 << 8;
                if (nb > 2) v |= (u64)b3 << 16;
                if (nb > 3) v |= (u64)b4 << 24;
                len = v + 1;
            }
            ip += 1 + nb;
            if (len > n_in - ip) { err |= S_TRUNCATED; break; }
            if (len > n_out - op) { err |= S_OVERRUN; break; }
            for (u64 i = lane; i < len; i += 32) out[op + i] = __ldg(in + ip + i);
            ip += len;
        } else {
            u32 nb = t == 1 ? 1 : (t == 2 ? 2 : 4);
            if (nb > rest) { err |= S_TRUNCATED; break; }
            if (t == 1) { len = ((tag >> 2) & 7) + 4; off = ((u64)(tag >> 5) << 8) | b1; }
            else if (t == 2) { len = (tag >> 2) + 1; off = (u64)b1 | ((u64)b2 << 8); }
            else { len = (tag >> 2) + 1; off = (u64)b1 | ((u64)b2 << 8) | ((u64)b3 << 16) | ((u64)b4 << 24); }
            ip += 1 + nb;
            if (off == 0 || off > op) { err |= S_BAD_OFFSET; break; }
            if (len > n_out - op) { err |= S_OVERRUN; break; }
            u64 base = op - off;
            for (u64 i = lane; i < len; i += 32) out[op + i] = out[base + (off >= len ? i : i % off)];
        }
        op += len;
        __syncwarp();
    }
    if (!err && op != n_out) err |= S_SIZE;
    if (lane == 0 && err) errors[warp] |= err;
}
