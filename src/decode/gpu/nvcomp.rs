//! Pages decompressed on the device by nvCOMP ([`crate::device::nvcomp`]), where it is
//! installed: ZSTD, LZ4_RAW and Hadoop-framed LZ4 (its frames found by our
//! `lz4_hadoop_blocks` kernel, each an LZ4 block for nvCOMP), one batched call per codec over
//! the pages of a decoder's pass, while the host's cores decompress the largest of those pages beside it (a share of
//! the bytes, [`beside`](super::beside)). SNAPPY stays with our kernel: through nvCOMP it
//! measured slower on the H200 (benches/history/2026-12-02.md, afternoon: SNAPPY lineitem
//! 38.9 ms against 33.7).
//!
//! The pages go to nvCOMP largest first, as libcudf sends them, so that the large ones do not
//! start last. LZ4 blocks are checked first by our `lz4_check` kernel: nvCOMP 5.3 decompresses
//! some malformed blocks (a copy reaching before the output's start) without an error.

use std::sync::Arc;

use super::beside::Beside;
use super::kernels::{
    PageInfo, SnappyJob, LZ4_CHECK, LZ4_HADOOP_BLOCKS, SNAPPY_MODULE, SNAPPY_THREADS,
};
use super::launch::{
    i32s_from_device, u64s, upload, upload_table, zeroed, Const, Mut,
};
use super::report::PageLocations;
use super::snappy::{device_jobs, job_errors, Jobs};
use super::{DeviceChunks, PageCounts};
use crate::device::nvcomp::{Nvcomp, NvcompCodec};
use crate::plan::codec_name;
use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};

/// The nvCOMP codec cuparquet gives a Parquet codec's pages to: ZSTD, and LZ4 for LZ4_RAW and
/// for the Hadoop-framed LZ4 (its frames found on the device, [`hadoop_blocks`]). (Not GZIP:
/// nvCOMP 5.3's decompressor wrote past a page's output where the page inflated past its
/// header's claim — an illegal address on the H200 for a mutated file the host path refuses by
/// its trailer (benches/history/2026-12-03.md, afternoon) — so GZIP pages go to our own
/// bounded kernel, [`super::inflate`].)
pub(super) fn nvcomp_codec(codec: parquet::basic::Compression) -> Option<NvcompCodec> {
    use parquet::basic::Compression as C;
    match codec {
        C::ZSTD(_) => Some(NvcompCodec::Zstd),
        C::LZ4_RAW | C::LZ4 => Some(NvcompCodec::Lz4),
        _ => None,
    }
}

/// Whether nvCOMP is installed here and decompresses `codec` (its pages then decompress on the
/// device, like our SNAPPY kernel's).
pub(crate) fn nvcomp_takes(codec: parquet::basic::Compression) -> bool {
    match crate::device::nvcomp::nvcomp() {
        Ok(Some(n)) => nvcomp_codec(codec).is_some_and(|c| n.supports(c)),
        _ => false,
    }
}

