//! CUDA C sources of the GPU decoder, embedded in the crate and compiled by NVRTC on first use
//! for the device's architecture (cached on disk by [`device::nvrtc`](crate::device::nvrtc)),
//! with the Rust side of what they share with the host: every kernel's parameter list (launched
//! through the typed layer of `launch.rs`), the job structures in their C layout, and the
//! meaning of the error bits they set. Unit tests parse the sources and check both declarations
//! against them.

pub(crate) use super::launch::CStruct;
use super::launch::{c_struct, kernels, Const, KernelModule, Mut};

/// Page headers parsed on the device (the twin of [`page_header`](crate::decode::page_header)).
pub(crate) const PAGE_HEADERS_MODULE: KernelModule = KernelModule {
    name: "page_headers",
    source: include_str!("kernels/page_headers.cu"),
    options: &[],
};

/// Fixed-width flat columns: levels, PLAIN, dictionary, DELTA_BINARY_PACKED and
/// BYTE_STREAM_SPLIT values, conversions.
pub(crate) const DECODE_FIXED_MODULE: KernelModule = KernelModule {
    name: "decode_fixed",
    source: concat!(
        include_str!("kernels/common.cuh"),
        include_str!("kernels/decode_fixed.cu")
    ),
    options: &[],
};

/// BYTE_ARRAY flat columns (PLAIN, dictionary, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY):
/// sizes first, then characters in place (PLAIN values located by `plain_walk.cuh`).
pub(crate) const DECODE_BYTES_MODULE: KernelModule = KernelModule {
    name: "decode_bytes",
    source: concat!(
        include_str!("kernels/common.cuh"),
        include_str!("kernels/plain_walk.cuh"),
        include_str!("kernels/decode_bytes.cu")
    ),
    options: &[],
};

/// Nested fields: leaves' levels, then offsets, validity and the leaves' values at their slots.
pub(crate) const NESTED_MODULE: KernelModule = KernelModule {
    name: "nested",
    source: concat!(
        include_str!("kernels/common.cuh"),
        include_str!("kernels/nested.cu")
    ),
    options: &[],
};

/// Page decompression: SNAPPY (one block per page or fragment), LZ4 checks and Hadoop frames,
/// and GZIP (`inflate.cu`, one warp per page).
pub(crate) const DECOMPRESS_MODULE: KernelModule = KernelModule {
    name: "decompress",
    source: concat!(
        include_str!("kernels/snappy.cu"),
        include_str!("kernels/inflate.cu")
    ),
    options: &[],
};

/// The exact row filter: predicates into row masks, scans, compaction.
pub(crate) const FILTER_MODULE: KernelModule = KernelModule {
    name: "filter",
    source: include_str!("kernels/filter.cu"),
    options: &[],
};

/// Every kernel module.
#[cfg(test)]
pub(crate) const MODULES: &[&KernelModule] = &[
    &PAGE_HEADERS_MODULE,
    &DECODE_FIXED_MODULE,
    &DECODE_BYTES_MODULE,
    &DECOMPRESS_MODULE,
    &FILTER_MODULE,
    &NESTED_MODULE,
];

/// GZIP pages per block of `gzip_pages`, a warp each (`INFLATE_WARPS` in inflate.cu).
pub(crate) const INFLATE_WARPS: u32 = 4;

/// Threads per block of the nested kernels (`NEST_THREADS` in nested.cu).
pub(crate) const NEST_THREADS: u32 = 256;

/// Level entries per block of `nest_count` and `nest_scatter` (`NEST_TILE` in nested.cu).
pub(crate) const NEST_TILE: u64 = 256 * 4;

/// List depths a unit's slots are counted for (`NEST_DEPTHS` in nested.cu).
pub(crate) const NEST_DEPTHS: usize = 8;

/// Tasks of one scatter unit (its null counters are kept in 8 registers).
pub(crate) const NEST_TASKS: usize = 8;

/// Threads per block of the filter's kernels (`FILTER_THREADS` in filter.cu).
pub(crate) const FILTER_THREADS: u32 = 256;

/// Rows per block of the filter's scans (`FILTER_SPAN` in filter.cu).
pub(crate) const FILTER_SPAN: u64 = 256 * 16;

/// Threads per block of `snappy_pages` (`SNAPPY_THREADS` in snappy.cu; a unit test checks).
pub(crate) const SNAPPY_THREADS: u32 = 256;

/// Threads per block of the DELTA_BYTE_ARRAY kernels (`DBA_THREADS` in decode_bytes.cu).
pub(crate) const DBA_THREADS: u32 = 128;

/// Values per block of the DELTA_BYTE_ARRAY kernels (`DBA_SEGMENT` in decode_bytes.cu).
pub(crate) const DBA_SEGMENT: u64 = 2048;

/// Output bytes per fragment of a large SNAPPY page (`SNAPPY_FRAGMENT` in snappy.cu).
pub(crate) const SNAPPY_FRAGMENT: u64 = 65536;

/// Input bytes per segment of a large SNAPPY page, at least (`SNAPPY_SEGMENT` in snappy.cu).
pub(crate) const SNAPPY_SEGMENT: u64 = 16384;

