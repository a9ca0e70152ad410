//! Page tables: every chunk's page headers parsed on the device, one launch over all chunks of
//! a pass. The first launch fills tables sized from the footer; only a chunk with more pages
//! than its estimate makes a second, sized from the counts the first found.

use std::sync::Arc;

use super::kernels::{
    describe_errors, CStruct, PageInfo, PAGE_HEADERS, PAGE_HEADERS_MODULE, PAGE_HEADER_ERRORS,
};
use super::launch::{i32s_from_device, u64s, upload, Const, Mut};
use super::DeviceChunks;
use crate::device::DeviceBuffer;
use crate::error::{Error, Result};
use crate::plan::ColumnChunkPlan;

/// Threads per block of `page_headers` (one chunk per thread).
const THREADS: u32 = 128;

/// Parses the page headers of every chunk of `chunks` on its device: one table per chunk, in
/// chunk order. `path` names the file in errors.
pub fn page_tables(chunks: &DeviceChunks, path: &std::path::Path) -> Result<Vec<Vec<PageInfo>>> {
    let buf = chunks.buffer();
    let gpu = Arc::clone(buf.gpu());
    let n = chunks.chunks().len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let module = PAGE_HEADERS_MODULE.load(&gpu)?;
    let offsets = upload(&gpu, &u64s(chunks.chunks().iter().map(|c| c.dest_offset)))?;
    let lens = upload(&gpu, &u64s(chunks.chunks().iter().map(|c| c.len())))?;
    // counts (in: capacities) then error bits, n i32 each: one copy back per pass
    let mut meta = gpu.alloc(n * 8)?;
    let grid = (n as u32).div_ceil(THREADS);
    let size = PageInfo::SIZE;
    // one pass fills tables of `caps` pages per chunk and returns the counts, where they start
    // and the tables
    let mut fill = |caps: &[i32]| -> Result<(Vec<i32>, Vec<u64>, DeviceBuffer)> {
        let mut starts = Vec::with_capacity(n);
        let mut total: u64 = 0;
        for &c in caps {
            starts.push(total);
            total += c.max(0) as u64;
        }
        let starts_buf = upload(&gpu, &u64s(starts.iter().copied()))?;
        let pages = gpu.alloc((total as usize * size).max(size))?;
        let mut init: Vec<u8> = caps.iter().flat_map(|c| c.to_le_bytes()).collect();
        init.resize(n * 8, 0);
        meta.copy_from_host(0, &init)?;
        // SAFETY: `meta` holds n counts then n error words; `starts` holds n entries and
        // `pages` the sum of the capacities in `meta`, which the kernel never writes past; all
        // stay alive until `launch` returns.
        unsafe {
            PAGE_HEADERS.launch(
                &gpu,
                &module,
                grid,
                THREADS,
                (
                    Const::at(buf.device_ptr()),
                    Const::at(offsets.device_ptr()),
                    Const::at(lens.device_ptr()),
                    n as i32,
                    Mut::at(meta.device_ptr()),
                    Const::at(starts_buf.device_ptr()),
                    Mut::at(pages.device_ptr()),
                    Mut::at(meta.device_ptr() + 4 * n as u64),
                ),
            )?
        };
        let mut got = i32s_from_device(&meta, 2 * n)?;
        check_errors(chunks, path, &got[n..])?;
        got.truncate(n);
        Ok((got, starts, pages))
    };
    // first into capacities estimated from the footer; only when a chunk has more pages than
    // its estimate, once more into the counts that pass found
    let mut caps: Vec<i32> = chunks.chunks().iter().map(page_capacity).collect();
    let over = |counts: &[i32], caps: &[i32]| counts.iter().zip(caps).any(|(c, cap)| c > cap);
    let (mut counts, mut starts, mut pages) = fill(&caps)?;
    if over(&counts, &caps) {
        caps = counts;
        (counts, starts, pages) = fill(&caps)?;
        if over(&counts, &caps) {
            // the same bytes held more pages than the pass before: never on a working device
            let bad: Vec<i32> = (counts.iter().zip(&caps))
                .map(|(c, cap)| if c > cap { ERR_PAGE_COUNT_CHANGED } else { 0 })
                .collect();
            check_errors(chunks, path, &bad)?;
        }
    }
    let total: u64 = caps.iter().map(|&c| c.max(0) as u64).sum();
    let host = pages.copy_to_host(0..total as usize * size)?;
    Ok(counts
        .iter()
        .zip(&starts)
        .map(|(&c, &s)| {
            host[s as usize * size..(s as usize + c.max(0) as usize) * size]
                .chunks_exact(size)
                .map(PageInfo::from_bytes)
                .collect()
        })
        .collect())
}

/// The page-header error bit the host sets when a second fill pass finds more pages than the
/// first counted ([`PAGE_HEADER_ERRORS`]).
const ERR_PAGE_COUNT_CHANGED: i32 = 0x40;

/// Chunk `c`'s page-table capacity for the first fill pass: its pages when the page index was
/// loaded (plus a dictionary page), else an estimate for writers that cut pages at 20,000 rows
/// or 1 MiB (arrow-rs, parquet-mr, cuDF). A chunk with more pages gets a second pass.
fn page_capacity(c: &ColumnChunkPlan) -> i32 {
    let est = match &c.pages {
        Some(p) => p.len() as u64 + 1,
        None => (c.num_values.max(0) as u64) / 20_000 + c.len() / (1 << 20) + 8,
    };
    // a page takes at least a few bytes: never more slots than that, however large the footer's
    // count
    est.min(c.len() / 8 + 1).min(1 << 20) as i32
}

fn check_errors(chunks: &DeviceChunks, path: &std::path::Path, errs: &[i32]) -> Result<()> {
    for (c, &e) in chunks.chunks().iter().zip(errs) {
        if e != 0 {
            return Err(Error::BadColumnChunk {
                path: path.to_path_buf(),
                row_group: c.row_group,
                column: c.path.clone(),
                range: Some(c.range.clone()),
                reason: format!(
                    "page headers (parsed on the GPU): {}",
                    describe_errors(e as u32, PAGE_HEADER_ERRORS)
                ),
            });
        }
    }
    Ok(())
}
