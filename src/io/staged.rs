//! Staged reads: file bytes through pinned host memory into device memory.
//!
//! `plan_staging` (in `io::staging`) lays the selected requests into bounce-buffer fills ("slots"); reader
//! threads take a pinned buffer from a ring, `pread` a slot into it (`O_DIRECT` when asked),
//! and enqueue one host→device copy of the whole slot on one of the device's copy streams,
//! straight to its offset in the destination. An event recorded after the copy tells the next
//! user of that buffer when it may refill it, so reads of the next slots overlap the copies of
//! the previous ones. Small ranges laid end to end share a slot and move with one copy.
//!
//! `StagedReader::read_stream` reads the waves of a pipelined device load as one stream of
//! fills, handing each wave over as soon as its copies complete.
//!
//! A zero-copy variant (map the page-cached file, `cuMemHostRegister(READ_ONLY)` it, copy
//! straight from the page cache) measured 17–21 GB/s against 45–48 GB/s for bounce buffers on
//! the H200 machine and was deleted (benches/RESULTS.md). Unsafe code here: enqueueing copies
//! out of pinned buffers that must outlive them.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use rayon::prelude::*;

use crate::config::IoSettings;
use crate::device::{gpu, DeviceBuffer, Event, Gpu, PinnedBuffer};
use crate::error::{Error, Result};
use crate::io::host::{open_direct, read_direct, shared_pool};
use crate::io::staging::plan_staging;
use crate::io::{
    check_destinations, records_from_spans, Dest, IoPath, IoReport, RangeReader, RequestRecord,
    Span, StreamDest,
};
use crate::plan::IoRequest;
use crate::source::{read_fully_at, ParquetFile};

/// Reads requests into device memory through pinned bounce buffers.
#[derive(Debug, Clone)]
pub struct StagedReader {
    settings: IoSettings,
    gpu: Arc<Gpu>,
    pool: Arc<rayon::ThreadPool>,
    /// The pool of reads made while decoders run ([`StagedReader::pool_for`]).
    beside: Arc<rayon::ThreadPool>,
}

struct Slot {
    buf: PinnedBuffer,
    event: Event,
    pending: bool,
}

/// The ring of pinned bounce buffers of one read. First in, first out: the buffer handed out
/// is the one whose copy was enqueued longest ago, so a worker rarely waits for a copy.
struct Ring {
    free: Mutex<VecDeque<Slot>>,
    ready: Condvar,
}

/// A buffer taken from the ring; given back when dropped (also on error or panic), so no
/// other worker waits forever.
struct Held<'r> {
    ring: &'r Ring,
    slot: Option<Slot>,
}

impl Held<'_> {
    fn slot(&mut self) -> &mut Slot {
        self.slot.as_mut().expect("a held slot until dropped")
    }
}

impl Held<'_> {
    /// Enqueues the copy of the buffer's first `len` bytes to `dest[at..]` on `stream` and
    /// leaves it pending; the buffer goes back to the ring with it when dropped.
    fn copy_out(
        &mut self,
        gpu: &Gpu,
        len: usize,
        dest: &DeviceBuffer,
        at: usize,
        stream: &crate::device::Stream,
    ) -> Result<()> {
        let s = self.slot();
        // SAFETY: the buffer is not written, dropped or recycled until its event has
        // completed: `pending` is set as soon as the copy is enqueued, `acquire` and `finish`
        // wait for the event first, and if recording the event fails the stream is
        // synchronized here. `dest` outlives the copy: every caller waits for its ring's copies
        // (`Ring::finish`) before giving `dest` up.
        unsafe {
            s.buf.copy_to_device_async(0..len, dest, at, stream)?;
        }
        s.pending = true;
        if let Err(e) = s.event.record(stream) {
            if gpu.synchronize().is_ok() {
                self.slot().pending = false;
            } else if let Some(lost) = self.slot.take() {
                // the copy's state is unknown: never free or reuse its buffer
                std::mem::forget(lost.buf);
            }
            return Err(e);
        }
        Ok(())
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.slot.take() {
            self.ring
                .free
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_back(s);
            self.ring.ready.notify_one();
        }
    }
}

