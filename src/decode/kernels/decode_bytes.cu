// BYTE_ARRAY flat columns on the device (Utf8 / Binary, 32- or 64-bit offsets): sizes first,
// one allocation, then the characters written in place. The device twin of the byte-array
// part of src/decode/reference.rs.
//
//   dict_entries:  one thread per dictionary page walks its PLAIN entries → (start, len) pairs.
//   bytes_sizes:   one block per data page: levels → validity; each valid row's source
//                  (start, len) found (PLAIN: walking the length prefixes; dictionary: the
//                  decoded index's entry); lengths[row] written (0 for nulls).
//   (the host, or a scan kernel, turns lengths into offsets)
//   bytes_chars:   one block per data page: every row's bytes copied to chars + offsets[row].
// Every length is checked against the page; errors are bits in errors[page].

struct BytesColumn {        // 48 bytes; mirrored by BytesColumn in src/decode/kernels.rs
    u64 dict_entries;       // device address of (u64 start address, u64 len) pairs, 0 if none
    u64 lengths;            // i64 per row of the column
    u64 out_valid;          // validity words, 0 when required
    u64 null_count;         // u64 counter
    int dict_len;
    int pad0;
    u64 pad1;
};
static_assert(sizeof(BytesColumn) == 48, "BytesColumn must match its Rust mirror");

// One thread per dictionary page: entries[k] = (device address, length) of entry k.
extern "C" __global__ void dict_entries(
    const u64* dict_data, const u64* dict_len_bytes, const int* dict_count,
    u64* const* entries_out, int num_dicts, u32* errors)
{
    int d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= num_dicts) return;
    const u8* p = (const u8*)dict_data[d];
    u64 len = dict_len_bytes[d];
    u64* out = entries_out[d];
    u64 pos = 0;
    for (int k = 0; k < dict_count[d]; k++) {
        if (len - pos < 4) { errors[d] |= E_VALUES; return; }
        u64 n = (u64)p[pos] | ((u64)p[pos + 1] << 8) | ((u64)p[pos + 2] << 16) | ((u64)p[pos + 3] << 24);
        pos += 4;
        if (n > len - pos) { errors[d] |= E_VALUES; return; }
        out[2 * k] = (u64)(p + pos);
        out[2 * k + 1] = n;
        pos += n;
    }
}

