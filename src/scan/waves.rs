//! Pipelined device loads: the plan's units grouped into waves of whole row groups
//! ([`waves`], sized by [`wave_target`]), read and decoded so that reading the next wave
//! overlaps decoding the last ([`ReaderState::pipelined`]).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::budget::{Budgeted, WaveCost};
use super::timeline::Timeline;
use super::ReaderState;
use crate::array::LoadedBatch;
use crate::decode::gpu::{DeviceChunks, GpuDecodeReport};
use crate::device::{self, DeviceBuffer};
use crate::error::Result;
use crate::io::{IoReport, RangeReader, StreamDest};
use crate::plan::ReadPlan;

/// What a decoded wave hands over: its batches, where its fields were decoded, what its reads
/// did and the time its decoding took.
pub(super) type WaveOut = (Vec<LoadedBatch>, GpuDecodeReport, IoReport, Duration);

/// Whole row groups a pipelined device load reads and decodes together, with the consecutive
/// units ([`ReadPlan::units`]) that carry their chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Wave {
    /// Row groups, ascending.
    pub(super) row_groups: Vec<usize>,
    /// Indices into the plan's chunks.
    pub(super) chunks: std::ops::Range<usize>,
    /// Indices into the plan's requests (laid end to end in the destination).
    pub(super) requests: std::ops::Range<usize>,
    /// Bytes of the requests.
    pub(super) bytes: u64,
    /// A piece of a row group too large for the memory budget: its own plan and batches;
    /// `chunks` and `requests` then index the piece's plan.
    pub(super) piece: Option<Arc<RowGroupPiece>>,
}

/// A piece of a row group ([`crate::plan::passes::split_row_group`]): its plan, which reads only the pages
/// holding its rows, and its batches.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct RowGroupPiece {
    pub(super) plan: Arc<ReadPlan>,
    pub(super) spans: Vec<crate::plan::BatchSpan>,
    /// The row group's last piece: with it, the row group is done.
    pub(super) last: bool,
}

impl Wave {
    /// The plan the wave's chunks and requests index: the piece's, or the load's.
    pub(super) fn plan<'a>(&'a self, load: &'a ReadPlan) -> &'a ReadPlan {
        self.piece.as_ref().map_or(load, |p| &p.plan)
    }

    /// The row groups done once this wave is decoded (for progress): a piece's row group only
    /// with its last piece.
    pub(super) fn row_groups_done(&self) -> usize {
        match &self.piece {
            Some(p) if !p.last => 0,
            _ => self.row_groups.len(),
        }
    }
}

impl Wave {
    /// The whole of `plan` as one wave.
    pub(super) fn whole(plan: &ReadPlan) -> Wave {
        Wave {
            row_groups: plan.row_groups.clone(),
            chunks: 0..plan.chunks.len(),
            requests: 0..plan.requests.len(),
            bytes: plan.request_bytes(),
            piece: None,
        }
    }
}