impl Ring {
    fn new(gpu: &Arc<Gpu>, count: usize, size: usize) -> Result<Self> {
        let mut v = VecDeque::with_capacity(count);
        for _ in 0..count.max(1) {
            v.push_back(Slot {
                buf: gpu.pinned(size)?,
                event: gpu.event()?,
                pending: false,
            });
        }
        Ok(Ring {
            free: Mutex::new(v),
            ready: Condvar::new(),
        })
    }

    /// A free buffer whose previous copy has completed.
    fn acquire(&self) -> Result<Held<'_>> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let slot = loop {
            if let Some(s) = free.pop_front() {
                break s;
            }
            free = self.ready.wait(free).unwrap_or_else(|p| p.into_inner());
        };
        drop(free);
        let mut held = Held {
            ring: self,
            slot: Some(slot),
        };
        let s = held.slot();
        if s.pending {
            // on failure the slot goes back still pending: whoever takes it waits again
            s.event.synchronize()?;
            s.pending = false;
        }
        Ok(held)
    }

    /// Waits for every copy and returns the buffers to the device's pool. A buffer whose copy
    /// state is unknown (its wait failed) is leaked rather than freed or reused.
    fn finish(self, gpu: &Gpu) -> Result<()> {
        let slots = self.free.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut first_err = None;
        for s in slots {
            if s.pending {
                if let Err(e) = s.event.synchronize() {
                    first_err.get_or_insert(e);
                    std::mem::forget(s.buf);
                    continue;
                }
            }
            gpu.recycle_pinned(s.buf);
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// Host bytes (a remote read's GET bodies) moved into device memory through a ring of pinned
/// buffers: [`Upload::put`] copies the bytes into a free buffer, enqueues that buffer's copy
/// to the device on one of the device's copy streams and returns while it runs, so the caller
/// goes back to receiving the next body. [`Upload::finish`] waits for every copy.
#[cfg(feature = "object-store")]
pub(crate) struct Upload<'d> {
    gpu: Arc<Gpu>,
    /// Taken by `finish`, or by the drop after an error, which also waits for the copies.
    ring: Option<Ring>,
    size: usize,
    dest: &'d DeviceBuffer,
    copies: usize,
}

#[cfg(feature = "object-store")]
impl<'d> Upload<'d> {
    /// A ring of `count` pinned buffers of `size` bytes in front of `dest`.
    pub(crate) fn new(dest: &'d DeviceBuffer, count: usize, size: usize) -> Result<Self> {
        let gpu = dest.gpu().clone();
        gpu.bind()?;
        let size = size.max(1);
        Ok(Upload {
            ring: Some(Ring::new(&gpu, count.max(1), size)?),
            gpu,
            size,
            dest,
            copies: 0,
        })
    }

    /// Copies `bytes` to `dest[at..]`: through as many buffers as it needs, each copy enqueued
    /// and left running.
    pub(crate) fn put(&mut self, at: usize, bytes: &[u8]) -> Result<()> {
        self.gpu.bind()?;
        for (k, part) in bytes.chunks(self.size).enumerate() {
            let streams = self.gpu.streams();
            let stream = &streams[self.copies % streams.len()];
            self.copies += 1;
            let ring = self.ring.as_ref().expect("an upload's ring until it finishes");
            let mut held = ring.acquire()?;
            held.slot().buf.as_mut_slice()[..part.len()].copy_from_slice(part);
            held.copy_out(&self.gpu, part.len(), self.dest, at + k * self.size, stream)?;
        }
        Ok(())
    }

    /// Waits for every copy and gives the buffers back.
    pub(crate) fn finish(mut self) -> Result<()> {
        match self.ring.take() {
            Some(r) => r.finish(&self.gpu),
            None => Ok(()),
        }
    }
}

#[cfg(feature = "object-store")]
impl Drop for Upload<'_> {
    fn drop(&mut self) {
        // an upload abandoned by an error still waits for the copies it enqueued
        if let Some(r) = self.ring.take() {
            let _ = r.finish(&self.gpu);
        }
    }
}

