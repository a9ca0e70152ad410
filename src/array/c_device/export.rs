//! Exporting batches: a [`LoadedBatch`] as one `ArrowDeviceArray` of struct type whose
//! buffers are the batch's own.

use std::any::Any;
use std::ffi::c_void;
use std::panic::AssertUnwindSafe;
use std::ptr::{null, null_mut};
use std::sync::Arc;

use arrow::array::{layout, ArrayData};
use arrow::buffer::{Buffer, MutableBuffer};
use arrow::datatypes::{DataType, Schema};
use arrow::record_batch::RecordBatch;
use arrow::util::bit_util;

use super::{device_of, ArrowArray, ArrowDeviceArray, ArrowSchema};
use crate::array::{BatchData, DeviceArray, DeviceRecordBatch, LoadedBatch, Location};
use crate::device::{Event, Gpu};
use crate::error::{Error, Result};

/// What keeps an exported batch's buffers alive: the host `RecordBatch` or the device batch.
/// Every node of an export holds a share, so a child moved out and released on its own keeps
/// the buffers it points to until then.
type Owner = Arc<dyn Any + Send + Sync>;

/// One array of the export, before it becomes an [`ArrowArray`].
struct Node {
    length: usize,
    null_count: usize,
    offset: usize,
    buffers: Vec<*const c_void>,
    /// Buffers made for the export (a validity bitmap realigned to the array's offset, a view
    /// type's buffer sizes), kept by the node.
    made: Vec<Buffer>,
    children: Vec<Node>,
    dictionary: Option<Box<Node>>,
}

/// The event a device export's consumer waits for, destroyed with the device bound.
struct SyncEvent {
    gpu: Arc<Gpu>,
    _event: Box<Event>,
}

impl Drop for SyncEvent {
    fn drop(&mut self) {
        // the event is destroyed right after, on whatever thread released the array
        let _ = self.gpu.bind();
    }
}

/// What an exported array's `private_data` points to.
struct Private {
    _owner: Owner,
    _made: Vec<Buffer>,
    buffers: Box<[*const c_void]>,
    children: Box<[*mut ArrowArray]>,
    dictionary: *mut ArrowArray,
    _sync: Option<SyncEvent>,
}

impl Drop for Private {
    fn drop(&mut self) {
        for &c in self.children.iter().chain([&self.dictionary]) {
            if !c.is_null() {
                // SAFETY: each child was made by `Box::into_raw` in `into_c` and is freed once,
                // here; dropping it calls its release unless the consumer moved it out (then
                // its `release` is null and the moved copy is released by the consumer).
                drop(unsafe { Box::from_raw(c) });
            }
        }
    }
}

/// The release callback of every array we export.
unsafe extern "C" fn release_array(array: *mut ArrowArray) {
    if array.is_null() {
        return;
    }
    // SAFETY: a consumer calls release with the array it was given (or a child of it), which
    // we filled in `into_c`: a valid, exclusively held `ArrowArray`.
    let a = unsafe { &mut *array };
    let private = std::mem::replace(&mut a.private_data, null_mut()).cast::<Private>();
    a.release = None;
    if !private.is_null() {
        // no panic crosses into the consumer's code
        let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: `private_data` was made by `Box::into_raw` in `into_c`; it was swapped
            // for null above, so it is freed exactly once.
            drop(unsafe { Box::from_raw(private) });
        }));
    }
}

fn into_c(node: Node, owner: &Owner, sync: Option<SyncEvent>) -> ArrowArray {
    let children: Box<[*mut ArrowArray]> = node
        .children
        .into_iter()
        .map(|c| Box::into_raw(Box::new(into_c(c, owner, None))))
        .collect();
    let dictionary = node.dictionary.map_or(null_mut(), |d| {
        Box::into_raw(Box::new(into_c(*d, owner, None)))
    });
    let mut p = Box::new(Private {
        _owner: Arc::clone(owner),
        _made: node.made,
        buffers: node.buffers.into_boxed_slice(),
        children,
        dictionary,
        _sync: sync,
    });
    ArrowArray {
        length: node.length as i64,
        null_count: node.null_count as i64,
        offset: node.offset as i64,
        n_buffers: p.buffers.len() as i64,
        n_children: p.children.len() as i64,
        // the boxed slices do not move when the box holding them does
        buffers: p.buffers.as_mut_ptr(),
        children: p.children.as_mut_ptr(),
        dictionary: p.dictionary,
        release: Some(release_array),
        private_data: Box::into_raw(p).cast(),
    }
}

/// The C Data Interface's null count: a `Null` array counts every element.
fn c_null_count(data_type: &DataType, len: usize, null_count: usize) -> usize {
    match data_type {
        DataType::Null => len,
        _ => null_count,
    }
}

fn device_address(addr: u64) -> *const c_void {
    addr as usize as *const c_void
}

