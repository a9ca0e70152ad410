//! Importing: an `ArrowDeviceArray` (ours or anyone's) read back into host memory as a
//! `RecordBatch`, validated as Arrow; and a device stream read batch by batch.

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use arrow::array::{layout, Array, ArrayData, BufferSpec, StructArray};
use arrow::buffer::{BooleanBuffer, Buffer, MutableBuffer, NullBuffer};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use arrow::record_batch::{RecordBatch, RecordBatchOptions};

use super::{
    ArrowArray, ArrowDeviceArray, ArrowDeviceArrayStream, ArrowDeviceType, ArrowSchema,
    ARROW_DEVICE_CPU, ARROW_DEVICE_CUDA,
};
use crate::device::{copy_from_device_address, wait_for_event_at, Gpu};
use crate::error::{Error, Result};

fn bad(reason: impl Into<String>) -> Error {
    Error::interface("import", reason)
}

/// Where the buffers are read from.
enum Source {
    Host,
    Cuda(Arc<Gpu>),
}

impl Source {
    /// The source of `array`, its `sync_event` waited for.
    ///
    /// # Safety
    /// `array` follows the specification: for CUDA, `sync_event` is null or points to a live
    /// `CUevent` of device `device_id`.
    unsafe fn of(array: &ArrowDeviceArray) -> Result<Self> {
        match array.device_type {
            ARROW_DEVICE_CPU => Ok(Source::Host),
            ARROW_DEVICE_CUDA => {
                let ordinal = usize::try_from(array.device_id)
                    .map_err(|_| bad(format!("CUDA device id {}", array.device_id)))?;
                let gpu = crate::device::gpu(ordinal)?;
                // SAFETY: the caller's contract
                unsafe { wait_for_event_at(&gpu, array.sync_event) }?;
                Ok(Source::Cuda(gpu))
            }
            t => Err(bad(format!(
                "device type {t} (only {ARROW_DEVICE_CPU}, the host, and {ARROW_DEVICE_CUDA}, \
                 CUDA, are read)"
            ))),
        }
    }

    /// `len` bytes at `ptr`, in a new host buffer (aligned as arrow wants).
    ///
    /// # Safety
    /// `ptr .. ptr + len` is readable memory of this source.
    unsafe fn read(&self, ptr: *const c_void, len: usize) -> Result<Buffer> {
        let mut out = MutableBuffer::from_len_zeroed(len);
        if len == 0 {
            return Ok(out.into());
        }
        if ptr.is_null() {
            return Err(bad(format!("a null buffer where {len} bytes are needed")));
        }
        match self {
            Source::Host => {
                // SAFETY: the caller's contract: `len` readable bytes at `ptr`
                let src = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
                out.as_slice_mut().copy_from_slice(src);
            }
            Source::Cuda(gpu) => {
                let dest = out.as_slice_mut();
                // SAFETY: the caller's contract: `len` bytes of device memory at `ptr`
                unsafe { copy_from_device_address(gpu, ptr as usize as u64, dest) }?
            }
        }
        Ok(out.into())
    }
}

fn count(v: i64, what: &str) -> Result<usize> {
    usize::try_from(v).map_err(|_| bad(format!("{what} {v}")))
}

/// The types whose first data buffer holds `length + 1` offsets.
fn has_offsets(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::Map(..)
    )
}

fn child_types(dt: &DataType) -> Vec<DataType> {
    match dt {
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => vec![f.data_type().clone()],
        DataType::Struct(fs) => fs.iter().map(|f| f.data_type().clone()).collect(),
        DataType::Union(fs, _) => fs.iter().map(|(_, f)| f.data_type().clone()).collect(),
        DataType::RunEndEncoded(r, v) => vec![r.data_type().clone(), v.data_type().clone()],
        _ => Vec::new(),
    }
}

/// The last offset of an offsets buffer read to the host: the data buffer's length.
fn end_offset(offsets: &Buffer, index: usize, wide: bool) -> Result<usize> {
    let bytes = offsets.as_slice();
    let v = if wide {
        bytes
            .get(index * 8..index * 8 + 8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap_or_default()))
    } else {
        bytes
            .get(index * 4..index * 4 + 4)
            .map(|b| i64::from(i32::from_le_bytes(b.try_into().unwrap_or_default())))
    };
    let v = v.ok_or_else(|| bad("an offsets buffer shorter than its array"))?;
    count(v, "last offset")
}

