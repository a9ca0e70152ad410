//! One CUDA device: its context, copy streams, device allocations and pinned host buffers.
//!
//! [`gpu`] is the only place a CUDA context is created (the device's primary context, shared
//! with every other library in the process) and streams are made. Everything here is a thin,
//! owning wrapper over driver handles: freed on drop, usable from any thread (each call binds
//! the context to the calling thread first, which the driver makes cheap).

use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use cudarc::driver::result as cu;
use cudarc::driver::sys;
use cudarc::driver::{CudaContext, DriverError};

use super::streams::{DECODE_SETS, SET_STREAMS};
use crate::device::probe_cuda;
use crate::error::{Error, Result};

/// Streams each device keeps for host→device copies: copies issued round-robin on them overlap
/// each other and the reads that fill the next bounce buffers.
pub const COPY_STREAMS: usize = 4;

/// Pinned bytes a device's pool keeps for reuse at least: the most recently returned buffers
/// (allocating pinned memory costs milliseconds per buffer, and freeing it waits for the
/// device). The pool keeps up to [`pinned_pool_retain`]: this, or a sixteenth of the host's
/// memory up to 4 GiB, whichever is more — batches copied back to the host live in pinned
/// buffers from the pool, and an engine holds a few of them per partition at a time.
pub const PINNED_POOL_RETAIN: usize = 1 << 30;

/// The pinned bytes a device's pool keeps for reuse (see [`PINNED_POOL_RETAIN`]).
pub fn pinned_pool_retain() -> usize {
    static RETAIN: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *RETAIN.get_or_init(|| {
        let total = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
                Some(kib * 1024)
            })
            .unwrap_or(0);
        (total / 16).clamp(PINNED_POOL_RETAIN, 4 << 30)
    })
}

/// `range` must lie inside a buffer of `len` bytes (`what`: "device", "pinned").
fn check_range(ordinal: usize, range: &Range<usize>, len: usize, what: &str) -> Result<()> {
    if range.start > range.end || range.end > len {
        return Err(Error::Device {
            device: format!("cuda:{ordinal}"),
            reason: format!(
                "bytes {}..{} are outside the {len}-byte {what} buffer",
                range.start, range.end
            ),
        });
    }
    Ok(())
}

pub(crate) fn driver_error(ordinal: usize, what: &str, e: DriverError) -> Error {
    Error::Device {
        device: format!("cuda:{ordinal}"),
        reason: format!("{what} failed: {e}"),
    }
}

/// A CUDA stream owned by a [`Gpu`].
#[derive(Debug)]
pub struct Stream {
    pub(super) raw: sys::CUstream,
}

// SAFETY: a CUstream is an opaque driver handle; the driver API may be called with it from any
// thread (the context is bound per call).
unsafe impl Send for Stream {}
// SAFETY: as above; enqueueing work on one stream from several threads is allowed by the driver.
unsafe impl Sync for Stream {}

impl Stream {
    /// The raw handle.
    pub fn raw(&self) -> sys::CUstream {
        self.raw
    }
}

/// Every device allocation is a multiple of this many bytes (see [`Gpu::alloc`]).
pub const ALLOC_PADDING: usize = 64;

/// The calling thread's default stream (the driver's `CU_STREAM_PER_THREAD` handle): the
/// synchronous copies and memsets of [`DeviceBuffer`] are issued there and waited for, so that
/// a thread waits for its own copies only. On the legacy default stream, which every thread
/// shares, each such wait (and the one before every kernel launch that the legacy stream's
/// early-returning copies needed) also waited for every other thread's copies in flight:
/// loads sharing the GPU queued behind each other.
pub(crate) const PER_THREAD_STREAM: sys::CUstream = 2 as sys::CUstream;

/// Streams for copies back to the host, per device.
const DOWNLOAD_STREAMS: usize = 4;

/// `n` new non-blocking streams of the device `ordinal`, whose context is current.
pub(super) fn new_streams(ordinal: usize, n: usize) -> Result<Vec<Stream>> {
    (0..n)
        .map(|_| {
            cu::stream::create(cu::stream::StreamKind::NonBlocking)
                .map(|raw| Stream { raw })
                .map_err(|e| driver_error(ordinal, "cuStreamCreate", e))
        })
        .collect()
}