impl StagedReader {
    /// A reader for device `ordinal` on the process-wide pool of `settings.nthreads` threads.
    pub fn new(settings: IoSettings, ordinal: usize) -> Result<Self> {
        settings.validate()?;
        let pool = shared_pool(settings.nthreads)?;
        let beside = shared_pool(stream_threads(settings.nthreads))?;
        Ok(StagedReader {
            gpu: gpu(ordinal)?,
            settings,
            pool,
            beside,
        })
    }

    /// The device.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The thread pool reads run on; `beside`: the smaller one of reads made while decoders
    /// run ([`RangeReader::read_beside`]: all threads but 3/8 of them).
    pub fn pool_for(&self, beside: bool) -> &Arc<rayon::ThreadPool> {
        if beside {
            &self.beside
        } else {
            &self.pool
        }
    }

    /// The thread pool reads run on.
    pub fn pool(&self) -> &Arc<rayon::ThreadPool> {
        &self.pool
    }

    /// Reads the `selected` requests (indices into `requests`) into `dest`, returning one
    /// record per selected request, on the smaller pool when `beside`
    /// ([`StagedReader::pool_for`]). Destinations are assumed checked by the caller.
    pub(crate) fn read_selected(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        selected: &[usize],
        dest: &DeviceBuffer,
        beside: bool,
    ) -> Result<Vec<RequestRecord>> {
        if selected.is_empty() {
            return Ok(Vec::new());
        }
        let spans = self
            .pool_for(beside)
            .install(|| self.read_bounced(file, requests, selected, dest))?;
        Ok(records_from_spans(
            requests,
            selected.iter().copied(),
            spans,
            IoPath::Staged,
        ))
    }

