//! Parquet page headers (Thrift compact protocol), parsed without the parquet crate.
//!
//! The parquet crate keeps its page-header decoder private, and the GPU decoder parses headers
//! on the device; this is the host twin of that parser: the same fields, the same bounds
//! checks, used to cross-check the device parser and to fuzz on the host. Every length and
//! offset is checked against the bytes given; malformed input is an error naming the byte
//! offset and what was wrong, never a panic.
//!
//! [`page_table`] walks a whole column chunk: header, then `compressed_page_size` bytes of
//! page data, until the chunk ends — which must be exactly at a page boundary.

use std::fmt;

use super::thrift::{ty, Reader, MAX_DEPTH as THRIFT_DEPTH};

/// Nesting deeper than this (structs in structs, lists of lists) is refused.
pub const MAX_DEPTH: usize = THRIFT_DEPTH;

/// The kind of a page (`PageType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum PageKind {
    /// `DATA_PAGE` (v1).
    DataV1,
    /// `INDEX_PAGE`.
    Index,
    /// `DICTIONARY_PAGE`.
    Dictionary,
    /// `DATA_PAGE_V2`.
    DataV2,
}

impl PageKind {
    fn from_i32(v: i32) -> Option<Self> {
        Some(match v {
            0 => PageKind::DataV1,
            1 => PageKind::Index,
            2 => PageKind::Dictionary,
            3 => PageKind::DataV2,
            _ => return None,
        })
    }
}

/// `DataPageHeader` (v1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct DataPageV1 {
    /// Values, nulls included.
    pub num_values: i32,
    /// Encoding of the values (Parquet `Encoding` number).
    pub encoding: i32,
    /// Encoding of the definition levels.
    pub def_level_encoding: i32,
    /// Encoding of the repetition levels.
    pub rep_level_encoding: i32,
}

/// `DictionaryPageHeader`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct DictionaryPage {
    /// Entries.
    pub num_values: i32,
    /// Encoding of the entries (PLAIN or PLAIN_DICTIONARY).
    pub encoding: i32,
    /// Whether the entries are sorted.
    pub is_sorted: Option<bool>,
}

/// `DataPageHeaderV2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct DataPageV2 {
    /// Values, nulls included.
    pub num_values: i32,
    /// Nulls.
    pub num_nulls: i32,
    /// Rows.
    pub num_rows: i32,
    /// Encoding of the values.
    pub encoding: i32,
    /// Bytes of definition levels (uncompressed, at the start of the page data).
    pub def_levels_byte_length: i32,
    /// Bytes of repetition levels (uncompressed, before the definition levels).
    pub rep_levels_byte_length: i32,
    /// Whether the values section is compressed (default true).
    pub is_compressed: bool,
}

/// A parsed page header.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PageHeader {
    /// The page's kind.
    pub kind: PageKind,
    /// Page data bytes after decompression.
    pub uncompressed_size: i32,
    /// Page data bytes as stored (after the header).
    pub compressed_size: i32,
    /// CRC32 of the page data, when written.
    pub crc: Option<i32>,
    /// For v1 data pages.
    pub data_v1: Option<DataPageV1>,
    /// For dictionary pages.
    pub dictionary: Option<DictionaryPage>,
    /// For v2 data pages.
    pub data_v2: Option<DataPageV2>,
    /// Bytes the header itself takes.
    pub header_len: usize,
}

impl PageHeader {
    /// Values in the page (0 for index pages).
    pub fn num_values(&self) -> i32 {
        self.data_v1
            .map(|d| d.num_values)
            .or(self.dictionary.map(|d| d.num_values))
            .or(self.data_v2.map(|d| d.num_values))
            .unwrap_or(0)
    }
}

/// What was wrong with a header, and where (byte offset from the start of the bytes given).
pub use crate::metadata::thrift::ThriftError as HeaderError;

/// (boxed inside, as the reader's: see `thrift::R`)
type R<T> = std::result::Result<T, Box<HeaderError>>;

