//! What a page header claims, checked against what the page's bytes can hold before anything
//! is allocated by that claim: a header claiming 2^31 − 1 dictionary entries or uncompressed
//! bytes must be an error, not a 16 GiB allocation.
//!
//! Checked for every page before a decoder sees it:
//! - the uncompressed size is at most the load's page cap ([`MAX_PAGE_BYTES`] unless set: the
//!   largest single allocation a page may ask for);
//! - SNAPPY data: the length its own preamble states equals the header's uncompressed size (what
//!   it really decompresses to); LZ4 and GZIP data: the uncompressed size is within the codec's
//!   largest possible expansion of the compressed bytes; GZIP data: its trailer's size is not
//!   above the header's (a bomb claiming less is refused before it is inflated); ZSTD data: its
//!   frames' block headers allow the claim (`ZSTD_decompressBound`); BROTLI data
//!   (which states no size): inflated, without keeping it, to the header's size at most;
//! - uncompressed pages (v1 and dictionary pages) are as long as they claim;
//! - a dictionary page's entries fit its uncompressed bytes at their smallest width;
//! - v2 pages: level lengths, nulls and rows within the page's values and bytes.

use parquet::basic::{Compression, Type as PhysicalType};

use super::page_header::{PageEntry, PageKind};

#[cfg(doc)]
use crate::config::MAX_PAGE_BYTES;

/// What a chunk's pages are, from the column's metadata.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChunkKind {
    pub(crate) codec: Compression,
    pub(crate) physical: PhysicalType,
    /// FIXED_LEN_BYTE_ARRAY width.
    pub(crate) type_length: i32,
}

/// Largest output of `codec` per input byte (a bound, not a typical ratio): LZ4 writes at
/// most 255 bytes of a match per byte of its length continuation; DEFLATE at most 1,032 per
/// byte (258 bytes per 2-bit code, ×4); ZSTD at most a block's 128 KiB per block of at least
/// 4 bytes (an RLE block: a 3-byte header and the byte), 32,768 per byte.
fn expansion(codec: Compression) -> Option<u64> {
    match codec {
        Compression::LZ4 | Compression::LZ4_RAW => Some(255),
        Compression::GZIP(_) => Some(1_032),
        Compression::ZSTD(_) => Some(32_768),
        _ => None,
    }
}

/// The uncompressed length (mod 2^32) a GZIP member's trailer states (ISIZE, its last four
/// bytes), if the data starts like a GZIP member. For a stream of several members it is the
/// last one's, a lower bound of the whole.
fn gzip_isize(data: &[u8]) -> Option<u64> {
    if data.len() < 18 || data[..2] != [0x1f, 0x8b] {
        return None;
    }
    let t = &data[data.len() - 4..];
    Some(u64::from(u32::from_le_bytes([t[0], t[1], t[2], t[3]])))
}

