//! The batch type the reader yields, wherever its buffers live.
//!
//! A [`LoadedBatch`] holds Arrow data in host memory (a host load) or in device memory (a
//! [`DeviceRecordBatch`], from a load onto a CUDA device), behind one type, so callers written
//! against it work with both. [`to_host`] (free on the host, a device→host copy otherwise)
//! gives an arrow-rs [`RecordBatch`].
//!
//! Device batches come back through pinned memory that arrow's buffers then use without
//! another copy (`download`: pinned memory wrapped as arrow buffers), or go to other GPU code
//! without a copy through the Arrow C Device Data Interface ([`c_device`]). Those two are the
//! module's unsafe parts.
//!
//! [`to_host`]: LoadedBatch::to_host

#[allow(unsafe_code)] // the Arrow C Device Data Interface (see the module docs)
pub mod c_device;
mod device_batch;
#[allow(unsafe_code)] // pinned memory handed to arrow as buffers (see the module docs)
mod download;

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

pub use crate::device::Location;
use crate::error::Result;
pub use device_batch::{DeviceArray, DeviceRecordBatch};
pub use download::validate_views;

#[derive(Debug, Clone)]
enum BatchData {
    Host(RecordBatch),
    Device(Arc<DeviceRecordBatch>, usize),
}

/// Rows `rows` (counted from the row group's first row) of row group `row_group` of a file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RowSpan {
    /// The row group, by its index in the file.
    pub row_group: usize,
    /// Rows within it.
    pub rows: Range<u64>,
}

/// One batch of loaded rows: Arrow columns in host or device memory, and which rows of which
/// file they are.
#[derive(Debug, Clone)]
pub struct LoadedBatch {
    data: BatchData,
    file: Arc<Path>,
    rows: Vec<RowSpan>,
}

impl LoadedBatch {
    pub(crate) fn host(batch: RecordBatch, file: Arc<Path>, rows: Vec<RowSpan>) -> Self {
        LoadedBatch {
            data: BatchData::Host(batch),
            file,
            rows,
        }
    }

    pub(crate) fn device(
        batch: DeviceRecordBatch,
        ordinal: usize,
        file: Arc<Path>,
        rows: Vec<RowSpan>,
    ) -> Self {
        LoadedBatch {
            data: BatchData::Device(Arc::new(batch), ordinal),
            file,
            rows,
        }
    }

    /// The same file and rows, holding `batch` (in host memory) instead: e.g. the rows of
    /// this batch an engine's filter kept.
    pub fn replace_host(&self, batch: RecordBatch) -> Self {
        LoadedBatch::host(batch, Arc::clone(&self.file), self.rows.clone())
    }

    /// The same file, holding `batch` of the rows `rows` (filtered batches gathered).
    pub(crate) fn replace_host_rows(&self, batch: RecordBatch, rows: Vec<RowSpan>) -> Self {
        LoadedBatch::host(batch, Arc::clone(&self.file), rows)
    }

    /// The same file, rows and device, holding `batch` instead (the rows a filter kept).
    pub(crate) fn replace_device(&self, batch: DeviceRecordBatch) -> Self {
        let ordinal = match &self.data {
            BatchData::Device(_, n) => *n,
            BatchData::Host(_) => 0,
        };
        LoadedBatch::device(batch, ordinal, Arc::clone(&self.file), self.rows.clone())
    }

    /// The same file and device, holding `batch` of the rows `rows` (filtered batches
    /// gathered).
    pub(crate) fn replace_device_rows(&self, batch: DeviceRecordBatch, rows: Vec<RowSpan>) -> Self {
        let ordinal = match &self.data {
            BatchData::Device(_, n) => *n,
            BatchData::Host(_) => 0,
        };
        LoadedBatch::device(batch, ordinal, Arc::clone(&self.file), rows)
    }

    /// A device batch changed by `f` (given the batch and its device's ordinal), the same
    /// file and rows; a host batch unchanged. An error for a device batch shared with another
    /// holder (its buffers cannot be moved).
    pub(crate) fn map_device(
        self,
        f: impl FnOnce(DeviceRecordBatch, usize) -> Result<DeviceRecordBatch>,
    ) -> Result<Self> {
        match self.data {
            BatchData::Host(_) => Ok(self),
            BatchData::Device(b, ordinal) => {
                let b = Arc::try_unwrap(b).map_err(|_| crate::error::Error::Device {
                    device: format!("cuda:{ordinal}"),
                    reason: "a device batch shared before it was finished".into(),
                })?;
                Ok(LoadedBatch::device(f(b, ordinal)?, ordinal, self.file, self.rows))
            }
        }
    }

    /// The rows the batch holds, in order: row ranges of one or more row groups.
    pub fn rows(&self) -> &[RowSpan] {
        &self.rows
    }

    /// The file the rows come from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Where the buffers live.
    pub fn location(&self) -> Location {
        match &self.data {
            BatchData::Host(_) => Location::Host,
            BatchData::Device(_, n) => Location::Cuda(*n),
        }
    }

    /// The device-resident batch, for a batch in device memory.
    pub fn as_device(&self) -> Option<&Arc<DeviceRecordBatch>> {
        match &self.data {
            BatchData::Host(_) => None,
            BatchData::Device(b, _) => Some(b),
        }
    }

    /// The host batch, for a batch in host memory.
    pub fn as_host(&self) -> Option<&RecordBatch> {
        match &self.data {
            BatchData::Host(b) => Some(b),
            BatchData::Device(..) => None,
        }
    }

