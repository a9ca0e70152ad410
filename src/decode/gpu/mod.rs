//! Decoding on the GPU: kernel launches over the column chunks a device load put in memory.
//!
//! [`page_tables()`] parses every chunk's page headers on the device (one launch counts pages,
//! the host sums the counts, a second fills one [`PageInfo`] per page).
//! [`decode_fixed_columns`] and [`decode_bytes_columns`] then decode the columns the
//! placement ([`crate::decode::gpu_plan`]) gives the GPU — flat ones a value per row, the leaves
//! of nested fields a value slot per level entry, which `nested.rs` then builds into lists,
//! structs and maps from their levels: compressed pages decompressed on the device by one
//! driver (`decompress/`: our SNAPPY kernel, one block per page or per 64 KiB fragment of a
//! large page when large pages are few; our GZIP inflate kernel; nvCOMP's ZSTD and LZ4 where
//! it is installed; the host's cores taking the largest GZIP and nvCOMP pages beside them), or
//! SNAPPY pages on the host's cores where `snappy_on_host`'s model says that is faster (then a
//! large page is split over cores by [`crate::decode::snappy_host`] when pages are few); other
//! codecs on the host (a task per chunk: its bytes copied back, pages decompressed in parallel
//! straight into a pooled pinned buffer, then uploaded). The reader runs the two decoders of a
//! wave at once, the byte-array one on a helper thread and a companion stream;
//! definition levels to validity, PLAIN, dictionary, DELTA_BINARY_PACKED and BYTE_STREAM_SPLIT
//! values with arrow-rs's conversions, strings (PLAIN, dictionary, DELTA_LENGTH_BYTE_ARRAY,
//! DELTA_BYTE_ARRAY) by sizes → offsets (scanned on the device) → characters, UTF-8 checked on
//! the device for Utf8; decimals stored as BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY in
//! DELTA_BYTE_ARRAY found as strings are, then written at their width; kept dictionaries as
//! each row's key and the entries of the batch's dictionary pages as its values. DELTA streams are
//! decoded block-parallel: thread 0 walks the block headers into a table of miniblocks, every
//! thread unpacks deltas and one block-wide sum per tile turns them into values. One launch
//! per stage over all pages of a wave; every kernel records problems as
//! bit flags per page, checked once after the stage, and a bad page is an error naming the
//! file, row group, column and page.
//!
//! The stages, in the order a wave's decoding runs them, one file each:
//!
//! | file | stage |
//! |---|---|
//! | `page_tables.rs` | page headers parsed on the device, one [`PageInfo`] per page; their claims checked before anything is allocated by them |
//! | `locate.rs` | where each page's decompressed data lives: in place, SNAPPY and GZIP on the device (SNAPPY on the host where that is faster), nvCOMP's codecs by it (with the host's share beside it), other codecs on the host and uploaded |
//! | `decompress/mod.rs` | the one device decompression driver: page jobs, the host's share, a codec's launch, pages refused (their chunks to the host) or named in an error |
//! | `decompress/snappy.rs` | the SNAPPY kernels (whole pages, or 64 KiB fragments of large ones) and the host-or-device model |
//! | `decompress/inflate.rs` | GZIP pages by our inflate kernel (a warp per page, bounded by the page's size, checked by each member's trailer); a chunk it refuses goes to the host's inflater |
//! | `decompress/nvcomp.rs` | ZSTD, LZ4_RAW and Hadoop-framed LZ4 pages (not GZIP: nvCOMP wrote out of bounds on a lying page): one nvCOMP call per codec, largest pages first |
//! | `decompress/beside.rs` | the largest of the GZIP kernel's and nvCOMP's pages (a share of their bytes) decompressed on the host's cores at the same time |
//! | `page_jobs.rs` | the data-page jobs both value decoders build, and errors naming a page |
//! | `fixed.rs` | [`decode_fixed_columns`]: fixed-width columns in one launch |
//! | `bytes.rs` | [`decode_bytes_columns`]: dictionary entries, sizes (or kept dictionaries' keys), offsets, characters, fixed-width values, UTF-8 check |
//! | `bytes/dba.rs` | DELTA_BYTE_ARRAY values put together, a page's values in segments over many blocks |
//! | `nested.rs` | nested fields: their leaves' levels (one byte per level entry), then list offsets, struct / list / map validity and the leaves' values moved to their slots |
//! | `decimals.rs` | every decimal array decoded checked within its declared precision |
//! | `launch.rs` | typed kernel launches (`Kernel`, `Const`, `Mut`) and upload / read-back helpers |
//! | `kernels.rs` | the embedded `.cu` sources, each kernel's declared parameters, the job structures' C layout, error bits |
//! | `views.rs` | string and binary columns of device batches as views (`with_string_views`) |
//! | `profile.rs` | stage timing |
//!
//! Device memory: every buffer a kernel reads or writes is owned by the stage that launches
//! it and outlives the launch (a waited launch returns after the kernel; kernels launched
//! without waiting are followed by a wait before their buffers go).