/// One array of an import, read and checked.
///
/// # Safety
/// `a` is a live array of the specification whose buffers `source` can read.
unsafe fn import_node(a: &ArrowArray, dt: &DataType, source: &Source) -> Result<ArrayData> {
    let len = count(a.length, "length")?;
    let offset = count(a.offset, "offset")?;
    let total = len
        .checked_add(offset)
        .ok_or_else(|| bad("length + offset overflows"))?;
    let l = layout(dt);
    if l.variadic {
        return Err(bad(format!("{dt} columns are not read by this importer")));
    }
    let n = l.buffers.len() + usize::from(l.can_contain_null_mask);
    if count(a.n_buffers, "buffer count")? != n {
        return Err(bad(format!(
            "a {dt} array with {} buffers (its layout has {n})",
            a.n_buffers
        )));
    }
    let ptrs: &[*const c_void] = match n {
        0 => &[],
        _ if a.buffers.is_null() => return Err(bad("a null buffer list")),
        // SAFETY: `buffers` holds `n_buffers` pointers (the specification), checked to be `n`
        _ => unsafe { std::slice::from_raw_parts(a.buffers, n) },
    };
    let mut ptrs = ptrs.iter().copied();
    let mut nulls = None;
    if l.can_contain_null_mask {
        let p = ptrs.next().unwrap_or(std::ptr::null());
        if !p.is_null() {
            // SAFETY: a validity bitmap holds offset + length bits
            let bits = unsafe { source.read(p, total.div_ceil(8)) }?;
            nulls = Some(NullBuffer::new(BooleanBuffer::new(bits, offset, len)));
        }
    }
    let mut buffers: Vec<Buffer> = Vec::with_capacity(l.buffers.len());
    for (k, spec) in l.buffers.iter().enumerate() {
        let p = ptrs.next().unwrap_or(std::ptr::null());
        let bytes = match spec {
            BufferSpec::FixedWidth { byte_width, .. } if k == 0 && has_offsets(dt) => {
                (total + 1) * byte_width
            }
            BufferSpec::FixedWidth { byte_width, .. } => total * byte_width,
            BufferSpec::VariableWidth => {
                let wide = matches!(dt, DataType::LargeUtf8 | DataType::LargeBinary);
                let offsets = buffers.last().ok_or_else(|| bad("data without offsets"))?;
                end_offset(offsets, total, wide)?
            }
            BufferSpec::BitMap => total.div_ceil(8),
            BufferSpec::AlwaysNull => 0,
        };
        // SAFETY: the layout says the buffer holds `bytes` bytes for this length and offset
        buffers.push(unsafe { source.read(p, bytes) }?);
    }
    let types = child_types(dt);
    let mut children = Vec::with_capacity(types.len());
    if count(a.n_children, "child count")? != types.len() {
        return Err(bad(format!(
            "a {dt} array with {} children (its type has {})",
            a.n_children,
            types.len()
        )));
    }
    for (i, t) in types.iter().enumerate() {
        // SAFETY: `children` holds `n_children` pointers to live arrays (the specification)
        let c = unsafe { *a.children.add(i) };
        if c.is_null() {
            return Err(bad(format!("child {i} of a {dt} array is null")));
        }
        // SAFETY: as above
        children.push(unsafe { import_node(&*c, t, source) }?);
    }
    if let DataType::Dictionary(_, values) = dt {
        if a.dictionary.is_null() {
            return Err(bad("a dictionary array without its dictionary"));
        }
        // SAFETY: a dictionary array's `dictionary` is a live array (the specification)
        children.push(unsafe { import_node(&*a.dictionary, values, source) }?);
    }
    ArrayData::builder(dt.clone())
        .len(len)
        .offset(offset)
        .nulls(nulls)
        .buffers(buffers)
        .child_data(children)
        .build()
        .map_err(|e| bad(format!("the {dt} array is not valid Arrow: {e}")))
}

