//! Planning: which bytes of the file a query needs. Pure — no I/O, no CUDA.
//!
//! [`plan`] takes the footer ([`FileMetadata`]) and a [`Selection`] (projection, row groups,
//! pruning predicate) and produces a [`ReadPlan`]: one [`ColumnChunkPlan`] per selected
//! (row group, leaf column), and the [`IoRequest`]s that read them, coalesced by the rules in
//! [`coalesce`](mod@coalesce). Every offset the footer gives is checked against the file here,
//! so that nothing later reads outside the file or hands the decoder an impossible range.
//!
//! The predicate prunes **row groups** by their statistics; it does not filter rows. With the
//! page index loaded it also prunes pages ([`predicate`]), and a load that reads some rows of a
//! row group (a row selection, or the pages the predicate keeps) reads only the pages holding
//! them ([`ColumnChunkPlan::read`]). The parts: `rows` (row selections and access plans),
//! `page_reads` (the pages a chunk reads), [`passes`] (passes and batches under a memory
//! budget, a row group larger than it in pieces), [`devices`] (those passes spread over several
//! GPUs), [`coalesce`], `display` (`cuparquet plan`'s text).

pub mod bloom;
pub mod coalesce;
pub mod devices;
mod header_index;
mod display;
mod page_reads;
pub mod passes;
pub mod predicate;
pub(crate) mod projection;
mod rows;

use std::ops::Range;
use std::path::Path;

use parquet::file::metadata::ParquetMetaData;

pub use coalesce::{CoalesceConfig, IoRequest};
pub use header_index::{
    has_offset_index, header_index_for_budget, unindexed_for_budget, with_header_index,
};
pub(crate) use passes::spans_of;
pub use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
pub use passes::{
    batches_of, load_passes, plan_passes, BatchSpan, PassPlan, PlannedPass, RowRange,
};
pub use predicate::{parse_predicate, BoundPredicate, CmpOp, Literal, Predicate};
pub use projection::split_column_list;
use rows::intersect;
pub use rows::{
    position_among, rows_of_access_plan, rows_of_selection, rows_restricted, RowGroupAccess,
};

use crate::error::{Error, Result};
use crate::metadata::FileMetadata;

/// What to read: a projection and a row-group selection. The default reads everything.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Column names or dotted paths (a name containing dots in backquotes); `None` = all columns.
    pub columns: Option<Vec<String>>,
    /// Row groups by index; `None` = all.
    pub row_groups: Option<Vec<usize>>,
    /// A pruning predicate (see [`predicate`]); row groups it rules out are skipped.
    pub filter: Option<String>,
    /// The rows to read, per row group ([`RowRanges`]); row groups it does not name are
    /// skipped (never read). `None` = every row of the selected row groups.
    pub rows: Option<RowRanges>,
}

/// Selected rows per row group: ascending, disjoint, non-empty ranges of each row group's
/// rows, counted from its first row.
pub type RowRanges = std::collections::BTreeMap<usize, Vec<Range<u64>>>;

/// What the filter's page pruning did to one row group.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PagePruning {
    /// The row group.
    pub row_group: usize,
    /// Pages of the filter's columns that may hold a match.
    pub pages_kept: usize,
    /// Pages of the filter's columns whose statistics rule every row out.
    pub pages_dropped: usize,
    /// Rows of the kept pages (before a row selection).
    pub rows_kept: u64,
}

/// A data page, from the offset index.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PagePlan {
    /// File offset of the page header.
    pub offset: u64,
    /// Header plus compressed data, in bytes.
    pub compressed_size: u64,
    /// Index of the page's first row within the row group.
    pub first_row_index: u64,
}

/// One column chunk to read: a (row group, leaf column) pair.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ColumnChunkPlan {
    /// Row group index in the file.
    pub row_group: usize,
    /// Leaf column index in the file schema.
    pub column: usize,
    /// Index of the top-level field (in the file schema) the leaf belongs to.
    pub field: usize,
    /// Dotted path of the leaf column.
    pub path: String,
    /// Bytes of the chunk: dictionary page (if any) through the end of the last data page.
    pub range: Range<u64>,
    /// Where the chunk's first byte lands in the destination buffer.
    pub dest_offset: u64,
    /// Compression codec.
    pub codec: String,
    /// Physical type.
    pub physical_type: String,
    /// Logical type, if annotated.
    pub logical_type: Option<String>,
    /// Number of values (including nulls) the footer declares.
    pub num_values: i64,
    /// The footer's dictionary page offset when it was ignored because it cannot be right
    /// (before the first data byte of the file, or after the first data page).
    pub ignored_dictionary_offset: Option<i64>,
    /// Data pages, when the page index was loaded.
    pub pages: Option<Vec<PagePlan>>,
    /// Only parts of the chunk are read, when the page index was loaded and the load reads some
    /// rows of the row group ([`ReadPlan::rows`]): the bytes before the first data page (the
    /// dictionary page) and the runs of data pages holding a row it reads, ascending. The bytes
    /// of the other pages are not read, and take no room in the destination. `None`: the whole
    /// chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read: Option<Vec<ReadPart>>,
}

