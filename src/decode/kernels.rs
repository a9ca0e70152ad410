//! CUDA C sources of the GPU decoder, embedded in the crate and compiled by NVRTC on first use
//! for the device's architecture (cached on disk by [`device::nvrtc`](crate::device::nvrtc)),
//! with the Rust mirrors of the structures they share with the host.

/// Page headers parsed on the device (the twin of [`page_header`](super::page_header)).
pub const PAGE_HEADERS: &str = include_str!("kernels/page_headers.cu");

/// Every kernel module: (name, source).
pub const MODULES: &[(&str, &str)] = &[("page_headers", PAGE_HEADERS)];

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
