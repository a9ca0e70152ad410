//! Where each page's (decompressed) data lives on the device: uncompressed pages in place in
//! the load's buffer; the pages of the codecs the device decompresses by the one driver of
//! [`decompress`](super::decompress): ZSTD, LZ4_RAW and LZ4 by nvCOMP where it is installed (the
//! host's cores taking the largest beside it), SNAPPY by our kernel (or the host, where that is
//! faster), GZIP by our inflate kernel; the rest, and chunks a kernel or nvCOMP refused,
//! decompressed on the host (a task per chunk) and uploaded through pinned buffers.

use std::sync::Arc;

use super::decompress::{
    decompress_on_device, nvcomp_codec, snappy_on_host, DeviceCodec, InflateKernel, NvcompBatched,
    SnappyKernel,
};
use super::kernels::PageInfo;
use super::profile::timed;
use super::report::PageLocations;
use super::{DeviceChunks, PageCounts, SnappyPlacement};
use crate::device::DeviceBuffer;
use crate::error::{Error, Result};

/// Whether the pages of `codec` are decompressed on the device by [`locate_pages`]: SNAPPY
/// and GZIP by our kernels, nvCOMP's codecs where it is installed (uncompressed pages need
/// none: false).
pub(crate) fn device_decompresses(codec: parquet::basic::Compression) -> bool {
    use parquet::basic::Compression;
    match codec {
        Compression::UNCOMPRESSED => false,
        Compression::SNAPPY => true,
        Compression::GZIP(_) => true,
        c => super::decompress::nvcomp_takes(c),
    }
}

