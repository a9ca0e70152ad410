//! Device batches back to the host, fast: every buffer of a batch copied by asynchronous
//! copies into one pinned host buffer (from the device's pool), one wait, and the pinned bytes
//! handed to arrow as the batch's buffers without another copy. The pinned buffer goes back
//! to the pool when the last arrow buffer made from it is dropped.
//!
//! Copies from pageable memory (`cuMemcpyDtoH` into a `Vec`) run at a few GB/s and were
//! followed by a second copy into arrow's buffers; pinned copies run at the link's speed.

use std::ptr::NonNull;
use std::sync::Arc;

use arrow::array::{make_array, ArrayData, ArrayRef};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer};

use super::device_batch::DeviceArray;
use crate::device::{DeviceBuffer, PinnedBuffer};
use crate::error::{Error, Result};

/// Where each buffer starts in the pinned buffer: aligned for any Arrow type (and for SIMD
/// kernels reading whole cache lines).
const ALIGN: usize = 64;

/// The pinned buffer behind the arrow buffers of one download; back to the pool when dropped.
struct PinnedOwner(Option<PinnedBuffer>);

impl Drop for PinnedOwner {
    fn drop(&mut self) {
        if let Some(b) = self.0.take() {
            b.recycle();
        }
    }
}

/// One device buffer to copy: its bytes `0..len`.
struct Piece<'a> {
    buf: &'a DeviceBuffer,
    len: usize,
    at: usize,
}

fn pieces<'a>(a: &'a DeviceArray, out: &mut Vec<Piece<'a>>, end: &mut usize) {
    let mut add = |buf: &'a DeviceBuffer, len: usize| {
        let at = end.next_multiple_of(ALIGN);
        *end = at + len;
        out.push(Piece { buf, len, at });
    };
    if let Some(v) = &a.validity {
        add(v, a.len.div_ceil(8).min(v.len()));
    }
    for (b, n) in &a.buffers {
        add(b, *n);
    }
    for c in &a.children {
        pieces(c, out, end);
    }
    if let Some(d) = &a.dictionary {
        pieces(d, out, end);
    }
}

/// The arrays `columns` in host memory.
pub(super) fn download(columns: &[DeviceArray]) -> Result<Vec<ArrayRef>> {
    let mut list = Vec::new();
    let mut total = 0usize;
    for c in columns {
        pieces(c, &mut list, &mut total);
    }
    let Some(first) = list.first() else {
        // no buffer at all (empty or null-typed columns): nothing to copy
        return columns
            .iter()
            .map(|c| c.host_data().map(make_array))
            .collect();
    };
    let gpu = Arc::clone(first.buf.gpu());
    let mut pinned = gpu.pinned(total.max(1))?;
    let stream = gpu.download_stream();
    let mut enqueued = Ok(());
    for p in &list {
        // SAFETY: the stream is synchronized below before the pinned buffer is read, handed
        // on or dropped, and the device buffers are borrowed from `columns` until then.
        enqueued = unsafe {
            p.buf
                .copy_to_pinned_async(0..p.len, &mut pinned, p.at, stream)
        };
        if enqueued.is_err() {
            break;
        }
    }
    // wait for what was enqueued even when enqueueing failed part way
    let waited = stream.synchronize(&gpu);
    enqueued?;
    waited?;
    let base = pinned.as_slice().as_ptr();
    let owner = Arc::new(PinnedOwner(Some(pinned)));
    let mut next = list.iter();
    let mut take = |len: usize| -> Result<Buffer> {
        let p = next
            .next()
            .ok_or_else(|| bad("fewer buffers copied than the arrays hold"))?;
        if p.len != len {
            return Err(bad("a buffer's length changed while it was copied"));
        }
        // SAFETY: `at..at + len` lies inside the pinned allocation (laid out above, its size
        // `total`), whose bytes the synchronized copies wrote; `owner` keeps it alive and
        // unchanged for as long as any arrow buffer made from it lives (nothing writes to
        // it once it is owned). The pointer is not null: it is inside a live allocation.
        Ok(unsafe {
            Buffer::from_custom_allocation(
                NonNull::new_unchecked(base.add(p.at).cast_mut()),
                len,
                Arc::clone(&owner) as Arc<dyn arrow::alloc::Allocation>,
            )
        })
    };
    columns
        .iter()
        .map(|c| build(c, &mut take).map(make_array))
        .collect()
}

fn build(a: &DeviceArray, take: &mut dyn FnMut(usize) -> Result<Buffer>) -> Result<ArrayData> {
    let mut b = ArrayData::builder(a.data_type.clone()).len(a.len);
    if let Some(v) = &a.validity {
        let bits = take(a.len.div_ceil(8).min(v.len()))?;
        b = b.nulls(Some(NullBuffer::new(BooleanBuffer::new(bits, 0, a.len))));
    }
    for (_, n) in &a.buffers {
        b = b.add_buffer(take(*n)?);
    }
    for c in &a.children {
        b = b.add_child_data(build(c, take)?);
    }
    if let Some(d) = &a.dictionary {
        b = b.add_child_data(build(d, take)?);
    }
    b.build()
        .map_err(|e| bad(&format!("the device data is not valid Arrow: {e}")))
}

fn bad(reason: &str) -> Error {
    Error::Device {
        device: "device batch".into(),
        reason: reason.to_string(),
    }
}
