//! Passes and batches: how a load is cut before any byte is read, from the footer alone.
//!
//! A streaming load reads and decodes its selection in **passes** of whole row groups, each
//! small enough that it fits the device-memory budget together with the raw chunks of the pass
//! read next (the next pass is read while the current one decodes). Each pass yields
//! **batches** of at most `batch_rows` rows: small row groups are gathered whole into one
//! batch, a larger one is cut into several (of `batch_rows` rows and the remainder), and no
//! batch spans two passes (a pass hands over whole batches) — nor two row groups when
//! dictionaries are kept (one dictionary per batch).
//!
//! What a pass costs on the device is estimated per row group by [`row_group_cost`]: the raw
//! chunks, the pages decompressed (the footer's uncompressed sizes), the decoded Arrow buffers
//! (values at the widest output of their physical type, validity bitmaps, offsets of byte
//! arrays and their characters at their uncompressed size, DELTA_BYTE_ARRAY strings at the
//! footer's unencoded size), the decoders' scratch per row, a nested field's levels and its
//! leaves' values moved to their slots (per level entry: the chunk's `num_values`), and
//! nvCOMP's temporary memory for ZSTD pages.
//! It is meant as an upper bound; the streaming reader measures its real high-water mark
//! against it. [`plan_passes`] is pure: `cuparquet plan --memory-budget` prints it.
//!
//! A row group larger than the budget is read and decoded in **pieces**: row ranges cut at page
//! boundaries (the page index's first rows), each piece reading only the pages that hold its
//! rows ([`ColumnChunkPlan::read`](super::ColumnChunkPlan::read)), so that its raw chunks,
//! decompressed pages and decoded buffers fit the budget: [`split_row_group`] gives each piece
//! its own [`ReadPlan`] ([`piece_plan`]), and a pass per piece.

use std::fmt;
use std::ops::Range;
use std::path::Path;

use parquet::basic::{Compression, Encoding, Type as PhysicalType};
use parquet::file::metadata::ParquetMetaData;

use super::display::fmt_index_list;
use super::rows::intersect;
use super::{coalesce_units, human_bytes, page_reads, ReadPart, ReadPlan, RowRanges};
use crate::error::{Error, Result};

/// Scratch bytes per row of a fixed-width column in the GPU decoder (a definition level and a
/// dictionary index per row).
const FIXED_SCRATCH_PER_ROW: u64 = 1 + 4;
/// Scratch bytes per row of a byte-array column (an index, a (source, length) pair, an i64
/// length and an i64 offset per row).
const BYTES_SCRATCH_PER_ROW: u64 = 4 + 16 + 8 + 8;
/// Device bytes per chunk besides its data: page tables, job tables, counters.
const CHUNK_OVERHEAD: u64 = 64 << 10;
/// nvCOMP's temporary memory for ZSTD pages, per byte decompressed: the exact need of a large
/// call, which `device::nvcomp` asks for (0.41–0.45 on the ZSTD lineitem file), or an estimate
/// of at most 64 MiB for a small one.
const NVCOMP_ZSTD_TEMP_PER_BYTE: u64 = 1;

/// What one selected row group of a plan costs while it is read and decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RowGroupCost {
    /// The row group.
    pub row_group: usize,
    /// Its rows.
    pub rows: u64,
    /// Bytes of its selected column chunks, as read.
    pub read_bytes: u64,
    /// Estimated device bytes while it decodes: the chunks, decompressed pages, decoded
    /// buffers and scratch.
    pub device_bytes: u64,
}

/// Bytes per value of the Arrow array arrow-rs reads a column of physical type `t` into
/// (decimals at 16 bytes, or 32 past 38 digits; dates and times widened at most to 8 bytes),
/// for a fixed-width column; None for BOOLEAN and BYTE_ARRAY.
fn value_width(col: &parquet::schema::types::ColumnDescriptor) -> Option<u64> {
    use parquet::basic::LogicalType;
    let decimal = match col.logical_type_ref() {
        Some(LogicalType::Decimal(d)) => Some(d.precision),
        _ => match col.converted_type() {
            parquet::basic::ConvertedType::DECIMAL => Some(col.type_precision()),
            _ => None,
        },
    };
    let dec = |p: i32| if p > 38 { 32 } else { 16 };
    match col.physical_type() {
        PhysicalType::BOOLEAN | PhysicalType::BYTE_ARRAY => None,
        PhysicalType::INT32 | PhysicalType::INT64 => Some(decimal.map_or(8, dec)),
        PhysicalType::FLOAT => Some(4),
        PhysicalType::DOUBLE | PhysicalType::INT96 => Some(8),
        PhysicalType::FIXED_LEN_BYTE_ARRAY => {
            Some(decimal.map_or(col.type_length().max(0) as u64, dec).max(16))
        }
    }
}