mod bytes;
mod decimals;
mod decompress;
mod concat;
mod filter;
mod fixed;
pub(crate) mod kernels;
mod locate;
mod nested;
mod page_jobs;
mod page_tables;
mod report;
mod views;
mod wave;

pub use bytes::decode_bytes_columns;
pub(crate) use concat::{concat_device, joinable};
pub(crate) use filter::{filter_device, DeviceKept};
pub(crate) use locate::device_decompresses;
pub use fixed::decode_fixed_columns;
pub use page_tables::page_tables;
pub(crate) use page_tables::checked_page_tables;
pub(crate) use wave::{decode_wave, WaveInput};
pub use wave::keys_fallback;
pub(crate) use crate::device::profile::{profile_absorb, profile_begin, profile_end, profiling, timed};
pub(crate) use crate::device::{launch, profile};
pub use report::{Decompressed, FieldDecode, GpuDecodeReport, PageCounts};
pub use decompress::{segments_of, snappy_fragments_of, SnappyPlacement};
pub(crate) use views::to_views;


use std::collections::HashMap;
use std::sync::Arc;

use crate::array::DeviceArray;
use crate::decode::gpu::kernels::PageInfo;
use crate::decode::gpu_plan::GpuColumn;
use crate::device::DeviceBuffer;
use crate::error::{Error, Result};
use crate::plan::{BatchSpan, ColumnChunkPlan};
use locate::locate_pages;

/// Column chunks in device memory, still encoded: one allocation holding every planned
/// request at its plan destination offset (`FileScan::load_chunks`).
/// `FileScan::decode_on_gpu` decodes them into device batches;
/// `FileScan::decode_on_host` decodes a device→host copy (a cross-check).
pub struct DeviceChunks {
    /// Shared by the waves of a streamed pipelined load, which read into one allocation.
    buffer: Arc<DeviceBuffer>,
    chunks: Vec<ColumnChunkPlan>,
}

impl std::fmt::Debug for DeviceChunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceChunks")
            .field("buffer", &self.buffer)
            .field("chunks", &self.chunks.len())
            .finish()
    }
}

impl DeviceChunks {
    /// Chunks `chunks` held in `buffer` at their destination offsets.
    pub(crate) fn new(buffer: Arc<DeviceBuffer>, chunks: Vec<ColumnChunkPlan>) -> Self {
        DeviceChunks { buffer, chunks }
    }

    /// The device allocation.
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buffer
    }

    /// The plan entries of the chunks: chunk `c`'s bytes are at
    /// `buffer[c.dest_offset .. c.dest_offset + c.dest_len()]` (the parts it reads, where it
    /// reads only some pages: [`ColumnChunkPlan::read`]).
    pub fn chunks(&self) -> &[ColumnChunkPlan] {
        &self.chunks
    }

    /// The device address of chunk `i`'s first byte and the length of its slice.
    pub fn chunk_ptr(&self, i: usize) -> Option<(u64, u64)> {
        let c = self.chunks.get(i)?;
        Some((self.buffer.device_ptr() + c.dest_offset, c.dest_len()))
    }

    /// A host copy of chunk `i`'s slice of the buffer.
    pub fn chunk_to_host(&self, i: usize) -> Result<Vec<u8>> {
        let c = self.chunks.get(i).ok_or_else(|| Error::Device {
            device: format!("cuda:{}", self.buffer.gpu().ordinal()),
            reason: format!("no chunk {i} (the load holds {})", self.chunks.len()),
        })?;
        let start = c.dest_offset as usize;
        self.buffer
            .copy_to_host(start..start + c.dest_len() as usize)
    }
}

