//! BYTE_ARRAY flat columns (Utf8, Binary and their Large forms), in stages, each one launch
//! over all pages of a wave: dictionary entries, sizes (each row's length and source), offsets
//! (span sums on the device, a host scan of those, then every column's offsets), characters
//! copied in place, and the UTF-8 check of Utf8 columns. Kept dictionaries get each row's key
//! instead, and their values from the dictionary pages of their batch's chunks.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::kernels::{
    conversion_code, BytesColumn, FixedOut, PageJob, BYTES_CHARS, BYTES_FIXED, BYTES_SIZES,
    DECODE_BYTES_MODULE, DECODE_FIXED_ERRORS, DICT_CHARS, DICT_ENTRIES, DICT_LENGTHS, SPAN_SUMS,
    UTF8_CHECK, WRITE_OFFSETS,
};
use super::launch::{
    i32s_from_device, u64s, u64s_from_device, upload, upload_table, validity_words, zeroed, Const,
    Mut,
};
use super::page_jobs::{page_errors, row_bases, PageName};
use super::profile::{since, timed};
use super::{DeviceColumn, WaveDecode};
use crate::array::DeviceArray;
use crate::decode::gpu_plan::{key_capacity, key_width, Conversion};
use crate::device::nvrtc::Module;
use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};

mod dba;

/// Rows per span of the offset scan: SCAN_THREADS * SCAN_PER_THREAD in decode_bytes.cu.
const SPAN: usize = 256 * 16;

/// Decodes the BYTE_ARRAY columns of `columns` (Utf8, Binary and their Large forms) from the
/// chunks of a device load: sizes first, offsets from their sum, then the characters written in
/// place.
pub fn decode_bytes_columns(wave: &WaveDecode<'_>) -> Result<Vec<DeviceColumn>> {
    let t_setup = Instant::now();
    let WaveDecode { chunks, path, .. } = *wave;
    let gpu = Arc::clone(chunks.buffer().gpu());
    let BytesJobs {
        page_jobs,
        page_names,
        cols,
        outs,
        dicts,
        dict_tables,
        dict_names,
        _dict_entries,
        counters,
        uploads,
    } = bytes_jobs(wave)?;
    if outs.is_empty() {
        return Ok(Vec::new());
    }
    let module = DECODE_BYTES_MODULE.load(&gpu)?;
    since("byte-array setup", t_setup);
    let stages = Stages {
        gpu: &gpu,
        module: &module,
        path,
    };
    // 1. dictionary entries
    if !dicts.is_empty() {
        stages.dictionary_entries(&dicts, &dict_tables, &dict_names)?;
    }
    // 2. sizes
    let sizes = stages.sizes(&page_jobs, &page_names, &cols)?;
    // 3. offsets and character buffers
    let offsets = stages.offsets(&outs, wave)?;
    // 4. characters, and the values of fixed-width columns found as strings
    let _tables = stages.characters(&page_jobs, &sizes, &offsets, &outs)?;
    stages.fixed_values(&page_jobs, &page_names, &sizes, &outs)?;
    // the levels of nested leaves
    let nested: Vec<(usize, usize)> = outs
        .iter()
        .enumerate()
        .filter(|(_, o)| o.nested)
        .map(|(i, o)| (i, o.rows))
        .collect();
    let mut levels: HashMap<usize, super::nested::EntryLevels> =
        super::nested::decode_levels(&gpu, path, &page_jobs, &page_names, outs.len(), &nested)?
            .into_iter()
            .collect();
    drop(uploads);
    // 5. UTF-8 validation of Utf8 columns
    stages.utf8_check(&outs, &offsets)?;
    let Offsets {
        offsets64: _,
        scratch,
        chars,
        final_offsets,
        ..
    } = offsets;
    drop(scratch);
    let null_counts = u64s_from_device(&counters, outs.len())?;
    let mut result = Vec::with_capacity(outs.len());
    for ((o, offs), ch) in outs.into_iter().zip(final_offsets).zip(chars) {
        // fixed-width columns keep their values; their offsets and characters go; a kept
        // dictionary holds its keys, and its values as its dictionary
        let (buffers, dictionary) = match (o.fixed, o.keys) {
            (Some((values, len, _)), _) => (vec![(values, len)], None),
            (None, Some(k)) => {
                let values = DeviceArray {
                    data_type: k.value_type,
                    len: k.entries,
                    null_count: 0,
                    validity: None,
                    buffers: vec![offs, ch],
                    children: Vec::new(),
                    dictionary: None,
                };
                (vec![(k.values, o.rows * k.width)], Some(Box::new(values)))
            }
            (None, None) => (vec![offs, ch], None),
        };
        let mut col = DeviceColumn::new(
            o.field,
            o.leaf,
            o.batch,
            o.data_type.clone(),
            o.rows,
            buffers,
            o.validity,
            o.decompressed,
        );
        col.array.dictionary = dictionary;
        col.set_null_count(null_counts[result.len()] as usize);
        col.levels = levels.remove(&result.len());
        result.push(col);
    }
    Ok(result)
}

