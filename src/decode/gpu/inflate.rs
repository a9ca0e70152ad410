//! GZIP pages on the device, by our own inflate kernel (`gzip_pages` in `kernels/inflate.cu`,
//! one warp per page): each page's gzip members inflated into exactly the page's uncompressed
//! size, every write bounded by it, each member checked by its trailer (CRC-32 and length),
//! the host's cores inflating the largest pages beside it ([`super::beside`]). A chunk with a
//! page the kernel does not read to the byte goes to the host's inflater, which reads it as
//! arrow-rs does or names what is wrong. (nvCOMP's GZIP is not used: 5.3 wrote past
//! a page's output where the page inflated past its claim.)

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::beside::{decompress_on_host, host_share, largest_to_host};
use super::kernels::{PageInfo, SnappyJob, GZIP_PAGES, INFLATE_WARPS, SNAPPY_MODULE};
use super::launch::{i32s_from_device, upload_table, zeroed, Const, Mut};
use super::locate::PageLocations;
use super::profile::{profile_absorb, timed};
use super::snappy::{device_jobs, Jobs};
use super::{DeviceChunks, PageCounts};
use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};

/// Inflates the pages of the GZIP chunks `cis` on the device (v2 levels copied as stored, pages
/// stored uncompressed used in place, as for the SNAPPY kernel: [`device_jobs`]), the host's
/// cores taking the largest pages beside the kernel, a `host_share` percent of the bytes
/// ([`host_share`]: the kernel works a page a warp, so it lasts as long as its largest page, as
/// nvCOMP's call does). The output buffer is pushed to `uploads`. Per chunk (indexed like
/// `cis`): its pages' (address, length) and how many each side inflated, or `None` where
/// either side refused one of its pages (the caller inflates that chunk on the host, which
/// names what is wrong).
pub(super) fn gzip_on_device(
    chunks: &DeviceChunks,
    cis: &[usize],
    codecs: &[parquet::basic::Compression],
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
    let codec_of: HashMap<usize, parquet::basic::Compression> =
        cis.iter().copied().zip(codecs.iter().copied()).collect();
    let mut refused: HashSet<usize> = HashSet::new();
    let mut host_pages: HashMap<usize, usize> = HashMap::new();
    if !jobs.is_empty() {
        let share = host_share(host_share_tuned, rayon::current_num_threads());
        let (host_js, device_js) = largest_to_host(&jobs, (0..jobs.len()).collect(), share);
        let device_jobs: Vec<SnappyJob> = device_js.iter().map(|&j| jobs[j]).collect();
        let host_jobs: Vec<SnappyJob> = host_js.iter().map(|&j| jobs[j]).collect();
        // the level does not matter to the host's inflater
        let codec = codec_of
            .values()
            .next()
            .copied()
            .unwrap_or(parquet::basic::Compression::GZIP(Default::default()));
        let (errs, host_ok) = std::thread::scope(|s| {
            let host = s.spawn(|| {
                let t = std::time::Instant::now();
                let ok = decompress_on_host(&gpu, chunks.buffer(), &out, codec, &host_jobs);
                (ok, t.elapsed())
            });
            let errs = timed("GZIP kernel", || launch(&gpu, &device_jobs));
            let host_ok = match host.join() {
                Ok((ok, took)) => {
                    profile_absorb(vec![("host inflation beside the GZIP kernel".into(), took)]);
                    ok
                }
                Err(_) => vec![false; host_jobs.len()],
            };
            (errs, host_ok)
        });
        refused.extend(
            errs?
                .iter()
                .zip(&device_js)
                .filter(|(&e, _)| e != 0)
                .map(|(_, &j)| job_pages[j].0),
        );
        for (&j, ok) in host_js.iter().zip(host_ok) {
            *host_pages.entry(job_pages[j].0).or_default() += 1;
            if !ok {
                refused.insert(job_pages[j].0);
            }
        }
    }
    uploads.push(out);
    Ok(cis
        .iter()
        .zip(locations)
        .map(|(ci, (locs, pages))| {
            let host = host_pages.get(ci).copied().unwrap_or(0);
            (!refused.contains(ci)).then_some((
                locs,
                PageCounts {
                    kernel: pages - host,
                    host,
                    ..PageCounts::default()
                },
            ))
        })
        .collect())
}

/// Runs `gzip_pages` over `jobs`: per job its error bits.
fn launch(gpu: &Arc<Gpu>, jobs: &[SnappyJob]) -> Result<Vec<i32>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let module = SNAPPY_MODULE.load(gpu)?;
    let jobs_buf = upload_table(gpu, jobs)?;
    let errors = zeroed(gpu, jobs.len() * 4)?;
    // SAFETY: a warp per job, INFLATE_WARPS jobs a block (the kernel skips warps past
    // `num_jobs`); every job's source lies in the load's buffer (page data inside its chunk,
    // checked by the page-header pass) and its destination is its page's own span of the
    // output, sized from the page's uncompressed size, which the kernel never writes past
    // (none of them a page the host inflates beside it); all live until the waited launch
    // returns.
    unsafe {
        GZIP_PAGES.launch(
            gpu,
            &module,
            (jobs.len() as u32).div_ceil(INFLATE_WARPS),
            INFLATE_WARPS * 32,
            (
                Const::at(jobs_buf.device_ptr()),
                jobs.len() as i32,
                Mut::at(errors.device_ptr()),
            ),
        )?
    };
    i32s_from_device(&errors, jobs.len())
}
