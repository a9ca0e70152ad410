//! The decoding of one wave: the column chunks of some row groups in device memory in, the
//! wave's batches ([`BatchSpan`]s: rows of those row groups, gathered across them or cut from
//! one) out. The fields the GPU kernels decode ([`place_columns`]) go through the page-header,
//! fixed-width and byte-array stages of this module, straight into batch-shaped buffers; the
//! others are decoded by arrow-rs on the host from a copy of their chunks (on another thread,
//! at the same time), cut and joined into the batches and uploaded. The report names where
//! each field was decoded and why.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parquet::file::metadata::ParquetMetaData;
use rayon::prelude::*;

use super::{Decompressed, DeviceChunks, FieldDecode, GpuDecodeReport, SnappyPlacement};
use crate::array::{DeviceArray, DeviceRecordBatch};
use crate::decode::gpu_plan::{field_leaves, place_columns, Placement};
use crate::decode::host::HostDecoder;
use crate::device;
use crate::error::{Error, Result};
use crate::plan::BatchSpan;

/// What a wave's decoding needs besides its chunks: the file (named in errors), its footer,
/// the planned leaf columns, the host decoder (the projected schema, and the fields the GPU
/// leaves to the host), the thread pool those run on, where SNAPPY pages go, and whether to
/// time the stages.
#[derive(Debug)]
pub(crate) struct WaveInput<'a> {
    pub(crate) path: &'a std::path::Path,
    pub(crate) metadata: &'a ParquetMetaData,
    pub(crate) leaves: &'a [usize],
    /// The rows read of each row group, where the plan restricts them ([`ReadPlan::rows`]).
    ///
    /// [`ReadPlan::rows`]: crate::plan::ReadPlan::rows
    pub(crate) rows: Option<&'a crate::plan::RowRanges>,
    pub(crate) decoder: &'a HostDecoder,
    pub(crate) snappy: SnappyPlacement,
    /// The percent of nvCOMP's codecs' bytes the host takes beside it.
    pub(crate) host_share: Option<u32>,
    pub(crate) profile: bool,
}

