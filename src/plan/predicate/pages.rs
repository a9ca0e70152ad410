//! Page-level pruning: the rows of a row group whose pages' statistics (the column index, with
//! the offset index's first rows) cannot rule the predicate out.
//!
//! The row group's rows are cut where a page of any column the predicate reads begins; each
//! piece is tested with the statistics of the page that covers it in every such column (the
//! same rules as row groups: trusted sort orders only; a truncated byte-array bound is still a
//! bound; a null page is all null; NaN bounds are not trusted). A piece no page rules out is
//! kept. Files without a page index for those columns are not pruned by page.

use std::ops::Range;

use parquet::file::metadata::ParquetMetaData;
use parquet::file::page_index::column_index::ColumnIndexMetaData;

use super::{eval_with, leaves_of, order_trusted, value_cmp, BoundPredicate, Kind, Nulls, Value};

/// What page pruning kept of a row group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptPages {
    /// The rows kept: ascending, disjoint ranges counted from the row group's first row.
    pub rows: Vec<Range<u64>>,
    /// Pages of the predicate's columns with a kept row, and without.
    pub kept: usize,
    /// Pages of the predicate's columns whose every row was ruled out.
    pub dropped: usize,
}

impl BoundPredicate {
    /// The rows of row group `rg` its pages' statistics may match; `None` when the footer has
    /// no page index for a column the predicate reads.
    pub fn prune_pages(&self, md: &ParquetMetaData, rg: usize) -> Option<KeptPages> {
        let (ci, oi) = (md.column_index()?, md.offset_index()?);
        let mut leaves = Vec::new();
        leaves_of(&self.bound, &mut leaves);
        let n = md.row_group(rg).num_rows().max(0) as u64;
        // per leaf: its column index and where each page's rows begin
        let mut cols: Vec<(usize, &ColumnIndexMetaData, Vec<u64>)> = Vec::new();
        for &leaf in &leaves {
            let idx = ci.get(rg)?.get(leaf)?;
            let locs = oi.get(rg)?.get(leaf)?.page_locations();
            if matches!(idx, ColumnIndexMetaData::NONE)
                || locs.is_empty()
                || idx.num_pages() as usize != locs.len()
            {
                return None;
            }
            let firsts: Vec<u64> = locs
                .iter()
                .map(|l| l.first_row_index.max(0) as u64)
                .collect();
            if firsts.windows(2).any(|w| w[0] > w[1]) || firsts[0] != 0 {
                return None;
            }
            cols.push((leaf, idx, firsts));
        }
        let mut cuts: Vec<u64> = cols.iter().flat_map(|c| c.2.iter().copied()).collect();
        cuts.push(n);
        cuts.retain(|&c| c <= n);
        cuts.sort_unstable();
        cuts.dedup();
        let page_of = |firsts: &[u64], row: u64| firsts.partition_point(|&f| f <= row) - 1;
        let mut rows: Vec<Range<u64>> = Vec::new();
        let mut page_kept: Vec<Vec<bool>> = cols.iter().map(|c| vec![false; c.2.len()]).collect();
        for w in cuts.windows(2) {
            let (start, end) = (w[0], w[1]);
            let stats = |leaf: usize, kind: Kind| {
                let Some((_, idx, firsts)) = cols.iter().find(|c| c.0 == leaf) else {
                    return (Nulls::default(), Err("no page index"));
                };
                let k = page_of(firsts, start);
                let page_rows = firsts.get(k + 1).copied().unwrap_or(n) - firsts[k];
                let all = idx.is_null_page(k)
                    || idx
                        .null_count(k)
                        .is_some_and(|c| c.max(0) as u64 == page_rows);
                let none = !idx.is_null_page(k) && idx.null_count(k) == Some(0);
                (
                    Nulls { all, none },
                    page_min_max(md, rg, leaf, idx, k, kind),
                )
            };
            if eval_with(&self.bound, &stats).is_none() {
                match rows.last_mut() {
                    Some(r) if r.end == start => r.end = end,
                    _ => rows.push(start..end),
                }
                for (c, kept) in cols.iter().zip(page_kept.iter_mut()) {
                    kept[page_of(&c.2, start)] = true;
                }
            }
        }
        let kept = page_kept.iter().flatten().filter(|&&k| k).count();
        let dropped = page_kept.iter().flatten().count() - kept;
        Some(KeptPages {
            rows,
            kept,
            dropped,
        })
    }
}