    /// The row group of the batch's first rows. A batch may hold rows of several row groups:
    /// [`rows`](Self::rows) says which.
    #[deprecated(note = "a batch may hold rows of several row groups: use rows()")]
    pub fn row_group(&self) -> usize {
        self.rows.first().map_or(0, |r| r.row_group)
    }

    /// Rows in the batch.
    pub fn num_rows(&self) -> usize {
        match &self.data {
            BatchData::Host(b) => b.num_rows(),
            BatchData::Device(b, _) => b.num_rows,
        }
    }

    /// Columns in the batch.
    pub fn num_columns(&self) -> usize {
        match &self.data {
            BatchData::Host(b) => b.num_columns(),
            BatchData::Device(b, _) => b.columns.len(),
        }
    }

    /// The Arrow schema.
    pub fn schema(&self) -> SchemaRef {
        match &self.data {
            BatchData::Host(b) => b.schema(),
            BatchData::Device(b, _) => b.schema.clone(),
        }
    }

    /// The batch read as `schema`: the same fields, of the same types, nullable where the
    /// batch's may not be (several files read as one, their nullability merged). The batch
    /// unchanged when its columns do not fit `schema`.
    pub(crate) fn with_schema(mut self, schema: &SchemaRef) -> Self {
        match &mut self.data {
            BatchData::Host(b) => {
                let opts = arrow::record_batch::RecordBatchOptions::new()
                    .with_row_count(Some(b.num_rows()));
                if let Ok(x) =
                    RecordBatch::try_new_with_options(schema.clone(), b.columns().to_vec(), &opts)
                {
                    *b = x;
                }
            }
            BatchData::Device(b, _) => {
                let fits = b.schema.fields().len() == schema.fields().len()
                    && b.schema.fields().iter().zip(schema.fields()).all(|(a, m)| {
                        a.data_type() == m.data_type() && (m.is_nullable() || !a.is_nullable())
                    });
                if let (true, Some(d)) = (fits, Arc::get_mut(b)) {
                    d.schema = schema.clone();
                }
            }
        }
        self
    }

    /// Bytes of memory (host or device) the batch's buffers hold (a buffer it shares with
    /// other batches counted whole: see [`memory_held`] for several batches).
    pub fn memory_size(&self) -> usize {
        match &self.data {
            BatchData::Host(b) => b.get_array_memory_size(),
            BatchData::Device(b, _) => b.device_bytes(),
        }
    }

    /// The batch as an arrow-rs `RecordBatch` in host memory (a cheap clone on the host; a
    /// device→host copy for device batches).
    /// A failed copy (pinned memory refused, a device error) names the batch's file.
    pub fn to_host(&self) -> Result<RecordBatch> {
        match &self.data {
            BatchData::Host(b) => Ok(b.clone()),
            BatchData::Device(b, _) => b.to_host().map_err(|e| e.copying_from(&self.file)),
        }
    }

    /// Like [`LoadedBatch::to_host`], consuming the batch.
    pub fn into_host(self) -> Result<RecordBatch> {
        match self.data {
            BatchData::Host(b) => Ok(b),
            BatchData::Device(b, _) => b.to_host().map_err(|e| e.copying_from(&self.file)),
        }
    }
}

/// Bytes of memory (host or device) that `batches` hold together: each buffer counted once,
/// whole, however many batches or columns share or slice it (batches cut from one decoded row
/// group share its buffers).
pub fn memory_held(batches: &[LoadedBatch]) -> usize {
    fn walk(d: &arrow::array::ArrayData, seen: &mut std::collections::HashMap<usize, usize>) {
        let mut add = |b: &arrow::buffer::Buffer| {
            seen.insert(b.data_ptr().as_ptr() as usize, b.capacity());
        };
        d.buffers().iter().for_each(&mut add);
        if let Some(n) = d.nulls() {
            add(n.buffer());
        }
        for c in d.child_data() {
            walk(c, seen);
        }
    }
    let mut seen = std::collections::HashMap::new();
    let mut device = 0usize;
    for b in batches {
        match &b.data {
            BatchData::Host(h) => {
                for c in h.columns() {
                    walk(&c.to_data(), &mut seen);
                }
            }
            BatchData::Device(d, _) => device += d.device_bytes(),
        }
    }
    seen.values().sum::<usize>() + device
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_shared_by_batches_are_held_once() {
        use arrow::array::{Int64Array, StringArray};
        let n = 100_000;
        let a: arrow::array::ArrayRef = Arc::new(Int64Array::from_iter_values(0..n));
        let s: arrow::array::ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..n).map(|i| format!("v{i}")),
        ));
        let whole = RecordBatch::try_from_iter([("a", a), ("s", s)]).unwrap();
        let file: Arc<Path> = Arc::from(Path::new("f.parquet"));
        // ten slices of one decoded batch, as a row group cut into batches
        let parts: Vec<LoadedBatch> = (0..10)
            .map(|k| LoadedBatch::host(whole.slice(k * 10_000, 10_000), Arc::clone(&file), vec![]))
            .collect();
        let each: usize = parts.iter().map(LoadedBatch::memory_size).sum();
        let held = memory_held(&parts);
        let one = memory_held(&[LoadedBatch::host(whole.clone(), file, vec![])]);
        assert_eq!(held, one, "the slices hold the whole batch's buffers, once");
        assert!(each >= 9 * held, "counted per slice: {each} against {held}");
        // the values: 800 kB of i64, the offsets, the characters
        assert!(held >= 8 * n as usize && held < 4 << 20, "{held}");
    }
}
