//! The largest compressed pages of a wave decompressed on the host's cores beside nvCOMP's
//! call (and beside our GZIP kernel, [`super::inflate`], which also works a page at a time), at
//! the same time.
//!
//! Why: nvCOMP works a page per unit of its work, so its call lasts about as long as its largest
//! page (about 30 MB/s a page), while the host decompresses a page at its cores' speed whatever
//! its size. arrow-rs's lineitem chunks hold 1 MiB dictionary pages and PLAIN-fallback pages of
//! 160 KiB beside data pages of 40 KiB: the call is ~5× shorter once the host has taken the
//! largest pages. [`host_share`] is how many of the bytes the host takes (largest pages first,
//! [`host_split`]); [`decompress_on_host`] does it.
//!
//! (Our SNAPPY kernel is not shared so: it decompresses a page about five times faster than
//! nvCOMP, and with the host beside it the SNAPPY lineitem loads measured slower at every
//! share, 10 % to 40 %: benches/history/2026-12-03.md, afternoon.)

use std::sync::Arc;

use crate::decode::decompress::decompress_exact;
use crate::decode::gpu::kernels::DecompressJob;
use crate::device::{DeviceBuffer, Gpu};

/// The share (percent) of the decompressed bytes of nvCOMP's pages that the host's `cores`
/// take beside it, largest pages first: `tuned` where given (`CUPARQUET_TUNING=host_share=N`),
/// else [`HOST_SHARE_AT_16`] scaled by the cores there are (at most twice it).
pub(crate) fn host_share(tuned: Option<u32>, cores: usize) -> u32 {
    match tuned {
        Some(t) => t.min(100),
        None => (HOST_SHARE_AT_16 * cores.min(64) as u32 / 16).min(2 * HOST_SHARE_AT_16),
    }
}

/// The host's share on the H200 machine's 16 cores: the best measured for ZSTD
/// and LZ4_RAW lineitem files of both writers (the GZIP kernel takes the same share; its own
/// sweep is still to be measured) (benches/history/2026-12-03.md: shares 0, 10,
/// 15, 20, 30 and 100 in one call; 15 the fastest on all four files). Below it nvCOMP's call is as long as its largest pages (arrow-rs's 1 MiB
/// dictionary pages there); above it the host's part is the longer.
pub(crate) const HOST_SHARE_AT_16: u32 = 15;

/// How many of the pages of `sizes` (decompressed bytes, largest first) the host takes: the
/// largest, until they hold `share` percent of the bytes (the page that reaches it included).
pub(crate) fn host_split(sizes: &[u64], share: u32) -> usize {
    let total: u64 = sizes.iter().sum();
    let mut taken = 0u64;
    sizes
        .iter()
        .position(|&n| {
            let enough = taken.saturating_mul(100) >= total.saturating_mul(u64::from(share));
            taken += n;
            enough
        })
        .unwrap_or(sizes.len())
}

/// The jobs of `jobs` (indices, any order) sorted largest first and cut where the host's
/// `share` ends: (the host's, the device's).
fn largest_to_host(
    jobs: &[DecompressJob],
    mut mine: Vec<usize>,
    share: u32,
) -> (Vec<usize>, Vec<usize>) {
    mine.sort_by_key(|&j| std::cmp::Reverse(jobs[j].dst_len));
    let sizes: Vec<u64> = mine.iter().map(|&j| jobs[j].dst_len).collect();
    let device = mine.split_off(host_split(&sizes, share));
    (mine, device)
}

