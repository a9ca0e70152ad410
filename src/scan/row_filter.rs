//! The exact row filter ([`ScanBuilder::with_row_filter`](super::ScanBuilder::with_row_filter))
//! applied to each wave's batches as they are decoded: host batches by arrow-rs, device
//! batches by the GPU's predicate and compaction kernels. Batches left with no row are
//! dropped.

use arrow::datatypes::SchemaRef;

use super::ReaderState;
use crate::array::{LoadedBatch, Location};
use crate::decode::gpu::DeviceKept;
use crate::error::{Error, Result};

impl ReaderState {
    /// The schema of the batches the reader yields: without the columns read for the row
    /// filter only.
    pub(super) fn out_schema(&self) -> &SchemaRef {
        match (&self.views, &self.row_filter) {
            (Some(v), _) => v,
            (None, Some(f)) => f.out_schema(),
            (None, None) => self.decoder.schema(),
        }
    }

    /// `batches` with only the rows the row filter keeps (unchanged without one).
    pub(super) fn filter_rows(&self, batches: Vec<LoadedBatch>) -> Result<Vec<LoadedBatch>> {
        let Some(f) = &self.row_filter else {
            return Ok(batches);
        };
        let mut out = Vec::with_capacity(batches.len());
        for b in batches {
            let at = b.rows().first().map(|r| r.row_group);
            let kept = match (b.as_host(), b.as_device(), b.location()) {
                (Some(h), ..) => f.apply(h).map(|h| b.replace_host(h)),
                (None, Some(d), Location::Cuda(ordinal)) => {
                    match crate::decode::gpu::filter_device(f, d, ordinal) {
                        Ok(DeviceKept::Nothing) => continue,
                        Ok(DeviceKept::All) => Ok(b),
                        Ok(DeviceKept::Some(d)) => Ok(b.replace_device(d)),
                        Err(e) => Err(e),
                    }
                }
                _ => Ok(b),
            }
            .map_err(|e| match e {
                Error::Decode {
                    path,
                    row_group: None,
                    column,
                    reason,
                } => Error::Decode {
                    path,
                    row_group: at,
                    column,
                    reason,
                },
                e => e,
            })?;
            if kept.num_rows() > 0 {
                out.push(kept);
            }
        }
        Ok(out)
    }
}
