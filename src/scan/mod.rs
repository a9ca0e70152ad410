//! The public facade: one [`Scan`] from sources and options, one stream of batches.
//!
//! ```text
//! Scan::builder("data/")                 a file, a directory of *.parquet, or a list of them
//!     .with_columns(["a", "s.b"])        projection
//!     .with_row_groups([0, 2])           explicit row groups
//!     .with_filter("x > 5")              row-group pruning by statistics
//!     .with_row_filter("x > 5")          only the rows where it is true (on the GPU on a device)
//!     .with_device(Device::Auto)         host or CUDA; Auto says what it chose and why
//!     (or .with_devices([0, 1])          spread over several GPUs)
//!     .build()?                          every footer read, every plan made and checked here
//!     .batches()                         the one stream: batches in order, file after file
//!     (or .load()?)                      the stream collected, with the report
//! ```
//!
//! A scan is sources × options × devices: one file, a directory and a spread over GPUs are the
//! same [`Scan`] with other sources and devices, and [`Batches`] is the one stream type.
//!
//! The parts: `builder` (sources, options, every file's footer and plan), `file` (one file of
//! a scan: its plan, device and readers, [`FileScan`]), `batches` (the stream: the files one
//! after another, or the passes of a spread in order), `spread` (passes given to devices),
//! `stream` (one file's waves read and decoded by a producer thread, handed over in order),
//! `waves` (a plan cut into waves of whole batches), `host_load` (units read and decoded by
//! arrow-rs in parallel), `device` (a device load, top to bottom: waves read into device
//! memory and decoded there), `finish` (the row filter and views applied to decoded
//! batches), `report` (what a load did).

mod batches;
mod builder;
mod device;
mod file;
mod finish;
mod host_load;
mod open;
pub(crate) mod in_order;
mod partitions;
mod report;
mod spread;
mod stream;
mod waves;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use arrow::datatypes::SchemaRef;

pub use batches::Batches;
pub use builder::{
    read_footer, read_footer_with, ScanBuilder, DEFAULT_MEMORY_BUDGET_SHARE, ENV_MAX_PAGE_SIZE, ENV_MEMORY_BUDGET,
    SMALL_LOAD_BYTES,
};
pub use file::FileScan;
pub use host_load::{release_cached_buffers, RETAINED_BUFFER_BYTES};
pub use report::{LoadReport, Progress, ScanReport, SetupTimes};
use report::ProgressFn;
pub use spread::DeviceWork;

pub use crate::decode::host::view_type;
pub use crate::device::parse_device_list;

use crate::array::{LoadedBatch, Location};
pub use crate::decode::gpu::{
    Decompressed, DeviceChunks, FieldDecode, GpuDecodeReport, PageCounts,
};
use crate::error::Result;
use crate::io::RangeReader;
use crate::plan::devices::DeviceSpread;

pub(crate) use file::ReaderState;

/// Default maximum rows per batch: 1,048,576 (2^20), the row-group size pyarrow and arrow-rs
/// write by default, so that their row groups come as one batch each (no copy on the host),
/// and DuckDB's (122,880 rows) and Polars' (262,144) are gathered eight and four to a batch.
/// Large batches are what a GPU wants: per batch, a load allocates its output and builds its
/// jobs once (benches/RESULTS.md).
pub const DEFAULT_BATCH_ROWS: usize = 1 << 20;

/// The sources a [`Scan`] reads: a path (a file; a directory standing for the `*.parquet`
/// files under it at any depth, sorted by path, names starting with `_` or `.` skipped,
/// hive `key=value` directories giving columns; a glob), or a list of them.
pub trait IntoSources {
    /// The paths, in the order given.
    fn into_sources(self) -> Vec<PathBuf>;
}

macro_rules! one_source {
    ($($t:ty),*) => {$(
        impl IntoSources for $t {
            fn into_sources(self) -> Vec<PathBuf> {
                vec![AsRef::<Path>::as_ref(&self).to_path_buf()]
            }
        }
    )*};
}
one_source!(&str, String, &String, &Path, PathBuf, &PathBuf);

impl<P: AsRef<Path>> IntoSources for Vec<P> {
    fn into_sources(self) -> Vec<PathBuf> {
        self.iter().map(|p| p.as_ref().to_path_buf()).collect()
    }
}