/// Sets the current context's scheduling flag to `CU_CTX_SCHED_YIELD`, keeping its other
/// flags: a thread waiting for the device (a stream, an event, a synchronous copy) spins,
/// yielding its core to other runnable threads between polls, so a decoding thread that waits
/// for its kernels leaves its core to the threads reading the next part of the file. Blocking
/// waits and the driver's choice measured slower (benches/RESULTS.md, `cuda_wait`).
fn apply_host_wait(ordinal: usize) -> Result<()> {
    use sys::CUctx_flags as F;
    let sched = F::CU_CTX_SCHED_YIELD as u32;
    let mut flags = 0u32;
    // SAFETY: the device's context is current on this thread (bound by the caller) and
    // `flags` is a valid place for the driver to write the context's flags.
    unsafe { sys::cuCtxGetFlags(&mut flags) }
        .result()
        .map_err(|e| driver_error(ordinal, "cuCtxGetFlags", e))?;
    let mask = F::CU_CTX_SCHED_MASK as u32;
    // SAFETY: as above; only the scheduling bits change, to one of the driver's values.
    unsafe { sys::cuCtxSetFlags((flags & !mask) | sched) }
        .result()
        .map_err(|e| driver_error(ordinal, "cuCtxSetFlags", e))
}

/// One CUDA device, opened once per process by [`gpu`].
pub struct Gpu {
    ordinal: usize,
    ctx: Arc<CudaContext>,
    name: String,
    compute_capability: (i32, i32),
    total_memory: usize,
    multiprocessors: usize,
    streams: Vec<Stream>,
    /// The streams decoding kernels run on, apart from the copy streams, so that a load's
    /// reads (copies) and the decoding of what was read before run at once, and so that
    /// several decoding threads (each on its slot's stream, [`with_decode_slot`]) overlap: in
    /// sets, one per load decoding at once ([`Gpu::decode_set`]; set 0 created with the
    /// device, the others when first taken).
    pub(super) decode: Vec<std::sync::OnceLock<Vec<Stream>>>,
    /// The decode sets (but 0) no load holds.
    pub(super) free_sets: Mutex<Vec<usize>>,
    /// Streams for copies back to the host ([`Gpu::download_stream`]), apart from the read
    /// and decode streams so that a batch copied back does not wait behind the next reads.
    downloads: Vec<Stream>,
    next_download: std::sync::atomic::AtomicUsize,
    /// A stream that never carries work, where [`Gpu::event_for_written`] records.
    pub(super) idle: Stream,
    /// Bytes of pinned host memory this device allocated and not freed ([`Gpu::pinned_bytes`]).
    pinned_bytes: std::sync::atomic::AtomicU64,
    /// cuparquet's own stream-ordered memory pool and the stream its allocations and frees are
    /// ordered on; None where the device has no memory pools (allocations then go straight to
    /// cuMemAlloc / cuMemFree).
    pool: Option<(sys::CUmemoryPool, Stream)>,
    /// Bytes of cuparquet's device allocations alive now, and the most alive at once since
    /// [`Gpu::reset_peak_live_bytes`].
    live: std::sync::atomic::AtomicU64,
    peak: std::sync::atomic::AtomicU64,
}

// SAFETY: the pool handle is a driver object usable from any thread; it is only passed to the
// driver.
unsafe impl Send for Gpu {}
// SAFETY: as above; the driver synchronises its own use of the pool.
unsafe impl Sync for Gpu {}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.ordinal)
            .field("name", &self.name)
            .field("compute_capability", &self.compute_capability)
            .finish_non_exhaustive()
    }
}

/// The device `ordinal`, opened on first use (its primary context retained, copy streams
/// created) and shared for the life of the process. A clear error when the driver library is
/// missing, it does not initialise, there is no device, or the index is out of range.
pub fn gpu(ordinal: usize) -> Result<Arc<Gpu>> {
    static GPUS: Mutex<Vec<(usize, Arc<Gpu>)>> = Mutex::new(Vec::new());
    let probe = probe_cuda();
    let name = format!("cuda:{ordinal}");
    if probe.devices == 0 {
        return Err(Error::Device {
            device: name,
            reason: probe.detail.clone(),
        });
    }
    if ordinal >= probe.devices {
        return Err(Error::Device {
            device: name,
            reason: format!(
                "no such device: {} (valid: cuda:0 to cuda:{})",
                probe.detail,
                probe.devices - 1
            ),
        });
    }
    let mut gpus = GPUS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, g)) = gpus.iter().find(|(n, _)| *n == ordinal) {
        return Ok(Arc::clone(g));
    }
    let g = Arc::new(Gpu::open(ordinal)?);
    gpus.push((ordinal, Arc::clone(&g)));
    Ok(g)
}

