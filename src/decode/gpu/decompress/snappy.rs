//! SNAPPY pages on the device: one block per page, or, when large pages are few, each large
//! page parsed first into 64 KiB fragments that then decode a block each; and the model that
//! sends a wave's SNAPPY pages to the host instead ([`snappy_on_host`]).

use std::sync::Arc;

use super::{job_errors, DeviceCodec, JobsKernel, OnFailure};
use crate::decode::gpu::kernels::{
    DecompressJob, DECOMPRESS_MODULE, MAX_SEGMENTS, SEG_ZONE, SNAPPY_ERRORS, SNAPPY_FRAGMENT,
    SNAPPY_FRAGMENTS, SNAPPY_JOIN, SNAPPY_PAGES, SNAPPY_SEGMENT, SNAPPY_SPLIT, SNAPPY_THREADS,
    SNAPPY_WALK, SNAPPY_WHOLE,
};
use crate::decode::gpu::launch::{
    i32s_from_device, u32s, u64s, u64s_from_device, upload, upload_table, zeroed, Const, Mut,
};
use crate::decode::gpu::PageCounts;
use crate::device::nvrtc::Module;
use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};

/// Where SNAPPY pages are decompressed on device loads. Not a setting (placing them by hand
/// measured no faster than the model, benches/RESULTS.md): [`Device`](Self::Device) is for the
/// kernel tests, to run small files through the kernel the model would send to the host.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum SnappyPlacement {
    /// By a model of both (measured on the H200, benches/RESULTS.md), per wave: the device
    /// kernel for large loads, the host's cores for small loads whose largest page would make
    /// the kernel wait. A load read in several waves keeps every wave on the kernel: the reads
    /// of the next waves occupy the cores the model counts on.
    #[default]
    Auto,
    /// Always the device kernel.
    Device,
}

impl SnappyPlacement {
    /// The placement for a wave decoded while the reads of the load's next waves run on the
    /// host's cores (a load or stream in several waves): `Auto` becomes `Device`. The model's
    /// host rate assumes idle cores; beside the readers a one-row-group first wave of the
    /// lineitem SNAPPY stream took 17–27 ms on the host's path against ~10 ms on the kernel
    /// (H200, benches/history/2026-12-03.md).
    pub(crate) fn beside_reads(self) -> Self {
        Self::Device
    }
}

/// Whether the SNAPPY pages of a wave (`total` bytes decompressed, the largest page `largest`)
/// are decompressed faster on the host's `cores` than by the device kernel, by a model of
/// both measured on the H200 machine (benches/RESULTS.md): the kernel decodes a page per
/// block at about 140 MB/s, all pages at once (so a wave takes as long as its largest page,
/// and at least total / 40 GB/s); the host decompresses about 1 GB/s per core and copies the
/// pages back and forth at about 20 GB/s. Small loads with large pages (a dictionary page of
/// a few hundred KiB is several milliseconds of one block) go to the host; large loads stay on
/// the device. [`SnappyPlacement::Device`] (the kernel tests') keeps them on the device.
pub(crate) fn snappy_on_host(
    placement: SnappyPlacement,
    total: u64,
    largest: u64,
    cores: usize,
) -> bool {
    if placement == SnappyPlacement::Device {
        return false;
    }
    let secs = |bytes: u64, rate: f64| bytes as f64 / rate;
    let device = secs(largest, 140e6).max(secs(total, 40e9));
    let host = secs(total, cores.max(1) as f64 * 1e9) + 2.0 * secs(total, 20e9);
    host < device
}

/// How `snappy_walk` and `snappy_split` cut a large page of `src_len` compressed bytes:
/// (bytes per segment, segments). Segments are SNAPPY_SEGMENT bytes or more (at most
/// MAX_SEGMENTS of them); the last one takes the rest, so each is at least that long.
pub fn segments_of(src_len: u64) -> (u64, u64) {
    let size = SNAPPY_SEGMENT.max(src_len.div_ceil(MAX_SEGMENTS));
    (size, (src_len / size).max(1))
}