/// The estimated cost of row group `rg` of `plan` (see the [module docs](self)).
pub fn row_group_cost(plan: &ReadPlan, md: &ParquetMetaData, rg: usize) -> RowGroupCost {
    let meta = md.row_group(rg);
    let rows = meta.num_rows().max(0) as u64;
    let (mut read, mut device, mut zstd) = (0u64, 0u64, 0u64);
    for c in &plan.chunks[plan.chunk_range_of(rg)] {
        let col = meta.column(c.column);
        // a chunk that reads some pages: their share of its bytes and values
        let share = |n: u64| match c.read {
            Some(_) if !c.is_empty() => {
                ((n as u128 * c.read_len() as u128).div_ceil(c.len() as u128)) as u64
            }
            _ => n,
        };
        let uncompressed = share(col.uncompressed_size().max(0) as u64);
        read += c.read_len();
        device += c.read_len() + CHUNK_OVERHEAD;
        if col.compression() != Compression::UNCOMPRESSED {
            device += uncompressed;
        }
        if matches!(col.compression(), Compression::ZSTD(_)) {
            zstd += uncompressed;
        }
        let values = share(c.num_values.max(0) as u64);
        let validity = values.div_ceil(8);
        let descr = col.column_descr();
        let uses = |e: Encoding| col.encodings().any(|x| x == e);
        device += validity
            + match (descr.physical_type(), value_width(descr)) {
                // DELTA_BINARY_PACKED values go through 8 bytes of scratch each
                (_, Some(w)) if uses(Encoding::DELTA_BINARY_PACKED) => {
                    values * (w + 8 + FIXED_SCRATCH_PER_ROW)
                }
                (_, Some(w)) => values * w + values * FIXED_SCRATCH_PER_ROW,
                (PhysicalType::BOOLEAN, _) => values.div_ceil(8) + values * FIXED_SCRATCH_PER_ROW,
                // DELTA_BYTE_ARRAY: the strings put together (twice: a scratch, then the
                // characters) can be far larger than the pages; their size is the footer's
                // unencoded bytes where the writer gave it, else a guess of 3x the pages
                (PhysicalType::BYTE_ARRAY, _) if uses(Encoding::DELTA_BYTE_ARRAY) => {
                    let raw = col
                        .unencoded_byte_array_data_bytes()
                        .map_or(3 * uncompressed, |b| share(b.max(0) as u64));
                    2 * raw + (values + 1) * 8 + values * (BYTES_SCRATCH_PER_ROW + 4)
                }
                // characters at most the page data, i64 offsets, scratch
                _ => uncompressed + (values + 1) * 8 + values * BYTES_SCRATCH_PER_ROW,
            };
        // a leaf of a nested field (decoded one slot per level entry: `values` counts them):
        // its levels, a byte each of repetition and definition and a u32 of scratch while they
        // decode, and its values moved to their slots (a second copy of values and validity;
        // strings: their offsets)
        if descr.max_rep_level() > 0 || descr.path().parts().len() > 1 {
            device += values * 6
                + validity
                + match (descr.physical_type(), value_width(descr)) {
                    (_, Some(w)) => values * w,
                    (PhysicalType::BOOLEAN, _) => values.div_ceil(8),
                    _ => (values + 1) * 8,
                };
        }
    }
    // where nvCOMP decompresses ZSTD pages, its temporary memory for one call
    device += NVCOMP_ZSTD_TEMP_PER_BYTE * zstd;
    RowGroupCost {
        row_group: rg,
        rows,
        read_bytes: read,
        device_bytes: device,
    }
}

/// Rows `rows` of row group `row_group`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RowRange {
    /// The row group.
    pub row_group: usize,
    /// Rows within it.
    pub rows: Range<u64>,
}