/// A byte-array output column being decoded: one batch's rows of one field.
struct Out {
    field: usize,
    leaf: usize,
    /// A nested leaf: its levels are decoded too.
    nested: bool,
    data_type: arrow::datatypes::DataType,
    batch: usize,
    /// The first row group of the batch and the column's path, for errors.
    row_group: usize,
    path: String,
    /// The batch's parts: (row group, its rows, the output row of the first), for errors.
    parts: Vec<(usize, std::ops::Range<u64>, u64)>,
    rows: usize,
    large: bool,
    utf8: bool,
    /// i64 per row, written by `bytes_sizes`.
    lengths: DeviceBuffer,
    validity: Option<DeviceBuffer>,
    decompressed: super::PageCounts,
    /// A fixed-width column (decimals stored as BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY in
    /// DELTA_BYTE_ARRAY): its zeroed values (rows × width), their length, and its job.
    fixed: Option<(DeviceBuffer, usize, FixedOut)>,
    /// A kept dictionary: its keys, and its entries (`lengths` holds theirs, the offsets and
    /// characters stages make them its values).
    keys: Option<Keys>,
}

impl Out {
    /// The strings the offsets and characters stages put together: the rows' values, or a
    /// kept dictionary's entries.
    fn strings(&self) -> usize {
        self.keys.as_ref().map_or(self.rows, |k| k.entries)
    }
}

/// A kept dictionary's output column: each row's key (`width` bytes, zeroed: null rows keep 0),
/// and the entry tables of the dictionaries of its batch's chunks, one after another (a chunk's
/// keys start at its first entry), which become the dictionary's values.
struct Keys {
    values: DeviceBuffer,
    /// Bytes per key.
    width: usize,
    table: DeviceBuffer,
    entries: usize,
    value_type: arrow::datatypes::DataType,
}

/// The work of [`decode_bytes_columns`]: a job per data page window (with its name) and per
/// output column, the columns, the dictionaries ((data address, bytes, entries) and their
/// names; their entry tables in one allocation), the null counters, and the decompressed pages
/// the jobs point into.
struct BytesJobs {
    page_jobs: Vec<PageJob>,
    page_names: Vec<PageName>,
    cols: Vec<BytesColumn>,
    outs: Vec<Out>,
    dicts: Vec<(u64, u64, i32)>,
    dict_tables: Vec<u64>,
    dict_names: Vec<PageName>,
    _dict_entries: Option<DeviceBuffer>,
    counters: DeviceBuffer,
    uploads: Vec<DeviceBuffer>,
}