    /// What a bounced read needs: a ring of `count` (at least one) pinned buffers as large as
    /// the largest of `fills`, and the file opened for `O_DIRECT` when the settings ask.
    fn staging<'a>(
        &self,
        file: &ParquetFile,
        count: usize,
        fills: impl IntoIterator<Item = &'a crate::io::staging::StagingSlot>,
    ) -> Result<(Ring, Option<std::fs::File>)> {
        let largest = fills
            .into_iter()
            .map(|s| s.dest.end - s.dest.start)
            .max()
            .unwrap_or(0) as usize;
        let ring = Ring::new(&self.gpu, count.max(1), largest)?;
        let direct = if self.settings.direct_io {
            Some(open_direct(file)?)
        } else {
            None
        };
        Ok((ring, direct))
    }

    /// Reads one planned fill into a buffer of `ring` and enqueues its one copy to `dest` on
    /// `stream` (copies every 256 KiB to 4 MiB of a buffer measured slower on the H200
    /// machine: benches/RESULTS.md). The buffer goes back to the ring with its copy pending.
    fn fill(
        &self,
        file: &ParquetFile,
        direct: Option<&std::fs::File>,
        ring: &Ring,
        slot: &crate::io::staging::StagingSlot,
        stream: &crate::device::Stream,
        dest: &DeviceBuffer,
    ) -> Result<Vec<Span>> {
        let local = file.local()?;
        let mut held = ring.acquire()?;
        let s = held.slot();
        let mut spans = Vec::with_capacity(slot.reads.len());
        for r in &slot.reads {
            let t = Instant::now();
            let off = r.bounce_offset as usize;
            let len = (r.file.end - r.file.start) as usize;
            let buf = &mut s.buf.as_mut_slice()[off..off + len];
            match direct {
                Some(f) => read_direct(f, buf, r.file.start),
                None => read_fully_at(local, buf, r.file.start),
            }
            .map_err(|e| file.read_error(r.file.clone(), "", e))?;
            spans.push((r.request, t, Instant::now(), 1));
        }
        let len = (slot.dest.end - slot.dest.start) as usize;
        held.copy_out(&self.gpu, len, dest, slot.dest.start as usize, stream)?;
        Ok(spans)
    }

    fn read_bounced(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        selected: &[usize],
        dest: &DeviceBuffer,
    ) -> Result<Vec<Span>> {
        if selected.is_empty() {
            return Ok(Vec::new());
        }
        let size = self.settings.bounce_buffer_size;
        let slots = plan_staging(requests, selected, size);
        let count = (self.settings.bounce_buffer_count * self.settings.nthreads).min(slots.len());
        let (ring, direct) = self.staging(file, count, &slots)?;
        let streams = self.gpu.streams();
        let results: Vec<Result<Vec<Span>>> = slots
            .par_iter()
            .enumerate()
            .map(|(k, slot)| {
                self.gpu.bind()?;
                self.fill(
                    file,
                    direct.as_ref(),
                    &ring,
                    slot,
                    &streams[k % streams.len()],
                    dest,
                )
            })
            .collect();
        let finished = ring.finish(&self.gpu);
        let mut spans = Vec::new();
        for r in results {
            spans.extend(r?);
        }
        finished?;
        Ok(spans)
    }

    /// Reads `parts` (each a list of indices into `requests`) into `dest` as one stream of
    /// bounce-buffer fills, parts one after another: each reader thread takes the fills of its
    /// own run of the current part, then what is left of the others' runs, then moves on to
    /// the next part — so no thread idles at the end of a part while the next waits. With an
    /// allocation per part ([`StreamDest::PerPart`]) the first thread to reach a part opens it
    /// (and every part before it not yet opened, in order), the others waiting meanwhile.
    /// `done(i, r)` is called (from a reader thread) once every copy of part `i` has completed,
    /// with its records; after an error, parts not yet done are left undone and the error
    /// returned. One allocation's destinations are assumed checked by the caller.
    pub(crate) fn read_stream(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        parts: &[Vec<usize>],
        dest: StreamDest<'_>,
        done: &(dyn Fn(usize, Vec<RequestRecord>) + Sync),
    ) -> Result<()> {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
        let size = self.settings.bounce_buffer_size;
        // (part, fill) in order
        let fills: Vec<(usize, crate::io::staging::StagingSlot)> = parts
            .iter()
            .enumerate()
            .flat_map(|(p, sel)| {
                plan_staging(requests, sel, size)
                    .into_iter()
                    .map(move |f| (p, f))
            })
            .collect();
        // fills are in part order: part p's are fills[part_start[p]..part_start[p + 1]]
        let mut part_start = vec![0usize; parts.len() + 1];
        for (p, _) in &fills {
            part_start[p + 1] += 1;
        }
        for p in 0..parts.len() {
            part_start[p + 1] += part_start[p];
        }
        // fills of each part not yet copied
        let left: Vec<AtomicUsize> = part_start
            .windows(2)
            .map(|w| AtomicUsize::new(w[1] - w[0]))
            .collect();
        let spans: Vec<Mutex<Vec<Span>>> = parts.iter().map(|_| Mutex::new(Vec::new())).collect();
        // per part, an event recorded after each of its copies, on that copy's stream
        let copied: Vec<Mutex<Vec<crate::device::Event>>> =
            parts.iter().map(|_| Mutex::new(Vec::new())).collect();
        // per part, its own allocation while it is read (StreamDest::PerPart)
        let own: Vec<Mutex<Option<Arc<DeviceBuffer>>>> =
            parts.iter().map(|_| Mutex::new(None)).collect();
        let finish_part = |p: usize| -> Result<()> {
            // every copy of the part is enqueued and followed by an event: wait for those
            // events, not for the copy streams, which by now also carry later parts' copies
            // (waiting for the streams held each wave back by the ring's depth of copies:
            // ~3 ms on the H200 machine)
            let events = std::mem::take(&mut *copied[p].lock().unwrap_or_else(|e| e.into_inner()));
            for ev in events {
                ev.synchronize()?;
            }
            let spans = std::mem::take(&mut *spans[p].lock().unwrap_or_else(|e| e.into_inner()));
            // the part's allocation is the caller's from now on
            own[p].lock().unwrap_or_else(|e| e.into_inner()).take();
            done(
                p,
                records_from_spans(requests, parts[p].iter().copied(), spans, IoPath::Staged),
            );
            Ok(())
        };
        // parts opened so far, in order (all of them for one allocation)
        let opened = AtomicUsize::new(match dest {
            StreamDest::One(_) => parts.len(),
            _ => 0,
        });
        let opener = Mutex::new(());
        // set by the first error, or when no more parts are wanted
        let stop = AtomicBool::new(false);
        // opens every part up to `p` not yet opened; false when no more are wanted
        let open_to = |p: usize| -> Result<bool> {
            let StreamDest::PerPart { open, .. } = dest else {
                return Ok(true);
            };
            if p < opened.load(SeqCst) {
                return Ok(true);
            }
            let _one = opener.lock().unwrap_or_else(|e| e.into_inner());
            while opened.load(SeqCst) <= p {
                if stop.load(SeqCst) {
                    return Ok(false);
                }
                let q = opened.load(SeqCst);
                let Some(buf) = open(q)? else {
                    return Ok(false);
                };
                let mine: Vec<IoRequest> = parts[q].iter().map(|&i| requests[i].clone()).collect();
                check_destinations(file, &mine, buf.len() as u64)?;
                *own[q].lock().unwrap_or_else(|e| e.into_inner()) = Some(buf);
                opened.store(q + 1, SeqCst);
                if left[q].load(SeqCst) == 0 {
                    finish_part(q)?;
                }
            }
            Ok(true)
        };
        if let StreamDest::One(_) = dest {
            for (p, l) in left.iter().enumerate() {
                if l.load(SeqCst) == 0 {
                    finish_part(p)?;
                }
            }
        }
        if fills.is_empty() {
            // parts with nothing to read, opened (and so done) in order
            if let Some(last) = parts.len().checked_sub(1) {
                open_to(last)?;
            }
            return Ok(());
        }
        // cores left to the threads that decode the parts already read: with every core
        // reading, decoding the first waves stalled until the reads ended on the H200 machine
        // (25–40 ms a wave instead of ~8; 16 cores, 14 readers measured best: RESULTS.md)
        let threads = stream_threads(self.settings.nthreads).min(fills.len());
        let (ring, direct) = self.staging(
            file,
            self.settings.bounce_buffer_count * threads,
            fills.iter().map(|(_, s)| s),
        )?;
        let streams = self.gpu.streams();
        // per part, `threads` contiguous runs of its fills, each with a cursor: (cursor, end)
        let runs: Vec<Vec<(AtomicUsize, usize)>> = (0..parts.len())
            .map(|p| {
                let (a, b) = (part_start[p], part_start[p + 1]);
                (0..threads)
                    .map(|j| {
                        let lo = a + (b - a) * j / threads;
                        let hi = a + (b - a) * (j + 1) / threads;
                        (AtomicUsize::new(lo), hi)
                    })
                    .collect()
            })
            .collect();
        let first_err: Mutex<Option<Error>> = Mutex::new(None);
        let fail = |e: Error| {
            stop.store(true, SeqCst);
            first_err
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(e);
        };
        let work = |me: usize| -> Result<()> {
            self.gpu.bind()?;
            let mut part = 0;
            while !stop.load(SeqCst) {
                // the part must be open before any of its fills is taken (parts open in
                // order: a part's allocation may wait for the memory that those before free)
                if part < parts.len() && !open_to(part)? {
                    stop.store(true, SeqCst);
                    break;
                }
                // this thread's run of the part first, then what is left of the others' (each
                // thread reading on through the file, as `read_bounced`'s split does, measured
                // faster on the H200 machine than all threads taking fills in file order)
                let got = (0..threads).find_map(|r| {
                    let (cur, end) = runs.get(part)?.get((me + r) % threads)?;
                    let k = cur.fetch_add(1, SeqCst);
                    (k < *end).then_some(k)
                });
                let Some(k) = got else {
                    if part >= parts.len() {
                        break;
                    }
                    part += 1;
                    continue;
                };
                let (p, slot) = &fills[k];
                let stream = &streams[k % streams.len()];
                let read = match dest {
                    StreamDest::One(buf) => {
                        self.fill(file, direct.as_ref(), &ring, slot, stream, buf)?
                    }
                    StreamDest::PerPart { .. } => {
                        let buf = own[*p].lock().unwrap_or_else(|e| e.into_inner()).clone();
                        let Some(buf) = buf else {
                            return Err(Error::Device {
                                device: format!("cuda:{}", self.gpu.ordinal()),
                                reason: format!("part {p} of a streamed read was not opened"),
                            });
                        };
                        self.fill(file, direct.as_ref(), &ring, slot, stream, &buf)?
                    }
                };
                let ev = self.gpu.event()?;
                ev.record(stream)?;
                copied[*p]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(ev);
                spans[*p]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend(read);
                if left[*p].fetch_sub(1, SeqCst) == 1 {
                    finish_part(*p)?;
                }
            }
            Ok(())
        };
        self.pool.install(|| {
            (0..threads).into_par_iter().for_each(|me| {
                if let Err(e) = work(me) {
                    fail(e);
                }
            })
        });
        let finished = ring.finish(&self.gpu);
        if let Some(e) = first_err.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        finished?;
        // parts after the last with fills that have nothing to read (opened, so done)
        match parts.len().checked_sub(1) {
            Some(last) if !stop.load(SeqCst) => open_to(last).map(|_| ()),
            _ => Ok(()),
        }
    }
}

