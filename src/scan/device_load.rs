//! Device loads: the plan's requests read into device memory (in one pass, or in pipelined
//! waves), then decoded there by the GPU decoder, a wave at a time ([`decode_wave`]).

use std::sync::Arc;

use super::timeline::profile_requested;
use super::ReaderState;
use crate::array::{LoadedBatch, Location, RowSpan};
use crate::decode::gpu::{decode_wave, DeviceChunks, GpuDecodeReport, WaveInput};
use crate::device;
use crate::error::{Error, Result};
use crate::io::{Dest, IoReport, RangeReader};
use crate::plan::{ColumnChunkPlan, IoRequest};

impl ReaderState {
    /// [`FileScan::load_chunks`](super::FileScan::load_chunks).
    pub(super) fn load_chunks(&self) -> Result<(DeviceChunks, IoReport)> {
        match (&self.gpu_reader, self.device.location) {
            (Some(g), Location::Cuda(n)) => self.read_chunks(g, n),
            _ => Err(Error::Device {
                device: self.device.location.to_string(),
                reason: format!(
                    "load_chunks needs a reader built for a CUDA device ({})",
                    self.device.reason
                ),
            }),
        }
    }

    pub(super) fn read_chunks(
        &self,
        reader: &dyn RangeReader,
        ordinal: usize,
    ) -> Result<(DeviceChunks, IoReport)> {
        let plan = &self.plan;
        let mut buffer = device::gpu(ordinal)?.alloc(plan.request_bytes() as usize)?;
        let io = reader.read(&self.file, &plan.requests, Dest::Device(&mut buffer))?;
        Ok((DeviceChunks::new(Arc::new(buffer), plan.chunks.clone()), io))
    }

    /// Reads the requests of `wave` into a device allocation of their own (while the waves
    /// before decode: [`RangeReader::read_beside`]): its chunks, rebased.
    pub(super) fn read_wave(
        &self,
        reader: &dyn RangeReader,
        ordinal: usize,
        wave: &super::waves::Wave,
    ) -> Result<(DeviceChunks, IoReport)> {
        let (requests, chunks, bytes) = self.wave_layout(wave);
        let mut buffer = device::gpu(ordinal)?.alloc(bytes as usize)?;
        // the decoders of the waves before run meanwhile: leave them some cores
        let io = reader.read_beside(&self.file, &requests, Dest::Device(&mut buffer))?;
        Ok((DeviceChunks::new(Arc::new(buffer), chunks), io))
    }

    /// The requests and chunks of `wave` in an allocation of its own (offsets from its first
    /// request's), and that allocation's bytes.
    pub(super) fn wave_layout(
        &self,
        wave: &super::waves::Wave,
    ) -> (Vec<IoRequest>, Vec<ColumnChunkPlan>, u64) {
        let plan = wave.plan(&self.plan);
        let base = plan
            .requests
            .get(wave.requests.start)
            .map_or(0, |r| r.dest_offset);
        let requests: Vec<IoRequest> = plan.requests[wave.requests.clone()]
            .iter()
            .map(|r| IoRequest {
                range: r.range.clone(),
                dest_offset: r.dest_offset - base,
                chunks: r.chunks.iter().map(|c| c - wave.chunks.start).collect(),
            })
            .collect();
        let bytes: u64 = requests.iter().map(|r| r.len()).sum();
        let chunks = plan.chunks[wave.chunks.clone()]
            .iter()
            .map(|c| {
                let mut c = c.clone();
                c.dest_offset -= base;
                c
            })
            .collect();
        (requests, chunks, bytes)
    }

    /// An error unless `chunks` hold exactly this reader's plan.
    pub(super) fn check_chunks(&self, chunks: &DeviceChunks) -> Result<()> {
        let plan = &self.plan;
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
                self.file.path().display()
            ),
        })
    }

    /// [`FileScan::decode_on_gpu`](super::FileScan::decode_on_gpu).
    pub(super) fn decode_on_gpu(
        &self,
        chunks: &DeviceChunks,
    ) -> Result<(Vec<LoadedBatch>, GpuDecodeReport)> {
        self.check_chunks(chunks)?;
        let (batches, report) = self.decode_part(chunks, &self.plan.row_groups)?;
        Ok((self.with_views(batches)?, report))
    }

    /// [`Self::decode_part`] of the chunks of `wave` (of its piece's plan, for a piece of a
    /// row group); `beside_reads`: other waves are read meanwhile
    /// ([`SnappyPlacement::beside_reads`](crate::decode::gpu::SnappyPlacement::beside_reads)).
    pub(super) fn decode_wave(
        &self,
        chunks: &DeviceChunks,
        wave: &super::waves::Wave,
        beside_reads: bool,
    ) -> Result<(Vec<LoadedBatch>, GpuDecodeReport)> {
        let snappy = if beside_reads {
            self.snappy.beside_reads()
        } else {
            self.snappy
        };
        let (plan, spans) = match &wave.piece {
            Some(p) => (&*p.plan, p.spans.clone()),
            None => (&self.plan, self.spans_of(&wave.row_groups)),
        };
        self.decode_rows(chunks, &wave.row_groups, plan, spans, snappy)
    }

    /// [`Self::decode_on_gpu`] of `chunks` holding every planned chunk of the
    /// row groups `row_groups` (a wave of a pipelined load, or the whole plan).
    pub(super) fn decode_part(
        &self,
        chunks: &DeviceChunks,
        row_groups: &[usize],
    ) -> Result<(Vec<LoadedBatch>, GpuDecodeReport)> {
        self.decode_rows(
            chunks,
            row_groups,
            &self.plan,
            self.spans_of(row_groups),
            self.snappy,
        )
    }

    /// Decodes `chunks`, the chunks of `plan` (the load's, or a piece's) for `row_groups`,
    /// into the batches `spans`, SNAPPY pages placed by `snappy`.
    fn decode_rows(
        &self,
        chunks: &DeviceChunks,
        row_groups: &[usize],
        plan: &crate::plan::ReadPlan,
        spans: Vec<crate::plan::BatchSpan>,
        snappy: crate::decode::gpu::SnappyPlacement,
    ) -> Result<(Vec<LoadedBatch>, GpuDecodeReport)> {
        let input = WaveInput {
            path: self.file.path(),
            metadata: &self.meta.metadata,
            leaves: &plan.leaves,
            rows: plan.rows.as_ref(),
            decoder: &self.decoder,
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
                LoadedBatch::device(b, ordinal, Arc::clone(&self.path), rows)
            })
            .collect();
        Ok((batches, report))
    }
}
