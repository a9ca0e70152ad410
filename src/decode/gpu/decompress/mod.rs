//! Compressed pages decompressed on the device, by one driver for every device codec: our
//! SNAPPY kernels ([`snappy`]), our GZIP inflate kernel ([`inflate`]) and nvCOMP's batched
//! ZSTD, LZ4_RAW and LZ4 ([`nvcomp`]).
//!
//! [`decompress_on_device`] does what they share, once: the output laid out and a job per
//! page's compressed values ([`device_jobs`]); per Parquet codec, the work split between the
//! device and the host's cores (the largest pages to the host, a share of the bytes:
//! [`beside`]); the codec's pre-checks and its launch, with the host's part run beside it;
//! pages the device did not decompress exactly refused (their chunks decompressed again on
//! the host) or named in an error (file, row group, column, page). A codec supplies only what
//! differs ([`DeviceCodec`]): its launch over a batch of streams, what its per-stream status
//! means ([`OnFailure`]), whether the host takes a share, and any pre-check (the Hadoop LZ4
//! frames and the LZ4 block check).

mod beside;
mod inflate;
mod nvcomp;
mod snappy;

use std::sync::Arc;

use self::beside::Beside;
pub(crate) use self::inflate::InflateKernel;
pub(crate) use self::nvcomp::{nvcomp_codec, nvcomp_takes, NvcompBatched};
pub use self::snappy::{segments_of, snappy_fragments_of, SnappyPlacement};
pub(crate) use self::snappy::{snappy_on_host, SnappyKernel};
use super::kernels::{describe_errors, DecompressJob, PageInfo};
use super::launch::{i32s_from_device, upload_table, zeroed, Const, Kernel, Mut};
use super::report::PageLocations;
use super::{DeviceChunks, PageCounts};
use crate::device::nvrtc::Module;
use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};
use crate::plan::codec_name;

/// A device decompressor, as [`decompress_on_device`] drives it: what differs between our
/// kernels and nvCOMP's call. An implementation must decompress each stream it is given into
/// exactly the stream's `dst_len` bytes at its `dst`, write nothing outside them, and report
/// every stream it did not so decompress (a nonzero status), never a silent wrong value.
pub(crate) trait DeviceCodec {
    /// The pages of a chunk the device decompressed (`n` of them), counted by place.
    fn counts(&self, n: usize) -> PageCounts;

    /// What a stream the device did not decompress exactly means.
    fn on_failure(&self) -> OnFailure;

    /// Whether the host's cores take the largest pages beside the device (a share of the
    /// bytes, [`beside::host_share`]): the name of their part in the profile; `None` where the
    /// device takes every page (in their order, not the largest first).
    fn beside(&self) -> Option<&'static str>;

    /// The streams to decompress for the jobs `device_js` of `jobs` (of Parquet `codec`), each
    /// with its job: by default each job whole. A codec that checks its pages first (or finds
    /// their blocks) calls `refuse(job)` for a page it leaves to the host (with its chunk).
    fn streams(
        &self,
        _gpu: &Arc<Gpu>,
        _codec: parquet::basic::Compression,
        jobs: &[DecompressJob],
        device_js: &[usize],
        _refuse: &mut dyn FnMut(usize),
    ) -> Result<Vec<(usize, DecompressJob)>> {
        Ok(device_js.iter().map(|&j| (j, jobs[j])).collect())
    }

    /// Decompresses `streams` (of Parquet `codec`) on the device and waits: per stream its
    /// status, 0 where it came out exactly its size. `failed(k, bits)` is the error naming
    /// stream `k`'s page, for a codec that stops early ([`OnFailure::Error`]).
    ///
    /// Every stream's source lies in the load's buffer (page data inside its chunk, checked by
    /// the page-header stage) and its destination is its page's own span of the output, sized
    /// from the page's uncompressed size, none of them a page the host writes beside it; all
    /// outlive the call.
    fn launch(
        &self,
        gpu: &Arc<Gpu>,
        codec: parquet::basic::Compression,
        streams: &[DecompressJob],
        failed: &dyn Fn(usize, u32) -> Error,
    ) -> Result<Vec<u32>>;
}

