//! The stream of one file's batches ([`FileScan::stream`]): the plan read and decoded wave by
//! wave by a producer thread (on a device, the pipelined reads and decoders of
//! [`ReaderState::pipelined`]), each wave's batches handed to the caller, in order, as soon as
//! the wave before has been. The first wave is small ([`stream_waves`]), so that the first
//! batch comes early; at most [`WAVES_AHEAD`] decoded waves wait for the caller.

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::budget::{Budgeted, Handed};
use super::waves::{wave_target, waves, Wave, WaveOut};
use super::{FileScan, ReaderState};
use crate::array::{LoadedBatch, Location};
use crate::decode::gpu::GpuDecodeReport;
use crate::error::{Error, Result};
use crate::io::{IoReport, RangeReader};
use crate::plan::ReadPlan;

/// Bytes read by the first wave of a stream at least: one, so the first wave holds the row
/// groups of the first batch and no more, and the first batch is in the caller's hands as
/// early as its own reads and decoding allow. Measured on the H200 (benches/RESULTS.md, with
/// the streamed reads' 10 readers of 16): the 24M-row SNAPPY lineitem file's first batch in
/// 10–12 ms (best of 5) from a first wave of one row group, 15 ms from one of 32 MiB (two).
pub(super) const FIRST_STEP_BYTES: u64 = 1;

/// Bytes per wave of a host stream.
pub(super) const HOST_STEP_BYTES: u64 = 256 << 20;

/// Decoded waves that may wait for the caller before the decoders stop.
pub(super) const WAVES_AHEAD: usize = 2;