/// A part of a column chunk read on its own ([`ColumnChunkPlan::read`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReadPart {
    /// Its bytes in the file.
    pub file: Range<u64>,
    /// Where its first byte lands, from the chunk's [`ColumnChunkPlan::dest_offset`].
    pub dest: u64,
}

impl ColumnChunkPlan {
    /// Length of the chunk in bytes.
    pub fn len(&self) -> u64 {
        self.range.end - self.range.start
    }

    /// True for a chunk with no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The parts read: [`ColumnChunkPlan::read`], else the whole chunk as one part.
    pub fn read_parts(&self) -> Vec<ReadPart> {
        match &self.read {
            Some(parts) => parts.clone(),
            None => vec![ReadPart {
                file: self.range.clone(),
                dest: 0,
            }],
        }
    }

    /// Bytes of the chunk read.
    pub fn read_len(&self) -> u64 {
        match &self.read {
            Some(parts) => parts.iter().map(|p| p.file.end - p.file.start).sum(),
            None => self.len(),
        }
    }

    /// Bytes of the chunk's slice of the destination, from [`ColumnChunkPlan::dest_offset`] to
    /// the end of its last part: [`ColumnChunkPlan::len`] for a whole chunk. The parts of a
    /// chunk that reads some pages lie inside it, at their [`ReadPart::dest`]; between them
    /// lie bytes of the file the requests read through, or alignment padding.
    pub fn dest_len(&self) -> u64 {
        match self.read.as_ref().and_then(|p| p.last()) {
            Some(last) => last.dest + (last.file.end - last.file.start),
            None => self.len(),
        }
    }

    /// The file offset of the byte `at` bytes into the chunk's slice of the destination, when
    /// that byte was read (a whole chunk: `range.start + at`).
    pub fn file_offset(&self, at: u64) -> Option<u64> {
        match &self.read {
            None => (at < self.len()).then(|| self.range.start + at),
            Some(parts) => parts.iter().find_map(|p| {
                let len = p.file.end - p.file.start;
                (p.dest <= at && at < p.dest + len).then(|| p.file.start + (at - p.dest))
            }),
        }
    }

    /// The page-index entry (index into [`ColumnChunkPlan::pages`]) of the data page whose
    /// header begins at file offset `offset`, if the page index lists one there.
    pub fn indexed_page(&self, offset: u64) -> Option<usize> {
        let pages = self.pages.as_ref()?;
        pages.binary_search_by_key(&offset, |p| p.offset).ok()
    }
}

/// A row group left out by the predicate, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PrunedRowGroup {
    /// Row group index.
    pub row_group: usize,
    /// The statistics that rule it out.
    pub reason: String,
}

/// Everything the I/O and decode stages need, and nothing they must discover.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReadPlan {
    /// Length of the file.
    pub file_len: u64,
    /// Selected leaf columns, ascending.
    pub leaves: Vec<usize>,
    /// Selected row groups, ascending.
    pub row_groups: Vec<usize>,
    /// Rows to read: in the selected row groups, or those of [`ReadPlan::rows`].
    pub num_rows: u64,
    /// With a row selection ([`Selection::rows`]) or pages pruned by the filter: the rows read
    /// of each selected row group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<RowRanges>,
    /// Row groups whose pages the filter pruned (the page index loaded): pages kept and
    /// dropped of the filter's columns, rows kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub page_pruning: Vec<PagePruning>,
    /// Row groups the predicate (or the row selection) pruned.
    pub pruned: Vec<PrunedRowGroup>,
    /// The predicate as understood, if any.
    pub filter: Option<String>,
    /// The row filter, when the load keeps only the rows where it is true (its pruning is in
    /// [`filter`](Self::filter); [`num_rows`](Self::num_rows) counts the rows read, before
    /// it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub row_filter: Option<String>,
    /// One entry per (row group, leaf), row group major.
    pub chunks: Vec<ColumnChunkPlan>,
    /// Coalesced reads, unit by unit, in file order within a unit, laid end to end in the
    /// destination buffer.
    pub requests: Vec<IoRequest>,
    /// Units of work, in row-group order.
    pub units: Vec<ReadUnit>,
    /// Coalescing parameters used.
    pub coalesce: CoalesceConfig,
}

