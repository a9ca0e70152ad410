//! CUDA C sources of the GPU decoder, embedded in the crate and compiled by NVRTC on first use
//! for the device's architecture (cached on disk by [`device::nvrtc`](crate::device::nvrtc)),
//! with the Rust mirrors of the structures they share with the host.

/// Page headers parsed on the device (the twin of [`page_header`](crate::decode::page_header)).
pub const PAGE_HEADERS: &str = include_str!("kernels/page_headers.cu");

/// Fixed-width flat columns: levels, PLAIN and dictionary values, conversions.
pub const DECODE_FIXED: &str = concat!(
    include_str!("kernels/common.cuh"),
    include_str!("kernels/decode_fixed.cu")
);

/// BYTE_ARRAY flat columns: sizes first, then characters in place.
pub const DECODE_BYTES: &str = concat!(
    include_str!("kernels/common.cuh"),
    include_str!("kernels/decode_bytes.cu")
);

/// SNAPPY page decompression, one block per page.
pub const SNAPPY: &str = include_str!("kernels/snappy.cu");

/// Threads per block of `snappy_pages` (`SNAPPY_THREADS` in snappy.cu; a unit test checks).
pub const SNAPPY_THREADS: u32 = 256;

/// Output bytes per fragment of a large SNAPPY page (`SNAPPY_FRAGMENT` in snappy.cu).
pub const SNAPPY_FRAGMENT: u64 = 65536;

/// Every kernel module: (name, source).
pub const MODULES: &[(&str, &str)] = &[
    ("page_headers", PAGE_HEADERS),
    ("decode_fixed", DECODE_FIXED),
    ("decode_bytes", DECODE_BYTES),
    ("snappy", SNAPPY),
];

/// Mirror of `struct SnappyJob` in `kernels/snappy.cu` (32 bytes): one compressed stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnappyJob {
    /// Device address of the compressed bytes.
    pub src: u64,
    /// Compressed bytes.
    pub src_len: u64,
    /// Device address of the output.
    pub dst: u64,
    /// Expected decompressed bytes.
    pub dst_len: u64,
}

impl SnappyJob {
    /// The 32 bytes the kernel reads.
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        for (k, v) in [self.src, self.src_len, self.dst, self.dst_len]
            .iter()
            .enumerate()
        {
            b[8 * k..8 * k + 8].copy_from_slice(&v.to_le_bytes());
        }
        b
    }
}

/// Error bits of `snappy_pages`, per page.
pub const SNAPPY_ERRORS: &[(u32, &str)] = &[
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

/// Mirror of `struct BytesColumn` in `kernels/decode_bytes.cu` (48 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BytesColumn {
    /// (address, length) pairs of the dictionary entries, 0 when none.
    pub dict_entries: u64,
    /// i64 length per row.
    pub lengths: u64,
    /// Validity words, 0 when required.
    pub out_valid: u64,
    /// u64 null counter.
    pub null_count: u64,
    /// Dictionary entries.
    pub dict_len: i32,
}

impl BytesColumn {
    /// The 48 bytes the kernel reads.
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut b = [0u8; 48];
        for (k, v) in [
            self.dict_entries,
            self.lengths,
            self.out_valid,
            self.null_count,
        ]
        .iter()
        .enumerate()
        {
            b[8 * k..8 * k + 8].copy_from_slice(&v.to_le_bytes());
        }
        b[32..36].copy_from_slice(&self.dict_len.to_le_bytes());
        b
    }
}

/// Mirror of `struct PageJob` in `kernels/decode_fixed.cu` (64 bytes): one data page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageJob {
    /// Device address of the page data (levels + values).
    pub data: u64,
    /// Bytes of page data.
    pub data_len: u64,
    /// First row of the page in its column's output.
    pub row_start: u64,
    /// Rows of the page.
    pub num_values: i32,
    /// Value encoding (0 PLAIN, 2 / 8 dictionary).
    pub encoding: i32,
    /// Maximum definition level (0 or 1).
    pub max_def: i32,
    /// 1 for a v2 page.
    pub v2: i32,
    /// v2: definition level bytes.
    pub def_len: i32,
    /// v2: repetition level bytes.
    pub rep_len: i32,
    /// Index of the column job.
    pub column: i32,
}

impl PageJob {
    /// The 64 bytes the kernel reads.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&self.data.to_le_bytes());
        b[8..16].copy_from_slice(&self.data_len.to_le_bytes());
        b[16..24].copy_from_slice(&self.row_start.to_le_bytes());
        for (k, v) in [
            self.num_values,
            self.encoding,
            self.max_def,
            self.v2,
            self.def_len,
            self.rep_len,
            self.column,
            0,
        ]
        .iter()
        .enumerate()
        {
            b[24 + 4 * k..28 + 4 * k].copy_from_slice(&v.to_le_bytes());
        }
        b
    }
}