/// Segments per SNAPPY page at most (`MAX_SEGMENTS` in snappy.cu).
pub(crate) const MAX_SEGMENTS: u64 = 256;

/// Positions at a segment's start where two segment walks may meet (`SEG_ZONE` in snappy.cu):
/// a walk keeps a word per position of its own zone and of the next segment's.
pub(crate) const SEG_ZONE: u64 = 512;

/// `snappy_split`'s error bit that is no error: the page was parsed whole, by one block.
pub(crate) const SNAPPY_WHOLE: u32 = 0x100;

kernels! {
    /// Per chunk: counts its pages (or fills `pages` up to the capacity in `page_counts`).
    /// (base, chunk_offsets, chunk_lens, num_chunks, page_counts, page_start, pages, errors).
    PAGE_HEADERS = page_headers in PAGE_HEADERS_MODULE(
        Const<u8>, Const<u64>, Const<u64>, i32, Mut<i32>, Const<i64>, Mut<PageInfo>, Mut<u32>
    );
    /// One block per data page: levels, values, conversions.
    /// (pages, cols, def_scratch, idx_scratch, wide_scratch, scratch_base, errors).
    DECODE_FIXED_PAGES = decode_fixed_pages in DECODE_FIXED_MODULE(
        Const<PageJob>, Const<ColumnJob>, Mut<u8>, Mut<u32>, Mut<u64>, Const<u64>, Mut<u32>
    );
    /// `per` blocks per decimal array: the least index of a valid value past its precision.
    /// (arrays, n, per, bad).
    DECIMAL_CHECK = decimal_check in DECODE_FIXED_MODULE(Const<DecimalCheck>, i32, i32, Mut<u64>);
    /// One block per dictionary page: each entry's (address, length).
    /// (dict_data, dict_len_bytes, dict_count, entries_out, num_dicts, errors).
    DICT_ENTRIES = dict_entries in DECODE_BYTES_MODULE(
        Const<u64>, Const<u64>, Const<i32>, Const<Mut<u64>>, i32, Mut<u32>
    );
    /// One block per data page: each row's length and source.
    /// (pages, cols, idx_scratch, aux_scratch, src_scratch, scratch_base, page_info, errors).
    BYTES_SIZES = bytes_sizes in DECODE_BYTES_MODULE(
        Const<PageJob>, Const<BytesColumn>, Mut<u32>, Mut<u32>, Mut<u64>, Const<u64>, Mut<u64>,
        Mut<u32>
    );
    /// One block per segment of a DELTA_BYTE_ARRAY page's values: its values put together
    /// but for the bytes from before the segment, its rows' sources.
    /// (pages, idx_scratch, aux_scratch, unres_scratch, src_scratch, scratch_base, page_info,
    /// page_out, each block's (page, segment)).
    DBA_VALUES = dba_values in DECODE_BYTES_MODULE(
        Const<PageJob>, Const<u32>, Const<u32>, Mut<u32>, Mut<u64>, Const<u64>, Const<u64>,
        Const<u64>, Const<u32>
    );
    /// A thread per DELTA_BYTE_ARRAY page: the last value of each segment completed.
    /// (pages, aux_scratch, unres_scratch, scratch_base, page_info, page_out, pages).
    DBA_CHAIN = dba_chain in DECODE_BYTES_MODULE(
        Const<PageJob>, Const<u32>, Const<u32>, Const<u64>, Const<u64>, Const<u64>, i32
    );
    /// One block per segment: each value's bytes from before its segment.
    /// (pages, aux_scratch, unres_scratch, scratch_base, page_info, page_out, each block's
    /// (page, segment)).
    DBA_FILL = dba_fill in DECODE_BYTES_MODULE(
        Const<PageJob>, Const<u32>, Const<u32>, Const<u64>, Const<u64>, Const<u64>, Const<u32>
    );
    /// One block per data page: the characters copied to their offsets.
    /// (pages, src_scratch, scratch_base, col_offsets, col_chars).
    BYTES_CHARS = bytes_chars in DECODE_BYTES_MODULE(
        Const<PageJob>, Const<u64>, Const<u64>, Const<u64>, Const<u64>
    );
    /// One block per data page of a fixed-width column found as strings: values written.
    /// (pages, src_scratch, scratch_base, outs, errors).
    BYTES_FIXED = bytes_fixed in DECODE_BYTES_MODULE(
        Const<PageJob>, Const<u64>, Const<u64>, Const<FixedOut>, Mut<u32>
    );
    /// One thread per entry of a kept dictionary: its length. (entries, count, lengths).
    DICT_LENGTHS = dict_lengths in DECODE_BYTES_MODULE(Const<u64>, u64, Mut<i64>);
    /// One warp per entry of a kept dictionary: its bytes copied to its offset.
    /// (entries, count, offsets, chars).
    DICT_CHARS = dict_chars in DECODE_BYTES_MODULE(Const<u64>, u64, Const<i64>, Mut<u8>);
    /// One thread per row: the first row that is not valid UTF-8.
    /// (offsets, chars, rows, first_bad).
    UTF8_CHECK = utf8_check in DECODE_BYTES_MODULE(Const<i64>, Const<u8>, u64, Mut<u64>);
    /// One thread per row: its 16-byte view of a string or binary column.
    /// (offsets, wide, chars, validity, rows, views).
    MAKE_VIEWS = make_views in DECODE_BYTES_MODULE(
        Const<u8>, i32, Const<u8>, Const<u8>, u64, Mut<u32>
    );
    /// One block per span of lengths: its sum. (lengths, rows, sums).
    SPAN_SUMS = span_sums in DECODE_BYTES_MODULE(Const<i64>, u64, Mut<i64>);
    /// One block per data page of a nested leaf: its levels, a byte per entry.
    /// (pages, outs, scratch, scratch_base, errors).
    NESTED_LEVELS = nested_levels in NESTED_MODULE(
        Const<PageJob>, Const<LevelOut>, Mut<u32>, Const<u64>, Mut<u32>
    );
    /// One block per tile of a unit's entries: its slots per depth. (units, block_unit, errors).
    NEST_COUNT = nest_count in NESTED_MODULE(Const<NestUnit>, Const<u32>, Mut<u32>);
    /// One block per tile: slot indices, then the unit's tasks. (units, block_unit, tasks).
    NEST_SCATTER = nest_scatter in NESTED_MODULE(Const<NestUnit>, Const<u32>, Const<NestTask>);
    /// One block per span: the offsets from the span bases.
    /// (lengths, rows, bases, off64, off32 or null).
    WRITE_OFFSETS = write_offsets in DECODE_BYTES_MODULE(
        Const<i64>, u64, Const<i64>, Mut<i64>, Mut<i32>
    );
    /// One block per page: decompressed whole. (jobs, num_jobs, errors).
    SNAPPY_PAGES = snappy_pages in DECOMPRESS_MODULE(Const<DecompressJob>, i32, Mut<u32>);
    /// One block per listed segment of a large page: its element chain from a guessed (or a
    /// given) start, and where it may meet its neighbours'. (jobs, seg_page, seg_base,
    /// seg_size, list, n_list, starts, zones, firsts).
    SNAPPY_WALK = snappy_walk in DECOMPRESS_MODULE(
        Const<DecompressJob>, Const<u32>, Const<u32>, Const<u32>, Const<u32>, i32, Const<u64>,
        Mut<u32>, Mut<u64>
    );
    /// One warp per segment: where its walk and the one before meet. (seg_page, seg_base,
    /// seg_size, starts, zones, firsts, meets, num_segs).
    SNAPPY_JOIN = snappy_join in DECOMPRESS_MODULE(
        Const<u32>, Const<u32>, Const<u32>, Const<u64>, Const<u32>, Const<u64>, Mut<u64>, i32
    );
    /// One block per segment of a large page: where its 64 KiB fragments start, parsed from
    /// the meeting points. (jobs, seg_page, seg_base, num_segs, meets, splits, split_base,
    /// errors).
    SNAPPY_SPLIT = snappy_split in DECOMPRESS_MODULE(
        Const<DecompressJob>, Const<u32>, Const<u32>, i32, Const<u64>, Mut<u64>, Const<u64>,
        Mut<u32>
    );
    /// One block per fragment of a page. (jobs, num_jobs, errors).
    SNAPPY_FRAGMENTS = snappy_fragments in DECOMPRESS_MODULE(Const<DecompressJob>, i32, Mut<u32>);
    /// One block per LZ4 block (page): its sequences checked, nothing written.
    /// (jobs, num_jobs, errors).
    LZ4_CHECK = lz4_check in DECOMPRESS_MODULE(Const<DecompressJob>, i32, Mut<u32>);
    /// One thread per Hadoop-framed LZ4 page: its frames' blocks counted (out null) or
    /// written from `base`. (pages, num_pages, base, out, counts).
    LZ4_HADOOP_BLOCKS = lz4_hadoop_blocks in DECOMPRESS_MODULE(
        Const<DecompressJob>, i32, Const<u64>, Mut<DecompressJob>, Mut<i32>
    );
    /// One warp per GZIP page: its members inflated into exactly its size, each checked by
    /// its trailer. (jobs, num_jobs, errors).
    GZIP_PAGES = gzip_pages in DECOMPRESS_MODULE(Const<DecompressJob>, i32, Mut<u32>);
    /// Integers against a 128-bit literal. (values, n, valid, mode, lit_lo, lit_hi, out).
    PRED_INT = pred_int in FILTER_MODULE(Const<u8>, u64, Const<u8>, i32, u64, u64, Mut<u8>);
    /// Floats against a double. (values, n, valid, mode, lit_bits, out).
    PRED_FLOAT = pred_float in FILTER_MODULE(Const<u8>, u64, Const<u8>, i32, u64, Mut<u8>);
    /// Strings against bytes. (offsets, chars, n, valid, mode, lit, lit_len, out).
    PRED_BYTES = pred_bytes in FILTER_MODULE(
        Const<u8>, Const<u8>, u64, Const<u8>, i32, Const<u8>, u64, Mut<u8>
    );
    /// Strings against a LIKE pattern's tokens. (offsets, chars, n, valid, mode, kinds,
    /// bytes, pattern length, out).
    PRED_LIKE = pred_like in FILTER_MODULE(
        Const<u8>, Const<u8>, u64, Const<u8>, i32, Const<u8>, Const<u8>, u64, Mut<u8>
    );
    /// Two columns of one type compared. (a, b, n, a's valid, b's valid, mode, out).
    PRED_COLS = pred_cols in FILTER_MODULE(
        Const<u8>, Const<u8>, u64, Const<u8>, Const<u8>, i32, Mut<u8>
    );
    /// Valid or null rows. (valid, n, want, out).
    PRED_VALID = pred_valid in FILTER_MODULE(Const<u8>, u64, i32, Mut<u8>);
    /// a = a AND/OR b. (a, b, n, mode).
    MASK_COMBINE = mask_combine in FILTER_MODULE(Mut<u8>, Const<u8>, u64, i32);
    /// One block per span: its sum. (mask or null, values, n, sums).
    SPAN_TOTAL = span_total in FILTER_MODULE(Const<u8>, Const<i64>, u64, Mut<i64>);
    /// One block per span: exclusive prefix sums from the span bases.
    /// (mask or null, values, n, bases, out).
    SPAN_SCAN = span_scan in FILTER_MODULE(Const<u8>, Const<i64>, u64, Const<i64>, Mut<i64>);
    /// Fixed-width values of the kept rows. (in, width, n, mask, pos, out).
    COMPACT_FIXED = compact_fixed in FILTER_MODULE(
        Const<u8>, i32, u64, Const<u8>, Const<i64>, Mut<u8>
    );
    /// Bits of the kept rows. (in, n, mask, pos, out words, zeros).
    COMPACT_BITS = compact_bits in FILTER_MODULE(
        Const<u8>, u64, Const<u8>, Const<i64>, Mut<u32>, Mut<u64>
    );
    /// Kept rows' string lengths. (offsets, large, n, mask, lengths).
    KEPT_LENGTHS = kept_lengths in FILTER_MODULE(Const<u8>, i32, u64, Const<u8>, Mut<i64>);
    /// Bits joined end to end. (in or null, n, at, out words).
    CONCAT_BITS = concat_bits in FILTER_MODULE(Const<u8>, u64, u64, Mut<u32>);
    /// Offsets (or dictionary keys) joined end to end. (in, n, mode, base, out).
    CONCAT_OFFSETS = concat_offsets in FILTER_MODULE(Const<u8>, u64, i32, i64, Mut<u8>);
    /// Output offsets of the kept rows. (starts, n, mask, pos, m, large, out).
    COMPACT_OFFSETS = compact_offsets in FILTER_MODULE(
        Const<i64>, u64, Const<u8>, Const<i64>, u64, i32, Mut<u8>
    );
    /// Kept rows' characters. (offsets, large, chars, n, mask, starts, out).
    COMPACT_CHARS = compact_chars in FILTER_MODULE(
        Const<u8>, i32, Const<u8>, u64, Const<u8>, Const<i64>, Mut<u8>
    );
}