impl ReadPlan {
    /// The (row group, column) of every chunk whose impossible dictionary page offset the
    /// plan ignored ([`ColumnChunkPlan::ignored_dictionary_offset`]).
    pub(crate) fn ignored_dictionary_offsets(&self) -> Vec<(usize, usize)> {
        self.chunks
            .iter()
            .filter(|c| c.ignored_dictionary_offset.is_some())
            .map(|c| (c.row_group, c.column))
            .collect()
    }

    /// Bytes of column chunks selected.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.len()).sum()
    }

    /// Bytes the requests read (the chunks' parts read, plus alignment padding and coalesced
    /// gaps); also the size of the destination buffer.
    pub fn request_bytes(&self) -> u64 {
        self.requests.iter().map(|r| r.len()).sum()
    }

    /// Indices into `chunks` of the chunks of row group `rg`.
    pub fn chunks_of_row_group(&self, rg: usize) -> impl Iterator<Item = usize> + '_ {
        self.chunk_range_of(rg)
    }

    /// The indices into [`ReadPlan::chunks`] of row group `rg`'s chunks: consecutive, since
    /// chunks are row-group major in ascending row-group order (found by binary search).
    pub fn chunk_range_of(&self, rg: usize) -> Range<usize> {
        let start = self.chunks.partition_point(|c| c.row_group < rg);
        let end = self.chunks.partition_point(|c| c.row_group <= rg);
        start..end
    }
}

/// Column chunks are gathered into units of about this many bytes: 2 MiB. A unit holds whole
/// cells — all chunks of one top-level field in one row group — in (row group, field) order, at
/// least one cell. Requests never span two units.
///
/// Small units keep the bytes just read in cache for the decoder and give the thread pool many
/// independent tasks (a file of 14 row groups still loads on 16 threads); cells keep each
/// decode whole, since a top-level field decodes on its own. Measured on the H200 machine's
/// 16 cores (benches/RESULTS.md): 2 MiB units load 1.17× faster than 8 MiB units and 2× faster
/// than whole row groups.
pub const UNIT_TARGET_BYTES: u64 = 2 << 20;

/// A unit of work: consecutive cells (row group × top-level field) and the requests that carry
/// their chunks. Requests never carry bytes of two units, so units are read and decoded
/// independently — in parallel, each into a buffer of its own — and the fields of a row group
/// decoded in different units are joined column-wise.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReadUnit {
    /// Row groups the unit holds cells of, ascending.
    pub row_groups: Vec<usize>,
    /// Indices into [`ReadPlan::chunks`]: the unit's chunks are consecutive.
    pub chunks: Range<usize>,
    /// Indices into [`ReadPlan::requests`]: the unit's requests are consecutive, laid end to
    /// end in the destination from `requests[requests.start].dest_offset`.
    pub requests: Range<usize>,
    /// Bytes of the unit's requests.
    pub bytes: u64,
}

/// A row filter `expr` over `md`'s schema: its text as understood, and the columns it tests
/// (as `with_columns` takes them), which a load reads beside the asked ones.
pub fn row_filter_columns(md: &ParquetMetaData, expr: &str) -> Result<(String, Vec<String>)> {
    let pred = parse_predicate(expr)?;
    let schema = md.file_metadata().schema_descr();
    let rf = predicate::row_filter(&pred, expr, schema)?;
    let columns = (rf.leaves().iter())
        .map(|&l| predicate::fmt_column(schema.column(l).path().parts()))
        .collect();
    Ok((pred.to_string(), columns))
}

/// Parses a row-group list such as `0,2-4,7`.
pub fn parse_row_groups(s: &str) -> std::result::Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("invalid row group '{part}': expected N or N-M");
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| bad())?;
                let b: usize = b.trim().parse().map_err(|_| bad())?;
                if a > b {
                    return Err(format!("invalid row group range '{part}': start after end"));
                }
                if b - a > 10_000_000 {
                    return Err(format!("row group range '{part}' is too large"));
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err("empty row-group list".into());
    }
    Ok(out)
}

/// Plans the read of `selection` from a file with footer `meta`. `path` only names the file in
/// errors.
pub fn plan(path: &Path, meta: &FileMetadata, selection: &Selection) -> Result<ReadPlan> {
    plan_with(path, meta, selection, &CoalesceConfig::default())
}

