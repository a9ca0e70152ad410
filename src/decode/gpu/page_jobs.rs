//! The data-page jobs both value decoders ([`fixed`](super::fixed), [`bytes`](super::bytes))
//! build from a chunk's page table, their scratch layout, and the errors naming a page.

use super::kernels::{describe_errors, PageInfo, PageJob};
use crate::error::{Error, Result};

/// Per page job, the first index of its rows in the wave's scratch arrays, and the rows in all.
pub(super) fn row_bases(pages: &[PageJob]) -> (Vec<u64>, u64) {
    let mut base = Vec::with_capacity(pages.len());
    let mut total = 0u64;
    for p in pages {
        base.push(total);
        total += p.num_values.max(0) as u64;
    }
    (base, total)
}

/// (row group, column path, page index) of each page job, for errors.
pub(super) type PageName = (usize, String, usize);

/// The first page whose error bits are set, as an error naming it.
pub(super) fn page_errors(
    path: &std::path::Path,
    errs: &[i32],
    names: &[PageName],
    table: &[(u32, &str)],
) -> Result<()> {
    match errs.iter().position(|&b| b != 0) {
        None => Ok(()),
        Some(k) => {
            let (rg, col, page) = &names[k];
            Err(Error::Decode {
                path: path.to_path_buf(),
                row_group: Some(*rg),
                column: Some(col.clone()),
                reason: format!(
                    "page {page} (decoded on the GPU): {}",
                    describe_errors(errs[k] as u32, table)
                ),
            })
        }
    }
}

/// Every encoding a chunk's page headers name is one Parquet defines (the value encoding of
/// every page, a v1 page's level encodings): a header naming another is corrupt, as arrow-rs
/// reads it, even where the decoder would not look at that field.
pub(super) fn check_encodings(table: &[PageInfo]) -> std::result::Result<(), String> {
    let known = |e: i32| matches!(e, 0 | 2..=9);
    for (k, p) in table.iter().enumerate() {
        let mut fields = vec![("value", p.encoding)];
        if p.kind == 0 {
            fields.push(("definition level", p.def_level_encoding));
            fields.push(("repetition level", p.rep_level_encoding));
        }
        if p.kind == 1 {
            continue;
        }
        if let Some((what, e)) = fields.into_iter().find(|(_, e)| !known(*e)) {
            return Err(format!("page {k}: unknown {what} encoding {e}"));
        }
        // a dictionary's entries are PLAIN (PLAIN_DICTIONARY in old writers), as arrow-rs
        // reads them; the kernels would read any other as PLAIN
        if p.kind == 2 && !matches!(p.encoding, 0 | 2) {
            return Err(format!(
                "page {k}: the dictionary page's entries are in encoding {}; a dictionary page \
                 holds PLAIN entries",
                encoding_name(p.encoding)
            ));
        }
    }
    Ok(())
}

/// A Parquet encoding's name (`encoding N` where Parquet defines none).
pub(super) fn encoding_name(e: i32) -> String {
    let name = match e {
        0 => "PLAIN",
        2 => "PLAIN_DICTIONARY",
        3 => "RLE",
        4 => "BIT_PACKED",
        5 => "DELTA_BINARY_PACKED",
        6 => "DELTA_LENGTH_BYTE_ARRAY",
        7 => "DELTA_BYTE_ARRAY",
        8 => "RLE_DICTIONARY",
        9 => "BYTE_STREAM_SPLIT",
        _ => return format!("encoding {e}"),
    };
    name.to_string()
}

/// What a chunk's page table says before its jobs are built: the rows its data pages hold, and
/// its dictionary page, if any, as (page, address, bytes, entries).
pub(super) fn chunk_pages(
    table: &[PageInfo],
    page_data: &[(u64, u64)],
) -> (u64, Option<(usize, u64, u64, i32)>) {
    let mut rows = 0u64;
    let mut dict = None;
    for (k, p) in table.iter().enumerate() {
        match p.kind {
            2 => dict = Some((k, page_data[k].0, page_data[k].1, p.num_values)),
            0 | 3 => rows += p.num_values.max(0) as u64,
            _ => {}
        }
    }
    (rows, dict)
}