/// Reader threads a streamed read (`StagedReader::read_stream`) leaves idle of `nthreads`
/// at least, for the threads decoding what it has read; [`stream_threads`] leaves 3/8 of
/// them where that is more.
pub(crate) const STREAM_SPARE_THREADS: usize = 2;

/// Reader threads of a streamed read for `nthreads`: all but 3/8 of them (and all but
/// [`STREAM_SPARE_THREADS`] at least), at least one. Measured on the H200's 16 cores
/// (benches/RESULTS.md): with 10 readers the decoders of the first waves, which build their
/// jobs and decompress some pages on the host, wait less for cores (the SNAPPY lineitem
/// file's first batch 12.0 against 15.0 ms with 14 readers); the loads read as fast.
pub(crate) fn stream_threads(nthreads: usize) -> usize {
    let spare = (nthreads * 3 / 8).max(STREAM_SPARE_THREADS);
    nthreads.saturating_sub(spare).max(1)
}

impl RangeReader for StagedReader {
    fn read(&self, file: &ParquetFile, requests: &[IoRequest], dest: Dest<'_>) -> Result<IoReport> {
        let t0 = Instant::now();
        let Dest::Device(buf) = dest else {
            return Err(Error::Device {
                device: format!("cuda:{}", self.gpu.ordinal()),
                reason:
                    "the staged reader writes device memory; use the host reader for host memory"
                        .into(),
            });
        };
        check_destinations(file, requests, buf.len() as u64)?;
        let all: Vec<usize> = (0..requests.len()).collect();
        let records = self.read_selected(file, requests, &all, buf, false)?;
        let mut report = IoReport {
            requests: records,
            wall: t0.elapsed(),
            threads: self.settings.nthreads,
            direct_io: self.settings.direct_io,
            ..IoReport::default()
        };
        let reason = "staged reader (bounce staging)";
        for q in requests {
            report.note_decision(IoPath::Staged, reason, q.len());
        }
        Ok(report)
    }

    fn name(&self) -> &'static str {
        "staged"
    }
}