/// Where a wave has more large pages than fill the device, the pages that are split anyway:
/// those of at least this many bytes out (the largest first, as many as fill the device).
const STRAGGLER: u64 = 256 << 10;

/// Rounds of walks made again where two segment walks did not meet, before such a page is
/// parsed whole.
const REWALKS: usize = 3;

/// The segments to walk again, each with its start: per page (segments `seg_base[p]` ..
/// `seg_base[p + 1]`, `src_lens[p]` input bytes), every segment whose walk did not meet the
/// one before (`meets[2g]` all ones), from the first position the walk before reached in it
/// (`firsts[2(g - 1)]`) — but not two neighbours in one round (the later one's start would be
/// taken from a walk about to change), nor where the walk before stopped past the input (a
/// damaged stream, reported by the split).
///
/// Any position of walk g - 1's chain will do, true or not: walk 0 is the true chain, and when
/// every boundary has a meeting point on the chain of the walk before it (a position both walks
/// share, or the start of a walk made from the walk before's position), each walk is true from
/// its meeting point on, by induction, whatever the walks were before they met.
pub(super) fn rewalks(
    seg_base: &[u32],
    src_lens: &[u64],
    meets: &[u64],
    firsts: &[u64],
) -> Vec<(u32, u64)> {
    let mut out: Vec<(u32, u64)> = Vec::new();
    for (p, w) in seg_base.windows(2).enumerate() {
        for g in w[0] + 1..w[1] {
            let at = firsts[2 * (g as usize - 1)];
            let after_chosen = out.last().is_some_and(|&(h, _)| h + 1 == g);
            if meets[2 * g as usize] == u64::MAX && at < src_lens[p] && !after_chosen {
                out.push((g, at));
            }
        }
    }
    out
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

/// Our SNAPPY kernels, as the [`DeviceCodec`] of [`decompress_on_device`]: large pages (when
/// few) split into 64 KiB fragments first, then fragments and whole pages one block each. No
/// host share (the kernel decompresses a page about five times faster than nvCOMP; with the host
/// beside it the SNAPPY lineitem loads measured slower at every share, 10 % to 40 %:
/// benches/history/2026-12-03.md, afternoon); a page it fails is an error naming it.
///
/// [`decompress_on_device`]: super::decompress_on_device
#[derive(Debug, Clone, Copy)]
pub(crate) struct SnappyKernel;

impl DeviceCodec for SnappyKernel {
    fn counts(&self, n: usize) -> PageCounts {
        PageCounts {
            kernel: n,
            ..PageCounts::default()
        }
    }

    fn on_failure(&self) -> OnFailure {
        OnFailure::Error(SNAPPY_ERRORS)
    }

    fn beside(&self) -> Option<&'static str> {
        None
    }

    fn launch(
        &self,
        gpu: &Arc<Gpu>,
        _codec: parquet::basic::Compression,
        jobs: &[DecompressJob],
        failed: &dyn Fn(usize, u32) -> Error,
    ) -> Result<Vec<u32>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let module = DECOMPRESS_MODULE.load(gpu)?;
        let run = Run {
            gpu,
            module: &module,
            jobs,
            failed,
        };
        // large pages: each is parsed first (a block per 16 KiB segment) to find its 64 KiB
        // fragments, which then decode in parallel (a page otherwise waits on one block) —
        // all of them when they are too few to fill the device, else only the largest (the
        // stragglers a wave would wait on). Splitting every large page of a wave that has many
        // costs more than it saves. Measured on the H200 (2026-12-03, 24-row-group lineitem
        // SNAPPY file): its load 34.6-35.5 ms by this rule without the stragglers, 45.2-48.4
        // ms with every large page split; under a 2 GiB budget (waves of 4 row groups) 54.5-
        // 55.0 ms without the stragglers, 44.6-46.1 ms with the pages of 256 KiB or more
        // split (47.0-47.9 ms from 512 KiB), 37.7-39.4 ms once every unmet boundary was
        // walked again in one round.
        let mut large: Vec<usize> = (0..jobs.len())
            .filter(|&j| jobs[j].dst_len >= 2 * SNAPPY_FRAGMENT)
            .collect();
        let most = 2 * gpu.multiprocessors();
        if large.len() > most {
            large.retain(|&j| jobs[j].dst_len >= STRAGGLER);
            large.sort_by_key(|&j| std::cmp::Reverse(jobs[j].dst_len));
            large.truncate(most);
        }
        let mut is_large = vec![false; jobs.len()];
        for &j in &large {
            is_large[j] = true;
        }
        let mut whole: Vec<usize> = (0..jobs.len()).filter(|&j| !is_large[j]).collect();
        let (fragments, fragment_of) = if large.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            run.fragments(&large, &mut whole)?
        };
        if !fragments.is_empty() {
            let errs = run.launch(&SNAPPY_FRAGMENTS, &fragments)?;
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
        // per job its error bits: none for the pages decoded in fragments
        let mut status = vec![0u32; jobs.len()];
        if !whole.is_empty() {
            whole.sort_unstable();
            whole.dedup();
            let some: Vec<DecompressJob> = whole.iter().map(|&j| jobs[j]).collect();
            let errs = run.launch(&SNAPPY_PAGES, &some)?;
            for (&j, e) in whole.iter().zip(errs) {
                status[j] = e as u32;
            }
        }
        Ok(status)
    }
}