/// Decompresses the pages of the chunks `cis` (codec `codecs[k]` for `cis[k]`) with nvCOMP, and
/// a `host_share` percent of each codec's bytes (the largest pages) on the host's cores at the
/// same time. v2 levels are copied as stored and pages stored uncompressed are used in place,
/// as for our SNAPPY kernel ([`device_jobs`]). The output buffer is pushed to `uploads`. Per
/// chunk (indexed like `cis`): its pages' (address, length) and how many nvCOMP and the host
/// decompressed, or `None` where one of its pages failed or came out other than the page
/// header's size: the caller decompresses that chunk again on the host, which either reads
/// what nvCOMP does not (a framing it lacks) or names what is wrong with the page.
#[allow(clippy::too_many_arguments)]
pub(super) fn nvcomp_on_device(
    nv: &Nvcomp,
    chunks: &DeviceChunks,
    cis: &[usize],
    codecs: &[(NvcompCodec, parquet::basic::Compression)],
    tables: &[Vec<PageInfo>],
    host_share_tuned: Option<u32>,
    fail: &dyn Fn(usize, String) -> Error,
    uploads: &mut Vec<DeviceBuffer>,
) -> Result<Vec<Option<PageLocations>>> {
    let gpu = Arc::clone(chunks.buffer().gpu());
    let Jobs {
        out,
        jobs,
        job_pages,
        locations,
    } = device_jobs(chunks, cis, tables, fail)?;
    let codec_of_chunk: std::collections::HashMap<usize, (NvcompCodec, _)> =
        cis.iter().copied().zip(codecs.iter().copied()).collect();
    let mut side = Beside::new(&gpu, chunks.buffer(), &out, &jobs, &job_pages);
    // one nvCOMP call per parquet codec, whatever its level (LZ4 and LZ4_RAW both go to
    // nvCOMP's LZ4, framed differently, and the host decompresses each its own way beside it)
    let mut kinds: Vec<(NvcompCodec, parquet::basic::Compression)> = codecs.to_vec();
    kinds.sort_by_key(|c| codec_name(c.1));
    kinds.dedup_by_key(|c| codec_name(c.1));
    for (codec, parquet_codec) in kinds {
        let name = codec_name(parquet_codec);
        let mine: Vec<usize> = (0..jobs.len())
            .filter(|&j| {
                let c = codec_of_chunk.get(&job_pages[j].0);
                c.is_some_and(|c| codec_name(c.1) == name)
            })
            .collect();
        if mine.is_empty() {
            continue;
        }
        // largest first, for both sides
        let (host_js, device_js) = side.split(mine, host_share_tuned);
        // what nvCOMP decompresses: (the page's job, a stream of it)
        let mut units: Vec<(usize, SnappyJob)> = Vec::with_capacity(device_js.len());
        if parquet_codec == parquet::basic::Compression::LZ4 {
            // Hadoop frames: each page's blocks, found on the device; a page of another
            // framing goes (with its chunk) to the host's decoder, which reads every framing
            let pages: Vec<SnappyJob> = device_js.iter().map(|&j| jobs[j]).collect();
            let (blocks, of_page) =
                super::profile::timed("LZ4 Hadoop frames", || hadoop_blocks(&gpu, &pages))?;
            for (&j, range) in device_js.iter().zip(of_page) {
                match range {
                    Some(r) => units.extend(blocks[r].iter().map(|&b| (j, b))),
                    None => side.refuse(j),
                }
            }
        } else {
            units.extend(device_js.iter().map(|&j| (j, jobs[j])));
        }
        if codec == NvcompCodec::Lz4 {
            // nvCOMP 5.3 decompresses some malformed LZ4 blocks without an error: only the
            // blocks `lz4_check` passes go to it, a chunk with another to the host's decoder
            let some: Vec<SnappyJob> = units.iter().map(|u| u.1).collect();
            let ok = super::profile::timed("LZ4 block checks", || lz4_checked(&gpu, &some))?;
            units = units
                .into_iter()
                .zip(ok)
                .filter_map(|(u, ok)| {
                    if !ok {
                        side.refuse(u.0);
                    }
                    ok.then_some(u)
                })
                .collect();
        }
        // a chunk with a page refused goes to the host whole: its other pages need not go
        units.retain(|u| !side.is_refused(u.0));
        let spans: Vec<(u64, u64, u64, u64)> = units
            .iter()
            .map(|(_, b)| (b.src, b.src_len, b.dst, b.dst_len))
            .collect();
        let results = side.run(
            parquet_codec,
            &host_js,
            "host decompression beside nvCOMP",
            || {
                super::profile::timed("nvCOMP call", || {
                    // SAFETY: every source lies in the load's buffer (page data inside its
                    // chunk, checked by the page-header pass) and every destination is the
                    // page's own span of `out`, sized from its uncompressed size
                    // (`device_jobs`), none of them a page the host thread writes; all outlive
                    // the call, which waits.
                    unsafe { nv.decompress(&gpu, codec, &spans) }
                })
            },
        )?;
        for ((j, b), (status, written)) in units.iter().zip(results) {
            if status != 0 || written != b.dst_len {
                side.refuse(*j);
            }
        }
    }
    let located = side.located(cis, locations, |n| PageCounts {
        nvcomp: n,
        ..PageCounts::default()
    });
    uploads.push(out);
    Ok(located)
}