/// For a chunk that reads only some pages ([`ColumnChunkPlan::read`]): each page's rows in
/// its row group of `rg_rows` rows, from the offset index (data pages; 0..0 for the others). An
/// error unless the data pages found are exactly the indexed pages inside the parts read, in
/// order, each holding the rows the index gives it (`values_are_rows`; a repeated leaf's pages
/// hold level entries instead, their rows checked against its repetition levels).
///
/// [`ColumnChunkPlan::read`]: crate::plan::ColumnChunkPlan::read
pub(super) fn indexed_first_rows(
    c: &crate::plan::ColumnChunkPlan,
    table: &[PageInfo],
    rg_rows: u64,
    values_are_rows: bool,
) -> std::result::Result<Vec<std::ops::Range<u64>>, String> {
    let index = c.pages.as_deref().unwrap_or_default();
    let parts = c.read_parts();
    let inside = |o: u64| parts.iter().any(|p| p.file.contains(&o));
    let mut expected = (0..index.len()).filter(|&k| inside(index[k].offset));
    let mut out = vec![0..0u64; table.len()];
    for (i, p) in table.iter().enumerate() {
        if !matches!(p.kind, 0 | 3) {
            continue;
        }
        let at = c.file_offset(p.header_offset.max(0) as u64);
        let Some(k) = at.and_then(|o| c.indexed_page(o)) else {
            return Err(format!(
                "a data page at byte {} is not where the offset index puts a page",
                at.map_or_else(|| "?".into(), |o| o.to_string())
            ));
        };
        if expected.next() != Some(k) {
            return Err(format!(
                "the data pages read do not match the offset index's pages (page {k} out of order)"
            ));
        }
        let first = index[k].first_row_index;
        let end = index.get(k + 1).map_or(rg_rows, |n| n.first_row_index);
        if values_are_rows && p.num_values.max(0) as u64 != end - first {
            return Err(format!(
                "page {k} holds {} values, the offset index gives it rows {first}..{end}",
                p.num_values
            ));
        }
        out[i] = first..end;
    }
    if let Some(k) = expected.next() {
        return Err(format!(
            "the offset index's page {k} was read but no data page was found there"
        ));
    }
    Ok(out)
}

/// One chunk's share of an output column (the index of its job): the rows `rows` of its row
/// group, landing at output row `out_at`, decoded with the dictionary `dict` (address and
/// entries; 0 when none) and the column's maximum definition level.
#[derive(Debug, Clone)]
pub(super) struct Window {
    pub(super) column: usize,
    pub(super) rows: std::ops::Range<u64>,
    pub(super) out_at: u64,
    pub(super) dict: (u64, i32),
    pub(super) max_def: i16,
    /// A nested leaf's maximum repetition level (its rows are then level entries).
    pub(super) max_rep: i16,
}

/// Appends a job per data page of one chunk that overlaps `w.rows` to `jobs` and `names`:
/// each page decodes all its rows and writes those inside the window. A page's first row is
/// the rows of the pages before it, or `first_rows` gives it (a chunk that reads only some
/// pages: [`indexed_first_rows`]).
pub(super) fn data_page_jobs(
    c: &crate::plan::ColumnChunkPlan,
    table: &[PageInfo],
    page_data: &[(u64, u64)],
    first_rows: Option<&[u64]>,
    w: &Window,
    jobs: &mut Vec<PageJob>,
    names: &mut Vec<PageName>,
) {
    let mut row = 0u64;
    for (k, p) in table.iter().enumerate() {
        if !matches!(p.kind, 0 | 3) {
            continue;
        }
        if let Some(f) = first_rows.and_then(|f| f.get(k)) {
            row = *f;
        }
        let n = p.num_values.max(0) as u64;
        let (first, end) = (row.max(w.rows.start), (row + n).min(w.rows.end));
        if first < end {
            let (ptr, len) = page_data[k];
            jobs.push(PageJob {
                data: ptr,
                data_len: len,
                row_start: w.out_at + (first - w.rows.start),
                dict: w.dict.0,
                num_values: p.num_values,
                encoding: p.encoding,
                max_def: i32::from(w.max_def),
                v2: i32::from(p.kind == 3),
                def_len: p.def_levels_len,
                rep_len: p.rep_levels_len,
                column: w.column as i32,
                dict_len: w.dict.1,
                // both within the page's rows (< 2^31): first - row < end - row <= n
                skip: (first - row) as i32,
                take: (end - first) as i32,
                max_rep: i32::from(w.max_rep),
                v2_values: match p.kind {
                    3 => p.num_values.saturating_sub(p.num_nulls.max(0)),
                    _ => -1,
                },
            });
            names.push((c.row_group, c.path.clone(), k));
        }
        row += n;
        if row >= w.rows.end {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(kind: i32, encoding: i32) -> PageInfo {
        PageInfo {
            kind,
            encoding,
            def_level_encoding: 3,
            rep_level_encoding: 3,
            ..Default::default()
        }
    }

    #[test]
    fn dictionary_pages_hold_plain_entries() {
        for e in [0, 2] {
            assert_eq!(check_encodings(&[page(2, e), page(0, 8)]), Ok(()));
        }
        let e = check_encodings(&[page(2, 5), page(0, 8)]).unwrap_err();
        assert!(
            e.contains("page 0") && e.contains("DELTA_BINARY_PACKED") && e.contains("PLAIN"),
            "{e}"
        );
        let e = check_encodings(&[page(0, 0), page(0, 42)]).unwrap_err();
        assert!(e.contains("page 1: unknown value encoding 42"), "{e}");
    }
}