/// The waves of a stream over `plan`: a first wave of about `first` bytes
/// ([`FIRST_STEP_BYTES`]), then waves of about `step` bytes, all of whole row groups and whole batches (`ends(rg)`: no batch goes
/// on after row group `rg`); one wave of everything when the plan's units cannot be cut
/// between row groups.
pub(super) fn stream_waves(
    plan: &ReadPlan,
    first: u64,
    step: u64,
    ends: &dyn Fn(usize) -> bool,
) -> Vec<Wave> {
    let small = waves(plan, first.min(step), ends);
    let Some(first) = small.first() else {
        return vec![Wave::whole(plan)];
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
            piece: None,
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

impl ReaderState {
    /// The waves of a device load: the passes of a memory budget the load does not fit at
    /// once; else of [`wave_target`] bytes for a load (`first_small`: false), with a small
    /// first one for a stream; one wave of everything when the plan cannot be cut.
    pub(super) fn device_waves(&self, first_small: bool) -> Vec<Wave> {
        if let Some(waves) = &self.budget_waves {
            return waves.clone();
        }
        let plan = &self.plan;
        // chunks decompressed by the device (SNAPPY unless sent to the host; GZIP; ZSTD and
        // LZ4 where nvCOMP is installed): their waves overlap reads with kernels;
        // host-decompressed codecs keep the cores busy that the reads need, and measured
        // slower in waves
        let md = &self.meta.metadata;
        let (mut device_compressed, mut host_compressed) = (0u64, 0u64);
        for c in &plan.chunks {
            let codec = md.row_group(c.row_group).column(c.column).compression();
            if codec == parquet::basic::Compression::UNCOMPRESSED {
                continue;
            }
            if crate::decode::gpu::device_decompresses(codec) {
                device_compressed += c.len();
            } else {
                host_compressed += c.len();
            }
        }
        let target = wave_target(
            plan.request_bytes(),
            device_compressed,
            host_compressed,
            self.tuning.wave_bytes,
        );
        let ends = |rg| self.batch_ends(rg);
        let w = if first_small {
            stream_waves(plan, FIRST_STEP_BYTES, target, &ends)
        } else {
            waves(plan, target, &ends)
        };
        if w.is_empty() {
            vec![Wave::whole(plan)]
        } else {
            w
        }
    }

    /// Reads and decodes `waves` through `reader`, handing each wave's result to `sink` as it
    /// is decoded (not in order); `sink` returns false when no more are wanted. On a device,
    /// several waves are pipelined ([`Self::pipelined`]); under a memory budget the load does
    /// not fit at once, a wave is read only once `handed` admits it (its estimated device
    /// bytes fit beside those of the waves read and not yet in the caller's hands); on the
    /// host each wave's units are read and decoded in parallel.
    pub(super) fn produce(
        &self,
        reader: &dyn RangeReader,
        waves: &[Wave],
        sink: &(dyn Fn(usize, Result<WaveOut>) -> bool + Sync),
        handed: &Handed,
    ) -> Result<()> {
        let plan = &self.plan;
        // the row filter and the views, applied as each wave is decoded
        let finished = |i: usize, r: Result<WaveOut>| {
            sink(
                i,
                r.and_then(|(b, g, io, d)| {
                    let t = Instant::now();
                    let b = self.finish(b)?;
                    Ok((b, g, io, d + t.elapsed()))
                }),
            )
        };
        let sink: &(dyn Fn(usize, Result<WaveOut>) -> bool + Sync) = match self.finishes() {
            true => &finished,
            false => sink,
        };
        match self.device.location {
            Location::Cuda(ordinal) if self.budget_waves.is_some() => {
                let (costs, budget) = (&self.wave_costs, self.budget);
                if super::timeline::profile_requested() {
                    let mb: Vec<String> = (costs.iter())
                        .map(|c| format!("{}+{}", c.read / 1_000_000, c.decode / 1_000_000))
                        .collect();
                    eprintln!(
                        "passes under a budget of {} MB, estimated MB each (read+decode): {}",
                        budget / 1_000_000,
                        mb.join(", ")
                    );
                }
                let budgeted = Budgeted {
                    handed,
                    costs,
                    budget,
                };
                // a decoded wave holds only its batches until it is handed over
                // (a failed wave holds nothing)
                let decoded = |i: usize, r: Result<WaveOut>| {
                    let bytes = match &r {
                        Ok((batches, ..)) => (batches.iter().filter_map(|b| b.as_device()))
                            .map(|b| b.device_bytes() as u64)
                            .sum(),
                        Err(_) => 0,
                    };
                    handed.decoded(i, bytes);
                    sink(i, r)
                };
                self.pipelined(reader, ordinal, waves, &decoded, Some(&budgeted))
            }
            Location::Cuda(ordinal) if waves.len() > 1 => {
                self.pipelined(reader, ordinal, waves, sink, None)
            }
            Location::Cuda(ordinal) => {
                let r = self.read_chunks(reader, ordinal).and_then(|(chunks, io)| {
                    let t = Instant::now();
                    let (b, g) = self.decode_part(&chunks, &plan.row_groups)?;
                    drop(chunks);
                    Ok((b, g, io, t.elapsed()))
                });
                sink(0, r);
                Ok(())
            }
            Location::Host => {
                if plan.units.is_empty() {
                    // no leaf selected: row counts only, nothing to read
                    let r = self.row_counts_only().map(|b| {
                        (
                            b,
                            GpuDecodeReport::default(),
                            IoReport::default(),
                            Duration::ZERO,
                        )
                    });
                    sink(0, r);
                    return Ok(());
                }
                let (mut bytes, mut rgs) = (0u64, 0usize);
                for (i, w) in waves.iter().enumerate() {
                    let r = self.host_wave(reader, w);
                    let failed = r.is_err();
                    if !failed {
                        bytes += w.bytes;
                        rgs += w.row_groups.len();
                        self.notify(bytes, rgs);
                    }
                    if !sink(i, r) || failed {
                        break;
                    }
                }
                Ok(())
            }
        }
    }

    /// One wave of a host stream: its units read and decoded in parallel, joined and cut into
    /// batches.
    fn host_wave(&self, reader: &dyn RangeReader, w: &Wave) -> Result<WaveOut> {
        let units: Vec<_> = self
            .plan
            .units
            .iter()
            .filter(|u| u.requests.start >= w.requests.start && u.requests.end <= w.requests.end)
            .collect();
        let results: Vec<Result<_>> = self.host_reader.pool().install(|| {
            units
                .par_iter()
                .map(|u| self.load_unit(reader, u))
                .collect()
        });
        let mut parts = Vec::new();
        let mut io = IoReport::default();
        let mut decode = Duration::ZERO;
        for res in results {
            let res = res?;
            parts.extend(res.parts);
            io.absorb(res.io);
            decode += res.decode_time;
        }
        let t = Instant::now();
        let batches = self.join_fields(parts)?;
        Ok((
            batches,
            GpuDecodeReport::default(),
            io,
            decode + t.elapsed(),
        ))
    }
}

/// What a stream's waves did so far.
#[derive(Debug, Default)]
struct Totals {
    io: IoReport,
    decode_time: Duration,
    gpu_decode: GpuDecodeReport,
}

/// The stream of one file's batches ([`FileScan::stream`]). Yields `Err` at most once, then
/// ends. Dropping it stops the reads and decoders (the waves in flight are finished).
pub(crate) struct FileBatches {
    rx: Option<Receiver<(usize, Result<WaveOut>)>>,
    producer: Option<std::thread::JoinHandle<()>>,
    /// Waves decoded before the one the caller is waiting for.
    early: BTreeMap<usize, Result<WaveOut>>,
    next_wave: usize,
    waves: Vec<Wave>,
    ready: VecDeque<LoadedBatch>,
    totals: Arc<Mutex<Totals>>,
    /// Waves whose every batch the caller holds, for the producer of a memory budget's
    /// passes ([`Handed`]).
    handed: Arc<Handed>,
    path: std::path::PathBuf,
    done: bool,
}

impl std::fmt::Debug for FileBatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileBatches")
            .field("path", &self.path)
            .field("waves", &self.waves.len())
            .field("next_wave", &self.next_wave)
            .field("ready", &self.ready.len())
            .finish_non_exhaustive()
    }
}