c_struct! {
    /// Mirror of `struct DecimalCheck` in `kernels/decode_fixed.cu`: one decoded decimal array.
    pub(crate) struct DecimalCheck(64 bytes) {
        /// Device address of the values.
        values: u64,
        /// Device address of the validity bitmap, 0 when there is none.
        validity: u64,
        /// Values.
        len: u64,
        /// Bytes per value: 4, 8, 16 or 32.
        width: u64,
        /// 10^precision - 1, little-endian 64-bit limbs.
        max0: u64,
        /// (limb 1)
        max1: u64,
        /// (limb 2)
        max2: u64,
        /// (limb 3)
        max3: u64,
    }
}

c_struct! {
    /// Mirror of `struct DecompressJob` in `kernels/snappy.cu`: one compressed stream, of any
    /// codec the device decompresses (a SNAPPY page or fragment, an LZ4 block, a GZIP page).
    pub(crate) struct DecompressJob(32 bytes) {
        /// Device address of the compressed bytes.
        src: u64,
        /// Compressed bytes.
        src_len: u64,
        /// Device address of the output.
        dst: u64,
        /// Expected decompressed bytes.
        dst_len: u64,
    }
}

c_struct! {
    /// Mirror of `struct BytesColumn` in `kernels/decode_bytes.cu`: one output column (a
    /// batch's rows of one field).
    pub(crate) struct BytesColumn(48 bytes) {
        /// i64 length per row (a kept dictionary: a key per row, `key_width` bytes each).
        lengths: u64,
        /// Validity words, 0 when required.
        out_valid: u64,
        /// u64 null counter.
        null_count: u64,
        /// 1: FIXED_LEN_BYTE_ARRAY values (only DELTA_BYTE_ARRAY pages are decoded).
        only_delta: u64,
        /// A kept dictionary: its entry tables (the keys are entry indices from here); 0
        /// otherwise.
        dict_base: u64,
        /// A kept dictionary's bytes per key (1, 2, 4 or 8).
        key_width: u64,
    }
}