/// What a stream a [`DeviceCodec`] did not decompress exactly (a nonzero status) means.
#[derive(Debug, Clone, Copy)]
pub(crate) enum OnFailure {
    /// Its chunk is decompressed again on the host, which reads what the device does not (a
    /// framing it lacks) or names what is wrong with the page.
    Host,
    /// An error naming the page and what its status bits mean (by this table).
    Error(&'static [(u32, &'static str)]),
}

/// Decompresses the pages of the chunks `cis` (Parquet codec `codecs[k]` for `cis[k]`) on the
/// device by `codec`: one launch per Parquet codec (whatever its level), the host's cores
/// taking a `host_share` percent of the bytes (the largest pages) beside it where the codec
/// shares. v2 levels are copied as stored and pages stored uncompressed are used in place
/// ([`device_jobs`]). The output buffer is pushed to `uploads`. Per chunk (indexed like `cis`):
/// its pages' (address, length) and how many each side decompressed, or `None` where a page of
/// it was refused (the caller decompresses that chunk on the host); a page the codec fails
/// ([`OnFailure::Error`]) is an error naming it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn decompress_on_device(
    codec: &dyn DeviceCodec,
    chunks: &DeviceChunks,
    cis: &[usize],
    codecs: &[parquet::basic::Compression],
    tables: &[Vec<PageInfo>],
    host_share: Option<u32>,
    fail: &dyn Fn(usize, String) -> Error,
    uploads: &mut Vec<DeviceBuffer>,
) -> Result<Vec<Option<PageLocations>>> {
    let gpu = Arc::clone(chunks.buffer().gpu());
    let DecompressJobs {
        out,
        jobs,
        job_pages,
        locations,
    } = device_jobs(chunks, cis, tables, fail)?;
    let codec_of_chunk: std::collections::HashMap<usize, parquet::basic::Compression> =
        cis.iter().copied().zip(codecs.iter().copied()).collect();
    let mut side = Beside::new(&gpu, chunks.buffer(), &out, &jobs, &job_pages);
    // the error naming job j's page, whose status was `bits`
    let page_failed = |j: usize, bits: u32, table: &[(u32, &str)]| {
        let (ci, pi) = job_pages[j];
        fail(
            ci,
            format!(
                "page {pi} (decompressed on the GPU): {}",
                describe_errors(bits, table)
            ),
        )
    };
    let table = match codec.on_failure() {
        OnFailure::Error(table) => table,
        OnFailure::Host => &[],
    };
    // one launch per Parquet codec, whatever its level (LZ4 and LZ4_RAW both go to nvCOMP's
    // LZ4, framed differently, and the host decompresses each its own way beside it)
    let mut kinds: Vec<parquet::basic::Compression> = codecs.to_vec();
    kinds.sort_by_key(|&c| codec_name(c));
    kinds.dedup_by_key(|c| codec_name(*c));
    for parquet_codec in kinds {
        let name = codec_name(parquet_codec);
        let mine: Vec<usize> = (0..jobs.len())
            .filter(|&j| {
                let c = codec_of_chunk.get(&job_pages[j].0);
                c.is_some_and(|&c| codec_name(c) == name)
            })
            .collect();
        if mine.is_empty() {
            continue;
        }
        // largest first, for both sides, where the host shares
        let (host_js, device_js) = match codec.beside() {
            Some(_) => side.split(mine, host_share),
            None => (Vec::new(), mine),
        };
        let mut streams = codec.streams(&gpu, parquet_codec, &jobs, &device_js, &mut |j| {
            side.refuse(j)
        })?;
        // a chunk with a page refused goes to the host whole: its other pages need not go
        streams.retain(|s| !side.is_refused(s.0));
        let some: Vec<DecompressJob> = streams.iter().map(|s| s.1).collect();
        let failed = |k: usize, bits: u32| page_failed(streams[k].0, bits, table);
        let launch = || codec.launch(&gpu, parquet_codec, &some, &failed);
        let statuses = match codec.beside() {
            Some(what) => side.run(parquet_codec, &host_js, what, launch)?,
            None => launch()?,
        };
        for (&(j, _), status) in streams.iter().zip(statuses) {
            if status != 0 {
                match codec.on_failure() {
                    OnFailure::Host => side.refuse(j),
                    OnFailure::Error(table) => return Err(page_failed(j, status, table)),
                }
            }
        }
    }
    let located = side.located(cis, locations, |n| codec.counts(n));
    uploads.push(out);
    Ok(located)
}