impl FileBatches {
    /// Starts the producer of `state`'s batches, reading through `reader` (the state's own
    /// range reader when `None`).
    fn start(state: Arc<ReaderState>, reader: Option<Arc<dyn RangeReader>>) -> Self {
        let waves = match state.device.location {
            Location::Cuda(_) => state.device_waves(true),
            Location::Host => {
                let ends = |rg| state.batch_ends(rg);
                stream_waves(&state.plan, FIRST_STEP_BYTES, HOST_STEP_BYTES, &ends)
            }
        };
        let (tx, rx): (SyncSender<_>, _) = std::sync::mpsc::sync_channel(WAVES_AHEAD);
        let path = state.file.path().to_path_buf();
        let totals = Arc::new(Mutex::new(Totals::default()));
        let handed = Arc::new(Handed::in_order());
        let h = Arc::clone(&handed);
        let w = waves.clone();
        let producer = std::thread::Builder::new()
            .name("cuparquet-stream".into())
            .spawn(move || {
                let io: &dyn RangeReader = match (&reader, &state.gpu_reader) {
                    (Some(r), _) => r.as_ref(),
                    (None, Some(g)) => g,
                    (None, None) => &state.host_reader,
                };
                let sink = |i: usize, r: Result<WaveOut>| tx.send((i, r)).is_ok();
                if let Err(e) = state.produce(io, &w, &sink, &h) {
                    let _ = tx.send((usize::MAX, Err(e)));
                }
            });
        let (rx, producer, done) = match producer {
            Ok(h) => (Some(rx), Some(h), false),
            Err(_) => (None, None, true),
        };
        FileBatches {
            rx,
            producer,
            early: BTreeMap::new(),
            next_wave: 0,
            waves,
            ready: VecDeque::new(),
            totals,
            handed,
            path,
            done,
        }
    }