c_struct! {
    /// Mirror of `struct LevelOut` in `kernels/nested.cu`: where a nested leaf's levels go.
    pub(crate) struct LevelOut(16 bytes) {
        /// Repetition levels, a byte per entry.
        rep: u64,
        /// Definition levels, a byte per entry.
        def: u64,
    }
}

c_struct! {
    /// Mirror of `struct NestUnit` in `kernels/nested.cu`: one leaf of one batch of a nested
    /// field, and the tasks its slots feed.
    pub(crate) struct NestUnit(64 bytes) {
        /// Repetition levels, a byte per entry.
        rep: u64,
        /// Definition levels, a byte per entry.
        def: u64,
        /// Entries.
        entries: u64,
        /// Byte k: the definition level a slot at depth k needs.
        elem_defs: u64,
        /// u32 per tile and depth: slots counted by `nest_count`.
        counts: u64,
        /// u64 per tile and depth: slots before the tile.
        bases: u64,
        /// Depths counted (`max_rep + 1`).
        depths: i32,
        /// First block of the unit in the grid.
        first_block: i32,
        /// First task.
        first_task: i32,
        /// Tasks.
        num_tasks: i32,
    }
}

c_struct! {
    /// Mirror of `struct NestTask` in `kernels/nested.cu`: one buffer a unit's slots fill.
    pub(crate) struct NestTask(64 bytes) {
        /// The output: validity bitmap, offsets, or gathered values.
        out: u64,
        /// Gathers: the slots' validity bitmap, or 0.
        out_valid: u64,
        /// Gathers: the entries' values.
        src: u64,
        /// Gathers: the entries' validity bitmap, or 0.
        src_valid: u64,
        /// A null counter, or 0.
        null_count: u64,
        /// `T_VALID` .. `T_GATHER_OFFSETS`.
        kind: i32,
        /// The depth whose slots it writes.
        level: i32,
        /// `T_VALID`: the definition level a valid slot reaches.
        def: i32,
        /// Bytes per value (offsets: 4 or 8).
        width: i32,
    }
}