// the page-header structs, read with the crate's compact-protocol reader
impl Reader<'_> {
    fn data_v1(&mut self) -> R<DataPageV1> {
        let mut d = DataPageV1::default();
        let mut seen = [false; 4];
        let mut last = 0i16;
        while let Some((id, t)) = self.field(&mut last)? {
            match id {
                1..=4 => {
                    self.expect(t, ty::I32, "a DataPageHeader field")?;
                    let v = self.i32()?;
                    seen[id as usize - 1] = true;
                    match id {
                        1 => d.num_values = v,
                        2 => d.encoding = v,
                        3 => d.def_level_encoding = v,
                        _ => d.rep_level_encoding = v,
                    }
                }
                _ => self.skip(t, 1)?,
            }
        }
        if let Some(k) = seen.iter().position(|s| !s) {
            return self.err(format!("DataPageHeader lacks required field {}", k + 1));
        }
        Ok(d)
    }

    fn dictionary(&mut self) -> R<DictionaryPage> {
        let mut d = DictionaryPage::default();
        let mut seen = [false; 2];
        let mut last = 0i16;
        while let Some((id, t)) = self.field(&mut last)? {
            match id {
                1 | 2 => {
                    self.expect(t, ty::I32, "a DictionaryPageHeader field")?;
                    let v = self.i32()?;
                    seen[id as usize - 1] = true;
                    if id == 1 {
                        d.num_values = v;
                    } else {
                        d.encoding = v;
                    }
                }
                3 => d.is_sorted = Some(self.bool_of(t)?),
                _ => self.skip(t, 1)?,
            }
        }
        if let Some(k) = seen.iter().position(|s| !s) {
            return self.err(format!(
                "DictionaryPageHeader lacks required field {}",
                k + 1
            ));
        }
        Ok(d)
    }

    fn data_v2(&mut self) -> R<DataPageV2> {
        let mut d = DataPageV2 {
            is_compressed: true,
            ..DataPageV2::default()
        };
        let mut seen = [false; 6];
        let mut last = 0i16;
        while let Some((id, t)) = self.field(&mut last)? {
            match id {
                1..=6 => {
                    self.expect(t, ty::I32, "a DataPageHeaderV2 field")?;
                    let v = self.i32()?;
                    seen[id as usize - 1] = true;
                    match id {
                        1 => d.num_values = v,
                        2 => d.num_nulls = v,
                        3 => d.num_rows = v,
                        4 => d.encoding = v,
                        5 => d.def_levels_byte_length = v,
                        _ => d.rep_levels_byte_length = v,
                    }
                }
                7 => d.is_compressed = self.bool_of(t)?,
                _ => self.skip(t, 1)?,
            }
        }
        if let Some(k) = seen.iter().position(|s| !s) {
            return self.err(format!("DataPageHeaderV2 lacks required field {}", k + 1));
        }
        Ok(d)
    }
}

/// Parses the page header at the start of `buf`.
pub fn parse_page_header(buf: &[u8]) -> std::result::Result<PageHeader, HeaderError> {
    parse(buf).map_err(|e| *e)
}

fn parse(buf: &[u8]) -> R<PageHeader> {
    let mut r = Reader::new(buf, "the header");
    let mut kind = None;
    let (mut uncompressed, mut compressed, mut crc) = (None, None, None);
    let (mut v1, mut dict, mut v2) = (None, None, None);
    let mut last = 0i16;
    while let Some((id, t)) = r.field(&mut last)? {
        match id {
            1 => {
                r.expect(t, ty::I32, "PageHeader.type")?;
                let at = r.pos;
                let v = r.i32()?;
                kind = Some(PageKind::from_i32(v).ok_or_else(|| {
                    Box::new(HeaderError {
                        offset: at,
                        reason: format!("unknown page type {v}"),
                    })
                })?);
            }
            2..=4 => {
                r.expect(t, ty::I32, "a PageHeader size field")?;
                let v = r.i32()?;
                match id {
                    2 => uncompressed = Some(v),
                    3 => compressed = Some(v),
                    _ => crc = Some(v),
                }
            }
            5 => {
                r.expect(t, ty::STRUCT, "PageHeader.data_page_header")?;
                v1 = Some(r.data_v1()?);
            }
            7 => {
                r.expect(t, ty::STRUCT, "PageHeader.dictionary_page_header")?;
                dict = Some(r.dictionary()?);
            }
            8 => {
                r.expect(t, ty::STRUCT, "PageHeader.data_page_header_v2")?;
                v2 = Some(r.data_v2()?);
            }
            _ => r.skip(t, 1)?,
        }
    }
    let Some(kind) = kind else {
        return r.err("the page header has no page type");
    };
    let (Some(uncompressed_size), Some(compressed_size)) = (uncompressed, compressed) else {
        return r.err("the page header lacks a page size");
    };
    if uncompressed_size < 0 || compressed_size < 0 {
        return r.err(format!(
            "negative page size (compressed {compressed_size}, uncompressed {uncompressed_size})"
        ));
    }
    let missing = match kind {
        PageKind::DataV1 if v1.is_none() => Some("data_page_header"),
        PageKind::Dictionary if dict.is_none() => Some("dictionary_page_header"),
        PageKind::DataV2 if v2.is_none() => Some("data_page_header_v2"),
        _ => None,
    };
    if let Some(m) = missing {
        return r.err(format!("a {kind:?} page without its {m}"));
    }
    if let Some(d) = v1
        .as_ref()
        .map(|d| d.num_values)
        .or(dict.map(|d| d.num_values))
    {
        if d < 0 {
            return r.err(format!("negative value count {d}"));
        }
    }
    if let Some(d) = &v2 {
        let levels = i64::from(d.def_levels_byte_length) + i64::from(d.rep_levels_byte_length);
        if d.num_values < 0
            || d.num_nulls < 0
            || d.num_rows < 0
            || d.def_levels_byte_length < 0
            || d.rep_levels_byte_length < 0
            || levels > i64::from(compressed_size)
            || d.num_nulls > d.num_values
        {
            return r.err(format!(
                "inconsistent v2 header: {} values, {} nulls, {} rows, levels {}+{} bytes of a {compressed_size}-byte page",
                d.num_values,
                d.num_nulls,
                d.num_rows,
                d.rep_levels_byte_length,
                d.def_levels_byte_length
            ));
        }
    }
    Ok(PageHeader {
        kind,
        uncompressed_size,
        compressed_size,
        crc,
        data_v1: v1,
        dictionary: dict,
        data_v2: v2,
        header_len: r.pos,
    })
}