/// Mirror of `struct ColumnJob` in `kernels/decode_fixed.cu` (48 bytes): one output column.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ColumnJob {
    /// Output values (rows × out_width bytes, zeroed).
    pub out_values: u64,
    /// Validity bitmap (zeroed u32 words), 0 for required columns.
    pub out_valid: u64,
    /// Dictionary values, 0 when none.
    pub dict: u64,
    /// Device address of the column's u64 null counter.
    pub null_count: u64,
    /// Dictionary entries.
    pub dict_len: i32,
    /// Bytes per stored value.
    pub phys_width: i32,
    /// Bytes per output value.
    pub out_width: i32,
    /// Conversion number (see [`conversion_code`]).
    pub conversion: i32,
}

impl ColumnJob {
    /// The 48 bytes the kernel reads.
    pub fn to_bytes(&self) -> [u8; 48] {
        let mut b = [0u8; 48];
        for (k, v) in [self.out_values, self.out_valid, self.dict, self.null_count]
            .iter()
            .enumerate()
        {
            b[8 * k..8 * k + 8].copy_from_slice(&v.to_le_bytes());
        }
        for (k, v) in [
            self.dict_len,
            self.phys_width,
            self.out_width,
            self.conversion,
        ]
        .iter()
        .enumerate()
        {
            b[32 + 4 * k..36 + 4 * k].copy_from_slice(&v.to_le_bytes());
        }
        b
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
pub const DECODE_FIXED_ERRORS: &[(u32, &str)] = &[
    (0x1, "definition levels run past the page"),
    (0x2, "an RLE/bit-packed run is cut short or malformed"),
    (0x4, "a dictionary index is out of range"),
    (0x8, "values run past the page"),
    (0x10, "an encoding the GPU does not decode"),
    (0x20, "a bit width over 32"),
    (0x40, "dictionary-encoded values without a dictionary page"),
];

/// Mirror of `struct PageInfo` in `kernels/page_headers.cu` (64 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageInfo {
    /// Offset of the header from the start of the chunk.
    pub header_offset: i64,
    /// Offset of the page data (`header_offset` + header length).
    pub data_offset: i64,
    /// Page kind (0 data v1, 1 index, 2 dictionary, 3 data v2).
    pub kind: i32,
    /// Page data bytes after decompression.
    pub uncompressed_size: i32,
    /// Page data bytes as stored.
    pub compressed_size: i32,
    /// Values (nulls included).
    pub num_values: i32,
    /// Value encoding.
    pub encoding: i32,
    /// v1: definition level encoding.
    pub def_level_encoding: i32,
    /// v1: repetition level encoding.
    pub rep_level_encoding: i32,
    /// v2: nulls.
    pub num_nulls: i32,
    /// v2: rows.
    pub num_rows: i32,
    /// v2: definition level bytes.
    pub def_levels_len: i32,
    /// v2: repetition level bytes.
    pub rep_levels_len: i32,
    /// v2: values compressed (1) or not (0).
    pub is_compressed: i32,
}

/// Error bits the page-header kernel sets per chunk, with their meaning.
pub const PAGE_HEADER_ERRORS: &[(u32, &str)] = &[
    (0x1, "a page header ends past the chunk"),
    (0x2, "a header field has an unexpected type or value"),
    (0x4, "a negative or inconsistent size or count"),
    (0x8, "page data runs past the chunk"),
    (0x10, "header nesting deeper than 16"),
    (0x20, "a required header field is missing"),
    (0x40, "the page count changed between passes"),
];

/// The meaning of the error bits `bits`, joined.
pub fn describe_errors(bits: u32, table: &[(u32, &str)]) -> String {
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
        assert_eq!(b[16], 3);
        assert_eq!(b[24], 4);
        assert_eq!(b[48], 9);
        let c = ColumnJob {
            null_count: 7,
            conversion: 5,
            ..ColumnJob::default()
        };
        let b = c.to_bytes();
        assert_eq!(b[24], 7);
        assert_eq!(b[44], 5);
    }

    #[test]
    fn snappy_constants_match_the_kernel() {
        let define = |name: &str| -> u64 {
            let line = SNAPPY
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} in snappy.cu"));
            line.split_whitespace().nth(2).unwrap().parse().unwrap()
        };
        assert_eq!(define("SNAPPY_THREADS"), u64::from(SNAPPY_THREADS));
        assert_eq!(define("SNAPPY_FRAGMENT"), SNAPPY_FRAGMENT);
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
    /// installed (no GPU needed); prints why it is skipped elsewhere.
    #[test]
    fn kernels_compile_with_nvrtc() {
        if let Err(e) = crate::device::nvrtc::nvrtc_version() {
            eprintln!("skipping the NVRTC compile check: {e}");
            return;
        }
        for (name, src) in MODULES {
            for arch in ["sm_90", "sm_80"] {
                let cubin = crate::device::nvrtc::compile_cubin(name, src, arch, &[])
                    .unwrap_or_else(|e| panic!("{name} for {arch}: {e}"));
                assert!(cubin.starts_with(b"\x7fELF"), "{name}: not an ELF image");
            }
        }
    }
}