/// The passes of `passes` as waves of `plan` (each pass's chunks and the requests that read
/// them), with their estimated reads and decode working sets; None when a request reads chunks of two passes
/// (coalescing across row groups).
pub(super) fn pass_waves(
    plan: &ReadPlan,
    passes: &crate::plan::PassPlan,
) -> Option<(Vec<Wave>, Vec<WaveCost>)> {
    let mut out: Vec<Wave> = Vec::with_capacity(passes.passes.len());
    let mut costs: Vec<WaveCost> = Vec::with_capacity(passes.passes.len());
    let mut at = 0usize; // the next request
    for (k, p) in passes.passes.iter().enumerate() {
        if let Some(piece) = &p.piece {
            // the load plan's reads of the row group are not made: skip them
            let rg = p.row_groups.first().copied().unwrap_or(0);
            let theirs = plan.chunk_range_of(rg);
            while at < plan.requests.len()
                && plan.requests[at].chunks.iter().all(|c| theirs.contains(c))
            {
                at += 1;
            }
            let next = passes.passes.get(k + 1);
            let last = next.is_none_or(|n| n.piece.is_none() || n.row_groups != p.row_groups);
            out.push(Wave {
                row_groups: p.row_groups.clone(),
                chunks: 0..piece.chunks.len(),
                requests: 0..piece.requests.len(),
                bytes: piece.request_bytes(),
                piece: Some(Arc::new(RowGroupPiece {
                    plan: Arc::clone(piece),
                    spans: p.batches.clone(),
                    last,
                })),
            });
            costs.push(WaveCost::of(p));
            continue;
        }
        let start = at;
        let mut bytes = 0;
        while at < plan.requests.len()
            && plan.requests[at]
                .chunks
                .iter()
                .all(|c| p.chunks.contains(c))
        {
            bytes += plan.requests[at].len();
            at += 1;
        }
        let covered: usize = plan.requests[start..at]
            .iter()
            .map(|r| r.chunks.len())
            .sum();
        let non_empty = plan.chunks[p.chunks.clone()]
            .iter()
            .filter(|c| !c.is_empty())
            .count();
        if covered < non_empty {
            return None;
        }
        match out.last_mut() {
            // a pass with nothing to read (empty chunks only) joins the wave before it
            Some(w) if at == start => {
                w.row_groups.extend_from_slice(&p.row_groups);
                w.chunks.end = p.chunks.end;
                if let Some(c) = costs.last_mut() {
                    c.decode += WaveCost::of(p).decode;
                }
            }
            _ => {
                out.push(Wave {
                    row_groups: p.row_groups.clone(),
                    chunks: p.chunks.clone(),
                    requests: start..at,
                    bytes,
                    piece: None,
                });
                costs.push(WaveCost::of(p));
            }
        }
    }
    let readable = out.iter().all(|w| !w.requests.is_empty());
    (at == plan.requests.len() && readable).then_some((out, costs))
}

/// Bytes per wave of a device load of mostly uncompressed chunks ([`wave_target`]).
const UNCOMPRESSED_WAVE_BYTES: u64 = 250 << 20;

/// Bytes per wave of a device load that reads `total` bytes, `device_compressed` of them in
/// chunks the device decompresses (SNAPPY) and `host_compressed` in chunks the host
/// decompresses: `set` ([`Tuning::wave_bytes`](crate::config::Tuning::wave_bytes); 0: never pipeline);
/// else waves of 1 GiB above 4 GiB (which also bounds the device memory a huge load holds in
/// still-encoded chunks); else one wave below 128 MiB or when mostly host-decompressed; else
/// two waves when mostly decompressed by the device, and waves of
/// [`UNCOMPRESSED_WAVE_BYTES`] otherwise, each handed to a decoder as soon as the streamed
/// read has it. Measured on the H200 (benches/RESULTS.md): the SNAPPY lineitem file (550 MB)
/// loads 13 % faster in two waves than in one; the ZSTD file (host-decompressed) 4–10 %
/// slower, its decompression keeping busy the cores the reads need; the uncompressed file
/// (1.87 GB) 15–30 % faster in 250 MiB waves of a streamed read than in one wave.
pub(super) fn wave_target(
    total: u64,
    device_compressed: u64,
    host_compressed: u64,
    set: Option<u64>,
) -> u64 {
    if let Some(v) = set {
        return if v == 0 { u64::MAX } else { v };
    }
    if total > 4 << 30 {
        1 << 30
    } else if total < 128 << 20 || host_compressed.saturating_mul(2) >= total {
        u64::MAX
    } else if device_compressed.saturating_mul(2) >= total {
        total.div_ceil(2)
    } else {
        UNCOMPRESSED_WAVE_BYTES
    }
}

/// Pipelined device loads up to this many bytes read as one stream into one allocation
/// ([`ReaderState::pipelined`]); larger ones (waves of 1 GiB) read wave by wave, each into
/// an allocation of its own, which bounds the device memory their still-encoded chunks hold.
pub(super) const STREAM_MAX_BYTES: u64 = 4 << 30;