/// Decompresses `jobs` (largest first) on the host's cores: each job's compressed bytes copied
/// back from `load`, decompressed with `codec` into pinned memory and copied to its place in
/// `out`. The jobs are dealt to as many groups as there are cores, in turn (so each group gets
/// large and small ones); a group reuses one pinned buffer. Per job: whether it came out
/// exactly its destination's size (a page that did not is decompressed again, and its fault
/// named, by the caller's host path).
fn decompress_on_host(
    gpu: &Arc<Gpu>,
    load: &DeviceBuffer,
    out: &DeviceBuffer,
    codec: parquet::basic::Compression,
    jobs: &[DecompressJob],
) -> Vec<bool> {
    use rayon::prelude::*;
    if jobs.is_empty() {
        return Vec::new();
    }
    let groups = rayon::current_num_threads().clamp(1, jobs.len());
    let streams = gpu.streams();
    let mut ok = vec![false; jobs.len()];
    let done: Vec<Vec<(usize, bool)>> = (0..groups)
        .into_par_iter()
        .map(|g| {
            let mine: Vec<usize> = (g..jobs.len()).step_by(groups).collect();
            let src_max = mine.iter().map(|&j| jobs[j].src_len).max().unwrap_or(0) as usize;
            let dst_max = mine.iter().map(|&j| jobs[j].dst_len).max().unwrap_or(0) as usize;
            let stream = &streams[g % streams.len()];
            // one pinned buffer for the group's sources and outputs, of a power-of-two size
            // (so that the pool hands the same buffers back load after load: a fresh pinned
            // allocation costs milliseconds, and freeing one waits for the device)
            let need = (src_max + dst_max).next_power_of_two().max(1 << 16);
            let Ok(mut pinned) = gpu.pinned(need) else {
                return mine.iter().map(|&j| (j, false)).collect();
            };
            let results = mine
                .iter()
                .map(|&j| {
                    let job = &jobs[j];
                    let (s, d) = (job.src_len as usize, job.dst_len as usize);
                    let good = job.src >= load.device_ptr()
                        && job.dst >= out.device_ptr()
                        && load
                            .copy_into(
                                (job.src - load.device_ptr()) as usize,
                                &mut pinned.as_mut_slice()[..s],
                            )
                            .is_ok()
                        && {
                            let (src, dst) = pinned.as_mut_slice().split_at_mut(src_max);
                            decompress_exact(codec, &src[..s], &mut dst[..d]).is_ok()
                        }
                        && pinned
                            .copy_to_device(
                                src_max..src_max + d,
                                out,
                                (job.dst - out.device_ptr()) as usize,
                                stream,
                            )
                            .is_ok();
                    (j, good)
                })
                .collect();
            gpu.recycle_pinned(pinned);
            results
        })
        .collect();
    for (j, good) in done.into_iter().flatten() {
        ok[j] = good;
    }
    ok
}

/// One device decompressor's call over `jobs` (its output `out`, the compressed bytes in
/// `load`) with the host's cores taking the largest pages beside it: which pages each side
/// takes ([`split`](Self::split)), the call with the host's part run beside it
/// ([`run`](Self::run)), and what each chunk came to ([`located`](Self::located)). Chunks
/// either side refuses go to [`refused`](Self::refused).
pub(crate) struct Beside<'a> {
    gpu: &'a Arc<Gpu>,
    load: &'a DeviceBuffer,
    out: &'a DeviceBuffer,
    jobs: &'a [DecompressJob],
    /// Each job's (chunk, page).
    job_pages: &'a [(usize, usize)],
    /// Per chunk: its pages the host decompressed.
    host_pages: std::collections::HashMap<usize, usize>,
    /// Chunks a page of which either side refused: the caller decompresses them again on the
    /// host, which names what is wrong.
    pub(crate) refused: std::collections::HashSet<usize>,
}

impl<'a> Beside<'a> {
    pub(crate) fn new(
        gpu: &'a Arc<Gpu>,
        load: &'a DeviceBuffer,
        out: &'a DeviceBuffer,
        jobs: &'a [DecompressJob],
        job_pages: &'a [(usize, usize)],
    ) -> Self {
        Beside {
            gpu,
            load,
            out,
            jobs,
            job_pages,
            host_pages: Default::default(),
            refused: Default::default(),
        }
    }

    /// The jobs `mine` (indices into the jobs) cut, largest first, into the host's share
    /// ([`host_share`] of `tuned` and this host's cores) and the device's: (host, device).
    pub(crate) fn split(&self, mine: Vec<usize>, tuned: Option<u32>) -> (Vec<usize>, Vec<usize>) {
        let share = host_share(tuned, rayon::current_num_threads());
        largest_to_host(self.jobs, mine, share)
    }