/// A decoded column of one batch of a wave in device memory: a [`DeviceArray`] (Arrow layout:
/// values, or offsets then characters; an LSB-first validity bitmap only when there are nulls)
/// and where it belongs.
pub struct DeviceColumn {
    /// Index of the field in the projected schema.
    pub field: usize,
    /// The leaf column decoded (of a nested field: its first leaf once the field is built; its
    /// leaves are decoded one value slot per level entry first).
    pub leaf: usize,
    /// Index of the batch in the wave ([`WaveDecode::batches`]).
    pub batch: usize,
    /// The column.
    pub array: DeviceArray,
    /// Its compressed pages, by where they were decompressed (each chunk counted in the
    /// first batch that uses it).
    pub decompressed: PageCounts,
    /// A nested leaf's repetition and definition levels, one byte per entry.
    pub(crate) levels: Option<nested::EntryLevels>,
}

impl std::fmt::Debug for DeviceColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceColumn")
            .field("field", &self.field)
            .field("batch", &self.batch)
            .field("array", &self.array)
            .finish_non_exhaustive()
    }
}

impl DeviceColumn {
    /// The column of `rows` rows of `data_type` in `buffers`, with the validity bitmap an
    /// optional column's kernels fill; nulls are counted later ([`set_null_count`]).
    ///
    /// [`set_null_count`]: Self::set_null_count
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        field: usize,
        leaf: usize,
        batch: usize,
        data_type: arrow::datatypes::DataType,
        rows: usize,
        buffers: Vec<(DeviceBuffer, usize)>,
        validity: Option<DeviceBuffer>,
        decompressed: PageCounts,
    ) -> Self {
        DeviceColumn {
            field,
            leaf,
            batch,
            array: DeviceArray {
                data_type,
                len: rows,
                null_count: 0,
                validity,
                buffers,
                children: Vec::new(),
                dictionary: None,
            },
            decompressed,
            levels: None,
        }
    }

    /// Records the nulls the kernels counted; without any, the validity bitmap is dropped (as
    /// arrow-rs holds none).
    pub(crate) fn set_null_count(&mut self, n: usize) {
        self.array.null_count = n;
        if n == 0 {
            self.array.validity = None;
        }
    }

    /// The column as an arrow-rs array in host memory (a device→host copy).
    pub fn to_host(&self) -> Result<arrow::array::ArrayRef> {
        self.array.to_host()
    }
}

/// What the decoding of a wave works on: the chunks of a device load and their page tables
/// ([`page_tables()`]), the file (for errors), the columns the placement
/// ([`crate::decode::gpu_plan`]) gives the GPU, the projected schema, each chunk's codec
/// (`codec_of(row_group, leaf)`), each row group's rows, where SNAPPY pages go, and the
/// batches to decode into: each output column is one batch's rows of one field, gathered from
/// the pages of several row groups or cut from part of one.
#[derive(Clone, Copy)]
pub struct WaveDecode<'a> {
    /// The column chunks in device memory.
    pub chunks: &'a DeviceChunks,
    /// Their page tables, in chunk order.
    pub tables: &'a [Vec<PageInfo>],
    /// The file, named in errors.
    pub path: &'a std::path::Path,
    /// The GPU placements.
    pub columns: &'a [GpuColumn],
    /// The projected schema's fields.
    pub fields: &'a [Arc<arrow::datatypes::Field>],
    /// Codec of the chunk of (row group, leaf).
    pub codec_of: &'a (dyn Fn(usize, usize) -> parquet::basic::Compression + Sync),
    /// Rows of a row group.
    pub rows_of: &'a (dyn Fn(usize) -> usize + Sync),
    /// Where SNAPPY pages are decompressed.
    pub snappy: SnappyPlacement,
    /// The percent of the GZIP kernel's and nvCOMP's bytes the host takes beside them (`None`:
    /// the measured default for the host's cores).
    pub host_share: Option<u32>,
    /// The batches: rows of the chunks' row groups, every row at most once.
    pub batches: &'a [BatchSpan],
}

impl std::fmt::Debug for WaveDecode<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaveDecode")
            .field("path", &self.path)
            .field("chunks", &self.chunks.chunks().len())
            .field("columns", &self.columns.len())
            .field("snappy", &self.snappy)
            .field("batches", &self.batches.len())
            .finish_non_exhaustive()
    }
}

/// One part of an output column: (row group, its rows, the output row of the first).
type ColumnPart = (usize, std::ops::Range<u64>, u64);

