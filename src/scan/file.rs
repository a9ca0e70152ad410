//! One file of a scan: its footer, plan, device, settings, decoders and range readers
//! ([`FileScan`]), and the stages of its load that callers may run one by one (the column
//! chunks read into device memory, then decoded on the device or the host).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;

use super::device::{Budget, DeviceLoad};
use super::finish::Finish;
use super::report::{LoadReport, Progress, ProgressFn, SetupTimes};
use crate::array::{LoadedBatch, Location};
use crate::config::{IoSettings, Tuning};
use crate::decode::gpu::{DeviceChunks, GpuDecodeReport};
use crate::decode::host::HostDecoder;
use crate::device::DeviceChoice;
use crate::error::{Error, Result};
use crate::io::gpu::GpuReader;
use crate::io::host::HostReader;
use crate::io::{IoReport, RangeReader};
use crate::metadata::FileMetadata;
use crate::plan::{BatchSpan, ReadPlan};
use crate::source::ParquetFile;

/// One file of a [`Scan`](super::Scan) ([`Scan::files`](super::Scan::files)): its footer,
/// plan, device and settings, and the stages of its device load — the column chunks read into
/// device memory ([`load_chunks`](Self::load_chunks)), then decoded on the device
/// ([`decode_on_gpu`](Self::decode_on_gpu)) or, as a cross-check, on the host
/// ([`decode_on_host`](Self::decode_on_host)).
///
/// Cheap to clone: clones share the footer, the plan and the readers (a stream of batches
/// holds one while it runs).
#[derive(Clone)]
pub struct FileScan {
    pub(super) state: Arc<ReaderState>,
}

/// What a reader holds: the file, its footer and plan, the device, the settings, the decoders
/// and range readers, the batches the plan yields.
pub(crate) struct ReaderState {
    pub(super) file: ParquetFile,
    /// The file's path, shared by the batches it yields.
    pub(super) path: Arc<Path>,
    pub(super) meta: FileMetadata,
    pub(super) plan: ReadPlan,
    pub(super) device: DeviceChoice,
    pub(super) settings: IoSettings,
    pub(super) decoder: HostDecoder,
    /// The exact row filter ([`ScanBuilder::with_row_filter`]), bound to the load's leaves.
    pub(super) row_filter: Option<crate::decode::filter::BatchFilter>,
    pub(super) host_reader: HostReader,
    pub(super) gpu_reader: Option<GpuReader>,
    pub(super) tuning: Tuning,
    /// Where SNAPPY pages are decompressed ([`ScanBuilder::with_snappy_placement`]).
    pub(super) snappy: crate::decode::gpu::SnappyPlacement,
    /// The batches of the plan ([`crate::plan::batches_of`]), in order.
    pub(super) spans: Vec<BatchSpan>,
    /// Kept dictionaries ([`ScanBuilder::with_keep_dictionaries`](super::ScanBuilder::with_keep_dictionaries)):
    /// no batch spans row groups.
    pub(super) keep_dictionaries: bool,
    /// The row groups after which no batch goes on ([`Self::batch_ends`]).
    pub(super) cuts: std::collections::HashSet<usize>,
    /// A device's batches with their string and binary columns as views: their schema
    /// ([`ScanBuilder::with_string_views`]); the views are built after the row filter.
    pub(super) views: Option<arrow::datatypes::SchemaRef>,
    /// A device load under a memory budget it does not fit at once: its waves (one per pass of
    /// the plan), read and decoded one after the other ([`ScanBuilder::with_memory_budget`](super::ScanBuilder::with_memory_budget)).
    pub(super) budget_waves: Option<Vec<super::waves::Wave>>,
    /// Their estimated read bytes and decode working sets, and the budget
    /// ([`ScanBuilder::with_memory_budget`](super::ScanBuilder::with_memory_budget)).
    pub(super) wave_costs: Vec<super::waves::WaveCost>,
    pub(super) budget: u64,
    pub(super) progress: Option<ProgressFn>,
    pub(super) t_setup: Duration,
    pub(super) setup: SetupTimes,
}

impl std::fmt::Debug for FileScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = &self.state;
        f.debug_struct("FileScan")
            .field("path", &s.file.path())
            .field("device", &s.device)
            .field("settings", &s.settings)
            .finish_non_exhaustive()
    }
}

/// What the load of one file produced: its batches, in order, and the report.
#[derive(Debug)]
pub(crate) struct FileLoaded {
    pub(crate) batches: Vec<LoadedBatch>,
    pub(crate) report: LoadReport,
}

