//! Pipelined device loads ([`DeviceLoad::pipelined`]): one thread reads the waves into device
//! memory while [`DECODE_THREADS`](crate::device::DECODE_THREADS) threads decode them, so that
//! reading the next wave overlaps decoding the last.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::budget::Budgeted;
use super::timeline::Timeline;
use super::{DeviceLoad, Sink};
use crate::decode::gpu::DeviceChunks;
use crate::device::{self, DeviceBuffer};
use crate::error::Result;
use crate::io::{IoReport, RangeReader, StreamDest};
use crate::scan::waves::Wave;

/// Pipelined device loads up to this many bytes read as one stream into one allocation
/// ([`DeviceLoad::pipelined`]); larger ones (waves of 1 GiB) read wave by wave, each into
/// an allocation of its own, which bounds the device memory their still-encoded chunks hold.
const STREAM_MAX_BYTES: u64 = 4 << 30;

impl DeviceLoad<'_> {
    /// Reads and decodes wave after wave ([`waves`]): one thread reads,
    /// [`DECODE_THREADS`](crate::device::DECODE_THREADS) threads decode, each on a decode stream of its own, so reading, decoding and the tails of
    /// decoding kernels overlap. Loads up to [`STREAM_MAX_BYTES`] read as one stream into one
    /// allocation where the reader can ([`RangeReader::read_stream`]: every thread reads on
    /// across wave boundaries, and each wave is handed over as soon as its bytes are in);
    /// otherwise each wave is read into an allocation of its own, at most one wave ahead of
    /// the decoders. Hands each wave, as it is decoded (not in order), its batches and reports
    /// to `sink`, which returns false when no more are wanted; after an error or a `false`
    /// the waves not yet decoded are dropped. The decoders' kernels run on decode set `set`
    /// (the load's own, [`crate::device::Gpu::decode_set`]). Under a memory budget (`budget`) each wave's
    /// reads wait until the budget admits them, into an allocation of the wave's own: as one
    /// stream where the reader can ([`Self::stream_budgeted`]), else wave by wave.
    pub(super) fn pipelined(
        &self,
        reader: &dyn RangeReader,
        waves: &[Wave],
        sink: &Sink<'_>,
        budget: Option<&Budgeted<'_>>,
        set: usize,
    ) -> Result<()> {
        use std::sync::atomic::AtomicBool;
        use std::sync::Condvar;
        let (plan, ordinal) = (self.plan, self.ordinal);
        // never blocks a sender: a streamed read's waves arrive as they complete; the
        // wave-by-wave reader limits itself below
        let (tx, rx) = std::sync::mpsc::sync_channel::<WaveRead>(waves.len());
        let rx = Mutex::new(rx);
        let stop = AtomicBool::new(false);
        let read_so_far = AtomicU64::new(0);
        let done_so_far = AtomicUsize::new(0);
        // waves taken by the decoders, for the wave-by-wave reader's limit
        let taken = (Mutex::new(0usize), Condvar::new());
        // the streamed read's one allocation: its last reference is dropped here, after every
        // decode stream has finished with it
        let total = plan.request_bytes();
        let shared: Mutex<Option<Arc<DeviceBuffer>>> = Mutex::new(None);
        if total <= STREAM_MAX_BYTES && budget.is_none() {
            let gpu = device::gpu(ordinal)?;
            *shared.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(Arc::new(gpu.alloc(total as usize)?));
        }
        // with CUPARQUET_PROFILE: when each wave was read and decoded, printed at the end
        let timeline = Timeline::from_env();
        // under a memory budget, the timeline also shows the device's live bytes and their
        // high-water mark so far, to compare with the passes' estimates
        let live = || match (budget.is_some(), device::gpu(ordinal)) {
            (true, Ok(g)) => format!(
                ", live {} MB, peak {} MB",
                g.live_bytes() / 1_000_000,
                g.peak_live_bytes() / 1_000_000
            ),
            _ => String::new(),
        };
        let live = &live;
        std::thread::scope(|s| {
            let stop = &stop;
            let timeline = &timeline;
            let (taken, shared) = (&taken, &shared);
            s.spawn(move || {
                let buffer = shared.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let Some(buffer) = buffer {
                    let parts: Vec<Vec<usize>> =
                        waves.iter().map(|w| w.requests.clone().collect()).collect();
                    let delivered: Vec<AtomicBool> =
                        waves.iter().map(|_| AtomicBool::new(false)).collect();
                    let t = Instant::now();
                    let streamed = reader.read_stream(
                        self.file,
                        &plan.requests,
                        &parts,
                        StreamDest::One(&buffer),
                        &|i, io| {
                            delivered[i].store(true, Relaxed);
                            timeline.add(|| format!("read {i} (streamed)"), t);
                            let chunks = DeviceChunks::new(
                                Arc::clone(&buffer),
                                plan.chunks[waves[i].chunks.clone()].to_vec(),
                            );
                            let _ = tx.send((i, Ok((chunks, io))));
                        },
                    );
                    if stream_ended(streamed, &delivered, &tx) {
                        return;
                    }
                    // this reader reads wave by wave: no shared allocation
                    drop(buffer);
                    *shared.lock().unwrap_or_else(|p| p.into_inner()) = None;
                }
                if let Some(b) = budget {
                    if self.stream_budgeted(reader, waves, b, stop, &tx, &|i, t| {
                        timeline.add(|| format!("read {i} (streamed{})", live()), t)
                    }) {
                        return;
                    }
                }
                for (i, w) in waves.iter().enumerate() {
                    // at most one wave read and not yet taken by a decoder
                    let (n, cv) = taken;
                    let mut n = n.lock().unwrap_or_else(|p| p.into_inner());
                    while *n + 1 < i && !stop.load(Relaxed) {
                        n = cv.wait(n).unwrap_or_else(|p| p.into_inner());
                    }
                    drop(n);
                    if stop.load(Relaxed) || budget.is_some_and(|b| !b.read(i)) {
                        break;
                    }
                    let t = Instant::now();
                    let r = self.read_wave(reader, w);
                    timeline.add(|| format!("read {i} ({} MB{})", w.bytes / 1_000_000, live()), t);
                    let failed = r.is_err();
                    if tx.send((i, r)).is_err() || failed {
                        break;
                    }
                }
            });
            for slot in 0..device::DECODE_THREADS {
                let rx = &rx;
                let (read_so_far, done_so_far) = (&read_so_far, &done_so_far);
                s.spawn(move || loop {
                    let msg = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok((i, r)) = msg else { break };
                    {
                        let (n, cv) = taken;
                        *n.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                        cv.notify_all();
                    }
                    // under a budget, the wave's working set must fit first
                    if stop.load(Relaxed) || (r.is_ok() && budget.is_some_and(|b| !b.decode(i))) {
                        continue; // not wanted: its chunks dropped undecoded
                    }
                    let out = r.and_then(|(chunks, io)| {
                        let t = Instant::now();
                        // the chunks are dropped on this slot's stream, after its kernels
                        let d = device::with_decode_slot(set, slot, move || {
                            let d = self.decode_wave(&chunks, &waves[i], waves.len() > 1);
                            drop(chunks);
                            d
                        });
                        timeline.add(|| format!("decode {i} (slot {slot}{})", live()), t);
                        if let Ok((_, g)) = &d {
                            timeline.note(i, &g.stages);
                        }
                        d.map(|(b, g)| (b, g, io, t.elapsed()))
                    });
                    let failed = out.is_err();
                    if !failed {
                        let bytes = read_so_far.fetch_add(waves[i].bytes, Relaxed);
                        let done = waves[i].row_groups_done();
                        let rgs = done_so_far.fetch_add(done, Relaxed);
                        self.notify(bytes + waves[i].bytes, rgs + done);
                    }
                    // a consumer gone or an error: the other waves are not wanted
                    if !sink(i, out) || failed {
                        stop.store(true, Relaxed);
                        taken.1.notify_all();
                    }
                });
            }
        });
        if let Some(buffer) = shared.into_inner().unwrap_or_else(|p| p.into_inner()) {
            // decoders may have enqueued work that still reads it (on the load's streams)
            buffer.gpu().synchronize_decode_set(set)?;
            drop(buffer);
        }
        timeline.print();
        Ok(())
    }
}

