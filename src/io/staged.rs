//! Staged reads: file bytes through pinned host memory into device memory.
//!
//! [`plan_staging`] lays the selected requests into bounce-buffer fills ("slots"); reader
//! threads take a pinned buffer from a ring, `pread` a slot into it (`O_DIRECT` when asked),
//! and enqueue one host→device copy of the whole slot on one of the device's copy streams,
//! straight to its offset in the destination. An event recorded after the copy tells the next
//! user of that buffer when it may refill it, so reads of the next slots overlap the copies of
//! the previous ones. Small ranges laid end to end share a slot and move with one copy.
//!
//! [`StagedReader::read_stream`] reads the waves of a pipelined device load as one stream of
//! fills, handing each wave over as soon as its copies complete.
//!
//! [`StagingMode::Mapped`] is a zero-copy variant for large ranges of a page-cached file: map
//! the file read-only, register it block by block (16 MiB) with
//! `cuMemHostRegister(READ_ONLY)` and copy straight from the page cache — one pass over host
//! memory instead of `pread`'s copy plus the DMA read. On the H200 machine it measured 17–21
//! GB/s against 45–48 GB/s for bounce buffers (registration does not scale over threads), so it
//! is opt-in (`CUPARQUET_STAGING=mapped`), not the default. Unsafe code here: the mapping and
//! its registration.

use std::collections::VecDeque;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use rayon::prelude::*;

use crate::config::{IoSettings, StagingMode};
use crate::device::{gpu, DeviceBuffer, Event, Gpu, PinnedBuffer};
use crate::error::{Error, Result};
use crate::io::host::{open_direct, read_direct, shared_pool};
use crate::io::staging::plan_staging;
use crate::io::{
    check_destinations, records_from_spans, Dest, IoPath, IoReport, RangeReader, RequestRecord,
    Span,
};
use crate::plan::IoRequest;
use crate::source::{read_fully_at, ParquetFile};

/// In [`StagingMode::Mapped`], requests at least this large are copied from the mapped page
/// cache; smaller ones go through bounce buffers (registration has a fixed cost per call).
pub const MAPPED_MIN_BYTES: u64 = 1 << 20;

/// Reads requests into device memory through pinned bounce buffers.
#[derive(Debug, Clone)]
pub struct StagedReader {
    settings: IoSettings,
    gpu: Arc<Gpu>,
    pool: Arc<rayon::ThreadPool>,
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

impl StagedReader {
    /// A reader for device `ordinal` on the process-wide pool of `settings.nthreads` threads.
    pub fn new(settings: IoSettings, ordinal: usize) -> Result<Self> {
        settings.validate()?;
        let pool = shared_pool(settings.nthreads)?;
        Ok(StagedReader {
            gpu: gpu(ordinal)?,
            settings,
            pool,
        })
    }

    /// The device.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The thread pool reads run on.
    pub fn pool(&self) -> &Arc<rayon::ThreadPool> {
        &self.pool
    }