/// The launches over a wave's SNAPPY jobs, and the error naming a job's page.
struct Run<'a> {
    gpu: &'a Arc<Gpu>,
    module: &'a Module,
    jobs: &'a [DecompressJob],
    failed: &'a dyn Fn(usize, u32) -> Error,
}

impl Run<'_> {
    /// Runs `kernel` (`snappy_pages` or `snappy_fragments`) over `jobs`, one block each;
    /// their error bits.
    fn launch(&self, kernel: &JobsKernel, jobs: &[DecompressJob]) -> Result<Vec<i32>> {
        // SAFETY: one block of SNAPPY_THREADS per job; every job's source lies in the load's
        // buffer (page data inside its chunk, checked by the page-header stage; fragments
        // inside their page's) and its destination in the output, sized from the pages'
        // uncompressed sizes.
        unsafe {
            job_errors(
                self.gpu,
                self.module,
                kernel,
                jobs,
                jobs.len() as u32,
                SNAPPY_THREADS,
            )
        }
    }

    /// The fragments of the `large` jobs, found by `snappy_walk` and `snappy_split` (a block
    /// per segment of each page), and the job each belongs to; a large job whose split table
    /// is not usable joins `whole`.
    fn fragments(
        &self,
        large: &[usize],
        whole: &mut Vec<usize>,
    ) -> Result<(Vec<DecompressJob>, Vec<usize>)> {
        let (gpu, jobs) = (self.gpu, self.jobs);
        let mut fragments: Vec<DecompressJob> = Vec::new();
        let mut fragment_of: Vec<usize> = Vec::new(); // the job each fragment belongs to
        let counts: Vec<u64> = large
            .iter()
            .map(|&j| jobs[j].dst_len.div_ceil(SNAPPY_FRAGMENT))
            .collect();
        let (bases, n_splits) = counts.iter().fold((Vec::new(), 0u64), |(mut v, t), &c| {
            v.push(t);
            (v, t + c)
        });
        // the segments of each page: seg_base[p] .. seg_base[p + 1]
        let segs: Vec<(u64, u64)> = large
            .iter()
            .map(|&j| segments_of(jobs[j].src_len))
            .collect();
        let mut seg_base = vec![0u32];
        let mut seg_page = Vec::new();
        for (p, &(_, n)) in segs.iter().enumerate() {
            seg_page.extend(std::iter::repeat_n(p as u32, n as usize));
            seg_base.push(seg_page.len() as u32);
        }
        let n_segs = seg_page.len();
        let src_lens: Vec<u64> = large.iter().map(|&j| jobs[j].src_len).collect();
        let large_jobs: Vec<DecompressJob> = large.iter().map(|&j| jobs[j]).collect();
        let jobs_buf = upload_table(gpu, &large_jobs)?;
        let base_buf = upload(gpu, &u64s(bases.iter().copied()))?;
        let page_buf = upload(gpu, &u32s(seg_page.iter().copied()))?;
        let seg_base_buf = upload(gpu, &u32s(seg_base.iter().copied()))?;
        let size_buf = upload(gpu, &u32s(segs.iter().map(|&(size, _)| size as u32)))?;
        let mut starts = vec![u64::MAX; n_segs];
        let mut starts_buf = upload(gpu, &u64s(starts.iter().copied()))?;
        let mut zones = gpu.alloc(n_segs * 2 * SEG_ZONE as usize * 4)?;
        zones.fill(0xff)?;
        let firsts = zeroed(gpu, n_segs * 16)?;
        let meets = zeroed(gpu, n_segs * 16)?;
        let walk = |list: &[u32], starts: &DeviceBuffer| -> Result<()> {
            let list_buf = upload(gpu, &u32s(list.iter().copied()))?;
            // SAFETY: one block per listed segment (each below n_segs; seg_page maps each to
            // its page, seg_base has a page count + 1 entries, seg_size one a page, sizes and
            // counts from `segments_of`, so every segment starts inside its page's input, and
            // a given start lies inside it too); a walk writes only its own 2 * SEG_ZONE
            // words of `zones` and 2 of `firsts`; sources in the load's buffer; all live
            // until `launch` returns.
            unsafe {
                SNAPPY_WALK.launch(
                    gpu,
                    self.module,
                    list.len() as u32,
                    SNAPPY_THREADS,
                    (
                        Const::at(jobs_buf.device_ptr()),
                        Const::at(page_buf.device_ptr()),
                        Const::at(seg_base_buf.device_ptr()),
                        Const::at(size_buf.device_ptr()),
                        Const::at(list_buf.device_ptr()),
                        list.len() as i32,
                        Const::at(starts.device_ptr()),
                        Mut::at(zones.device_ptr()),
                        Mut::at(firsts.device_ptr()),
                    ),
                )
            }
        };
        let join = |starts: &DeviceBuffer| -> Result<()> {
            // SAFETY: one warp per segment, writing only its 2 words of `meets`; the tables
            // as for the walk; all live until `launch` returns.
            unsafe {
                SNAPPY_JOIN.launch(
                    gpu,
                    self.module,
                    n_segs as u32,
                    32,
                    (
                        Const::at(page_buf.device_ptr()),
                        Const::at(seg_base_buf.device_ptr()),
                        Const::at(size_buf.device_ptr()),
                        Const::at(starts.device_ptr()),
                        Const::at(zones.device_ptr()),
                        Const::at(firsts.device_ptr()),
                        Mut::at(meets.device_ptr()),
                        n_segs as i32,
                    ),
                )
            }
        };
        let all: Vec<u32> = (0..n_segs as u32).collect();
        walk(&all, &starts_buf)?;
        join(&starts_buf)?;
        for _ in 0..REWALKS {
            let met = u64s_from_device(&meets, 2 * n_segs)?;
            let first = u64s_from_device(&firsts, 2 * n_segs)?;
            let again = rewalks(&seg_base, &src_lens, &met, &first);
            if again.is_empty() {
                break;
            }
            for &(g, at) in &again {
                starts[g as usize] = at;
                // the segment after one walked again meets it anew (its start, if it was
                // walked again itself, came from the walk that changes)
                if let Some(next) = starts.get_mut(g as usize + 1) {
                    if seg_page[g as usize + 1] == seg_page[g as usize] {
                        *next = u64::MAX;
                    }
                }
            }
            starts_buf = upload(gpu, &u64s(starts.iter().copied()))?;
            let list: Vec<u32> = again.iter().map(|&(g, _)| g).collect();
            walk(&list, &starts_buf)?;
            join(&starts_buf)?;
        }
        let mut splits = gpu.alloc(n_splits as usize * 8)?;
        splits.fill(0xff)?;
        let errors = zeroed(gpu, large.len() * 4)?;
        // SAFETY: one block per segment (the tables as for the walk); a page's blocks write
        // only its ceil(dst_len / SNAPPY_FRAGMENT) entries of `splits` from its base (the
        // bases are their prefix sums) and its error word; `meets` is read; all live until
        // `launch` returns.
        unsafe {
            SNAPPY_SPLIT.launch(
                gpu,
                self.module,
                n_segs as u32,
                SNAPPY_THREADS,
                (
                    Const::at(jobs_buf.device_ptr()),
                    Const::at(page_buf.device_ptr()),
                    Const::at(seg_base_buf.device_ptr()),
                    n_segs as i32,
                    Const::at(meets.device_ptr()),
                    Mut::at(splits.device_ptr()),
                    Const::at(base_buf.device_ptr()),
                    Mut::at(errors.device_ptr()),
                ),
            )?
        };
        // (a page parsed whole by one block is no error)
        let errs: Vec<i32> = i32s_from_device(&errors, large.len())?
            .into_iter()
            .map(|e| e & !(SNAPPY_WHOLE as i32))
            .collect();
        if let Some(k) = errs.iter().position(|&b| b != 0) {
            return Err((self.failed)(large[k], errs[k] as u32));
        }
        let all = u64s_from_device(&splits, n_splits as usize)?;
        for (k, &j) in large.iter().enumerate() {
            let at = bases[k] as usize;
            let mine = &all[at..at + counts[k] as usize];
            match snappy_fragments_of(mine, jobs[j].src_len, jobs[j].dst_len) {
                Some(f) => {
                    for (src, src_len, dst, dst_len) in f {
                        fragments.push(DecompressJob {
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
        Ok((fragments, fragment_of))
    }
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
    fn segments_and_walks_made_again() {
        // small pages are one segment; the last segment takes the rest; at most MAX_SEGMENTS
        assert_eq!(segments_of(1000), (SNAPPY_SEGMENT, 1));
        assert_eq!(segments_of(3 * SNAPPY_SEGMENT - 1), (SNAPPY_SEGMENT, 2));
        for len in [100 << 20, (100 << 20) + 12345] {
            let (size, n) = segments_of(len);
            assert!((MAX_SEGMENTS - 1..=MAX_SEGMENTS).contains(&n), "{len}: {n}");
            assert!(
                size * n <= len && size * (n + 1) > len,
                "{len}: the last takes the rest"
            );
        }
        // page 0: segments 0..3, boundary 2 unmet; page 1: 3..5, all met; page 2: 5..7,
        // boundary 1 unmet but the walk before ran past the input
        let m = u64::MAX;
        let meets = [0, 0, 40, 0, m, 0, 0, 0, 30, 0, 0, 0, m, 0];
        let firsts = [35, 0, 77, 5, 0, 0, 0, 0, 0, 0, 900, 0, 0, 0];
        let got = rewalks(&[0, 3, 5, 7], &[100, 100, 900], &meets, &firsts);
        assert_eq!(got, vec![(2, 77)]);
        // every unmet boundary of a page, but not two neighbours in a round; pages apart
        let meets = [0, 0, m, 0, m, 0, m, 0, 9, 0, m, 0, 0, 0, m, 0];
        let firsts = [10, 0, 50, 0, 60, 0, 70, 0, 80, 0, 90, 0, 95, 0, 0, 0];
        let got = rewalks(&[0, 6, 8], &[100, 100], &meets, &firsts);
        assert_eq!(got, vec![(1, 10), (3, 60), (5, 80), (7, 95)]);
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
        // the kernel tests' override, and a wave beside reads
        assert!(!snappy_on_host(
            SnappyPlacement::Device,
            2_000_000,
            800_000,
            16
        ));
        assert_eq!(auto.beside_reads(), SnappyPlacement::Device);
    }
}