fn device_node(a: &DeviceArray) -> Result<Node> {
    let l = layout(&a.data_type);
    let bad =
        |reason: String| Error::interface("export", format!("{} column: {reason}", a.data_type));
    if l.variadic {
        return Err(bad(
            "view types of device batches cannot be exported (read the column as Utf8 or \
             Binary)"
                .into(),
        ));
    }
    if a.buffers.len() != l.buffers.len() {
        return Err(bad(format!(
            "the device array has {} buffers where Arrow's layout has {}",
            a.buffers.len(),
            l.buffers.len()
        )));
    }
    let mut buffers = Vec::with_capacity(l.buffers.len() + 1);
    if l.can_contain_null_mask {
        match &a.validity {
            Some(v) => buffers.push(device_address(v.device_ptr())),
            None if a.null_count == 0 => buffers.push(null()),
            None => {
                return Err(bad(format!(
                    "{} nulls without a validity bitmap",
                    a.null_count
                )))
            }
        }
    }
    buffers.extend(
        a.buffers
            .iter()
            .map(|(b, _)| device_address(b.device_ptr())),
    );
    let dictionary = match (&a.data_type, &a.dictionary) {
        (DataType::Dictionary(..), Some(d)) => Some(Box::new(device_node(d)?)),
        (DataType::Dictionary(..), None) => return Err(bad("no dictionary values".into())),
        _ => None,
    };
    Ok(Node {
        length: a.len,
        null_count: c_null_count(&a.data_type, a.len, a.null_count),
        offset: 0,
        buffers,
        made: Vec::new(),
        children: a.children.iter().map(device_node).collect::<Result<_>>()?,
        dictionary,
    })
}

fn host_node(d: &ArrayData) -> Result<Node> {
    let l = layout(d.data_type());
    let mut made = Vec::new();
    let mut buffers = Vec::with_capacity(d.buffers().len() + 2);
    if l.can_contain_null_mask {
        buffers.push(match d.nulls() {
            None => null(),
            Some(n) if n.offset() == d.offset() => n.buffer().as_ptr().cast(),
            Some(n) => {
                // the C interface applies the array's offset to the bitmap too
                let mut bits = MutableBuffer::new_null(d.offset() + d.len());
                for i in (0..d.len()).filter(|&i| n.is_valid(i)) {
                    bit_util::set_bit(bits.as_slice_mut(), d.offset() + i);
                }
                let b: Buffer = bits.into();
                let p = b.as_ptr().cast();
                made.push(b);
                p
            }
        });
    }
    buffers.extend(d.buffers().iter().map(|b| b.as_ptr().cast::<c_void>()));
    if l.variadic {
        // views: the data buffers' sizes, in one last buffer
        let sizes: Vec<i64> = d.buffers().iter().skip(1).map(|b| b.len() as i64).collect();
        let b = Buffer::from_vec(sizes);
        buffers.push(b.as_ptr().cast());
        made.push(b);
    }
    let (children, dictionary) = match d.data_type() {
        DataType::Dictionary(..) => {
            let values = d.child_data().first().ok_or_else(|| {
                Error::interface("export", "a dictionary array without values".to_string())
            })?;
            (Vec::new(), Some(Box::new(host_node(values)?)))
        }
        _ => (
            d.child_data()
                .iter()
                .map(host_node)
                .collect::<Result<_>>()?,
            None,
        ),
    };
    Ok(Node {
        length: d.len(),
        null_count: c_null_count(d.data_type(), d.len(), d.null_count()),
        offset: d.offset(),
        buffers,
        made,
        children,
        dictionary,
    })
}

/// The record batch's struct: no validity, one child per column.
fn struct_node(num_rows: usize, children: Vec<Node>) -> Node {
    Node {
        length: num_rows,
        null_count: 0,
        offset: 0,
        buffers: vec![null()],
        made: Vec::new(),
        children,
        dictionary: None,
    }
}

/// `schema` as the C Data Interface's `ArrowSchema` of a struct type (format `+s`), one child
/// per field, with the fields' and the schema's metadata.
pub fn export_schema(schema: &Schema) -> Result<ArrowSchema> {
    ArrowSchema::try_from(schema)
        .map_err(|e| Error::interface("export", format!("the schema {schema}: {e}")))
}

fn export_host(batch: &RecordBatch) -> Result<ArrowDeviceArray> {
    let children = batch
        .columns()
        .iter()
        .map(|c| host_node(&c.to_data()))
        .collect::<Result<Vec<_>>>()?;
    let owner: Owner = Arc::new(batch.clone());
    let (device_type, device_id) = device_of(Location::Host);
    Ok(ArrowDeviceArray {
        array: into_c(struct_node(batch.num_rows(), children), &owner, None),
        device_id,
        device_type,
        sync_event: null_mut(),
        reserved: [0; 3],
    })
}

fn export_device(batch: &Arc<DeviceRecordBatch>, ordinal: usize) -> Result<ArrowDeviceArray> {
    let children = batch
        .columns
        .iter()
        .map(device_node)
        .collect::<Result<Vec<_>>>()?;
    let gpu = crate::device::gpu(ordinal)?;
    // Batches are handed over only once the decode that wrote them was waited for (each pass
    // checks its error flags on the host), so this event is complete when recorded; it is what
    // the specification gives consumers to order their own streams after our writes.
    let event = Box::new(gpu.event_for_written()?);
    let sync_event = event.handle_ptr().cast_mut();
    let owner: Owner = Arc::clone(batch) as Owner;
    let sync = SyncEvent { gpu, _event: event };
    let (device_type, device_id) = device_of(Location::Cuda(ordinal));
    Ok(ArrowDeviceArray {
        array: into_c(struct_node(batch.num_rows, children), &owner, Some(sync)),
        device_id,
        device_type,
        sync_event,
        reserved: [0; 3],
    })
}

