//! Pages decompressed on the device by nvCOMP ([`crate::device::nvcomp`]), where it is
//! installed: ZSTD and GZIP, one batched call per codec over the pages of a decoder's pass.
//! SNAPPY stays with our kernel and LZ4_RAW with the host's cores: through nvCOMP both
//! measured slower on the H200 (benches/RESULTS.md, 2026-12-02 afternoon: SNAPPY lineitem
//! 38.9 ms against 33.7, LZ4_RAW lineitem 99.1 ms against 73.8).

use std::sync::Arc;

use super::kernels::PageInfo;
use super::snappy::{device_jobs, Jobs, LocatedChunk};
use super::DeviceChunks;
use crate::device::nvcomp::{Nvcomp, NvcompCodec};
use crate::device::DeviceBuffer;
use crate::error::{Error, Result};

/// The nvCOMP codec cuparquet gives a Parquet codec's pages to.
pub(super) fn nvcomp_codec(codec: parquet::basic::Compression) -> Option<NvcompCodec> {
    use parquet::basic::Compression as C;
    match codec {
        C::ZSTD(_) => Some(NvcompCodec::Zstd),
        C::GZIP(_) => Some(NvcompCodec::Gzip),
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

/// Decompresses the pages of the chunks `cis` (codec `codecs[k]` for `cis[k]`) with nvCOMP.
/// v2 levels are copied as stored and pages stored uncompressed are used in place, as for our
/// SNAPPY kernel ([`device_jobs`]). The output buffer is pushed to `uploads`. Per chunk
/// (indexed like `cis`): its pages' (address, length) and how many nvCOMP decompressed, or
/// `None` where nvCOMP failed on one of its pages or wrote other than the page header's size:
/// the caller decompresses that chunk on the host, which either reads what nvCOMP does not
/// (a framing it lacks) or names what is wrong with the page, and reports the chunk's pages as
/// decompressed on the host.
pub(super) fn nvcomp_on_device(
    nv: &Nvcomp,
    chunks: &DeviceChunks,
    cis: &[usize],
    codecs: &[NvcompCodec],
    tables: &[Vec<PageInfo>],
    fail: &dyn Fn(usize, String) -> Error,
    uploads: &mut Vec<DeviceBuffer>,
) -> Result<Vec<Option<LocatedChunk>>> {
    let gpu = Arc::clone(chunks.buffer().gpu());
    let Jobs {
        out,
        jobs,
        job_pages,
        locations,
    } = device_jobs(chunks, cis, tables, fail)?;
    let codec_of_chunk: std::collections::HashMap<usize, NvcompCodec> =
        cis.iter().copied().zip(codecs.iter().copied()).collect();
    let mut bad: std::collections::HashSet<usize> = std::collections::HashSet::new();
    let mut kinds: Vec<NvcompCodec> = codecs.to_vec();
    kinds.sort_by_key(|c| *c as u8);
    kinds.dedup();
    for codec in kinds {
        let mine: Vec<usize> = (0..jobs.len())
            .filter(|&j| codec_of_chunk.get(&job_pages[j].0) == Some(&codec))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let spans: Vec<(u64, u64, u64, u64)> = mine
            .iter()
            .map(|&j| (jobs[j].src, jobs[j].src_len, jobs[j].dst, jobs[j].dst_len))
            .collect();
        // SAFETY: every source lies in the load's buffer (page data inside its chunk, checked
        // by the page-header pass) and every destination is the page's own span of `out`,
        // sized from its uncompressed size (`device_jobs`); both outlive the call, which waits.
        let results = unsafe { nv.decompress(&gpu, codec, &spans)? };
        for (&j, (status, written)) in mine.iter().zip(results) {
            if status != 0 || written != jobs[j].dst_len {
                bad.insert(job_pages[j].0);
            }
        }
    }
    uploads.push(out);
    Ok(cis
        .iter()
        .zip(locations)
        .map(|(ci, l)| (!bad.contains(ci)).then_some(l))
        .collect())
}
