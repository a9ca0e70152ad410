//! CUDA events, and the consumer's side of device memory another library hands over by
//! address (the Arrow C Device Data Interface: an event to wait for, buffers to read).

use cudarc::driver::result as cu;
use cudarc::driver::sys;

use super::gpu::{driver_error, Gpu, Stream};
use crate::error::Result;

/// A CUDA event (timing disabled), used to know when a copy has finished with its source.
#[derive(Debug)]
pub struct Event {
    pub(super) raw: sys::CUevent,
    pub(super) ordinal: usize,
}

// SAFETY: an opaque driver handle usable from any thread.
unsafe impl Send for Event {}
// SAFETY: as above; record and synchronize are thread-safe driver calls.
unsafe impl Sync for Event {}

impl Event {
    /// Records the event on `stream`: it completes when the work enqueued so far has.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        // SAFETY: both handles are live (owned by self and a Gpu that outlives the call).
        unsafe { cu::event::record(self.raw, stream.raw()) }
            .map_err(|e| driver_error(self.ordinal, "cuEventRecord", e))
    }

    /// Blocks until the recorded work has completed.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the event is live.
        unsafe { cu::event::synchronize(self.raw) }
            .map_err(|e| driver_error(self.ordinal, "cuEventSynchronize", e))
    }

    /// The address of the event's `CUevent` handle, for interfaces that take a pointer to one
    /// (the Arrow C Device Data Interface's `sync_event`). Valid while the event lives and is
    /// not moved: keep it boxed.
    pub fn handle_ptr(&self) -> *const std::ffi::c_void {
        (&self.raw as *const sys::CUevent).cast()
    }
}

/// Blocks until the event whose `CUevent` handle lies at `event` has completed (a consumer's
/// side of a `sync_event`; a null `event` needs no wait).
///
/// # Safety
/// `event` is null or points to the handle of a live event of `gpu`'s context.
pub unsafe fn wait_for_event_at(gpu: &Gpu, event: *const std::ffi::c_void) -> Result<()> {
    if event.is_null() {
        return Ok(());
    }
    gpu.bind()?;
    // SAFETY: `event` points to a live CUevent handle (the caller's contract).
    let raw = unsafe { *event.cast::<sys::CUevent>() };
    // SAFETY: as above, the handle is live.
    unsafe { cu::event::synchronize(raw) }
        .map_err(|e| driver_error(gpu.ordinal(), "cuEventSynchronize", e))
}

/// Copies `dest.len()` bytes from device address `src` of `gpu` into `dest` (synchronous): the
/// consumer's side of device memory that another library handed over by address.
///
/// # Safety
/// `src .. src + dest.len()` lies inside a live device allocation readable from `gpu`'s
/// context, and nothing writes it during the copy.
pub unsafe fn copy_from_device_address(gpu: &Gpu, src: u64, dest: &mut [u8]) -> Result<()> {
    if dest.is_empty() {
        return Ok(());
    }
    gpu.bind()?;
    // SAFETY: the source range is live device memory (the caller's contract) and `dest` is a
    // host slice of exactly the copied length; the stream is waited for before returning.
    unsafe { cu::memcpy_dtoh_async(dest, src, super::gpu::PER_THREAD_STREAM) }
        .map_err(|e| driver_error(gpu.ordinal(), "cuMemcpyDtoHAsync", e))?;
    gpu.synchronize_default_stream()
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: the event is live and dropped once; destroying an event whose work is still
        // pending is allowed (the driver releases it on completion).
        let _ = unsafe { cu::event::destroy(self.raw) };
    }
}

impl Gpu {
    /// A new event for memory whose writes the host has already waited for (handed-over
    /// batches: their decode was synchronized before they were yielded), to give a consumer
    /// that orders its own streams by events: recorded on a stream that carries no work, so it
    /// is complete at once and ties the consumer to none of the loads still running.
    pub fn event_for_written(&self) -> Result<Event> {
        let e = self.event()?;
        e.record(&self.idle)?;
        Ok(e)
    }

    /// A new event.
    pub fn event(&self) -> Result<Event> {
        self.bind()?;
        let raw = cu::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
            .map_err(|e| driver_error(self.ordinal(), "cuEventCreate", e))?;
        Ok(Event {
            raw,
            ordinal: self.ordinal(),
        })
    }
}