/// A chunk one decoder of a wave takes: its index, its GPU column, its pages' (decompressed)
/// data, where its pages were decompressed, and its dictionary page as (page, address,
/// bytes, entries).
struct SelectedChunk<'a> {
    ci: usize,
    col: &'a GpuColumn,
    pages: Vec<(u64, u64)>,
    decompressed: PageCounts,
    dict: Option<(usize, u64, u64, i32)>,
    /// A chunk that reads only some pages: each page's first row (from the offset index).
    first_rows: Option<Vec<u64>>,
    /// The level entries (values, nulls included) its data pages hold: its rows when flat.
    entries: u64,
    /// A repeated nested leaf's chunk that reads only some pages: each page's rows, from the
    /// offset index (its entries follow those of the page read before it).
    page_rows: Option<Vec<std::ops::Range<u64>>>,
    /// A repeated nested leaf whose row group the wave's batches cut: (row, the level entry
    /// it begins at), ascending, for every row where a batch part begins or ends.
    cuts: Vec<(u64, u64)>,
}

/// The chunks of a wave one decoder takes, by (row group, leaf); its columns, in placement
/// order; and the buffers of decompressed pages, kept alive until the decoder's kernels are
/// done.
struct Selected<'a> {
    chunks: HashMap<(usize, usize), SelectedChunk<'a>>,
    columns: Vec<&'a GpuColumn>,
    uploads: Vec<DeviceBuffer>,
}

impl<'a> WaveDecode<'a> {
    /// The chunks whose GPU column `pick` accepts, their pages located (decompressed on the
    /// device, or on the host and uploaded: `locate.rs`); checks that each chunk's
    /// data pages hold its row group's rows.
    fn select(&self, pick: impl Fn(&GpuColumn) -> bool) -> Result<Selected<'a>> {
        let all: &'a [GpuColumn] = self.columns;
        let columns: Vec<&'a GpuColumn> = all.iter().filter(|g| pick(g)).collect();
        let picked: Vec<(usize, &'a GpuColumn)> = self
            .chunks
            .chunks()
            .iter()
            .enumerate()
            .filter_map(|(ci, c)| {
                columns
                    .iter()
                    .find(|g| g.leaf == c.column)
                    .map(|&g| (ci, g))
            })
            .collect();
        let cis: Vec<usize> = picked.iter().map(|&(ci, _)| ci).collect();
        let mut uploads = Vec::new();
        let located = timed("locate pages (decompress)", || {
            locate_pages(
                self.chunks,
                &cis,
                self.tables,
                self.path,
                self.codec_of,
                self.snappy,
                self.host_share,
                &mut uploads,
            )
        })?;
        let mut chunks = HashMap::with_capacity(picked.len());
        for ((ci, col), (pages, decompressed)) in picked.into_iter().zip(located) {
            let c = &self.chunks.chunks()[ci];
            page_jobs::check_encodings(&self.tables[ci]).map_err(|e| self.bad_chunk(ci, e))?;
            let (rows, dict) = page_jobs::chunk_pages(&self.tables[ci], &pages);
            if let Some((k, _, len, entries)) = dict {
                // before anything is sized by the entries (a byte-array dictionary's table
                // takes 16 bytes an entry): they fit the page at their smallest
                let width = i32::try_from(col.physical_width).unwrap_or(i32::MAX);
                let bits = crate::decode::claims::least_entry_bits(col.physical_type, width);
                if (entries.max(0) as u64).saturating_mul(bits) > len.saturating_mul(8) {
                    return Err(self.bad_chunk(
                        ci,
                        format!("dictionary page {k}: {entries} entries in {len} bytes"),
                    ));
                }
            }
            let want = (self.rows_of)(c.row_group) as u64;
            // a repeated leaf's pages hold level entries: its rows are found from its levels
            let repeated = col.nested && col.max_rep_level > 0;
            let indexed = |values_are_rows: bool| {
                page_jobs::indexed_first_rows(c, &self.tables[ci], want, values_are_rows)
                    .map_err(|e| self.bad_chunk(ci, e))
            };
            let mut page_rows = None;
            let first_rows = match c.read {
                None if repeated && rows < want => {
                    return Err(self.bad_chunk(
                        ci,
                        format!("a nested leaf's pages hold {rows} entries for {want} rows"),
                    ));
                }
                // the entries of the pages read follow one another; their rows, from the
                // offset index, place the cuts
                Some(_) if repeated => {
                    page_rows = Some(indexed(false)?);
                    None
                }
                None if repeated => None,
                // some pages read: each where the offset index says, with its rows
                Some(_) => Some(indexed(true)?.into_iter().map(|r| r.start).collect()),
                None if rows != want => {
                    return Err(self.bad_chunk(
                        ci,
                        format!("the pages hold {rows} values, the row group {want} rows"),
                    ));
                }
                None => None,
            };
            let chunk = SelectedChunk {
                ci,
                col,
                pages,
                decompressed,
                dict,
                first_rows,
                entries: rows,
                page_rows,
                cuts: Vec::new(),
            };
            chunks.insert((c.row_group, c.column), chunk);
        }
        self.find_cuts(&mut chunks)?;
        Ok(Selected {
            chunks,
            columns,
            uploads,
        })
    }

