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

/// Where a page's data comes from: stored as it is (uncompressed, or a v2 page whose values
/// are not compressed or empty), or compressed values behind uncompressed v2 levels.
enum PageSource<'a> {
    Stored(&'a [u8]),
    Compressed { levels: &'a [u8], values: &'a [u8] },
}

/// Splits page `index` of `chunk` into what is stored and what must be decompressed, checked
/// against the header; and the decompressed size the header promises.
fn page_source<'a>(
    chunk: &'a [u8],
    index: usize,
    p: &PageEntry,
    codec: Compression,
) -> Result<(PageSource<'a>, usize), PageTableError> {
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
    let data = &chunk[range];
    let want = p.header.uncompressed_size.max(0) as usize;
    // v2: levels are stored uncompressed in front of the (maybe compressed) values
    let (levels, values_compressed) = match &p.header.data_v2 {
        Some(v2) => (
            v2.rep_levels_byte_length.max(0) as usize + v2.def_levels_byte_length.max(0) as usize,
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
        return Ok((PageSource::Stored(data), want));
    }
    let (levels, values) = data.split_at(levels);
    // what the header claims, checked before anything of that size is allocated
    let want_values = (want - levels.len()) as u64;
    crate::decode::claims::check_inflated_size(codec, values, values.len() as u64, want_values)
        .map_err(|reason| page_error(index, p.offset, reason))?;
    Ok((PageSource::Compressed { levels, values }, want))
}

/// Decompresses `values` (written with `codec`) of page `index` into `out`, which is exactly
/// the decompressed size: SNAPPY straight into it (a large page over several cores when
/// `split`, [`snappy_host`](super::snappy_host)), other codecs by the parquet crate's codec.
fn decompress_values(
    values: &[u8],
    out: &mut [u8],
    index: usize,
    p: &PageEntry,
    codec: Compression,
    split: bool,
) -> Result<(), PageTableError> {
    let fail = |what: String| page_error(index, p.offset, format!("{codec:?} {what}"));
    if codec == Compression::SNAPPY {
        return crate::error::panic_guard::contain(|| {
            crate::decode::snappy_host::decompress_into(values, out, split)
        })
        .map_err(|panic| {
            fail(format!(
                "decompression panicked: {}",
                crate::metadata::rephrase(panic)
            ))
        })?
        .map_err(|e| fail(format!("decompression failed: {e}")));
    }
    if matches!(codec, Compression::GZIP(_) | Compression::BROTLI(_)) {
        // inflated into the header's size and no further: a bomb stops at its claim
        return crate::error::panic_guard::contain(|| inflate_bounded(codec, values, out))
            .map_err(|panic| {
                fail(format!(
                    "decompression panicked: {}",
                    crate::metadata::rephrase(panic)
                ))
            })?
            .map_err(fail);
    }
    crate::error::panic_guard::contain(|| by_parquet_codec(codec, values, out))
        .map_err(|panic| {
            fail(format!(
                "decompression panicked: {}",
                crate::metadata::rephrase(panic)
            ))
        })?
        .map_err(|fault| match fault {
            CodecFault::NoCodec(reason) => page_error(index, p.offset, reason),
            CodecFault::Failed(e) => fail(format!("decompression failed: {e}")),
            CodecFault::Size(got) => fail(format!(
                "decompressed to {got} bytes of values, the header leaves {}",
                out.len()
            )),
        })
}

/// Why [`by_parquet_codec`] did not fill its output.
enum CodecFault {
    /// The parquet crate has no such codec (or would not make one).
    NoCodec(String),
    /// The codec refused the data.
    Failed(String),
    /// It decompressed to this many bytes, not the output's length.
    Size(usize),
}

/// Decompresses `values` by the parquet crate's own codec for `codec` (with the framings it
/// falls back to, e.g. LZ4's) into `out`, which it must fill exactly. Panics are the callers'
/// to contain.
fn by_parquet_codec(codec: Compression, values: &[u8], out: &mut [u8]) -> Result<(), CodecFault> {
    let options = CodecOptionsBuilder::default().build();
    let mut c = match create_codec(codec, &options) {
        Ok(Some(c)) => c,
        Ok(None) => return Err(CodecFault::NoCodec(format!("no codec for {codec:?}"))),
        Err(e) => return Err(CodecFault::NoCodec(e.to_string())),
    };
    let mut v = Vec::with_capacity(out.len());
    let got = c
        .decompress(values, &mut v, Some(out.len()))
        .map_err(|e| CodecFault::Failed(e.to_string()))?;
    if got != out.len() || v.len() != out.len() {
        return Err(CodecFault::Size(got));
    }
    out.copy_from_slice(&v);
    Ok(())
}

/// Inflates GZIP (every member) or BROTLI `values` into `out`, which must come out exactly
/// full: a stream that ends early or holds more is an error, found without inflating past
/// `out`'s length (plus one byte).
pub(crate) fn inflate_bounded(
    codec: Compression,
    values: &[u8],
    out: &mut [u8],
) -> Result<(), String> {
    use std::io::Read;
    let mut r: Box<dyn Read + '_> = match codec {
        Compression::GZIP(_) => Box::new(flate2::read::MultiGzDecoder::new(values)),
        _ => Box::new(brotli::Decompressor::new(values, 4096)),
    };
    let mut got = 0;
    while got < out.len() {
        match r.read(&mut out[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("decompression failed: {e}")),
        }
    }
    if got < out.len() {
        return Err(format!(
            "decompressed to {got} bytes of values, the header leaves {}",
            out.len()
        ));
    }
    let mut more = [0u8; 1];
    match r.read(&mut more) {
        Ok(0) => Ok(()),
        Ok(_) => Err(format!(
            "data inflates past the {} bytes of values the header leaves",
            out.len()
        )),
        Err(e) => Err(format!("decompression failed: {e}")),
    }
}