    /// The next wave's result, in order: from those decoded early, else from the producer.
    fn next_wave(&mut self) -> Option<Result<WaveOut>> {
        loop {
            if let Some(r) = self.early.remove(&self.next_wave) {
                return Some(r);
            }
            let msg = self.rx.as_ref()?.recv();
            match msg {
                Ok((usize::MAX, r)) => return Some(r),
                Ok((i, r)) => {
                    if r.is_err() {
                        return Some(r);
                    }
                    self.early.insert(i, r);
                }
                Err(_) => {
                    // the producer ended without this wave: it stopped after an error it
                    // already reported, or failed to start
                    return (self.next_wave < self.waves.len()).then(|| {
                        Err(Error::Decode {
                            path: self.path.clone(),
                            row_group: self.waves[self.next_wave].row_groups.first().copied(),
                            column: None,
                            reason: "a wave of the stream was neither read nor decoded".into(),
                        })
                    });
                }
            }
        }
    }

    /// Stops the producer: no more waves are decoded; waits for it to finish.
    fn stop(&mut self) {
        self.done = true;
        self.rx = None;
        self.handed.set(usize::MAX); // a producer waiting for the caller goes on, to its end
        if let Some(h) = self.producer.take() {
            let _ = h.join();
        }
    }

    /// Whether every wave has been read and decoded: what is left are batches waiting for the
    /// caller.
    pub(super) fn produced(&self) -> bool {
        self.done || self.next_wave >= self.waves.len()
    }

    /// What the waves handed over so far read.
    pub(crate) fn io_report(&self) -> IoReport {
        self.totals.lock().map(|t| t.io.clone()).unwrap_or_default()
    }
}

impl Iterator for FileBatches {
    type Item = Result<LoadedBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(b) = self.ready.pop_front() {
                return Some(Ok(b));
            }
            if self.done || self.next_wave >= self.waves.len() {
                self.stop();
                return None;
            }
            // every batch of the waves before is in the caller's hands
            self.handed.set(self.next_wave);
            match self.next_wave() {
                Some(Ok((batches, g, io, d))) => {
                    self.next_wave += 1;
                    if let Ok(mut t) = self.totals.lock() {
                        t.io.absorb(io);
                        t.decode_time += d;
                        t.gpu_decode.absorb(g);
                    }
                    self.ready.extend(batches);
                }
                Some(Err(e)) => {
                    self.stop();
                    return Some(Err(e.in_file(&self.path)));
                }
                None => {
                    self.stop();
                    return None;
                }
            }
        }
    }
}

impl Drop for FileBatches {
    fn drop(&mut self) {
        self.stop();
    }
}

impl FileScan {
    /// The batches of the file's plan as a stream, read through `reader` (the file's own range
    /// reader when `None`): read and decoded wave by wave by a thread of the stream's own (on
    /// a device, the next wave is read while the current one decodes; the first wave is
    /// small, so the first batch comes early), each batch handed over as soon as the ones
    /// before it have been, in the order [`load`](FileScan::load) returns them. The stream owns
    /// what it needs (`'static`, `Send`). Dropping it stops the reads.
    pub(crate) fn stream(&self, reader: Option<Arc<dyn RangeReader>>) -> FileBatches {
        FileBatches::start(Arc::clone(&self.state), reader)
    }
}