/// One page of a column chunk.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PageEntry {
    /// Byte offset of the header within the chunk.
    pub offset: usize,
    /// The header.
    pub header: PageHeader,
}

impl PageEntry {
    /// The page data's bytes within the chunk.
    pub fn data(&self) -> std::ops::Range<usize> {
        let start = self.offset + self.header.header_len;
        start..start + self.header.compressed_size as usize
    }
}

/// Why a chunk's page walk failed: the page index, and the header error (offsets from the start
/// of the chunk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageTableError {
    /// Index of the page whose header or size is bad.
    pub page: usize,
    /// Offset and reason, relative to the chunk.
    pub error: HeaderError,
}

impl fmt::Display for PageTableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "page {}, {}", self.page, self.error)
    }
}

impl std::error::Error for PageTableError {}

/// Walks every page of a column chunk. The pages must end exactly where the chunk does.
pub fn page_table(chunk: &[u8]) -> std::result::Result<Vec<PageEntry>, PageTableError> {
    let mut pages = Vec::new();
    let mut off = 0usize;
    while off < chunk.len() {
        let page = pages.len();
        let h = parse_page_header(&chunk[off..]).map_err(|e| PageTableError {
            page,
            error: HeaderError {
                offset: off + e.offset,
                reason: e.reason,
            },
        })?;
        let end = off as u64 + h.header_len as u64 + h.compressed_size as u64;
        if end > chunk.len() as u64 {
            return Err(PageTableError {
                page,
                error: HeaderError {
                    offset: off,
                    reason: format!(
                        "page data of {} bytes after a {}-byte header runs past the chunk's end at {}",
                        h.compressed_size,
                        h.header_len,
                        chunk.len()
                    ),
                },
            });
        }
        pages.push(PageEntry {
            offset: off,
            header: h,
        });
        off = end as usize;
    }
    Ok(pages)
}

