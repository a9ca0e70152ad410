//! The public facade: plan, read, decode, in one builder.
//!
//! ```text
//! ParquetGpuReader::builder(path)        footer read here (one speculative tail read)
//!     .with_columns(["a", "s.b"])        projection
//!     .with_row_groups([0, 2])           explicit row groups
//!     .with_filter("x > 5")              row-group pruning by statistics
//!     .with_device(Device::Auto)         host or CUDA; Auto says what it chose and why
//!     .build()?                          plan made and validated here
//!     .load()?                           I/O, then decode, in parallel by row group
//!     (or .batches()                     the same batches as a stream, step by step)
//! ```
//!
//! The parts: `builder` (options, footer, plan), `host_load` (units read and decoded by
//! arrow-rs in parallel), `device_load` (chunks read into device memory and decoded there),
//! `waves` (large device loads read and decoded in overlapping waves), `budget` (what the
//! waves of a memory budget hold, read and decoding), `report` (what a load did), `timeline`
//! (`CUPARQUET_PROFILE`'s record of a pipelined load).

mod budget;
mod builder;
mod dataset;
mod device_load;
mod host_load;
pub(crate) mod in_order;
mod report;
mod row_filter;
mod spread;
mod stream;
mod timeline;
mod views;
mod waves;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;

pub use builder::{
    read_footer, ReaderBuilder, DEFAULT_MEMORY_BUDGET_SHARE, ENV_MAX_PAGE_SIZE, ENV_MEMORY_BUDGET,
    SMALL_LOAD_BYTES,
};
pub use dataset::{Dataset, DatasetBatches, LoadedDataset};
pub use host_load::{release_cached_buffers, RETAINED_BUFFER_BYTES};
pub use report::{LoadReport, SetupTimes};
pub use spread::{parse_device_list, DeviceWork, SpreadBatches, SpreadLoaded, SpreadReader};
pub use stream::Batches;

pub use crate::decode::host::view_type;

use crate::array::{LoadedBatch, Location};
use crate::config::{IoSettings, Tuning};
pub use crate::decode::gpu::{
    Decompressed, DeviceChunks, FieldDecode, GpuDecodeReport, PageCounts,
};
use crate::decode::host::HostDecoder;
use crate::device::DeviceChoice;
use crate::error::Result;
use crate::io::gpu::GpuReader;
use crate::io::host::HostReader;
use crate::io::{IoReport, RangeReader};
use crate::metadata::FileMetadata;
use crate::plan::{BatchSpan, ReadPlan};
use crate::source::ParquetFile;

/// Default maximum rows per batch: 1,048,576 (2^20), the row-group size pyarrow and arrow-rs
/// write by default, so that their row groups come as one batch each (no copy on the host),
/// and DuckDB's (122,880 rows) and Polars' (262,144) are gathered eight and four to a batch.
/// Large batches are what a GPU wants: per batch, a load allocates its output and builds its
/// jobs once (benches/RESULTS.md).
pub const DEFAULT_BATCH_ROWS: usize = 1 << 20;

/// Progress of a load, passed to the callback set with
/// [`ReaderBuilder::with_progress`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes read so far.
    pub bytes_read: u64,
    /// Bytes the plan reads in all.
    pub bytes_total: u64,
    /// Row groups decoded so far.
    pub row_groups_done: usize,
    /// Row groups to decode.
    pub row_groups_total: usize,
}

type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// Loads Parquet columns into host or GPU memory. See the [module docs](self).
///
/// Cheap to clone: clones share the footer, the plan and the readers (a stream of batches
/// holds one while it runs).
#[derive(Clone)]
pub struct ParquetGpuReader {
    state: Arc<ReaderState>,
}

/// What a reader holds: the file, its footer and plan, the device, the settings, the decoders
/// and range readers, the batches the plan yields.
pub(crate) struct ReaderState {
    file: ParquetFile,
    /// The file's path, shared by the batches it yields.
    path: Arc<Path>,
    meta: FileMetadata,
    plan: ReadPlan,
    device: DeviceChoice,
    settings: IoSettings,
    decoder: HostDecoder,
    /// The exact row filter ([`ReaderBuilder::with_row_filter`]), bound to the load's leaves.
    row_filter: Option<crate::decode::filter::BatchFilter>,
    host_reader: HostReader,
    gpu_reader: Option<GpuReader>,
    tuning: Tuning,
    /// The batches of the plan ([`crate::plan::batches_of`]), in order.
    spans: Vec<BatchSpan>,
    /// The row groups after which no batch goes on ([`Self::batch_ends`]).
    cuts: std::collections::HashSet<usize>,
    /// A device's batches with their string and binary columns as views: their schema
    /// ([`ReaderBuilder::with_string_views`]); the views are built after the row filter.
    views: Option<arrow::datatypes::SchemaRef>,
    /// A device load under a memory budget it does not fit at once: its passes, read and
    /// decoded one after the other ([`ReaderBuilder::with_memory_budget`]).
    passes: Option<Vec<waves::Wave>>,
    /// Their estimated read bytes and decode working sets, and the budget
    /// ([`ReaderBuilder::with_memory_budget`]).
    pass_costs: Vec<budget::WaveCost>,
    budget: u64,
    progress: Option<ProgressFn>,
    t_setup: Duration,
    setup: SetupTimes,
}