/// Decodes `chunks`, holding every planned chunk of `row_groups`, into `batches` (rows of those
/// row groups), and reports where each field was decoded.
pub(crate) fn decode_wave(
    input: &WaveInput<'_>,
    chunks: &DeviceChunks,
    row_groups: &[usize],
    batches: &[BatchSpan],
) -> Result<(Vec<DeviceRecordBatch>, GpuDecodeReport)> {
    let path = input.path;
    let md = input.metadata;
    let schema = input.decoder.schema().clone();
    let fields = schema.fields().to_vec();
    let gpu = Arc::clone(chunks.buffer().gpu());
    let mut placements = place_columns(md, &fields, input.leaves, row_groups);
    let codec_of = |rg: usize, leaf: usize| md.row_group(rg).column(leaf).compression();
    // arrow-rs caps what it returns by the file's row count; where the footer's counts
    // disagree, decode everything as arrow-rs does, on the host
    let file_rows = md.file_metadata().num_rows();
    let rg_rows: i64 = md.row_groups().iter().map(|g| g.num_rows()).sum();
    let consistent = file_rows == rg_rows;
    if !consistent {
        for p in placements.iter_mut() {
            let field = match p {
                Placement::Gpu(c) => c.field,
                Placement::Nested(n) => n.field,
                Placement::Host { .. } => continue,
            };
            *p = Placement::Host {
                field,
                reason: format!(
                    "the footer says {file_rows} rows but its row groups hold {rg_rows}: \
                     decoded on the host, as arrow-rs reads it"
                ),
            };
        }
    }
    // the page tables of the chunks, before the fields are split between host and GPU: kept
    // dictionaries need every data page of their chunks dictionary-encoded (writers fall back
    // to PLAIN pages when a dictionary grows too large), and columns with levels every v1 data
    // page's levels RLE-encoded (the kernels read no other), as the tables say; those fields
    // are decoded on the host instead
    let on_gpu = placements
        .iter()
        .any(|p| !matches!(p, Placement::Host { .. }));
    let tables = if on_gpu {
        Some(super::checked_page_tables(
            chunks,
            path,
            &codec_of,
            &|leaf| {
                md.file_metadata()
                    .schema_descr()
                    .column(leaf)
                    .max_def_level()
            },
            input.decoder.max_page_bytes(),
        )?)
    } else {
        None
    };
    if let Some(tables) = &tables {
        for p in placements.iter_mut() {
            let (field, leaves) = match p {
                Placement::Gpu(c) => (c.field, std::slice::from_ref(c)),
                Placement::Nested(n) => (n.field, &n.leaves[..]),
                Placement::Host { .. } => continue,
            };
            let name = fields[field].name();
            let reason = leaves.iter().find_map(|c| {
                levels_fallback(chunks, tables, c, name).or_else(|| {
                    c.keys
                        .then(|| keys_fallback(chunks, tables, batches, c, name))
                        .flatten()
                })
            });
            if let Some(reason) = reason {
                *p = Placement::Host { field, reason };
            }
        }
    }
    let leaves_of = field_leaves(md, &fields, input.leaves);
    let mut report = GpuDecodeReport::default();
    let mut gpu_cols = Vec::new();
    let mut nested_cols = Vec::new();
    let mut host_fields = Vec::new();
    for p in placements {
        match p {
            Placement::Nested(n) => {
                report.fields.push(FieldDecode {
                    name: fields[n.field].name().clone(),
                    on_gpu: true,
                    reason: format!(
                        "nested {}: {} leaves, levels to offsets and validity",
                        fields[n.field].data_type(),
                        n.leaves.len()
                    ),
                });
                gpu_cols.extend(n.leaves.iter().cloned());
                nested_cols.push(n);
            }
            Placement::Gpu(c) => {
                report.fields.push(FieldDecode {
                    name: fields[c.field].name().clone(),
                    on_gpu: true,
                    reason: if c.keys {
                        format!(
                            "{} → {}: keys, and the dictionaries kept",
                            c.physical, c.arrow
                        )
                    } else {
                        format!("{} → {} ({:?})", c.physical, c.arrow, c.conversion)
                    },
                });
                gpu_cols.push(c);
            }
            Placement::Host { field, reason } => {
                report.fields.push(FieldDecode {
                    name: fields[field].name().clone(),
                    on_gpu: false,
                    reason,
                });
                host_fields.push(field);
            }
        }
    }
    let host_leaves: Vec<usize> = host_fields
        .iter()
        .flat_map(|&f| leaves_of[f].iter().copied())
        .collect();
    let rows_of = |rg: usize| md.row_group(rg).num_rows().max(0) as usize;
    // the rows of a row group the host decodes, where not all: they come back end to end
    let restricted = |rg: usize| crate::plan::rows_restricted(input.rows, rg, rows_of(rg) as u64);
    // host part: one batch per row group holding the host fields
    // the schema of the host-decoded fields, for joining their batches
    let host_schema = Arc::new(arrow::datatypes::Schema::new(
        host_fields
            .iter()
            .map(|&f| fields[f].clone())
            .collect::<Vec<_>>(),
    ));
    type HostColumns = (Vec<arrow::array::ArrayRef>, usize);
    let host_part = || -> Result<Vec<HostColumns>> {
        if host_leaves.is_empty() && consistent {
            return Ok(Vec::new());
        }
        // on rayon's global pool, as the decoder's other host work: not on the reads' pool,
        // whose workers may wait for a memory budget that only finished decodes free
        let per_rg: Vec<Result<HostColumns>> = row_groups
            .par_iter()
            .map(|&rg| {
                let mut bytes = Vec::new();
                for (i, c) in chunks.chunks().iter().enumerate() {
                    if c.row_group == rg && !c.is_empty() && host_leaves.contains(&c.column) {
                        let all = Bytes::from(chunks.chunk_to_host(i)?);
                        for p in c.read_parts() {
                            let at = p.dest as usize;
                            let len = (p.file.end - p.file.start) as usize;
                            bytes.push((p.file, all.slice(at..at + len)));
                        }
                    }
                }
                let rows = restricted(rg);
                let batches = input
                    .decoder
                    .decode_leaves(rg, &host_leaves, &bytes, rows)?;
                let one = arrow::compute::concat_batches(&host_schema, &batches).map_err(|e| {
                    Error::Decode {
                        path: path.to_path_buf(),
                        row_group: Some(rg),
                        column: None,
                        reason: format!("joining host-decoded batches: {e}"),
                    }
                })?;
                Ok((one.columns().to_vec(), one.num_rows()))
            })
            .collect();
        per_rg.into_iter().collect()
    };
    let gpu_part = || -> Result<Vec<super::DeviceColumn>> {
        use crate::decode::gpu as dg;
        let (Some(tables), false) = (&tables, gpu_cols.is_empty()) else {
            return Ok(Vec::new());
        };
        let wave = dg::WaveDecode {
            chunks,
            tables,
            path,
            columns: &gpu_cols,
            fields: &fields,
            codec_of: &codec_of,
            rows_of: &rows_of,
            snappy: input.snappy,
            host_share: input.host_share,
            batches,
        };
        // the byte-array columns on a helper thread, its kernels on the companion stream,
        // so that they fill the device beside the fixed-width decoder (whose SNAPPY pages
        // finish unevenly) instead of after it
        let profiling = dg::profiling();
        // (chosen here: the helper thread has no slot of its own)
        let companion = device::companion_stream();
        let (fixed, bytes) = std::thread::scope(|s| {
            let helper = s.spawn(|| {
                device::with_stream(companion, || {
                    if profiling {
                        dg::profile_begin();
                    }
                    let r = dg::timed("byte-array columns", || dg::decode_bytes_columns(&wave));
                    (
                        r,
                        if profiling {
                            dg::profile_end()
                        } else {
                            Vec::new()
                        },
                    )
                })
            });
            let fixed = dg::timed("fixed-width columns", || dg::decode_fixed_columns(&wave));
            let bytes = match helper.join() {
                Ok((r, stages)) => {
                    dg::profile_absorb(stages);
                    r
                }
                Err(_) => Err(Error::Decode {
                    path: path.to_path_buf(),
                    row_group: None,
                    column: None,
                    reason: "the byte-array decoder thread panicked".into(),
                }),
            };
            (fixed, bytes)
        });
        let mut cols = fixed?;
        cols.extend(bytes?);
        if !nested_cols.is_empty() {
            // the nested fields built from their leaves' columns
            let (leaves, rest): (Vec<_>, Vec<_>) = cols
                .into_iter()
                .partition(|c| nested_cols.iter().any(|n| n.field == c.field));
            let assembly = super::nested::Assembly {
                gpu: &gpu,
                path,
                nested: &nested_cols,
                fields: &fields,
                batches,
            };
            cols = rest;
            cols.extend(dg::timed("nested fields", || {
                super::nested::assemble(&assembly, leaves)
            })?);
        }
        super::decimals::check_decimals(&gpu, path, &cols, &fields)?;
        super::decimals::check_map_keys(path, &cols, &fields)?;
        Ok(cols)
    };
    let profiling = input.profile;
    let host_time_seen = std::cell::Cell::new(Duration::ZERO);
    if profiling {
        super::profile_begin();
    }
    let (host_cols, dev_cols) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            let t = Instant::now();
            (host_part(), t.elapsed())
        });
        let d = gpu_part();
        let (h, host_time) = h.join().unwrap_or_else(|_| {
            let e = Error::Decode {
                path: path.to_path_buf(),
                row_group: None,
                column: None,
                reason: "the host decoder thread panicked".into(),
            };
            (Err(e), Duration::ZERO)
        });
        host_time_seen.set(host_time);
        (h, d)
    });
    let (host_cols, dev_cols) = (host_cols?, dev_cols?);
    let t_assemble = Instant::now();
    for c in dev_cols.iter().filter(|c| c.decompressed.total() > 0) {
        let leaf = gpu_cols.iter().find(|g| g.field == c.field).map(|g| g.leaf);
        let codec = leaf.map_or_else(
            || "unknown".to_string(),
            |l| {
                let rg = batches[c.batch].parts.first().map_or(0, |p| p.row_group);
                codec_of(rg, l).to_string()
            },
        );
        report.add_decompressed(Decompressed {
            field: fields[c.field].name().clone(),
            codec,
            pages: c.decompressed,
        });
    }
    // assemble: per batch, fields in schema order; host-decoded fields cut from their row
    // groups' columns and joined
    let host_by_rg: std::collections::HashMap<usize, HostColumns> =
        row_groups.iter().copied().zip(host_cols).collect();
    let mut by_key: std::collections::HashMap<(usize, usize), DeviceArray> = dev_cols
        .into_iter()
        .map(|c| ((c.field, c.batch), c.array))
        .collect();
    let mut out = Vec::with_capacity(batches.len());
    for (b, batch) in batches.iter().enumerate() {
        let first_rg = batch.parts.first().map(|p| p.row_group);
        let fail = |column: Option<String>, reason: String| Error::Decode {
            path: path.to_path_buf(),
            row_group: first_rg,
            column,
            reason,
        };
        // the rows the host decoder returned (fewer than planned only where the footer's
        // counts disagree: arrow-rs caps them by the file's rows)
        let parts: Vec<(usize, std::ops::Range<usize>)> = batch
            .parts
            .iter()
            .map(|p| {
                let have = host_by_rg.get(&p.row_group).map_or(usize::MAX, |h| h.1);
                let avail = if consistent { usize::MAX } else { have };
                let at = match restricted(p.row_group) {
                    Some(read) => crate::plan::position_among(read, &p.rows),
                    None => p.rows.clone(),
                };
                let (s, e) = (at.start as usize, at.end as usize);
                (p.row_group, s.min(avail)..e.min(avail))
            })
            .collect();
        let num_rows: usize = parts.iter().map(|(_, r)| r.len()).sum();
        let mut host_index = 0;
        let mut columns = Vec::with_capacity(fields.len());
        for (fi, f) in fields.iter().enumerate() {
            let col = if host_fields.contains(&fi) {
                let k = host_index;
                host_index += 1;
                let mut pieces = Vec::with_capacity(parts.len());
                for (rg, rows) in &parts {
                    let a = host_by_rg
                        .get(rg)
                        .and_then(|(cols, _)| cols.get(k))
                        .ok_or_else(|| {
                            fail(
                                Some(f.name().clone()),
                                "the host decoder returned fewer columns than planned".into(),
                            )
                        })?;
                    pieces.push(a.slice(rows.start, rows.len()));
                }
                let joined = match pieces.len() {
                    1 => pieces
                        .pop()
                        .unwrap_or_else(|| arrow::array::new_empty_array(f.data_type())),
                    _ => {
                        let refs: Vec<&dyn arrow::array::Array> =
                            pieces.iter().map(|a| a.as_ref()).collect();
                        crate::decode::host::join_arrays(&refs).map_err(|e| {
                            fail(
                                Some(f.name().clone()),
                                format!("joining host-decoded rows: {e}"),
                            )
                        })?
                    }
                };
                DeviceArray::upload(&gpu, joined.as_ref())?
            } else {
                by_key.remove(&(fi, b)).ok_or_else(|| {
                    fail(
                        Some(f.name().clone()),
                        "the GPU decoder produced no column for this field".into(),
                    )
                })?
            };
            if col.len != num_rows {
                return Err(fail(
                    Some(f.name().clone()),
                    format!("decoded {} values for a batch of {num_rows} rows", col.len),
                ));
            }
            columns.push(col);
        }
        out.push(DeviceRecordBatch {
            schema: schema.clone(),
            columns,
            num_rows,
        });
    }
    if profiling {
        report.stages = super::profile_end()
            .into_iter()
            .map(|(n, d)| (n, d.as_secs_f64()))
            .collect();
        if !host_leaves.is_empty() || !consistent {
            report.stages.push((
                "host-decoded fields (another thread, overlapping the GPU)".into(),
                host_time_seen.get().as_secs_f64(),
            ));
        }
        report.stages.push((
            "assemble batches, upload host-decoded fields".into(),
            t_assemble.elapsed().as_secs_f64(),
        ));
    }
    Ok((out, report))
}