/// Where the (decompressed) data of every page of the chunks `cis` lives on the device:
/// uncompressed chunks in place in the load's buffer; the rest decompressed on the device by
/// [`decompress_on_device`] — ZSTD, LZ4_RAW and LZ4 pages by nvCOMP where it is installed
/// ([`NvcompBatched`]), GZIP pages by our inflate kernel ([`InflateKernel`]), each with
/// `host_share` percent of their bytes (the largest pages) decompressed by the host's cores
/// beside it (a chunk either side refuses goes to the host); SNAPPY pages by our kernel
/// ([`SnappyKernel`]) or, where `placement` (or its model) says so, on the host — and the
/// rest decompressed on the host (chunks in parallel) and uploaded through pinned
/// buffers. Buffers the kernels will read are pushed to `uploads`,
/// which must outlive them. Indexed like `cis`.
#[allow(clippy::too_many_arguments)]
pub(super) fn locate_pages(
    chunks: &DeviceChunks,
    cis: &[usize],
    tables: &[Vec<PageInfo>],
    path: &std::path::Path,
    codec_of: &(dyn Fn(usize, usize) -> parquet::basic::Compression + Sync),
    placement: SnappyPlacement,
    host_share: Option<u32>,
    uploads: &mut Vec<DeviceBuffer>,
) -> Result<Vec<PageLocations>> {
    use parquet::basic::Compression;
    use rayon::prelude::*;
    let buf = chunks.buffer();
    let all = chunks.chunks();
    let fail = |ci: usize, reason: String| {
        let c = &all[ci];
        Error::BadColumnChunk {
            path: path.to_path_buf(),
            row_group: c.row_group,
            column: c.path.clone(),
            range: Some(c.range.clone()),
            reason,
        }
    };
    let mut out: Vec<Option<PageLocations>> = vec![None; cis.len()];
    let mut snappy = Vec::new();
    let mut gzip = Vec::new();
    let mut host = Vec::new();
    let mut nv = Vec::new();
    let compressed = cis.iter().any(|&ci| {
        let c = &all[ci];
        codec_of(c.row_group, c.column) != Compression::UNCOMPRESSED
    });
    let nvcomp = if compressed {
        crate::device::nvcomp::nvcomp()?
    } else {
        None
    };
    let by_nvcomp = |codec: Compression| {
        let n = nvcomp.as_ref()?;
        nvcomp_codec(codec).filter(|&c| n.supports(c))
    };
    for (k, &ci) in cis.iter().enumerate() {
        let c = &all[ci];
        match codec_of(c.row_group, c.column) {
            Compression::UNCOMPRESSED => {
                let base = buf.device_ptr() + c.dest_offset;
                out[k] = Some((
                    tables[ci]
                        .iter()
                        .map(|p| (base + p.data_offset as u64, p.compressed_size as u64))
                        .collect(),
                    PageCounts::default(),
                ));
            }
            Compression::SNAPPY => snappy.push((k, Compression::SNAPPY)),
            codec @ Compression::GZIP(_) => gzip.push((k, codec)),
            codec => match by_nvcomp(codec) {
                Some(_) => nv.push((k, codec)),
                None => host.push((k, codec)),
            },
        }
    }
    // the chunks of `list` (indices into `cis`, with their codecs) decompressed on the device
    // by `codec` (timed as `stage`, where named); those it refuses join `host`
    let mut on_device = |codec: &dyn DeviceCodec,
                         stage: Option<&str>,
                         list: &[(usize, Compression)],
                         host: &mut Vec<(usize, Compression)>|
     -> Result<()> {
        let ks: Vec<usize> = list.iter().map(|&(k, _)| cis[k]).collect();
        let codecs: Vec<Compression> = list.iter().map(|&(_, c)| c).collect();
        let mut run = || {
            decompress_on_device(
                codec, chunks, &ks, &codecs, tables, host_share, &fail, uploads,
            )
        };
        let done = match stage {
            Some(stage) => timed(stage, run)?,
            None => run()?,
        };
        for (&(k, codec), d) in list.iter().zip(done) {
            match d {
                Some(located) => out[k] = Some(located),
                None => host.push((k, codec)),
            }
        }
        Ok(())
    };
    if let (Some(n), false) = (&nvcomp, nv.is_empty()) {
        let codec = NvcompBatched { nv: n };
        on_device(&codec, Some("nvCOMP decompression"), &nv, &mut host)?;
    }
    if !gzip.is_empty() {
        on_device(&InflateKernel, Some("GZIP decompression"), &gzip, &mut host)?;
    }
    if !snappy.is_empty() {
        let pages = snappy.iter().flat_map(|&(k, _)| tables[cis[k]].iter());
        let (total, largest) = pages.fold((0u64, 0u64), |(t, m), p| {
            let n = p.uncompressed_size.max(0) as u64;
            (t + n, m.max(n))
        });
        if snappy_on_host(placement, total, largest, rayon::current_num_threads()) {
            host.append(&mut snappy);
        }
    }
    if !snappy.is_empty() {
        on_device(&SnappyKernel, None, &snappy, &mut host)?;
    }
    if !host.is_empty() {
        let gpu = Arc::clone(buf.gpu());
        // a large SNAPPY page is split over cores only where there are too few of them to
        // keep the cores busy (splitting costs about twice the CPU time)
        let large = host
            .iter()
            .flat_map(|&(k, _)| tables[cis[k]].iter())
            .filter(|p| {
                p.uncompressed_size.max(0) as usize >= crate::decode::snappy_host::PARALLEL_MIN
            })
            .count();
        let split = large * 4 <= rayon::current_num_threads();
        let done: Vec<Result<(usize, PageLocations, DeviceBuffer)>> =
            timed("host decompression and upload", || {
                host.par_iter()
                    .enumerate()
                    .map(|(i, &(k, codec))| {
                        let ci = cis[k];
                        let stream = &gpu.streams()[i % gpu.streams().len()];
                        host_decompress_chunk(chunks, ci, codec, split, stream, &|e| fail(ci, e))
                            .map(|(locs, up)| (k, locs, up))
                    })
                    .collect()
            });
        for d in done {
            let (k, locs, up) = d?;
            out[k] = Some(locs);
            uploads.push(up);
        }
    }
    Ok(out.into_iter().map(|o| o.unwrap_or_default()).collect())
}