impl std::fmt::Debug for ParquetGpuReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.state;
        f.debug_struct("ParquetGpuReader")
            .field("path", &s.file.path())
            .field("device", &s.device)
            .field("settings", &s.settings)
            .finish_non_exhaustive()
    }
}

/// What a load produced.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The batches, in row-group order, of at most `with_batch_rows` rows (small row groups
    /// gathered whole, large ones cut): in host memory for a host load, as
    /// [`DeviceRecordBatch`](crate::array::DeviceRecordBatch)es for a device load; what
    /// [`ParquetGpuReader::batches`] yields.
    pub batches: Vec<LoadedBatch>,
    /// Their Arrow schema (also when there are no batches).
    pub schema: SchemaRef,
    /// What happened.
    pub report: LoadReport,
}

impl Loaded {
    /// All batches as arrow-rs `RecordBatch`es in host memory.
    pub fn to_host(&self) -> Result<Vec<arrow::record_batch::RecordBatch>> {
        self.batches.iter().map(LoadedBatch::to_host).collect()
    }
}

impl ParquetGpuReader {
    /// Starts building a reader for the file at `path`.
    pub fn builder(path: impl AsRef<Path>) -> ReaderBuilder {
        ReaderBuilder::new(path.as_ref())
    }

    pub(super) fn from_state(state: ReaderState) -> Self {
        ParquetGpuReader {
            state: Arc::new(state),
        }
    }

    /// The footer.
    pub fn metadata(&self) -> &FileMetadata {
        &self.state.meta
    }

    /// The plan.
    pub fn plan(&self) -> &ReadPlan {
        &self.state.plan
    }

    /// The device chosen and why.
    pub fn device(&self) -> &DeviceChoice {
        &self.state.device
    }

    /// The I/O settings in use.
    pub fn settings(&self) -> &IoSettings {
        &self.state.settings
    }

    /// The Arrow schema of the batches.
    pub fn schema(&self) -> &SchemaRef {
        self.state.out_schema()
    }

    /// Reads and decodes everything the plan selects: the batches [`batches`](Self::batches)
    /// yields, collected, with a report of what the load did.
    pub fn load(&self) -> Result<Loaded> {
        let s = &self.state;
        match &s.gpu_reader {
            Some(g) => s.load_with(g),
            None => s.load_with(&s.host_reader),
        }
    }

    /// Like [`load`](Self::load), reading through `reader` (e.g. a recording reader).
    ///
    /// On the host, the plan is split into independent units ([`ReadPlan::units`]); units are
    /// read and decoded in parallel, each into a buffer of its own that is freed once decoded,
    /// so the bytes just read are decoded while still warm in cache and memory stays bounded.
    /// On a device, large loads are read and decoded in overlapping waves of whole batches.
    pub fn load_with(&self, reader: &dyn RangeReader) -> Result<Loaded> {
        self.state.load_with(reader)
    }

    /// Reads every planned request into one allocation on the device the reader was built
    /// for: the column chunks, still encoded, and the I/O record. An error for a host reader.
    pub fn load_chunks(&self) -> Result<(DeviceChunks, IoReport)> {
        self.state.load_chunks()
    }

    /// Decodes column chunks in device memory ([`load_chunks`](Self::load_chunks)) into the
    /// reader's batches. The columns the GPU decodes (flat ones, kept dictionaries, nested
    /// fields) are decoded by our CUDA kernels; the others (kept dictionaries whose chunks hold
    /// PLAIN pages, Arrow types the kernels do not produce, ...) are decoded by arrow-rs on the
    /// host from a copy of their chunks and uploaded — the report names each
    /// and why. Both run at once.
    pub fn decode_on_gpu(
        &self,
        chunks: &DeviceChunks,
    ) -> Result<(Vec<LoadedBatch>, GpuDecodeReport)> {
        self.state.decode_on_gpu(chunks)
    }