impl ReaderState {
    /// A device load ([`FileScan::load_with`]): the waves of [`Self::device_waves`]
    /// produced and collected in order, with the report. Large loads are pipelined
    /// ([`Self::pipelined`]): the report's `io_time` then sums the reads and `decode_time` the
    /// decoding of every wave; they overlap, so together they can exceed `load_time`.
    pub(super) fn collect_device(
        &self,
        reader: &dyn RangeReader,
        t0: Instant,
    ) -> Result<super::file::FileLoaded> {
        let waves = self.device_waves(false);
        let results: Mutex<Vec<Option<Result<WaveOut>>>> =
            Mutex::new((0..waves.len()).map(|_| None).collect());
        self.notify(0, 0);
        // a load collects every wave as it is decoded: handed over then (the caller gets them
        // all, so its memory is the whole output)
        let handed = Handed::default();
        let sink = |i: usize, r: Result<WaveOut>| {
            let ok = r.is_ok();
            if let Some(slot) = results.lock().unwrap_or_else(|p| p.into_inner()).get_mut(i) {
                *slot = Some(r);
            }
            handed.release(i);
            ok
        };
        self.produce(reader, &waves, &sink, &handed)?;
        let mut batches = Vec::new();
        let mut gpu_decode = GpuDecodeReport::default();
        let mut io = IoReport::default();
        let mut decode_time = Duration::ZERO;
        let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
        // the first error in wave order, else the first wave missing
        for (i, r) in results.into_iter().enumerate() {
            let (b, g, x, d) = r.unwrap_or_else(|| {
                Err(Error::Decode {
                    path: self.file.path().to_path_buf(),
                    row_group: waves[i].row_groups.first().copied(),
                    column: None,
                    reason: "a wave of the pipelined device load was neither read nor decoded"
                        .into(),
                })
            })?;
            batches.extend(b);
            gpu_decode.absorb(g);
            io.absorb(x);
            decode_time += d;
        }
        self.notify(self.plan.request_bytes(), self.plan.row_groups.len());
        Ok(self.loaded(batches, io, decode_time, t0, Some(gpu_decode)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;
    use crate::scan::tests::int_file;
    use crate::scan::Scan;

    #[test]
    fn stream_waves_start_small_and_keep_batches_whole() {
        // 40 row groups of 2,500 rows, 3 int64 columns: ~20 KB a row group
        let f = int_file(&["a", "b", "c"], 100_000, 2_500);
        let reader = Scan::builder(f.path())
            .with_device(Device::Host)
            .with_batch_rows(10_000)
            .with_coalescing(crate::plan::CoalesceConfig {
                unit_target_bytes: 1,
                units_within_row_groups: true,
                ..Default::default()
            })
            .build_file()
            .unwrap();
        let s = &reader.state;
        let plan = &s.plan;
        let total = plan.request_bytes();
        let w = stream_waves(plan, total / 10, total / 3, &|rg| s.batch_ends(rg));
        let rgs: Vec<usize> = w.iter().flat_map(|w| w.row_groups.clone()).collect();
        assert_eq!(rgs, plan.row_groups);
        assert!(w.len() >= 3, "{w:?}");
        assert!(w[0].bytes < total / 5, "a small first wave: {w:?}");
        // every wave ends where a batch ends (batches of four row groups)
        for x in &w {
            assert_eq!((x.row_groups.last().unwrap() + 1) % 4, 0, "{w:?}");
        }
        // the stream yields the load's batches
        let streamed: Vec<LoadedBatch> = reader.stream(None).collect::<Result<_>>().unwrap();
        let loaded = reader.load().unwrap().batches;
        assert_eq!(streamed.len(), 10);
        assert_eq!(streamed.len(), loaded.len());
        for (a, b) in streamed.iter().zip(&loaded) {
            assert_eq!(a.rows(), b.rows());
            assert_eq!(a.to_host().unwrap(), b.to_host().unwrap());
        }
    }

    #[test]
    fn a_dropped_stream_stops_and_a_stream_outlives_its_reader() {
        let f = int_file(&["a"], 50_000, 1_000);
        let reader = Scan::builder(f.path())
            .with_device(Device::Host)
            .with_batch_rows(1_000)
            .build_file()
            .unwrap();
        let mut s = reader.stream(None);
        assert_eq!(s.next().unwrap().unwrap().num_rows(), 1_000);
        drop(s); // joins the producer
        let s = reader.stream(None);
        drop(reader);
        let n: usize = s.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(n, 50_000);
    }
}
