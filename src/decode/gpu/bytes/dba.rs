//! The DELTA_BYTE_ARRAY stage of a wave's byte-array decoder: the values of its pages put
//! together on the device, a page's values spread over blocks in segments (`dba_values`,
//! `dba_chain`, `dba_fill` in decode_bytes.cu).

use super::Stages;
use crate::decode::gpu::kernels::{
    PageJob, DBA_CHAIN, DBA_FILL, DBA_SEGMENT, DBA_THREADS, DBA_VALUES,
};
use crate::decode::gpu::launch::{u32s, u64s, u64s_from_device, upload, Const, Mut};
use crate::decode::gpu::page_jobs::PageName;
use crate::device::DeviceBuffer;
use crate::error::{Error, Result};

impl Stages<'_> {
    /// The values of the DELTA_BYTE_ARRAY pages put together in one scratch (each page's part
    /// sized by `bytes_sizes` in `info`), and their rows' sources pointed there; returns the
    /// scratch and what the launch read, kept until the characters are copied.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dba_values(
        &self,
        page_jobs: &[PageJob],
        page_names: &[PageName],
        pages_buf: &DeviceBuffer,
        idx: &DeviceBuffer,
        aux: DeviceBuffer,
        src: &DeviceBuffer,
        base_buf: &DeviceBuffer,
        info: DeviceBuffer,
    ) -> Result<[DeviceBuffer; 6]> {
        let gpu = self.gpu;
        let sizes = u64s_from_device(&info, page_jobs.len() * 4)?;
        let mut at = 0u64;
        let mut starts = Vec::with_capacity(page_jobs.len());
        for (k, p) in page_jobs.iter().enumerate() {
            let bytes = if p.encoding == 7 { sizes[4 * k] } else { 0 };
            if bytes > u64::from(u32::MAX) {
                let (rg, col, page) = &page_names[k];
                return Err(Error::Decode {
                    path: self.path.to_path_buf(),
                    row_group: Some(*rg),
                    column: Some(col.clone()),
                    reason: format!(
                        "page {page} (DELTA_BYTE_ARRAY): its values hold {bytes} bytes, more \
                         than the GPU decoder takes from one page (4 GiB)"
                    ),
                });
            }
            starts.push(at);
            at += bytes;
        }
        let scratch = gpu.alloc((at as usize).max(1))?;
        let page_out = upload(
            gpu,
            &u64s(page_jobs.iter().zip(&starts).map(|(p, &s)| {
                if p.encoding == 7 {
                    scratch.device_ptr() + s
                } else {
                    0
                }
            })),
        )?;
        // each DELTA_BYTE_ARRAY page's rows in segments of DBA_SEGMENT, a block each (its values
        // are at most its rows): the blocks' (page, segment) table
        let table = dba_blocks(page_jobs);
        let n_blocks = table.len() / 2;
        let blocks = u32::try_from(n_blocks)
            .ok()
            .filter(|&b| b < i32::MAX as u32)
            .ok_or_else(|| Error::Decode {
                path: self.path.to_path_buf(),
                row_group: None,
                column: None,
                reason: format!(
                    "too many pages: {n_blocks} blocks of DELTA_BYTE_ARRAY values in one launch"
                ),
            })?;
        let blocks_buf = upload(gpu, &u32s(table))?;
        let unres = gpu.alloc(idx.len().max(4))?;
        let pages = page_jobs.len() as i32;
        // SAFETY: one block per segment of DBA_SEGMENT rows of each DELTA_BYTE_ARRAY page job
        // (the table's pages and segments in range); a page's blocks write only their values'
        // bytes in its part of `scratch` (`info`'s size for it, which `bytes_sizes` summed from
        // the lengths it checked; each value's offset and length from that kernel), their
        // values' entries of `unres` and their rows of `src` (1 u32 and 2 u64 per row from its
        // base, as `idx` and `aux`); all buffers live until the waited launch of `dba_fill`.
        unsafe {
            DBA_VALUES.launch_nowait(
                gpu,
                self.module,
                blocks,
                DBA_THREADS,
                (
                    Const::at(pages_buf.device_ptr()),
                    Const::at(idx.device_ptr()),
                    Const::at(aux.device_ptr()),
                    Mut::at(unres.device_ptr()),
                    Mut::at(src.device_ptr()),
                    Const::at(base_buf.device_ptr()),
                    Const::at(info.device_ptr()),
                    Const::at(page_out.device_ptr()),
                    Const::at(blocks_buf.device_ptr()),
                ),
            )?
        };
        // SAFETY: a thread per page job, the same buffers (each page's segment ends inside its
        // values), after the launch above on the same stream.
        unsafe {
            DBA_CHAIN.launch_nowait(
                gpu,
                self.module,
                (page_jobs.len() as u32).div_ceil(128),
                128,
                (
                    Const::at(pages_buf.device_ptr()),
                    Const::at(aux.device_ptr()),
                    Const::at(unres.device_ptr()),
                    Const::at(base_buf.device_ptr()),
                    Const::at(info.device_ptr()),
                    Const::at(page_out.device_ptr()),
                    pages,
                ),
            )?
        };
        // SAFETY: as the first launch, after the two above on the same stream; waited for.
        unsafe {
            DBA_FILL.launch(
                gpu,
                self.module,
                blocks,
                DBA_THREADS,
                (
                    Const::at(pages_buf.device_ptr()),
                    Const::at(aux.device_ptr()),
                    Const::at(unres.device_ptr()),
                    Const::at(base_buf.device_ptr()),
                    Const::at(info.device_ptr()),
                    Const::at(page_out.device_ptr()),
                    Const::at(blocks_buf.device_ptr()),
                ),
            )?
        };
        Ok([scratch, page_out, aux, info, unres, blocks_buf])
    }
}

/// The blocks of `dba_values` and `dba_fill`: (page, segment) for every segment of
/// DBA_SEGMENT values of each DELTA_BYTE_ARRAY page (encoding 7) of `page_jobs`, in order (at
/// least one for each such page; the stage runs only where there is one).
pub(crate) fn dba_blocks(page_jobs: &[PageJob]) -> Vec<u32> {
    let mut table = Vec::new();
    for (k, p) in page_jobs.iter().enumerate() {
        if p.encoding == 7 {
            let segs = (p.num_values.max(0) as u64).div_ceil(DBA_SEGMENT).max(1);
            for s in 0..segs {
                table.extend([k as u32, s as u32]);
            }
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_the_delta_byte_array_pages_segments_only() {
        let page = |encoding, num_values| PageJob {
            encoding,
            num_values,
            ..PageJob::default()
        };
        let s = DBA_SEGMENT as i32;
        // a PLAIN page, a DBA page of 2.5 segments, a dictionary page, an empty DBA page
        let jobs = [page(0, 5000), page(7, 2 * s + s / 2), page(8, 10), page(7, 0)];
        assert_eq!(dba_blocks(&jobs), vec![1, 0, 1, 1, 1, 2, 3, 0]);
        assert!(dba_blocks(&jobs[..1]).is_empty());
    }
}