/// Selects the wave's byte-array chunks, locates their pages, allocates one output column
/// (lengths, validity) per batch and field and the dictionaries' entry tables, and builds the
/// jobs (each page's window of rows).
fn bytes_jobs(wave: &WaveDecode<'_>) -> Result<BytesJobs> {
    let WaveDecode {
        chunks, batches, ..
    } = *wave;
    let gpu = Arc::clone(chunks.buffer().gpu());
    let mut page_jobs: Vec<PageJob> = Vec::new();
    let mut page_names: Vec<PageName> = Vec::new();
    let mut cols: Vec<BytesColumn> = Vec::new();
    let mut outs: Vec<Out> = Vec::new();
    let selected = wave.select(|g| g.conversion == Conversion::Bytes || g.via_bytes)?;
    // dictionaries: (data address, bytes, entries), their entry tables (16 bytes an entry, in
    // one allocation), their names; by chunk
    let mut dicts: Vec<(u64, u64, i32)> = Vec::new();
    let mut dict_names: Vec<PageName> = Vec::new();
    let mut dict_at: HashMap<usize, (u64, i32)> = HashMap::new();
    // (kept dictionaries get tables of their own, below)
    let mut with_dict: Vec<&super::SelectedChunk<'_>> = selected
        .chunks
        .values()
        .filter(|sc| sc.dict.is_some() && !sc.col.keys)
        .collect();
    with_dict.sort_by_key(|sc| sc.ci);
    let entries_total: usize = with_dict
        .iter()
        .map(|sc| sc.dict.map_or(0, |d| d.3.max(0) as usize))
        .sum();
    let dict_entries = if with_dict.is_empty() {
        None
    } else {
        Some(gpu.alloc(entries_total.max(1) * 16)?)
    };
    let mut dict_tables: Vec<u64> = Vec::new();
    if let Some(table) = &dict_entries {
        let mut at = table.device_ptr();
        for sc in &with_dict {
            let Some((k, ptr, len, entries)) = sc.dict else {
                continue;
            };
            let c = &chunks.chunks()[sc.ci];
            dicts.push((ptr, len, entries));
            dict_tables.push(at);
            dict_names.push((c.row_group, c.path.clone(), k));
            dict_at.insert(sc.ci, (at, entries));
            at += entries.max(0) as u64 * 16;
        }
    }
    let counters = zeroed(&gpu, (batches.len() * selected.columns.len()).max(1) * 8)?;
    let mut seen = std::collections::HashSet::new();
    // the path of the column chunk of (leaf, row group), for errors
    let chunks_path = |leaf: usize, rg: usize| {
        chunks
            .chunks()
            .iter()
            .find(|c| c.column == leaf && c.row_group == rg)
            .map(|c| c.path.clone())
            .unwrap_or_default()
    };
    for (b, batch) in batches.iter().enumerate() {
        for &col in &selected.columns {
            // a nested leaf has a slot per level entry
            let rows = wave.column_len(&selected, batch, col)?;
            // a kept dictionary: its chunks' entry tables, one after another
            let mut key_tables: HashMap<usize, (u64, i32)> = HashMap::new();
            let keys = if col.keys {
                let (k, tables) = keys_out(wave, &selected, batch, col, rows)?;
                for (ci, (page, ptr, len, entries), at) in tables {
                    let c = &chunks.chunks()[ci];
                    dicts.push((ptr, len, entries));
                    dict_tables.push(at);
                    dict_names.push((c.row_group, c.path.clone(), page));
                    key_tables.insert(ci, (at, entries));
                }
                Some(k)
            } else {
                None
            };
            let lengths = zeroed(&gpu, keys.as_ref().map_or(rows, |k| k.entries) * 8)?;
            let validity = validity_words(&gpu, rows, col.max_def_level > 0)?;
            let column = cols.len();
            cols.push(BytesColumn {
                lengths: keys
                    .as_ref()
                    .map_or(lengths.device_ptr(), |k| k.values.device_ptr()),
                out_valid: validity.as_ref().map_or(0, |v| v.device_ptr()),
                null_count: counters.device_ptr() + 8 * column as u64,
                only_delta: u64::from(col.physical == "FIXED_LEN_BYTE_ARRAY"),
                dict_base: keys.as_ref().map_or(0, |k| k.table.device_ptr()),
                key_width: keys.as_ref().map_or(0, |k| k.width as u64),
            });
            let dict_of = |sc: &super::SelectedChunk<'_>| {
                let tables = if col.keys { &key_tables } else { &dict_at };
                tables.get(&sc.ci).copied().unwrap_or((0, 0))
            };
            let (decompressed, parts) = wave.column_jobs(
                &selected,
                batch,
                col,
                column,
                &dict_of,
                &mut seen,
                &mut page_jobs,
                &mut page_names,
            )?;
            let fixed = if col.via_bytes {
                let len = rows * col.output_width;
                let values = zeroed(&gpu, len)?;
                let job = FixedOut {
                    values: values.device_ptr(),
                    width: col.output_width as i32,
                    conversion: conversion_code(col.conversion).unwrap_or(-1),
                    phys: if col.physical == "FIXED_LEN_BYTE_ARRAY" {
                        col.physical_width as i32
                    } else {
                        0
                    },
                };
                Some((values, len, job))
            } else {
                None
            };
            let first = parts.first().map(|p| (p.0, chunks_path(col.leaf, p.0)));
            let (row_group, path) = first.unwrap_or_default();
            outs.push(Out {
                field: col.field,
                leaf: col.leaf,
                nested: col.nested,
                data_type: col.data_type.clone(),
                batch: b,
                row_group,
                path,
                parts,
                rows,
                large: col.large_offsets,
                utf8: col.utf8,
                lengths,
                validity,
                decompressed,
                fixed,
                keys,
            });
        }
    }
    Ok(BytesJobs {
        page_jobs,
        page_names,
        cols,
        outs,
        dicts,
        dict_tables,
        dict_names,
        _dict_entries: dict_entries,
        counters,
        uploads: selected.uploads,
    })
}