/// Decompresses `src` (ZSTD, LZ4_RAW, LZ4 or GZIP data) into `dst`, which it must fill exactly:
/// ZSTD and LZ4_RAW straight into it (no intermediate buffer), GZIP through
/// [`inflate_bounded`], LZ4 (Hadoop's framing or the ones arrow-rs tries after it) by the
/// parquet crate's codec. Used for the pages the host takes beside nvCOMP, where a failure only
/// sends the page's chunk to [`decompress_page_into`], which names what is wrong; never panics.
pub(crate) fn decompress_exact(codec: Compression, src: &[u8], dst: &mut [u8]) -> Result<(), String> {
    let n = dst.len();
    let exact = |got: usize| {
        (got == n)
            .then_some(())
            .ok_or_else(|| format!("decompressed to {got} bytes, not {n}"))
    };
    crate::error::panic_guard::contain(|| match codec {
        Compression::ZSTD(_) => zstd::bulk::decompress_to_buffer(src, dst)
            .map_err(|e| e.to_string())
            .and_then(exact),
        Compression::LZ4_RAW => lz4_flex::block::decompress_into(src, dst)
            .map_err(|e| e.to_string())
            .and_then(exact),
        Compression::GZIP(_) => inflate_bounded(codec, src, dst),
        // Hadoop-framed LZ4, and the framings arrow-rs tries after it: its own codec
        Compression::LZ4 => by_parquet_codec(codec, src, dst).map_err(|fault| match fault {
            CodecFault::NoCodec(e) | CodecFault::Failed(e) => e,
            CodecFault::Size(got) => format!("decompressed to {got} bytes, not {n}"),
        }),
        other => Err(format!("{other:?} is not decompressed here")),
    })?
}

/// Decompresses one page.
pub fn decompress_page(
    chunk: &Bytes,
    index: usize,
    p: &PageEntry,
    codec: Compression,
) -> Result<PageData, PageTableError> {
    let (source, want) = page_source(chunk, index, p, codec)?;
    match source {
        PageSource::Stored(data) => Ok(PageData {
            page: index,
            bytes: chunk.slice_ref(data),
            host_decompressed: false,
        }),
        PageSource::Compressed { levels, values } => {
            let mut out = vec![0u8; want];
            out[..levels.len()].copy_from_slice(levels);
            decompress_values(values, &mut out[levels.len()..], index, p, codec, false)?;
            Ok(PageData {
                page: index,
                bytes: Bytes::from(out),
                host_decompressed: true,
            })
        }
    }
}

