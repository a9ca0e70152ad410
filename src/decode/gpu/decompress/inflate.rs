//! GZIP pages on the device, by our own inflate kernel (`gzip_pages` in `kernels/inflate.cu`,
//! one warp per page): each page's gzip members inflated into exactly the page's uncompressed
//! size, every write bounded by it, each member checked by its trailer (CRC-32 and length),
//! the host's cores inflating the largest pages beside it ([`super::beside`]). A chunk with a
//! page the kernel does not read to the byte goes to the host's inflater, which reads it as
//! arrow-rs does or names what is wrong. (nvCOMP's GZIP is not used: 5.3 wrote past
//! a page's output where the page inflated past its claim.)

use std::sync::Arc;

use super::{job_errors, DeviceCodec, OnFailure};
use crate::decode::gpu::kernels::{DecompressJob, DECOMPRESS_MODULE, GZIP_PAGES, INFLATE_WARPS};
use crate::decode::gpu::profile::timed;
use crate::decode::gpu::PageCounts;
use crate::device::Gpu;
use crate::error::{Error, Result};

/// Our GZIP inflate kernel, as the [`DeviceCodec`] of
/// [`decompress_on_device`](super::decompress_on_device): the host's cores take the largest
/// pages beside it, a `host_share` percent of the bytes (the kernel works a page a warp, so it
/// lasts as long as its largest page, as nvCOMP's call does); a page the kernel does not
/// inflate exactly sends its chunk to the host's inflater.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InflateKernel;

impl DeviceCodec for InflateKernel {
    fn counts(&self, n: usize) -> PageCounts {
        PageCounts {
            kernel: n,
            ..PageCounts::default()
        }
    }

    fn on_failure(&self) -> OnFailure {
        OnFailure::Host
    }

    fn beside(&self) -> Option<&'static str> {
        Some("host inflation beside the GZIP kernel")
    }

    /// Runs `gzip_pages` over `jobs`: per job its error bits.
    fn launch(
        &self,
        gpu: &Arc<Gpu>,
        _codec: parquet::basic::Compression,
        jobs: &[DecompressJob],
        _failed: &dyn Fn(usize, u32) -> Error,
    ) -> Result<Vec<u32>> {
        timed("GZIP kernel", || {
            if jobs.is_empty() {
                return Ok(Vec::new());
            }
            let module = DECOMPRESS_MODULE.load(gpu)?;
            // SAFETY: a warp per job, INFLATE_WARPS jobs a block (the kernel skips warps past
            // `num_jobs`); every job's source lies in the load's buffer (page data inside its
            // chunk, checked by the page-header stage) and its destination is its page's own
            // span of the output, sized from the page's uncompressed size, which the kernel
            // never writes past (none of them a page the host inflates beside it).
            let errors = unsafe {
                job_errors(
                    gpu,
                    &module,
                    &GZIP_PAGES,
                    jobs,
                    (jobs.len() as u32).div_ceil(INFLATE_WARPS),
                    INFLATE_WARPS * 32,
                )
            }?;
            Ok(errors.into_iter().map(|e| e as u32).collect())
        })
    }
}