    /// For each repeated nested leaf chunk of `chunks` whose row group the batches cut: the
    /// level entries where those rows begin ([`SelectedChunk::cuts`]), from its repetition
    /// levels (decoded on the device for all such chunks at once, read back and scanned).
    fn find_cuts(&self, chunks: &mut HashMap<(usize, usize), SelectedChunk<'a>>) -> Result<()> {
        let mut wanted: Vec<((usize, usize), Vec<u64>)> = Vec::new();
        for (&key, sc) in chunks.iter() {
            if !sc.col.nested || sc.col.max_rep_level == 0 {
                continue;
            }
            let all = (self.rows_of)(key.0) as u64;
            // a chunk read whole begins at row 0 and ends at `all`; one read in part needs
            // every boundary
            let pruned = sc.page_rows.is_some();
            let mut rows: Vec<u64> = self
                .batches
                .iter()
                .flat_map(|b| b.parts.iter())
                .filter(|p| p.row_group == key.0)
                .flat_map(|p| [p.rows.start, p.rows.end])
                .filter(|&r| pruned || (r != 0 && r < all))
                .collect();
            if rows.is_empty() {
                continue;
            }
            rows.sort_unstable();
            rows.dedup();
            wanted.push((key, rows));
        }
        if wanted.is_empty() {
            return Ok(());
        }
        wanted.sort();
        let mut jobs = Vec::new();
        let mut names = Vec::new();
        let mut nested = Vec::with_capacity(wanted.len());
        for (k, (key, _)) in wanted.iter().enumerate() {
            let sc = &chunks[key];
            let window = page_jobs::Window {
                column: k,
                rows: 0..sc.entries,
                out_at: 0,
                max_def: sc.col.max_def_level,
                max_rep: sc.col.max_rep_level,
                dict: (0, 0),
            };
            let c = &self.chunks.chunks()[sc.ci];
            page_jobs::data_page_jobs(
                c,
                &self.tables[sc.ci],
                &sc.pages,
                None,
                &window,
                &mut jobs,
                &mut names,
            );
            nested.push((k, sc.entries as usize));
        }
        let gpu = self.chunks.buffer().gpu();
        let levels = timed("nested row starts", || {
            nested::decode_levels(gpu, self.path, &jobs, &names, wanted.len(), &nested)
        })?;
        for (k, levels) in levels {
            let (key, rows) = &wanted[k];
            let all = (self.rows_of)(key.0) as u64;
            let Some(sc) = chunks.get_mut(key) else {
                continue;
            };
            let rep = levels.rep_to_host()?;
            // per data page read (or the chunk): its entries and its rows
            let segments: Vec<(std::ops::Range<u64>, std::ops::Range<u64>)> = match &sc.page_rows
            {
                None => vec![(0..sc.entries, 0..all)],
                Some(page_rows) => {
                    let mut at = 0u64;
                    let table = &self.tables[sc.ci];
                    table
                        .iter()
                        .zip(page_rows)
                        .filter(|(p, _)| matches!(p.kind, 0 | 3))
                        .map(|(p, r)| {
                            let n = p.num_values.max(0) as u64;
                            at += n;
                            (at - n..at, r.clone())
                        })
                        .collect()
                }
            };
            sc.cuts = nested::row_starts(&rep, &segments, rows)
                .map_err(|e| self.bad_chunk(sc.ci, e))?;
        }
        Ok(())
    }