/// Why the levels of leaf column `col` (of field `name`) cannot be decoded on the GPU in this
/// wave: a v1 data page of one of its chunks whose definition or repetition levels (where the
/// column has them) are not RLE-encoded — the deprecated BIT_PACKED, which the host decoder
/// reads as arrow-rs does, or an encoding levels cannot have, which it refuses with arrow-rs's
/// words. `None` when every page's levels are RLE.
fn levels_fallback(
    chunks: &DeviceChunks,
    tables: &[Vec<super::PageInfo>],
    col: &crate::decode::gpu_plan::GpuColumn,
    name: &str,
) -> Option<String> {
    if col.max_def_level == 0 && col.max_rep_level == 0 {
        return None;
    }
    for (c, table) in chunks.chunks().iter().zip(tables) {
        if c.column != col.leaf {
            continue;
        }
        let odd = table.iter().enumerate().find_map(|(k, p)| {
            if p.kind != 0 {
                return None;
            }
            let def = (col.max_def_level > 0 && p.def_level_encoding != 3)
                .then_some(("definition", p.def_level_encoding));
            let rep = (col.max_rep_level > 0 && p.rep_level_encoding != 3)
                .then_some(("repetition", p.rep_level_encoding));
            def.or(rep).map(|(what, e)| (k, what, e))
        });
        if let Some((k, what, e)) = odd {
            let encoding = match e {
                4 => "BIT_PACKED".to_string(),
                e => format!("encoding {e}"),
            };
            return Some(format!(
                "'{name}': page {k} of row group {} has {what} levels in {encoding}, not RLE: \
                 decoded on the host, as arrow-rs reads it",
                c.row_group
            ));
        }
    }
    None
}