impl Gpu {
    fn open(ordinal: usize) -> Result<Self> {
        let ctx = CudaContext::new(ordinal).map_err(|e| driver_error(ordinal, "cuCtx", e))?;
        ctx.bind_to_thread()
            .map_err(|e| driver_error(ordinal, "cuCtxSetCurrent", e))?;
        apply_host_wait(ordinal)?;
        let name = ctx.name().unwrap_or_else(|_| format!("cuda:{ordinal}"));
        let compute_capability = ctx
            .compute_capability()
            .map_err(|e| driver_error(ordinal, "cuDeviceGetAttribute", e))?;
        let total_memory = ctx.total_mem().unwrap_or(0);
        let multiprocessors = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_or(1, |n| n.max(1) as usize);
        let mut streams = Vec::with_capacity(COPY_STREAMS);
        for _ in 0..COPY_STREAMS {
            let raw = cu::stream::create(cu::stream::StreamKind::NonBlocking)
                .map_err(|e| driver_error(ordinal, "cuStreamCreate", e))?;
            streams.push(Stream { raw });
        }
        let pool = Self::open_pool(&ctx, ordinal, total_memory)?;
        // the shared decode set: a stream per decode slot and its companion
        // ([`super::streams::companion_stream`])
        let decode: Vec<std::sync::OnceLock<Vec<Stream>>> =
            (0..DECODE_SETS).map(|_| std::sync::OnceLock::new()).collect();
        let _ = decode[0].set(new_streams(ordinal, SET_STREAMS)?);
        let mut downloads = Vec::with_capacity(DOWNLOAD_STREAMS);
        for _ in 0..DOWNLOAD_STREAMS {
            let raw = cu::stream::create(cu::stream::StreamKind::NonBlocking)
                .map_err(|e| driver_error(ordinal, "cuStreamCreate", e))?;
            downloads.push(Stream { raw });
        }
        let idle = Stream {
            raw: cu::stream::create(cu::stream::StreamKind::NonBlocking)
                .map_err(|e| driver_error(ordinal, "cuStreamCreate", e))?,
        };
        Ok(Gpu {
            decode,
            // taken from the end: set 1 first
            free_sets: Mutex::new((1..DECODE_SETS).rev().collect()),
            downloads,
            idle,
            next_download: std::sync::atomic::AtomicUsize::new(0),
            ordinal,
            ctx,
            name,
            compute_capability,
            total_memory,
            multiprocessors,
            streams,
            pinned_bytes: std::sync::atomic::AtomicU64::new(0),
            pool,
            live: std::sync::atomic::AtomicU64::new(0),
            peak: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Bytes of cuparquet's device allocations alive now (every [`DeviceBuffer`] of this
    /// device: a load's chunks, decompressed pages, scratch and batches, and the batches
    /// callers hold; not the pool's retained free memory nor the CUDA context).
    pub fn live_bytes(&self) -> u64 {
        self.live.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The most bytes [`live_bytes`](Self::live_bytes) reached since the last
    /// [`reset_peak_live_bytes`](Self::reset_peak_live_bytes) (or since the device was opened).
    pub fn peak_live_bytes(&self) -> u64 {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Starts a new high-water mark from the bytes alive now.
    pub fn reset_peak_live_bytes(&self) {
        self.peak
            .store(self.live_bytes(), std::sync::atomic::Ordering::Relaxed);
    }

    fn count_alloc(&self, len: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let now = self.live.fetch_add(len as u64, Relaxed) + len as u64;
        self.peak.fetch_max(now, Relaxed);
    }

    fn count_free(&self, len: usize) {
        self.live
            .fetch_sub(len as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// cuparquet's device memory pool: freed memory stays in it (up to a quarter of the
    /// device's memory) for the next allocation, so the many buffers of a load cost neither
    /// cuMemAlloc's mapping nor cuMemFree's device-wide synchronisation (benches/RESULTS.md,
    /// `device_pool`). Its own pool, so other libraries' use of the device's default pool is
    /// left alone. `None` where the device has no memory pools.
    fn open_pool(
        ctx: &Arc<CudaContext>,
        ordinal: usize,
        total_memory: usize,
    ) -> Result<Option<(sys::CUmemoryPool, Stream)>> {
        let supported = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)
            .unwrap_or(0);
        if supported == 0 {
            return Ok(None);
        }
        // SAFETY: an all-zero CUmemPoolProps is its documented default (no handle types, no
        // limit); the fields that matter are set below.
        let mut props: sys::CUmemPoolProps = unsafe { std::mem::zeroed() };
        props.allocType = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = ordinal as i32;
        // SAFETY: the context is current (CudaContext::new binds it); props is initialised.
        let pool = unsafe { cu::mem_pool::create(&props) }
            .map_err(|e| driver_error(ordinal, "cuMemPoolCreate", e))?;
        let mut retain: u64 = total_memory as u64 / 4;
        let set = |attr: sys::CUmemPool_attribute, value: *mut std::ffi::c_void| {
            // SAFETY: the pool is live; `value` points to a live value of the attribute's type
            // (checked at each call below) for the duration of the call.
            unsafe { cu::mem_pool::set_attribute(pool, attr, value) }
                .map_err(|e| driver_error(ordinal, "cuMemPoolSetAttribute", e))
        };
        use sys::CUmemPool_attribute as A;
        // the release threshold is a u64
        set(
            A::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut retain as *mut u64).cast(),
        )?;
        // memory freed on one decode stream while its kernels still run must not be handed to
        // an allocation (which waits on its stream) behind them: that would serialise the
        // decoding threads; such an allocation takes fresh memory instead (an int boolean)
        let mut no: i32 = 0;
        set(
            A::CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES,
            (&mut no as *mut i32).cast(),
        )?;
        let raw = cu::stream::create(cu::stream::StreamKind::NonBlocking)
            .map_err(|e| driver_error(ordinal, "cuStreamCreate", e))?;
        Ok(Some((pool, Stream { raw })))
    }

    /// Returns the device memory the pool keeps for reuse to the driver (it keeps what live
    /// buffers use). Returns whether there is a pool.
    pub fn trim_pool(&self) -> Result<bool> {
        let Some((pool, _)) = &self.pool else {
            return Ok(false);
        };
        // the frees are enqueued on the decode streams (of every set): let them complete
        self.synchronize_all_decode()?;
        // SAFETY: the pool is live.
        unsafe { cu::mem_pool::trim_to(*pool, 0) }
            .map_err(|e| driver_error(self.ordinal, "cuMemPoolTrimTo", e))?;
        Ok(true)
    }

    /// The device index.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device name, e.g. "NVIDIA H200".
    pub fn name(&self) -> &str {
        &self.name
    }

    /// (major, minor) compute capability.
    pub fn compute_capability(&self) -> (i32, i32) {
        self.compute_capability
    }

    /// Device memory in bytes.
    pub fn total_memory(&self) -> usize {
        self.total_memory
    }

    /// Streaming multiprocessors.
    pub fn multiprocessors(&self) -> usize {
        self.multiprocessors
    }

    /// Makes the device's (primary) context current on the calling thread. Every entry point
    /// that calls the driver does this first; the previous current context is not restored.
    pub fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_error(self.ordinal, "cuCtxSetCurrent", e))
    }

    /// The copy streams.
    pub fn streams(&self) -> &[Stream] {
        &self.streams
    }

    /// A stream for copies back to the host, taken in turn from a few kept for that.
    pub fn download_stream(&self) -> &Stream {
        let i = self
            .next_download
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &self.downloads[i % self.downloads.len()]
    }

    /// Waits for all work on the copy streams.
    pub fn synchronize(&self) -> Result<()> {
        self.wait_for(&self.streams)
    }

    pub(super) fn wait_for<'a>(&self, streams: impl IntoIterator<Item = &'a Stream>) -> Result<()> {
        self.bind()?;
        for s in streams {
            // SAFETY: the stream is live (owned by self, which outlives the call).
            unsafe { cu::stream::synchronize(s.raw) }
                .map_err(|e| driver_error(self.ordinal, "cuStreamSynchronize", e))?;
        }
        Ok(())
    }

    /// Free and total device memory, in bytes (`cuMemGetInfo`).
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.bind()?;
        cu::mem_get_info().map_err(|e| driver_error(self.ordinal, "cuMemGetInfo", e))
    }

    /// Waits for the work of the calling thread's default stream ([`PER_THREAD_STREAM`]),
    /// where the copies and memsets of [`DeviceBuffer`] are issued (each also waits for itself
    /// before it returns). Code that hands device memory to another library's stream calls it
    /// first.
    pub(crate) fn synchronize_default_stream(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: the per-thread default stream is a handle the driver defines, always valid.
        unsafe { cu::stream::synchronize(PER_THREAD_STREAM) }
            .map_err(|e| driver_error(self.ordinal, "cuStreamSynchronize(per-thread)", e))
    }

    /// Allocates `len` bytes of device memory (uninitialised), padded to a multiple of
    /// [`ALLOC_PADDING`] bytes. Out of memory is an error that says how much was asked for and
    /// how much the device has free.
    pub fn alloc(self: &Arc<Self>, len: usize) -> Result<DeviceBuffer> {
        self.bind()?;
        if len == 0 {
            return Ok(DeviceBuffer {
                gpu: Arc::clone(self),
                ptr: 0,
                len: 0,
            });
        }
        // Padded to 64 bytes, as Arrow recommends for every buffer: consumers of exported
        // batches may read a buffer rounded up (libcudf copies validity bitmaps that way), and
        // such a read must stay inside the allocation.
        let padded = len.next_multiple_of(ALLOC_PADDING);
        let ptr = match &self.pool {
            // a fault injected for tests (crate::error::fault): out of memory, nothing allocated
            _ if crate::error::fault::hit(crate::error::fault::Site::DeviceAlloc) => Err(DriverError(
                sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY,
            )),
            // SAFETY: the context is bound, the pool and its stream are live; the allocation is
            // owned by the DeviceBuffer and freed once in its Drop. Waiting on the (otherwise
            // idle) stream makes it usable from every stream and from synchronous calls.
            Some((pool, stream)) => unsafe {
                cu::mem_pool::alloc_async(*pool, padded, stream.raw)
                    .and_then(|p| cu::stream::synchronize(stream.raw).map(|()| p))
            },
            // SAFETY: the context is bound; the returned allocation is owned by the
            // DeviceBuffer and freed once in its Drop.
            None => unsafe { cu::malloc_sync(padded) },
        };
        let ptr = ptr.map_err(|e| {
            let free = cu::mem_get_info().map(|(f, _)| f).unwrap_or(0);
            Error::Device {
                device: format!("cuda:{}", self.ordinal),
                reason: format!(
                    "allocating {} of device memory failed ({e}; {} free of {})",
                    crate::config::human_bytes(len as u64),
                    crate::config::human_bytes(free as u64),
                    crate::config::human_bytes(self.total_memory as u64)
                ),
            }
        })?;
        self.count_alloc(len);
        Ok(DeviceBuffer {
            gpu: Arc::clone(self),
            ptr,
            len,
        })
    }

    /// A pinned host buffer of at least `len` bytes (page-locked, not write-combined: the CPU
    /// writes and may read it; portable: every device's copies may use it). Taken from the
    /// process's pool when one is free, whichever device allocated it (one pool for the process), so
    /// that the devices of a spread load share their staging.
    pub fn pinned(self: &Arc<Self>, len: usize) -> Result<PinnedBuffer> {
        {
            let mut pool = SHARED_PINNED.lock().unwrap_or_else(|p| p.into_inner());
            // the most recently returned buffer that fits without wasting more than half
            if let Some(i) = pool
                .iter()
                .rposition(|b| b.len >= len && b.len <= len.saturating_mul(2))
            {
                return Ok(pool.remove(i));
            }
        }
        self.bind()?;
        let n = len.max(1);
        let ptr = if crate::error::fault::hit(crate::error::fault::Site::PinnedAlloc) {
            // a fault injected for tests (crate::error::fault): out of memory, nothing allocated
            Err(DriverError(sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY))
        } else {
            // SAFETY: the context is bound; CU_MEMHOSTALLOC_PORTABLE asks for ordinary (cached,
            // not write-combined) page-locked memory that every context may copy from and to.
            // The allocation is owned by the PinnedBuffer and freed in its Drop.
            unsafe { cu::malloc_host(n, sys::CU_MEMHOSTALLOC_PORTABLE) }
        }
        .map_err(|e| {
            Error::Device {
                device: format!("cuda:{}", self.ordinal),
                reason: format!(
                    "allocating {} of pinned host memory failed ({e}); lower CUPARQUET_BOUNCE_BUFFER_SIZE or _COUNT",
                    crate::config::human_bytes(n as u64)
                ),
            }
        })?;
        self.pinned_bytes
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(PinnedBuffer {
            gpu: Arc::clone(self),
            ptr: ptr.cast(),
            len: n,
        })
    }

    /// Bytes of pinned host memory this device allocated and not freed: the buffers in use
    /// (staging, batches copied back that are still held) and those the process's pool keeps
    /// ([`pinned_pool_retain`]).
    pub fn pinned_bytes(&self) -> u64 {
        self.pinned_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Returns a pinned buffer to the process's pool; the least recently returned buffers are
    /// freed when the pool holds more than [`pinned_pool_retain`] bytes. The caller must have
    /// waited for every copy from the buffer (crate-private for that reason).
    pub(crate) fn recycle_pinned(&self, b: PinnedBuffer) {
        let freed = {
            let mut pool = SHARED_PINNED.lock().unwrap_or_else(|p| p.into_inner());
            pool.push(b);
            let mut held: usize = pool.iter().map(|b| b.len).sum();
            let retain = pinned_pool_retain();
            let mut freed = Vec::new();
            while held > retain && pool.len() > 1 {
                let old = pool.remove(0);
                held -= old.len;
                freed.push(old);
            }
            freed
        };
        // freed outside the lock (freeing pinned memory waits for the device)
        drop(freed);
    }

    /// Frees the pinned buffers this device allocated that the pool keeps for reuse; returns
    /// the bytes freed.
    pub fn release_pinned(&self) -> usize {
        let mine: Vec<PinnedBuffer> = {
            let mut pool = SHARED_PINNED.lock().unwrap_or_else(|p| p.into_inner());
            let (mine, rest): (Vec<_>, Vec<_>) = pool
                .drain(..)
                .partition(|b| b.gpu.ordinal == self.ordinal);
            *pool = rest;
            mine
        };
        mine.iter().map(|b| b.len).sum()
    }
}

/// The pinned buffers kept for reuse, of every device (they are allocated portable): the
/// staging of the devices of a spread load is pinned once and shared.
static SHARED_PINNED: Mutex<Vec<PinnedBuffer>> = Mutex::new(Vec::new());

impl Drop for Gpu {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            let decode = self.decode.iter().filter_map(|s| s.get()).flatten();
            for s in self
                .streams
                .iter()
                .chain(decode)
                .chain(&self.downloads)
                .chain([&self.idle])
            {
                // SAFETY: each stream is live and destroyed once, here, after its work (frees
                // included) has completed.
                unsafe {
                    let _ = cu::stream::synchronize(s.raw);
                    let _ = cu::stream::destroy(s.raw);
                }
            }
            if let Some((pool, stream)) = self.pool.take() {
                // SAFETY: no DeviceBuffer outlives the Gpu (each holds an Arc of it), so the
                // pool has no live allocations; both are destroyed once, here.
                unsafe {
                    let _ = cu::stream::synchronize(stream.raw);
                    let _ = cu::stream::destroy(stream.raw);
                    let _ = cu::mem_pool::destroy(pool);
                }
            }
        }
    }
}

