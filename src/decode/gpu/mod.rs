//! Decoding on the GPU: kernel launches over the column chunks a device load put in memory.
//!
//! [`page_tables`] parses every chunk's page headers on the device (one launch counts pages,
//! the host sums the counts, a second fills one [`PageInfo`] per page).
//! [`decode_fixed_columns`] and [`decode_bytes_columns`] then decode the flat columns the
//! placement ([`crate::decode::gpu_plan`]) gives the GPU: SNAPPY pages decompressed by our
//! kernel (one block per page, or per 64 KiB fragment of a large page when large pages are
//! few), or on the host's cores where [`snappy_on_host`]'s model says that is faster (then a
//! large page is split over cores by [`crate::decode::snappy_host`] when pages are few); other
//! codecs on the host (a task per chunk: its bytes copied back, pages decompressed in parallel
//! straight into a pooled pinned buffer, then uploaded). The reader runs the two decoders of a
//! pass at once, the byte-array one on a helper thread and a companion stream;
//! definition levels to validity, PLAIN and dictionary values with arrow-rs's conversions,
//! strings by sizes → offsets (scanned on the device) → characters, UTF-8 checked on the device
//! for Utf8. One launch per stage over all pages of a pass; every kernel records problems as
//! bit flags per page, checked once after the stage, and a bad page is an error naming the
//! file, row group, column and page.

pub mod kernels;
mod pass;
mod report;

pub(crate) use pass::{decode_pass, PassInput};
pub use report::{FieldDecode, GpuDecodeReport, HostDecompressed};

use std::ffi::c_void;
use std::sync::Arc;

use crate::array::DeviceArray;
use crate::decode::gpu::kernels::{
    describe_errors, PageInfo, PageJob, PAGE_HEADERS, PAGE_HEADER_ERRORS,
};
use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};
use crate::plan::ColumnChunkPlan;

/// Column chunks in device memory, still encoded: one allocation holding every planned
/// request at its plan destination offset (`ParquetGpuReader::load_chunks`).
/// `ParquetGpuReader::decode_on_gpu` decodes them into device batches;
/// `ParquetGpuReader::decode_on_host` decodes a device→host copy (a cross-check).
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
    /// `buffer[c.dest_offset .. c.dest_offset + c.len()]`.
    pub fn chunks(&self) -> &[ColumnChunkPlan] {
        &self.chunks
    }

    /// The device address of chunk `i`'s first byte and its length.
    pub fn chunk_ptr(&self, i: usize) -> Option<(u64, u64)> {
        let c = self.chunks.get(i)?;
        Some((self.buffer.device_ptr() + c.dest_offset, c.len()))
    }

    /// A host copy of chunk `i`'s bytes.
    pub fn chunk_to_host(&self, i: usize) -> Result<Vec<u8>> {
        let c = self.chunks.get(i).ok_or_else(|| Error::Device {
            device: format!("cuda:{}", self.buffer.gpu().ordinal()),
            reason: format!("no chunk {i} (the load holds {})", self.chunks.len()),
        })?;
        let start = c.dest_offset as usize;
        self.buffer.copy_to_host(start..start + c.len() as usize)
    }
}

const THREADS: u32 = 128;

thread_local! {
    static PROFILE: std::cell::RefCell<Option<Vec<(String, std::time::Duration)>>> =
        const { std::cell::RefCell::new(None) };
}

/// Starts recording the wall time of each decoding stage run on this thread (every launch
/// waits for its kernel, so a kernel's stage is its run time plus the launch).
pub fn profile_begin() {
    PROFILE.with(|p| *p.borrow_mut() = Some(Vec::new()));
}

/// Stops recording; the stages in first-seen order, times summed per name.
pub fn profile_end() -> Vec<(String, std::time::Duration)> {
    let raw = PROFILE.with(|p| p.borrow_mut().take()).unwrap_or_default();
    let mut out: Vec<(String, std::time::Duration)> = Vec::new();
    for (name, d) in raw {
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, t)) => *t += d,
            None => out.push((name, d)),
        }
    }
    out
}

/// Adds `stages` (recorded on a helper thread) to this thread's record, when it profiles.
pub fn profile_absorb(stages: Vec<(String, std::time::Duration)>) {
    PROFILE.with(|p| {
        if let Some(v) = p.borrow_mut().as_mut() {
            v.extend(stages);
        }
    });
}

/// Whether this thread records stages.
pub fn profiling() -> bool {
    PROFILE.with(|p| p.borrow().is_some())
}

/// Runs `f`, recording its wall time under `name` when this thread profiles.
pub fn timed<T>(name: &str, f: impl FnOnce() -> T) -> T {
    if !profiling() {
        return f();
    }
    let t = std::time::Instant::now();
    let r = f();
    since(name, t);
    r
}

/// While profiling, records stage `name` as running from `start` until now.
fn since(name: &str, start: std::time::Instant) {
    if !profiling() {
        return;
    }
    let d = start.elapsed();
    PROFILE.with(|p| {
        if let Some(v) = p.borrow_mut().as_mut() {
            v.push((name.to_string(), d));
        }
    });
}

fn upload(gpu: &Arc<Gpu>, bytes: &[u8]) -> Result<DeviceBuffer> {
    let mut b = gpu.alloc(bytes.len().max(8))?;
    b.copy_from_host(0, bytes)?;
    Ok(b)
}

/// Uploads a table of kernel jobs, each serialised into its C layout by `to_bytes`.
fn upload_table<T, const N: usize>(
    gpu: &Arc<Gpu>,
    items: &[T],
    to_bytes: impl Fn(&T) -> [u8; N],
) -> Result<DeviceBuffer> {
    upload(gpu, &items.iter().flat_map(to_bytes).collect::<Vec<u8>>())
}

fn u64s(v: impl IntoIterator<Item = u64>) -> Vec<u8> {
    v.into_iter().flat_map(u64::to_le_bytes).collect()
}