    /// Runs `device` (the device decompressor's call) while the host's cores decompress
    /// `host_js` with `codec` beside it ([`decompress_on_host`]; `what` names that part in the
    /// profile), then counts the host's pages per chunk and marks the chunks of the pages the
    /// host refused. The device call's result.
    pub(crate) fn run<T>(
        &mut self,
        codec: parquet::basic::Compression,
        host_js: &[usize],
        what: &str,
        device: impl FnOnce() -> T,
    ) -> T {
        let host_jobs: Vec<DecompressJob> = host_js.iter().map(|&j| self.jobs[j]).collect();
        let (gpu, load, out) = (self.gpu, self.load, self.out);
        let (result, host_ok) = std::thread::scope(|s| {
            let host = s.spawn(|| {
                let t = std::time::Instant::now();
                let ok = decompress_on_host(gpu, load, out, codec, &host_jobs);
                (ok, t.elapsed())
            });
            let result = device();
            let host_ok = match host.join() {
                Ok((ok, took)) => {
                    crate::decode::gpu::profile::profile_absorb(vec![(what.to_string(), took)]);
                    ok
                }
                Err(_) => vec![false; host_jobs.len()],
            };
            (result, host_ok)
        });
        for (&j, ok) in host_js.iter().zip(host_ok) {
            let chunk = self.job_pages[j].0;
            *self.host_pages.entry(chunk).or_default() += 1;
            if !ok {
                self.refused.insert(chunk);
            }
        }
        result
    }

    /// Marks the chunk of job `j` refused.
    pub(crate) fn refuse(&mut self, j: usize) {
        self.refused.insert(self.job_pages[j].0);
    }

    /// Whether the chunk of job `j` is refused.
    pub(crate) fn is_refused(&self, j: usize) -> bool {
        self.refused.contains(&self.job_pages[j].0)
    }

    /// Per chunk of `cis` (indexed like it): its pages' (address, length) of `locations` and
    /// their counts — the host's pages, and the rest on the device side (`device(n)`, n
    /// pages) — or `None` for a refused chunk.
    pub(crate) fn located(
        self,
        cis: &[usize],
        locations: Vec<super::LocatedChunk>,
        device: impl Fn(usize) -> crate::decode::gpu::PageCounts,
    ) -> Vec<Option<crate::decode::gpu::report::PageLocations>> {
        cis.iter()
            .zip(locations)
            .map(|(ci, (locs, pages))| {
                let host = self.host_pages.get(ci).copied().unwrap_or(0);
                (!self.refused.contains(ci)).then(|| {
                    let mut counts = device(pages - host);
                    counts.host = host;
                    (locs, counts)
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_share_scales_with_cores_and_obeys_the_tuning() {
        assert_eq!(host_share(None, 16), HOST_SHARE_AT_16);
        assert_eq!(host_share(None, 8), HOST_SHARE_AT_16 * 8 / 16);
        assert_eq!(host_share(None, 1), HOST_SHARE_AT_16 / 16);
        assert_eq!(host_share(None, 128), 2 * HOST_SHARE_AT_16);
        assert_eq!(host_share(Some(0), 16), 0);
        assert_eq!(host_share(Some(100), 2), 100);
        assert_eq!(host_share(Some(250), 2), 100);
    }

    #[test]
    fn the_host_takes_the_largest_pages_up_to_its_share() {
        // 1,000 bytes: 400 + 300 + 100 × 3
        let sizes = [400, 300, 100, 100, 100];
        assert_eq!(host_split(&sizes, 0), 0);
        assert_eq!(host_split(&sizes, 1), 1); // the page that reaches the share is taken
        assert_eq!(host_split(&sizes, 40), 1);
        assert_eq!(host_split(&sizes, 41), 2);
        assert_eq!(host_split(&sizes, 70), 2);
        assert_eq!(host_split(&sizes, 90), 4);
        assert_eq!(host_split(&sizes, 100), 5);
        assert_eq!(host_split(&[], 15), 0);
        assert_eq!(host_split(&[0, 0], 50), 0); // nothing to decompress: all to nvCOMP
    }

    #[test]
    fn the_largest_jobs_go_to_the_host() {
        let job = |dst_len| DecompressJob {
            src: 0,
            src_len: 1,
            dst: 0,
            dst_len,
        };
        let jobs = [job(100), job(400), job(100), job(300), job(100)];
        assert_eq!(
            largest_to_host(&jobs, vec![0, 1, 2, 3, 4], 41),
            (vec![1, 3], vec![0, 2, 4])
        );
        assert_eq!(
            largest_to_host(&jobs, vec![0, 2, 3], 0),
            (vec![], vec![3, 0, 2])
        );
        assert_eq!(
            largest_to_host(&jobs, vec![4, 1], 100),
            (vec![1, 4], vec![])
        );
    }
}
