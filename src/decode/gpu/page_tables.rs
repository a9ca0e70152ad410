//! Page tables: every chunk's page headers parsed on the device, one launch over all chunks of
//! a wave. The first launch fills tables sized from the footer; only a chunk with more pages
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
/// chunk order. A chunk that reads only some pages ([`ColumnChunkPlan::read`]) is parsed part
/// by part; page offsets count from the chunk's first byte in the buffer. `path` names the
/// file in errors.
pub fn page_tables(chunks: &DeviceChunks, path: &std::path::Path) -> Result<Vec<Vec<PageInfo>>> {
    let buf = chunks.buffer();
    let gpu = Arc::clone(buf.gpu());
    if chunks.chunks().is_empty() {
        return Ok(Vec::new());
    }
    // the parts parsed: (chunk, offset in the chunk's slice of the buffer, bytes)
    let parts: Vec<(usize, u64, u64)> = chunks
        .chunks()
        .iter()
        .enumerate()
        .flat_map(|(ci, c)| match c.read {
            None => vec![(ci, 0, c.len())],
            Some(_) => c
                .read_parts()
                .iter()
                .map(|p| (ci, p.dest, p.file.end - p.file.start))
                .collect(),
        })
        .collect();
    let n = parts.len();
    let module = PAGE_HEADERS_MODULE.load(&gpu)?;
    let all = chunks.chunks();
    let offsets = upload(
        &gpu,
        &u64s(parts.iter().map(|&(ci, at, _)| all[ci].dest_offset + at)),
    )?;
    let lens = upload(&gpu, &u64s(parts.iter().map(|p| p.2)))?;
    // counts (in: capacities) then error bits, n i32 each: one copy back per pass
    let mut meta = gpu.alloc(n * 8)?;
    let grid = (n as u32).div_ceil(THREADS);
    let size = PageInfo::SIZE;
    // one pass fills tables of `caps` pages per part and returns the counts, where they start
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
        // SAFETY: `meta` holds n counts then n error words; `offsets`, `lens` and `starts` hold
        // n entries each, every part inside the buffer (a chunk's parts lie inside its
        // destination slice); `pages` holds the sum of the capacities in `meta`, which the
        // kernel never writes past; all stay alive until `launch` returns.
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
        check_errors(chunks, &parts, path, &got[n..])?;
        got.truncate(n);
        Ok((got, starts, pages))
    };
    // first into capacities estimated from the footer; only when a part has more pages than
    // its estimate, once more into the counts that pass found
    let mut caps: Vec<i32> = parts
        .iter()
        .map(|&(ci, at, len)| match all[ci].read {
            None => page_capacity(&all[ci]),
            Some(_) => part_capacity(&all[ci], at, len),
        })
        .collect();
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
            check_errors(chunks, &parts, path, &bad)?;
        }
    }
    let total: u64 = caps.iter().map(|&c| c.max(0) as u64).sum();
    let host = pages.copy_to_host(0..total as usize * size)?;
    let mut tables: Vec<Vec<PageInfo>> = vec![Vec::new(); all.len()];
    for (k, &(ci, at, _)) in parts.iter().enumerate() {
        let (c, s) = (counts[k].max(0) as usize, starts[k] as usize);
        tables[ci].extend(
            host[s * size..(s + c) * size]
                .chunks_exact(size)
                .map(PageInfo::from_bytes)
                .map(|mut p| {
                    // offsets from the chunk's first byte in the buffer, not the part's
                    p.header_offset += at as i64;
                    p.data_offset += at as i64;
                    p
                }),
        );
    }
    Ok(tables)
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

/// The capacity of the part of a chunk that reads some pages, `len` bytes from `at` in its
/// slice of the buffer: the indexed pages that begin in it, plus one (its dictionary page).
fn part_capacity(c: &ColumnChunkPlan, at: u64, len: u64) -> i32 {
    let from = c.file_offset(at).unwrap_or(0);
    let to = from + len;
    let pages = c.pages.as_deref().unwrap_or_default();
    let n = pages
        .iter()
        .filter(|p| from <= p.offset && p.offset < to)
        .count();
    (n as u64 + 1).min(len / 8 + 1).min(1 << 20) as i32
}

