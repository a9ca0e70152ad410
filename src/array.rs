//! The batch type the reader yields, wherever its buffers live.
//!
//! A [`LoadedBatch`] holds Arrow data in host memory today; the GPU issues add device-resident
//! batches behind the same type, so callers written against it keep working. [`to_host`]
//! (free on the host) gives an arrow-rs [`RecordBatch`].
//!
//! [`to_host`]: LoadedBatch::to_host

use std::fmt;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;

use crate::error::Result;

/// Where a batch's buffers live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Location {
    /// Host memory.
    Host,
    /// Memory of CUDA device `n`.
    Cuda(usize),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Host => f.write_str("host"),
            Location::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

#[derive(Debug, Clone)]
enum BatchData {
    Host(RecordBatch),
}

/// One batch of loaded rows: Arrow columns in host or device memory.
#[derive(Debug, Clone)]
pub struct LoadedBatch {
    data: BatchData,
    row_group: usize,
}

impl LoadedBatch {
    pub(crate) fn host(batch: RecordBatch, row_group: usize) -> Self {
        LoadedBatch {
            data: BatchData::Host(batch),
            row_group,
        }
    }

    /// Where the buffers live.
    pub fn location(&self) -> Location {
        match &self.data {
            BatchData::Host(_) => Location::Host,
        }
    }

    /// The row group the rows come from (batches never span row groups).
    pub fn row_group(&self) -> usize {
        self.row_group
    }

    /// Rows in the batch.
    pub fn num_rows(&self) -> usize {
        match &self.data {
            BatchData::Host(b) => b.num_rows(),
        }
    }

    /// Columns in the batch.
    pub fn num_columns(&self) -> usize {
        match &self.data {
            BatchData::Host(b) => b.num_columns(),
        }
    }

    /// The Arrow schema.
    pub fn schema(&self) -> SchemaRef {
        match &self.data {
            BatchData::Host(b) => b.schema(),
        }
    }

    /// Bytes of memory the batch's buffers hold.
    pub fn memory_size(&self) -> usize {
        match &self.data {
            BatchData::Host(b) => b.get_array_memory_size(),
        }
    }

    /// The batch as an arrow-rs `RecordBatch` in host memory (a cheap clone on the host; a
    /// device→host copy for device batches).
    pub fn to_host(&self) -> Result<RecordBatch> {
        match &self.data {
            BatchData::Host(b) => Ok(b.clone()),
        }
    }

    /// Like [`LoadedBatch::to_host`], consuming the batch.
    pub fn into_host(self) -> Result<RecordBatch> {
        match self.data {
            BatchData::Host(b) => Ok(b),
        }
    }
}