impl FileScan {
    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.state.path
    }

    pub(super) fn from_state(state: ReaderState) -> Self {
        FileScan {
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

    /// The device chosen and why (a spread over several devices: the first).
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

    /// Reads and decodes everything the plan selects, through the file's own range reader.
    pub(crate) fn load(&self) -> Result<FileLoaded> {
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
    pub(crate) fn load_with(&self, reader: &dyn RangeReader) -> Result<FileLoaded> {
        self.state.load_with(reader)
    }

    /// Reads every planned request into one allocation on the device the reader was built
    /// for: the column chunks, still encoded, and the I/O record. An error for a host reader.
    pub fn load_chunks(&self) -> Result<(DeviceChunks, IoReport)> {
        let s = &self.state;
        match (&s.gpu_reader, s.device.location) {
            (Some(g), Location::Cuda(n)) => s.device_load(n).read_chunks(g),
            _ => Err(Error::Device {
                device: s.device.location.to_string(),
                reason: format!(
                    "load_chunks needs a reader built for a CUDA device ({})",
                    s.device.reason
                ),
            }),
        }
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
        let s = &self.state;
        super::device::check_chunks(&s.plan, s.file.path(), chunks)?;
        let ordinal = chunks.buffer().gpu().ordinal();
        let (batches, report) = (s.device_load(ordinal)).decode_part(chunks, &s.plan.row_groups)?;
        Ok((s.finisher().with_views(batches)?, report))
    }

    /// Whether a device load of this file goes pass after pass under its memory budget
    /// ([`ScanBuilder::with_memory_budget`](super::ScanBuilder::with_memory_budget)): the whole load does not fit at once.
    pub fn budgeted(&self) -> bool {
        self.state.budget_waves.is_some()
    }

    /// Decodes column chunks loaded into device memory on the host, from one device→host copy
    /// (a cross-check of the GPU decoder). The result equals a host load of the same plan.
    pub fn decode_on_host(&self, chunks: &DeviceChunks) -> Result<Vec<LoadedBatch>> {
        self.state.decode_on_host(chunks)
    }
}

impl ReaderState {
    /// Reads and decodes everything through `reader` ([`FileScan::load_with`]).
    pub(super) fn load_with(&self, reader: &dyn RangeReader) -> Result<FileLoaded> {
        let t0 = Instant::now();
        let kernels0 = crate::device::nvrtc::module_load_time();
        let mut loaded = match self.device.location {
            Location::Cuda(ordinal) => self.device_load(ordinal).collect(reader).map(|c| {
                self.loaded(c.batches, c.io, c.decode_time, t0, Some(c.gpu_decode))
            }),
            Location::Host => self.load_to_host(reader, t0),
        }
        .map_err(|e| e.in_file(&self.path))?;
        // a row filter's batches gathered, in order, over every wave
        loaded.batches = self
            .finisher()
            .in_order(&mut Vec::new(), std::mem::take(&mut loaded.batches), true)
            .map_err(|e| e.in_file(&self.path))?;
        loaded.report.kernel_load_time =
            crate::device::nvrtc::module_load_time().saturating_sub(kernels0);
        Ok(loaded)
    }

    /// The result of a load: `batches` with the report of what it did (`io`, the time spent
    /// decoding, summed over threads, and where the fields were decoded on a device load).
    pub(super) fn loaded(
        &self,
        batches: Vec<LoadedBatch>,
        io: IoReport,
        decode_time: Duration,
        t0: Instant,
        gpu_decode: Option<GpuDecodeReport>,
    ) -> FileLoaded {
        let plan = &self.plan;
        let schema = self.out_schema();
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
        FileLoaded { batches, report }
    }

    /// The batches of the row groups `row_groups` (ascending): those whose first part is one
    /// of them.
    pub(crate) fn spans_of(&self, row_groups: &[usize]) -> Vec<BatchSpan> {
        crate::plan::spans_of(&self.spans, row_groups)
    }

    /// Whether a load may be cut into waves after row group `rg`: no batch spans the cut.
    pub(crate) fn batch_ends(&self, rg: usize) -> bool {
        self.cuts.contains(&rg)
    }

    /// Reports progress to the callback, if one was set.
    pub(crate) fn notify(&self, bytes_read: u64, row_groups_done: usize) {
        if let Some(f) = &self.progress {
            f(Progress::of(&self.plan, bytes_read, row_groups_done))
        }
    }

    /// The input of a device load of this file on CUDA device `ordinal`.
    pub(super) fn device_load(&self, ordinal: usize) -> DeviceLoad<'_> {
        DeviceLoad {
            ordinal,
            file: &self.file,
            path: &self.path,
            metadata: &self.meta.metadata,
            plan: &self.plan,
            decoder: &self.decoder,
            spans: &self.spans,
            cuts: &self.cuts,
            tuning: &self.tuning,
            snappy: self.snappy,
            budget: self.budget_waves.as_deref().map(|waves| Budget {
                waves,
                costs: &self.wave_costs,
                bytes: self.budget,
            }),
            finish: self.finisher(),
            progress: self.progress.as_ref(),
        }
    }

    /// What finishes this file's decoded batches: its row filter and views.
    pub(super) fn finisher(&self) -> Finish<'_> {
        Finish {
            row_filter: self.row_filter.as_ref(),
            views: self.views.as_ref(),
            path: &self.path,
            batch_rows: self.decoder.batch_rows(),
            keep_dictionaries: self.keep_dictionaries,
        }
    }

    /// The schema of the batches the scan yields: without the columns read for the row
    /// filter only.
    pub(super) fn out_schema(&self) -> &SchemaRef {
        match (&self.views, &self.row_filter) {
            (Some(v), _) => v,
            (None, Some(f)) => f.out_schema(),
            (None, None) => self.decoder.schema(),
        }
    }
}