/// Error bits of `nested_levels` (per page) and `nest_count` (per unit).
pub(crate) const NESTED_ERRORS: &[(u32, &str)] = &[
    (0x1, "levels run past the page"),
    (0x2, "an RLE/bit-packed run is cut short or malformed"),
    (0x20, "a bit width over 32"),
    (0x400, "a level above the column's maximum"),
    (
        0x800,
        "repetition levels that do not form rows (a repeated value without its list)",
    ),
];

c_struct! {
    /// Mirror of `struct FixedOut` in `kernels/decode_bytes.cu`: the fixed-width output of a
    /// column the byte-array kernels decode (decimals stored as BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY
    /// in DELTA_BYTE_ARRAY).
    pub(crate) struct FixedOut(24 bytes) {
        /// rows × width bytes, zeroed; 0 for the other columns.
        values: u64,
        /// Bytes per output value.
        width: i32,
        /// 8 (fixed-size bytes) or 9 (big-endian decimal).
        conversion: i32,
        /// FIXED_LEN_BYTE_ARRAY: its length; BYTE_ARRAY: 0.
        phys: i32,
    }
}

c_struct! {
    /// Mirror of `struct PageJob` in `kernels/common.cuh`: the window of one data page that
    /// one output column takes.
    pub(crate) struct PageJob(80 bytes) {
        /// Device address of the page data (levels + values).
        data: u64,
        /// Bytes of page data.
        data_len: u64,
        /// The output row of the page's row `skip`.
        row_start: u64,
        /// Its chunk's dictionary (fixed width: the values; byte arrays: the entry table), 0
        /// when none.
        dict: u64,
        /// Rows of the page.
        num_values: i32,
        /// Value encoding (0 PLAIN, 2 / 8 dictionary).
        encoding: i32,
        /// Maximum definition level (0 or 1; a nested leaf's, up to 255).
        max_def: i32,
        /// 1 for a v2 page.
        v2: i32,
        /// v2: definition level bytes.
        def_len: i32,
        /// v2: repetition level bytes.
        rep_len: i32,
        /// Index of the column job.
        column: i32,
        /// Dictionary entries.
        dict_len: i32,
        /// Rows of the page before the ones written.
        skip: i32,
        /// Rows written: the page's rows `skip .. skip + take`.
        take: i32,
        /// A nested leaf's maximum repetition level (0 for a flat column).
        max_rep: i32,
        /// A v2 page's values that are not null by its header (`num_values - num_nulls`): the
        /// levels counting more present values than that is an error (arrow-rs: "insufficient
        /// values read"); -1 for a v1 page.
        v2_values: i32,
    }
}

