//! An offset index built from the page headers, for row groups whose file wrote none.
//!
//! A row group too large for a load's memory budget is cut into pieces of pages
//! ([`crate::plan::passes::split_row_group`]), which needs to know where each page starts and
//! which row it begins with: the offset index. Where the writer wrote no page index, the page
//! headers say the same, as libcudf's chunked reader finds them: each header is read in turn
//! (a window of bytes at its offset, widened when the header is longer), its data skipped, until
//! the chunk ends. A page's rows are its value count in a column that does not repeat (data
//! page v1) or the `num_rows` of a data page v2; a repeated column of v1 pages has no row count
//! in its headers, and its row group is not indexed (the budget error stands).

use std::ops::Range;

use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataBuilder, ParquetOffsetIndex};
use parquet::file::page_index::offset_index::{OffsetIndexMetaData, PageLocation};

use crate::error::{Error, Result};
use crate::metadata::page_header::{parse_page_header, PageKind};
use crate::metadata::FileMetadata;
use crate::source::ParquetFile;

/// Bytes read at a header's offset, at first: headers are tens of bytes, except where they
/// carry statistics of long values.
const WINDOW: u64 = 64 << 10;
/// The longest page header read before giving up on it.
const MAX_HEADER: u64 = 16 << 20;

/// Whether every column chunk of row group `rg` of `md` has an offset index.
pub fn has_offset_index(md: &ParquetMetaData, rg: usize) -> bool {
    md.offset_index()
        .and_then(|oi| oi.get(rg))
        .is_some_and(|cols| cols.len() == md.row_group(rg).num_columns())
}

/// `meta` with an offset index for each row group of `row_groups` that has none, built from
/// the page headers of its column chunks of leaves `leaves` (read from `file`; the other
/// leaves' entries list no page: a load of this footer reads `leaves` only); the other row
/// groups keep theirs (or none). `Ok(None)` when a row group's pages do not say which rows
/// they hold (a repeated column of v1 data pages). A header that cannot be read, pages that do not tile the chunk or
/// hold other than the row group's rows are errors naming the file, the row group, the column
/// and the byte range.
pub fn with_header_index(
    file: &ParquetFile,
    meta: &FileMetadata,
    row_groups: &[usize],
    leaves: &[usize],
) -> Result<Option<FileMetadata>> {
    let md = &meta.metadata;
    let n = md.num_row_groups();
    let mut index: ParquetOffsetIndex = match md.offset_index() {
        Some(oi) if oi.len() == n => oi.clone(),
        _ => vec![Vec::new(); n],
    };
    for &rg in row_groups {
        if rg >= n || has_offset_index(md, rg) {
            continue;
        }
        let rgm = md.row_group(rg);
        let mut cols = Vec::with_capacity(rgm.num_columns());
        for (leaf, cc) in rgm.columns().iter().enumerate() {
            if !leaves.contains(&leaf) {
                cols.push(OffsetIndexMetaData {
                    page_locations: Vec::new(),
                    unencoded_byte_array_data_bytes: None,
                });
                continue;
            }
            let repeated = md.file_metadata().schema_descr().column(leaf).max_rep_level() > 0;
            let (start, len) = super::chunk_bytes(cc);
            let rows = rgm.num_rows().max(0) as u64;
            let empty = len == 0 || cc.num_values() == 0 || rows == 0;
            let range = start..start.saturating_add(if empty { 0 } else { len });
            let column = cc.column_path().string();
            let bad = |range: Range<u64>, reason: String| Error::BadColumnChunk {
                path: file.path().to_path_buf(),
                row_group: rg,
                column: column.clone(),
                range: Some(range),
                reason,
            };
            match chunk_pages(file, range.clone(), rows, repeated) {
                Ok(Some(pages)) => cols.push(OffsetIndexMetaData {
                    page_locations: pages,
                    unencoded_byte_array_data_bytes: None,
                }),
                Ok(None) => return Ok(None),
                Err((at, reason)) => {
                    return Err(bad(
                        at,
                        format!("indexing the chunk's pages from their headers: {reason}"),
                    ))
                }
            }
        }
        index[rg] = cols;
    }
    let metadata = ParquetMetaDataBuilder::new_from_metadata(ParquetMetaData::clone(md))
        .set_offset_index(Some(index))
        .build();
    Ok(Some(FileMetadata {
        metadata: std::sync::Arc::new(metadata),
        page_index_loaded: true,
        ..meta.clone()
    }))
}