/// Chunk `ci`'s pages decompressed on the host and uploaded: its bytes copied back, its page
/// table parsed by the host twin, every page decompressed (in parallel) straight into its place
/// in a pinned buffer (large SNAPPY pages split over cores when `split`), which is copied on
/// `stream` into a device buffer of the chunk's own. Index pages get an empty span.
fn host_decompress_chunk(
    chunks: &DeviceChunks,
    ci: usize,
    codec: parquet::basic::Compression,
    split: bool,
    stream: &crate::device::Stream,
    fail: &(dyn Fn(String) -> Error + Sync),
) -> Result<(PageLocations, DeviceBuffer)> {
    let gpu = chunks.buffer().gpu();
    // the chunk's bytes back into a pooled pinned buffer (a faster copy than into fresh
    // pageable memory, and no page faults)
    let c = &chunks.chunks()[ci];
    let len = c.dest_len() as usize;
    let mut src = gpu.pinned(len)?;
    chunks
        .buffer()
        .copy_into(c.dest_offset as usize, &mut src.as_mut_slice()[..len])?;
    let parts: Vec<std::ops::Range<usize>> = c
        .read_parts()
        .iter()
        .map(|p| p.dest as usize..(p.dest + p.file.end - p.file.start) as usize)
        .collect();
    let result = decompress_and_upload(
        &src.as_slice()[..len],
        &parts,
        gpu,
        codec,
        split,
        stream,
        fail,
    );
    gpu.recycle_pinned(src);
    result
}

/// The pages of one chunk's `bytes` (its slice of the destination; the pages in its parts
/// read, `parts`), decompressed into a
/// pinned buffer and uploaded (see [`host_decompress_chunk`]).
fn decompress_and_upload(
    bytes: &[u8],
    parts: &[std::ops::Range<usize>],
    gpu: &Arc<crate::device::Gpu>,
    codec: parquet::basic::Compression,
    split: bool,
    stream: &crate::device::Stream,
    fail: &(dyn Fn(String) -> Error + Sync),
) -> Result<(PageLocations, DeviceBuffer)> {
    use crate::decode::decompress::{decompress_page_into, decompressed_size};
    use crate::decode::page_header::PageKind;
    use rayon::prelude::*;
    let entries = crate::decode::page_header::page_table_of_parts(bytes, parts.iter().cloned())
        .map_err(|e| fail(e.to_string()))?;
    let sizes = entries
        .iter()
        .enumerate()
        .map(|(i, p)| match p.header.kind {
            PageKind::Index => Ok(0),
            _ => decompressed_size(bytes, i, p, codec),
        })
        .collect::<std::result::Result<Vec<usize>, _>>()
        .map_err(|e| fail(e.to_string()))?;
    let len: usize = sizes.iter().sum();
    // the sizes come from the page headers: a failed allocation names the chunk that asked
    let room = |e: Error| {
        fail(format!(
            "its page headers promise {len} bytes of decompressed pages, which could not be allocated: {e}"
        ))
    };
    let up = gpu.alloc(len).map_err(room)?;
    let mut spans = vec![(0u64, 0u64); entries.len()];
    if len == 0 {
        return Ok(((spans, PageCounts::default()), up));
    }
    let mut pinned = gpu.pinned(len).map_err(room)?;
    let mut parts = Vec::with_capacity(entries.len());
    let mut rest = &mut pinned.as_mut_slice()[..len];
    let mut at = 0u64;
    for (i, (p, &n)) in entries.iter().zip(&sizes).enumerate() {
        if p.header.kind == PageKind::Index {
            continue;
        }
        let (mine, tail) = rest.split_at_mut(n);
        spans[i] = (up.device_ptr() + at, n as u64);
        parts.push((i, mine));
        at += n as u64;
        rest = tail;
    }
    let flags: Vec<std::result::Result<bool, _>> = parts
        .into_par_iter()
        .map(|(i, out)| decompress_page_into(bytes, i, &entries[i], codec, out, split))
        .collect();
    let mut host_pages = 0;
    for f in flags {
        host_pages += usize::from(f.map_err(|e| fail(e.to_string()))?);
    }
    pinned.copy_to_device(0..len, &up, 0, stream)?;
    gpu.recycle_pinned(pinned);
    let counts = PageCounts {
        host: host_pages,
        ..PageCounts::default()
    };
    Ok(((spans, counts), up))
}