    /// Reads the `selected` requests (indices into `requests`) into `dest`, returning one
    /// record per selected request. Destinations are assumed checked by the caller.
    pub(crate) fn read_selected(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        selected: &[usize],
        dest: &DeviceBuffer,
    ) -> Result<Vec<RequestRecord>> {
        if selected.is_empty() {
            return Ok(Vec::new());
        }
        let (mapped, bounced, mapped_threads) = split_mapped(&self.settings, requests, selected);
        let (a, b) = self.pool.install(|| {
            rayon::join(
                || self.read_bounced(file, requests, &bounced, dest),
                || self.read_mapped(file, requests, &mapped, dest, mapped_threads),
            )
        });
        let mut spans = a?;
        spans.extend(b?);
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
                None => read_fully_at(file.file(), buf, r.file.start),
            }
            .map_err(|e| file.read_error(r.file.clone(), "", e))?;
            spans.push((r.request, t, Instant::now(), 1));
        }
        let len = (slot.dest.end - slot.dest.start) as usize;
        // SAFETY: the buffer is not written, dropped or recycled until its event has
        // completed: `pending` is set as soon as the copy is enqueued, `acquire` and `finish`
        // wait for the event first, and if recording the event fails the stream is
        // synchronized here. `dest` outlives the read, which waits for every copy (`finish`)
        // before returning.
        unsafe {
            s.buf
                .copy_to_device_async(0..len, dest, slot.dest.start as usize, stream)?;
        }
        s.pending = true;
        if let Err(e) = s.event.record(stream) {
            if self.gpu.synchronize().is_ok() {
                held.slot().pending = false;
            } else if let Some(lost) = held.slot.take() {
                // the copy's state is unknown: never free or reuse its buffer
                std::mem::forget(lost.buf);
            }
            return Err(e);
        }
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
    /// the next part — so no thread idles at the end of a part while the next waits. `done(i,
    /// r)` is called (from a reader thread) once every copy of part `i` has completed, with
    /// its records; after an error, parts not yet done are left undone and the error
    /// returned. Destinations are assumed checked by the caller.
    pub(crate) fn read_stream(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        parts: &[Vec<usize>],
        dest: &DeviceBuffer,
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
            done(
                p,
                records_from_spans(requests, parts[p].iter().copied(), spans, IoPath::Staged),
            );
            Ok(())
        };
        for (p, l) in left.iter().enumerate() {
            if l.load(SeqCst) == 0 {
                finish_part(p)?;
            }
        }
        if fills.is_empty() {
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
        let stop = AtomicBool::new(false);
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
                // this thread's run of the part first, then what is left of the others' (each
                // thread reading on through the file, as `read_bounced`'s split does, measured
                // faster on the H200 machine than all threads taking fills in file order)
                let mut got = None;
                while got.is_none() && part < parts.len() {
                    got = (0..threads).find_map(|r| {
                        let (cur, end) = &runs[part][(me + r) % threads];
                        let k = cur.fetch_add(1, SeqCst);
                        (k < *end).then_some(k)
                    });
                    if got.is_none() {
                        part += 1;
                    }
                }
                let k = got.unwrap_or(fills.len());
                let Some((p, slot)) = fills.get(k) else { break };
                let stream = &streams[k % streams.len()];
                let read = self.fill(file, direct.as_ref(), &ring, slot, stream, dest)?;
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
        finished
    }

    fn read_mapped(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        selected: &[usize],
        dest: &DeviceBuffer,
        threads: usize,
    ) -> Result<Vec<Span>> {
        if selected.is_empty() {
            return Ok(Vec::new());
        }
        let mut order: Vec<usize> = selected.to_vec();
        order.sort_by_key(|&i| requests[i].range.start);
        let span_start = requests[order[0]].range.start / PAGE * PAGE;
        let span_end = order
            .iter()
            .map(|&i| requests[i].range.end)
            .max()
            .unwrap_or(span_start);
        let mapping = Mapping::new(file, span_start..span_end)?;
        let blocks = mapped_blocks(requests, &order, span_start, MAPPED_BLOCK_BYTES);
        // One contiguous run of blocks per thread, registered and copied as a pipeline.
        let per = blocks.len().div_ceil(threads.max(1)).max(1);
        let streams = self.gpu.streams();
        let spans: Vec<Result<Vec<Span>>> = blocks
            .chunks(per)
            .enumerate()
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|(k, run)| {
                self.gpu.bind()?;
                let stream = &streams[k % streams.len()];
                copy_blocks(&self.gpu, file, &mapping, run, dest, stream)
            })
            .collect();
        let mut out = Vec::new();
        let mut first_err = None;
        for s in spans {
            match s {
                Ok(v) => out.extend(v),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        drop(mapping);
        first_err.map_or(Ok(out), Err)
    }
}

const PAGE: u64 = 4096;

/// Reader threads a streamed read ([`StagedReader::read_stream`]) leaves idle of
/// `nthreads`, for the threads decoding what it has read.
pub const STREAM_SPARE_THREADS: usize = 2;

/// Reader threads of a streamed read for `nthreads`: all but [`STREAM_SPARE_THREADS`], at
/// least one.
pub(crate) fn stream_threads(nthreads: usize) -> usize {
    nthreads.saturating_sub(STREAM_SPARE_THREADS).max(1)
}

/// Which selected requests are copied from the mapped page cache, which go through bounce
/// buffers, and how many threads the mapped part uses.
fn split_mapped(
    s: &IoSettings,
    requests: &[IoRequest],
    selected: &[usize],
) -> (Vec<usize>, Vec<usize>, usize) {
    let large = |i: usize| !s.direct_io && requests[i].len() >= MAPPED_MIN_BYTES;
    match s.staging {
        StagingMode::Bounce => (Vec::new(), selected.to_vec(), 0),
        StagingMode::Mapped => {
            let (m, b) = selected.iter().partition(|&&i| large(i));
            (m, b, s.nthreads)
        }
    }
}

/// Registration blocks of [`StagingMode::Mapped`]: 16 MiB of the mapping each.
pub const MAPPED_BLOCK_BYTES: u64 = 16 << 20;

/// A page-aligned block of the mapping registered once, and the copies out of it:
/// (request, file range, destination offset).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Block {
    /// Page-aligned file range registered (within one block of the mapping).
    pages: Range<u64>,
    copies: Vec<(usize, Range<u64>, u64)>,
}

