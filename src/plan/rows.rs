//! Row selections: which rows of which row groups a load reads, from arrow-rs's
//! `RowSelection` (over the selected row groups' rows) or a per-row-group access plan shaped
//! like DataFusion's `ParquetAccessPlan`.

use std::ops::Range;
use std::path::Path;

use parquet::file::metadata::ParquetMetaData;

use super::RowRanges;
use crate::error::{Error, Result};

/// The rows in both `a` and `b` (ascending, disjoint ranges).
pub(super) fn intersect(a: &[Range<u64>], b: &[Range<u64>]) -> Vec<Range<u64>> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        let (s, e) = (a[i].start.max(b[j].start), a[i].end.min(b[j].end));
        if s < e {
            out.push(s..e);
        }
        if a[i].end < b[j].end {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// How one row group is read, as DataFusion's `ParquetAccessPlan` says it: skipped, scanned
/// whole, or only the rows a `RowSelection` selects (over that row group's rows).
#[derive(Debug, Clone)]
pub enum RowGroupAccess {
    /// Not read.
    Skip,
    /// Every row.
    Scan,
    /// The rows selected (arrow-rs semantics, over this row group's rows; rows past the
    /// selection's end are not read).
    Selection(parquet::arrow::arrow_reader::RowSelection),
}

/// The ranges of rows the next `total` rows of `selectors` ((skip, rows) runs) select, counted
/// from 0; the selectors are consumed that far.
fn ranges_of(
    selectors: &mut std::iter::Peekable<std::vec::IntoIter<(bool, u64)>>,
    total: u64,
) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::new();
    let mut at = 0u64;
    while at < total {
        let Some((skip, n)) = selectors.peek_mut() else {
            break;
        };
        let take = (*n).min(total - at);
        if !*skip && take > 0 {
            match out.last_mut() {
                Some(last) if last.end == at => last.end = at + take,
                _ => out.push(at..at + take),
            }
        }
        at += take;
        *n -= take;
        if *n == 0 {
            selectors.next();
        }
    }
    out
}

fn selectors(sel: &parquet::arrow::arrow_reader::RowSelection) -> Vec<(bool, u64)> {
    sel.iter()
        .map(|s| (s.skip, s.row_count as u64))
        .filter(|s| s.1 > 0)
        .collect()
}

/// The rows `sel` selects over the rows of `row_groups` (ascending), in order, as arrow-rs
/// reads a `RowSelection` with those row groups; an error naming `path` when it covers more
/// rows than they hold.
pub fn rows_of_selection(
    path: &Path,
    md: &ParquetMetaData,
    row_groups: &[usize],
    sel: &parquet::arrow::arrow_reader::RowSelection,
) -> Result<RowRanges> {
    let mut it = selectors(sel).into_iter().peekable();
    let mut out = RowRanges::new();
    let mut total = 0u64;
    for &rg in row_groups {
        let n = md
            .row_groups()
            .get(rg)
            .map_or(0, |g| g.num_rows().max(0) as u64);
        total += n;
        out.insert(rg, ranges_of(&mut it, n));
    }
    let left: u64 = it.map(|s| s.1).sum();
    if left > 0 {
        return Err(Error::RowGroupSelection {
            path: path.to_path_buf(),
            reason: format!(
                "the row selection covers {} rows, the selected row groups hold {total}",
                total + left
            ),
        });
    }
    Ok(out)
}

/// The rows an access plan (one entry per row group of the file) reads.
pub fn rows_of_access_plan(
    path: &Path,
    md: &ParquetMetaData,
    access: &[RowGroupAccess],
) -> Result<RowRanges> {
    if access.len() != md.num_row_groups() {
        return Err(Error::RowGroupSelection {
            path: path.to_path_buf(),
            reason: format!(
                "the access plan has {} entries, the file {} row groups",
                access.len(),
                md.num_row_groups()
            ),
        });
    }
    let mut out = RowRanges::new();
    for (rg, a) in access.iter().enumerate() {
        let n = md.row_group(rg).num_rows().max(0) as u64;
        match a {
            RowGroupAccess::Skip => {}
            RowGroupAccess::Scan => {
                if n > 0 {
                    out.insert(rg, vec![0..n]);
                }
            }
            RowGroupAccess::Selection(sel) => {
                let mut it = selectors(sel).into_iter().peekable();
                let ranges = ranges_of(&mut it, n);
                let left: u64 = it.map(|s| s.1).sum();
                if left > 0 {
                    return Err(Error::RowGroupSelection {
                        path: path.to_path_buf(),
                        reason: format!(
                            "the access plan's selection for row group {rg} covers {} rows, the \
                             row group holds {n}",
                            n + left
                        ),
                    });
                }
                out.insert(rg, ranges);
            }
        }
    }
    Ok(out)
}

/// Where the rows `rows` of a row group (inside one of the ranges `read`, ascending) lie among
/// the rows `read` holds, laid end to end: what a decoder that decodes only the rows read
/// returns them at.
pub fn position_among(read: &[Range<u64>], rows: &Range<u64>) -> Range<u64> {
    let mut before = 0u64;
    for r in read {
        if r.end <= rows.start {
            before += r.end - r.start;
        } else {
            let at = before + rows.start.saturating_sub(r.start);
            return at..at + (rows.end - rows.start);
        }
    }
    before..before + (rows.end - rows.start)
}

/// The rows of row group `rg` that `rows` reads, unless all of its `all` rows (or `rows` says
/// nothing of it).
pub fn rows_restricted(rows: Option<&RowRanges>, rg: usize, all: u64) -> Option<&[Range<u64>]> {
    let read = rows?.get(&rg)?;
    (read[..] != [0..all]).then_some(&read[..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_among_the_rows_read() {
        let read = [10..20, 30..35, 50..60];
        assert_eq!(position_among(&read, &(10..20)), 0..10);
        assert_eq!(position_among(&read, &(12..15)), 2..5);
        assert_eq!(position_among(&read, &(31..35)), 11..15);
        assert_eq!(position_among(&read, &(50..60)), 15..25);
        let mut rows = RowRanges::new();
        rows.insert(1, vec![0..100]);
        rows.insert(2, vec![5..10]);
        assert_eq!(rows_restricted(Some(&rows), 1, 100), None);
        assert_eq!(rows_restricted(Some(&rows), 2, 100), Some(&[5..10][..]));
        assert_eq!(rows_restricted(Some(&rows), 3, 100), None);
        assert_eq!(rows_restricted(None, 2, 100), None);
    }
}