/// The leaf columns `columns` names (top-level names or dotted paths, as
/// [`Selection::columns`]), ascending; every leaf when `None`. An unknown or malformed name is
/// an error listing the file's columns.
pub fn projected_leaves(
    path: &Path,
    md: &ParquetMetaData,
    columns: Option<&[String]>,
) -> Result<Vec<usize>> {
    let schema = md.file_metadata().schema_descr();
    Ok(match columns {
        None => (0..schema.num_columns()).collect(),
        Some(names) => {
            let mut v = Vec::new();
            for name in names {
                let segs = projection::parse_path(name).ok_or_else(|| Error::UnknownColumn {
                    path: path.to_path_buf(),
                    name: name.clone(),
                    available: "(the name is malformed: empty segment or unterminated backquote)"
                        .into(),
                })?;
                let found = projection::resolve_leaves(schema, &segs).ok_or_else(|| {
                    Error::UnknownColumn {
                        path: path.to_path_buf(),
                        name: name.clone(),
                        available: top_level_names(md),
                    }
                })?;
                v.extend(found);
            }
            v.sort_unstable();
            v.dedup();
            v
        }
    })
}

/// [`plan`] with explicit coalescing parameters.
pub fn plan_with(
    path: &Path,
    meta: &FileMetadata,
    selection: &Selection,
    coalesce_cfg: &CoalesceConfig,
) -> Result<ReadPlan> {
    let md: &ParquetMetaData = &meta.metadata;
    let schema = md.file_metadata().schema_descr();

    // Projection.
    let leaves = projected_leaves(path, md, selection.columns.as_deref())?;

    // Row groups: explicit list, then the predicate.
    let n_rg = md.num_row_groups();
    let mut row_groups: Vec<usize> = match &selection.row_groups {
        None => (0..n_rg).collect(),
        Some(list) => {
            if let Some(bad) = list.iter().find(|&&r| r >= n_rg) {
                return Err(Error::RowGroupSelection {
                    path: path.to_path_buf(),
                    reason: format!(
                        "row group {bad} does not exist: the file has {n_rg} row group{} (0..{n_rg})",
                        if n_rg == 1 { "" } else { "s" }
                    ),
                });
            }
            let mut v = list.clone();
            v.sort_unstable();
            v.dedup();
            v
        }
    };
    let mut pruned = Vec::new();
    if let Some(rows) = &selection.rows {
        for (&rg, ranges) in rows {
            let n = md.row_groups().get(rg).map(|g| g.num_rows().max(0) as u64);
            let Some(n) = n else {
                return Err(Error::RowGroupSelection {
                    path: path.to_path_buf(),
                    reason: format!("the row selection names row group {rg}, which does not exist: the file has {n_rg}"),
                });
            };
            let mut end = 0;
            for r in ranges {
                if r.start >= r.end || r.start < end || r.end > n {
                    return Err(Error::RowGroupSelection {
                        path: path.to_path_buf(),
                        reason: format!(
                            "row group {rg}: selected rows {}..{} are not ascending, disjoint, \
                             non-empty ranges within its {n} rows",
                            r.start, r.end
                        ),
                    });
                }
                end = r.end;
            }
        }
        row_groups.retain(|rg| {
            let keep = rows.get(rg).is_some_and(|r| !r.is_empty());
            if !keep {
                pruned.push(PrunedRowGroup {
                    row_group: *rg,
                    reason: "the row selection selects none of its rows".into(),
                });
            }
            keep
        });
    }
    let mut filter_text = None;
    let mut page_pruning = Vec::new();
    let mut page_rows: Option<RowRanges> = None;
    if let Some(expr) = &selection.filter {
        let parsed = parse_predicate(expr)?;
        let bound = predicate::bind(&parsed, expr, schema)?;
        row_groups.retain(|&rg| match bound.prune_reason(md, rg) {
            Some(reason) => {
                pruned.push(PrunedRowGroup {
                    row_group: rg,
                    reason,
                });
                false
            }
            None => true,
        });
        filter_text = Some(bound.text().to_string());
        // with the page index: the rows whose pages may match, intersected with a selection
        let mut by_page = RowRanges::new();
        row_groups.retain(|&rg| {
            let Some(kept) = bound.prune_pages(md, rg) else {
                return true;
            };
            let all = md.row_group(rg).num_rows().max(0) as u64;
            let rows = match &selection.rows {
                Some(sel) => intersect(sel.get(&rg).map_or(&[][..], |v| &v[..]), &kept.rows),
                None => kept.rows.clone(),
            };
            if kept.dropped > 0 || rows.is_empty() {
                page_pruning.push(PagePruning {
                    row_group: rg,
                    pages_kept: kept.kept,
                    pages_dropped: kept.dropped,
                    rows_kept: kept.rows.iter().map(|r| r.end - r.start).sum(),
                });
            }
            if rows.is_empty() {
                pruned.push(PrunedRowGroup {
                    row_group: rg,
                    reason: format!(
                        "{}: no page's statistics allow a match ({} pages)",
                        bound.text(),
                        kept.dropped
                    ),
                });
                return false;
            }
            if rows != [0..all] || selection.rows.is_some() {
                by_page.insert(rg, rows);
            }
            true
        });
        if !by_page.is_empty() || selection.rows.is_some() {
            // row groups the page index does not narrow keep all their rows (or the selection's)
            for &rg in &row_groups {
                by_page.entry(rg).or_insert_with(|| match &selection.rows {
                    Some(sel) => sel.get(&rg).cloned().unwrap_or_default(),
                    None => vec![0..md.row_group(rg).num_rows().max(0) as u64],
                });
            }
            page_rows = Some(by_page);
        }
    }

    // The rows read of each row group, where not all.
    let rows: Option<RowRanges> = page_rows.as_ref().or(selection.rows.as_ref()).map(|sel| {
        row_groups
            .iter()
            .filter_map(|rg| sel.get(rg).map(|r| (*rg, r.clone())))
            .collect()
    });

    // Column chunks.
    let footer_start = meta.footer_start();
    let offset_index = md.offset_index();
    let mut chunks = Vec::with_capacity(row_groups.len() * leaves.len());
    let mut num_rows = 0u64;
    for &rg in &row_groups {
        let rgm = md.row_group(rg);
        num_rows += rgm.num_rows().max(0) as u64;
        for &leaf in &leaves {
            let cc = rgm.column(leaf);
            let col_path = cc.column_path().string();
            let bad = |range: Option<Range<u64>>, reason: String| Error::BadColumnChunk {
                path: path.to_path_buf(),
                row_group: rg,
                column: col_path.clone(),
                range,
                reason,
            };
            if cc.file_path().is_some() {
                return Err(bad(
                    None,
                    format!(
                        "the chunk lives in another file ({:?}); external column chunks are not supported",
                        cc.file_path().unwrap_or_default()
                    ),
                ));
            }
            #[cfg(feature = "encryption")]
            if cc.crypto_metadata().is_some() {
                return Err(Error::Unsupported {
                    path: path.to_path_buf(),
                    what: format!(
                        "row group {rg}, column '{col_path}' is encrypted: encrypted Parquet files are not supported"
                    ),
                });
            }
            let size = cc.compressed_size();
            // A chunk without values (e.g. in a row group of 0 rows) needs no bytes, whatever
            // its offsets say; writers leave them 0 there.
            let empty = size == 0 || cc.num_values() == 0 || rgm.num_rows() == 0;
            if size < 0 && !empty {
                return Err(bad(None, format!("negative compressed size {size}")));
            }
            let (start, ignored_dict) = chunk_start(cc);
            if !empty && start < 4 {
                return Err(bad(
                    None,
                    format!("chunk offset {start} lies before the first data byte of the file (4)"),
                ));
            }
            let start = start.max(0) as u64;
            let end = start.saturating_add(size.max(0) as u64);
            if !empty && end > footer_start {
                return Err(bad(
                    Some(start..end),
                    format!(
                        "the chunk reaches past the start of the footer at byte {footer_start} (file is {} bytes)",
                        meta.file_len
                    ),
                ));
            }
            let range = if empty { start..start } else { start..end };
            let pages: Option<Vec<PagePlan>> = offset_index
                .and_then(|oi| oi.get(rg))
                .and_then(|cols| cols.get(leaf))
                .map(|idx| {
                    idx.page_locations()
                        .iter()
                        .map(|p| PagePlan {
                            offset: p.offset.max(0) as u64,
                            compressed_size: p.compressed_page_size.max(0) as u64,
                            first_row_index: p.first_row_index.max(0) as u64,
                        })
                        .collect()
                });
            // the page index, when loaded, must describe the chunk: readers (arrow-rs on the
            // host, the page reads) take page locations and first rows from it. With some of
            // the row group's rows, only their pages are read (`page_reads` checks the index
            // itself).
            let all_rows = rgm.num_rows().max(0) as u64;
            let read = match (&pages, rows.as_ref().and_then(|r| r.get(&rg))) {
                (Some(p), Some(sel)) if !empty && sel[..] != [0..all_rows] => {
                    page_reads::page_reads(&range, p, sel, all_rows)
                        .map_err(|e| bad(Some(range.clone()), e))?
                        .map(|parts| {
                            // where they land: set with the requests
                            parts
                                .into_iter()
                                .map(|file| ReadPart { file, dest: 0 })
                                .collect()
                        })
                }
                (Some(p), _) if !empty => {
                    page_reads::check_index(&range, p, all_rows)
                        .map_err(|e| bad(Some(range.clone()), e))?;
                    None
                }
                _ => None,
            };
            let descr = cc.column_descr();
            chunks.push(ColumnChunkPlan {
                row_group: rg,
                column: leaf,
                field: schema.get_column_root_idx(leaf),
                path: col_path.clone(),
                range,
                dest_offset: 0,
                codec: codec_name(cc.compression()).to_string(),
                physical_type: cc.column_type().to_string(),
                logical_type: descr.logical_type_ref().map(|l| format!("{l:?}")),
                num_values: cc.num_values(),
                ignored_dictionary_offset: ignored_dict,
                pages,
                read,
            });
        }
    }

    let (requests, units) = coalesce_units(&mut chunks, meta.file_len, coalesce_cfg);
    if let Some(kept) = &rows {
        num_rows = kept.values().flatten().map(|r| r.end - r.start).sum();
    }
    Ok(ReadPlan {
        file_len: meta.file_len,
        leaves,
        row_groups,
        num_rows,
        rows,
        page_pruning,
        pruned,
        filter: filter_text,
        row_filter: None,
        chunks,
        requests,
        units,
        coalesce: *coalesce_cfg,
    })
}

