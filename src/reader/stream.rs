//! The stream of batches ([`ParquetGpuReader::batches`]): the plan read and decoded step by
//! step, each step a wave of whole row groups ([`stream_waves`]), its batches handed over one by
//! one before the next step's are decoded. On a device the next step is read while the current
//! one decodes; the first step is small, so that the first batch comes early.

use std::collections::VecDeque;

use rayon::prelude::*;

use super::waves::{waves, Wave};
use super::ParquetGpuReader;
use crate::array::{LoadedBatch, Location};
use crate::decode::gpu::DeviceChunks;
use crate::error::Result;
use crate::io::{IoReport, RangeReader};
use crate::plan::ReadPlan;

/// Bytes read by the first step of a stream: a small one, so the first batch is in the
/// caller's hands early (one row group when row groups are larger).
pub(super) const FIRST_STEP_BYTES: u64 = 32 << 20;

/// Bytes read by each later step of a stream: large enough to keep the device busy, small
/// enough that a step's reads and decoding overlap well.
pub(super) const STEP_BYTES: u64 = 256 << 20;

/// The steps of a stream over `plan`: a first wave of about [`FIRST_STEP_BYTES`], then waves
/// of about `step` bytes, all of whole row groups and whole batches (`ends(rg)`: a batch ends
/// with row group `rg`); one step for everything when the plan's units cannot be cut between
/// row groups.
pub(super) fn stream_waves(plan: &ReadPlan, step: u64, ends: &dyn Fn(usize) -> bool) -> Vec<Wave> {
    let small = waves(plan, FIRST_STEP_BYTES.min(step), ends);
    let Some(first) = small.first() else {
        return waves(plan, u64::MAX, ends);
    };
    let mut out = vec![first.clone()];
    // the rest, regrouped into waves of `step` bytes
    let mut cur: Option<Wave> = None;
    for w in &small[1..] {
        let c = cur.get_or_insert_with(|| Wave {
            row_groups: Vec::new(),
            chunks: w.chunks.start..w.chunks.start,
            requests: w.requests.start..w.requests.start,
            bytes: 0,
        });
        c.row_groups.extend_from_slice(&w.row_groups);
        c.chunks.end = w.chunks.end;
        c.requests.end = w.requests.end;
        c.bytes += w.bytes;
        if c.bytes >= step {
            out.extend(cur.take());
        }
    }
    out.extend(cur);
    out
}

/// A stream of batches: see [`ParquetGpuReader::batches`]. Yields `Err` at most once, then
/// ends.
pub struct Batches<'r> {
    reader: &'r ParquetGpuReader,
    io: &'r dyn RangeReader,
    steps: Vec<Wave>,
    /// The next step to decode.
    next: usize,
    ready: VecDeque<LoadedBatch>,
    /// On a device: the next step's chunks, read while the current one decoded.
    prefetched: Option<Result<(DeviceChunks, IoReport)>>,
    /// What the steps so far read.
    io_report: IoReport,
    bytes_done: u64,
    row_groups_done: usize,
    done: bool,
}

impl std::fmt::Debug for Batches<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batches")
            .field("steps", &self.steps.len())
            .field("next", &self.next)
            .field("ready", &self.ready.len())
            .finish_non_exhaustive()
    }
}

impl<'r> Batches<'r> {
    pub(super) fn new(reader: &'r ParquetGpuReader, io: &'r dyn RangeReader) -> Self {
        let steps = stream_waves(&reader.plan, STEP_BYTES, &|rg| reader.batch_ends(rg));
        Batches {
            reader,
            io,
            steps,
            next: 0,
            ready: VecDeque::new(),
            prefetched: None,
            io_report: IoReport::default(),
            bytes_done: 0,
            row_groups_done: 0,
            done: false,
        }
    }

    /// What the stream has read so far.
    pub fn io_report(&self) -> &IoReport {
        &self.io_report
    }

    /// Reads and decodes the next step into `ready`.
    fn step(&mut self) -> Result<()> {
        let r = self.reader;
        let i = self.next;
        self.next += 1;
        let wave = &self.steps[i];
        let batches = match r.device.location {
            Location::Cuda(ordinal) => {
                let (chunks, io) = match self.prefetched.take() {
                    Some(p) => p?,
                    None => r.read_wave(self.io, ordinal, wave)?,
                };
                self.io_report.absorb(io);
                // the next step read while this one decodes; not beside the first, which
                // should reach the caller as soon as it can
                let after = if i == 0 { None } else { self.steps.get(i + 1) };
                let reader = self.io;
                let (decoded, prefetched) = std::thread::scope(|s| {
                    let h = after.map(|w| s.spawn(move || r.read_wave(reader, ordinal, w)));
                    let d = r.decode_part(&chunks, &wave.row_groups);
                    let p = h.map(|h| {
                        h.join().unwrap_or_else(|_| {
                            Err(crate::error::Error::Decode {
                                path: r.file.path().to_path_buf(),
                                row_group: after.and_then(|w| w.row_groups.first().copied()),
                                column: None,
                                reason: "the thread reading the next step panicked".into(),
                            })
                        })
                    });
                    (d, p)
                });
                drop(chunks);
                self.prefetched = prefetched;
                decoded?.0
            }
            Location::Host => {
                let plan = &r.plan;
                let units: Vec<_> = plan
                    .units
                    .iter()
                    .filter(|u| {
                        u.requests.start >= wave.requests.start
                            && u.requests.end <= wave.requests.end
                            && !u.requests.is_empty()
                    })
                    .collect();
                let io = self.io;
                let results: Vec<Result<_>> = r
                    .host_reader
                    .pool()
                    .install(|| units.par_iter().map(|u| r.load_unit(io, u)).collect());
                let mut parts = Vec::new();
                for res in results {
                    let res = res?;
                    parts.extend(res.parts);
                    self.io_report.absorb(res.io);
                }
                r.join_fields(parts)?
            }
        };
        self.bytes_done += wave.bytes;
        self.row_groups_done += wave.row_groups.len();
        r.notify(self.bytes_done, self.row_groups_done);
        self.ready.extend(batches);
        Ok(())
    }
}

impl Iterator for Batches<'_> {
    type Item = Result<LoadedBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(b) = self.ready.pop_front() {
                return Some(Ok(b));
            }
            if self.done || self.next >= self.steps.len() {
                self.done = true;
                return None;
            }
            if let Err(e) = self.step() {
                self.done = true;
                self.prefetched = None;
                return Some(Err(e));
            }
        }
    }
}

impl ParquetGpuReader {
    /// The batches of the plan as a stream: read and decoded step by step (a small first
    /// step, then steps of whole row groups), each batch handed over as soon as its step is
    /// decoded; on a device the next step is read while the current one decodes. Yields the
    /// batches [`load`](Self::load) returns, in the same order: about
    /// [`with_batch_rows`](super::ReaderBuilder::with_batch_rows) rows each, whole small row
    /// groups gathered, large ones cut; each says which rows of which row groups it holds
    /// ([`LoadedBatch::rows`]).
    pub fn batches(&self) -> Batches<'_> {
        match &self.gpu_reader {
            Some(g) => Batches::new(self, g),
            None => Batches::new(self, &self.host_reader),
        }
    }

    /// Like [`batches`](Self::batches), reading through `reader` (e.g. a recording reader).
    pub fn batches_with<'r>(&'r self, reader: &'r dyn RangeReader) -> Batches<'r> {
        Batches::new(self, reader)
    }
}