/// Device memory owned by cuparquet: freed when dropped.
pub struct DeviceBuffer {
    gpu: Arc<Gpu>,
    ptr: sys::CUdeviceptr,
    len: usize,
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DeviceBuffer(cuda:{}, {:#x}, {} bytes)",
            self.gpu.ordinal, self.ptr, self.len
        )
    }
}

impl DeviceBuffer {
    /// The device.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// The device address of byte 0 (0 for an empty buffer).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn check(&self, range: &Range<usize>) -> Result<()> {
        check_range(self.gpu.ordinal, range, self.len, "device")
    }

    /// Copies device bytes `range` into a new host vector (synchronous).
    pub fn copy_to_host(&self, range: Range<usize>) -> Result<Vec<u8>> {
        self.check(&range)?;
        let mut v = vec![0u8; range.end - range.start];
        self.copy_into(range.start, &mut v)?;
        Ok(v)
    }

    /// Copies device bytes starting at `offset` into `dest` (synchronous).
    pub fn copy_into(&self, offset: usize, dest: &mut [u8]) -> Result<()> {
        let range = offset..offset.saturating_add(dest.len());
        self.check(&range)?;
        if dest.is_empty() {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: the range lies inside this live allocation (checked above) and `dest` is a
        // valid host slice of exactly the copied length; the stream is waited for below, before
        // `dest` is used.
        unsafe { cu::memcpy_dtoh_async(dest, self.ptr + offset as u64, PER_THREAD_STREAM) }
            .map_err(|e| driver_error(self.gpu.ordinal, "cuMemcpyDtoHAsync", e))?;
        self.gpu.synchronize_default_stream()
    }

    /// Enqueues a copy of device bytes `src` into `dst[dst_offset..]` on `stream`.
    ///
    /// # Safety
    /// Until work recorded on `stream` after this call has completed (the stream synchronized,
    /// or an event recorded after it waited for), the caller must not read or write those
    /// bytes of `dst`, drop it or give it back to the pool, and must not drop `self`.
    pub unsafe fn copy_to_pinned_async(
        &self,
        src: Range<usize>,
        dst: &mut PinnedBuffer,
        dst_offset: usize,
        stream: &Stream,
    ) -> Result<()> {
        self.check(&src)?;
        let len = src.end - src.start;
        check_range(
            self.gpu.ordinal,
            &(dst_offset..dst_offset.saturating_add(len)),
            dst.len,
            "pinned",
        )?;
        if len == 0 {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: both ranges lie inside live allocations (checked above); the caller keeps
        // them alive and the destination untouched until the copy completes (this function's
        // contract).
        unsafe {
            cu::memcpy_dtoh_async(
                &mut dst.as_mut_slice()[dst_offset..dst_offset + len],
                self.ptr + src.start as u64,
                stream.raw,
            )
        }
        .map_err(|e| driver_error(self.gpu.ordinal, "cuMemcpyDtoHAsync", e))
    }

    /// Copies `src` to device bytes starting at `offset` (synchronous).
    pub fn copy_from_host(&mut self, offset: usize, src: &[u8]) -> Result<()> {
        let range = offset..offset.saturating_add(src.len());
        self.check(&range)?;
        if src.is_empty() {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: the range lies inside this live allocation (checked above); the stream is
        // waited for below, so `src` outlives the copy.
        unsafe { cu::memcpy_htod_async(self.ptr + offset as u64, src, PER_THREAD_STREAM) }
            .map_err(|e| driver_error(self.gpu.ordinal, "cuMemcpyHtoDAsync", e))?;
        self.gpu.synchronize_default_stream()
    }

    /// Copies `src[src_range]` (another device buffer of the same device) to
    /// `self[dst_offset..]` (synchronous).
    pub fn copy_from_device(
        &mut self,
        dst_offset: usize,
        src: &DeviceBuffer,
        src_range: Range<usize>,
    ) -> Result<()> {
        src.check(&src_range)?;
        let len = src_range.end - src_range.start;
        self.check(&(dst_offset..dst_offset.saturating_add(len)))?;
        if len == 0 {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: both ranges lie inside live allocations (checked above) and do not overlap
        // (`&mut self` and `&src` are distinct buffers); the stream is waited for below, while
        // both live.
        unsafe {
            cu::memcpy_dtod_async(
                self.ptr + dst_offset as u64,
                src.ptr + src_range.start as u64,
                len,
                PER_THREAD_STREAM,
            )
        }
        .map_err(|e| driver_error(self.gpu.ordinal, "cuMemcpyDtoDAsync", e))?;
        self.gpu.synchronize_default_stream()
    }

    /// Sets every byte to `value` (synchronous).
    pub fn fill(&mut self, value: u8) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: the whole live allocation is written; the stream is waited for below.
        unsafe { cu::memset_d8_async(self.ptr, value, self.len, PER_THREAD_STREAM) }
            .map_err(|e| driver_error(self.gpu.ordinal, "cuMemsetD8Async", e))?;
        self.gpu.synchronize_default_stream()
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        self.gpu.count_free(self.len);
        if self.gpu.bind().is_ok() {
            // The allocation is live and freed once, here. No work uses it any more: copies
            // into it are enqueued only through `unsafe` calls whose contract keeps the buffer
            // alive until they complete, and every reader waits for its copies before returning.
            let _ = match &self.gpu.pool {
                // SAFETY: as above; a pooled allocation goes back to the pool in the order of
                // the dropping thread's decode stream: after any kernel of that thread still
                // reading it (a decoding pass drops what its kernels use on its own thread, or
                // after waiting for them).
                Some(_) => unsafe { cu::free_async(self.ptr, self.gpu.decode_stream().raw) },
                // SAFETY: as above.
                None => unsafe { cu::free_sync(self.ptr) },
            };
        }
    }
}

/// Page-locked host memory (flags 0: cached, not write-combined). Freed when dropped.
pub struct PinnedBuffer {
    gpu: Arc<Gpu>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer exclusively owns its allocation; moving it between threads moves that
// ownership. Shared access goes through &self (read-only slices) only.
unsafe impl Send for PinnedBuffer {}
// SAFETY: &PinnedBuffer only hands out shared slices.
unsafe impl Sync for PinnedBuffer {}

impl fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PinnedBuffer({} bytes)", self.len)
    }
}

impl PinnedBuffer {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never empty (at least one byte is allocated).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is a live allocation of len bytes owned by self; cuMemHostAlloc memory is
        // readable (its contents are initialised bytes from the CPU's point of view).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    /// Copies bytes `src` of this buffer to `dst[dst_offset..]` and waits for the copy.
    pub fn copy_to_device(
        &self,
        src: Range<usize>,
        dst: &DeviceBuffer,
        dst_offset: usize,
        stream: &Stream,
    ) -> Result<()> {
        let done = dst.gpu.event()?;
        // SAFETY: the copy is waited for below before this function returns, while `self` and
        // `dst` are still borrowed; if enqueueing the wait fails, the stream is synchronized.
        unsafe { self.copy_to_device_async(src, dst, dst_offset, stream)? };
        if done
            .record(stream)
            .and_then(|()| done.synchronize())
            .is_err()
        {
            dst.gpu.bind()?;
            // SAFETY: the stream is live; waiting for all its work covers the copy above.
            unsafe { cu::stream::synchronize(stream.raw()) }
                .map_err(|e| driver_error(dst.gpu.ordinal, "cuStreamSynchronize", e))?;
        }
        Ok(())
    }

    /// Enqueues a copy of bytes `src` of this buffer to `dst[dst_offset..]` on `stream`.
    ///
    /// # Safety
    /// Until work recorded on `stream` after this call has completed (an event recorded after
    /// it, or the stream synchronized), the caller must not write to those bytes of this
    /// buffer, drop it or give it back to the pool, and must not drop `dst`.
    pub unsafe fn copy_to_device_async(
        &self,
        src: Range<usize>,
        dst: &DeviceBuffer,
        dst_offset: usize,
        stream: &Stream,
    ) -> Result<()> {
        let len = src.end.saturating_sub(src.start);
        // (the buffer may come from another device's allocation: the pool is shared)
        check_range(dst.gpu.ordinal, &src, self.len, "pinned")?;
        dst.check(&(dst_offset..dst_offset.saturating_add(len)))?;
        if len == 0 {
            return Ok(());
        }
        dst.gpu.bind()?;
        // SAFETY: source and destination ranges are inside live allocations (checked above);
        // the caller keeps both alive and the source unchanged until the copy completes (the
        // contract of this function).
        unsafe {
            cu::memcpy_htod_async(
                dst.ptr + dst_offset as u64,
                &self.as_slice()[src],
                stream.raw,
            )
        }
        .map_err(|e| driver_error(dst.gpu.ordinal, "cuMemcpyHtoDAsync", e))
    }
}

impl Stream {
    /// Blocks until the work enqueued on the stream has completed.
    pub fn synchronize(&self, gpu: &Gpu) -> Result<()> {
        gpu.bind()?;
        // SAFETY: the stream is live (owned by `gpu`, which outlives the call).
        unsafe { cu::stream::synchronize(self.raw) }
            .map_err(|e| driver_error(gpu.ordinal, "cuStreamSynchronize", e))
    }
}

impl PinnedBuffer {
    /// Gives the buffer back to its device's pool (the caller has waited for every copy into
    /// or out of it).
    pub(crate) fn recycle(self) {
        let gpu = Arc::clone(&self.gpu);
        gpu.recycle_pinned(self);
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // freed in the context that allocated it, the thread's own context restored after (a
        // buffer of the shared pool may be freed by a thread working with another device)
        let current = cu::ctx::get_current().ok().flatten();
        if self.gpu.bind().is_ok() {
            // SAFETY: the allocation is live and freed once, here.
            let _ = unsafe { cu::free_host(self.ptr.cast()) };
            if let Some(ctx) = current {
                // SAFETY: `ctx` was the thread's current context a moment ago; a context
                // outlives the threads that use it (primary contexts are retained by their
                // Gpu for the life of the process).
                let _ = unsafe { cu::ctx::set_current(ctx) };
            }
        }
        (self.gpu.pinned_bytes).fetch_sub(self.len as u64, std::sync::atomic::Ordering::Relaxed);
    }
}
