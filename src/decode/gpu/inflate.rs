//! GZIP pages on the device, by our own inflate kernel (`gzip_pages` in `kernels/inflate.cu`,
//! one warp per page): each page's gzip members inflated into exactly the page's uncompressed
//! size, every write bounded by it, each member checked by its trailer (CRC-32 and length). A
//! chunk with a page the kernel does not read to the byte goes to the host's inflater, which
//! reads it as arrow-rs does or names what is wrong. (nvCOMP's GZIP is not used: 5.3 wrote past
//! a page's output where the page inflated past its claim.)

use std::collections::HashSet;
use std::sync::Arc;

use super::kernels::{PageInfo, GZIP_PAGES, INFLATE_WARPS, SNAPPY_MODULE};
use super::launch::{i32s_from_device, upload_table, zeroed, Const, Mut};
use super::locate::PageLocations;
use super::snappy::{device_jobs, Jobs};
use super::{DeviceChunks, PageCounts};
use crate::device::DeviceBuffer;
use crate::error::{Error, Result};

/// Inflates the pages of the GZIP chunks `cis` on the device (v2 levels copied as stored, pages
/// stored uncompressed used in place, as for the SNAPPY kernel: [`device_jobs`]); the output
/// buffer is pushed to `uploads`. Per chunk (indexed like `cis`): its pages' (address, length),
/// or `None` where the kernel refused one of its pages (the caller inflates that chunk on the
/// host).
pub(super) fn gzip_on_device(
    chunks: &DeviceChunks,
    cis: &[usize],
    tables: &[Vec<PageInfo>],
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
    let mut refused: HashSet<usize> = HashSet::new();
    if !jobs.is_empty() {
        let module = SNAPPY_MODULE.load(&gpu)?;
        let jobs_buf = upload_table(&gpu, &jobs)?;
        let errors = zeroed(&gpu, jobs.len() * 4)?;
        // SAFETY: a warp per job, INFLATE_WARPS jobs a block (the kernel skips warps past
        // `num_jobs`); every job's source lies in the load's buffer (page data inside its
        // chunk, checked by the page-header pass) and its destination in `out`, sized from the
        // pages' uncompressed sizes, which the kernel never writes past; all live until the
        // errors are read back.
        unsafe {
            GZIP_PAGES.launch(
                &gpu,
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
        let errs = i32s_from_device(&errors, jobs.len())?;
        refused.extend(
            errs.iter()
                .zip(&job_pages)
                .filter(|(&e, _)| e != 0)
                .map(|(_, &(ci, _))| ci),
        );
    }
    uploads.push(out);
    Ok(cis
        .iter()
        .zip(locations)
        .map(|(ci, (locs, pages))| {
            (!refused.contains(ci)).then_some((
                locs,
                PageCounts {
                    kernel: pages,
                    ..PageCounts::default()
                },
            ))
        })
        .collect())
}