/// Why kept dictionary column `col` (field `name`) cannot be decoded on the GPU in this wave: a
/// data page of one of its chunks that is not dictionary-encoded (`tables`: the chunks' page
/// tables), or a batch of `batches` whose row groups' dictionaries hold more entries together
/// than its keys index; `None` when neither.
pub fn keys_fallback(
    chunks: &DeviceChunks,
    tables: &[Vec<super::PageInfo>],
    batches: &[BatchSpan],
    col: &crate::decode::gpu_plan::GpuColumn,
    name: &str,
) -> Option<String> {
    let leaf = col.leaf;
    let key = col
        .dictionary()
        .map_or(&arrow::datatypes::DataType::Int32, |(k, _)| k);
    let encoding = super::page_jobs::encoding_name;
    for (c, table) in chunks.chunks().iter().zip(tables) {
        if c.column != leaf {
            continue;
        }
        let page = table
            .iter()
            .enumerate()
            .find(|(_, p)| matches!(p.kind, 0 | 3) && !matches!(p.encoding, 2 | 8));
        if let Some((k, p)) = page {
            return Some(format!(
                "'{name}' keeps its dictionary, but page {k} of row group {} is {} (the \
                 writer's fallback from its dictionary): decoded on the host, as arrow-rs reads it",
                c.row_group,
                encoding(p.encoding)
            ));
        }
    }
    // the entries of each row group's dictionary, and each batch's together
    let mut entries: std::collections::HashMap<usize, u64> = std::collections::HashMap::new();
    for (c, t) in chunks.chunks().iter().zip(tables) {
        if c.column == leaf {
            *entries.entry(c.row_group).or_default() += t
                .iter()
                .filter(|p| p.kind == 2)
                .map(|p| p.num_values.max(0) as u64)
                .sum::<u64>();
        }
    }
    let capacity = crate::decode::gpu_plan::key_capacity(key);
    for b in batches {
        let mut rgs: Vec<usize> = b.parts.iter().map(|p| p.row_group).collect();
        rgs.dedup();
        let total: u64 = rgs
            .iter()
            .map(|rg| entries.get(rg).copied().unwrap_or(0))
            .sum();
        if total > capacity {
            return Some(format!(
                "'{name}' keeps its dictionary, but a batch's row groups hold {total} dictionary \
                 entries together, more than its {key} keys index: decoded on the host, as \
                 arrow-rs reads it"
            ));
        }
    }
    None
}