/// One batch: consecutive row ranges, in row-group order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BatchSpan {
    /// The rows it holds.
    pub parts: Vec<RowRange>,
}

impl BatchSpan {
    /// Rows in the batch.
    pub fn num_rows(&self) -> u64 {
        self.parts.iter().map(|p| p.rows.end - p.rows.start).sum()
    }
}

/// Whole row groups read and decoded together, and the batches they yield.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlannedPass {
    /// Row groups, ascending.
    pub row_groups: Vec<usize>,
    /// Indices into [`ReadPlan::chunks`] of their chunks (consecutive: chunks are row-group
    /// major).
    pub chunks: Range<usize>,
    /// Bytes of their chunks, as read.
    pub read_bytes: u64,
    /// Estimated device bytes while the pass decodes ([`RowGroupCost::device_bytes`] summed).
    pub device_bytes: u64,
    /// The batches the pass yields, in order.
    pub batches: Vec<BatchSpan>,
    /// A piece of a row group too large for the budget ([`split_row_group`]): the plan of the
    /// piece alone, which reads only the pages holding its rows; `chunks` then index its
    /// chunks. `None`: whole row groups of the load's plan.
    #[serde(skip)]
    pub piece: Option<std::sync::Arc<ReadPlan>>,
}

/// A plan cut into passes under a device-memory budget.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PassPlan {
    /// The budget: the most device bytes a load's live allocations may reach.
    pub budget: u64,
    /// The most device bytes a pass may need together with the next pass's raw chunks: the
    /// budget, or a share of it where a load keeps several passes in flight ([`load_passes`]).
    pub pass_budget: u64,
    /// Rows per batch asked for.
    pub batch_rows: u64,
    /// The passes, in row-group order.
    pub passes: Vec<PlannedPass>,
}

/// Cuts `plan` into passes under `budget` device bytes, each yielding batches of at most
/// `batch_rows` rows (never spanning row groups when `keep_dictionaries`). Greedy: a pass
/// takes the next row groups while it and the raw chunks of the row group after them fit the
/// budget. Where a row group does not fit beside the next one's reads, the row groups that
/// need more than half the budget are cut into pieces at page boundaries when the page index
/// is loaded ([`split_row_group`]: a pass per piece, each reading only its pages); without the
/// page index, or when a single page range does not fit, an error names the row group and
/// the budget it needs. `path` names the file.
pub fn plan_passes(
    path: &Path,
    plan: &ReadPlan,
    md: &ParquetMetaData,
    budget: u64,
    batch_rows: u64,
    keep_dictionaries: bool,
) -> Result<PassPlan> {
    if batch_rows == 0 {
        return Err(Error::setting("batch_rows", "0", "must be at least 1"));
    }
    let costs: Vec<RowGroupCost> = plan
        .row_groups
        .iter()
        .map(|&rg| row_group_cost(plan, md, rg))
        .collect();
    let too_large = |k: usize| Error::MemoryBudget {
        path: path.to_path_buf(),
        row_group: costs[k].row_group,
        needed: costs[k].device_bytes + costs.get(k + 1).map_or(0, |c| c.read_bytes),
        budget,
    };
    let whole = |group: &[RowGroupCost]| {
        let row_groups: Vec<usize> = group.iter().map(|c| c.row_group).collect();
        PlannedPass {
            batches: batch_spans(group, plan.rows.as_ref(), batch_rows, keep_dictionaries),
            chunks: chunk_range(plan, &row_groups),
            row_groups,
            read_bytes: group.iter().map(|c| c.read_bytes).sum(),
            device_bytes: group.iter().map(|c| c.device_bytes).sum(),
            piece: None,
        }
    };
    let mut passes = Vec::new();
    match cut_passes(&costs, budget) {
        Ok(cuts) => passes.extend(cuts.into_iter().map(|r| whole(&costs[r]))),
        Err(k) => {
            // the row groups over half the budget in pieces, the runs between them as before
            let large: Vec<usize> = (0..costs.len())
                .filter(|&i| i == k || costs[i].device_bytes > budget / 2)
                .collect();
            let mut start = 0;
            for &i in large.iter().chain(std::iter::once(&costs.len())) {
                if start < i {
                    let run = &costs[start..i];
                    let cuts = cut_passes(run, budget).map_err(|j| too_large(start + j))?;
                    passes.extend(cuts.into_iter().map(|r| whole(&run[r])));
                }
                if i == costs.len() {
                    break;
                }
                let rg = costs[i].row_group;
                // pieces within half the budget (the next one is read while one decodes), or
                // within all of it where pages are too large for that
                let pieces = match split_row_group(path, plan, md, rg, budget / 2) {
                    Err(Error::MemoryBudget { .. }) => {
                        split_row_group(path, plan, md, rg, budget)
                    }
                    other => other,
                };
                let pieces = match pieces {
                    Ok(Some(p)) => p,
                    Ok(None) => return Err(too_large(i)),
                    Err(Error::MemoryBudget { needed, .. }) => {
                        return Err(Error::MemoryBudget {
                            path: path.to_path_buf(),
                            row_group: rg,
                            needed,
                            budget,
                        })
                    }
                    Err(e) => return Err(e),
                };
                for (piece, cost) in pieces {
                    let batches = batches_of(
                        md,
                        &[rg],
                        piece.rows.as_ref(),
                        batch_rows,
                        keep_dictionaries,
                    );
                    passes.push(PlannedPass {
                        row_groups: vec![rg],
                        chunks: 0..piece.chunks.len(),
                        read_bytes: piece.request_bytes(),
                        device_bytes: cost.device_bytes,
                        batches,
                        piece: Some(std::sync::Arc::new(piece)),
                    });
                }
                start = i + 1;
            }
        }
    }
    Ok(PassPlan {
        budget,
        pass_budget: budget,
        batch_rows,
        passes,
    })
}

