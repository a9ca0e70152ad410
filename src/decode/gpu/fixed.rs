//! Fixed-width flat columns: one `decode_fixed_pages` launch over every data page of a wave
//! (definition levels to validity, PLAIN, dictionary, DELTA_BINARY_PACKED and
//! BYTE_STREAM_SPLIT values, arrow-rs's conversions).

use std::sync::Arc;

use super::kernels::{
    conversion_code, ColumnJob, PageJob, DECODE_FIXED_ERRORS, DECODE_FIXED_MODULE,
    DECODE_FIXED_PAGES,
};
use super::launch::{
    i32s_from_device, u64s, u64s_from_device, upload, upload_table, validity_words, zeroed, Const,
    Mut,
};
use super::nested::decode_levels;
use super::page_jobs::{page_errors, row_bases, PageName};
use super::{DeviceColumn, WaveDecode};
use crate::decode::gpu_plan::Conversion;
use crate::device::DeviceBuffer;
use crate::error::Result;

/// Decodes, in one launch over all their data pages, the fixed-width columns of a wave.
/// Compressed pages are decompressed where `locate.rs` places them (on the device, or on the
/// host and uploaded).
pub fn decode_fixed_columns(wave: &WaveDecode<'_>) -> Result<Vec<DeviceColumn>> {
    let path = wave.path;
    let gpu = Arc::clone(wave.chunks.buffer().gpu());
    let FixedJobs {
        page_jobs,
        page_names,
        col_jobs,
        mut outputs,
        counters,
        uploads,
        nested,
    } = fixed_jobs(wave)?;
    if page_jobs.is_empty() {
        // no pages, no rows: no nulls
        for o in outputs.iter_mut() {
            o.set_null_count(0);
        }
        let levels = decode_levels(&gpu, path, &page_jobs, &page_names, col_jobs.len(), &nested)?;
        for (column, l) in levels {
            outputs[column].levels = Some(l);
        }
        return Ok(outputs);
    }
    let module = DECODE_FIXED_MODULE.load(&gpu)?;
    let pages_buf = upload_table(&gpu, &page_jobs)?;
    let cols_buf = upload_table(&gpu, &col_jobs)?;
    let (base, total) = row_bases(&page_jobs);
    let base_buf = upload(&gpu, &u64s(base))?;
    let defs = gpu.alloc((total as usize).max(1))?;
    let idxs = gpu.alloc((total as usize * 4).max(4))?;
    // DELTA_BINARY_PACKED pages decode every value into 8 bytes of scratch first
    let delta = page_jobs.iter().any(|p| p.encoding == 5);
    let wides = gpu.alloc(if delta { total as usize * 8 } else { 0 }.max(8))?;
    let errors = zeroed(&gpu, page_jobs.len() * 4)?;
    // SAFETY: one block per page job; the scratch arrays hold one entry per row of every page
    // (`base` is their prefix sum; the wide scratch only when a page is DELTA_BINARY_PACKED,
    // the one encoding that writes it); every output buffer is sized from its batch's rows, and
    // each page job writes only its window (`take` rows from `row_start`), the windows of an
    // output column being disjoint parts of its batch (the rows of each chunk were checked
    // against its row group); every allocation (uploads included) stays alive until `launch`
    // returns.
    unsafe {
        DECODE_FIXED_PAGES.launch(
            &gpu,
            &module,
            page_jobs.len() as u32,
            256,
            (
                Const::at(pages_buf.device_ptr()),
                Const::at(cols_buf.device_ptr()),
                Mut::at(defs.device_ptr()),
                Mut::at(idxs.device_ptr()),
                Mut::at(wides.device_ptr()),
                Const::at(base_buf.device_ptr()),
                Mut::at(errors.device_ptr()),
            ),
        )?
    };
    let errs = i32s_from_device(&errors, page_jobs.len())?;
    page_errors(path, &errs, &page_names, DECODE_FIXED_ERRORS)?;
    for (o, n) in outputs
        .iter_mut()
        .zip(u64s_from_device(&counters, col_jobs.len())?)
    {
        o.set_null_count(n as usize);
    }
    let levels = decode_levels(&gpu, path, &page_jobs, &page_names, col_jobs.len(), &nested)?;
    for (column, l) in levels {
        outputs[column].levels = Some(l);
    }
    drop(uploads);
    Ok(outputs)
}