/// Gathers cells into units (see [`UNIT_TARGET_BYTES`]), coalesces each unit's chunks into
/// requests, and sets every chunk's destination offset. `chunks` are row-group major, leaves
/// ascending within a row group.
pub(crate) fn coalesce_units(
    chunks: &mut [ColumnChunkPlan],
    file_len: u64,
    cfg: &CoalesceConfig,
) -> (Vec<IoRequest>, Vec<ReadUnit>) {
    let mut requests: Vec<IoRequest> = Vec::new();
    let mut units: Vec<ReadUnit> = Vec::new();
    let mut dest = 0u64;
    let mut start = 0usize;
    while start < chunks.len() {
        // Take whole cells while the unit stays under the target (always at least one).
        let mut end = start;
        let mut bytes = 0u64;
        while end < chunks.len() {
            let cell = (chunks[end].row_group, chunks[end].field);
            let cell_end = end
                + chunks[end..]
                    .iter()
                    .take_while(|c| (c.row_group, c.field) == cell)
                    .count();
            let cell_bytes: u64 = chunks[end..cell_end].iter().map(|c| c.read_len()).sum();
            if end > start
                && (bytes + cell_bytes > cfg.unit_target_bytes
                    || (cfg.units_within_row_groups
                        && chunks[end].row_group != chunks[start].row_group))
            {
                break;
            }
            bytes += cell_bytes;
            end = cell_end;
        }
        // every part read of the unit's chunks (a whole chunk is one), coalesced
        let mut ranges: Vec<Range<u64>> = Vec::new();
        let mut owner: Vec<usize> = Vec::new();
        for (i, c) in chunks[start..end].iter().enumerate() {
            match &c.read {
                None => {
                    ranges.push(c.range.clone());
                    owner.push(start + i);
                }
                Some(parts) => {
                    for p in parts {
                        ranges.push(p.file.clone());
                        owner.push(start + i);
                    }
                }
            }
        }
        let (mut reqs, dests) = coalesce::coalesce(&ranges, file_len, cfg);
        for q in &mut reqs {
            q.dest_offset += dest;
            for c in &mut q.chunks {
                *c = owner[*c];
            }
            q.chunks.dedup();
        }
        let mut k = 0;
        for c in chunks[start..end].iter_mut() {
            match &mut c.read {
                None => c.dest_offset = dests[k] + dest,
                Some(parts) => {
                    // the chunk's slice begins at its first part (parts lie in file order,
                    // and so in the destination)
                    c.dest_offset = dests[k] + dest;
                    for (p, d) in parts.iter_mut().zip(&dests[k..]) {
                        p.dest = d + dest - c.dest_offset;
                    }
                    k += parts.len() - 1;
                }
            }
            k += 1;
        }
        let mut row_groups: Vec<usize> = chunks[start..end].iter().map(|c| c.row_group).collect();
        row_groups.dedup();
        let unit_bytes: u64 = reqs.iter().map(|q| q.len()).sum();
        units.push(ReadUnit {
            row_groups,
            chunks: start..end,
            requests: requests.len()..requests.len() + reqs.len(),
            bytes: unit_bytes,
        });
        dest += unit_bytes;
        requests.extend(reqs);
        start = end;
    }
    (requests, units)
}