/// The uncompressed length a SNAPPY stream states in its preamble (a varint), if readable.
fn snappy_len(data: &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for (i, b) in data.iter().take(5).enumerate() {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Checks `page` (of `chunk`, the bytes its offsets count from) against its claims: the
/// reason when a claim cannot be true.
pub(crate) fn check_page(
    page: &PageEntry,
    chunk: &[u8],
    kind: ChunkKind,
    max_page_bytes: u64,
) -> Result<(), String> {
    let h = &page.header;
    let (want, stored) = (h.uncompressed_size, h.compressed_size);
    if want < 0 || stored < 0 {
        return Err(format!(
            "negative page size (uncompressed {want}, compressed {stored})"
        ));
    }
    let (want, stored) = (want as u64, stored as u64);
    if want > max_page_bytes {
        return Err(format!(
            "the header claims {want} uncompressed bytes; pages of more than {max_page_bytes} are refused (CUPARQUET_MAX_PAGE_SIZE or with_max_page_size raise the cap)"
        ));
    }
    let data = chunk.get(page.data()).unwrap_or(&[]);
    // v2: levels are stored uncompressed in front of the values
    let mut levels = 0u64;
    let mut compressed = true;
    if let Some(v2) = &h.data_v2 {
        let (r, d) = (v2.rep_levels_byte_length, v2.def_levels_byte_length);
        if r < 0 || d < 0 {
            return Err(format!(
                "negative level lengths (repetition {r}, definition {d})"
            ));
        }
        levels = r as u64 + d as u64;
        if levels > want || levels > stored {
            return Err(format!(
                "{levels} bytes of levels in a page of {stored} bytes ({want} uncompressed)"
            ));
        }
        if v2.num_values < 0 || v2.num_nulls < 0 || v2.num_rows < 0 {
            return Err("negative value, null or row count".into());
        }
        if v2.num_nulls > v2.num_values || v2.num_rows > v2.num_values {
            return Err(format!(
                "{} nulls and {} rows in a page of {} values",
                v2.num_nulls, v2.num_rows, v2.num_values
            ));
        }
        compressed = v2.is_compressed;
    }
    if let Some(v1) = &h.data_v1 {
        if v1.num_values < 0 {
            return Err(format!("a negative value count ({})", v1.num_values));
        }
    }
    let values = data.get(levels as usize..).unwrap_or(&[]);
    let (want_values, stored_values) = (want - levels, stored - levels);
    if kind.codec == Compression::UNCOMPRESSED || !compressed {
        if want_values != stored_values && !matches!(h.kind, PageKind::Index) {
            return Err(format!(
                "an uncompressed page (or values section) of {stored_values} bytes whose header says {want_values}"
            ));
        }
    } else if stored_values > 0 || want_values > 0 {
        check_inflated_size(kind.codec, values, stored_values, want_values)?;
    }
    if let Some(dict) = &h.dictionary {
        let n = dict.num_values;
        if n < 0 {
            return Err(format!("a negative dictionary size ({n})"));
        }
        let bits = least_entry_bits(kind.physical, kind.type_length);
        if (n as u64).saturating_mul(bits) > want.saturating_mul(8) {
            return Err(format!(
                "the dictionary claims {n} entries; its {want} bytes hold at most {}",
                want.saturating_mul(8) / bits.max(1)
            ));
        }
    }
    Ok(())
}

/// The smallest a PLAIN dictionary entry of `physical` can be, in bits (a boolean's bit, a byte
/// array's 4-byte length, a fixed-width value's width; `type_length`: a FIXED_LEN_BYTE_ARRAY's):
/// a dictionary page's claimed entries are held to its bytes by it, on both paths, before
/// anything is sized by them.
pub(crate) fn least_entry_bits(physical: PhysicalType, type_length: i32) -> u64 {
    match physical {
        PhysicalType::BOOLEAN => 1,
        PhysicalType::INT32 | PhysicalType::FLOAT | PhysicalType::BYTE_ARRAY => 32,
        PhysicalType::INT64 | PhysicalType::DOUBLE => 64,
        PhysicalType::INT96 => 96,
        PhysicalType::FIXED_LEN_BYTE_ARRAY => 8 * type_length.max(0) as u64,
    }
}

/// The claims of [`check_page`] a page table parsed on the device can be checked against
/// without the page's bytes (the GPU decoder's tables, before anything is allocated by them):
/// the uncompressed size (`want`) within the page cap; values stored uncompressed (`codec`
/// UNCOMPRESSED, a v2 page not compressed) as long as claimed; LZ4, GZIP and ZSTD values within
/// the codec's largest expansion of the stored bytes (`stored`; `levels` of v2 levels in front of
/// the values in both). Index pages carry no values.
pub(crate) fn check_claimed_sizes(
    codec: Compression,
    want: i64,
    stored: i64,
    levels: i64,
    compressed: bool,
    index: bool,
    max_page_bytes: u64,
) -> Result<(), String> {
    if want < 0 || stored < 0 || levels < 0 {
        return Err(format!(
            "negative page size (uncompressed {want}, compressed {stored})"
        ));
    }
    let (want, stored, levels) = (want as u64, stored as u64, levels as u64);
    if want > max_page_bytes {
        return Err(format!(
            "the header claims {want} uncompressed bytes; pages of more than {max_page_bytes} are refused (CUPARQUET_MAX_PAGE_SIZE or with_max_page_size raise the cap)"
        ));
    }
    if index || levels > want || levels > stored {
        return Ok(()); // (levels past the page are the page-header stage's to report)
    }
    let (want_values, stored_values) = (want - levels, stored - levels);
    if codec == Compression::UNCOMPRESSED || !compressed {
        if want_values != stored_values {
            return Err(format!(
                "an uncompressed page (or values section) of {stored_values} bytes whose header says {want_values}"
            ));
        }
    } else if let Some(x) = expansion(codec) {
        let most = stored_values.saturating_mul(x).saturating_add(64);
        if want_values > most {
            return Err(format!(
                "the header claims {want_values} bytes from {stored_values} bytes of {codec} data, more than it can hold ({most})"
            ));
        }
    }
    Ok(())
}

/// A v2 data page's null count against the column's maximum definition level: a column whose
/// leaf and ancestors are all REQUIRED has no nulls (a schema marking an OPTIONAL leaf REQUIRED
/// would otherwise have fewer values than the page claims read as all of them). Its level
/// sections are not held against it: writers store a run of zero levels for columns without
/// levels (parquet-testing's `rle_boolean_encoding.parquet`, repetition levels of a flat column).
pub(crate) fn check_page_nulls(max_def: i16, nulls: i32) -> Result<(), String> {
    if max_def == 0 && nulls > 0 {
        return Err(format!(
            "{nulls} nulls in a column the schema makes REQUIRED with no optional ancestor"
        ));
    }
    Ok(())
}

/// Whether `values`, `stored_values` bytes of `codec` data, can inflate to the
/// `want_values` bytes the header claims: SNAPPY's preamble states its size, GZIP's trailer
/// too (the last member's), ZSTD's block headers bound it, LZ4 and GZIP expand by a bounded
/// ratio at most, BROTLI is inflated to the claim and no further. Checked before anything is allocated by the claim
/// (the host decoder's and the GPU decoder's host decompression alike).
pub(crate) fn check_inflated_size(
    codec: Compression,
    values: &[u8],
    stored_values: u64,
    want_values: u64,
) -> Result<(), String> {
    match codec {
        Compression::SNAPPY => match snappy_len(values) {
            Some(n) if n == want_values => {}
            Some(n) => {
                return Err(format!(
                    "the SNAPPY data decompresses to {n} bytes; the header claims {want_values}"
                ))
            }
            None => return Err("the SNAPPY data has no readable length".into()),
        },
        Compression::GZIP(_) if gzip_isize(values).is_some_and(|n| n > want_values) => {
            return Err(format!(
                "the GZIP data's trailer says it inflates to {} bytes; the header claims {want_values}",
                gzip_isize(values).unwrap_or(0)
            ));
        }
        Compression::BROTLI(_) => inflates_within(codec, values, want_values)?,
        Compression::ZSTD(_) => {
            // the frames' block headers bound what they inflate to (a frame that does not
            // parse is the decoder's to report)
            if let Ok(most) = zstd::zstd_safe::decompress_bound(values) {
                if most < want_values {
                    return Err(format!(
                        "the ZSTD data inflates to {most} bytes at most; the header claims {want_values}"
                    ));
                }
            }
        }
        codec => {
            if let Some(x) = expansion(codec) {
                let most = stored_values.saturating_mul(x).saturating_add(64);
                if want_values > most {
                    return Err(format!(
                        "the header claims {want_values} bytes from {stored_values} bytes of {codec} data, more than it can hold ({most})"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Inflates GZIP or BROTLI `values` without keeping them, up to `claim + 1` bytes: an error
/// when they inflate past `claim` (what the host decoder would otherwise inflate in full
/// before comparing with the header). Costs a decompression; nothing is allocated but a
/// 64 KiB scratch buffer.
fn inflates_within(codec: Compression, values: &[u8], claim: u64) -> Result<(), String> {
    use std::io::Read;
    let r: Box<dyn Read + '_> = match codec {
        Compression::GZIP(_) => Box::new(flate2::read::MultiGzDecoder::new(values)),
        _ => Box::new(brotli::Decompressor::new(values, 4096)),
    };
    let mut r = r.take(claim.saturating_add(1));
    let mut scratch = vec![0u8; 64 << 10];
    let mut total = 0u64;
    loop {
        match r.read(&mut scratch) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // a stream that does not inflate is the decoder's to report
            Err(_) => return Ok(()),
        }
    }
    if total > claim {
        return Err(format!(
            "the {codec:?} data inflates past the {claim} bytes the header claims"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::page_header::{DataPageV1, DataPageV2, DictionaryPage, PageHeader};

    fn entry(kind: PageKind, want: i32, stored: i32) -> PageEntry {
        PageEntry {
            offset: 0,
            header: PageHeader {
                kind,
                uncompressed_size: want,
                compressed_size: stored,
                crc: None,
                data_v1: None,
                dictionary: None,
                data_v2: None,
                header_len: 0,
            },
        }
    }

    const MAX: u64 = crate::config::MAX_PAGE_BYTES;

    const SNAPPY_INT64: ChunkKind = ChunkKind {
        codec: Compression::SNAPPY,
        physical: PhysicalType::INT64,
        type_length: 0,
    };

    #[test]
    fn snappy_claims_must_match_the_stream() {
        let data = snap::raw::Encoder::new().compress_vec(&[7u8; 800]).unwrap();
        let mut p = entry(PageKind::DataV1, 800, data.len() as i32);
        p.header.data_v1 = Some(DataPageV1 {
            num_values: 100,
            ..Default::default()
        });
        assert_eq!(check_page(&p, &data, SNAPPY_INT64, MAX), Ok(()));
        p.header.uncompressed_size = 801;
        let e = check_page(&p, &data, SNAPPY_INT64, MAX).unwrap_err();
        assert!(
            e.contains("decompresses to 800") && e.contains("801"),
            "{e}"
        );
        p.header.uncompressed_size = i32::MAX;
        let e = check_page(&p, &data, SNAPPY_INT64, MAX).unwrap_err();
        assert!(e.contains("are refused"), "{e}");
    }

    #[test]
    fn dictionaries_must_fit_their_bytes() {
        let data = vec![0u8; 80];
        let kind = ChunkKind {
            codec: Compression::UNCOMPRESSED,
            ..SNAPPY_INT64
        };
        let mut p = entry(PageKind::Dictionary, 80, 80);
        p.header.dictionary = Some(DictionaryPage {
            num_values: 10,
            ..Default::default()
        });
        assert_eq!(check_page(&p, &data, kind, MAX), Ok(()));
        p.header.dictionary = Some(DictionaryPage {
            num_values: i32::MAX,
            ..Default::default()
        });
        let e = check_page(&p, &data, kind, MAX).unwrap_err();
        assert!(
            e.contains("2147483647 entries") && e.contains("at most 10"),
            "{e}"
        );
        // strings: 4 bytes of length each at least
        let strings = ChunkKind {
            physical: PhysicalType::BYTE_ARRAY,
            ..kind
        };
        p.header.dictionary = Some(DictionaryPage {
            num_values: 21,
            ..Default::default()
        });
        assert!(check_page(&p, &data, strings, MAX).is_err());
    }

    #[test]
    fn lz4_and_gzip_claims_are_bounded_by_the_codec() {
        let data = vec![0u8; 100];
        let lz4 = ChunkKind {
            codec: Compression::LZ4_RAW,
            ..SNAPPY_INT64
        };
        let p = entry(PageKind::DataV1, 25_000, 100);
        assert_eq!(check_page(&p, &data, lz4, MAX), Ok(()));
        let p = entry(PageKind::DataV1, 1 << 29, 100);
        let e = check_page(&p, &data, lz4, MAX).unwrap_err();
        assert!(e.contains("more than it can hold"), "{e}");
    }

    #[test]
    fn zstd_and_gzip_claims_are_bounded_by_their_frames() {
        let raw = vec![5u8; 100_000];
        let z = zstd::bulk::compress(&raw, 1).unwrap();
        let zstd = Compression::ZSTD(Default::default());
        let n = z.len() as u64;
        assert_eq!(check_inflated_size(zstd, &z, n, 100_000), Ok(()));
        let e = check_inflated_size(zstd, &z, n, 256 << 20).unwrap_err();
        assert!(e.contains("inflates to") && e.contains("at most"), "{e}");
        let mut gz = Vec::new();
        {
            use std::io::Write;
            let mut w = flate2::write::GzEncoder::new(&mut gz, flate2::Compression::default());
            w.write_all(&raw).unwrap();
            w.finish().unwrap();
        }
        let gzip = Compression::GZIP(Default::default());
        let n = gz.len() as u64;
        assert_eq!(check_inflated_size(gzip, &gz, n, 100_000), Ok(()));
        // a bomb claiming less than it inflates to: its trailer says so
        let e = check_inflated_size(gzip, &gz, n, 1_000).unwrap_err();
        assert!(e.contains("trailer says it inflates to 100000"), "{e}");
        // BROTLI: inflated to the claim and no further
        let mut br = Vec::new();
        {
            use std::io::Write;
            let mut w = brotli::CompressorWriter::new(&mut br, 4096, 5, 22);
            w.write_all(&raw).unwrap();
        }
        let brotli = Compression::BROTLI(Default::default());
        let n = br.len() as u64;
        assert_eq!(check_inflated_size(brotli, &br, n, 100_000), Ok(()));
        assert!(check_inflated_size(brotli, &br, n, 99_999).is_err());
    }

    #[test]
    fn v2_levels_and_counts_must_fit() {
        let data = vec![0u8; 50];
        let kind = ChunkKind {
            codec: Compression::UNCOMPRESSED,
            ..SNAPPY_INT64
        };
        let mut p = entry(PageKind::DataV2, 50, 50);
        p.header.data_v2 = Some(DataPageV2 {
            num_values: 5,
            num_nulls: 1,
            num_rows: 5,
            def_levels_byte_length: 10,
            is_compressed: false,
            ..Default::default()
        });
        assert_eq!(check_page(&p, &data, kind, MAX), Ok(()));
        p.header.data_v2 = Some(DataPageV2 {
            num_values: 5,
            num_nulls: 6,
            num_rows: 5,
            is_compressed: false,
            ..Default::default()
        });
        assert!(check_page(&p, &data, kind, MAX)
            .unwrap_err()
            .contains("6 nulls"));
        p.header.data_v2 = Some(DataPageV2 {
            num_values: 5,
            def_levels_byte_length: 60,
            is_compressed: false,
            ..Default::default()
        });
        assert!(check_page(&p, &data, kind, MAX)
            .unwrap_err()
            .contains("60 bytes of levels"));
    }

    #[test]
    fn claimed_sizes_without_the_page_bytes() {
        use Compression as C;
        let ok = |codec, want, stored, levels, compressed, index, cap| {
            check_claimed_sizes(codec, want, stored, levels, compressed, index, cap)
        };
        // the cap, for every codec and page kind
        for codec in [C::SNAPPY, C::UNCOMPRESSED, C::LZ4_RAW] {
            let e = ok(codec, 5000, 5000, 0, true, false, 4096).unwrap_err();
            assert!(e.contains("pages of more than 4096 are refused"), "{e}");
            assert!(ok(codec, 4096, 4096, 0, true, false, 4096).is_ok());
        }
        assert!(ok(C::SNAPPY, -1, 10, 0, true, false, 4096)
            .unwrap_err()
            .contains("negative page size"));
        // uncompressed values are as long as they claim (v2 levels in front count on both
        // sides); index pages carry none
        assert!(ok(C::UNCOMPRESSED, 100, 100, 0, true, false, 1 << 20).is_ok());
        assert!(ok(C::UNCOMPRESSED, 120, 100, 0, true, false, 1 << 20)
            .unwrap_err()
            .contains("of 100 bytes whose header says 120"));
        assert!(ok(C::SNAPPY, 120, 100, 10, false, false, 1 << 20)
            .unwrap_err()
            .contains("of 90 bytes whose header says 110"));
        assert!(ok(C::SNAPPY, 100, 100, 10, false, false, 1 << 20).is_ok());
        assert!(ok(C::UNCOMPRESSED, 120, 100, 0, true, true, 1 << 20).is_ok());
        // LZ4, GZIP and ZSTD expand by a bounded ratio; SNAPPY is checked by its kernel against
        // the claim
        assert!(ok(C::LZ4_RAW, 255 * 100 + 64, 100, 0, true, false, 1 << 30).is_ok());
        assert!(ok(C::LZ4_RAW, 255 * 100 + 65, 100, 0, true, false, 1 << 30)
            .unwrap_err()
            .contains("more than it can hold"));
        assert!(ok(C::GZIP(Default::default()), 2_000_000, 100, 0, true, false, 1 << 30)
            .unwrap_err()
            .contains("more than it can hold"));
        assert!(ok(C::SNAPPY, 2_000_000, 100, 0, true, false, 1 << 30).is_ok());
        // ZSTD: 128 KiB per 4-byte RLE block at most (a page claiming 256 MiB from 2.4 KB, as
        // a mutated file did: refused before nvCOMP and the host's share allocated by it)
        let zstd = C::ZSTD(Default::default());
        assert!(ok(zstd, 32_768 * 2400 + 64, 2400, 0, true, false, 1 << 30).is_ok());
        assert!(ok(zstd, 256 << 20, 2400, 0, true, false, 1 << 30)
            .unwrap_err()
            .contains("more than it can hold"));
        // the real thing: 1 MiB of zeros, compressed at every level, is within the bound
        for level in [1, 3, 19] {
            let z = zstd::bulk::compress(&vec![0u8; 1 << 20], level).unwrap();
            assert!(ok(zstd, 1 << 20, z.len() as i64, 0, true, false, 1 << 30).is_ok());
        }
    }
}