    /// The parts of output column (`batch`, `col`): per part of the batch, its chunk and
    /// where its rows land; an error when the wave lacks a chunk a batch needs.
    fn parts<'s>(
        &self,
        selected: &'s Selected<'a>,
        batch: &BatchSpan,
        col: &GpuColumn,
    ) -> Result<Vec<(&'s SelectedChunk<'a>, std::ops::Range<u64>, u64)>> {
        let mut out = Vec::with_capacity(batch.parts.len());
        let mut at = 0u64;
        for part in &batch.parts {
            let Some(chunk) = selected.chunks.get(&(part.row_group, col.leaf)) else {
                return Err(Error::Decode {
                    path: self.path.to_path_buf(),
                    row_group: Some(part.row_group),
                    column: Some(self.fields[col.field].name().clone()),
                    reason: "a batch needs a column chunk the wave does not hold".into(),
                });
            };
            let rows = if col.nested && col.max_rep_level > 0 {
                // a repeated leaf: the level entries of the part's rows
                let all = (self.rows_of)(part.row_group) as u64;
                let whole = chunk.page_rows.is_none();
                let entry = |r: u64| -> Result<u64> {
                    if whole && r == 0 {
                        return Ok(0);
                    }
                    if whole && r >= all {
                        return Ok(chunk.entries);
                    }
                    match chunk.cuts.binary_search_by_key(&r, |c| c.0) {
                        Ok(k) => Ok(chunk.cuts[k].1),
                        Err(_) => Err(Error::Decode {
                            path: self.path.to_path_buf(),
                            row_group: Some(part.row_group),
                            column: Some(self.fields[col.field].name().clone()),
                            reason: format!("no level entry was found where row {r} begins"),
                        }),
                    }
                };
                entry(part.rows.start)?..entry(part.rows.end)?
            } else {
                // flat, or nested without repetition: an entry per row
                part.rows.clone()
            };
            let len = rows.end - rows.start;
            out.push((chunk, rows, at));
            at += len;
        }
        Ok(out)
    }

    /// The value slots of output column (`batch`, `col`): the batch's rows, or for a nested
    /// leaf the level entries of its row groups' chunks.
    fn column_len(
        &self,
        selected: &Selected<'a>,
        batch: &BatchSpan,
        col: &GpuColumn,
    ) -> Result<usize> {
        if !col.nested {
            return Ok(batch.num_rows() as usize);
        }
        let parts = self.parts(selected, batch, col)?;
        Ok(parts.iter().map(|(_, r, _)| (r.end - r.start) as usize).sum())
    }

    /// Appends the page jobs of output column `column` (the rows of `batch`, field `col`) to
    /// `jobs` and `names`: per part of the batch, the pages of its chunk that overlap it, each
    /// writing its window, decoded with the dictionary `dict_of` gives its chunk. Returns where
    /// its chunks' pages were decompressed (each chunk counted once per wave, in `seen`) and
    /// the parts as (row group, rows, first output row).
    #[allow(clippy::too_many_arguments)]
    fn column_jobs(
        &self,
        selected: &Selected<'a>,
        batch: &BatchSpan,
        col: &GpuColumn,
        column: usize,
        dict_of: &dyn Fn(&SelectedChunk<'a>) -> (u64, i32),
        seen: &mut std::collections::HashSet<usize>,
        jobs: &mut Vec<kernels::PageJob>,
        names: &mut Vec<page_jobs::PageName>,
    ) -> Result<(PageCounts, Vec<ColumnPart>)> {
        let mut decompressed = PageCounts::default();
        let mut parts = Vec::with_capacity(batch.parts.len());
        for (sc, rows, out_at) in self.parts(selected, batch, col)? {
            let c = &self.chunks.chunks()[sc.ci];
            if seen.insert(sc.ci) {
                decompressed += sc.decompressed;
            }
            parts.push((c.row_group, rows.clone(), out_at));
            let window = page_jobs::Window {
                column,
                rows,
                out_at,
                max_def: col.max_def_level,
                max_rep: col.max_rep_level,
                dict: dict_of(sc),
            };
            page_jobs::data_page_jobs(
                c,
                &self.tables[sc.ci],
                &sc.pages,
                sc.first_rows.as_deref(),
                &window,
                jobs,
                names,
            );
        }
        Ok((decompressed, parts))
    }

    /// An error about chunk `ci`.
    fn bad_chunk(&self, ci: usize, reason: String) -> Error {
        let c = &self.chunks.chunks()[ci];
        Error::BadColumnChunk {
            path: self.path.to_path_buf(),
            row_group: c.row_group,
            column: c.path.clone(),
            range: Some(c.range.clone()),
            reason,
        }
    }
}