impl LoadedBatch {
    /// The batch through the Arrow C Device Data Interface, without a copy: its schema (a
    /// struct type, one child per field) and one array of that type whose buffers are the
    /// batch's own — device memory (`ARROW_DEVICE_CUDA`, the device's ordinal, a `sync_event`
    /// recorded after the batch's last write) or host memory (`ARROW_DEVICE_CPU`). The
    /// buffers stay alive until the array is released (by its consumer, or when the returned
    /// value is dropped unreleased) and this batch is dropped. See the
    /// [module docs](crate::array::c_device).
    pub fn to_c_device(&self) -> Result<(ArrowSchema, ArrowDeviceArray)> {
        Ok((export_schema(&self.schema())?, self.to_c_device_array()?))
    }

    /// The array of [`to_c_device`](Self::to_c_device) alone (a stream's `get_next`).
    pub fn to_c_device_array(&self) -> Result<ArrowDeviceArray> {
        match &self.data {
            BatchData::Host(b) => export_host(b),
            BatchData::Device(b, n) => export_device(b, *n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::c_device::ARROW_DEVICE_CPU;
    use arrow::array::{Int32Array, StringArray};
    use arrow::datatypes::DataType;

    fn released_count(a: &ArrowArray) -> usize {
        usize::from(a.release.is_none())
    }

    #[test]
    fn release_frees_once_and_children_on_their_own() {
        let ints: arrow::array::ArrayRef = Arc::new(Int32Array::from(vec![Some(1), None, Some(3)]));
        let strs: arrow::array::ArrayRef = Arc::new(StringArray::from(vec!["a", "bb", "ccc"]));
        let batch = RecordBatch::try_from_iter([("i", ints.clone()), ("s", strs)]).unwrap();
        let before = Arc::strong_count(&ints);
        let mut exported = export_host(&batch).unwrap();
        assert_eq!(exported.device_type, ARROW_DEVICE_CPU);
        assert_eq!(exported.array.n_children, 2);
        assert_eq!(exported.array.n_buffers, 1);
        assert!(
            Arc::strong_count(&ints) > before,
            "the export holds the columns"
        );
        // the consumer moves child 0 out, as the specification allows, then releases the parent
        // SAFETY: children holds n_children valid pointers to arrays this test owns
        let child0 = unsafe { &mut **exported.array.children };
        let moved = std::mem::replace(child0, ArrowArray::empty());
        assert_eq!(moved.length, 3);
        assert_eq!(moved.null_count, 1);
        let release = exported.array.release.unwrap();
        // SAFETY: releasing the array we were given, once
        unsafe { release(&mut exported.array) };
        assert_eq!(released_count(&exported.array), 1);
        assert!(exported.array.private_data.is_null());
        assert!(
            Arc::strong_count(&ints) > before,
            "the moved child still holds its share"
        );
        drop(moved);
        assert_eq!(Arc::strong_count(&ints), before, "every share given back");
    }

    #[test]
    fn a_sliced_validity_bitmap_is_realigned() {
        // rows 1..4 of five values, the validity bitmap of those three alone (offset 0)
        let values = Buffer::from_slice_ref([1i32, 2, 3, 4, 5]);
        let nulls = arrow::buffer::NullBuffer::from(vec![false, true, false]);
        let d = ArrayData::builder(DataType::Int32)
            .len(3)
            .offset(1)
            .add_buffer(values)
            .nulls(Some(nulls))
            .build()
            .unwrap();
        assert_ne!(d.nulls().unwrap().offset(), d.offset());
        let n = host_node(&d).unwrap();
        assert_eq!(n.offset, 1);
        assert_eq!(n.made.len(), 1, "a bitmap made for the export");
        let bits = n.made[0].as_slice();
        assert!(!bit_util::get_bit(bits, 1) && bit_util::get_bit(bits, 2));
        assert!(!bit_util::get_bit(bits, 3));
        // arrow-rs reads the export as the array it was
        let array = arrow::array::make_array(d);
        let batch = RecordBatch::try_from_iter([("x", array.clone())]).unwrap();
        let exported = export_host(&batch).unwrap();
        let schema = export_schema(&batch.schema()).unwrap();
        let ArrowDeviceArray { array: c, .. } = exported;
        // SAFETY: our ArrowArray is the specification's struct, as arrow-rs's is
        let ffi = unsafe { std::mem::transmute::<ArrowArray, arrow::ffi::FFI_ArrowArray>(c) };
        // SAFETY: a live export of the struct `schema` describes
        let back = unsafe { arrow::ffi::from_ffi(ffi, &schema) }.unwrap();
        let back = arrow::array::StructArray::from(back);
        assert_eq!(back.column(0).as_ref(), array.as_ref());
    }
}
