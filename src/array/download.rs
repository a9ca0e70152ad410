//! Device batches back to the host, fast: every buffer of a batch copied by asynchronous
//! copies into one pinned host buffer (from the device's pool), one wait, and the pinned bytes
//! handed to arrow as the batch's buffers without another copy. The pinned buffer goes back
//! to the pool when the last arrow buffer made from it is dropped.
//!
//! Copies from pageable memory (`cuMemcpyDtoH` into a `Vec`) run at a few GB/s and were
//! followed by a second copy into arrow's buffers; pinned copies run at the link's speed.

use std::ptr::NonNull;
use std::sync::Arc;

use arrow::array::{make_array, ArrayData, ArrayRef, ByteView, MAX_INLINE_VIEW_LEN};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer};
use arrow::datatypes::DataType;

use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::device_batch::{DeviceArray, DeviceRecordBatch};
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
struct BufferCopy<'a> {
    buf: &'a DeviceBuffer,
    len: usize,
    at: usize,
}

fn copies<'a>(a: &'a DeviceArray, out: &mut Vec<BufferCopy<'a>>, end: &mut usize) {
    let mut add = |buf: &'a DeviceBuffer, len: usize| {
        let at = end.next_multiple_of(ALIGN);
        *end = at + len;
        out.push(BufferCopy { buf, len, at });
    };
    if let Some(v) = &a.validity {
        add(v, a.len.div_ceil(8).min(v.len()));
    }
    for (b, n) in &a.buffers {
        add(b, *n);
    }
    for c in &a.children {
        copies(c, out, end);
    }
    if let Some(d) = &a.dictionary {
        copies(d, out, end);
    }
}

impl DeviceArray {
    /// The array in host memory: its buffers copied into pinned memory that arrow's buffers
    /// then use without another copy.
    pub fn to_host(&self) -> Result<ArrayRef> {
        let mut v = download(std::slice::from_ref(self))?;
        v.pop().ok_or_else(|| Error::Device {
            device: "device array".into(),
            reason: "nothing came back from the device".into(),
        })
    }
}

impl DeviceRecordBatch {
    /// The batch in host memory: every buffer copied into one pinned buffer by asynchronous
    /// copies and handed to arrow without another copy (the pinned memory goes back to the
    /// device's pool when the last array using it is dropped).
    pub fn to_host(&self) -> Result<RecordBatch> {
        let cols = download(&self.columns)?;
        let opts = RecordBatchOptions::new().with_row_count(Some(self.num_rows));
        RecordBatch::try_new_with_options(self.schema.clone(), cols, &opts).map_err(|e| {
            Error::Device {
                device: "device batch".into(),
                reason: format!("the device batch does not match its schema: {e}"),
            }
        })
    }
}

