// Page headers parsed on the device: the device twin of src/decode/page_header.rs.
//
// One thread per column chunk walks its pages (headers are sequential: each page's position
// depends on the previous header). With `pages == NULL` the kernel only counts each chunk's
// pages into `page_counts`; otherwise `page_counts[c]` is chunk c's capacity, the kernel fills
// `pages[page_start[c] ...]` up to it and writes the count back (the host estimates the
// capacities, and fills again into the counts only when an estimate fell short). Every length
// and offset is checked against the chunk; a problem sets a bit in `errors[c]` and stops that
// chunk's walk, never reading or writing out of bounds. Thrift compact protocol, as in the
// host twin.

typedef unsigned char u8;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// Error bits (mirrored in src/decode/gpu/kernels.rs).
#define ERR_TRUNCATED      0x1u   // a header ends past the chunk
#define ERR_BAD_FIELD      0x2u   // a field of an unexpected type, an unknown type, a bad value
#define ERR_NEGATIVE       0x4u   // a negative size or count
#define ERR_PAST_END       0x8u   // page data runs past the chunk
#define ERR_TOO_DEEP       0x10u  // nesting deeper than MAX_DEPTH
#define ERR_MISSING        0x20u  // a required field is missing
#define ERR_COUNT_MISMATCH 0x40u  // (set by the host) a second fill pass found more pages than the first

#define MAX_DEPTH 16

// Compact-protocol types.
#define T_STOP 0
#define T_TRUE 1
#define T_FALSE 2
#define T_BYTE 3
#define T_I16 4
#define T_I32 5
#define T_I64 6
#define T_DOUBLE 7
#define T_BINARY 8
#define T_LIST 9
#define T_SET 10
#define T_MAP 11
#define T_STRUCT 12

// Page kinds (PageType).
#define KIND_DATA_V1 0
#define KIND_INDEX 1
#define KIND_DICTIONARY 2
#define KIND_DATA_V2 3

// 64 bytes; mirrored by PageInfo in src/decode/gpu/kernels.rs.
struct PageInfo {
    i64 header_offset;       // from the start of the chunk
    i64 data_offset;         // header_offset + header_len
    int kind;
    int uncompressed_size;
    int compressed_size;
    int num_values;
    int encoding;
    int def_level_encoding;  // v1
    int rep_level_encoding;  // v1
    int num_nulls;           // v2
    int num_rows;            // v2
    int def_levels_len;      // v2
    int rep_levels_len;      // v2
    int is_compressed;       // v2 (1 by default)
};
static_assert(sizeof(PageInfo) == 64, "PageInfo must match its Rust mirror");

struct Reader {
    const u8* p;
    u64 pos;
    u64 len;
    u32 err;
};

__device__ static u32 rd_byte(Reader& r) {
    if (r.pos >= r.len) { r.err |= ERR_TRUNCATED; return 0; }
    return r.p[r.pos++];
}

__device__ static u64 rd_varint(Reader& r) {
    u64 v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        u32 b = rd_byte(r);
        if (r.err) return 0;
        v |= (u64)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    r.err |= ERR_BAD_FIELD;
    return 0;
}

__device__ static i64 rd_zigzag(Reader& r) {
    u64 v = rd_varint(r);
    return (i64)(v >> 1) ^ -(i64)(v & 1);
}

__device__ static int rd_i32(Reader& r) {
    i64 v = rd_zigzag(r);
    if (v < -2147483648LL || v > 2147483647LL) { r.err |= ERR_BAD_FIELD; return 0; }
    return (int)v;
}

__device__ static void rd_skip_bytes(Reader& r, u64 n) {
    if (n > r.len - r.pos) { r.err |= ERR_TRUNCATED; return; }
    r.pos += n;
}

// Reads a field header; returns false at STOP (or on error). `last` is the previous field id.
__device__ static bool rd_field(Reader& r, int& last, int& id, int& type) {
    u32 b = rd_byte(r);
    if (r.err) return false;
    type = b & 0x0f;
    if (type == T_STOP) return false;
    u32 delta = b >> 4;
    if (delta == 0) {
        i64 v = rd_zigzag(r);
        if (v < -32768 || v > 32767) { r.err |= ERR_BAD_FIELD; return false; }
        id = (int)v;
    } else {
        id = last + (int)delta;
        if (id > 32767) { r.err |= ERR_BAD_FIELD; return false; }
    }
    last = id;
    return !r.err;
}