/// One chunk's pages' (address, length) of decompressed data, and how many of its pages have
/// a decompression job.
pub(crate) type LocatedChunk = (Vec<(u64, u64)>, usize);

/// The decompression work of some chunks: the output buffer, a job per compressed stream, the
/// (chunk, page) of each job, and per chunk each page's (address, length) of decompressed data
/// with its count of jobs.
struct DecompressJobs {
    out: DeviceBuffer,
    jobs: Vec<DecompressJob>,
    job_pages: Vec<(usize, usize)>,
    locations: Vec<LocatedChunk>,
}

/// Lays out the output of the compressed pages of the chunks `cis` (each page that needs
/// decompression gets its uncompressed size), copies v2 levels there as stored, and makes a job
/// per page's compressed values.
fn device_jobs(
    chunks: &DeviceChunks,
    cis: &[usize],
    tables: &[Vec<PageInfo>],
    fail: &dyn Fn(usize, String) -> Error,
) -> Result<DecompressJobs> {
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
    let mut jobs: Vec<DecompressJob> = Vec::new();
    let mut job_pages: Vec<(usize, usize)> = Vec::new();
    let mut all_locs = Vec::with_capacity(cis.len());
    for (k, &ci) in cis.iter().enumerate() {
        let c = &chunks.chunks()[ci];
        let jobs_before = jobs.len();
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
                jobs.push(DecompressJob {
                    src: buf.device_ptr() + src + levels,
                    src_len,
                    dst: out.device_ptr() + at + levels,
                    dst_len,
                });
                job_pages.push((ci, pi));
            }
            locs.push((out.device_ptr() + at, p.uncompressed_size as u64));
        }
        all_locs.push((locs, jobs.len() - jobs_before));
    }
    Ok(DecompressJobs {
        out,
        jobs,
        job_pages,
        locations: all_locs,
    })
}

/// A decompression kernel over a table of streams: (jobs, num_jobs, errors).
pub(crate) type JobsKernel = Kernel<(Const<DecompressJob>, i32, Mut<u32>)>;

/// Runs `kernel` over `jobs` (the table uploaded, an error word a job zeroed) in `grid` blocks
/// of `threads`, and waits: per job its error bits.
///
/// # Safety
/// The launch shape must be the kernel's (each job read and written by the threads the kernel
/// gives it, none past `num_jobs`), and every job's source and destination live, as large as
/// the job says, and written by nothing else until this returns.
pub(crate) unsafe fn job_errors(
    gpu: &Arc<Gpu>,
    module: &Module,
    kernel: &JobsKernel,
    jobs: &[DecompressJob],
    grid: u32,
    threads: u32,
) -> Result<Vec<i32>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let table = upload_table(gpu, jobs)?;
    let errors = zeroed(gpu, jobs.len() * 4)?;
    // SAFETY: the table and the error words live until the waited launch returns; the jobs'
    // memory is the caller's contract.
    unsafe {
        kernel.launch(
            gpu,
            module,
            grid,
            threads,
            (
                Const::at(table.device_ptr()),
                jobs.len() as i32,
                Mut::at(errors.device_ptr()),
            ),
        )?
    };
    i32s_from_device(&errors, jobs.len())
}