/// The plan's units grouped into waves of about `target` bytes that hold whole row groups and
/// whole batches (`ends(rg)`: a batch ends with row group `rg`); one wave (or none, with no
/// units) when the plan cannot be split.
pub(super) fn waves(plan: &ReadPlan, target: u64, ends: &dyn Fn(usize) -> bool) -> Vec<Wave> {
    let mut out: Vec<Wave> = Vec::new();
    let mut cur: Option<Wave> = None;
    for (k, u) in plan.units.iter().enumerate() {
        let w = cur.get_or_insert_with(|| Wave {
            row_groups: Vec::new(),
            chunks: u.chunks.start..u.chunks.start,
            requests: u.requests.start..u.requests.start,
            bytes: 0,
            piece: None,
        });
        if u.chunks.start != w.chunks.end || u.requests.start != w.requests.end {
            // not consecutive: no pipelining
            return vec![];
        }
        w.chunks.end = u.chunks.end;
        w.requests.end = u.requests.end;
        w.bytes += u.bytes;
        for &rg in &u.row_groups {
            if w.row_groups.last() != Some(&rg) {
                w.row_groups.push(rg);
            }
        }
        let next_first = plan.units.get(k + 1).and_then(|n| n.row_groups.first());
        let whole = match (next_first, u.row_groups.last()) {
            (Some(n), Some(l)) => n > l,
            _ => true,
        };
        if whole && w.bytes >= target && u.row_groups.last().is_some_and(|&rg| ends(rg)) {
            out.extend(cur.take());
        }
    }
    out.extend(cur.take());
    // every planned row group exactly once, and requests that exist, or no pipelining
    let rgs: Vec<usize> = out
        .iter()
        .flat_map(|w| w.row_groups.iter().copied())
        .collect();
    if rgs != plan.row_groups || out.iter().any(|w| w.requests.is_empty()) {
        return vec![];
    }
    out
}