impl<P: AsRef<Path>> IntoSources for &Vec<P> {
    fn into_sources(self) -> Vec<PathBuf> {
        self.iter().map(|p| p.as_ref().to_path_buf()).collect()
    }
}

impl<P: AsRef<Path>> IntoSources for &[P] {
    fn into_sources(self) -> Vec<PathBuf> {
        self.iter().map(|p| p.as_ref().to_path_buf()).collect()
    }
}

impl<P: AsRef<Path>, const N: usize> IntoSources for [P; N] {
    fn into_sources(self) -> Vec<PathBuf> {
        self.iter().map(|p| p.as_ref().to_path_buf()).collect()
    }
}

/// A scan of Parquet data into host or GPU memory: sources (a file, a directory, a list of
/// files) × options × devices. Built by [`Scan::builder`]; every file's footer is read and its
/// plan made by [`build`](ScanBuilder::build) (several files in parallel), and the files'
/// schemas are merged into one (field names and types must agree; nullability merged): a
/// mismatch is an error naming both files and the field.
///
/// [`batches`](Self::batches) is the stream of batches — of at most
/// [`with_batch_rows`](ScanBuilder::with_batch_rows) rows each (small row groups gathered
/// whole, large ones cut), file after file, each saying which file and which rows of which row
/// groups it holds ([`LoadedBatch::file`], [`LoadedBatch::rows`]); the next file's reads and
/// decoding start as soon as the current file's last wave is decoded. [`load`](Self::load) is
/// that stream collected, with a [`ScanReport`].
///
/// Over several GPUs ([`ScanBuilder::with_devices`]) the scan is cut into passes of whole row
/// groups from the footers ([`crate::plan::passes`]), at least two per device where the row
/// groups allow, each within half the smallest device budget; each device runs its passes on
/// a thread of its own and the batches come in load order, each on the device that decoded it
/// ([`LoadedBatch::location`]). A device runs at most one pass ahead of the caller. A pass that
/// fails ends the stream with an error naming its device and its row groups. Row selections
/// and access plans are planned once over the whole scan; a row group too large for a pass is
/// cut into pieces at page boundaries ([`crate::plan::passes::split_row_group`]).
///
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct Scan {
    files: Vec<FileScan>,
    /// The files' Arrow schemas merged.
    file_schema: SchemaRef,
    /// The batches' schema: the files' with the hive partition columns after them.
    schema: SchemaRef,
    /// Over several devices: which device takes each pass, and how each pass is loaded.
    spread: Option<Arc<spread::Spread>>,
    /// Hive-partitioned sources: the columns their directories give each file's batches.
    partitions: Option<Arc<partitions::Partitions>>,
}

/// What [`Scan::load`] produced: every batch, in order, with the one schema and the report.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The batches, file after file, in row-group order, of at most `with_batch_rows` rows
    /// (small row groups gathered whole, large ones cut): in host memory for a host scan, as
    /// [`DeviceRecordBatch`](crate::array::DeviceRecordBatch)es for a device scan; what
    /// [`Scan::batches`] yields.
    pub batches: Vec<LoadedBatch>,
    /// Their Arrow schema (also when there are no batches).
    pub schema: SchemaRef,
    /// What happened.
    pub report: ScanReport,
}

impl Loaded {
    /// All batches as arrow-rs `RecordBatch`es in host memory.
    pub fn to_host(&self) -> Result<Vec<arrow::record_batch::RecordBatch>> {
        self.batches.iter().map(LoadedBatch::to_host).collect()
    }
}

impl Scan {
    /// Starts building a scan of `sources`: a file, a directory of `*.parquet` files, or a
    /// list of files and directories ([`IntoSources`]).
    pub fn builder(sources: impl IntoSources) -> ScanBuilder {
        ScanBuilder::new(sources.into_sources())
    }

    /// The files, in the order they are read, each with its footer and plan.
    pub fn files(&self) -> &[FileScan] {
        &self.files
    }