/// Where a column chunk's bytes start: its dictionary page's offset where that is a plausible
/// one (at least 4, before the first data page), else its first data page's; and the
/// dictionary page offset it ignored, if any. (arrow-rs's `ColumnChunkMetaData::byte_range`
/// takes any dictionary offset and panics on a negative one.)
pub(crate) fn chunk_start(
    cc: &parquet::file::metadata::ColumnChunkMetaData,
) -> (i64, Option<i64>) {
    let data = cc.data_page_offset();
    match cc.dictionary_page_offset() {
        Some(d) if d >= 4 && d < data => (d, None),
        Some(d) => (data, Some(d)),
        None => (data, None),
    }
}

/// A column chunk's bytes as the plan reads them: [`chunk_start`] and the compressed size,
/// negative values as 0 (the plan refuses such a chunk unless it holds no values).
pub(crate) fn chunk_bytes(cc: &parquet::file::metadata::ColumnChunkMetaData) -> (u64, u64) {
    let (start, _) = chunk_start(cc);
    (start.max(0) as u64, cc.compressed_size().max(0) as u64)
}

/// The codec's name without its level (`ZSTD`, not `ZSTD(ZstdLevel(1))`).
pub fn codec_name(c: parquet::basic::Compression) -> &'static str {
    use parquet::basic::Compression as C;
    match c {
        C::UNCOMPRESSED => "UNCOMPRESSED",
        C::SNAPPY => "SNAPPY",
        C::GZIP(_) => "GZIP",
        C::LZO => "LZO",
        C::BROTLI(_) => "BROTLI",
        C::LZ4 => "LZ4",
        C::ZSTD(_) => "ZSTD",
        C::LZ4_RAW => "LZ4_RAW",
    }
}