/// The passes a device load under `budget` reads and decodes: [`plan_passes`] within the
/// budget when the whole load fits it (then the load goes as without a budget) or a row group
/// needs more than half of it; else within half of it, so that passes overlap: the streaming
/// reader reads a pass while its reads fit beside what is held and the largest decode still to
/// come, and decodes it once its working set fits (see `reader::budget`). Measured on the H200
/// (benches/history/2026-12-03.md, same call, two rounds, the 24M-row lineitem files under
/// 2 GiB): SNAPPY 53.9–54.5 ms in halves, 59.6–60.2 in thirds, 60.1–64.1 in quarters;
/// uncompressed 51.2–53.6, 58.7, 62.8–63.5 (thirds had measured 57.0–67.4 ms against 60.3
/// in halves on 2026-12-02, a noisier call).
pub fn load_passes(
    path: &Path,
    plan: &ReadPlan,
    md: &ParquetMetaData,
    budget: u64,
    batch_rows: u64,
    keep_dictionaries: bool,
) -> Result<PassPlan> {
    let whole = plan_passes(path, plan, md, budget, batch_rows, keep_dictionaries)?;
    if whole.fits() {
        return Ok(whole);
    }
    match plan_passes(path, plan, md, budget / 2, batch_rows, keep_dictionaries) {
        Ok(mut p) => {
            p.budget = budget;
            Ok(p)
        }
        Err(_) => Ok(whole),
    }
}

impl PassPlan {
    /// Whether the whole load fits the budget at once (or is one pass).
    pub fn fits(&self) -> bool {
        self.passes.len() <= 1
            || self.passes.iter().map(|p| p.device_bytes).sum::<u64>() <= self.budget
    }
}

/// Cuts consecutive row groups of `costs` into passes such that, for every pass, its device
/// bytes plus the read bytes of the pass after it (read while it decodes) stay within
/// `budget`. Greedy: a pass takes the next row group while its reads still fit beside the
/// pass before, and the row group after it could still be read beside it. Fails (with the
/// index of the row group) exactly when some row group's device bytes and the next row
/// group's reads do not fit together: no cut at all could hold them.
fn cut_passes(
    costs: &[RowGroupCost],
    budget: u64,
) -> std::result::Result<Vec<Range<usize>>, usize> {
    let read_after = |i: usize| costs.get(i + 1).map_or(0, |c| c.read_bytes);
    if let Some(k) = (0..costs.len()).find(|&k| costs[k].device_bytes + read_after(k) > budget) {
        return Err(k);
    }
    let mut out = Vec::new();
    let mut before = 0u64; // device bytes of the pass before
    let mut k = 0;
    while k < costs.len() {
        let (mut end, mut read, mut device) = (k + 1, costs[k].read_bytes, costs[k].device_bytes);
        while end < costs.len()
            && before + read + costs[end].read_bytes <= budget
            && device + costs[end].device_bytes + read_after(end) <= budget
        {
            read += costs[end].read_bytes;
            device += costs[end].device_bytes;
            end += 1;
        }
        out.push(k..end);
        before = device;
        k = end;
    }
    Ok(out)
}