    /// The schema of the batches: the first file's, each field nullable where any file has it
    /// nullable. Every batch carries it.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Over several devices ([`ScanBuilder::with_devices`]): which device takes each pass.
    pub fn spread(&self) -> Option<&DeviceSpread> {
        self.spread.as_deref().map(spread::Spread::passes)
    }

    /// Where the batches land: the host, or the device (over several devices, the first;
    /// each batch says its own, [`LoadedBatch::location`]).
    pub fn location(&self) -> Location {
        match &self.spread {
            Some(s) => s.location(),
            None => self.files[0].device().location,
        }
    }

    /// The batches of every file, in order, as one stream (`'static`, `Send`; see [`Scan`]).
    /// Dropping it stops the reads.
    pub fn batches(&self) -> Batches {
        self.stream(None)
    }

    /// Like [`batches`](Self::batches), reading through `reader` (e.g. a recording reader,
    /// [`crate::io::recording::RecordingReader`]) instead of each file's own range reader.
    pub fn batches_with(&self, reader: Arc<dyn RangeReader>) -> Batches {
        self.stream(Some(reader))
    }

    fn stream(&self, reader: Option<Arc<dyn RangeReader>>) -> Batches {
        match (&self.spread, &self.partitions) {
            (Some(s), _) => Batches::spread(self.schema.clone(), s.batches(reader)),
            (None, None) => Batches::files(self.files.clone(), self.schema.clone(), reader),
            (None, Some(p)) => {
                Batches::files(self.files.clone(), self.file_schema.clone(), reader)
                    .with_partitions(Arc::clone(p), self.schema.clone())
            }
        }
    }

    /// Every batch of the scan, in the order [`batches`](Self::batches) yields them, with a
    /// report of what each file's load (over several devices, each pass) did.
    pub fn load(&self) -> Result<Loaded> {
        self.load_through(None)
    }

    /// Like [`load`](Self::load), reading through `reader` (e.g. a recording reader).
    ///
    /// On the host, each file's plan is split into independent units
    /// ([`ReadPlan::units`](crate::plan::ReadPlan::units)); units are read and decoded in
    /// parallel, each into a buffer of its own that is freed once decoded, so the bytes just
    /// read are decoded while still warm in cache and memory stays bounded. On a device, large
    /// loads are read and decoded in overlapping waves of whole batches.
    pub fn load_with(&self, reader: &dyn RangeReader) -> Result<Loaded> {
        self.load_through(Some(reader))
    }

    fn load_through(&self, reader: Option<&dyn RangeReader>) -> Result<Loaded> {
        let t0 = Instant::now();
        if let Some(s) = &self.spread {
            let (batches, loads, devices) = s.load(reader)?;
            return Ok(Loaded {
                batches,
                schema: self.schema.clone(),
                report: ScanReport {
                    loads,
                    devices,
                    wall: t0.elapsed(),
                },
            });
        }
        let mut batches = Vec::new();
        let mut loads = Vec::with_capacity(self.files.len());
        let restamp = self.files.len() > 1;
        for f in &self.files {
            let loaded = match reader {
                Some(r) => f.load_with(r)?,
                None => f.load()?,
            };
            for b in loaded.batches {
                let b = if restamp {
                    b.with_schema(&self.file_schema)
                } else {
                    b
                };
                batches.push(match &self.partitions {
                    Some(p) => p.append(b, &self.schema)?,
                    None => b,
                });
            }
            loads.push(loaded.report);
        }
        Ok(Loaded {
            batches,
            schema: self.schema.clone(),
            report: ScanReport {
                loads,
                devices: Vec::new(),
                wall: t0.elapsed(),
            },
        })
    }

    /// The [`batches`](Self::batches) as an Arrow C Device Data Interface stream, for GPU code
    /// outside Rust (cuDF, nanoarrow, Arrow C++) or the C API: every batch exported without a
    /// copy as [`LoadedBatch::to_c_device`] does, on the scan's device (`ARROW_DEVICE_CUDA`) or
    /// the host (`ARROW_DEVICE_CPU`). Releasing the stream stops its reads. See
    /// [`crate::array::c_device`].
    pub fn c_device_stream(&self) -> crate::array::c_device::ArrowDeviceArrayStream {
        crate::array::c_device::export_stream(
            self.schema.clone(),
            self.location(),
            self.batches(),
        )
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