c_struct! {
    /// Mirror of `struct ColumnJob` in `kernels/decode_fixed.cu`: one output column (a
    /// batch's rows of one field).
    pub(crate) struct ColumnJob(40 bytes) {
        /// Output values (rows × out_width bytes, zeroed).
        out_values: u64,
        /// Validity bitmap (zeroed u32 words), 0 for required columns.
        out_valid: u64,
        /// Device address of the column's u64 null counter.
        null_count: u64,
        /// Bytes per stored value.
        phys_width: i32,
        /// Bytes per output value.
        out_width: i32,
        /// Conversion number (see [`conversion_code`]).
        conversion: i32,
        /// The stored type, as parquet's `Type` numbers it (1 INT32, 2 INT64, 4 FLOAT, ...).
        physical: i32,
    }
}

c_struct! {
    /// Mirror of `struct PageInfo` in `kernels/page_headers.cu`: one page of a chunk.
    pub struct PageInfo(64 bytes) {
        /// Offset of the header from the start of the chunk.
        header_offset: i64,
        /// Offset of the page data (`header_offset` + header length).
        data_offset: i64,
        /// Page kind (0 data v1, 1 index, 2 dictionary, 3 data v2).
        kind: i32,
        /// Page data bytes after decompression.
        uncompressed_size: i32,
        /// Page data bytes as stored.
        compressed_size: i32,
        /// Values (nulls included).
        num_values: i32,
        /// Value encoding.
        encoding: i32,
        /// v1: definition level encoding.
        def_level_encoding: i32,
        /// v1: repetition level encoding.
        rep_level_encoding: i32,
        /// v2: nulls.
        num_nulls: i32,
        /// v2: rows.
        num_rows: i32,
        /// v2: definition level bytes.
        def_levels_len: i32,
        /// v2: repetition level bytes.
        rep_levels_len: i32,
        /// v2: values compressed (1) or not (0).
        is_compressed: i32,
    }
}

/// Error bits of `snappy_pages`, per page.
pub(crate) const SNAPPY_ERRORS: &[(u32, &str)] = &[
    (0x1, "the SNAPPY stream ends inside an element"),
    (
        0x2,
        "a SNAPPY element writes past the page's uncompressed size",
    ),
    (0x4, "a SNAPPY copy reaches before the start of the output"),
    (
        0x8,
        "the SNAPPY length differs from the page's uncompressed size",
    ),
];

/// Error bits of `gzip_pages`, per page. Any of them sends the page's chunk to the host's
/// inflater, which reads it as arrow-rs does or names what is wrong, so they are not shown;
/// listed here to be checked against the source.
#[cfg(test)]
pub(crate) const GZIP_ERRORS: &[(u32, &str)] = &[
    (0x1, "the GZIP stream ends inside a header, a block or a trailer"),
    (0x2, "the GZIP data inflates past the page's uncompressed size"),
    (
        0x4,
        "a DEFLATE match reaches before the start of its member's output",
    ),
    (
        0x8,
        "the GZIP members inflate to less than the page's uncompressed size",
    ),
    (0x10, "a GZIP member's CRC-32 or length differs from its trailer"),
    (
        0x20,
        "a GZIP member header the GPU does not read (magic, method, FHCRC or reserved flags)",
    ),
    (
        0x40,
        "a DEFLATE block type, stored length, code set or symbol that is not allowed",
    ),
];

/// Parquet's number of a stored type (`Type` in the format's Thrift), as the kernels check it.
pub fn physical_code(name: &str) -> i32 {
    match name {
        "BOOLEAN" => 0,
        "INT32" => 1,
        "INT64" => 2,
        "INT96" => 3,
        "FLOAT" => 4,
        "DOUBLE" => 5,
        "BYTE_ARRAY" => 6,
        "FIXED_LEN_BYTE_ARRAY" => 7,
        _ => -1,
    }
}

/// The kernel's number for a conversion, or `None` for those `decode_fixed` does not do.
pub fn conversion_code(c: crate::decode::gpu_plan::Conversion) -> Option<i32> {
    use crate::decode::gpu_plan::Conversion as C;
    Some(match c {
        C::Copy => 0,
        C::Truncate8 => 1,
        C::Truncate16 => 2,
        C::Widen64 => 3,
        C::DaysToMillis => 4,
        C::Widen128 => 5,
        C::Widen256 => 6,
        C::Int96ToNanos => 7,
        C::FixedBytes => 8,
        C::BigEndianDecimal => 9, // FIXED_LEN_BYTE_ARRAY only: BYTE_ARRAY decimals are variable
        C::Boolean => 10,
        C::Bytes => return None,
    })
}

/// Error bits of `decode_fixed_pages`, per page.
pub(crate) const DECODE_FIXED_ERRORS: &[(u32, &str)] = &[
    (0x1, "definition levels run past the page"),
    (0x2, "an RLE/bit-packed run is cut short or malformed"),
    (0x4, "a dictionary index is out of range"),
    (0x8, "values run past the page"),
    (0x10, "an encoding the GPU does not decode"),
    (0x20, "a bit width over 32"),
    (0x40, "dictionary-encoded values without a dictionary page"),
    (0x80, "a malformed DELTA_BINARY_PACKED header or block"),
    (
        0x100,
        "a DELTA_BYTE_ARRAY prefix longer than the value before it",
    ),
    (
        0x200,
        "a value longer than its decimal allows, or not of its fixed size",
    ),
    (
        0x400,
        "its definition levels count more values present than its header's null count leaves",
    ),
];