/// A kept dictionary's output of `rows` rows (`batch`, `col`): its keys (zeroed), and one
/// table for the entries of the dictionaries of its parts' chunks, each chunk's once (a batch
/// may hold several parts of one row group); returns the output and, per chunk, its dictionary
/// page (page, address, bytes, entries) and the address of its entries in the table.
#[allow(clippy::type_complexity)]
fn keys_out(
    wave: &WaveDecode<'_>,
    selected: &super::Selected<'_>,
    batch: &crate::plan::BatchSpan,
    col: &crate::decode::gpu_plan::GpuColumn,
    rows: usize,
) -> Result<(Keys, Vec<(usize, (usize, u64, u64, i32), u64)>)> {
    let gpu = wave.chunks.buffer().gpu();
    let parts = wave.parts(selected, batch, col)?;
    let mut spots: Vec<(usize, (usize, u64, u64, i32), usize)> = Vec::with_capacity(parts.len());
    let mut entries = 0usize;
    for (sc, _, _) in &parts {
        if let Some(d) = sc.dict {
            if spots.iter().all(|s| s.0 != sc.ci) {
                spots.push((sc.ci, d, entries));
                entries += d.3.max(0) as usize;
            }
        }
    }
    let int32 = arrow::datatypes::DataType::Int32;
    let (key_type, value_type) = col.dictionary().unwrap_or((&int32, &col.data_type));
    // the wave leaves batches whose dictionaries overflow their keys to the host
    // (`keys_fallback`): this is a backstop
    if entries as u64 > key_capacity(key_type) {
        let c = &wave.chunks.chunks()[parts[0].0.ci];
        return Err(Error::Decode {
            path: wave.path.to_path_buf(),
            row_group: Some(c.row_group),
            column: Some(c.path.clone()),
            reason: format!(
                "the dictionaries of a batch's row groups hold {entries} entries together, more \
                 than {key_type} keys index"
            ),
        });
    }
    let table = gpu.alloc(entries.max(1) * 16)?;
    let tables = spots
        .into_iter()
        .map(|(ci, d, at)| (ci, d, table.device_ptr() + 16 * at as u64))
        .collect();
    let width = key_width(key_type).unwrap_or(4);
    let keys = Keys {
        values: zeroed(gpu, rows.max(1) * width)?,
        width,
        table,
        entries,
        value_type: value_type.clone(),
    };
    Ok((keys, tables))
}

/// The scratch of the sizes stage, read by the characters stage: the page jobs, each row's
/// (source address, length) and each page's first scratch index; the rest kept alive as long.
struct Sizes {
    pages_buf: DeviceBuffer,
    src: DeviceBuffer,
    base_buf: DeviceBuffer,
    _cols_buf: DeviceBuffer,
    _idx: DeviceBuffer,
    _errors: DeviceBuffer,
    /// DELTA_BYTE_ARRAY values put together (the sources point into them), with the tables
    /// their launch read.
    _dba: Option<[DeviceBuffer; 6]>,
}

/// The offsets stage's output: each column's i64 offsets (device addresses), the i64 offsets
/// kept only until the UTF-8 check (columns with 32-bit offsets), the character buffers and the
/// final offsets (with their lengths in bytes); the span sums and bases kept alive as long.
struct Offsets {
    offsets64: Vec<u64>,
    scratch: Vec<DeviceBuffer>,
    chars: Vec<(DeviceBuffer, usize)>,
    final_offsets: Vec<(DeviceBuffer, usize)>,
    /// When the stage began (it is timed up to the uploads of the characters stage).
    started: Instant,
    _sums: DeviceBuffer,
    _bases_buf: DeviceBuffer,
}

