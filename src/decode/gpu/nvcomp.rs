//! Pages decompressed on the device by nvCOMP ([`crate::device::nvcomp`]), where it is
//! installed: ZSTD, GZIP and LZ4_RAW, one batched call per codec over the pages of a decoder's
//! pass, while the host's cores decompress the largest of those pages beside it (a share of
//! the bytes, [`host_share`]). SNAPPY stays with our kernel: through nvCOMP it measured slower
//! on the H200 (benches/RESULTS.md, 2026-12-02 afternoon: SNAPPY lineitem 38.9 ms against
//! 33.7).
//!
//! Why the split: an nvCOMP call lasts about as long as its slowest page (a page is one unit
//! of its work), so the largest pages set its length, while the host decompresses a page at
//! its cores' speed whatever its size. The pages go to nvCOMP largest first, as libcudf sends
//! them, so that the large ones do not start last.

use std::sync::Arc;

use super::kernels::{PageInfo, SnappyJob};
use super::locate::PageLocations;
use super::snappy::{device_jobs, Jobs};
use super::{DeviceChunks, PageCounts};
use crate::device::nvcomp::{Nvcomp, NvcompCodec};
use crate::decode::decompress::decompress_exact;
use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};

/// The nvCOMP codec cuparquet gives a Parquet codec's pages to. (Hadoop-framed LZ4 is not
/// one: its frames are unwrapped on the host.)
pub(super) fn nvcomp_codec(codec: parquet::basic::Compression) -> Option<NvcompCodec> {
    use parquet::basic::Compression as C;
    match codec {
        C::ZSTD(_) => Some(NvcompCodec::Zstd),
        C::GZIP(_) => Some(NvcompCodec::Gzip),
        C::LZ4_RAW => Some(NvcompCodec::Lz4),
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

/// The share (percent) of the decompressed bytes of nvCOMP's pages that the host's `cores` take
/// beside it, largest pages first: `tuned` where given (`CUPARQUET_TUNING=host_share=N`), else
/// [`HOST_SHARE_AT_16`] scaled by the cores there are (at most twice it).
pub(crate) fn host_share(tuned: Option<u32>, cores: usize) -> u32 {
    match tuned {
        Some(t) => t.min(100),
        None => (HOST_SHARE_AT_16 * cores.min(64) as u32 / 16).min(2 * HOST_SHARE_AT_16),
    }
}

/// The host's share on the H200 machine's 16 cores: the best measured for ZSTD and LZ4_RAW
/// lineitem files of both writers (benches/RESULTS.md, 2026-12-03: shares 0, 10, 15, 20, 30
/// and 100 in one call; 15 the fastest on all four files; GZIP, not measured, takes the same).
/// Below it nvCOMP's call is as long as its largest pages (arrow-rs's 1 MiB dictionary pages
/// there); above it the host's part is the longer.
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
    let mut bad: std::collections::HashSet<usize> = std::collections::HashSet::new();
    // per chunk: its pages the host decompressed
    let mut host_pages: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    let mut kinds: Vec<(NvcompCodec, parquet::basic::Compression)> = codecs.to_vec();
    kinds.sort_by_key(|c| c.0 as u8);
    kinds.dedup_by_key(|c| c.0);
    let cores = rayon::current_num_threads();
    for (codec, parquet_codec) in kinds {
        let mut mine: Vec<usize> = (0..jobs.len())
            .filter(|&j| codec_of_chunk.get(&job_pages[j].0).map(|c| c.0) == Some(codec))
            .collect();
        if mine.is_empty() {
            continue;
        }
        // largest first, for both sides
        mine.sort_by_key(|&j| std::cmp::Reverse(jobs[j].dst_len));
        let sizes: Vec<u64> = mine.iter().map(|&j| jobs[j].dst_len).collect();
        let split = host_split(&sizes, host_share(host_share_tuned, cores));
        let (host_js, device_js) = mine.split_at(split);
        let spans: Vec<(u64, u64, u64, u64)> = device_js
            .iter()
            .map(|&j| (jobs[j].src, jobs[j].src_len, jobs[j].dst, jobs[j].dst_len))
            .collect();
        let host_jobs: Vec<SnappyJob> = host_js.iter().map(|&j| jobs[j]).collect();
        let (results, host_ok) = std::thread::scope(|s| {
            let host = s.spawn(|| {
                let t = std::time::Instant::now();
                let ok = decompress_on_host(&gpu, chunks.buffer(), &out, parquet_codec, &host_jobs);
                (ok, t.elapsed())
            });
            // SAFETY: every source lies in the load's buffer (page data inside its chunk,
            // checked by the page-header pass) and every destination is the page's own span
            // of `out`, sized from its uncompressed size (`device_jobs`), none of them a page
            // the host thread writes; all outlive the call, which waits.
            let results = super::profile::timed("nvCOMP call", || unsafe {
                nv.decompress(&gpu, codec, &spans)
            });
            let host_ok = match host.join() {
                Ok((ok, took)) => {
                    super::profile::profile_absorb(vec![(
                        "host decompression beside nvCOMP".to_string(),
                        took,
                    )]);
                    ok
                }
                Err(_) => vec![false; host_jobs.len()],
            };
            (results, host_ok)
        });
        for (&j, (status, written)) in device_js.iter().zip(results?) {
            if status != 0 || written != jobs[j].dst_len {
                bad.insert(job_pages[j].0);
            }
        }
        for (&j, ok) in host_js.iter().zip(host_ok) {
            *host_pages.entry(job_pages[j].0).or_default() += 1;
            if !ok {
                bad.insert(job_pages[j].0);
            }
        }
    }
    uploads.push(out);
    Ok(cis
        .iter()
        .zip(locations)
        .map(|(ci, (l, n))| {
            let host = host_pages.get(ci).copied().unwrap_or(0);
            (!bad.contains(ci)).then_some((
                l,
                PageCounts {
                    nvcomp: n - host,
                    host,
                    ..PageCounts::default()
                },
            ))
        })
        .collect())
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
    jobs: &[SnappyJob],
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
}
