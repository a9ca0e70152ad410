//! Pages decompressed on the device by nvCOMP ([`crate::device::nvcomp`]), where it is
//! installed: ZSTD, LZ4_RAW and Hadoop-framed LZ4 (its frames found by our
//! `lz4_hadoop_blocks` kernel, each an LZ4 block for nvCOMP), one batched call per codec over
//! the pages of a decoder's wave, while the host's cores decompress the largest of those pages
//! beside it (a share of the bytes, [`beside`](super::beside)). SNAPPY stays with our kernel: through nvCOMP it
//! measured slower on the H200 (benches/history/2026-12-02.md, afternoon: SNAPPY lineitem
//! 38.9 ms against 33.7).
//!
//! The pages go to nvCOMP largest first, as libcudf sends them, so that the large ones do not
//! start last. LZ4 blocks are checked first by our `lz4_check` kernel: nvCOMP 5.3 decompresses
//! some malformed blocks (a copy reaching before the output's start) without an error.

use std::sync::Arc;

use super::{job_errors, DeviceCodec, OnFailure};
use crate::decode::gpu::kernels::{
    CStruct, DecompressJob, DECOMPRESS_MODULE, LZ4_CHECK, LZ4_HADOOP_BLOCKS, SNAPPY_THREADS,
};
use crate::decode::gpu::launch::{
    i32s_from_device, u64s, upload, upload_table, zeroed, Const, Mut,
};
use crate::decode::gpu::profile::timed;
use crate::decode::gpu::PageCounts;
use crate::device::nvcomp::{Nvcomp, NvcompCodec};
use crate::device::Gpu;
use crate::error::{Error, Result};

/// The nvCOMP codec cuparquet gives a Parquet codec's pages to: ZSTD, and LZ4 for LZ4_RAW and
/// for the Hadoop-framed LZ4 (its frames found on the device, [`hadoop_blocks`]). (Not GZIP:
/// nvCOMP 5.3's decompressor wrote past a page's output where the page inflated past its
/// header's claim — an illegal address on the H200 for a mutated file the host path refuses by
/// its trailer (benches/history/2026-12-03.md, afternoon) — so GZIP pages go to our own
/// bounded kernel, [`super::inflate`].)
pub(crate) fn nvcomp_codec(codec: parquet::basic::Compression) -> Option<NvcompCodec> {
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

/// nvCOMP's batched decompressors, as the [`DeviceCodec`] of
/// [`decompress_on_device`](super::decompress_on_device): one call per Parquet codec, the pages
/// largest first, the host's cores taking a `host_share` percent of the bytes (the largest
/// pages) beside it. Hadoop-framed LZ4 pages are cut into their blocks first, and LZ4 blocks
/// checked by our kernel; a page of another framing, a block the check refuses, or a page that
/// fails or comes out other than the page header's size sends its chunk to the host, which
/// either reads what nvCOMP does not (a framing it lacks) or names what is wrong with the page.
#[derive(Debug)]
pub(crate) struct NvcompBatched<'a> {
    /// The library, installed here.
    pub(crate) nv: &'a Nvcomp,
}