/// Min and max of page `k` of leaf `leaf` in row group `rg` as comparable values, or why they
/// cannot be trusted.
fn page_min_max(
    md: &ParquetMetaData,
    rg: usize,
    leaf: usize,
    idx: &ColumnIndexMetaData,
    k: usize,
    kind: Kind,
) -> std::result::Result<(Value, Value), &'static str> {
    order_trusted(md, md.row_group(rg).column(leaf).column_descr(), leaf)?;
    let none = "no min/max";
    let pair = match (idx, kind) {
        (ColumnIndexMetaData::BOOLEAN(i), _) => (
            Value::Int(*i.min_value(k).ok_or(none)? as i128),
            Value::Int(*i.max_value(k).ok_or(none)? as i128),
        ),
        (ColumnIndexMetaData::INT32(i), Kind::Unsigned) => (
            Value::Int(*i.min_value(k).ok_or(none)? as u32 as i128),
            Value::Int(*i.max_value(k).ok_or(none)? as u32 as i128),
        ),
        (ColumnIndexMetaData::INT64(i), Kind::Unsigned) => (
            Value::Int(*i.min_value(k).ok_or(none)? as u64 as i128),
            Value::Int(*i.max_value(k).ok_or(none)? as u64 as i128),
        ),
        (ColumnIndexMetaData::INT32(i), _) => (
            Value::Int(*i.min_value(k).ok_or(none)? as i128),
            Value::Int(*i.max_value(k).ok_or(none)? as i128),
        ),
        (ColumnIndexMetaData::INT64(i), _) => (
            Value::Int(*i.min_value(k).ok_or(none)? as i128),
            Value::Int(*i.max_value(k).ok_or(none)? as i128),
        ),
        (ColumnIndexMetaData::FLOAT(i), _) => (
            Value::Float(*i.min_value(k).ok_or(none)? as f64),
            Value::Float(*i.max_value(k).ok_or(none)? as f64),
        ),
        (ColumnIndexMetaData::DOUBLE(i), _) => (
            Value::Float(*i.min_value(k).ok_or(none)?),
            Value::Float(*i.max_value(k).ok_or(none)?),
        ),
        (ColumnIndexMetaData::FIXED_LEN_BYTE_ARRAY(i), Kind::DecimalBytes)
        | (ColumnIndexMetaData::BYTE_ARRAY(i), Kind::DecimalBytes) => {
            let wide = "a decimal too wide";
            // a bound cut short would be another number: only whole values count
            let width = md.row_group(rg).column(leaf).column_descr().type_length();
            let whole = |v: &[u8]| {
                !matches!(idx, ColumnIndexMetaData::FIXED_LEN_BYTE_ARRAY(_))
                    || v.len() as i32 == width
            };
            let (lo, hi) = (i.min_value(k).ok_or(none)?, i.max_value(k).ok_or(none)?);
            if !whole(lo) || !whole(hi) {
                return Err("truncated decimal bounds");
            }
            (
                Value::Int(super::be_int(lo).ok_or(wide)?),
                Value::Int(super::be_int(hi).ok_or(wide)?),
            )
        }
        // a truncated bound is still a bound: the min below, the max above the values
        (ColumnIndexMetaData::BYTE_ARRAY(i), Kind::Bytes) => (
            Value::Bytes(i.min_value(k).ok_or(none)?.to_vec()),
            Value::Bytes(i.max_value(k).ok_or(none)?.to_vec()),
        ),
        _ => return Err("page statistics of an unexpected type"),
    };
    if let (Value::Float(a), Value::Float(b)) = &pair {
        if a.is_nan() || b.is_nan() {
            return Err("NaN in statistics");
        }
    }
    if value_cmp(&pair.0, &pair.1) == Some(std::cmp::Ordering::Greater) {
        return Err("min greater than max");
    }
    Ok(pair)
}