/// [`page_table`] of the parts `parts` of `chunk` (offsets within it, ascending: the parts of
/// a chunk that reads only some pages), each walked on its own; offsets and page indices count
/// from the chunk's first byte and first page.
pub fn page_table_of_parts(
    chunk: &[u8],
    parts: impl IntoIterator<Item = std::ops::Range<usize>>,
) -> std::result::Result<Vec<PageEntry>, PageTableError> {
    let mut pages: Vec<PageEntry> = Vec::new();
    for part in parts {
        let bytes = chunk.get(part.clone()).ok_or_else(|| PageTableError {
            page: pages.len(),
            error: HeaderError {
                offset: part.start,
                reason: format!(
                    "a part read ({}..{}) lies outside the chunk",
                    part.start, part.end
                ),
            },
        })?;
        let found = page_table(bytes).map_err(|e| PageTableError {
            page: pages.len() + e.page,
            error: HeaderError {
                offset: part.start + e.error.offset,
                reason: e.error.reason,
            },
        })?;
        pages.extend(found.into_iter().map(|mut p| {
            p.offset += part.start;
            p
        }));
    }
    Ok(pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compact-protocol writer for the tests.
    #[derive(Default)]
    struct W(Vec<u8>, Vec<i16>);

    impl W {
        fn varint(&mut self, mut v: u64) {
            loop {
                let b = (v & 0x7f) as u8;
                v >>= 7;
                if v == 0 {
                    self.0.push(b);
                    return;
                }
                self.0.push(b | 0x80);
            }
        }
        fn field(&mut self, id: i16, t: u8) {
            let last = self.1.last().copied().unwrap_or(0);
            let d = id - last;
            if (1..=15).contains(&d) {
                self.0.push(((d as u8) << 4) | t);
            } else {
                self.0.push(t);
                self.varint(((i64::from(id) << 1) ^ (i64::from(id) >> 63)) as u64);
            }
            if let Some(l) = self.1.last_mut() {
                *l = id;
            }
        }
        fn i32(&mut self, id: i16, v: i32) {
            self.field(id, ty::I32);
            self.varint(((v << 1) ^ (v >> 31)) as u32 as u64);
        }
        fn begin(&mut self, id: i16) {
            self.field(id, ty::STRUCT);
            self.1.push(0);
        }
        fn end(&mut self) {
            self.0.push(0);
            self.1.pop();
        }
    }

    fn v1_header(values: i32, size: i32) -> Vec<u8> {
        let mut w = W(Vec::new(), vec![0]);
        w.i32(1, 0);
        w.i32(2, size);
        w.i32(3, size);
        w.begin(5);
        w.i32(1, values);
        w.i32(2, 0);
        w.i32(3, 3);
        w.i32(4, 3);
        // statistics struct with a binary max, to be skipped
        w.begin(5);
        w.field(1, ty::BINARY);
        w.varint(3);
        w.0.extend_from_slice(b"abc");
        w.end();
        w.end();
        w.end();
        w.0
    }

    #[test]
    fn parses_a_v1_header_and_walks_pages() {
        let h = v1_header(100, 40);
        let p = parse_page_header(&h).unwrap();
        assert_eq!(p.kind, PageKind::DataV1);
        assert_eq!(p.compressed_size, 40);
        assert_eq!(p.header_len, h.len());
        assert_eq!(p.num_values(), 100);
        assert_eq!(p.data_v1.unwrap().def_level_encoding, 3);
        let mut chunk = h.clone();
        chunk.extend(std::iter::repeat_n(7u8, 40));
        chunk.extend(v1_header(5, 3));
        chunk.extend([1, 2, 3]);
        let t = page_table(&chunk).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].offset, h.len() + 40);
        assert_eq!(&chunk[t[1].data()], &[1, 2, 3]);
    }

    #[test]
    fn errors_name_the_offset() {
        let h = v1_header(100, 40);
        let e = parse_page_header(&h[..h.len() - 3]).unwrap_err();
        assert!(e.reason.contains("ends early"), "{e}");
        let mut chunk = h.clone();
        chunk.extend([0u8; 10]); // 30 bytes short
        let e = page_table(&chunk).unwrap_err();
        assert_eq!(e.page, 0);
        assert!(e.to_string().contains("runs past the chunk's end"), "{e}");
        // negative size
        let mut w = W(Vec::new(), vec![0]);
        w.i32(1, 2);
        w.i32(2, 5);
        w.i32(3, -5);
        w.begin(7);
        w.i32(1, 1);
        w.i32(2, 0);
        w.end();
        w.end();
        let e = parse_page_header(&w.0).unwrap_err();
        assert!(e.reason.contains("negative page size"), "{e}");
        // a data page without its data_page_header
        let mut w = W(Vec::new(), vec![0]);
        w.i32(1, 0);
        w.i32(2, 5);
        w.i32(3, 5);
        w.end();
        let e = parse_page_header(&w.0).unwrap_err();
        assert!(e.reason.contains("without its data_page_header"), "{e}");
    }

    #[test]
    fn a_map_of_booleans_claiming_2_to_the_50_entries_ends_at_once() {
        // found by the page_header fuzz target (a 30 s timeout): a PageHeader field 15 of
        // map type, a count of ~2^50, boolean keys and values
        let mut h = vec![0x15, 0x04, 0xeb, 0xff, 0xea, 0xed, 0xb3, 0xea, 0xff, 0xe6, 0x00, 0x12];
        h.extend_from_slice(&[0u8; 64]);
        let t = std::time::Instant::now();
        let e = parse_page_header(&h).unwrap_err();
        assert!(e.reason.contains("entries in fewer bytes"), "{e}");
        assert!(t.elapsed().as_secs() < 1);
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let base = v1_header(1000, 20);
        for n in 0..20_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let mut b = base.clone();
            if n % 2 == 0 {
                for _ in 0..1 + s % 4 {
                    let i = (s as usize >> 8) % b.len();
                    b[i] ^= (s >> 32) as u8 | 1;
                    s = s.rotate_left(11);
                }
            } else {
                b = (0..(s % 64) as usize)
                    .map(|k| (s >> (k % 57)) as u8)
                    .collect();
            }
            let _ = parse_page_header(&b);
            let _ = page_table(&b);
        }
    }
}