impl DeviceCodec for NvcompBatched<'_> {
    fn counts(&self, n: usize) -> PageCounts {
        PageCounts {
            nvcomp: n,
            ..PageCounts::default()
        }
    }

    fn on_failure(&self) -> OnFailure {
        OnFailure::Host
    }

    fn beside(&self) -> Option<&'static str> {
        Some("host decompression beside nvCOMP")
    }

    /// What nvCOMP decompresses: (the page's job, a stream of it).
    fn streams(
        &self,
        gpu: &Arc<Gpu>,
        codec: parquet::basic::Compression,
        jobs: &[DecompressJob],
        device_js: &[usize],
        refuse: &mut dyn FnMut(usize),
    ) -> Result<Vec<(usize, DecompressJob)>> {
        let mut units: Vec<(usize, DecompressJob)> = Vec::with_capacity(device_js.len());
        if codec == parquet::basic::Compression::LZ4 {
            // Hadoop frames: each page's blocks, found on the device; a page of another
            // framing goes (with its chunk) to the host's decoder, which reads every framing
            let pages: Vec<DecompressJob> = device_js.iter().map(|&j| jobs[j]).collect();
            let (blocks, of_page) = timed("LZ4 Hadoop frames", || hadoop_blocks(gpu, &pages))?;
            for (&j, range) in device_js.iter().zip(of_page) {
                match range {
                    Some(r) => units.extend(blocks[r].iter().map(|&b| (j, b))),
                    None => refuse(j),
                }
            }
        } else {
            units.extend(device_js.iter().map(|&j| (j, jobs[j])));
        }
        if nvcomp_codec(codec) == Some(NvcompCodec::Lz4) {
            // nvCOMP 5.3 decompresses some malformed LZ4 blocks without an error: only the
            // blocks `lz4_check` passes go to it, a chunk with another to the host's decoder
            let some: Vec<DecompressJob> = units.iter().map(|u| u.1).collect();
            let ok = timed("LZ4 block checks", || lz4_checked(gpu, &some))?;
            units = units
                .into_iter()
                .zip(ok)
                .filter_map(|(u, ok)| {
                    if !ok {
                        refuse(u.0);
                    }
                    ok.then_some(u)
                })
                .collect();
        }
        Ok(units)
    }

    /// One nvCOMP call over `streams`: per stream 0 where it came out exactly its size, else 1.
    fn launch(
        &self,
        gpu: &Arc<Gpu>,
        codec: parquet::basic::Compression,
        streams: &[DecompressJob],
        _failed: &dyn Fn(usize, u32) -> Error,
    ) -> Result<Vec<u32>> {
        // (every chunk given here is of a codec nvCOMP takes: `nvcomp_codec` chose it)
        let Some(nv_codec) = nvcomp_codec(codec) else {
            return Ok(vec![1; streams.len()]);
        };
        let spans: Vec<(u64, u64, u64, u64)> = streams
            .iter()
            .map(|b| (b.src, b.src_len, b.dst, b.dst_len))
            .collect();
        let results = timed("nvCOMP call", || {
            // SAFETY: every source lies in the load's buffer (page data inside its chunk,
            // checked by the page-header stage) and every destination is the page's own span
            // of the output, sized from its uncompressed size (`device_jobs`), none of them a
            // page the host thread writes; all outlive the call, which waits.
            unsafe { self.nv.decompress(gpu, nv_codec, &spans) }
        })?;
        Ok(streams
            .iter()
            .zip(results)
            .map(|(b, (status, written))| u32::from(status != 0 || written != b.dst_len))
            .collect())
    }
}

/// Whether each LZ4 block of `jobs` is well formed for its sizes (`lz4_check`, one block of
/// threads per LZ4 block, parsed in parallel as SNAPPY streams are): literals and matches
/// within the input and the uncompressed size, every offset within the output written before
/// it, exactly `dst_len` bytes produced.
fn lz4_checked(gpu: &Arc<Gpu>, jobs: &[DecompressJob]) -> Result<Vec<bool>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let module = DECOMPRESS_MODULE.load(gpu)?;
    // SAFETY: one block per job, each reading only its job's `src_len` source bytes (page
    // data inside the load's buffer, checked by the page-header stage) and writing only its
    // own error word.
    let errors = unsafe {
        job_errors(
            gpu,
            &module,
            &LZ4_CHECK,
            jobs,
            jobs.len() as u32,
            SNAPPY_THREADS,
        )
    }?;
    Ok(errors.into_iter().map(|e| e == 0).collect())
}

/// Which of a list of blocks are one page's (`None`: the page is left to the host).
type PageBlocks = Option<std::ops::Range<usize>>;

/// The LZ4 blocks of Hadoop-framed LZ4 pages (`lz4_hadoop_blocks`: one thread per page walks
/// its frames as arrow-rs does, a counting launch and then a writing one): the blocks, and per
/// page the range of them that is its own, or `None` where the page is left to the host (not
/// that framing, nor a plain LZ4 block arrow-rs would read instead).
fn hadoop_blocks(
    gpu: &Arc<Gpu>,
    pages: &[DecompressJob],
) -> Result<(Vec<DecompressJob>, Vec<PageBlocks>)> {
    if pages.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    const THREADS: u32 = 128;
    let n = pages.len();
    let grid = n.div_ceil(THREADS as usize) as u32;
    let module = DECOMPRESS_MODULE.load(gpu)?;
    let table = upload_table(gpu, pages)?;
    let counts = zeroed(gpu, n * 4)?;
    // the launch: counting (`bases` and `out` 0: null) or writing
    let launch = |bases: u64, out: u64| {
        // SAFETY: one thread per entry of `table` (n of them), each reading only its page's
        // `src_len` bytes (page data inside the load's buffer, checked by the page-header
        // stage). Counting (`out` null), each writes only its own count. Writing, each page
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
    let out = gpu.alloc(total * DecompressJob::SIZE)?;
    launch(bases.device_ptr(), out.device_ptr())?;
    let bytes = out.copy_to_host(0..total * DecompressJob::SIZE)?;
    let blocks = bytes
        .chunks_exact(DecompressJob::SIZE)
        .map(DecompressJob::from_bytes)
        .collect();
    Ok((blocks, ranges))
}