/// The data pages of the chunk at bytes `range` of a row group of `rows` rows, from their
/// headers; `Ok(None)` when the pages do not say their rows (`repeated`, v1 pages). Errors:
/// the byte range concerned and what is wrong.
fn chunk_pages(
    file: &ParquetFile,
    range: Range<u64>,
    rows: u64,
    repeated: bool,
) -> std::result::Result<Option<Vec<PageLocation>>, (Range<u64>, String)> {
    let mut pages = Vec::new();
    let mut at = range.start;
    let mut row = 0u64;
    // the bytes read last, from `held.0`
    let mut held: (u64, Vec<u8>) = (at, Vec::new());
    while at < range.end {
        let mut want = WINDOW;
        let header = loop {
            let end = (at + want).min(range.end);
            if at < held.0 || end > held.0 + held.1.len() as u64 {
                let bytes = file
                    .read_range(at..end, "a page header")
                    .map_err(|e| (at..end, e.to_string()))?;
                held = (at, bytes);
            }
            let from = (at - held.0) as usize;
            let to = (end - held.0) as usize;
            match parse_page_header(&held.1[from..to]) {
                Ok(h) => break h,
                // a header longer than the bytes read: read more of it
                Err(_) if end < range.end && want < MAX_HEADER => want *= 4,
                Err(e) => {
                    return Err((
                        at..end,
                        format!("the page header at byte {at} cannot be read: {e}"),
                    ))
                }
            }
        };
        let size = header.header_len as u64 + header.compressed_size as u64;
        let page = at..at + size;
        if page.end > range.end {
            return Err((
                page.clone(),
                format!(
                    "the page at byte {at} ({size} bytes with its header) reaches past the chunk's end at byte {}",
                    range.end
                ),
            ));
        }
        let page_rows = match (header.kind, &header.data_v1, &header.data_v2) {
            (PageKind::DataV1, Some(_), _) if repeated => return Ok(None),
            (PageKind::DataV1, Some(d), _) => Some(d.num_values.max(0) as u64),
            (PageKind::DataV2, _, Some(d)) => Some(d.num_rows.max(0) as u64),
            // dictionary and index pages hold no rows
            _ => None,
        };
        if let Some(n) = page_rows {
            if n > 0 {
                if row >= rows {
                    return Err((
                        page,
                        format!(
                            "the pages hold more rows than the row group's {rows} (a page begins at row {row})"
                        ),
                    ));
                }
                pages.push(PageLocation {
                    offset: at as i64,
                    compressed_page_size: i32::try_from(size).map_err(|_| {
                        (page.clone(), format!("a page of {size} bytes"))
                    })?,
                    first_row_index: row as i64,
                });
                row += n;
            }
        }
        at = page.end;
    }
    if row != rows {
        return Err((
            range,
            format!("the pages hold {row} rows, the row group {rows}"),
        ));
    }
    Ok(Some(pages))
}

/// What mends a budget error (row group `failed` of `plan` did not fit `budget`) where the file
/// has no page index: `meta` with an offset index built from the page headers of the row
/// groups to cut ([`unindexed_for_budget`], [`with_header_index`]). `Ok(None)`: the error
/// stands (`failed` has an index already, or its pages do not say their rows).
pub fn header_index_for_budget(
    file: &ParquetFile,
    meta: &FileMetadata,
    plan: &super::ReadPlan,
    failed: usize,
    budget: u64,
) -> Result<Option<FileMetadata>> {
    let rgs = unindexed_for_budget(plan, &meta.metadata, failed, budget);
    if rgs.is_empty() {
        return Ok(None);
    }
    with_header_index(file, meta, &rgs, &plan.leaves)
}