/// Cuts the requests into blocks aligned to `block` bytes from `base` (at most the first
/// request's start, page-aligned); each block's registered pages are the page-rounded span of
/// the bytes it copies within its window, so blocks never overlap — requests that share pages,
/// or overlap in the file, share the window's block — and every page is registered once.
fn mapped_blocks(requests: &[IoRequest], order: &[usize], base: u64, block: u64) -> Vec<Block> {
    let mut blocks: std::collections::BTreeMap<u64, Block> = Default::default();
    for &i in order {
        let q = &requests[i];
        let mut off = q.range.start;
        while off < q.range.end {
            let b = (off - base) / block;
            let end = q.range.end.min(base + (b + 1) * block);
            let dest = q.dest_offset + (off - q.range.start);
            let lo = (off / PAGE * PAGE).max(base + b * block);
            let hi = end.div_ceil(PAGE) * PAGE;
            let e = blocks.entry(b).or_insert_with(|| Block {
                pages: lo..hi,
                copies: Vec::new(),
            });
            e.pages = e.pages.start.min(lo)..e.pages.end.max(hi);
            e.copies.push((i, off..end, dest));
            off = end;
        }
    }
    blocks.into_values().collect()
}

/// A read-only shared mapping of a file range (page-aligned start), unmapped on drop.
struct Mapping {
    addr: *mut libc::c_void,
    len: usize,
    file_start: u64,
}

