//! A row group larger than the memory budget, read and decoded in **pieces**: row ranges cut
//! at page boundaries (the page index's first rows), each piece reading only the pages that
//! hold its rows ([`ColumnChunkPlan::read`](super::ColumnChunkPlan::read)), so that its raw
//! chunks, decompressed pages and decoded buffers fit the budget. Pure, like the rest of the
//! planning: [`split_row_group`] gives each piece its own [`ReadPlan`].

use std::ops::Range;
use std::path::Path;

use parquet::file::metadata::ParquetMetaData;

use super::passes::{row_group_cost, RowGroupCost};
use super::rows::intersect;
use super::{coalesce_units, page_reads, ReadPart, ReadPlan, RowRanges};
use crate::error::{Error, Result};

/// The plan of the rows `rows` of row group `rg` of `plan` alone (ascending, non-empty,
/// within the rows `plan` reads of it): its chunks, each reading only the pages holding those
/// rows, coalesced as `plan` was. `md` is the footer `plan` was made from.
pub fn piece_plan(
    path: &Path,
    plan: &ReadPlan,
    md: &ParquetMetaData,
    rg: usize,
    rows: Vec<Range<u64>>,
) -> Result<ReadPlan> {
    let all = md.row_group(rg).num_rows().max(0) as u64;
    let mut chunks = plan.chunks[plan.chunk_range_of(rg)].to_vec();
    for c in &mut chunks {
        c.dest_offset = 0;
        c.read = match &c.pages {
            Some(pages) if !c.is_empty() => page_reads::page_reads(&c.range, pages, &rows, all)
                .map_err(|e| Error::BadColumnChunk {
                    path: path.to_path_buf(),
                    row_group: rg,
                    column: c.path.clone(),
                    range: Some(c.range.clone()),
                    reason: e,
                })?
                .map(|parts| {
                    (parts.into_iter())
                        .map(|file| ReadPart { file, dest: 0 })
                        .collect()
                }),
            _ => None,
        };
    }
    let (requests, units) = coalesce_units(&mut chunks, plan.file_len, &plan.coalesce);
    let num_rows = rows.iter().map(|r| r.end - r.start).sum();
    Ok(ReadPlan {
        file_len: plan.file_len,
        leaves: plan.leaves.clone(),
        row_groups: vec![rg],
        num_rows,
        rows: Some(RowRanges::from([(rg, rows)])),
        page_pruning: Vec::new(),
        pruned: Vec::new(),
        filter: plan.filter.clone(),
        chunks,
        requests,
        units,
        coalesce: plan.coalesce,
    })
}

/// Row group `rg` of `plan` cut into pieces at page boundaries, each estimated within `limit`
/// device bytes ([`row_group_cost`] of its [`piece_plan`]), greedily: each piece as long as
/// fits. `Ok(None)` when a chunk of the row group has no page index (the page index was not
/// loaded, or the writer wrote none). An error naming the row group and the bytes its smallest
/// piece needs when even that does not fit.
pub fn split_row_group(
    path: &Path,
    plan: &ReadPlan,
    md: &ParquetMetaData,
    rg: usize,
    limit: u64,
) -> Result<Option<Vec<(ReadPlan, RowGroupCost)>>> {
    let all = md.row_group(rg).num_rows().max(0) as u64;
    let chunks = &plan.chunks[plan.chunk_range_of(rg)];
    if chunks.iter().any(|c| !c.is_empty() && c.pages.is_none()) {
        return Ok(None);
    }
    let read: Vec<Range<u64>> = match plan.rows.as_ref().and_then(|r| r.get(&rg)) {
        Some(r) => r.clone(),
        None => vec![0..all],
    };
    // where a piece may end: where any chunk's page begins, and the row group's end
    let mut ends: Vec<u64> = chunks
        .iter()
        .flat_map(|c| c.pages.iter().flatten().map(|p| p.first_row_index))
        .filter(|&r| r > 0 && r < all)
        .collect();
    ends.push(all);
    ends.sort_unstable();
    ends.dedup();
    let piece = |from: u64, to: u64| -> Result<Option<(ReadPlan, RowGroupCost)>> {
        let rows = intersect(&read, &[from..to]);
        if rows.is_empty() {
            return Ok(None);
        }
        let p = piece_plan(path, plan, md, rg, rows)?;
        let cost = row_group_cost(&p, md, rg);
        Ok(Some((p, cost)))
    };
    let mut out = Vec::new();
    let mut from = 0u64;
    let mut i = 0usize; // the first end after `from`
    while i < ends.len() {
        // the furthest end whose piece fits (costs grow with the rows a piece holds)
        let fits = |k: usize| -> Result<bool> {
            Ok(piece(from, ends[k])?.is_none_or(|(_, c)| c.device_bytes <= limit))
        };
        if !fits(i)? {
            let needed = piece(from, ends[i])?.map_or(0, |(_, c)| c.device_bytes);
            return Err(Error::MemoryBudget {
                path: path.to_path_buf(),
                row_group: rg,
                needed,
                budget: limit,
            });
        }
        let (mut lo, mut hi) = (i, ends.len() - 1);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(mid)? {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        if let Some(p) = piece(from, ends[lo])? {
            out.push(p);
        }
        from = ends[lo];
        i = lo + 1;
    }
    Ok(Some(out))
}