/// The work of [`decode_fixed_columns`]: a job per data page (with its name, for errors) and
/// per column, the columns' zeroed outputs (null counts still 0), their null counters, and the
/// decompressed pages the jobs point into.
struct FixedJobs {
    page_jobs: Vec<PageJob>,
    page_names: Vec<PageName>,
    col_jobs: Vec<ColumnJob>,
    outputs: Vec<DeviceColumn>,
    counters: DeviceBuffer,
    uploads: Vec<DeviceBuffer>,
    /// (column job, entries) of each nested leaf's output.
    nested: Vec<(usize, usize)>,
}

/// Selects the wave's fixed-width chunks, locates their pages, allocates one output per batch
/// and column and builds the jobs (each page's window of rows). (Each dictionary's entries were
/// checked against its bytes when the chunks were selected.)
fn fixed_jobs(wave: &WaveDecode<'_>) -> Result<FixedJobs> {
    let WaveDecode {
        chunks,
        fields: _,
        batches,
        ..
    } = *wave;
    let gpu = Arc::clone(chunks.buffer().gpu());
    let mut page_jobs: Vec<PageJob> = Vec::new();
    let mut page_names: Vec<PageName> = Vec::new();
    let mut col_jobs: Vec<ColumnJob> = Vec::new();
    let mut outputs: Vec<DeviceColumn> = Vec::new();
    let selected = wave.select(|g| conversion_code(g.conversion).is_some() && !g.via_bytes)?;
    let counters = zeroed(&gpu, (batches.len() * selected.columns.len()).max(1) * 8)?;
    let mut seen = std::collections::HashSet::new();
    let mut nested = Vec::new();
    for (b, batch) in batches.iter().enumerate() {
        for &col in &selected.columns {
            let Some(conv) = conversion_code(col.conversion) else {
                continue;
            };
            // a nested leaf has a slot per level entry
            let rows = wave.column_len(&selected, batch, col)?;
            if col.nested {
                nested.push((col_jobs.len(), rows));
            }
            // booleans: a bitmap in 32-bit words; others: output_width bytes per row
            let (alloc_len, arrow_len) = if col.conversion == Conversion::Boolean {
                (rows.div_ceil(32) * 4, rows.div_ceil(8))
            } else {
                (rows * col.output_width, rows * col.output_width)
            };
            let values = zeroed(&gpu, alloc_len)?;
            let validity = validity_words(&gpu, rows, col.max_def_level > 0)?;
            let column = col_jobs.len();
            col_jobs.push(ColumnJob {
                out_values: values.device_ptr(),
                out_valid: validity.as_ref().map_or(0, |v| v.device_ptr()),
                null_count: counters.device_ptr() + 8 * column as u64,
                phys_width: col.physical_width as i32,
                out_width: col.output_width as i32,
                conversion: conv,
                physical: super::kernels::physical_code(&col.physical),
            });
            let dict_of = |sc: &super::SelectedChunk<'_>| sc.dict.map_or((0, 0), |d| (d.1, d.3));
            let (decompressed, _) = wave.column_jobs(
                &selected,
                batch,
                col,
                column,
                &dict_of,
                &mut seen,
                &mut page_jobs,
                &mut page_names,
            )?;
            outputs.push(DeviceColumn::new(
                col.field,
                col.leaf,
                b,
                col.data_type.clone(),
                rows,
                vec![(values, arrow_len)],
                validity,
                decompressed,
            ));
        }
    }
    Ok(FixedJobs {
        page_jobs,
        page_names,
        col_jobs,
        outputs,
        counters,
        uploads: selected.uploads,
        nested,
    })
}