__device__ static void rd_skip(Reader& r, int type, int depth) {
    if (depth > MAX_DEPTH) { r.err |= ERR_TOO_DEEP; return; }
    switch (type) {
        case T_TRUE: case T_FALSE: return;
        case T_BYTE: rd_byte(r); return;
        case T_I16: case T_I32: case T_I64: rd_varint(r); return;
        case T_DOUBLE: rd_skip_bytes(r, 8); return;
        case T_BINARY: { u64 n = rd_varint(r); if (!r.err) rd_skip_bytes(r, n); return; }
        case T_LIST: case T_SET: {
            u32 h = rd_byte(r);
            if (r.err) return;
            int et = h & 0x0f;
            u64 n = (h >> 4) == 15 ? rd_varint(r) : (u64)(h >> 4);
            // every element takes a byte at least: a longer count cannot be true
            if (n > r.len - r.pos) { r.err |= ERR_TRUNCATED; return; }
            for (u64 i = 0; i < n && !r.err; i++) {
                if (et == T_TRUE || et == T_FALSE) rd_byte(r);
                else rd_skip(r, et, depth + 1);
            }
            return;
        }
        case T_MAP: {
            u64 n = rd_varint(r);
            if (r.err || n == 0) return;
            u32 kv = rd_byte(r);
            // an entry takes two bytes at least (booleans are a byte each in a map, as in a
            // list: skipping them as field booleans, which take none, looped n times over
            // nothing: a hang for a count of 2^50, found by fuzzing)
            if (r.err || n > (r.len - r.pos) / 2) { r.err |= ERR_TRUNCATED; return; }
            for (u64 i = 0; i < n && !r.err; i++) {
                const int kt = kv >> 4, vt = kv & 0x0f;
                if (kt == T_TRUE || kt == T_FALSE) rd_byte(r); else rd_skip(r, kt, depth + 1);
                if (vt == T_TRUE || vt == T_FALSE) rd_byte(r); else rd_skip(r, vt, depth + 1);
            }
            return;
        }
        case T_STRUCT: {
            int last = 0, id = 0, t = 0;
            while (rd_field(r, last, id, t)) rd_skip(r, t, depth + 1);
            return;
        }
        default: r.err |= ERR_BAD_FIELD; return;
    }
}

__device__ static bool rd_bool(Reader& r, int type) {
    if (type == T_TRUE) return true;
    if (type != T_FALSE) r.err |= ERR_BAD_FIELD;
    return false;
}

// Reads the i32 fields 1..n of a nested header struct into out[0..n) (plus the v2
// is_compressed boolean, field 7, and the dictionary is_sorted boolean, field 3, skipped);
// returns the bit set of the i32 fields seen.
__device__ static u32 rd_i32_struct(Reader& r, int* out, int n, int bool_field, int* bool_out) {
    u32 seen = 0;
    int last = 0, id = 0, t = 0;
    while (rd_field(r, last, id, t)) {
        if (id >= 1 && id <= n) {
            if (t != T_I32) { r.err |= ERR_BAD_FIELD; return seen; }
            out[id - 1] = rd_i32(r);
            seen |= 1u << (id - 1);
        } else if (id == bool_field && bool_out) {
            *bool_out = rd_bool(r, t) ? 1 : 0;
        } else {
            rd_skip(r, t, 1);
        }
    }
    return seen;
}