/// The launches of a wave's byte-array decoder: the device, the loaded module, the file (for
/// errors).
struct Stages<'a> {
    gpu: &'a Arc<Gpu>,
    module: &'a Module,
    path: &'a std::path::Path,
}

impl Stages<'_> {
    /// Fills every dictionary's entry table with its entries' (address, length); an error
    /// names the first bad dictionary page.
    fn dictionary_entries(
        &self,
        dicts: &[(u64, u64, i32)],
        dict_tables: &[u64],
        dict_names: &[PageName],
    ) -> Result<()> {
        let gpu = self.gpu;
        let d_data = upload(gpu, &u64s(dicts.iter().map(|d| d.0)))?;
        let d_len = upload(gpu, &u64s(dicts.iter().map(|d| d.1)))?;
        let d_cnt = upload(
            gpu,
            &dicts
                .iter()
                .flat_map(|d| d.2.to_le_bytes())
                .collect::<Vec<u8>>(),
        )?;
        let d_out = upload(gpu, &u64s(dict_tables.iter().copied()))?;
        let d_err = zeroed(gpu, dicts.len() * 4)?;
        // SAFETY: one block per dictionary; each entry table (a disjoint part of one
        // allocation) holds 2 u64 per entry; all buffers live until `launch` returns.
        unsafe {
            DICT_ENTRIES.launch(
                gpu,
                self.module,
                dicts.len() as u32,
                128,
                (
                    Const::at(d_data.device_ptr()),
                    Const::at(d_len.device_ptr()),
                    Const::at(d_cnt.device_ptr()),
                    Const::at(d_out.device_ptr()),
                    dicts.len() as i32,
                    Mut::at(d_err.device_ptr()),
                ),
            )?
        };
        let errs = i32s_from_device(&d_err, dicts.len())?;
        page_errors(self.path, &errs, dict_names, DECODE_FIXED_ERRORS)
    }

    /// Every row's length (into its column's `lengths`), validity and source; an error names
    /// the first bad page.
    fn sizes(
        &self,
        page_jobs: &[PageJob],
        page_names: &[PageName],
        cols: &[BytesColumn],
    ) -> Result<Sizes> {
        let gpu = self.gpu;
        let t_sizes = Instant::now();
        let (base, total) = row_bases(page_jobs);
        let pages_buf = upload_table(gpu, page_jobs)?;
        let cols_buf = upload_table(gpu, cols)?;
        let base_buf = upload(gpu, &u64s(base))?;
        let idx = gpu.alloc((total as usize * 4).max(4))?;
        // DELTA_BYTE_ARRAY pages keep their prefix lengths too, and report their values' size
        let dba = page_jobs.iter().any(|p| p.encoding == 7);
        let aux = gpu.alloc(if dba { total as usize * 4 } else { 0 }.max(4))?;
        let info = zeroed(gpu, page_jobs.len() * 32)?;
        let src = gpu.alloc((total as usize * 16).max(16))?;
        let errors = zeroed(gpu, page_jobs.len() * 4)?;
        since("sizes setup", t_sizes);
        // SAFETY: one block per page job; the scratch arrays hold 1 u32 (idx; aux too when a
        // page is DELTA_BYTE_ARRAY, the one encoding that writes it) and 2 u64 per row of
        // every page (base is their prefix sum), `info` 4 u64 per page; each output column's
        // lengths and validity are sized from its batch's rows, and each page job writes only
        // its window (`take` rows from `row_start`), the windows of a column being disjoint
        // parts of its batch; all buffers live until `launch` returns.
        unsafe {
            BYTES_SIZES.launch(
                gpu,
                self.module,
                page_jobs.len() as u32,
                128,
                (
                    Const::at(pages_buf.device_ptr()),
                    Const::at(cols_buf.device_ptr()),
                    Mut::at(idx.device_ptr()),
                    Mut::at(aux.device_ptr()),
                    Mut::at(src.device_ptr()),
                    Const::at(base_buf.device_ptr()),
                    Mut::at(info.device_ptr()),
                    Mut::at(errors.device_ptr()),
                ),
            )?
        };
        let errs = i32s_from_device(&errors, page_jobs.len())?;
        page_errors(self.path, &errs, page_names, DECODE_FIXED_ERRORS)?;
        let dba = if dba {
            Some(self.dba_values(
                page_jobs, page_names, &pages_buf, &idx, aux, &src, &base_buf, info,
            )?)
        } else {
            None
        };
        Ok(Sizes {
            pages_buf,
            src,
            base_buf,
            _cols_buf: cols_buf,
            _idx: idx,
            _errors: errors,
            _dba: dba,
        })
    }

    /// Offsets on the device: span sums of every column (launched back to back, one wait, one
    /// copy), a host scan of those, then the offsets of every column; and the character
    /// buffers. Errors when a column's strings overflow its offsets.
    fn offsets(&self, outs: &[Out], wave: &WaveDecode<'_>) -> Result<Offsets> {
        let (gpu, path) = (self.gpu, self.path);
        let t_offsets = Instant::now();
        // a kept dictionary's strings are its entries: their lengths first
        for o in outs {
            let Some(k) = &o.keys else { continue };
            if k.entries == 0 {
                continue;
            }
            // SAFETY: the table holds `entries` (address, length) pairs, filled by
            // `dict_entries`, and `lengths` one i64 per entry; a thread per entry; both live
            // until the `synchronize_decode` below.
            unsafe {
                DICT_LENGTHS.launch_nowait(
                    gpu,
                    self.module,
                    (k.entries as u64).div_ceil(256) as u32,
                    256,
                    (
                        Const::at(k.table.device_ptr()),
                        k.entries as u64,
                        Mut::at(o.lengths.device_ptr()),
                    ),
                )?
            };
        }
        let spans_of: Vec<usize> = outs
            .iter()
            .map(|o| (o.strings() + 1).div_ceil(SPAN))
            .collect();
        let span_total: usize = spans_of.iter().sum();
        let sums = gpu.alloc(span_total.max(1) * 8)?;
        let mut at_span = 0usize;
        for (o, &spans) in outs.iter().zip(&spans_of) {
            // SAFETY: `lengths` holds `strings()` i64, `sums` one i64 per span of SPAN rows
            // from this column's first span on; one block per span; all buffers live until
            // the `synchronize_decode` below.
            unsafe {
                SPAN_SUMS.launch_nowait(
                    gpu,
                    self.module,
                    spans as u32,
                    256,
                    (
                        Const::at(o.lengths.device_ptr()),
                        o.strings() as u64,
                        Mut::at(sums.device_ptr() + 8 * at_span as u64),
                    ),
                )?
            };
            at_span += spans;
        }
        gpu.synchronize_decode()?;
        let sums_host = u64s_from_device(&sums, span_total)?;
        let mut bases: Vec<u64> = Vec::with_capacity(span_total);
        let mut totals: Vec<i64> = Vec::with_capacity(outs.len());
        let mut at_span = 0usize;
        for (o, &spans) in outs.iter().zip(&spans_of) {
            let mut at: i64 = 0;
            for &v in &sums_host[at_span..at_span + spans] {
                bases.push(at as u64);
                at = at.checked_add(v as i64).ok_or_else(|| Error::Decode {
                    path: path.to_path_buf(),
                    row_group: Some(o.row_group),
                    column: Some(o.path.clone()),
                    reason: "string lengths overflow 64-bit offsets".into(),
                })?;
            }
            at_span += spans;
            if !o.large && at > i64::from(i32::MAX) {
                return Err(Error::Decode {
                    path: path.to_path_buf(),
                    row_group: Some(o.row_group),
                    column: Some(o.path.clone()),
                    reason: format!(
                        "{at} bytes of strings in one batch of {} {} do not fit 32-bit \
                         offsets (field {}; read it as LargeUtf8 / LargeBinary, or in smaller \
                         batches)",
                        o.strings(),
                        if o.keys.is_some() { "dictionary entries" } else { "rows" },
                        wave.fields[o.field].name()
                    ),
                });
            }
            totals.push(at);
        }
        let bases_buf = upload(gpu, &u64s(bases))?;
        let mut offsets64: Vec<u64> = Vec::new(); // i64 offsets of each column (device addresses)
        let mut scratch: Vec<DeviceBuffer> = Vec::new();
        let mut chars: Vec<(DeviceBuffer, usize)> = Vec::new();
        let mut final_offsets: Vec<(DeviceBuffer, usize)> = Vec::new();
        let mut at_span = 0usize;
        for ((o, &spans), &total) in outs.iter().zip(&spans_of).zip(&totals) {
            let rows = o.strings();
            let off64 = gpu.alloc((rows + 1) * 8)?;
            let off32 = if o.large {
                None
            } else {
                Some(gpu.alloc((rows + 1) * 4)?)
            };
            // SAFETY: `lengths` holds `rows` i64, `bases` one per span from this column's
            // first span on, `off64` rows + 1 i64 and `off32` (or null) rows + 1 i32; one block
            // per span, spans cover rows + 1 entries; the buffers are kept (in the returned
            // offsets) until the characters' `launch` waits for the stream.
            unsafe {
                WRITE_OFFSETS.launch_nowait(
                    gpu,
                    self.module,
                    spans as u32,
                    256,
                    (
                        Const::at(o.lengths.device_ptr()),
                        rows as u64,
                        Const::at(bases_buf.device_ptr() + 8 * at_span as u64),
                        Mut::at(off64.device_ptr()),
                        Mut::at(off32.as_ref().map_or(0, |b| b.device_ptr())),
                    ),
                )?
            };
            at_span += spans;
            offsets64.push(off64.device_ptr());
            match off32 {
                Some(b) => {
                    final_offsets.push((b, (rows + 1) * 4));
                    scratch.push(off64);
                }
                None => final_offsets.push((off64, (rows + 1) * 8)),
            }
            chars.push((gpu.alloc((total as usize).max(1))?, total as usize));
        }
        Ok(Offsets {
            offsets64,
            scratch,
            chars,
            final_offsets,
            started: t_offsets,
            _sums: sums,
            _bases_buf: bases_buf,
        })
    }

    /// Every row's characters copied to its offset in its column's character buffer, and
    /// every kept dictionary's entries to theirs; returns the tables of every column's offsets
    /// and characters (device addresses) it read, which the caller keeps until the wave ends.
    fn characters(
        &self,
        page_jobs: &[PageJob],
        sizes: &Sizes,
        offsets: &Offsets,
        outs: &[Out],
    ) -> Result<(DeviceBuffer, DeviceBuffer)> {
        let gpu = self.gpu;
        // a kept dictionary's pages write keys, not characters: no offsets for them
        let col_offsets = upload(
            gpu,
            &u64s(
                outs.iter()
                    .zip(&offsets.offsets64)
                    .map(|(o, &at)| if o.keys.is_some() { 0 } else { at }),
            ),
        )?;
        let col_chars = upload(gpu, &u64s(offsets.chars.iter().map(|c| c.0.device_ptr())))?;
        since("offsets and character buffers", offsets.started);
        // SAFETY: the offsets of every column are the prefix sums of the lengths written by
        // `bytes_sizes`, and each character buffer holds their total, so every row's copy
        // lands inside it; the sources point into page data and dictionaries that are alive
        // (uploads, the load's buffer).
        unsafe {
            BYTES_CHARS.launch(
                gpu,
                self.module,
                page_jobs.len() as u32,
                256,
                (
                    Const::at(sizes.pages_buf.device_ptr()),
                    Const::at(sizes.src.device_ptr()),
                    Const::at(sizes.base_buf.device_ptr()),
                    Const::at(col_offsets.device_ptr()),
                    Const::at(col_chars.device_ptr()),
                ),
            )?
        };
        let mut dictionaries = false;
        for ((o, &offs), ch) in outs.iter().zip(&offsets.offsets64).zip(&offsets.chars) {
            let Some(k) = &o.keys else { continue };
            if k.entries == 0 {
                continue;
            }
            dictionaries = true;
            // SAFETY: `offs` holds entries + 1 offsets, the prefix sums of the entries'
            // lengths, and the character buffer their total, so each entry's copy lands inside
            // it; the entries point into dictionary pages that are alive (uploads, the load's
            // buffer); a warp per entry; everything lives until the `synchronize_decode` below.
            unsafe {
                DICT_CHARS.launch_nowait(
                    gpu,
                    self.module,
                    (k.entries as u64 * 32).div_ceil(256) as u32,
                    256,
                    (
                        Const::at(k.table.device_ptr()),
                        k.entries as u64,
                        Const::at(offs),
                        Mut::at(ch.0.device_ptr()),
                    ),
                )?
            };
        }
        if dictionaries {
            gpu.synchronize_decode()?;
        }
        Ok((col_offsets, col_chars))
    }

    /// The values of the fixed-width columns found as strings (`Out::fixed`), written from
    /// each row's source; an error names the first page with a value of the wrong size.
    fn fixed_values(
        &self,
        page_jobs: &[PageJob],
        page_names: &[PageName],
        sizes: &Sizes,
        outs: &[Out],
    ) -> Result<()> {
        if outs.iter().all(|o| o.fixed.is_none()) {
            return Ok(());
        }
        let gpu = self.gpu;
        let table: Vec<FixedOut> = outs
            .iter()
            .map(|o| o.fixed.as_ref().map_or_else(FixedOut::default, |f| f.2))
            .collect();
        let table_buf = upload_table(gpu, &table)?;
        let errors = zeroed(gpu, page_jobs.len() * 4)?;
        // SAFETY: one block per page job; a page of a fixed-width column writes only the rows
        // of its window (`take` rows from `row_start`, inside its batch), `width` bytes each,
        // into that column's values (rows × width bytes); its sources point into page data
        // and dictionaries that are alive, with the lengths the sizes stage checked; other
        // pages return at once; all buffers live until `launch` returns.
        unsafe {
            BYTES_FIXED.launch(
                gpu,
                self.module,
                page_jobs.len() as u32,
                128,
                (
                    Const::at(sizes.pages_buf.device_ptr()),
                    Const::at(sizes.src.device_ptr()),
                    Const::at(sizes.base_buf.device_ptr()),
                    Const::at(table_buf.device_ptr()),
                    Mut::at(errors.device_ptr()),
                ),
            )?
        };
        let errs = i32s_from_device(&errors, page_jobs.len())?;
        page_errors(self.path, &errs, page_names, DECODE_FIXED_ERRORS)
    }

    /// UTF-8 validation of Utf8 columns, as arrow-rs validates them: every column's check
    /// launched back to back, one wait, one copy of the first bad row of each; an error names
    /// the first bad row.
    fn utf8_check(&self, outs: &[Out], offsets: &Offsets) -> Result<()> {
        let (gpu, path) = (self.gpu, self.path);
        let mut first_bad = gpu.alloc(outs.len() * 8)?;
        first_bad.fill(0xff)?;
        let mut checked = false;
        let columns = outs.iter().zip(&offsets.offsets64).zip(&offsets.chars);
        for (k, ((o, &offs), ch)) in columns.enumerate() {
            let rows = o.strings();
            if !o.utf8 || rows == 0 {
                continue;
            }
            checked = true;
            // SAFETY: `offs` holds rows + 1 offsets into `ch`, whose length is the last
            // offset; one thread per row; the result slot is this column's u64 of
            // `first_bad`; everything lives until the `synchronize_decode` below.
            unsafe {
                UTF8_CHECK.launch_nowait(
                    gpu,
                    self.module,
                    (rows as u64).div_ceil(256) as u32,
                    256,
                    (
                        Const::at(offs),
                        Const::at(ch.0.device_ptr()),
                        rows as u64,
                        Mut::at(first_bad.device_ptr() + 8 * k as u64),
                    ),
                )?
            };
        }
        if checked {
            timed("kernel utf8_check", || gpu.synchronize_decode())?;
            let bad_rows = u64s_from_device(&first_bad, outs.len())?;
            for (o, &bad) in outs.iter().zip(&bad_rows) {
                if o.utf8 && o.keys.is_some() && bad != u64::MAX {
                    return Err(Error::Decode {
                        path: path.to_path_buf(),
                        row_group: Some(o.row_group),
                        column: Some(o.path.clone()),
                        reason: format!(
                            "entry {bad} of the dictionaries of the batch's row groups (one \
                             after another) is not valid UTF-8 (the column is Utf8; read it as \
                             Binary to keep the bytes)"
                        ),
                    });
                }
                if o.utf8 && o.rows > 0 && bad != u64::MAX {
                    // the batch row back to its row group's row
                    let (rg, row) = o
                        .parts
                        .iter()
                        .find(|(_, r, at)| bad >= *at && bad < at + (r.end - r.start))
                        .map_or((o.row_group, bad), |(rg, r, at)| (*rg, r.start + bad - at));
                    return Err(Error::Decode {
                        path: path.to_path_buf(),
                        row_group: Some(rg),
                        column: Some(o.path.clone()),
                        reason: format!(
                            "row {row} of the row group is not valid UTF-8 (the column is Utf8; \
                             read it as Binary to keep the bytes)"
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}
