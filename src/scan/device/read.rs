//! A device load's reads: the plan's requests (or a wave's) read into an allocation of
//! device memory, as column chunks still encoded.

use std::sync::Arc;

use super::DeviceLoad;
use crate::decode::gpu::DeviceChunks;
use crate::device;
use crate::error::Result;
use crate::io::{Dest, IoReport, RangeReader};
use crate::plan::{ColumnChunkPlan, IoRequest};
use crate::scan::waves::Wave;

impl DeviceLoad<'_> {
    /// Reads every planned request into one allocation: the column chunks, still encoded
    /// ([`FileScan::load_chunks`](crate::scan::FileScan::load_chunks)).
    pub(in crate::scan) fn read_chunks(
        &self,
        reader: &dyn RangeReader,
    ) -> Result<(DeviceChunks, IoReport)> {
        let plan = self.plan;
        let mut buffer = device::gpu(self.ordinal)?.alloc(plan.request_bytes() as usize)?;
        let io = reader.read(self.file, &plan.requests, Dest::Device(&mut buffer))?;
        Ok((DeviceChunks::new(Arc::new(buffer), plan.chunks.clone()), io))
    }

    /// Reads the requests of `wave` into a device allocation of their own (while the waves
    /// before decode: [`RangeReader::read_beside`]): its chunks, rebased.
    pub(super) fn read_wave(
        &self,
        reader: &dyn RangeReader,
        wave: &Wave,
    ) -> Result<(DeviceChunks, IoReport)> {
        let (requests, chunks, bytes) = self.wave_layout(wave);
        let mut buffer = device::gpu(self.ordinal)?.alloc(bytes as usize)?;
        // the decoders of the waves before run meanwhile: leave them some cores
        let io = reader.read_beside(self.file, &requests, Dest::Device(&mut buffer))?;
        Ok((DeviceChunks::new(Arc::new(buffer), chunks), io))
    }

    /// The requests and chunks of `wave` in an allocation of its own (offsets from its first
    /// request's), and that allocation's bytes.
    pub(super) fn wave_layout(
        &self,
        wave: &Wave,
    ) -> (Vec<IoRequest>, Vec<ColumnChunkPlan>, u64) {
        let plan = wave.plan(self.plan);
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
}