// Parses the header at r.pos into `pi`; sets r.err on failure.
__device__ static void parse_header(Reader& r, PageInfo& pi) {
    int kind = -1;
    bool has_unc = false, has_comp = false, has_v1 = false, has_dict = false, has_v2 = false;
    int v1[4] = {0, 0, 0, 0};
    int dict[2] = {0, 0};
    int v2[6] = {0, 0, 0, 0, 0, 0};
    int is_compressed = 1;
    int last = 0, id = 0, t = 0;
    u64 start = r.pos;
    while (rd_field(r, last, id, t)) {
        switch (id) {
            case 1: case 2: case 3: case 4: {
                if (t != T_I32) { r.err |= ERR_BAD_FIELD; return; }
                int v = rd_i32(r);
                if (id == 1) kind = v;
                else if (id == 2) { pi.uncompressed_size = v; has_unc = true; }
                else if (id == 3) { pi.compressed_size = v; has_comp = true; }
                break;
            }
            case 5: {
                if (t != T_STRUCT) { r.err |= ERR_BAD_FIELD; return; }
                u32 seen = rd_i32_struct(r, v1, 4, -1, 0);
                if (!r.err && seen != 0xf) { r.err |= ERR_MISSING; return; }
                has_v1 = true;
                break;
            }
            case 7: {
                if (t != T_STRUCT) { r.err |= ERR_BAD_FIELD; return; }
                int sorted = 0;
                u32 seen = rd_i32_struct(r, dict, 2, 3, &sorted);
                if (!r.err && seen != 0x3) { r.err |= ERR_MISSING; return; }
                has_dict = true;
                break;
            }
            case 8: {
                if (t != T_STRUCT) { r.err |= ERR_BAD_FIELD; return; }
                u32 seen = rd_i32_struct(r, v2, 6, 7, &is_compressed);
                if (!r.err && seen != 0x3f) { r.err |= ERR_MISSING; return; }
                has_v2 = true;
                break;
            }
            default: rd_skip(r, t, 1);
        }
        if (r.err) return;
    }
    if (r.err) return;
    if (kind < 0 || kind > 3) { r.err |= kind < 0 ? ERR_MISSING : ERR_BAD_FIELD; return; }
    if (!has_unc || !has_comp) { r.err |= ERR_MISSING; return; }
    if (pi.uncompressed_size < 0 || pi.compressed_size < 0) { r.err |= ERR_NEGATIVE; return; }
    if ((kind == KIND_DATA_V1 && !has_v1) || (kind == KIND_DICTIONARY && !has_dict) ||
        (kind == KIND_DATA_V2 && !has_v2)) { r.err |= ERR_MISSING; return; }
    pi.kind = kind;
    pi.num_values = 0;
    pi.encoding = 0;
    pi.def_level_encoding = 0;
    pi.rep_level_encoding = 0;
    pi.num_nulls = 0;
    pi.num_rows = 0;
    pi.def_levels_len = 0;
    pi.rep_levels_len = 0;
    pi.is_compressed = 1;
    if (kind == KIND_DATA_V1) {
        pi.num_values = v1[0]; pi.encoding = v1[1];
        pi.def_level_encoding = v1[2]; pi.rep_level_encoding = v1[3];
        if (pi.num_values < 0) { r.err |= ERR_NEGATIVE; return; }
    } else if (kind == KIND_DICTIONARY) {
        pi.num_values = dict[0]; pi.encoding = dict[1];
        if (pi.num_values < 0) { r.err |= ERR_NEGATIVE; return; }
    } else if (kind == KIND_DATA_V2) {
        pi.num_values = v2[0]; pi.num_nulls = v2[1]; pi.num_rows = v2[2]; pi.encoding = v2[3];
        pi.def_levels_len = v2[4]; pi.rep_levels_len = v2[5]; pi.is_compressed = is_compressed;
        i64 levels = (i64)pi.def_levels_len + (i64)pi.rep_levels_len;
        if (pi.num_values < 0 || pi.num_nulls < 0 || pi.num_rows < 0 || pi.def_levels_len < 0 ||
            pi.rep_levels_len < 0 || levels > (i64)pi.compressed_size ||
            pi.num_nulls > pi.num_values) { r.err |= ERR_NEGATIVE; return; }
    }
    pi.header_offset = (i64)start;
    pi.data_offset = (i64)r.pos;
}

extern "C" __global__ void page_headers(
    const u8* base,                 // the device buffer holding the chunks
    const u64* chunk_offsets,       // chunk c starts at base + chunk_offsets[c]
    const u64* chunk_lens,
    int num_chunks,
    int* page_counts,               // count pass: written; fill pass: read (capacity)
    const long long* page_start,    // fill pass: first page index of each chunk
    PageInfo* pages,                // NULL in the count pass
    u32* errors)                    // per chunk, OR-ed bits
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= num_chunks) return;
    Reader r;
    r.p = base + chunk_offsets[c];
    r.len = chunk_lens[c];
    r.pos = 0;
    r.err = 0;
    int n = 0;
    const int capacity = pages ? page_counts[c] : 0;
    while (r.pos < r.len) {
        PageInfo pi;
        parse_header(r, pi);
        if (r.err) break;
        u64 end = (u64)pi.data_offset + (u64)pi.compressed_size;
        if (end > r.len) { r.err |= ERR_PAST_END; break; }
        if (pages && n < capacity) pages[page_start[c] + n] = pi;
        n++;
        r.pos = end;
    }
    page_counts[c] = n;   // more than the capacity: the host runs the fill pass again
    if (r.err) errors[c] |= r.err;
}