// Per data page: validity, and for every row its source (address, length) in src_scratch
// (2 u64 per row, indexed from scratch_base[page]) and its length in lengths[row].
extern "C" __global__ void bytes_sizes(
    const PageJob* pages, const BytesColumn* cols, u32* idx_scratch, u64* src_scratch,
    const u64* scratch_base, u32* errors)
{
    const PageJob pj = pages[blockIdx.x];
    const BytesColumn cj = cols[pj.column];
    if (threadIdx.x != 0) return;  // serial per page; pages run in parallel
    const u8* data = (const u8*)pj.data;
    u32* idxs = idx_scratch + scratch_base[blockIdx.x];
    u64* src = src_scratch + 2 * scratch_base[blockIdx.x];
    i64* lengths = (i64*)cj.lengths;
    u32* valid_words = (u32*)cj.out_valid;
    int n = pj.num_values;
    u32 err = 0;
    u64 lv_at = 0, lv_len = 0, val_at = 0;
    if (pj.v2) {
        lv_at = (u64)pj.rep_len;
        lv_len = (u64)pj.def_len;
        val_at = lv_at + lv_len;
        if (val_at > pj.data_len) err |= E_LEVELS;
    } else if (pj.max_def > 0) {
        if (pj.data_len < 4) err |= E_LEVELS;
        else {
            lv_len = (u64)data[0] | ((u64)data[1] << 8) | ((u64)data[2] << 16) | ((u64)data[3] << 24);
            lv_at = 4;
            if (lv_len > pj.data_len - 4) err |= E_LEVELS;
            val_at = 4 + lv_len;
        }
    }
    // definition levels into the index scratch first (0/1 per row)
    int present = n;
    if (!err && pj.max_def > 0) {
        err |= rle_hybrid(data + lv_at, lv_len, 1, idxs, n);
        present = 0;
        for (int i = 0; i < n && !err; i++) present += idxs[i] == (u32)pj.max_def;
    } else if (!err) {
        for (int i = 0; i < n; i++) idxs[i] = (u32)pj.max_def;
    }
    if (err) { errors[blockIdx.x] |= err; return; }
    // mark rows: src[2i] = 1 for valid rows (reused below), then resolve sources
    for (int i = 0; i < n; i++) src[2 * i] = idxs[i] == (u32)pj.max_def ? 1 : 0;
    u64 vlen = pj.data_len - val_at;
    const u8* vals = data + val_at;
    if (pj.encoding == 0) {
        u64 pos = 0;
        for (int i = 0; i < n; i++) {
            if (!src[2 * i]) { src[2 * i + 1] = 0; continue; }
            if (vlen - pos < 4) { err |= E_VALUES; break; }
            u64 len = (u64)vals[pos] | ((u64)vals[pos + 1] << 8) | ((u64)vals[pos + 2] << 16) | ((u64)vals[pos + 3] << 24);
            pos += 4;
            if (len > vlen - pos) { err |= E_VALUES; break; }
            src[2 * i] = (u64)(vals + pos);
            src[2 * i + 1] = len;
            pos += len;
        }
    } else if (pj.encoding == 2 || pj.encoding == 8) {
        if (!cj.dict_entries) err |= E_NO_DICT;
        else if (present > 0) {
            if (vlen < 1) err |= E_RLE;
            else {
                // indices after the validity marks are consumed: decode into idxs
                int bw = vals[0];
                err |= rle_hybrid(vals + 1, vlen - 1, bw, idxs, present);
                const u64* entries = (const u64*)cj.dict_entries;
                int k = 0;
                for (int i = 0; i < n && !err; i++) {
                    if (!src[2 * i]) { src[2 * i + 1] = 0; continue; }
                    u32 ix = idxs[k++];
                    if (ix >= (u32)cj.dict_len) { err |= E_DICT_INDEX; break; }
                    src[2 * i] = entries[2 * ix];
                    src[2 * i + 1] = entries[2 * ix + 1];
                }
            }
        } else {
            for (int i = 0; i < n; i++) src[2 * i + 1] = 0;
        }
    } else {
        err |= E_ENCODING;
    }
    if (err) { errors[blockIdx.x] |= err; return; }
    // lengths, and validity: a valid row has a non-zero source address (even an empty
    // string's), a null row a zero one
    u64 nulls = 0;
    for (int i = 0; i < n; i++) {
        u64 row = pj.row_start + (u64)i;
        lengths[row] = (i64)src[2 * i + 1];
        bool valid = pj.max_def == 0 || src[2 * i] != 0;
        if (valid) { if (valid_words) atomicOr(&valid_words[row >> 5], 1u << (row & 31)); }
        else nulls++;
    }
    if (nulls) atomicAdd((unsigned long long*)cj.null_count, (unsigned long long)nulls);
}

// Per data page: copy every row's bytes to chars + offsets[row] (offsets are i64 here; the host
// narrows them for 32-bit offset types after checking the total).
extern "C" __global__ void bytes_chars(
    const PageJob* pages, const u64* src_scratch, const u64* scratch_base,
    const u64* col_offsets, const u64* col_chars)
{
    const PageJob pj = pages[blockIdx.x];
    const u64* src = src_scratch + 2 * scratch_base[blockIdx.x];
    const i64* offsets = (const i64*)col_offsets[pj.column];
    u8* chars = (u8*)col_chars[pj.column];
    for (int i = 0; i < pj.num_values; i++) {
        u64 row = pj.row_start + (u64)i;
        u64 len = src[2 * i + 1];
        const u8* from = (const u8*)src[2 * i];
        u8* to = chars + offsets[row];
        for (u64 b = threadIdx.x; b < len; b += blockDim.x) to[b] = from[b];
    }
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
