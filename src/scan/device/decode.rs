//! A device load's decoding: a wave's column chunks, in device memory, decoded there by the GPU
//! decoder ([`decode_wave`]) into the wave's batches, each saying which rows of which row
//! groups it holds.

use std::path::Path;
use std::sync::Arc;

use super::timeline::profile_requested;
use super::DeviceLoad;
use crate::array::{LoadedBatch, RowSpan};
use crate::decode::gpu::{decode_wave, DeviceChunks, GpuDecodeReport, SnappyPlacement, WaveInput};
use crate::error::{Error, Result};
use crate::plan::{BatchSpan, ReadPlan};
use crate::scan::waves::Wave;

impl DeviceLoad<'_> {
    /// [`Self::decode_part`] of the chunks of `wave` (of its piece's plan, for a piece of a
    /// row group); `beside_reads`: other waves are read meanwhile
    /// ([`SnappyPlacement::beside_reads`]).
    pub(super) fn decode_wave(
        &self,
        chunks: &DeviceChunks,
        wave: &Wave,
        beside_reads: bool,
    ) -> Result<(Vec<LoadedBatch>, GpuDecodeReport)> {
        let snappy = if beside_reads {
            self.snappy.beside_reads()
        } else {
            self.snappy
        };
        let (plan, spans) = match &wave.piece {
            Some(p) => (&*p.plan, p.spans.clone()),
            None => (self.plan, self.spans_of(&wave.row_groups)),
        };
        self.decode_rows(chunks, &wave.row_groups, plan, spans, snappy)
    }

    /// Decodes `chunks`, holding every planned chunk of the row groups `row_groups` (a wave of
    /// the load, or the whole plan), into their batches.
    pub(in crate::scan) fn decode_part(
        &self,
        chunks: &DeviceChunks,
        row_groups: &[usize],
    ) -> Result<(Vec<LoadedBatch>, GpuDecodeReport)> {
        let spans = self.spans_of(row_groups);
        self.decode_rows(chunks, row_groups, self.plan, spans, self.snappy)
    }

    /// The batches of the row groups `row_groups` (ascending): those whose first part is one
    /// of them.
    fn spans_of(&self, row_groups: &[usize]) -> Vec<BatchSpan> {
        crate::plan::spans_of(self.spans, row_groups)
    }

    /// Decodes `chunks`, the chunks of `plan` (the load's, or a piece's) for `row_groups`,
    /// into the batches `spans`, SNAPPY pages placed by `snappy`.
    fn decode_rows(
        &self,
        chunks: &DeviceChunks,
        row_groups: &[usize],
        plan: &ReadPlan,
        spans: Vec<BatchSpan>,
        snappy: SnappyPlacement,
    ) -> Result<(Vec<LoadedBatch>, GpuDecodeReport)> {
        let input = WaveInput {
            path: self.file.path(),
            metadata: self.metadata,
            leaves: &plan.leaves,
            rows: plan.rows.as_ref(),
            decoder: self.decoder,
            snappy,
            host_share: self.tuning.host_share,
            profile: profile_requested(),
        };
        let (batches, report) = decode_wave(&input, chunks, row_groups, &spans)?;
        let ordinal = chunks.buffer().gpu().ordinal();
        let batches = batches
            .into_iter()
            .zip(spans)
            // a batch the footer's disagreeing counts left empty (as the host load drops it)
            .filter(|(b, span)| b.num_rows > 0 || span.num_rows() == 0)
            .map(|(b, span)| {
                // the rows decoded: fewer than planned only where the footer's counts disagree
                // (decoded on the host, capped by the file's rows as arrow-rs does)
                let mut left = b.num_rows as u64;
                let rows = span
                    .parts
                    .into_iter()
                    .filter_map(|p| {
                        let n = (p.rows.end - p.rows.start).min(left);
                        left -= n;
                        (n > 0).then(|| RowSpan {
                            row_group: p.row_group,
                            rows: p.rows.start..p.rows.start + n,
                        })
                    })
                    .collect();
                LoadedBatch::device(b, ordinal, Arc::clone(self.path), rows)
            })
            .collect();
        Ok((batches, report))
    }
}

/// An error unless `chunks` hold exactly `plan`'s requests (of the file at `path`): chunks a
/// caller hands back to be decoded ([`FileScan::decode_on_gpu`](crate::scan::FileScan::decode_on_gpu),
/// [`FileScan::decode_on_host`](crate::scan::FileScan::decode_on_host)).
pub(in crate::scan) fn check_chunks(
    plan: &ReadPlan,
    path: &Path,
    chunks: &DeviceChunks,
) -> Result<()> {
    let same = chunks.buffer().len() as u64 == plan.request_bytes()
        && chunks.chunks().len() == plan.chunks.len()
        && chunks
            .chunks()
            .iter()
            .zip(&plan.chunks)
            .all(|(a, b)| a.range == b.range && a.dest_offset == b.dest_offset);
    if same {
        return Ok(());
    }
    Err(Error::Device {
        device: format!("cuda:{}", chunks.buffer().gpu().ordinal()),
        reason: format!(
            "these device chunks were not loaded by this reader's plan of {}",
            path.display()
        ),
    })
}