/// The row groups of `plan` that a budget error (row group `failed` did not fit `budget`)
/// calls for cutting into pieces of pages and that have no offset index: `failed`, and each
/// that needs more than half the budget. Empty when `failed` has one: the error stands.
pub fn unindexed_for_budget(
    plan: &super::ReadPlan,
    md: &ParquetMetaData,
    failed: usize,
    budget: u64,
) -> Vec<usize> {
    if failed >= md.num_row_groups() || has_offset_index(md, failed) {
        return Vec::new();
    }
    let mut out: Vec<usize> = (plan.row_groups.iter().copied())
        .filter(|&rg| rg != failed && !has_offset_index(md, rg))
        .filter(|&rg| super::passes::row_group_cost(plan, md, rg).device_bytes > budget / 2)
        .collect();
    out.push(failed);
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};

    /// Two row groups of 3000 rows, pages of about 500 rows, a dictionary-encoded string
    /// column and a plain one; the offset index written or not.
    fn file(offset_index: bool, version: WriterVersion) -> tempfile::NamedTempFile {
        let rows = 6000i64;
        let batch = arrow::record_batch::RecordBatch::try_from_iter([
            ("a", Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef),
            (
                "s",
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("v{}", i % 37)),
                )) as ArrayRef,
            ),
        ])
        .unwrap();
        let props = WriterProperties::builder()
            .set_writer_version(version)
            .set_max_row_group_row_count(Some(3000))
            .set_data_page_row_count_limit(500)
            .set_write_batch_size(100)
            .set_column_dictionary_enabled("a".into(), false);
        let props = if offset_index {
            props
        } else {
            props
                .set_statistics_enabled(EnabledStatistics::Chunk)
                .set_offset_index_disabled(true)
        };
        let f = tempfile::NamedTempFile::new().unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(f.reopen().unwrap(), batch.schema(), Some(props.build()))
            .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        f
    }

    #[test]
    fn the_headers_give_the_offset_index_the_writer_writes() {
        for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
            let with = file(true, version);
            let without = file(false, version);
            let written = crate::metadata::read_metadata(&ParquetFile::open(with.path()).unwrap(), true)
                .unwrap();
            let f = ParquetFile::open(without.path()).unwrap();
            let meta = crate::metadata::read_metadata(&f, true).unwrap();
            assert!(meta.metadata.offset_index().is_none());
            assert!(!has_offset_index(&meta.metadata, 1));
            let built = with_header_index(&f, &meta, &[1], &[0, 1]).unwrap().unwrap();
            assert!(!has_offset_index(&built.metadata, 0) && has_offset_index(&built.metadata, 1));
            let want = &written.metadata.offset_index().unwrap()[1];
            let got = &built.metadata.offset_index().unwrap()[1];
            assert_eq!(got.len(), 2);
            for (g, w) in got.iter().zip(want) {
                assert!(g.page_locations.len() >= 6, "{:?}", g.page_locations);
                assert_eq!(g.page_locations, w.page_locations, "{version:?}");
            }
            // a leaf not asked for lists no page
            let built = with_header_index(&f, &meta, &[0], &[1]).unwrap().unwrap();
            let got = &built.metadata.offset_index().unwrap()[0];
            assert!(got[0].page_locations.is_empty());
            assert_eq!(got[1].page_locations, written.metadata.offset_index().unwrap()[0][1].page_locations);
        }
    }

    #[test]
    fn a_header_that_cannot_be_read_names_the_chunk() {
        let without = file(false, WriterVersion::PARQUET_1_0);
        let f = ParquetFile::open(without.path()).unwrap();
        let meta = crate::metadata::read_metadata(&f, false).unwrap();
        // the third page header of row group 1's column 'a': its bytes overwritten
        let cc = meta.metadata.row_group(1).column(0);
        let start = cc.data_page_offset() as u64;
        let bytes = f.read_range(start..start + 64, "test").unwrap();
        let h = parse_page_header(&bytes).unwrap();
        let second = start + (h.header_len + h.compressed_size as usize) as u64;
        let mut data = std::fs::read(without.path()).unwrap();
        data[second as usize..second as usize + 8].fill(0xff);
        let bad = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(bad.path(), &data).unwrap();
        let f = ParquetFile::open(bad.path()).unwrap();
        let e = with_header_index(&f, &meta, &[1], &[0]).unwrap_err().to_string();
        assert!(e.contains("row group 1, column 'a'"), "{e}");
        assert!(e.contains(&format!("page header at byte {second}")), "{e}");
        assert!(e.contains(&bad.path().display().to_string()), "{e}");
        // a row group claiming other than the rows its pages hold
        let good = ParquetFile::open(without.path()).unwrap();
        let chunk = start..start + cc.compressed_size() as u64;
        let (_, e) = chunk_pages(&good, chunk.clone(), 4000, false).unwrap_err();
        assert!(e.contains("the pages hold 3000 rows, the row group 4000"), "{e}");
        let (_, e) = chunk_pages(&good, chunk.clone(), 2000, false).unwrap_err();
        assert!(e.contains("more rows than the row group's 2000"), "{e}");
        // and a chunk that ends inside a page
        let (_, e) = chunk_pages(&good, chunk.start..chunk.end - 1, 3000, false).unwrap_err();
        assert!(e.contains("reaches past the chunk's end"), "{e}");
    }
}