/// The first `n` bytes (fewer where the page is shorter) of page `index`'s decompressed data,
/// decompressing no further than that where the codec allows ([`prefix`](super::prefix)).
pub(crate) fn page_prefix(
    chunk: &Bytes,
    index: usize,
    p: &PageEntry,
    codec: Compression,
    n: usize,
) -> Result<Bytes, PageTableError> {
    let (source, want) = page_source(chunk, index, p, codec)?;
    match source {
        PageSource::Stored(data) => Ok(chunk.slice_ref(&data[..n.min(data.len())])),
        PageSource::Compressed { levels, values } => {
            let Some(values) =
                super::prefix::prefix(codec, values, want - levels.len(), n.saturating_sub(levels.len()))
            else {
                let whole = decompress_page(chunk, index, p, codec)?.bytes;
                return Ok(whole.slice(..n.min(whole.len())));
            };
            let values = values
                .map_err(|e| page_error(index, p.offset, format!("{codec:?} decompression failed: {e}")))?;
            let mut out = levels[..n.min(levels.len())].to_vec();
            out.extend_from_slice(&values);
            Ok(Bytes::from(out))
        }
    }
}

/// The decompressed size of page `index` as its header states it (what
/// [`decompress_page_into`] needs), after the same checks.
pub fn decompressed_size(
    chunk: &[u8],
    index: usize,
    p: &PageEntry,
    codec: Compression,
) -> Result<usize, PageTableError> {
    page_source(chunk, index, p, codec).map(|(_, want)| want)
}

/// Decompresses page `index` of `chunk` into `out`, which must be exactly its
/// [`decompressed_size`] (e.g. a slice of a pinned upload buffer), a large SNAPPY page over
/// several cores when `split`; whether the page needed decompressing.
pub fn decompress_page_into(
    chunk: &[u8],
    index: usize,
    p: &PageEntry,
    codec: Compression,
    out: &mut [u8],
    split: bool,
) -> Result<bool, PageTableError> {
    let (source, want) = page_source(chunk, index, p, codec)?;
    if out.len() != want {
        return Err(page_error(
            index,
            p.offset,
            format!("{} bytes of room for a page of {want}", out.len()),
        ));
    }
    match source {
        PageSource::Stored(data) => {
            out.copy_from_slice(data);
            Ok(false)
        }
        PageSource::Compressed { levels, values } => {
            let (l, v) = out.split_at_mut(levels.len());
            l.copy_from_slice(levels);
            decompress_values(values, v, index, p, codec, split)?;
            Ok(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decompress_exact_fills_its_output_or_says_why() {
        use std::io::Write;
        let raw: Vec<u8> = (0..10_000u32).flat_map(|i| (i % 97).to_le_bytes()).collect();
        let zstd = zstd::bulk::compress(&raw, 1).unwrap();
        let lz4 = lz4_flex::block::compress(&raw);
        let mut gzip = Vec::new();
        let mut w = flate2::write::GzEncoder::new(&mut gzip, flate2::Compression::default());
        w.write_all(&raw).unwrap();
        w.finish().unwrap();
        // one Hadoop frame: decompressed and compressed sizes (big-endian), the LZ4 block
        let mut hadoop = (raw.len() as u32).to_be_bytes().to_vec();
        hadoop.extend((lz4.len() as u32).to_be_bytes());
        hadoop.extend(&lz4);
        for (codec, data) in [
            (Compression::ZSTD(Default::default()), &zstd),
            (Compression::LZ4_RAW, &lz4),
            (Compression::GZIP(Default::default()), &gzip),
            (Compression::LZ4, &hadoop),
        ] {
            let mut out = vec![0u8; raw.len()];
            assert_eq!(decompress_exact(codec, data, &mut out), Ok(()), "{codec:?}");
            assert_eq!(out, raw, "{codec:?}");
            // an output of the wrong size, and damaged data: errors, never a panic
            let mut long = vec![0u8; raw.len() + 1];
            assert!(decompress_exact(codec, data, &mut long).is_err(), "{codec:?}");
            let mut short = vec![0u8; raw.len() - 1];
            assert!(decompress_exact(codec, data, &mut short).is_err(), "{codec:?}");
            let mut bad = data.clone();
            bad.truncate(data.len() / 2);
            assert!(decompress_exact(codec, &bad, &mut out).is_err(), "{codec:?}");
        }
        let mut out = [0u8; 4];
        assert!(decompress_exact(Compression::SNAPPY, &[4, 0, 1, 2, 3], &mut out).is_err());
    }
}