/// The arrays `columns` in host memory.
pub(super) fn download(columns: &[DeviceArray]) -> Result<Vec<ArrayRef>> {
    let mut list = Vec::new();
    let mut total = 0usize;
    for c in columns {
        copies(c, &mut list, &mut total);
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
    // SAFETY: the ArrayData is only read by `validate_views` (arrow's `build` also makes it
    // first, then validates it: `validate_views` is that validation, faster for views) and
    // dropped unused when that fails.
    let data = unsafe { b.build_unchecked() };
    validate_views(&data)
        .map_err(|e| bad(&format!("the device data is not valid Arrow: {e}")))?;
    Ok(data)
}

/// Arrow's validation of a `Utf8View` array (`ArrayData::validate_data`: its layout, its
/// nulls, every view), faster where the strings are short: arrow checks each view's bytes as
/// UTF-8 one call a row, the larger part of a device batch's copy back for short strings;
/// here the common case (inline views of ASCII, views into their buffer whose bytes are
/// UTF-8) is proved with a few word operations a view; where a view is wrong, arrow's own
/// check runs to say what is wrong. Other types: arrow's validation as it is.
pub fn validate_views(data: &ArrayData) -> std::result::Result<(), arrow::error::ArrowError> {
    if data.data_type() != &DataType::Utf8View {
        return data.validate_data();
    }
    data.validate()?;
    data.validate_nulls()?;
    if views_proved_valid(data) {
        return Ok(());
    }
    data.validate_values()
}

/// The high bit of each of a view's 12 inline bytes (bytes 4..16 of the `u128`).
const INLINE_HIGH_BITS: u128 = {
    let mut m = 0u128;
    let mut k = 4;
    while k < 16 {
        m |= 0x80 << (8 * k);
        k += 1;
    }
    m
};

/// Whether every view of `data` (a `Utf8View` array whose layout `ArrayData::validate`
/// accepted) is valid: inline views with zero padding whose bytes are ASCII (one mask) or
/// else UTF-8, views inside their buffer whose prefix matches and whose bytes are UTF-8.
/// False for anything arrow would refuse (arrow's check then says what is wrong).
fn views_proved_valid(data: &ArrayData) -> bool {
    let Some(views) = data.buffers().first() else {
        return false;
    };
    if views.as_ptr().align_offset(std::mem::align_of::<u128>()) != 0 {
        return false;
    }
    let views = &views.typed_data::<u128>()[data.offset()..data.offset() + data.len()];
    let buffers = &data.buffers()[1..];
    views.iter().all(|&v| {
        let len = v as u32;
        if len <= MAX_INLINE_VIEW_LEN {
            let padding_zero = len == MAX_INLINE_VIEW_LEN || v >> (32 + 8 * len) == 0;
            return padding_zero
                && (v & INLINE_HIGH_BITS == 0
                    || std::str::from_utf8(&v.to_le_bytes()[4..4 + len as usize]).is_ok());
        }
        let view = ByteView::from(v);
        let start = view.offset as usize;
        buffers
            .get(view.buffer_index as usize)
            .and_then(|b| b.get(start..start + len as usize))
            .is_some_and(|s| {
                s.starts_with(&view.prefix.to_le_bytes()) && std::str::from_utf8(s).is_ok()
            })
    })
}

fn bad(reason: &str) -> Error {
    Error::Device {
        device: "device batch".into(),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, StringViewArray};
    use arrow::buffer::ScalarBuffer;

    fn data(views: Vec<u128>, buffers: Vec<Buffer>) -> ArrayData {
        let len = views.len();
        let b = ArrayData::builder(DataType::Utf8View)
            .len(len)
            .add_buffer(ScalarBuffer::from(views).into_inner());
        let b = buffers.into_iter().fold(b, |b, x| b.add_buffer(x));
        // SAFETY: test data, only read by the checks under test
        unsafe { b.build_unchecked() }
    }

    #[test]
    fn the_quick_check_proves_only_what_arrow_accepts() {
        let good = StringViewArray::from_iter_values(["A", "N", "", "twelve bytes", "a longer string"]);
        let d = good.to_data();
        assert!(views_proved_valid(&d));
        assert!(d.validate_values().is_ok());
        // a non-ASCII inline string: valid
        let d = StringViewArray::from_iter_values(["é", "x"]).to_data();
        assert!(views_proved_valid(&d));
        assert!(d.validate_values().is_ok());
        let long = Buffer::from_slice_ref(b"a longer string");
        let view = |len: u32, prefix: &[u8; 4], offset: u32| {
            ByteView::new(len, prefix).with_offset(offset).as_u128()
        };
        let inline = |bytes: &[u8]| {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
            b[4..4 + bytes.len()].copy_from_slice(bytes);
            u128::from_le_bytes(b)
        };
        // refused, by both: invalid UTF-8 inline, non-zero padding, a wrong prefix, a view
        // past its buffer, a missing buffer, invalid UTF-8 in the buffer
        let bad = [
            data(vec![inline(&[0xff])], vec![]),
            data(vec![inline(b"ab") | (1u128 << 100)], vec![]),
            data(vec![view(15, b"b lo", 0)], vec![long.clone()]),
            data(vec![view(15, b"a lo", 1)], vec![long.clone()]),
            data(vec![view(15, b"a lo", 0)], vec![]),
            data(
                vec![view(13, b"abcd", 0)],
                vec![Buffer::from_slice_ref(b"abcd\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7")],
            ),
        ];
        for (i, d) in bad.iter().enumerate() {
            assert!(!views_proved_valid(d), "case {i}");
            assert!(d.validate_values().is_err(), "case {i}");
        }
        // and a long view that is right
        let d = data(vec![view(15, b"a lo", 0), inline(b"x")], vec![long]);
        assert!(views_proved_valid(&d));
        assert!(d.validate_values().is_ok());
        assert_eq!(StringViewArray::from(d).value(0), "a longer string");
    }
}