    /// Whether a device load of this reader goes pass after pass under its memory budget
    /// ([`ReaderBuilder::with_memory_budget`]): the whole load does not fit at once.
    pub fn budgeted(&self) -> bool {
        self.state.passes.is_some()
    }

    /// Decodes column chunks loaded into device memory on the host, from one device→host copy
    /// (a cross-check of the GPU decoder). The result equals a host load of the same plan.
    pub fn decode_on_host(&self, chunks: &DeviceChunks) -> Result<Vec<LoadedBatch>> {
        self.state.decode_on_host(chunks)
    }
}

impl ReaderState {
    /// Reads and decodes everything through `reader` ([`ParquetGpuReader::load_with`]).
    pub(super) fn load_with(&self, reader: &dyn RangeReader) -> Result<Loaded> {
        let t0 = Instant::now();
        let kernels0 = crate::device::nvrtc::module_load_time();
        let mut loaded = match self.device.location {
            Location::Cuda(_) => self.collect_device(reader, t0),
            Location::Host => self.load_to_host(reader, t0),
        }
        .map_err(|e| e.in_file(&self.path))?;
        loaded.report.kernel_load_time =
            crate::device::nvrtc::module_load_time().saturating_sub(kernels0);
        Ok(loaded)
    }

    /// The result of a load: `batches` with the report of what it did (`io`, the time spent
    /// decoding, summed over threads, and where the fields were decoded on a device load).
    fn loaded(
        &self,
        batches: Vec<LoadedBatch>,
        io: IoReport,
        decode_time: Duration,
        t0: Instant,
        gpu_decode: Option<GpuDecodeReport>,
    ) -> Loaded {
        let plan = &self.plan;
        let schema = self.out_schema().clone();
        let report = LoadReport {
            path: self.file.path().to_path_buf(),
            device: self.device.clone(),
            rows: batches.iter().map(|b| b.num_rows() as u64).sum(),
            columns: schema.fields().len(),
            leaf_columns: plan.leaves.len(),
            row_groups: plan.row_groups.len(),
            bytes_planned: plan.chunk_bytes(),
            bytes_read: io.bytes(),
            footer_bytes: self.meta.reads.iter().map(|r| r.end - r.start).sum(),
            footer_reads: self.meta.reads.len(),
            output_bytes: crate::array::memory_held(&batches) as u64,
            settings: self.settings.clone(),
            io_time: io.wall,
            io,
            setup_time: self.t_setup,
            setup: self.setup,
            kernel_load_time: Duration::ZERO,
            decode_time,
            load_time: t0.elapsed(),
            gpu_decode,
        };
        Loaded {
            batches,
            schema,
            report,
        }
    }

    /// The batches of the row groups `row_groups` (ascending): those whose first part is one
    /// of them.
    pub(crate) fn spans_of(&self, row_groups: &[usize]) -> Vec<BatchSpan> {
        self.spans
            .iter()
            .filter(|s| {
                s.parts
                    .first()
                    .is_some_and(|p| row_groups.binary_search(&p.row_group).is_ok())
            })
            .cloned()
            .collect()
    }

    /// Whether a load may be cut into waves after row group `rg`: no batch spans the cut.
    pub(crate) fn batch_ends(&self, rg: usize) -> bool {
        self.cuts.contains(&rg)
    }

    /// Reports progress to the callback, if one was set.
    pub(crate) fn notify(&self, bytes_read: u64, row_groups_done: usize) {
        if let Some(f) = &self.progress {
            f(Progress {
                bytes_read,
                bytes_total: self.plan.request_bytes(),
                row_groups_done,
                row_groups_total: self.plan.row_groups.len(),
            })
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array};
    use arrow::record_batch::RecordBatch;
    use parquet::file::properties::WriterProperties;

    /// A file of int64 columns `names`, `rows` rows, row groups of `rg_rows`.
    pub(crate) fn int_file(names: &[&str], rows: i64, rg_rows: usize) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        let cols: Vec<(&str, ArrayRef)> = names
            .iter()
            .map(|n| {
                (
                    *n,
                    Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef,
                )
            })
            .collect();
        let batch = RecordBatch::try_from_iter(cols).unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(rg_rows))
            .build();
        written(f, &batch, props)
    }

    /// `batch` written into the file `f` with `props`.
    pub(crate) fn written(
        f: tempfile::NamedTempFile,
        batch: &RecordBatch,
        props: WriterProperties,
    ) -> tempfile::NamedTempFile {
        let mut w =
            parquet::arrow::ArrowWriter::try_new(f.reopen().unwrap(), batch.schema(), Some(props))
                .unwrap();
        w.write(batch).unwrap();
        w.close().unwrap();
        f
    }
}