/// The chunk indices of `row_groups` (consecutive in the plan).
fn chunk_range(plan: &ReadPlan, row_groups: &[usize]) -> Range<usize> {
    match (row_groups.first(), row_groups.last()) {
        (Some(&a), Some(&b)) => plan.chunk_range_of(a).start..plan.chunk_range_of(b).end,
        _ => 0..0,
    }
}

/// The batches of `spans` that start in one of `row_groups` (ascending): a wave's batches.
pub(crate) fn spans_of(spans: &[BatchSpan], row_groups: &[usize]) -> Vec<BatchSpan> {
    spans
        .iter()
        .filter(|s| {
            s.parts
                .first()
                .is_some_and(|p| row_groups.binary_search(&p.row_group).is_ok())
        })
        .cloned()
        .collect()
}

/// The batches of consecutive row groups `row_groups` of the file `md` describes (their rows
/// `rows` selects, else all), as [`plan_passes`] cuts a pass's: at most `batch_rows` rows
/// each, filled across row-group boundaries unless `keep_dictionaries`.
pub fn batches_of(
    md: &ParquetMetaData,
    row_groups: &[usize],
    rows: Option<&RowRanges>,
    batch_rows: u64,
    keep_dictionaries: bool,
) -> Vec<BatchSpan> {
    let group: Vec<(usize, Vec<Range<u64>>)> = row_groups
        .iter()
        .map(|&rg| {
            (
                rg,
                rows_read(rows, rg, md.row_group(rg).num_rows().max(0) as u64),
            )
        })
        .collect();
    spans(&group, batch_rows.max(1), keep_dictionaries)
}

/// The batches of consecutive row groups `group` (their rows `rows` selects, else all): at most
/// `batch_rows` rows each, filled across row-group boundaries unless `keep_dictionaries`.
fn batch_spans(
    group: &[RowGroupCost],
    rows: Option<&RowRanges>,
    batch_rows: u64,
    keep_dictionaries: bool,
) -> Vec<BatchSpan> {
    let rows: Vec<(usize, Vec<Range<u64>>)> = group
        .iter()
        .map(|c| (c.row_group, rows_read(rows, c.row_group, c.rows)))
        .collect();
    spans(&rows, batch_rows, keep_dictionaries)
}

/// The rows of row group `rg` (of `all` rows) a load reads: those `rows` selects, else all.
fn rows_read(rows: Option<&RowRanges>, rg: usize, all: u64) -> Vec<Range<u64>> {
    match rows {
        Some(sel) => sel.get(&rg).cloned().unwrap_or_default(),
        None => vec![0..all],
    }
}

/// [`batch_spans`] of (row group, its rows read) pairs: a row group's rows are gathered whole
/// while the batch stays within `batch_rows`; a row group that does not fit closes the batch;
/// one with more than `batch_rows` rows is cut into batches of its own, of `batch_rows` rows
/// and the remainder. So a batch spans row groups only with all their rows read, and a batch
/// that holds part of them is a slice of one row group (on the host: no copy without a row
/// selection).
fn spans(
    group: &[(usize, Vec<Range<u64>>)],
    batch_rows: u64,
    keep_dictionaries: bool,
) -> Vec<BatchSpan> {
    let mut out = Vec::new();
    let mut cur: Vec<RowRange> = Vec::new();
    let mut filled = 0u64;
    for (row_group, ranges) in group {
        let row_group = *row_group;
        let rows: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        if rows == 0 {
            continue;
        }
        if !cur.is_empty() && (keep_dictionaries || filled + rows > batch_rows) {
            out.push(BatchSpan {
                parts: std::mem::take(&mut cur),
            });
            filled = 0;
        }
        if rows > batch_rows {
            // batches of batch_rows rows (over the row group's ranges), then the remainder
            let mut piece: Vec<RowRange> = Vec::new();
            let mut in_piece = 0u64;
            for r in ranges {
                let mut at = r.start;
                while at < r.end {
                    let take = (batch_rows - in_piece).min(r.end - at);
                    piece.push(RowRange {
                        row_group,
                        rows: at..at + take,
                    });
                    at += take;
                    in_piece += take;
                    if in_piece == batch_rows {
                        out.push(BatchSpan {
                            parts: std::mem::take(&mut piece),
                        });
                        in_piece = 0;
                    }
                }
            }
            if !piece.is_empty() {
                out.push(BatchSpan { parts: piece });
            }
            continue;
        }
        cur.extend(ranges.iter().map(|r| RowRange {
            row_group,
            rows: r.clone(),
        }));
        filled += rows;
    }
    if !cur.is_empty() {
        out.push(BatchSpan { parts: cur });
    }
    out
}

