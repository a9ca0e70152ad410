// SNAPPY page decompression on the device: one warp per page.
//
// Lane 0 parses the element tags; all 32 lanes write each element's bytes. A copy of `len`
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

extern "C" __global__ void snappy_pages(const SnappyJob* jobs, int num_jobs, u32* errors) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x & 31;
    if (warp >= num_jobs) return;
    const SnappyJob j = jobs[warp];
    const u8* in = (const u8*)j.src;
    u8* out = (u8*)j.dst;
    u64 ip = 0, op = 0;
    u32 err = 0;
    // preamble: uncompressed length (varint)
    if (lane == 0) {
        u64 n = 0;
        int shift = 0;
        bool done = false;
        while (ip < j.src_len && shift < 35) {
            u32 b = in[ip++];
            n |= (u64)(b & 0x7f) << shift;
            shift += 7;
            if (!(b & 0x80)) { done = true; break; }
        }
        if (!done) err |= S_TRUNCATED;
        else if (n != j.dst_len) err |= S_SIZE;
    }
    err = __shfl_sync(0xffffffffu, err, 0);
    ip = __shfl_sync(0xffffffffu, ip, 0);
    while (!err && ip < j.src_len) {
        // lane 0 decodes one element: kind (0 literal, 1 copy), length, source
        u64 len = 0, from = 0;
        int literal = 0;
        if (lane == 0) {
            u32 tag = in[ip++];
            u32 t = tag & 3;
            if (t == 0) {
                literal = 1;
                u32 l = tag >> 2;
                if (l < 60) len = l + 1;
                else {
                    u32 nb = l - 59;
                    if (ip + nb > j.src_len) err |= S_TRUNCATED;
                    else {
                        u64 v = 0;
                        for (u32 i = 0; i < nb; i++) v |= (u64)in[ip + i] << (8 * i);
                        ip += nb;
                        len = v + 1;
                    }
                }
                if (!err) {
                    if (len > j.src_len - ip) err |= S_TRUNCATED;
                    else if (len > j.dst_len - op) err |= S_OVERRUN;
                    from = ip;
                }
            } else {
                u64 off = 0;
                if (t == 1) {
                    if (ip + 1 > j.src_len) err |= S_TRUNCATED;
                    else { len = ((tag >> 2) & 7) + 4; off = ((u64)(tag >> 5) << 8) | in[ip]; ip += 1; }
                } else if (t == 2) {
                    if (ip + 2 > j.src_len) err |= S_TRUNCATED;
                    else { len = (tag >> 2) + 1; off = (u64)in[ip] | ((u64)in[ip + 1] << 8); ip += 2; }
                } else {
                    if (ip + 4 > j.src_len) err |= S_TRUNCATED;
                    else {
                        len = (tag >> 2) + 1;
                        off = (u64)in[ip] | ((u64)in[ip + 1] << 8) | ((u64)in[ip + 2] << 16) | ((u64)in[ip + 3] << 24);
                        ip += 4;
                    }
                }
                if (!err) {
                    if (off == 0 || off > op) err |= S_BAD_OFFSET;
                    else if (len > j.dst_len - op) err |= S_OVERRUN;
                    from = off;   // for copies: the distance back
                }
            }
        }
        err = __shfl_sync(0xffffffffu, err, 0);
        if (err) break;
        len = __shfl_sync(0xffffffffu, len, 0);
        from = __shfl_sync(0xffffffffu, from, 0);
        literal = __shfl_sync(0xffffffffu, literal, 0);
        ip = __shfl_sync(0xffffffffu, ip, 0);
        if (literal) {
            for (u64 i = lane; i < len; i += 32) out[op + i] = in[from + i];
            if (lane == 0) ip += len;
            ip = __shfl_sync(0xffffffffu, ip, 0);
        } else {
            u64 base = op - from;
            for (u64 i = lane; i < len; i += 32) out[op + i] = out[base + (i % from)];
        }
        op += len;
        __syncwarp();
    }
    if (!err && op != j.dst_len) err |= S_SIZE;
    if (lane == 0 && err) errors[warp] |= err;
}
