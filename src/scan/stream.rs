//! The stream of one file's batches ([`FileScan::stream`]): the plan read and decoded wave by
//! wave by a producer thread (on a device, the device load of [`super::device`]), each
//! wave's batches handed to the caller, in order, as soon as
//! the wave before has been. The first wave is small ([`stream_waves`]), so that the first
//! batch comes early; at most [`WAVES_AHEAD`] decoded waves wait for the caller.

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::device::{Handed, Sink};
use super::waves::{stream_waves, Wave, WaveOut, FIRST_STEP_BYTES, HOST_STEP_BYTES};
use super::{FileScan, ReaderState};
use crate::array::{LoadedBatch, Location};
use crate::decode::gpu::GpuDecodeReport;
use crate::error::{Error, Result};
use crate::io::{IoReport, RangeReader};

/// Decoded waves that may wait for the caller before the decoders stop.
pub(super) const WAVES_AHEAD: usize = 2;

impl ReaderState {
    /// Reads and decodes `waves` through `reader`, handing each wave's finished batches to
    /// `sink` as the wave is done (not in order): on a device, the device load
    /// ([`DeviceLoad::run`](super::device::DeviceLoad::run)); on the host, wave after wave
    /// ([`Self::host_waves`]).
    fn produce(
        &self,
        reader: &dyn RangeReader,
        waves: &[Wave],
        sink: &Sink<'_>,
        handed: &Handed,
    ) -> Result<()> {
        match self.device.location {
            Location::Cuda(ordinal) => self.device_load(ordinal).run(reader, waves, sink, handed),
            Location::Host => self.host_waves(reader, waves, sink),
        }
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
    /// Batches of a row filter, too few rows together, waiting to be joined with the next
    /// wave's ([`Finish::in_order`](super::finish::Finish::in_order)).
    held: Vec<LoadedBatch>,
    /// The file's state: what finishes its batches.
    state: Arc<ReaderState>,
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
            Location::Cuda(ordinal) => state.device_load(ordinal).waves(true),
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
        let kept = Arc::clone(&state);
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
            held: Vec::new(),
            state: kept,
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
        self.held.clear();
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
                // (nothing is held: the last wave was joined as the file's end, and a stop
                // drops what was held)
                self.stop();
                return None;
            }
            // every batch of the waves before is in the caller's hands (but those held)
            self.handed.set(self.next_wave);
            match self.next_wave() {
                Some(Ok((batches, g, io, d))) => {
                    self.next_wave += 1;
                    if let Ok(mut t) = self.totals.lock() {
                        t.io.absorb(io);
                        t.decode_time += d;
                        t.gpu_decode.absorb(g);
                    }
                    // under a row filter, joined in order with the batches held before; the
                    // last ones, too few rows, held for the next wave's
                    let end = self.next_wave >= self.waves.len();
                    match (self.state.finisher()).in_order(&mut self.held, batches, end) {
                        Ok(b) => self.ready.extend(b),
                        Err(e) => {
                            self.stop();
                            return Some(Err(e.in_file(&self.path)));
                        }
                    }
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
