//! Decoding on the GPU: kernel launches over the column chunks a device load put in memory.
//!
//! This version parses page headers on the device ([`page_tables`]): one launch counts the
//! pages of every chunk, the host sums the counts, a second launch fills one [`PageInfo`] per
//! page. Per-chunk error bits are checked once, after the pass; a bad chunk is an error naming
//! the file, row group, column and what was wrong. Value decoding kernels come next.

use std::ffi::c_void;
use std::sync::Arc;

use crate::decode::kernels::{describe_errors, PageInfo, PAGE_HEADERS, PAGE_HEADER_ERRORS};
use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};
use crate::reader::DeviceChunks;

const THREADS: u32 = 128;

fn upload(gpu: &Arc<Gpu>, bytes: &[u8]) -> Result<DeviceBuffer> {
    let mut b = gpu.alloc(bytes.len().max(8))?;
    b.copy_from_host(0, bytes)?;
    Ok(b)
}

fn u64s(v: impl IntoIterator<Item = u64>) -> Vec<u8> {
    v.into_iter().flat_map(u64::to_le_bytes).collect()
}

fn i32s_from(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn page_info_from(b: &[u8]) -> PageInfo {
    let i64_at = |o: usize| i64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    let i32_at = |o: usize| i32::from_le_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
    PageInfo {
        header_offset: i64_at(0),
        data_offset: i64_at(8),
        kind: i32_at(16),
        uncompressed_size: i32_at(20),
        compressed_size: i32_at(24),
        num_values: i32_at(28),
        encoding: i32_at(32),
        def_level_encoding: i32_at(36),
        rep_level_encoding: i32_at(40),
        num_nulls: i32_at(44),
        num_rows: i32_at(48),
        def_levels_len: i32_at(52),
        rep_levels_len: i32_at(56),
        is_compressed: i32_at(60),
    }
}

/// Parses the page headers of every chunk of `chunks` on its device: one table per chunk, in
/// chunk order. `path` names the file in errors.
pub fn page_tables(chunks: &DeviceChunks, path: &std::path::Path) -> Result<Vec<Vec<PageInfo>>> {
    let buf = chunks.buffer();
    let gpu = Arc::clone(buf.gpu());
    let n = chunks.chunks().len();
    if n == 0 {
        return Ok(Vec::new());
    }
    let module = gpu.load_module("page_headers", PAGE_HEADERS, &[])?;
    let kernel = module.function("page_headers")?;
    let offsets = upload(&gpu, &u64s(chunks.chunks().iter().map(|c| c.dest_offset)))?;
    let lens = upload(&gpu, &u64s(chunks.chunks().iter().map(|c| c.len())))?;
    let mut counts = gpu.alloc(n * 4)?;
    counts.fill(0)?;
    let mut errors = gpu.alloc(n * 4)?;
    errors.fill(0)?;
    let stream = &gpu.streams()[0];
    let grid = (n as u32).div_ceil(THREADS);
    let launch = |starts: u64, pages: u64| -> Result<()> {
        let (mut base, mut off, mut len) =
            (buf.device_ptr(), offsets.device_ptr(), lens.device_ptr());
        let mut num = n as i32;
        let (mut cnt, mut st, mut pg, mut er) =
            (counts.device_ptr(), starts, pages, errors.device_ptr());
        let mut params: Vec<*mut c_void> = vec![
            (&mut base as *mut u64).cast(),
            (&mut off as *mut u64).cast(),
            (&mut len as *mut u64).cast(),
            (&mut num as *mut i32).cast(),
            (&mut cnt as *mut u64).cast(),
            (&mut st as *mut u64).cast(),
            (&mut pg as *mut u64).cast(),
            (&mut er as *mut u64).cast(),
        ];
        // SAFETY: the parameters match `page_headers(const u8*, const u64*, const u64*, int,
        // int*, const long long*, PageInfo*, u32*)`; every pointer is a live device allocation
        // of the size the kernel indexes (n chunk entries; `starts`/`pages` sized from the
        // counts of the first pass, or null in it); all stay alive until the synchronize below.
        unsafe {
            module.launch(
                kernel,
                (grid, 1, 1),
                (THREADS, 1, 1),
                0,
                stream,
                &mut params,
            )?
        };
        gpu.synchronize()
    };
    // pass 1: count
    launch(0, 0)?;
    let errs = i32s_from(&errors.copy_to_host(0..n * 4)?);
    check_errors(chunks, path, &errs)?;
    let page_counts = i32s_from(&counts.copy_to_host(0..n * 4)?);
    let mut starts = Vec::with_capacity(n);
    let mut total: u64 = 0;
    for &c in &page_counts {
        starts.push(total);
        total += c.max(0) as u64;
    }
    let starts_buf = upload(&gpu, &u64s(starts.iter().copied()))?;
    let size = std::mem::size_of::<PageInfo>();
    let pages = gpu.alloc((total as usize * size).max(size))?;
    // pass 2: fill
    launch(starts_buf.device_ptr(), pages.device_ptr())?;
    let errs = i32s_from(&errors.copy_to_host(0..n * 4)?);
    check_errors(chunks, path, &errs)?;
    let host = pages.copy_to_host(0..total as usize * size)?;
    let all: Vec<PageInfo> = host.chunks_exact(size).map(page_info_from).collect();
    Ok(page_counts
        .iter()
        .zip(&starts)
        .map(|(&c, &s)| all[s as usize..s as usize + c.max(0) as usize].to_vec())
        .collect())
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
