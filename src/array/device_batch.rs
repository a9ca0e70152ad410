//! Arrow data in device memory: [`DeviceArray`] mirrors arrow-rs's `ArrayData` (type, length,
//! null count, validity bitmap, buffers, children) with every buffer a [`DeviceBuffer`], and
//! [`DeviceRecordBatch`] is a schema plus one such array per field. Freed when dropped.
//!
//! [`DeviceArray::upload`] copies any arrow-rs array to the device (how columns decoded on the
//! host join a device batch); [`DeviceArray::to_host`] copies back. Layouts are Arrow's: LSB-first
//! validity, values, i32 or i64 offsets, children for nested types.

use std::sync::Arc;

use arrow::array::{Array, ArrayData, MutableArrayData};
use arrow::buffer::{Buffer, NullBuffer};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;

use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};

/// One Arrow array in device memory.
pub struct DeviceArray {
    /// The Arrow type.
    pub data_type: DataType,
    /// Elements.
    pub len: usize,
    /// Nulls.
    pub null_count: usize,
    /// Validity bitmap (`len` bits, LSB first), when there are nulls.
    pub validity: Option<DeviceBuffer>,
    /// Buffers in Arrow order, with their lengths in bytes.
    pub buffers: Vec<(DeviceBuffer, usize)>,
    /// Child arrays (lists, structs, maps, dictionaries' values are not children: see
    /// `dictionary`).
    pub children: Vec<DeviceArray>,
    /// Dictionary values, for dictionary-encoded arrays.
    pub dictionary: Option<Box<DeviceArray>>,
}

impl std::fmt::Debug for DeviceArray {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceArray")
            .field("data_type", &self.data_type)
            .field("len", &self.len)
            .field("null_count", &self.null_count)
            .field("device_bytes", &self.device_bytes())
            .finish()
    }
}

/// `data` copied to offset 0 (`arrow::compute::concat` of one array returns a slice of it, so it
/// cannot do this).
fn unsliced(data: &ArrayData) -> Result<ArrayData> {
    let mut m = MutableArrayData::new(vec![data], false, data.len());
    m.try_extend(0, 0, data.len()).map_err(|e| Error::Device {
        device: "device array".into(),
        reason: format!("copying a sliced array for upload: {e}"),
    })?;
    Ok(m.freeze())
}

fn to_device(gpu: &Arc<Gpu>, bytes: &[u8]) -> Result<(DeviceBuffer, usize)> {
    let mut b = gpu.alloc(bytes.len().max(1))?;
    b.copy_from_host(0, bytes)?;
    Ok((b, bytes.len()))
}

impl DeviceArray {
    /// Copies `array` to the device.
    pub fn upload(gpu: &Arc<Gpu>, array: &dyn Array) -> Result<Self> {
        Self::upload_data(gpu, &array.to_data())
    }

    fn upload_data(gpu: &Arc<Gpu>, data: &ArrayData) -> Result<Self> {
        if data.offset() != 0 {
            // a slice: copy its logical contents to a fresh offset-0 array first, so every
            // buffer starts at element 0
            return Self::upload_data(gpu, &unsliced(data)?);
        }
        let validity = match data.nulls() {
            // the bitmap from bit 0 (`sliced` repacks a null buffer with a bit offset)
            Some(n) if n.null_count() > 0 => Some(to_device(gpu, n.inner().sliced().as_slice())?.0),
            _ => None,
        };
        let buffers = data
            .buffers()
            .iter()
            .map(|b| to_device(gpu, b.as_slice()))
            .collect::<Result<Vec<_>>>()?;
        let (children, dictionary) = match data.data_type() {
            DataType::Dictionary(..) => (
                Vec::new(),
                match data.child_data().first() {
                    Some(v) => Some(Box::new(Self::upload_data(gpu, v)?)),
                    None => None,
                },
            ),
            _ => (
                data.child_data()
                    .iter()
                    .map(|c| Self::upload_data(gpu, c))
                    .collect::<Result<Vec<_>>>()?,
                None,
            ),
        };
        Ok(DeviceArray {
            data_type: data.data_type().clone(),
            len: data.len(),
            null_count: data.null_count(),
            validity,
            buffers,
            children,
            dictionary,
        })
    }

