//! Page decompression on the host, page by page, in parallel.
//!
//! The GPU decoder decompresses SNAPPY pages on the device; pages of every other codec (GZIP,
//! ZSTD, LZ4, LZ4_RAW, BROTLI) are decompressed here with the parquet crate's own codecs (the
//! same crates, the same framing fallbacks) and uploaded. The output of a page is what the
//! decoder expects: for v1 pages and dictionary pages the whole decompressed page; for v2 data
//! pages the uncompressed repetition and definition levels followed by the decompressed values
//! (or the values as stored when `is_compressed` is false). Each output is checked to be
//! exactly the header's `uncompressed_page_size`.

use bytes::Bytes;
use parquet::basic::Compression;
use parquet::compression::{create_codec, CodecOptionsBuilder};
use rayon::prelude::*;

use crate::decode::page_header::{HeaderError, PageEntry, PageKind, PageTableError};

/// A page's bytes ready to decode.
#[derive(Debug, Clone)]
pub struct PageData {
    /// Index of the page in the chunk's page table.
    pub page: usize,
    /// The decompressed page data.
    pub bytes: Bytes,
    /// Whether the host decompressed it (false for uncompressed pages, which are a slice of
    /// the chunk).
    pub host_decompressed: bool,
}

fn page_error(page: usize, offset: usize, reason: String) -> PageTableError {
    PageTableError {
        page,
        error: HeaderError { offset, reason },
    }
}

/// Decompresses the data of `pages` (from [`page_table`](super::page_header::page_table) over
/// `chunk`) written with `codec`, in parallel on the current rayon pool. Index pages are
/// skipped. Errors name the page and its offset in the chunk.
pub fn decompress_pages(
    chunk: &Bytes,
    pages: &[PageEntry],
    codec: Compression,
) -> Result<Vec<PageData>, PageTableError> {
    pages
        .par_iter()
        .enumerate()
        .filter(|(_, p)| p.header.kind != PageKind::Index)
        .map(|(i, p)| decompress_page(chunk, i, p, codec))
        .collect()
}

/// Decompresses one page.
pub fn decompress_page(
    chunk: &Bytes,
    index: usize,
    p: &PageEntry,
    codec: Compression,
) -> Result<PageData, PageTableError> {
    let range = p.data();
    if range.end > chunk.len() {
        return Err(page_error(
            index,
            p.offset,
            format!(
                "page data {}..{} runs past the {}-byte chunk",
                range.start,
                range.end,
                chunk.len()
            ),
        ));
    }
    let data = chunk.slice(range);
    let want = p.header.uncompressed_size as usize;
    // v2: levels are stored uncompressed in front of the (maybe compressed) values
    let (levels, values_compressed) = match &p.header.data_v2 {
        Some(v2) => (
            (v2.rep_levels_byte_length + v2.def_levels_byte_length) as usize,
            v2.is_compressed,
        ),
        None => (0, true),
    };
    if levels > data.len() || levels > want {
        return Err(page_error(
            index,
            p.offset,
            format!(
                "{levels} bytes of levels in a page of {} bytes ({want} uncompressed)",
                data.len()
            ),
        ));
    }
    // an empty values section (a v2 page of nulls only) has nothing to decompress
    let empty_values = data.len() == levels;
    if codec == Compression::UNCOMPRESSED || !values_compressed || empty_values {
        if data.len() != want {
            return Err(page_error(
                index,
                p.offset,
                format!(
                    "an uncompressed page (or values section) of {} bytes whose header says {want}",
                    data.len()
                ),
            ));
        }
        return Ok(PageData {
            page: index,
            bytes: data,
            host_decompressed: false,
        });
    }
    let options = CodecOptionsBuilder::default().build();
    let mut c = match create_codec(codec, &options) {
        Ok(Some(c)) => c,
        Ok(None) => {
            return Err(page_error(
                index,
                p.offset,
                format!("no codec for {codec:?}"),
            ))
        }
        Err(e) => return Err(page_error(index, p.offset, e.to_string())),
    };
    let mut out = Vec::with_capacity(want);
    out.extend_from_slice(&data[..levels]);
    let got = crate::decode::panic_guard::contain(|| {
        c.decompress(&data[levels..], &mut out, Some(want - levels))
    })
    .map_err(|panic| {
        page_error(
            index,
            p.offset,
            format!("{codec:?} decompression panicked: {panic}"),
        )
    })?
    .map_err(|e| {
        page_error(
            index,
            p.offset,
            format!("{codec:?} decompression failed: {e}"),
        )
    })?;
    if levels + got != want || out.len() != want {
        return Err(page_error(
            index,
            p.offset,
            format!(
                "{codec:?} decompressed to {} bytes, the header says {want}",
                levels + got
            ),
        ));
    }
    Ok(PageData {
        page: index,
        bytes: Bytes::from(out),
        host_decompressed: true,
    })
}