/// The i32 values of a device array of `n` (one copy): kernels' error words and counts.
fn i32s_from_device(b: &DeviceBuffer, n: usize) -> Result<Vec<i32>> {
    Ok(b.copy_to_host(0..n * 4)?
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// A zero-filled device allocation of at least `len` bytes.
fn zeroed(gpu: &Arc<Gpu>, len: usize) -> Result<DeviceBuffer> {
    let mut b = gpu.alloc(len.max(4))?;
    b.fill(0)?;
    Ok(b)
}

/// A zeroed validity bitmap (32-bit words) for `rows` rows of an optional column.
fn validity_words(gpu: &Arc<Gpu>, rows: usize, optional: bool) -> Result<Option<DeviceBuffer>> {
    optional
        .then(|| zeroed(gpu, rows.div_ceil(32) * 4))
        .transpose()
}

/// The u64 values of a device array of `n` (one copy).
fn u64s_from_device(b: &DeviceBuffer, n: usize) -> Result<Vec<u64>> {
    Ok(b.copy_to_host(0..n * 8)?
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect())
}

/// Per page job, the first index of its rows in the pass's scratch arrays, and the rows in all.
fn row_bases(pages: &[PageJob]) -> (Vec<u64>, u64) {
    let mut base = Vec::with_capacity(pages.len());
    let mut total = 0u64;
    for p in pages {
        base.push(total);
        total += p.num_values.max(0) as u64;
    }
    (base, total)
}

/// (row group, column path, page index) of each page job, for errors.
type PageName = (usize, String, usize);

/// The first page whose error bits are set, as an error naming it.
fn page_errors(
    path: &std::path::Path,
    errs: &[i32],
    names: &[PageName],
    table: &[(u32, &str)],
) -> Result<()> {
    match errs.iter().position(|&b| b != 0) {
        None => Ok(()),
        Some(k) => {
            let (rg, col, page) = &names[k];
            Err(Error::Decode {
                path: path.to_path_buf(),
                row_group: Some(*rg),
                column: Some(col.clone()),
                reason: format!(
                    "page {page} (decoded on the GPU): {}",
                    describe_errors(errs[k] as u32, table)
                ),
            })
        }
    }
}

/// Appends a job per data page of one chunk (`column`: the index of its column job) to `jobs`
/// and `names`; returns the rows the pages hold and the dictionary page, if any, as (page,
/// address, bytes, entries).
fn data_page_jobs(
    c: &crate::plan::ColumnChunkPlan,
    table: &[PageInfo],
    page_data: &[(u64, u64)],
    max_def: i16,
    column: usize,
    jobs: &mut Vec<PageJob>,
    names: &mut Vec<PageName>,
) -> (u64, Option<(usize, u64, u64, i32)>) {
    let mut row = 0u64;
    let mut dict = None;
    for (k, p) in table.iter().enumerate() {
        let (ptr, len) = page_data[k];
        match p.kind {
            2 => dict = Some((k, ptr, len, p.num_values)),
            0 | 3 => {
                jobs.push(PageJob {
                    data: ptr,
                    data_len: len,
                    row_start: row,
                    num_values: p.num_values,
                    encoding: p.encoding,
                    max_def: i32::from(max_def),
                    v2: i32::from(p.kind == 3),
                    def_len: p.def_levels_len,
                    rep_len: p.rep_levels_len,
                    column: column as i32,
                });
                names.push((c.row_group, c.path.clone(), k));
                row += p.num_values as u64;
            }
            _ => {}
        }
    }
    (row, dict)
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
    let offsets = upload(&gpu, &u64s(chunks.chunks().iter().map(|c| c.dest_offset)))?;
    let lens = upload(&gpu, &u64s(chunks.chunks().iter().map(|c| c.len())))?;
    // counts (in: capacities) then error bits, n i32 each: one copy back per pass
    let mut meta = gpu.alloc(n * 8)?;
    let grid = (n as u32).div_ceil(THREADS);
    let size = std::mem::size_of::<PageInfo>();
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
        // SAFETY: the arguments match `page_headers(const u8*, const u64*, const u64*, int,
        // int*, const long long*, PageInfo*, u32*)` (the int in a 64-bit slot, read as its low
        // 4 bytes); `meta` holds n counts then n error words; `starts` holds n entries and
        // `pages` the sum of the capacities in `meta`, which the kernel never writes past; all
        // stay alive until `launch64` returns.
        unsafe {
            launch64(
                &gpu,
                &module,
                "page_headers",
                grid,
                THREADS,
                &[
                    buf.device_ptr(),
                    offsets.device_ptr(),
                    lens.device_ptr(),
                    n as u64,
                    meta.device_ptr(),
                    starts_buf.device_ptr(),
                    pages.device_ptr(),
                    meta.device_ptr() + 4 * n as u64,
                ],
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
                .map(page_info_from)
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
fn page_capacity(c: &crate::plan::ColumnChunkPlan) -> i32 {
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

/// Per chunk: each page's (device address, length) of decompressed data, and the pages
/// decompressed on the host.
type PageLocations = (Vec<(u64, u64)>, usize);

/// Where the (decompressed) data of every page of the chunks `cis` lives on the device:
/// uncompressed chunks in place in the load's buffer; SNAPPY pages decompressed on the device
/// ([`snappy_on_device`]) or, where `placement` (or its model) says so, on the host; pages of
/// other codecs decompressed on the host (chunks in parallel) and uploaded through pinned
/// buffers. Buffers the kernels will read are pushed to `uploads`,
/// which must outlive them. Indexed like `cis`.
fn locate_pages(
    chunks: &DeviceChunks,
    cis: &[usize],
    tables: &[Vec<PageInfo>],
    path: &std::path::Path,
    codec_of: &(dyn Fn(usize, usize) -> parquet::basic::Compression + Sync),
    placement: SnappyPlacement,
    uploads: &mut Vec<DeviceBuffer>,
) -> Result<Vec<PageLocations>> {
    use parquet::basic::Compression;
    use rayon::prelude::*;
    let buf = chunks.buffer();
    let all = chunks.chunks();
    let fail = |ci: usize, reason: String| {
        let c = &all[ci];
        Error::BadColumnChunk {
            path: path.to_path_buf(),
            row_group: c.row_group,
            column: c.path.clone(),
            range: Some(c.range.clone()),
            reason,
        }
    };
    let mut out: Vec<Option<PageLocations>> = vec![None; cis.len()];
    let mut snappy = Vec::new();
    let mut host = Vec::new();
    for (k, &ci) in cis.iter().enumerate() {
        let c = &all[ci];
        match codec_of(c.row_group, c.column) {
            Compression::UNCOMPRESSED => {
                let base = buf.device_ptr() + c.dest_offset;
                out[k] = Some((
                    tables[ci]
                        .iter()
                        .map(|p| (base + p.data_offset as u64, p.compressed_size as u64))
                        .collect(),
                    0,
                ));
            }
            Compression::SNAPPY => snappy.push(k),
            codec => host.push((k, codec)),
        }
    }
    if !snappy.is_empty() {
        let pages = snappy.iter().flat_map(|&k| tables[cis[k]].iter());
        let (total, largest) = pages.fold((0u64, 0u64), |(t, m), p| {
            let n = p.uncompressed_size.max(0) as u64;
            (t + n, m.max(n))
        });
        if snappy_on_host(placement, total, largest, rayon::current_num_threads()) {
            host.extend(snappy.drain(..).map(|k| (k, Compression::SNAPPY)));
        }
    }
    if !snappy.is_empty() {
        let sn: Vec<usize> = snappy.iter().map(|&k| cis[k]).collect();
        let locs = snappy_on_device(chunks, &sn, tables, &fail, uploads)?;
        for (k, l) in snappy.into_iter().zip(locs) {
            out[k] = Some((l, 0));
        }
    }
    if !host.is_empty() {
        let gpu = Arc::clone(buf.gpu());
        // a large SNAPPY page is split over cores only where there are too few of them to
        // keep the cores busy (splitting costs about twice the CPU time)
        let large = host
            .iter()
            .flat_map(|&(k, _)| tables[cis[k]].iter())
            .filter(|p| {
                p.uncompressed_size.max(0) as usize >= crate::decode::snappy_host::PARALLEL_MIN
            })
            .count();
        let split = large * 4 <= rayon::current_num_threads();
        let done: Vec<Result<(usize, PageLocations, DeviceBuffer)>> =
            timed("host decompression and upload", || {
                host.par_iter()
                    .enumerate()
                    .map(|(i, &(k, codec))| {
                        let ci = cis[k];
                        let stream = &gpu.streams()[i % gpu.streams().len()];
                        host_decompress_chunk(chunks, ci, codec, split, stream, &|e| fail(ci, e))
                            .map(|(locs, up)| (k, locs, up))
                    })
                    .collect()
            });
        for d in done {
            let (k, locs, up) = d?;
            out[k] = Some(locs);
            uploads.push(up);
        }
    }
    Ok(out.into_iter().map(|o| o.unwrap_or_default()).collect())
}

/// Chunk `ci`'s pages decompressed on the host and uploaded: its bytes copied back, its page
/// table parsed by the host twin, every page decompressed (in parallel) straight into its place
/// in a pinned buffer (large SNAPPY pages split over cores when `split`), which is copied on
/// `stream` into a device buffer of the chunk's own. Index pages get an empty span.
fn host_decompress_chunk(
    chunks: &DeviceChunks,
    ci: usize,
    codec: parquet::basic::Compression,
    split: bool,
    stream: &crate::device::Stream,
    fail: &(dyn Fn(String) -> Error + Sync),
) -> Result<(PageLocations, DeviceBuffer)> {
    let gpu = chunks.buffer().gpu();
    // the chunk's bytes back into a pooled pinned buffer (a faster copy than into fresh
    // pageable memory, and no page faults)
    let c = &chunks.chunks()[ci];
    let mut src = gpu.pinned(c.len() as usize)?;
    chunks.buffer().copy_into(
        c.dest_offset as usize,
        &mut src.as_mut_slice()[..c.len() as usize],
    )?;
    let result = decompress_and_upload(
        &src.as_slice()[..c.len() as usize],
        gpu,
        codec,
        split,
        stream,
        fail,
    );
    gpu.recycle_pinned(src);
    result
}

/// The pages of one chunk's `bytes`, decompressed into a pinned buffer and uploaded (see
/// [`host_decompress_chunk`]).
fn decompress_and_upload(
    bytes: &[u8],
    gpu: &Arc<crate::device::Gpu>,
    codec: parquet::basic::Compression,
    split: bool,
    stream: &crate::device::Stream,
    fail: &(dyn Fn(String) -> Error + Sync),
) -> Result<(PageLocations, DeviceBuffer)> {
    use crate::decode::decompress::{decompress_page_into, decompressed_size};
    use crate::decode::page_header::PageKind;
    use rayon::prelude::*;
    let entries = crate::decode::page_header::page_table(bytes).map_err(|e| fail(e.to_string()))?;
    let sizes = entries
        .iter()
        .enumerate()
        .map(|(i, p)| match p.header.kind {
            PageKind::Index => Ok(0),
            _ => decompressed_size(bytes, i, p, codec),
        })
        .collect::<std::result::Result<Vec<usize>, _>>()
        .map_err(|e| fail(e.to_string()))?;
    let len: usize = sizes.iter().sum();
    // the sizes come from the page headers: a failed allocation names the chunk that asked
    let room = |e: Error| {
        fail(format!(
            "its page headers promise {len} bytes of decompressed pages, which could not be allocated: {e}"
        ))
    };
    let up = gpu.alloc(len).map_err(room)?;
    let mut spans = vec![(0u64, 0u64); entries.len()];
    if len == 0 {
        return Ok(((spans, 0), up));
    }
    let mut pinned = gpu.pinned(len).map_err(room)?;
    let mut parts = Vec::with_capacity(entries.len());
    let mut rest = &mut pinned.as_mut_slice()[..len];
    let mut at = 0u64;
    for (i, (p, &n)) in entries.iter().zip(&sizes).enumerate() {
        if p.header.kind == PageKind::Index {
            continue;
        }
        let (mine, tail) = rest.split_at_mut(n);
        spans[i] = (up.device_ptr() + at, n as u64);
        parts.push((i, mine));
        at += n as u64;
        rest = tail;
    }
    let flags: Vec<std::result::Result<bool, _>> = parts
        .into_par_iter()
        .map(|(i, out)| decompress_page_into(bytes, i, &entries[i], codec, out, split))
        .collect();
    let mut host_pages = 0;
    for f in flags {
        host_pages += usize::from(f.map_err(|e| fail(e.to_string()))?);
    }
    pinned.copy_to_device(0..len, &up, 0, stream)?;
    gpu.recycle_pinned(pinned);
    Ok(((spans, host_pages), up))
}

pub use crate::config::SnappyPlacement;

/// Whether the SNAPPY pages of a pass (`total` bytes decompressed, the largest page `largest`)
/// are decompressed faster on the host's `cores` than by the device kernel, by a model of
/// both measured on the H200 machine (benches/RESULTS.md): the kernel decodes a page per
/// block at about 140 MB/s, all pages at once (so a pass takes as long as its largest page,
/// and at least total / 40 GB/s); the host decompresses about 1 GB/s per core and copies the
/// pages back and forth at about 20 GB/s. Small loads with large pages (a dictionary page of
/// a few hundred KiB is several milliseconds of one block) go to the host; large loads stay on
/// the device. [`SnappyPlacement::Device`] / [`SnappyPlacement::Host`] override the model.
pub fn snappy_on_host(placement: SnappyPlacement, total: u64, largest: u64, cores: usize) -> bool {
    match placement {
        SnappyPlacement::Device => return false,
        SnappyPlacement::Host => return true,
        SnappyPlacement::Auto => {}
    }
    let secs = |bytes: u64, rate: f64| bytes as f64 / rate;
    let device = secs(largest, 140e6).max(secs(total, 40e9));
    let host = secs(total, cores.max(1) as f64 * 1e9) + 2.0 * secs(total, 20e9);
    host < device
}

/// The fragments of a SNAPPY page of `src_len` compressed and `dst_len` decompressed bytes, from
/// the split table `snappy_split` wrote for it (entry k: where the elements of output bytes
/// [k * SNAPPY_FRAGMENT, ..) start in the input; all ones where no element starts there, so
/// that fragment joins the one before): (source offset, source bytes, output offset, output
/// bytes) each. None when the table is not usable (no start, or starts out of order or past
/// the input): the page then decodes whole.
pub fn snappy_fragments_of(
    splits: &[u64],
    src_len: u64,
    dst_len: u64,
) -> Option<Vec<(u64, u64, u64, u64)>> {
    use crate::decode::gpu::kernels::SNAPPY_FRAGMENT;
    let starts: Vec<(u64, u64)> = splits
        .iter()
        .enumerate()
        .filter(|(_, &s)| s != u64::MAX)
        .map(|(k, &s)| (s, k as u64 * SNAPPY_FRAGMENT))
        .collect();
    if starts.first().map(|s| s.1) != Some(0)
        || starts
            .iter()
            .any(|&(s, d)| s > src_len || d >= dst_len.max(1))
        || starts.windows(2).any(|w| w[1].0 <= w[0].0)
    {
        return None;
    }
    let mut out = Vec::with_capacity(starts.len());
    for (k, &(s, d)) in starts.iter().enumerate() {
        let (s_end, d_end) = starts.get(k + 1).copied().unwrap_or((src_len, dst_len));
        out.push((s, s_end - s, d, d_end - d));
    }
    Some(out)
}

/// Decompresses the SNAPPY pages of the chunks `cis` on the device: large pages (when few)
/// split into 64 KiB fragments first, then fragments and whole pages one block each; returns per chunk each page's (address, length) of decompressed data. v2
/// levels are copied as stored; pages whose values are stored uncompressed are used in place.
fn snappy_on_device(
    chunks: &DeviceChunks,
    cis: &[usize],
    tables: &[Vec<PageInfo>],
    fail: &dyn Fn(usize, String) -> Error,
    uploads: &mut Vec<DeviceBuffer>,
) -> Result<Vec<Vec<(u64, u64)>>> {
    use crate::decode::gpu::kernels::{
        SnappyJob, SNAPPY, SNAPPY_ERRORS, SNAPPY_FRAGMENT, SNAPPY_THREADS,
    };
    let buf = chunks.buffer();
    let gpu = Arc::clone(buf.gpu());
    // output layout: each page that needs decompression gets uncompressed_size bytes
    let mut total = 0u64;
    let mut out_at: Vec<Vec<Option<u64>>> = Vec::with_capacity(cis.len());
    for &ci in cis {
        let mut v = Vec::with_capacity(tables[ci].len());
        for p in &tables[ci] {
            let in_place = p.kind == 3 && p.is_compressed == 0;
            if in_place || p.kind == 1 {
                v.push(None);
            } else {
                v.push(Some(total));
                total += p.uncompressed_size.max(0) as u64;
            }
        }
        out_at.push(v);
    }
    let mut out = gpu.alloc((total as usize).max(1))?;
    let mut jobs: Vec<SnappyJob> = Vec::new();
    let mut job_pages: Vec<(usize, usize)> = Vec::new();
    let mut all_locs = Vec::with_capacity(cis.len());
    for (k, &ci) in cis.iter().enumerate() {
        let c = &chunks.chunks()[ci];
        let mut locs = Vec::with_capacity(tables[ci].len());
        for (pi, p) in tables[ci].iter().enumerate() {
            let src = c.dest_offset + p.data_offset as u64;
            let Some(at) = out_at[k][pi] else {
                locs.push((buf.device_ptr() + src, p.compressed_size as u64));
                continue;
            };
            let levels = if p.kind == 3 {
                (p.def_levels_len.max(0) + p.rep_levels_len.max(0)) as u64
            } else {
                0
            };
            if levels > p.compressed_size as u64 || levels > p.uncompressed_size as u64 {
                return Err(fail(ci, format!("page {pi}: levels longer than the page")));
            }
            if levels > 0 {
                out.copy_from_device(at as usize, buf, src as usize..(src + levels) as usize)?;
            }
            let (src_len, dst_len) = (
                p.compressed_size as u64 - levels,
                p.uncompressed_size as u64 - levels,
            );
            if src_len == 0 {
                if dst_len != 0 {
                    return Err(fail(
                        ci,
                        format!("page {pi}: no compressed values for {dst_len} bytes"),
                    ));
                }
            } else {
                jobs.push(SnappyJob {
                    src: buf.device_ptr() + src + levels,
                    src_len,
                    dst: out.device_ptr() + at + levels,
                    dst_len,
                });
                job_pages.push((ci, pi));
            }
            locs.push((out.device_ptr() + at, p.uncompressed_size as u64));
        }
        all_locs.push(locs);
    }
    if !jobs.is_empty() {
        let module = gpu.load_module("snappy", SNAPPY, &[])?;
        let threads = SNAPPY_THREADS;
        let run = |kernel: &str, jobs: &[SnappyJob]| -> Result<Vec<i32>> {
            let jobs_buf = upload_table(&gpu, jobs, |j| j.to_bytes())?;
            let errors = zeroed(&gpu, jobs.len() * 4)?;
            // SAFETY: `snappy_pages` / `snappy_fragments(const SnappyJob*, int, u32*)` (the int
            // in a 64-bit slot, read as its low 4 bytes); one block of `threads` per job; every
            // job's source lies in the load's buffer (page data inside its chunk, checked by the
            // page-header pass; fragments inside their page's) and its destination in `out`,
            // sized from the pages' uncompressed sizes; all live until `launch64` returns.
            unsafe {
                launch64(
                    &gpu,
                    &module,
                    kernel,
                    jobs.len() as u32,
                    threads,
                    &[
                        jobs_buf.device_ptr(),
                        jobs.len() as u64,
                        errors.device_ptr(),
                    ],
                )?
            };
            i32s_from_device(&errors, jobs.len())
        };
        let failed = |j: usize, bits: i32| {
            let (ci, pi) = job_pages[j];
            fail(
                ci,
                format!(
                    "page {pi} (decompressed on the GPU): {}",
                    describe_errors(bits as u32, SNAPPY_ERRORS)
                ),
            )
        };
        // large pages: when there are too few of them to fill the device, each is parsed
        // first to find its 64 KiB fragments, which then decode in parallel (a page otherwise
        // waits on one block). Many large pages fill the device by themselves; there the
        // extra parse costs more than it saves (measured on the H200: the 24-row-group
        // lineitem file decodes in 18 ms whole, 20 ms split; a 100k-row file's two 800 KB
        // dictionary pages in 5.6 ms whole, 3.1 ms split).
        let mut large: Vec<usize> = (0..jobs.len())
            .filter(|&j| jobs[j].dst_len >= 2 * SNAPPY_FRAGMENT)
            .collect();
        if large.len() > 2 * gpu.multiprocessors() {
            large.clear();
        }
        let mut fragments: Vec<SnappyJob> = Vec::new();
        let mut fragment_of: Vec<usize> = Vec::new(); // the job each fragment belongs to
        let mut whole: Vec<usize> = (0..jobs.len()).filter(|j| !large.contains(j)).collect();
        if !large.is_empty() {
            let counts: Vec<u64> = large
                .iter()
                .map(|&j| jobs[j].dst_len.div_ceil(SNAPPY_FRAGMENT))
                .collect();
            let (bases, n_splits) = counts.iter().fold((Vec::new(), 0u64), |(mut v, t), &c| {
                v.push(t);
                (v, t + c)
            });
            let large_jobs: Vec<SnappyJob> = large.iter().map(|&j| jobs[j]).collect();
            let jobs_buf = upload_table(&gpu, &large_jobs, |j| j.to_bytes())?;
            let base_buf = upload(&gpu, &u64s(bases.iter().copied()))?;
            let mut splits = gpu.alloc(n_splits as usize * 8)?;
            splits.fill(0xff)?;
            let errors = zeroed(&gpu, large.len() * 4)?;
            // SAFETY: `snappy_split(const SnappyJob*, int, u64*, const u64*, u32*)`; one block
            // per job, each writing only its ceil(dst_len / SNAPPY_FRAGMENT) entries of
            // `splits` from its base (the bases are their prefix sums); sources in the load's
            // buffer; nothing else is written; all live until `launch64` returns.
            unsafe {
                launch64(
                    &gpu,
                    &module,
                    "snappy_split",
                    large.len() as u32,
                    threads,
                    &[
                        jobs_buf.device_ptr(),
                        large.len() as u64,
                        splits.device_ptr(),
                        base_buf.device_ptr(),
                        errors.device_ptr(),
                    ],
                )?
            };
            let errs = i32s_from_device(&errors, large.len())?;
            if let Some(k) = errs.iter().position(|&b| b != 0) {
                return Err(failed(large[k], errs[k]));
            }
            let all = u64s_from_device(&splits, n_splits as usize)?;
            for (k, &j) in large.iter().enumerate() {
                let at = bases[k] as usize;
                let mine = &all[at..at + counts[k] as usize];
                match snappy_fragments_of(mine, jobs[j].src_len, jobs[j].dst_len) {
                    Some(f) => {
                        for (src, src_len, dst, dst_len) in f {
                            fragments.push(SnappyJob {
                                src: jobs[j].src + src,
                                src_len,
                                dst: jobs[j].dst + dst,
                                dst_len,
                            });
                            fragment_of.push(j);
                        }
                    }
                    None => whole.push(j),
                }
            }
        }
        if !fragments.is_empty() {
            let errs = run("snappy_fragments", &fragments)?;
            // a fragment the reference compressor would not have made (a copy reaching into
            // the fragment before): its whole page again, in one block
            let mut redo: Vec<usize> = errs
                .iter()
                .zip(&fragment_of)
                .filter(|(&e, _)| e != 0)
                .map(|(_, &j)| j)
                .collect();
            redo.dedup();
            whole.extend(redo);
        }
        if !whole.is_empty() {
            whole.sort_unstable();
            whole.dedup();
            let some: Vec<SnappyJob> = whole.iter().map(|&j| jobs[j]).collect();
            let errs = run("snappy_pages", &some)?;
            if let Some(k) = errs.iter().position(|&b| b != 0) {
                return Err(failed(whole[k], errs[k]));
            }
        }
    }
    uploads.push(out);
    Ok(all_locs)
}

/// A decoded column of one row group in device memory: Arrow layout (values, LSB-first
/// validity bitmap in 32-bit words).
pub struct DeviceColumn {
    /// Index of the field in the projected schema.
    pub field: usize,
    /// Row group.
    pub row_group: usize,
    /// The Arrow type.
    pub data_type: arrow::datatypes::DataType,
    /// Rows.
    pub len: usize,
    /// Nulls.
    pub null_count: usize,
    /// The Arrow buffers in order (values; or offsets then characters) and their lengths in
    /// bytes.
    pub buffers: Vec<(DeviceBuffer, usize)>,
    /// Validity bitmap, for optional columns.
    pub validity: Option<DeviceBuffer>,
    /// Pages decompressed on the host before upload.
    pub host_decompressed_pages: usize,
}

impl std::fmt::Debug for DeviceColumn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceColumn")
            .field("field", &self.field)
            .field("row_group", &self.row_group)
            .field("data_type", &self.data_type)
            .field("len", &self.len)
            .field("null_count", &self.null_count)
            .finish_non_exhaustive()
    }
}

impl DeviceColumn {
    /// The column as a device array: its buffers become the array's; the validity bitmap is
    /// dropped when there are no nulls.
    pub(crate) fn into_array(self) -> DeviceArray {
        DeviceArray {
            data_type: self.data_type,
            len: self.len,
            null_count: self.null_count,
            validity: if self.null_count > 0 {
                self.validity
            } else {
                None
            },
            buffers: self.buffers,
            children: Vec::new(),
            dictionary: None,
        }
    }

    /// The column as an arrow-rs array in host memory (a device→host copy).
    pub fn to_host(&self) -> Result<arrow::array::ArrayRef> {
        use arrow::array::{make_array, ArrayData};
        use arrow::buffer::{Buffer, NullBuffer};
        let nulls = match &self.validity {
            Some(v) if self.null_count > 0 => {
                let bytes = v.copy_to_host(0..v.len())?;
                let bits =
                    arrow::buffer::BooleanBuffer::new(Buffer::from_slice_ref(&bytes), 0, self.len);
                Some(NullBuffer::new(bits))
            }
            _ => None,
        };
        let mut b = ArrayData::builder(self.data_type.clone())
            .len(self.len)
            .nulls(nulls);
        let mut ordinal = 0;
        for (buf, len) in &self.buffers {
            ordinal = buf.gpu().ordinal();
            b = b.add_buffer(Buffer::from_slice_ref(buf.copy_to_host(0..*len)?));
        }
        b.build().map(make_array).map_err(|e| Error::Device {
            device: format!("cuda:{ordinal}"),
            reason: format!("the decoded column is not valid Arrow: {e}"),
        })
    }
}

/// What a decoding pass works on: the chunks of a device load and their page tables
/// ([`page_tables`]), the file (for errors), the columns the placement
/// ([`crate::decode::gpu_plan`]) gives the GPU, the projected schema, each chunk's codec
/// (`codec_of(row_group, leaf)`), each row group's rows, and where SNAPPY pages go.
#[derive(Clone, Copy)]
pub struct Pass<'a> {
    /// The column chunks in device memory.
    pub chunks: &'a DeviceChunks,
    /// Their page tables, in chunk order.
    pub tables: &'a [Vec<PageInfo>],
    /// The file, named in errors.
    pub path: &'a std::path::Path,
    /// The GPU placements.
    pub columns: &'a [crate::decode::gpu_plan::GpuColumn],
    /// The projected schema's fields.
    pub fields: &'a [std::sync::Arc<arrow::datatypes::Field>],
    /// Codec of the chunk of (row group, leaf).
    pub codec_of: &'a (dyn Fn(usize, usize) -> parquet::basic::Compression + Sync),
    /// Rows of a row group.
    pub rows_of: &'a (dyn Fn(usize) -> usize + Sync),
    /// Where SNAPPY pages are decompressed.
    pub snappy: SnappyPlacement,
}

impl std::fmt::Debug for Pass<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pass")
            .field("path", &self.path)
            .field("chunks", &self.chunks.chunks().len())
            .field("columns", &self.columns.len())
            .field("snappy", &self.snappy)
            .finish_non_exhaustive()
    }
}

/// The chunks of a pass one decoder takes: per chunk (in chunk order) its index, its GPU
/// column and its pages' (decompressed) data; a zeroed null counter (u64) per chunk; and the
/// buffers of decompressed pages, kept alive until the decoder's kernels are done.
struct Selected<'a> {
    chunks: Vec<(usize, &'a crate::decode::gpu_plan::GpuColumn, PageLocations)>,
    counters: DeviceBuffer,
    uploads: Vec<DeviceBuffer>,
}

impl<'a> Pass<'a> {
    /// The chunks whose GPU column `pick` accepts, their pages located (SNAPPY pages
    /// decompressed where the pass says, other codecs on the host).
    fn select(
        &self,
        pick: impl Fn(&crate::decode::gpu_plan::GpuColumn) -> bool,
    ) -> Result<Selected<'a>> {
        let columns: &'a [crate::decode::gpu_plan::GpuColumn] = self.columns;
        let picked: Vec<(usize, &'a crate::decode::gpu_plan::GpuColumn)> = self
            .chunks
            .chunks()
            .iter()
            .enumerate()
            .filter_map(|(ci, c)| {
                columns
                    .iter()
                    .find(|g| g.leaf == c.column && pick(g))
                    .map(|g| (ci, g))
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
                &mut uploads,
            )
        })?;
        let counters = zeroed(self.chunks.buffer().gpu(), cis.len() * 8)?;
        Ok(Selected {
            chunks: picked
                .into_iter()
                .zip(located)
                .map(|((ci, g), l)| (ci, g, l))
                .collect(),
            counters,
            uploads,
        })
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

/// Decodes, in one launch over all their data pages, the fixed-width columns of a pass.
/// SNAPPY pages are decompressed where the pass says, other codecs on the host and uploaded.
pub fn decode_fixed_columns(pass: &Pass<'_>) -> Result<Vec<DeviceColumn>> {
    let Pass {
        chunks,
        tables,
        path,
        fields,
        rows_of,
        ..
    } = *pass;
    use crate::decode::gpu::kernels::{
        conversion_code, ColumnJob, DECODE_FIXED, DECODE_FIXED_ERRORS,
    };
    use crate::decode::gpu_plan::Conversion;
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
        outputs.push(DeviceColumn {
            field: col.field,
            row_group: c.row_group,
            data_type: fields[col.field].data_type().clone(),
            len: rows,
            null_count: 0,
            buffers: vec![(values, arrow_len)],
            validity,
            host_decompressed_pages: host_pages,
        });
    }
    if page_jobs.is_empty() {
        return Ok(outputs);
    }
    let module = gpu.load_module("decode_fixed", DECODE_FIXED, &[])?;
    let pages_buf = upload_table(&gpu, &page_jobs, |j| j.to_bytes())?;
    let cols_buf = upload_table(&gpu, &col_jobs, |j| j.to_bytes())?;
    let (base, total) = row_bases(&page_jobs);
    let base_buf = upload(&gpu, &u64s(base))?;
    let defs = gpu.alloc((total as usize).max(1))?;
    let idxs = gpu.alloc((total as usize * 4).max(4))?;
    let errors = zeroed(&gpu, page_jobs.len() * 4)?;
    // SAFETY: the arguments match `decode_fixed_pages(const PageJob*, const ColumnJob*, u8*,
    // u32*, const u64*, u32*)`; one block per page job; the scratch arrays hold one entry per
    // row of every page (`base` is their prefix sum); every output buffer is sized from the
    // row group's rows, which the page value counts were checked to sum to; every allocation
    // (uploads included) stays alive until `launch64` returns.
    unsafe {
        launch64(
            &gpu,
            &module,
            "decode_fixed_pages",
            page_jobs.len() as u32,
            256,
            &[
                pages_buf.device_ptr(),
                cols_buf.device_ptr(),
                defs.device_ptr(),
                idxs.device_ptr(),
                base_buf.device_ptr(),
                errors.device_ptr(),
            ],
        )?
    };
    let errs = i32s_from_device(&errors, page_jobs.len())?;
    page_errors(path, &errs, &page_names, DECODE_FIXED_ERRORS)?;
    for (o, n) in outputs
        .iter_mut()
        .zip(u64s_from_device(&counters, col_jobs.len())?)
    {
        o.null_count = n as usize;
    }
    drop(uploads);
    Ok(outputs)
}

/// Launches `name` from `module` over `grid` blocks of `block` threads with `args` (device
/// addresses or 64-bit values, in order) and waits.
///
/// # Safety
/// `args` must match the kernel's parameters (every one a 64-bit value or pointer) and every
/// address must stay valid, with the sizes the kernel indexes, until this returns.
unsafe fn launch64(
    gpu: &Gpu,
    module: &crate::device::nvrtc::Module,
    name: &str,
    grid: u32,
    block: u32,
    args: &[u64],
) -> Result<()> {
    if !profiling() {
        // no stage name to build on every launch unless someone records it
        // SAFETY: forwarded to the caller's contract.
        return unsafe { launch64_now(gpu, module, name, grid, block, args) };
    }
    timed(&format!("kernel {name}"), || {
        // SAFETY: forwarded to the caller's contract.
        unsafe { launch64_now(gpu, module, name, grid, block, args) }
    })
}

/// Enqueues `name` like [`launch64`] but returns without waiting: kernels enqueued this way
/// run in order on the decode stream; `gpu.synchronize_decode()` waits for them.
///
/// # Safety
/// As [`launch64`], except that every address must stay valid until the caller has waited
/// with `gpu.synchronize_decode()` (or a later [`launch64`], which waits for the stream).
unsafe fn launch64_nowait(
    gpu: &Gpu,
    module: &crate::device::nvrtc::Module,
    name: &str,
    grid: u32,
    block: u32,
    args: &[u64],
) -> Result<()> {
    let f = module.function(name)?;
    // the kernel runs on a non-blocking stream: let the uploads and memsets it reads (legacy
    // stream, not yet finished) complete first
    gpu.synchronize_default_stream()?;
    let mut vals: Vec<u64> = args.to_vec();
    let mut params: Vec<*mut c_void> = vals.iter_mut().map(|v| (v as *mut u64).cast()).collect();
    // SAFETY: forwarded to the caller's contract.
    unsafe {
        module.launch(
            f,
            (grid.max(1), 1, 1),
            (block, 1, 1),
            0,
            gpu.decode_stream(),
            &mut params,
        )
    }
}

/// [`launch64`] without the profiling.
///
/// # Safety
/// As [`launch64`].
unsafe fn launch64_now(
    gpu: &Gpu,
    module: &crate::device::nvrtc::Module,
    name: &str,
    grid: u32,
    block: u32,
    args: &[u64],
) -> Result<()> {
    // SAFETY: forwarded to the caller's contract; waiting below keeps every address valid
    // for as long as the kernel runs.
    unsafe { launch64_nowait(gpu, module, name, grid, block, args)? };
    gpu.synchronize_decode()
}

/// Decodes the BYTE_ARRAY columns of `columns` (Utf8, Binary and their Large forms) from the
/// chunks of a device load: sizes first, offsets from their sum, then the characters written in
/// place.
pub fn decode_bytes_columns(pass: &Pass<'_>) -> Result<Vec<DeviceColumn>> {
    let t_setup = std::time::Instant::now();
    let Pass {
        chunks,
        tables,
        path,
        fields,
        rows_of,
        ..
    } = *pass;
    use crate::decode::gpu::kernels::{BytesColumn, DECODE_BYTES, DECODE_FIXED_ERRORS};
    use crate::decode::gpu_plan::Conversion;
    let gpu = Arc::clone(chunks.buffer().gpu());
    let mut page_jobs: Vec<PageJob> = Vec::new();
    let mut page_names: Vec<PageName> = Vec::new();
    let mut cols: Vec<BytesColumn> = Vec::new();
    struct Out {
        field: usize,
        row_group: usize,
        path: String,
        rows: usize,
        large: bool,
        utf8: bool,
        lengths: DeviceBuffer,
        validity: Option<DeviceBuffer>,
        host_pages: usize,
    }
    let mut outs: Vec<Out> = Vec::new();
    // dictionaries: (data address, bytes, entries), their entry tables, their names
    let mut dicts: Vec<(u64, u64, i32)> = Vec::new();
    let mut dict_tables: Vec<DeviceBuffer> = Vec::new();
    let mut dict_names: Vec<PageName> = Vec::new();
    let Selected {
        chunks: picked,
        counters,
        uploads,
    } = pass.select(|g| g.conversion == Conversion::Bytes)?;
    for (ci, col, (page_data, host_pages)) in picked {
        let c = &chunks.chunks()[ci];
        let bad = |reason: String| pass.bad_chunk(ci, reason);
        let table = &tables[ci];
        let rows = rows_of(c.row_group);
        let lengths = zeroed(&gpu, rows * 8)?;
        let validity = validity_words(&gpu, rows, col.max_def_level > 0)?;
        let mut job = BytesColumn {
            lengths: lengths.device_ptr(),
            out_valid: validity.as_ref().map_or(0, |v| v.device_ptr()),
            null_count: counters.device_ptr() + 8 * cols.len() as u64,
            ..BytesColumn::default()
        };
        let (row, dict) = data_page_jobs(
            c,
            table,
            &page_data,
            col.max_def_level,
            cols.len(),
            &mut page_jobs,
            &mut page_names,
        );
        if let Some((k, ptr, len, entries)) = dict {
            let entry_table = gpu.alloc((entries.max(0) as usize * 16).max(16))?;
            job.dict_entries = entry_table.device_ptr();
            job.dict_len = entries;
            dicts.push((ptr, len, entries));
            dict_tables.push(entry_table);
            dict_names.push((c.row_group, c.path.clone(), k));
        }
        if row != rows as u64 {
            return Err(bad(format!(
                "the pages hold {row} values, the row group {rows} rows"
            )));
        }
        cols.push(job);
        outs.push(Out {
            field: col.field,
            row_group: c.row_group,
            path: c.path.clone(),
            rows,
            large: col.large_offsets,
            utf8: col.utf8,
            lengths,
            validity,
            host_pages,
        });
    }
    if outs.is_empty() {
        return Ok(Vec::new());
    }
    let module = gpu.load_module("decode_bytes", DECODE_BYTES, &[])?;
    since("byte-array setup", t_setup);
    // 1. dictionary entries
    if !dicts.is_empty() {
        let d_data = upload(&gpu, &u64s(dicts.iter().map(|d| d.0)))?;
        let d_len = upload(&gpu, &u64s(dicts.iter().map(|d| d.1)))?;
        let d_cnt = upload(
            &gpu,
            &dicts
                .iter()
                .flat_map(|d| d.2.to_le_bytes())
                .collect::<Vec<u8>>(),
        )?;
        let d_out = upload(&gpu, &u64s(dict_tables.iter().map(|t| t.device_ptr())))?;
        let d_err = zeroed(&gpu, dicts.len() * 4)?;
        // SAFETY: `dict_entries(const u64*, const u64*, const int*, u64* const*, int, u32*)`:
        // the int count is passed in a 64-bit slot (little-endian, upper half ignored by the
        // ABI's 4-byte int read); one block per dictionary; each entry table holds 2 u64 per
        // entry; all buffers live until `launch64` returns.
        unsafe {
            launch64(
                &gpu,
                &module,
                "dict_entries",
                dicts.len() as u32,
                128,
                &[
                    d_data.device_ptr(),
                    d_len.device_ptr(),
                    d_cnt.device_ptr(),
                    d_out.device_ptr(),
                    dicts.len() as u64,
                    d_err.device_ptr(),
                ],
            )?
        };
        let errs = i32s_from_device(&d_err, dicts.len())?;
        page_errors(path, &errs, &dict_names, DECODE_FIXED_ERRORS)?;
    }
    // 2. sizes
    let t_sizes = std::time::Instant::now();
    let (base, total) = row_bases(&page_jobs);
    let pages_buf = upload_table(&gpu, &page_jobs, |j| j.to_bytes())?;
    let cols_buf = upload_table(&gpu, &cols, |j| j.to_bytes())?;
    let base_buf = upload(&gpu, &u64s(base))?;
    let idx = gpu.alloc((total as usize * 4).max(4))?;
    let src = gpu.alloc((total as usize * 16).max(16))?;
    let errors = zeroed(&gpu, page_jobs.len() * 4)?;
    since("sizes setup", t_sizes);
    // SAFETY: `bytes_sizes(const PageJob*, const BytesColumn*, u32*, u64*, const u64*, u32*)`;
    // one block per page; the scratch arrays hold 1 u32 and 2 u64 per row of every page (base
    // is their prefix sum); each column's lengths and validity are sized from its rows, which
    // its pages were checked to sum to; all buffers live until `launch64` returns.
    unsafe {
        launch64(
            &gpu,
            &module,
            "bytes_sizes",
            page_jobs.len() as u32,
            128,
            &[
                pages_buf.device_ptr(),
                cols_buf.device_ptr(),
                idx.device_ptr(),
                src.device_ptr(),
                base_buf.device_ptr(),
                errors.device_ptr(),
            ],
        )?
    };
    let errs = i32s_from_device(&errors, page_jobs.len())?;
    page_errors(path, &errs, &page_names, DECODE_FIXED_ERRORS)?;
    // 3. offsets on the device: span sums of every column (launched back to back, one wait,
    // one copy), a host scan of those, then the offsets of every column; character buffers
    let t_offsets = std::time::Instant::now();
    const SPAN: usize = 256 * 16; // SCAN_THREADS * SCAN_PER_THREAD in decode_bytes.cu
    let spans_of: Vec<usize> = outs.iter().map(|o| (o.rows + 1).div_ceil(SPAN)).collect();
    let span_total: usize = spans_of.iter().sum();
    let sums = gpu.alloc(span_total.max(1) * 8)?;
    let mut at_span = 0usize;
    for (o, &spans) in outs.iter().zip(&spans_of) {
        // SAFETY: `span_sums(const i64*, u64, i64*)`: `lengths` holds `rows` i64, `sums` one
        // i64 per span of SPAN rows from this column's first span on; one block per span; all
        // buffers live until the `launch64` of the offsets below waits for the stream.
        unsafe {
            launch64_nowait(
                &gpu,
                &module,
                "span_sums",
                spans as u32,
                256,
                &[
                    o.lengths.device_ptr(),
                    o.rows as u64,
                    sums.device_ptr() + 8 * at_span as u64,
                ],
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
                    "{at} bytes of strings in one row group do not fit 32-bit offsets (field {}; \
                     read it as LargeUtf8 / LargeBinary)",
                    fields[o.field].name()
                ),
            });
        }
        totals.push(at);
    }
    let bases_buf = upload(&gpu, &u64s(bases))?;
    let mut offsets64: Vec<u64> = Vec::new(); // i64 offsets of each column (device addresses)
    let mut scratch: Vec<DeviceBuffer> = Vec::new();
    let mut chars: Vec<(DeviceBuffer, usize)> = Vec::new();
    let mut final_offsets: Vec<(DeviceBuffer, usize)> = Vec::new();
    let mut at_span = 0usize;
    for ((o, &spans), &total) in outs.iter().zip(&spans_of).zip(&totals) {
        let off64 = gpu.alloc((o.rows + 1) * 8)?;
        let off32 = if o.large {
            None
        } else {
            Some(gpu.alloc((o.rows + 1) * 4)?)
        };
        // SAFETY: `write_offsets(const i64*, u64, const i64*, i64*, int*)`: `lengths` holds
        // `rows` i64, `bases` one per span from this column's first span on, `off64` rows + 1
        // i64 and `off32` (or null) rows + 1 i32; one block per span, spans cover rows + 1
        // entries; the buffers are kept (final_offsets, scratch, bases_buf) until the
        // characters' `launch64` below waits for the stream.
        unsafe {
            launch64_nowait(
                &gpu,
                &module,
                "write_offsets",
                spans as u32,
                256,
                &[
                    o.lengths.device_ptr(),
                    o.rows as u64,
                    bases_buf.device_ptr() + 8 * at_span as u64,
                    off64.device_ptr(),
                    off32.as_ref().map_or(0, |b| b.device_ptr()),
                ],
            )?
        };
        at_span += spans;
        offsets64.push(off64.device_ptr());
        match off32 {
            Some(b) => {
                final_offsets.push((b, (o.rows + 1) * 4));
                scratch.push(off64);
            }
            None => final_offsets.push((off64, (o.rows + 1) * 8)),
        }
        chars.push((gpu.alloc((total as usize).max(1))?, total as usize));
    }
    // 4. characters
    let col_offsets = upload(&gpu, &u64s(offsets64.iter().copied()))?;
    let col_chars = upload(&gpu, &u64s(chars.iter().map(|c| c.0.device_ptr())))?;
    since("offsets and character buffers", t_offsets);
    // SAFETY: `bytes_chars(const PageJob*, const u64*, const u64*, const u64*, const u64*)`; the
    // offsets of every column are the prefix sums of the lengths written by `bytes_sizes`, and
    // each character buffer holds their total, so every row's copy lands inside it; the sources
    // point into page data and dictionaries that are alive (uploads, the load's buffer).
    unsafe {
        launch64(
            &gpu,
            &module,
            "bytes_chars",
            page_jobs.len() as u32,
            256,
            &[
                pages_buf.device_ptr(),
                src.device_ptr(),
                base_buf.device_ptr(),
                col_offsets.device_ptr(),
                col_chars.device_ptr(),
            ],
        )?
    };
    drop(uploads);
    // 5. UTF-8 validation of Utf8 columns, as arrow-rs validates them: every column's check
    // launched back to back, one wait, one copy of the first bad row of each
    let mut first_bad = gpu.alloc(outs.len() * 8)?;
    first_bad.fill(0xff)?;
    let mut checked = false;
    for (k, ((o, &offs), ch)) in outs.iter().zip(&offsets64).zip(&chars).enumerate() {
        if !o.utf8 || o.rows == 0 {
            continue;
        }
        checked = true;
        // SAFETY: `utf8_check(const i64*, const u8*, u64, unsigned long long*)`; `offs` holds
        // rows + 1 offsets into `ch`, whose length is the last offset; one thread per row; the
        // result slot is this column's u64 of `first_bad`; everything lives until the
        // `synchronize` below.
        unsafe {
            launch64_nowait(
                &gpu,
                &module,
                "utf8_check",
                (o.rows as u64).div_ceil(256) as u32,
                256,
                &[
                    offs,
                    ch.0.device_ptr(),
                    o.rows as u64,
                    first_bad.device_ptr() + 8 * k as u64,
                ],
            )?
        };
    }
    if checked {
        timed("kernel utf8_check", || gpu.synchronize_decode())?;
        let bad_rows = u64s_from_device(&first_bad, outs.len())?;
        for (o, &bad) in outs.iter().zip(&bad_rows) {
            if o.utf8 && o.rows > 0 && bad != u64::MAX {
                return Err(Error::Decode {
                    path: path.to_path_buf(),
                    row_group: Some(o.row_group),
                    column: Some(o.path.clone()),
                    reason: format!(
                        "row {bad} of the row group is not valid UTF-8 (the column is Utf8; \
                         read it as Binary to keep the bytes)"
                    ),
                });
            }
        }
    }
    drop(scratch);
    let null_counts = u64s_from_device(&counters, outs.len())?;
    let mut result = Vec::with_capacity(outs.len());
    for ((o, offs), ch) in outs.into_iter().zip(final_offsets).zip(chars) {
        result.push(DeviceColumn {
            field: o.field,
            row_group: o.row_group,
            data_type: fields[o.field].data_type().clone(),
            len: o.rows,
            null_count: null_counts[result.len()] as usize,
            buffers: vec![offs, ch],
            validity: o.validity,
            host_decompressed_pages: o.host_pages,
        });
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snappy_fragments_follow_the_split_table() {
        const F: u64 = 65536;
        let m = u64::MAX;
        // every fragment found
        assert_eq!(
            snappy_fragments_of(&[3, 100, 250], 400, 2 * F + 10),
            Some(vec![(3, 97, 0, F), (100, 150, F, F), (250, 150, 2 * F, 10)])
        );
        // no element starts at fragment 1: it joins fragment 0
        assert_eq!(
            snappy_fragments_of(&[3, m, 250], 400, 3 * F),
            Some(vec![(3, 247, 0, 2 * F), (250, 150, 2 * F, F)])
        );
        // unusable tables: the page decodes whole
        assert_eq!(snappy_fragments_of(&[m, 100], 400, 2 * F), None);
        assert_eq!(snappy_fragments_of(&[3, 500], 400, 2 * F), None);
        assert_eq!(snappy_fragments_of(&[100, 100], 400, 2 * F), None);
        assert_eq!(snappy_fragments_of(&[100, 50], 400, 2 * F), None);
    }

    #[test]
    fn snappy_goes_to_the_host_only_when_the_kernel_would_wait_on_a_large_page() {
        let auto = SnappyPlacement::Auto;
        // a 100k-row file: two 800 KB dictionary pages, 2 MB in all
        assert!(snappy_on_host(auto, 2_000_000, 800_000, 16));
        // 24 row groups of lineitem: 1.2 GB in pages of at most 1 MB
        assert!(!snappy_on_host(auto, 1_200_000_000, 1_048_576, 16));
        // 200 MB in 64 KiB pages: the device
        assert!(!snappy_on_host(auto, 200_000_000, 64 << 10, 16));
        // the overrides
        assert!(!snappy_on_host(
            SnappyPlacement::Device,
            2_000_000,
            800_000,
            16
        ));
        assert!(snappy_on_host(SnappyPlacement::Host, 1 << 30, 1 << 20, 16));
        assert_eq!(
            SnappyPlacement::parse(" Device "),
            Ok(SnappyPlacement::Device)
        );
        assert!(SnappyPlacement::parse("gzip").is_err());
    }

    #[test]
    fn stages_are_summed_in_first_seen_order_only_while_profiling() {
        assert_eq!(timed("off", || 7), 7);
        assert!(profile_end().is_empty());
        profile_begin();
        timed("a", || {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        timed("b", || ());
        timed("a", || {
            std::thread::sleep(std::time::Duration::from_millis(2))
        });
        let p = profile_end();
        let names: Vec<&str> = p.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(p[0].1 >= std::time::Duration::from_millis(4));
        timed("after", || ());
        assert!(profile_end().is_empty());
    }
}