impl ReaderState {
    /// Reads and decodes wave after wave ([`waves`]): one thread reads,
    /// [`DECODE_THREADS`](crate::device::DECODE_THREADS) threads decode, each on a decode stream of its own, so reading, decoding and the tails of
    /// decoding kernels overlap. Loads up to [`STREAM_MAX_BYTES`] read as one stream into one
    /// allocation where the reader can ([`RangeReader::read_stream`]: every thread reads on
    /// across wave boundaries, and each wave is handed over as soon as its bytes are in);
    /// otherwise each wave is read into an allocation of its own, at most one wave ahead of
    /// the decoders. Hands each wave, as it is decoded (not in order), its batches and reports
    /// to `sink`, which returns false when no more are wanted; after an error or a `false`
    /// the waves not yet decoded are dropped. Under a memory budget (`budget`) each wave's
    /// reads wait until the budget admits them, into an allocation of the wave's own: as one
    /// stream where the reader can ([`Self::stream_budgeted`]), else wave by wave.
    pub(super) fn pipelined(
        &self,
        reader: &dyn RangeReader,
        ordinal: usize,
        waves: &[Wave],
        sink: &(dyn Fn(usize, Result<WaveOut>) -> bool + Sync),
        budget: Option<&Budgeted<'_>>,
    ) -> Result<()> {
        use std::sync::atomic::AtomicBool;
        use std::sync::Condvar;
        let plan = &self.plan;
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
                        &self.file,
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
                    if self.stream_budgeted(reader, ordinal, waves, b, stop, &tx, &|i, t| {
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
                    let r = self.read_wave(reader, ordinal, w);
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
                        let d = device::with_decode_slot(slot, move || {
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
            // decoders may have enqueued work that still reads it
            buffer.gpu().synchronize_all_decode()?;
            drop(buffer);
        }
        timeline.print();
        Ok(())
    }
}

/// A wave read (its index), or why it could not be.
type WaveRead = (usize, Result<(DeviceChunks, IoReport)>);

impl ReaderState {
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
        ordinal: usize,
        waves: &[Wave],
        budget: &Budgeted<'_>,
        stop: &std::sync::atomic::AtomicBool,
        tx: &std::sync::mpsc::SyncSender<WaveRead>,
        noted: &(dyn Fn(usize, Instant) + Sync),
    ) -> bool {
        use std::sync::atomic::AtomicBool;
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
            &self.file,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Device;
    use crate::scan::tests::int_file;
    use crate::scan::{FileScan, Scan};

    /// A host reader of `path` whose reads are coalesced as a device load's (within row
    /// groups), with the page index where `page_index`.
    fn device_like(path: &std::path::Path, page_index: bool) -> FileScan {
        let coalescing = crate::plan::CoalesceConfig {
            unit_target_bytes: crate::plan::coalesce::MAX_REQUEST_SIZE,
            units_within_row_groups: true,
            ..Default::default()
        };
        Scan::builder(path)
            .with_device(Device::Host)
            .with_page_index(page_index)
            .with_coalescing(coalescing)
            .build_file()
            .unwrap()
    }

    #[test]
    fn passes_become_waves_when_reads_stay_within_row_groups() {
        let f = int_file(&["a", "b"], 40_000, 2_500); // 16 row groups
        let reader = device_like(f.path(), false);
        let plan = reader.plan();
        let md = &reader.metadata().metadata;
        let one = crate::plan::passes::row_group_cost(plan, md, 0).device_bytes;
        let passes = crate::plan::plan_passes(f.path(), plan, md, 3 * one, 1 << 20, false).unwrap();
        assert!(passes.passes.len() > 3, "{passes}");
        let (w, costs) = pass_waves(plan, &passes).expect("reads within row groups");
        let want: Vec<(u64, u64)> = (passes.passes.iter())
            .map(|p| (p.read_bytes, p.device_bytes - p.read_bytes))
            .collect();
        let got: Vec<(u64, u64)> = costs.iter().map(|c| (c.read, c.decode)).collect();
        assert_eq!(got, want);
        assert!(want.iter().all(|&(r, d)| r > 0 && d > r), "{want:?}");
        assert_eq!(w.len(), passes.passes.len());
        let mut at = 0;
        for (x, p) in w.iter().zip(&passes.passes) {
            assert_eq!((&x.row_groups, &x.chunks), (&p.row_groups, &p.chunks));
            assert_eq!(x.requests.start, at, "requests end to end");
            at = x.requests.end;
            for r in &plan.requests[x.requests.clone()] {
                assert!(r.chunks.iter().all(|c| x.chunks.contains(c)));
            }
            let bytes: u64 = plan.requests[x.requests.clone()]
                .iter()
                .map(|r| r.len())
                .sum();
            assert_eq!(x.bytes, bytes);
        }
        assert_eq!(at, plan.requests.len());
        // reads merged across row groups cannot be cut into these passes
        let merged = Scan::builder(f.path())
            .with_device(Device::Host)
            .build_file()
            .unwrap();
        let plan = merged.plan();
        assert!(plan.requests.iter().any(|r| {
            let rgs: std::collections::BTreeSet<usize> =
                r.chunks.iter().map(|&c| plan.chunks[c].row_group).collect();
            rgs.len() > 1
        }));
        let passes = crate::plan::plan_passes(f.path(), plan, md, 3 * one, 1 << 20, false).unwrap();
        assert!(pass_waves(plan, &passes).is_none());
    }

    #[test]
    fn a_row_group_in_pieces_is_done_with_its_last_piece() {
        // 2 row groups of 100,000 rows in arrow-rs's default pages, a budget of 9/10 of one
        let f = int_file(&["a", "b"], 200_000, 100_000);
        let reader = device_like(f.path(), true);
        let (plan, md) = (reader.plan(), &reader.metadata().metadata);
        let one = crate::plan::passes::row_group_cost(plan, md, 0).device_bytes;
        let passes = crate::plan::plan_passes(f.path(), plan, md, one * 9 / 10, 20_480, false).unwrap();
        let (w, _) = pass_waves(plan, &passes).expect("reads within row groups");
        assert!(w.len() > 2 && w.iter().all(|x| x.piece.is_some()), "{passes}");
        let done: Vec<usize> = w.iter().map(|x| x.row_groups_done()).collect();
        assert_eq!(done.iter().sum::<usize>(), 2, "{done:?}");
        for rg in 0..2 {
            let last = w.iter().rposition(|x| x.row_groups == [rg]).unwrap();
            assert_eq!(done[last], 1, "row group {rg}: {done:?}");
        }
    }

    #[test]
    fn waves_hold_whole_row_groups_and_cover_the_plan() {
        let f = int_file(&["a", "b", "c"], 40_000, 2_500); // 16 row groups
        for (unit, within) in [(1u64, false), (2 << 20, false), (32 << 20, true)] {
            let cfg = crate::plan::CoalesceConfig {
                unit_target_bytes: unit,
                units_within_row_groups: within,
                ..Default::default()
            };
            let reader = Scan::builder(f.path())
                .with_device(Device::Host)
                .with_coalescing(cfg)
                .build_file()
                .unwrap();
            let plan = reader.plan();
            let total = plan.request_bytes();
            // one wave when the target is the whole load
            let one = waves(plan, u64::MAX, &|_| true);
            assert_eq!(one.len(), 1);
            assert_eq!(one[0].row_groups, plan.row_groups);
            assert_eq!(one[0].bytes, total);
            for target in [1, total / 5, total / 2] {
                let w = waves(plan, target, &|_| true);
                // a unit is never split: with 2 MiB units this file is one unit, one wave
                assert!(
                    w.len() > 1 || plan.units.len() == 1,
                    "{unit}, {target}: {w:?}"
                );
                let rgs: Vec<usize> = w.iter().flat_map(|w| w.row_groups.clone()).collect();
                assert_eq!(rgs, plan.row_groups);
                assert_eq!(w.iter().map(|w| w.bytes).sum::<u64>(), total);
                for (a, b) in w.iter().zip(w.iter().skip(1)) {
                    assert_eq!(a.chunks.end, b.chunks.start);
                    assert_eq!(a.requests.end, b.requests.start);
                    assert!(a.bytes >= target, "only the last wave may be short");
                }
                for x in &w {
                    // the wave's chunks are exactly those of its row groups
                    assert!(plan.chunks[x.chunks.clone()]
                        .iter()
                        .all(|c| x.row_groups.contains(&c.row_group)));
                    let n: usize = x
                        .row_groups
                        .iter()
                        .map(|&rg| plan.chunks_of_row_group(rg).count())
                        .sum();
                    assert_eq!(n, x.chunks.len());
                }
            }
        }
        const MIB: u64 = 1 << 20;
        let wave = UNCOMPRESSED_WAVE_BYTES;
        // uncompressed loads: one wave below 128 MiB, streamed waves up to 4 GiB, then 1 GiB
        assert_eq!(wave_target(100 * MIB, 0, 0, None), u64::MAX);
        assert_eq!(wave_target(2 << 30, 0, 0, None), wave);
        assert_eq!(wave_target(16 << 30, 0, 0, None), 1 << 30);
        // loads mostly decompressed by the device: two waves from 128 MiB, below it one
        assert_eq!(wave_target(550 * MIB, 550 * MIB, 0, None), 275 * MIB);
        assert_eq!(wave_target(550 * MIB, 275 * MIB, 0, None), 275 * MIB);
        assert_eq!(wave_target(100 * MIB, 100 * MIB, 0, None), u64::MAX);
        assert_eq!(wave_target(16 << 30, 16 << 30, 0, None), 1 << 30);
        // loads mostly decompressed by the host: one wave up to 4 GiB
        assert_eq!(wave_target(550 * MIB, 0, 300 * MIB, None), u64::MAX);
        assert_eq!(wave_target(550 * MIB, 0, 275 * MIB, None), u64::MAX);
        assert_eq!(wave_target(550 * MIB, 100 * MIB, 200 * MIB, None), wave);
        assert_eq!(wave_target(16 << 30, 0, 16 << 30, None), 1 << 30);
        // a setting wins; 0 never pipelines
        assert_eq!(wave_target(550 * MIB, 550 * MIB, 0, Some(0)), u64::MAX);
        assert_eq!(wave_target(2 << 30, 2 << 30, 0, Some(MIB)), MIB);
    }
}