// SAFETY: the mapping is read-only memory owned by this value; threads only read through it
// (the driver's DMA reads it) and it is unmapped once, on drop, after every user is done.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(file: &ParquetFile, range: Range<u64>) -> Result<Self> {
        let len = (range.end - range.start) as usize;
        // SAFETY: maps `len` bytes of the open file read-only at a kernel-chosen address;
        // `range.start` is page-aligned and the range lies inside the file (the caller checked
        // requests against its length). The result is checked before use.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(1),
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.file().as_raw_fd(),
                range.start as libc::off_t,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(file.read_error(range, "", std::io::Error::last_os_error()));
        }
        Ok(Mapping {
            addr,
            len: len.max(1),
            file_start: range.start,
        })
    }

    /// The address of file byte `offset` (inside the mapping).
    fn at(&self, offset: u64) -> *mut u8 {
        // wrapping_add: no unsafe needed to compute the address; callers pass offsets inside
        // the mapped range before dereferencing (through the driver) anything.
        self.addr
            .cast::<u8>()
            .wrapping_add((offset - self.file_start) as usize)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`, once; no registration of it is
        // left (every block is unregistered after its copies complete).
        unsafe { libc::munmap(self.addr, self.len) };
    }
}

/// Registers each block, enqueues its copies, and unregisters it once they are done, keeping
/// two blocks in flight so registering the next overlaps copying the previous.
fn copy_blocks(
    gpu: &Gpu,
    file: &ParquetFile,
    mapping: &Mapping,
    run: &[Block],
    dest: &DeviceBuffer,
    stream: &crate::device::Stream,
) -> Result<Vec<Span>> {
    use cudarc::driver::sys as cu;
    let fail = |range: Range<u64>, what: &str, detail: String| {
        file.read_error(
            range,
            "",
            std::io::Error::other(format!("{what}: {detail}")),
        )
    };
    let mut inflight: std::collections::VecDeque<(*mut u8, Event)> = Default::default();
    let retire = |(ptr, ev): (*mut u8, Event)| -> Result<()> {
        let r = ev.synchronize();
        // SAFETY: `ptr` was registered below and its copies have completed (or failed), so it
        // is unregistered once, here.
        unsafe { cu::cuMemHostUnregister(ptr.cast()) };
        r
    };
    let mut spans = Vec::new();
    let mut result = Ok(());
    for b in run {
        let t = Instant::now();
        let ptr = mapping.at(b.pages.start);
        let len = (b.pages.end - b.pages.start) as usize;
        // SAFETY: registers `len` bytes of the live mapping from a page-aligned address; blocks
        // are disjoint, so no page is registered twice.
        let r =
            unsafe { cu::cuMemHostRegister_v2(ptr.cast(), len, cu::CU_MEMHOSTREGISTER_READ_ONLY) };
        if r != cu::CUresult::CUDA_SUCCESS {
            result = Err(fail(
                b.pages.clone(),
                "cuMemHostRegister(READ_ONLY)",
                format!("{r:?}"),
            ));
            break;
        }
        let issued = (|| {
            for (i, range, dest_off) in &b.copies {
                let n = (range.end - range.start) as usize;
                if *dest_off as usize + n > dest.len() {
                    return Err(fail(
                        range.clone(),
                        "copy",
                        "outside the device buffer".into(),
                    ));
                }
                // SAFETY: the source bytes lie in the block registered above (inside the live
                // mapping); the destination lies inside `dest` (checked above); the block stays
                // registered and mapped until the event recorded after these copies completes.
                unsafe {
                    let src = std::slice::from_raw_parts(mapping.at(range.start) as *const u8, n);
                    cudarc::driver::result::memcpy_htod_async(
                        dest.device_ptr() + dest_off,
                        src,
                        stream.raw(),
                    )
                }
                .map_err(|e| fail(range.clone(), "cuMemcpyHtoDAsync", e.to_string()))?;
                spans.push((*i, t, Instant::now(), 1));
            }
            let ev = gpu.event()?;
            ev.record(stream)?;
            Ok(ev)
        })();
        match issued {
            Ok(ev) => inflight.push_back((ptr, ev)),
            Err(e) => {
                // wait for anything enqueued from this block before unregistering it
                let _ = gpu.synchronize();
                // SAFETY: registered above; its copies (if any) are complete after the
                // synchronize.
                unsafe { cu::cuMemHostUnregister(ptr.cast()) };
                result = Err(e);
                break;
            }
        }
        if inflight.len() > 2 {
            if let Some(x) = inflight.pop_front() {
                if let Err(e) = retire(x) {
                    result = Err(e);
                    break;
                }
            }
        }
    }
    while let Some(x) = inflight.pop_front() {
        let r = retire(x);
        if result.is_ok() {
            result = r;
        }
    }
    result.map(|()| spans)
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
        let records = self.read_selected(file, requests, &all, buf)?;
        let mut report = IoReport {
            requests: records,
            wall: t0.elapsed(),
            threads: self.settings.nthreads,
            direct_io: self.settings.direct_io,
            ..IoReport::default()
        };
        let reason = format!("staged reader ({} staging)", self.settings.staging);
        for q in requests {
            report.note_decision(IoPath::Staged, &reason, q.len());
        }
        Ok(report)
    }

    fn name(&self) -> &'static str {
        "staged"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_blocks_are_disjoint_and_cover_every_byte() {
        let mut x = 0x1234_5678u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        for _ in 0..200 {
            // sorted, disjoint requests, sometimes touching or sharing a page
            let mut reqs = Vec::new();
            let mut off = next(10_000);
            let mut dest = 0;
            for _ in 0..1 + next(20) {
                let len = 1 + next(5 << 20);
                reqs.push(IoRequest {
                    range: off..off + len,
                    dest_offset: dest,
                    chunks: vec![],
                });
                dest += len;
                off += len + [0, 1, 100, 70_000][next(4) as usize];
            }
            let order: Vec<usize> = (0..reqs.len()).collect();
            let base = reqs[0].range.start / PAGE * PAGE;
            let block = [PAGE, 64 << 10, 1 << 20][next(3) as usize];
            let blocks = mapped_blocks(&reqs, &order, base, block);
            let mut covered = 0;
            for (k, b) in blocks.iter().enumerate() {
                assert_eq!(b.pages.start % PAGE, 0);
                assert_eq!(b.pages.end % PAGE, 0);
                assert!(b.pages.end - b.pages.start <= block, "{b:?}");
                if k > 0 {
                    assert!(blocks[k - 1].pages.end <= b.pages.start, "overlap");
                }
                for (i, r, d) in &b.copies {
                    assert!(r.start >= b.pages.start && r.end <= b.pages.end);
                    let q = &reqs[*i];
                    assert_eq!(*d, q.dest_offset + (r.start - q.range.start));
                    covered += r.end - r.start;
                }
            }
            assert_eq!(covered, reqs.iter().map(|q| q.len()).sum::<u64>());
        }
    }
}