/// Error bits the page-header kernel sets per chunk, with their meaning.
pub(crate) const PAGE_HEADER_ERRORS: &[(u32, &str)] = &[
    (0x1, "a page header ends past the chunk"),
    (0x2, "a header field has an unexpected type or value"),
    (0x4, "a negative or inconsistent size or count"),
    (0x8, "page data runs past the chunk"),
    (0x10, "header nesting deeper than 16"),
    (0x20, "a required header field is missing"),
    (0x40, "the page count changed between passes"),
];

/// The meaning of the error bits `bits`, joined.
pub(crate) fn describe_errors(bits: u32, table: &[(u32, &str)]) -> String {
    let mut v: Vec<&str> = table
        .iter()
        .filter(|(b, _)| bits & b != 0)
        .map(|(_, d)| *d)
        .collect();
    let known: u32 = table.iter().map(|(b, _)| b).fold(0, |a, b| a | b);
    let unknown = bits & !known;
    let extra;
    if unknown != 0 {
        extra = format!("unknown error bits {unknown:#x}");
        v.push(&extra);
    }
    v.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_serialise_to_the_c_layout() {
        let p = PageJob {
            data: 1,
            data_len: 2,
            row_start: 3,
            num_values: 4,
            column: 9,
            ..PageJob::default()
        };
        let b = p.to_bytes();
        assert_eq!(b.len(), 80);
        assert_eq!(b[16], 3);
        assert_eq!(b[32], 4);
        assert_eq!(b[56], 9);
        let c = ColumnJob {
            null_count: 7,
            conversion: 5,
            ..ColumnJob::default()
        };
        let b = c.to_bytes();
        assert_eq!(b.len(), 40);
        assert_eq!(b[16], 7);
        assert_eq!(b[32], 5);
    }

    /// The value of `#define name value` in `module`'s source.
    fn define(module: &KernelModule, name: &str) -> String {
        let line = module
            .source
            .lines()
            .find(|l| l.starts_with(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("{name} in {}", module.name));
        line.split_whitespace().nth(2).unwrap().to_string()
    }

    #[test]
    fn snappy_and_dba_constants_match_the_kernels() {
        let num = |m: &KernelModule, name: &str| define(m, name).parse::<u64>().unwrap();
        assert_eq!(num(&DECOMPRESS_MODULE, "SNAPPY_THREADS"), u64::from(SNAPPY_THREADS));
        assert_eq!(num(&DECOMPRESS_MODULE, "SNAPPY_FRAGMENT"), SNAPPY_FRAGMENT);
        assert_eq!(num(&DECOMPRESS_MODULE, "SNAPPY_SEGMENT"), SNAPPY_SEGMENT);
        assert_eq!(num(&DECOMPRESS_MODULE, "MAX_SEGMENTS"), MAX_SEGMENTS);
        assert_eq!(num(&DECOMPRESS_MODULE, "SEG_ZONE"), SEG_ZONE);
        let whole = define(&DECOMPRESS_MODULE, "S_WHOLE");
        assert_eq!(whole, format!("{SNAPPY_WHOLE:#x}u"));
        assert_eq!(num(&DECODE_BYTES_MODULE, "DBA_THREADS"), u64::from(DBA_THREADS));
        assert_eq!(num(&DECODE_BYTES_MODULE, "DBA_SEGMENT"), DBA_SEGMENT);
        assert_eq!(num(&DECOMPRESS_MODULE, "INFLATE_WARPS"), u64::from(INFLATE_WARPS));
        let bits = |errors: &[(u32, &str)]| errors.iter().map(|e| e.0).collect::<Vec<_>>();
        let defined: Vec<u32> = ["G_TRUNCATED", "G_OVERRUN", "G_DISTANCE", "G_SIZE", "G_CHECK"]
            .iter()
            .chain(&["G_HEADER", "G_CODE"])
            .map(|n| {
                let v = define(&DECOMPRESS_MODULE, n);
                u32::from_str_radix(v.trim_start_matches("0x").trim_end_matches('u'), 16).unwrap()
            })
            .collect();
        assert_eq!(bits(GZIP_ERRORS), defined);
    }

    #[test]
    fn filter_constants_match_the_kernel() {
        let define = |name: &str| define(&FILTER_MODULE, name);
        assert_eq!(define("FILTER_THREADS"), FILTER_THREADS.to_string());
        assert_eq!(
            define("SCAN_PER_THREAD").parse::<u64>().unwrap() * u64::from(FILTER_THREADS),
            FILTER_SPAN
        );
        // the operators' numbers (filter.rs's op_code)
        for (name, op) in [
            ("OP_LT", 0),
            ("OP_LE", 1),
            ("OP_GT", 2),
            ("OP_GE", 3),
            ("OP_EQ", 4),
        ] {
            assert_eq!(define(name), op.to_string(), "{name}");
        }
        assert_eq!(define("OP_NE"), "5");
    }

    #[test]
    fn page_info_is_64_bytes() {
        assert_eq!(std::mem::size_of::<PageInfo>(), 64);
        assert_eq!(std::mem::align_of::<PageInfo>(), 8);
    }

    #[test]
    fn errors_are_described() {
        assert_eq!(
            describe_errors(0x9, PAGE_HEADER_ERRORS),
            "a page header ends past the chunk; page data runs past the chunk"
        );
        assert!(describe_errors(0x100, PAGE_HEADER_ERRORS).contains("unknown error bits 0x100"));
    }

    /// Compiles every kernel module with NVRTC for the H200's architecture, where NVRTC is
    /// installed (no GPU needed); prints why it is skipped elsewhere. `scripts/nvrtc-compile.sh`
    /// runs it with NVRTC from its pip wheel (and prints each kernel's registers and spills).
    #[test]
    fn kernels_compile_with_nvrtc() {
        if let Err(e) = crate::device::nvrtc::nvrtc_version() {
            eprintln!("skipping the NVRTC compile check: {e}");
            return;
        }
        for KernelModule {
            name,
            source: src,
            options,
        } in MODULES
        {
            for arch in ["sm_90", "sm_80"] {
                let cubin = crate::device::nvrtc::compile_cubin(name, src, arch, options)
                    .unwrap_or_else(|e| panic!("{name} for {arch}: {e}"));
                assert!(cubin.starts_with(b"\x7fELF"), "{name}: not an ELF image");
            }
        }
    }

    /// Every declared kernel's parameters are those of its `extern "C"` signature in its
    /// module's source, and every kernel of the sources is declared.
    #[test]
    fn kernel_declarations_match_the_sources() {
        use crate::device::c_source::kernel_signatures;
        let declared = declared_kernels();
        let mut found = 0;
        for m in MODULES {
            for (name, params) in kernel_signatures(m.source) {
                let Some((_, _, types)) = declared.iter().find(|d| d.0 == m.name && d.1 == name)
                else {
                    panic!("kernel {name} of module {} is not declared in Rust", m.name);
                };
                assert_eq!(*types, params, "the parameters of {}::{name}", m.name);
                found += 1;
            }
        }
        assert_eq!(
            found,
            declared.len(),
            "declared kernels missing from their sources"
        );
        assert_eq!(found, 43);
    }

    fn mirror<T: CStruct>() -> (&'static str, usize, &'static [(&'static str, &'static str)]) {
        (T::NAME, T::SIZE, T::FIELDS)
    }

    /// The Rust mirrors have the fields of the C structures, in order and of the same types
    /// (padding aside), and the size the sources assert; every structure whose size the
    /// sources assert has a mirror.
    #[test]
    fn job_structs_match_the_sources() {
        use crate::device::c_source::{asserted_size, asserted_structs, struct_fields};
        let mirrors = [
            mirror::<DecompressJob>(),
            mirror::<BytesColumn>(),
            mirror::<PageJob>(),
            mirror::<ColumnJob>(),
            mirror::<FixedOut>(),
            mirror::<PageInfo>(),
            mirror::<LevelOut>(),
            mirror::<NestUnit>(),
            mirror::<NestTask>(),
            mirror::<DecimalCheck>(),
        ];
        let all: String = MODULES.iter().map(|m| m.source).collect();
        for (name, size, fields) in mirrors {
            let c: Vec<(String, String)> = struct_fields(&all, name)
                .unwrap_or_else(|| panic!("struct {name} in the sources"))
                .into_iter()
                .filter(|(n, _)| !n.starts_with("pad"))
                .collect();
            let rust: Vec<(String, String)> = fields
                .iter()
                .map(|&(n, t)| (n.to_string(), t.to_string()))
                .collect();
            assert_eq!(rust, c, "the fields of {name}");
            assert_eq!(asserted_size(&all, name), Some(size), "sizeof({name})");
        }
        for name in asserted_structs(&all) {
            assert!(
                mirrors.iter().any(|m| m.0 == name),
                "struct {name} has no Rust mirror"
            );
        }
    }

    #[test]
    fn job_structs_round_trip_their_c_layout() {
        let p = PageInfo {
            header_offset: -1,
            data_offset: 2,
            kind: 3,
            num_rows: -4,
            is_compressed: 5,
            ..PageInfo::default()
        };
        let b = p.to_bytes();
        assert_eq!(b.len(), 64);
        assert_eq!(b[48..52], (-4i32).to_le_bytes());
        assert_eq!(PageInfo::from_bytes(&b), p);
        let c = BytesColumn {
            null_count: 7,
            ..BytesColumn::default()
        };
        let b = c.to_bytes();
        assert_eq!((b.len(), b[16]), (48, 7));
        assert!(b[24..].iter().all(|&x| x == 0));
        assert_eq!(BytesColumn::from_bytes(&b), c);
        let s = DecompressJob {
            dst_len: 9,
            ..DecompressJob::default()
        };
        assert_eq!(DecompressJob::from_bytes(&s.to_bytes()), s);
    }
}