/// A wave read (its index), or why it could not be.
type WaveRead = (usize, Result<(DeviceChunks, IoReport)>);

impl DeviceLoad<'_> {
    /// Under a memory budget: `waves` read as one stream ([`RangeReader::read_stream`]), each
    /// into an allocation of its own opened once `budget` admits its reads, so that the reader
    /// threads go on from one wave into the next instead of waiting at each wave's end, as a
    /// wave-by-wave read does. Each wave read (or the error that ended the stream) goes to
    /// `tx`; `noted(i, start)` marks wave `i` read. False when the reader does not stream
    /// (nothing was read: the caller reads wave by wave).
    #[allow(clippy::too_many_arguments)]
    fn stream_budgeted(
        &self,
        reader: &dyn RangeReader,
        waves: &[Wave],
        budget: &Budgeted<'_>,
        stop: &std::sync::atomic::AtomicBool,
        tx: &std::sync::mpsc::SyncSender<WaveRead>,
        noted: &(dyn Fn(usize, Instant) + Sync),
    ) -> bool {
        use std::sync::atomic::AtomicBool;
        let ordinal = self.ordinal;
        let gpu = match device::gpu(ordinal) {
            Ok(g) => g,
            Err(_) => return false,
        };
        // the waves' requests end to end, each wave's at offsets in its own allocation
        let mut requests = Vec::new();
        let mut parts = Vec::with_capacity(waves.len());
        let mut chunks_of = Vec::with_capacity(waves.len());
        let mut sizes = Vec::with_capacity(waves.len());
        for w in waves {
            let (q, chunks, bytes) = self.wave_layout(w);
            parts.push((requests.len()..requests.len() + q.len()).collect::<Vec<usize>>());
            requests.extend(q);
            chunks_of.push(Mutex::new(Some(chunks)));
            sizes.push(bytes);
        }
        let bufs: Vec<Mutex<Option<Arc<DeviceBuffer>>>> =
            waves.iter().map(|_| Mutex::new(None)).collect();
        let delivered: Vec<AtomicBool> = waves.iter().map(|_| AtomicBool::new(false)).collect();
        let t = Instant::now();
        let open = |i: usize| -> Result<Option<Arc<DeviceBuffer>>> {
            if stop.load(Relaxed) || !budget.read(i) {
                return Ok(None);
            }
            let buf = Arc::new(gpu.alloc(sizes[i] as usize)?);
            *bufs[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&buf));
            Ok(Some(buf))
        };
        let streamed = reader.read_stream(
            self.file,
            &requests,
            &parts,
            StreamDest::PerPart {
                ordinal,
                open: &open,
            },
            &|i, io| {
                delivered[i].store(true, Relaxed);
                noted(i, t);
                let buf = bufs[i].lock().unwrap_or_else(|p| p.into_inner()).take();
                let chunks = chunks_of[i].lock().unwrap_or_else(|p| p.into_inner()).take();
                let r = match (buf, chunks) {
                    (Some(buf), Some(chunks)) => Ok((DeviceChunks::new(buf, chunks), io)),
                    _ => Err(crate::error::Error::Device {
                        device: format!("cuda:{ordinal}"),
                        reason: format!("wave {i} of a streamed read was done before it was opened"),
                    }),
                };
                let _ = tx.send((i, r));
            },
        );
        stream_ended(streamed, &delivered, tx)
    }
}

/// The end of a streamed read ([`RangeReader::read_stream`]): false when the reader does not
/// stream (nothing was read); else true, its error (if any) sent on `tx` as the first wave's
/// not `delivered`.
fn stream_ended(
    streamed: Option<Result<()>>,
    delivered: &[std::sync::atomic::AtomicBool],
    tx: &std::sync::mpsc::SyncSender<WaveRead>,
) -> bool {
    match streamed {
        None => false,
        Some(Ok(())) => true,
        Some(Err(e)) => {
            if let Some(i) = delivered.iter().position(|d| !d.load(Relaxed)) {
                let _ = tx.send((i, Err(e)));
            }
            true
        }
    }
}
