//! Fixed-width flat columns: one `decode_fixed_pages` launch over every data page of a pass
//! (definition levels to validity, PLAIN and dictionary values, arrow-rs's conversions).

use std::sync::Arc;

use super::kernels::{
    conversion_code, ColumnJob, PageJob, DECODE_FIXED_ERRORS, DECODE_FIXED_MODULE,
    DECODE_FIXED_PAGES,
};
use super::launch::{
    i32s_from_device, u64s, u64s_from_device, upload, upload_table, validity_words, zeroed, Const,
    Mut,
};
use super::page_jobs::{data_page_jobs, page_errors, row_bases, PageName};
use super::{DeviceColumn, Pass, Selected};
use crate::decode::gpu_plan::Conversion;
use crate::device::DeviceBuffer;
use crate::error::Result;

/// Decodes, in one launch over all their data pages, the fixed-width columns of a pass.
/// SNAPPY pages are decompressed where the pass says, other codecs on the host and uploaded.
pub fn decode_fixed_columns(pass: &Pass<'_>) -> Result<Vec<DeviceColumn>> {
    let path = pass.path;
    let gpu = Arc::clone(pass.chunks.buffer().gpu());
    let FixedJobs {
        page_jobs,
        page_names,
        col_jobs,
        mut outputs,
        counters,
        uploads,
    } = fixed_jobs(pass)?;
    if page_jobs.is_empty() {
        // no pages, no rows: no nulls
        for o in outputs.iter_mut() {
            o.set_null_count(0);
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
    let errors = zeroed(&gpu, page_jobs.len() * 4)?;
    // SAFETY: one block per page job; the scratch arrays hold one entry per row of every page
    // (`base` is their prefix sum); every output buffer is sized from the row group's rows,
    // which the page value counts were checked to sum to; every allocation (uploads included)
    // stays alive until `launch` returns.
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
}

/// Selects the pass's fixed-width chunks, locates their pages, allocates their outputs and
/// builds the jobs; checks each dictionary's size and that the pages hold the row group's rows.
fn fixed_jobs(pass: &Pass<'_>) -> Result<FixedJobs> {
    let Pass {
        chunks,
        tables,
        fields,
        rows_of,
        ..
    } = *pass;
    let gpu = Arc::clone(chunks.buffer().gpu());
    let mut page_jobs: Vec<PageJob> = Vec::new();
    let mut page_names: Vec<PageName> = Vec::new();
    let mut col_jobs: Vec<ColumnJob> = Vec::new();
    let mut outputs: Vec<DeviceColumn> = Vec::new();
    let Selected {
        chunks: picked,
        counters,
        uploads,
    } = pass.select(|g| {
        conversion_code(g.conversion).is_some()
            && !(g.conversion == Conversion::BigEndianDecimal && g.physical == "BYTE_ARRAY")
    })?;
    for (ci, col, (page_data, host_pages)) in picked {
        let c = &chunks.chunks()[ci];
        let Some(conv) = conversion_code(col.conversion) else {
            continue;
        };
        let bad = |reason: String| pass.bad_chunk(ci, reason);
        let table = &tables[ci];
        let rows = rows_of(c.row_group);
        // booleans: a bitmap in 32-bit words; others: output_width bytes per row
        let (alloc_len, arrow_len) = if col.conversion == Conversion::Boolean {
            (rows.div_ceil(32) * 4, rows.div_ceil(8))
        } else {
            (rows * col.output_width, rows * col.output_width)
        };
        let values = zeroed(&gpu, alloc_len)?;
        let validity = validity_words(&gpu, rows, col.max_def_level > 0)?;
        let mut job = ColumnJob {
            out_values: values.device_ptr(),
            out_valid: validity.as_ref().map_or(0, |v| v.device_ptr()),
            null_count: counters.device_ptr() + 8 * col_jobs.len() as u64,
            phys_width: col.physical_width as i32,
            out_width: col.output_width as i32,
            conversion: conv,
            ..ColumnJob::default()
        };
        let (row, dict) = data_page_jobs(
            c,
            table,
            &page_data,
            col.max_def_level,
            col_jobs.len(),
            &mut page_jobs,
            &mut page_names,
        );
        if let Some((k, ptr, len, entries)) = dict {
            if (entries.max(0) as u64) * col.physical_width as u64 > len {
                return Err(bad(format!(
                    "dictionary page {k}: {entries} entries in {len} bytes"
                )));
            }
            job.dict = ptr;
            job.dict_len = entries;
        }
        if row != rows as u64 {
            return Err(bad(format!(
                "the pages hold {row} values, the row group {rows} rows"
            )));
        }
        col_jobs.push(job);
        outputs.push(DeviceColumn::new(
            col.field,
            c.row_group,
            fields[col.field].data_type().clone(),
            rows,
            vec![(values, arrow_len)],
            validity,
            host_pages,
        ));
    }
    Ok(FixedJobs {
        page_jobs,
        page_names,
        col_jobs,
        outputs,
        counters,
        uploads,
    })
}