    /// Device bytes held, children included.
    pub fn device_bytes(&self) -> usize {
        self.buffers.iter().map(|(_, n)| n).sum::<usize>()
            + self.validity.as_ref().map_or(0, |v| v.len())
            + self
                .children
                .iter()
                .map(|c| c.device_bytes())
                .sum::<usize>()
            + self.dictionary.as_ref().map_or(0, |d| d.device_bytes())
    }

    /// The array on the host by synchronous pageable copies (for arrays without buffers).
    pub(super) fn host_data(&self) -> Result<ArrayData> {
        let mut b = ArrayData::builder(self.data_type.clone()).len(self.len);
        if let Some(v) = &self.validity {
            let bytes = v.copy_to_host(0..self.len.div_ceil(8).min(v.len()))?;
            let bits =
                arrow::buffer::BooleanBuffer::new(Buffer::from_slice_ref(&bytes), 0, self.len);
            b = b.nulls(Some(NullBuffer::new(bits)));
        }
        for (buf, n) in &self.buffers {
            b = b.add_buffer(Buffer::from_slice_ref(buf.copy_to_host(0..*n)?));
        }
        for c in &self.children {
            b = b.add_child_data(c.host_data()?);
        }
        if let Some(d) = &self.dictionary {
            b = b.add_child_data(d.host_data()?);
        }
        b.build().map_err(|e| Error::Device {
            device: "device array".into(),
            reason: format!("the device data is not valid Arrow: {e}"),
        })
    }

}

/// A record batch in device memory.
#[derive(Debug)]
pub struct DeviceRecordBatch {
    /// The schema.
    pub schema: SchemaRef,
    /// One array per field.
    pub columns: Vec<DeviceArray>,
    /// Rows.
    pub num_rows: usize,
}

impl DeviceRecordBatch {
    /// Copies `batch` to the device.
    pub fn upload(gpu: &Arc<Gpu>, batch: &RecordBatch) -> Result<Self> {
        Ok(DeviceRecordBatch {
            schema: batch.schema(),
            columns: batch
                .columns()
                .iter()
                .map(|c| DeviceArray::upload(gpu, c.as_ref()))
                .collect::<Result<Vec<_>>>()?,
            num_rows: batch.num_rows(),
        })
    }

    /// Device bytes held.
    pub fn device_bytes(&self) -> usize {
        self.columns.iter().map(DeviceArray::device_bytes).sum()
    }

}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::make_array;
    use arrow::array::{ArrayRef, Int32Array, ListArray, StringArray, StructArray};
    use arrow::datatypes::{Field, Int32Type};

    fn offsets_are_zero(d: &ArrayData) -> bool {
        d.offset() == 0 && d.child_data().iter().all(offsets_are_zero)
    }

    #[test]
    fn unsliced_keeps_values_and_starts_at_zero() {
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
            Some(vec![Some(1), None]),
            None,
            Some(vec![Some(3)]),
            Some(vec![]),
            Some(vec![Some(5), Some(6)]),
        ]);
        let strs = StringArray::from(vec![Some("a"), None, Some("ccc"), Some(""), Some("e")]);
        let ints = Int32Array::from(vec![Some(1), None, Some(3), Some(4), None]);
        let st = StructArray::from(vec![
            (
                Arc::new(Field::new("s", DataType::Utf8, true)),
                Arc::new(strs) as ArrayRef,
            ),
            (
                Arc::new(Field::new("i", DataType::Int32, true)),
                Arc::new(ints) as ArrayRef,
            ),
        ]);
        for a in [Arc::new(list) as ArrayRef, Arc::new(st) as ArrayRef] {
            let s = a.slice(1, 3);
            let u = unsliced(&s.to_data()).unwrap();
            assert!(offsets_are_zero(&u), "{:?}", a.data_type());
            assert_eq!(make_array(u).as_ref(), s.as_ref());
        }
    }
}