/// The columns a selection may name: top-level names, a nested field's with the dotted paths
/// of its leaves (`s (s.a, s.b)`), the first 30 fields.
fn top_level_names(md: &ParquetMetaData) -> String {
    let schema = md.file_metadata().schema_descr();
    let fields = schema.root_schema().get_fields();
    let mut names: Vec<String> = fields
        .iter()
        .enumerate()
        .take(30)
        .map(|(i, f)| {
            if f.is_primitive() {
                return predicate::fmt_column(&[f.name().to_string()]);
            }
            let leaves: Vec<String> = (0..schema.num_columns())
                .filter(|&l| schema.get_column_root_idx(l) == i)
                .take(8)
                .map(|l| predicate::fmt_column(schema.column(l).path().parts()))
                .collect();
            format!("{} ({})", predicate::fmt_column(&[f.name().to_string()]), leaves.join(", "))
        })
        .collect();
    if fields.len() > 30 {
        names.push(format!("... ({} in all)", fields.len()));
    }
    names.join(", ")
}

pub use crate::config::human_bytes;

/// The row groups of `row_groups` (ascending) after which no batch of `spans` goes on: where a
/// load may be cut into waves. A cut after `rg` is inside a batch that starts at or before
/// `rg` and ends in a later row group.
pub(crate) fn batch_cuts(
    spans: &[BatchSpan],
    row_groups: &[usize],
) -> std::collections::HashSet<usize> {
    let mut inside = std::collections::HashSet::new();
    for s in spans {
        let (Some(first), Some(last)) = (s.parts.first(), s.parts.last()) else {
            continue;
        };
        let from = row_groups.partition_point(|&rg| rg < first.row_group);
        let to = row_groups.partition_point(|&rg| rg < last.row_group);
        inside.extend(row_groups[from..to].iter().copied());
    }
    row_groups
        .iter()
        .copied()
        .filter(|rg| !inside.contains(rg))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_group_lists() {
        assert_eq!(parse_row_groups("0,2-4, 7").unwrap(), vec![0, 2, 3, 4, 7]);
        assert!(parse_row_groups("4-2")
            .unwrap_err()
            .contains("start after end"));
        assert!(parse_row_groups("x")
            .unwrap_err()
            .contains("invalid row group 'x'"));
        assert!(parse_row_groups("").is_err());
        assert_eq!(display::fmt_index_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    }

    fn chunk(rg: usize, range: Range<u64>) -> ColumnChunkPlan {
        chunk_of(rg, 0, range)
    }

    fn chunk_of(rg: usize, field: usize, range: Range<u64>) -> ColumnChunkPlan {
        ColumnChunkPlan {
            row_group: rg,
            column: field,
            field,
            path: "c".into(),
            range,
            dest_offset: 0,
            codec: "UNCOMPRESSED".into(),
            physical_type: "INT32".into(),
            logical_type: None,
            num_values: 1,
            ignored_dictionary_offset: None,
            pages: None,
            read: None,
        }
    }

    #[test]
    fn units_hold_whole_row_groups_and_their_requests() {
        let mb = 1u64 << 20;
        // small row groups 0..3 share a unit; 40 MiB groups 3 and 4 get one each
        let mut chunks = vec![
            chunk(0, 4..100),
            chunk(0, 100..200),
            chunk(1, 200..300),
            chunk(2, 300..300),
            chunk(3, 1000..1000 + 40 * mb),
            chunk(4, 1000 + 40 * mb..1000 + 80 * mb),
            // a row group of two 5 MiB fields: one unit per field
            chunk_of(5, 0, 100 * mb..105 * mb),
            chunk_of(5, 1, 105 * mb..110 * mb),
        ];
        let (reqs, units) = coalesce_units(&mut chunks, 1 << 30, &CoalesceConfig::default());
        assert_eq!(units.len(), 5);
        assert_eq!(units[0].row_groups, vec![0, 1, 2]);
        assert_eq!(units[0].chunks, 0..4);
        assert_eq!(units[1].row_groups, vec![3]);
        assert_eq!(units[2].row_groups, vec![4]);
        assert_eq!(units[3].row_groups, vec![5]);
        assert_eq!(units[3].chunks, 6..7);
        assert_eq!(units[4].chunks, 7..8);
        let mut dest = 0;
        for u in &units {
            assert_eq!(reqs[u.requests.start].dest_offset, dest);
            for q in &reqs[u.requests.clone()] {
                for &c in &q.chunks {
                    assert!(
                        u.row_groups.contains(&chunks[c].row_group),
                        "request crosses units"
                    );
                }
            }
            dest += u.bytes;
        }
        assert_eq!(dest, reqs.iter().map(|q| q.len()).sum::<u64>());
        // every chunk's bytes sit at its destination offset, in a request of its own unit
        // (alignment may make neighbouring units read the same page: their buffers differ)
        for (i, c) in chunks.iter().enumerate().filter(|(_, c)| !c.is_empty()) {
            let u = units.iter().find(|u| u.chunks.contains(&i)).unwrap();
            let q = reqs[u.requests.clone()]
                .iter()
                .find(|q| q.range.start <= c.range.start && c.range.start < q.range.end)
                .unwrap();
            assert_eq!(c.dest_offset, q.dest_offset + c.range.start - q.range.start);
        }
    }

    #[test]
    fn chunks_that_read_some_pages_take_only_their_parts() {
        let kb = 1u64 << 10;
        // a chunk of 1 MiB that reads its first 8 KiB (dictionary) and 64 KiB at 512 KiB,
        // then a whole chunk after it
        let mut sparse = chunk(0, 0..1024 * kb);
        sparse.read = Some(vec![
            ReadPart {
                file: 0..8 * kb,
                dest: 0,
            },
            ReadPart {
                file: 512 * kb..576 * kb,
                dest: 0,
            },
        ]);
        let mut chunks = vec![sparse, chunk(0, 1024 * kb..1100 * kb)];
        let (reqs, units) = coalesce_units(&mut chunks, 1 << 30, &CoalesceConfig::default());
        assert_eq!(units.len(), 1);
        let ranges: Vec<_> = reqs.iter().map(|q| q.range.clone()).collect();
        assert_eq!(
            ranges,
            vec![0..8 * kb, 512 * kb..576 * kb, 1024 * kb..1100 * kb]
        );
        assert_eq!(reqs[0].chunks, vec![0]);
        assert_eq!(reqs[1].chunks, vec![0]);
        assert_eq!(units[0].bytes, (8 + 64 + 76) * kb);
        let parts = chunks[0].read.clone().unwrap();
        assert_eq!(
            (chunks[0].dest_offset, parts[0].dest, parts[1].dest),
            (0, 0, 8 * kb)
        );
        assert_eq!(chunks[0].dest_len(), 72 * kb);
        assert_eq!(chunks[0].read_len(), 72 * kb);
        assert_eq!(chunks[0].file_offset(8 * kb + 5), Some(512 * kb + 5));
        assert_eq!(chunks[1].dest_offset, 72 * kb);
    }

    #[test]
    fn human() {
        assert_eq!(human_bytes(10), "10 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(3 << 30), "3.0 GiB");
    }
}