impl fmt::Display for PassPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let batches: usize = self.passes.iter().map(|p| p.batches.len()).sum();
        writeln!(
            f,
            "passes under a budget of {}{}: {} pass{}, {batches} batch{} of at most {} rows",
            human_bytes(self.budget),
            if self.pass_budget < self.budget {
                format!(
                    " (each within {}, several in flight)",
                    human_bytes(self.pass_budget)
                )
            } else {
                String::new()
            },
            self.passes.len(),
            if self.passes.len() == 1 { "" } else { "es" },
            if batches == 1 { "" } else { "es" },
            self.batch_rows
        )?;
        let total: u64 = self.passes.iter().map(|p| p.device_bytes).sum();
        if total <= self.budget {
            writeln!(
                f,
                "  the whole load fits (~{} on the device): a device load reads and decodes it \
                 in overlapping waves, as without a budget",
                human_bytes(total)
            )?;
        } else {
            writeln!(
                f,
                "  the whole load does not fit (~{} on the device): a device load reads and \
                 decodes these passes in turn, each once it fits beside those in flight",
                human_bytes(total)
            )?;
        }
        for (i, p) in self.passes.iter().enumerate() {
            let rows: Vec<String> = p.batches.iter().map(|b| b.num_rows().to_string()).collect();
            if let Some(piece) = &p.piece {
                let ranges: Vec<String> = (piece.rows.iter().flat_map(|r| r.values()).flatten())
                    .map(|r| format!("{}..{}", r.start, r.end))
                    .collect();
                writeln!(
                    f,
                    "  pass {i}: rows {} of row group {} (a piece: only its pages read), {} \
                     read, ~{} on the device; batches of {} rows",
                    short_list(&ranges),
                    fmt_index_list(&p.row_groups),
                    human_bytes(p.read_bytes),
                    human_bytes(p.device_bytes),
                    short_list(&rows)
                )?;
                continue;
            }
            writeln!(
                f,
                "  pass {i}: row group{} {}, {} read, ~{} on the device; batches of {} rows",
                if p.row_groups.len() == 1 { "" } else { "s" },
                fmt_index_list(&p.row_groups),
                human_bytes(p.read_bytes),
                human_bytes(p.device_bytes),
                short_list(&rows)
            )?;
        }
        Ok(())
    }
}

/// `a, b, c` — or the first few and a count.
fn short_list(v: &[String]) -> String {
    if v.len() <= 8 {
        return v.join(", ");
    }
    format!("{}, … ({} in all)", v[..6].join(", "), v.len())
}

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
        row_filter: plan.row_filter.clone(),
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

