//! GZIP pages on the device, by our own inflate kernel (`gzip_pages` in `kernels/inflate.cu`,
//! one warp per page): each page's gzip members inflated into exactly the page's uncompressed
//! size, every write bounded by it, each member checked by its trailer (CRC-32 and length),
//! the host's cores inflating the largest pages beside it ([`super::beside`]). A chunk with a
//! page the kernel does not read to the byte goes to the host's inflater, which reads it as
//! arrow-rs does or names what is wrong. (nvCOMP's GZIP is not used: 5.3 wrote past
//! a page's output where the page inflated past its claim.)

use std::sync::Arc;

use super::beside::Beside;
use super::kernels::{PageInfo, SnappyJob, GZIP_PAGES, INFLATE_WARPS, SNAPPY_MODULE};
use super::report::PageLocations;
use super::profile::timed;
use super::snappy::{device_jobs, job_errors, Jobs};
use super::{DeviceChunks, PageCounts};
use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};

/// Inflates the pages of the GZIP chunks `cis` on the device (v2 levels copied as stored, pages
/// stored uncompressed used in place, as for the SNAPPY kernel: [`device_jobs`]), the host's
/// cores taking the largest pages beside the kernel, a `host_share` percent of the bytes
/// ([`Beside`]: the kernel works a page a warp, so it lasts as long as its largest page, as
/// nvCOMP's call does). The output buffer is pushed to `uploads`. Per chunk (indexed like
/// `cis`): its pages' (address, length) and how many each side inflated, or `None` where
/// either side refused one of its pages (the caller inflates that chunk on the host, which
/// names what is wrong).
pub(super) fn gzip_on_device(
    chunks: &DeviceChunks,
    cis: &[usize],
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
    let mut side = Beside::new(&gpu, chunks.buffer(), &out, &jobs, &job_pages);
    if !jobs.is_empty() {
        let (host_js, device_js) = side.split((0..jobs.len()).collect(), host_share_tuned);
        let device_jobs: Vec<SnappyJob> = device_js.iter().map(|&j| jobs[j]).collect();
        // (the level does not matter to the host's inflater)
        let errs = side.run(
            parquet::basic::Compression::GZIP(Default::default()),
            &host_js,
            "host inflation beside the GZIP kernel",
            || timed("GZIP kernel", || launch(&gpu, &device_jobs)),
        )?;
        for (&e, &j) in errs.iter().zip(&device_js) {
            if e != 0 {
                side.refuse(j);
            }
        }
    }
    let located = side.located(cis, locations, |n| PageCounts {
        kernel: n,
        ..PageCounts::default()
    });
    uploads.push(out);
    Ok(located)
}

/// Runs `gzip_pages` over `jobs`: per job its error bits.
fn launch(gpu: &Arc<Gpu>, jobs: &[SnappyJob]) -> Result<Vec<i32>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    let module = SNAPPY_MODULE.load(gpu)?;
    // SAFETY: a warp per job, INFLATE_WARPS jobs a block (the kernel skips warps past
    // `num_jobs`); every job's source lies in the load's buffer (page data inside its chunk,
    // checked by the page-header pass) and its destination is its page's own span of the
    // output, sized from the page's uncompressed size, which the kernel never writes past
    // (none of them a page the host inflates beside it).
    unsafe {
        job_errors(
            gpu,
            &module,
            &GZIP_PAGES,
            jobs,
            (jobs.len() as u32).div_ceil(INFLATE_WARPS),
            INFLATE_WARPS * 32,
        )
    }
}