/// An error naming the chunk of the first part (`parts`: chunk, offset, bytes) with error bits.
fn check_errors(
    chunks: &DeviceChunks,
    parts: &[(usize, u64, u64)],
    path: &std::path::Path,
    errs: &[i32],
) -> Result<()> {
    for (&(ci, at, len), &e) in parts.iter().zip(errs) {
        let c = &chunks.chunks()[ci];
        if e != 0 {
            let range = match c.file_offset(at) {
                Some(from) if c.read.is_some() => from..from + len,
                _ => c.range.clone(),
            };
            return Err(Error::BadColumnChunk {
                path: path.to_path_buf(),
                row_group: c.row_group,
                column: c.path.clone(),
                range: Some(range),
                reason: format!(
                    "page headers (parsed on the GPU): {}",
                    describe_errors(e as u32, PAGE_HEADER_ERRORS)
                ),
            });
        }
    }
    Ok(())
}

/// The page tables of `chunks` ([`page_tables`], timed as a stage), each page's claims checked
/// ([`check_page_claims`]) before anything is allocated by them.
pub(crate) fn checked_page_tables(
    chunks: &DeviceChunks,
    path: &std::path::Path,
    codec_of: &(dyn Fn(usize, usize) -> parquet::basic::Compression + Sync),
    max_def_of: &dyn Fn(usize) -> i16,
    max_page_bytes: u64,
) -> Result<Vec<Vec<PageInfo>>> {
    let tables = super::timed("page tables", || page_tables(chunks, path))?;
    check_page_claims(chunks, &tables, path, codec_of, max_def_of, max_page_bytes)?;
    Ok(tables)
}

/// Checks what every page of `tables` (the page tables of `chunks`) claims that needs none of
/// its bytes ([`check_claimed_sizes`](crate::decode::claims::check_claimed_sizes)), before the
/// decoder allocates by those claims: the load's page cap (`max_page_bytes`), stored sizes of
/// uncompressed values, the largest expansion of LZ4, GZIP and ZSTD; v2 pages' nulls only where
/// the column has definition levels (`max_def_of(leaf)`: its maximum definition level). The error names the file, the row group, the column, the chunk's byte range and the
/// page, as the host decoder's does.
fn check_page_claims(
    chunks: &DeviceChunks,
    tables: &[Vec<PageInfo>],
    path: &std::path::Path,
    codec_of: &(dyn Fn(usize, usize) -> parquet::basic::Compression + Sync),
    max_def_of: &dyn Fn(usize) -> i16,
    max_page_bytes: u64,
) -> Result<()> {
    use crate::decode::claims::{check_claimed_sizes, check_page_nulls};
    for (c, table) in chunks.chunks().iter().zip(tables) {
        let codec = codec_of(c.row_group, c.column);
        let max_def = max_def_of(c.column);
        for (pi, p) in table.iter().enumerate() {
            let v2 = p.kind == 3;
            let levels = if v2 {
                i64::from(p.def_levels_len.max(0)) + i64::from(p.rep_levels_len.max(0))
            } else {
                0
            };
            check_claimed_sizes(
                codec,
                i64::from(p.uncompressed_size),
                i64::from(p.compressed_size),
                levels,
                !v2 || p.is_compressed != 0,
                p.kind == 1,
                max_page_bytes,
            )
            .and_then(|()| match v2 {
                true => check_page_nulls(max_def, p.num_nulls),
                false => Ok(()),
            })
            .map_err(|reason| Error::BadColumnChunk {
                path: path.to_path_buf(),
                row_group: c.row_group,
                column: c.path.clone(),
                range: Some(c.range.clone()),
                reason: format!(
                    "page {pi} (header at byte {} of the file): {reason}",
                    c.range.start + p.header_offset.max(0) as u64
                ),
            })?;
        }
    }
    Ok(())
}