/// Reads a batch exported through the Arrow C Device Data Interface (a struct array and its
/// schema) into host memory, checks it is valid Arrow, and releases the array. CPU arrays are
/// read in place, CUDA arrays copied from their device after waiting for their `sync_event`.
///
/// # Safety
/// `array` was filled by a producer that follows the specification and has not been released,
/// and `schema` describes it.
pub unsafe fn import_c_device(
    schema: &ArrowSchema,
    array: ArrowDeviceArray,
) -> Result<RecordBatch> {
    let schema: SchemaRef =
        Arc::new(Schema::try_from(schema).map_err(|e| bad(format!("the schema: {e}")))?);
    if array.array.is_released() {
        return Err(bad("the array was already released"));
    }
    // SAFETY: the caller's contract
    let source = unsafe { Source::of(&array) }?;
    let dt = DataType::Struct(schema.fields().clone());
    // SAFETY: the caller's contract; `array` is released when dropped at the end
    let data = unsafe { import_node(&array.array, &dt, &source) }?;
    drop(array);
    let rows = data.len();
    let st = StructArray::from(data);
    if st.null_count() > 0 {
        return Err(bad("a batch's struct array has nulls"));
    }
    let (_, columns, _) = st.into_parts();
    let opts = RecordBatchOptions::new().with_row_count(Some(rows));
    RecordBatch::try_new_with_options(schema, columns, &opts)
        .map_err(|e| bad(format!("the batch does not match its schema: {e}")))
}

/// An `ArrowDeviceArrayStream` read batch by batch into host memory ([`import_c_device`] on
/// each array). Releases the stream when dropped.
#[derive(Debug)]
pub struct DeviceStreamReader {
    stream: ArrowDeviceArrayStream,
    ffi_schema: ArrowSchema,
    schema: SchemaRef,
    done: bool,
}

impl DeviceStreamReader {
    /// Takes `stream` over and reads its schema.
    ///
    /// # Safety
    /// `stream` was filled by a producer that follows the specification and not released.
    pub unsafe fn new(mut stream: ArrowDeviceArrayStream) -> Result<Self> {
        let get_schema = stream
            .get_schema
            .ok_or_else(|| bad("a stream without get_schema"))?;
        let mut ffi_schema = ArrowSchema::empty();
        // SAFETY: a live stream (the caller's contract) and a schema to fill
        let rc = unsafe { get_schema(&mut stream, &mut ffi_schema) };
        if rc != 0 {
            // SAFETY: as above
            return Err(bad(format!("get_schema: {}", unsafe {
                last_error(&mut stream, rc)
            })));
        }
        let schema =
            Arc::new(Schema::try_from(&ffi_schema).map_err(|e| bad(format!("the schema: {e}")))?);
        Ok(DeviceStreamReader {
            stream,
            ffi_schema,
            schema,
            done: false,
        })
    }

    /// The stream's schema.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Where the stream's arrays live.
    pub fn device_type(&self) -> ArrowDeviceType {
        self.stream.device_type
    }
}

/// The stream's message for error `rc`.
///
/// # Safety
/// `stream` is live.
unsafe fn last_error(stream: &mut ArrowDeviceArrayStream, rc: i32) -> String {
    let msg = stream.get_last_error.and_then(|f| {
        // SAFETY: a live stream (the caller's contract)
        let p = unsafe { f(stream) };
        // SAFETY: a non-null message is a NUL-terminated string valid until the next call
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    });
    msg.unwrap_or_else(|| format!("error {rc} without a message"))
}

impl Iterator for DeviceStreamReader {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let Some(get_next) = self.stream.get_next else {
            self.done = true;
            return Some(Err(bad("a stream without get_next")));
        };
        let mut array = ArrowDeviceArray::empty();
        // SAFETY: the stream is live (taken over in `new`, released only when dropped)
        let rc = unsafe { get_next(&mut self.stream, &mut array) };
        if rc != 0 {
            self.done = true;
            // SAFETY: as above
            let msg = unsafe { last_error(&mut self.stream, rc) };
            return Some(Err(bad(format!("get_next: {msg}"))));
        }
        if array.array.is_released() {
            self.done = true;
            return None;
        }
        if array.device_type != self.stream.device_type {
            self.done = true;
            return Some(Err(bad(format!(
                "an array on device type {} in a stream of device type {}",
                array.device_type, self.stream.device_type
            ))));
        }
        // SAFETY: an array the stream just filled, described by the stream's schema
        let r = unsafe { import_c_device(&self.ffi_schema, array) };
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }
}