/// The footer's estimate of a device load's memory, all of it at once
/// ([`row_group_cost`]).
pub(crate) fn load_estimate(plan: &ReadPlan, md: &ParquetMetaData) -> u64 {
    plan.row_groups
        .iter()
        .map(|&rg| row_group_cost(plan, md, rg).device_bytes)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(row_group: usize, rows: u64, read: u64, device: u64) -> RowGroupCost {
        RowGroupCost {
            row_group,
            rows,
            read_bytes: read,
            device_bytes: device,
        }
    }

    /// Every row of every row group exactly once, in order, in batches of at most `n` rows;
    /// a batch of several parts holds whole row groups.
    fn check_batches(group: &[RowGroupCost], batches: &[BatchSpan], n: u64, keep: bool) {
        let mut want = group
            .iter()
            .flat_map(|c| (0..c.rows).map(move |r| (c.row_group, r)));
        for b in batches {
            assert!(b.num_rows() > 0 && b.num_rows() <= n, "{b:?}");
            if keep {
                assert_eq!(b.parts.len(), 1, "a batch spans row groups: {b:?}");
            }
            if b.parts.len() > 1 {
                for p in &b.parts {
                    let whole = group.iter().find(|c| c.row_group == p.row_group).unwrap();
                    assert_eq!(p.rows, 0..whole.rows, "part of a row group gathered: {b:?}");
                }
            }
            for p in &b.parts {
                assert!(p.rows.start < p.rows.end);
                for r in p.rows.clone() {
                    assert_eq!(want.next(), Some((p.row_group, r)));
                }
            }
        }
        assert_eq!(want.next(), None, "rows left over");
    }

    #[test]
    fn batches_gather_small_row_groups_and_cut_large_ones() {
        // 800 row groups of 10,000 rows into batches of 65,536: six whole row groups each,
        // 134 batches, the last of two
        let small: Vec<RowGroupCost> = (0..800).map(|i| cost(i, 10_000, 1, 1)).collect();
        let b = batch_spans(&small, None, 65_536, false);
        assert_eq!(b.len(), 134);
        assert_eq!(b[0].parts.len(), 6, "six whole row groups");
        assert_eq!(b[0].num_rows(), 60_000);
        assert_eq!(b[133].num_rows(), 20_000);
        check_batches(&small, &b, 65_536, false);
        // row groups of 1.5 batches: a batch and a half batch each
        let mid: Vec<RowGroupCost> = (0..3).map(|i| cost(i, 150, 1, 1)).collect();
        let b = batch_spans(&mid, None, 100, false);
        let rows: Vec<u64> = b.iter().map(BatchSpan::num_rows).collect();
        assert_eq!(rows, [100, 50, 100, 50, 100, 50]);
        check_batches(&mid, &b, 100, false);
        // one row group of 1M rows: cut into 15 batches of 65,536 and one of 16,960
        let large = [cost(3, 1_000_000, 1, 1)];
        let b = batch_spans(&large, None, 65_536, false);
        assert_eq!(b.len(), 16);
        assert_eq!(b[15].num_rows(), 1_000_000 - 15 * 65_536);
        check_batches(&large, &b, 65_536, false);
        // kept dictionaries: never across row groups
        let b = batch_spans(&small[..10], None, 65_536, true);
        assert_eq!(b.len(), 10);
        check_batches(&small[..10], &b, 65_536, true);
        // an empty row group yields no batch
        assert!(batch_spans(&[cost(0, 0, 1, 1)], None, 10, false).is_empty());
    }

    #[test]
    fn random_layouts_keep_every_row_once_and_passes_within_the_budget() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        for _ in 0..300 {
            let n_rg = 1 + next(40) as usize;
            let group: Vec<RowGroupCost> = (0..n_rg)
                .map(|i| {
                    let read = 1 + next(1000);
                    cost(i, next(5000), read, read + next(3000))
                })
                .collect();
            let batch_rows = 1 + next(7000);
            let keep = next(4) == 0;
            check_batches(
                &group,
                &batch_spans(&group, None, batch_rows, keep),
                batch_rows,
                keep,
            );
            // passes: consecutive, covering; each pass and the next one's reads within the
            // budget; an error exactly when a row group and the next one's reads cannot fit
            let budget = 500 + next(20_000);
            let impossible = (0..n_rg).find(|&k| {
                group[k].device_bytes + group.get(k + 1).map_or(0, |c| c.read_bytes) > budget
            });
            match cut_passes(&group, budget) {
                Err(k) => assert_eq!(Some(k), impossible),
                Ok(cuts) => {
                    assert_eq!(impossible, None);
                    let covered: Vec<usize> = cuts.iter().flat_map(|r| r.clone()).collect();
                    assert_eq!(covered, (0..n_rg).collect::<Vec<_>>());
                    let dev = |r: &Range<usize>| {
                        group[r.clone()].iter().map(|c| c.device_bytes).sum::<u64>()
                    };
                    let read = |r: &Range<usize>| {
                        group[r.clone()].iter().map(|c| c.read_bytes).sum::<u64>()
                    };
                    for w in cuts.windows(2) {
                        assert!(dev(&w[0]) + read(&w[1]) <= budget, "{cuts:?}");
                    }
                    assert!(cuts.iter().all(|r| dev(r) <= budget));
                }
            }
        }
    }
}