/// Whether each LZ4 block of `jobs` is well formed for its sizes (`lz4_check`, one block of
/// threads per LZ4 block, parsed in parallel as SNAPPY streams are): literals and matches
/// within the input and the uncompressed size, every offset within the output written before
/// it, exactly `dst_len` bytes produced.
fn lz4_checked(gpu: &Arc<Gpu>, jobs: &[SnappyJob]) -> Result<Vec<bool>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let module = SNAPPY_MODULE.load(gpu)?;
    // SAFETY: one block per job, each reading only its job's `src_len` source bytes (page
    // data inside the load's buffer, checked by the page-header pass) and writing only its own
    // error word.
    let errors = unsafe {
        job_errors(gpu, &module, &LZ4_CHECK, jobs, jobs.len() as u32, SNAPPY_THREADS)
    }?;
    Ok(errors.into_iter().map(|e| e == 0).collect())
}

/// Which of a list of blocks are one page's (`None`: the page is left to the host).
type PageBlocks = Option<std::ops::Range<usize>>;

/// The LZ4 blocks of Hadoop-framed LZ4 pages (`lz4_hadoop_blocks`: one thread per page walks
/// its frames as arrow-rs does, a counting launch and then a writing one): the blocks, and per
/// page the range of them that is its own, or `None` where the page is left to the host (not
/// that framing, nor a plain LZ4 block arrow-rs would read instead).
fn hadoop_blocks(gpu: &Arc<Gpu>, pages: &[SnappyJob]) -> Result<(Vec<SnappyJob>, Vec<PageBlocks>)> {
    use super::kernels::CStruct;
    if pages.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    const THREADS: u32 = 128;
    let n = pages.len();
    let grid = n.div_ceil(THREADS as usize) as u32;
    let module = SNAPPY_MODULE.load(gpu)?;
    let table = upload_table(gpu, pages)?;
    let counts = zeroed(gpu, n * 4)?;
    // the launch: counting (`bases` and `out` 0: null) or writing
    let launch = |bases: u64, out: u64| {
        // SAFETY: one thread per entry of `table` (n of them), each reading only its page's
        // `src_len` bytes (page data inside the load's buffer, checked by the page-header
        // pass). Counting (`out` null), each writes only its own count. Writing, each page
        // whose count c was >= 0 writes exactly its c blocks from `bases[i]` (the walk is the
        // same, so the same c), inside `out`'s entries, sized by the counts' sum; the other
        // pages write nothing. All live until the waited launch returns.
        unsafe {
            LZ4_HADOOP_BLOCKS.launch(
                gpu,
                &module,
                grid,
                THREADS,
                (
                    Const::at(table.device_ptr()),
                    n as i32,
                    Const::at(bases),
                    Mut::at(out),
                    Mut::at(counts.device_ptr()),
                ),
            )
        }
    };
    launch(0, 0)?;
    let mut base = Vec::with_capacity(n);
    let mut ranges = Vec::with_capacity(n);
    let mut total = 0usize;
    for c in i32s_from_device(&counts, n)? {
        base.push(total as u64);
        if c >= 0 {
            ranges.push(Some(total..total + c as usize));
            total += c as usize;
        } else {
            ranges.push(None);
        }
    }
    if total == 0 {
        return Ok((Vec::new(), ranges));
    }
    let bases = upload(gpu, &u64s(base))?;
    let out = gpu.alloc(total * SnappyJob::SIZE)?;
    launch(bases.device_ptr(), out.device_ptr())?;
    let bytes = out.copy_to_host(0..total * SnappyJob::SIZE)?;
    let blocks = bytes
        .chunks_exact(SnappyJob::SIZE)
        .map(SnappyJob::from_bytes)
        .collect();
    Ok((blocks, ranges))
}
