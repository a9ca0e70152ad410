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
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use bytes::Bytes;
use parquet::file::metadata::ParquetMetaData;
use rayon::prelude::*;

use crate::array::{LoadedBatch, Location};
use crate::config::{IoSettings, StagingMode};
use crate::decode::gpu::{decode_pass, DeviceChunks, PassInput};
pub use crate::decode::gpu::{FieldDecode, GpuDecodeReport, HostDecompressed};
use crate::decode::host::HostDecoder;
use crate::decode::panic_guard::contain;
use crate::device::{self, Device, DeviceBuffer, DeviceChoice};
use crate::error::{Error, Result};
use crate::io::gpu::GpuReader;
use crate::io::host::HostReader;
use crate::io::policy::MachineFacts;
use crate::io::{Dest, IoReport, RangeReader};
use crate::metadata::{read_metadata, FileMetadata};
use crate::plan::{plan_with, CoalesceConfig, IoRequest, ReadPlan, ReadUnit, Selection};
use crate::source::ParquetFile;

/// Default maximum rows per batch.
pub const DEFAULT_BATCH_ROWS: usize = 65_536;

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

/// Builds a [`ParquetGpuReader`]. Settings not given come from the `CUPARQUET_*` environment
/// variables, then from the defaults.
pub struct ReaderBuilder {
    path: PathBuf,
    selection: Selection,
    device: Device,
    batch_rows: usize,
    keep_dictionaries: bool,
    snappy: Option<crate::decode::gpu::SnappyPlacement>,
    wave_bytes: Option<u64>,
    page_index: bool,
    nthreads: Option<usize>,
    task_size: Option<u64>,
    direct_io: Option<bool>,
    compat_mode: Option<crate::config::CompatMode>,
    gds_threshold: Option<u64>,
    bounce_buffers: Option<(u64, usize)>,
    staging: Option<StagingMode>,
    machine_facts: Option<MachineFacts>,
    coalesce: Option<CoalesceConfig>,
    progress: Option<ProgressFn>,
}

impl std::fmt::Debug for ReaderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderBuilder")
            .field("path", &self.path)
            .field("selection", &self.selection)
            .field("device", &self.device)
            .field("batch_rows", &self.batch_rows)
            .field("page_index", &self.page_index)
            .finish_non_exhaustive()
    }
}

impl ReaderBuilder {
    /// Reads only these columns: top-level names or dotted paths to nested fields (a name
    /// containing dots in backquotes). Output columns keep the file's order.
    pub fn with_columns<I, S>(mut self, columns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.selection.columns = Some(columns.into_iter().map(Into::into).collect());
        self
    }

    /// Reads only these row groups (combined with the filter: both must keep a row group).
    pub fn with_row_groups(mut self, row_groups: impl IntoIterator<Item = usize>) -> Self {
        self.selection.row_groups = Some(row_groups.into_iter().collect());
        self
    }

    /// Skips row groups whose statistics prove that no row satisfies `expr`
    /// (see [`plan::predicate`](crate::plan::predicate)). Rows are not filtered.
    pub fn with_filter(mut self, expr: impl Into<String>) -> Self {
        self.selection.filter = Some(expr.into());
        self
    }

    /// Where batches go: [`Device::Host`], [`Device::Cuda`] or [`Device::Auto`] (default).
    pub fn with_device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// Maximum rows per batch (default [`DEFAULT_BATCH_ROWS`]).
    pub fn with_batch_rows(mut self, rows: usize) -> Self {
        self.batch_rows = rows;
        self
    }

    /// Keeps dictionaries: top-level string and binary columns stored with a dictionary load
    /// as `Dictionary(Int32, Utf8 | Binary | …)` arrays (the dictionary of each row group and
    /// its keys) instead of their decoded values. Off by default. (Device loads decode these
    /// fields on the host and upload them, and say so in the report, until the GPU keeps
    /// dictionaries.)
    pub fn with_keep_dictionaries(mut self, yes: bool) -> Self {
        self.keep_dictionaries = yes;
        self
    }

    /// Where device loads decompress SNAPPY pages: by a model of both (auto, the default),
    /// always the device kernel, or always the host's cores (then uploaded, and reported as
    /// host-decompressed). Default from `CUPARQUET_SNAPPY` (`auto|device|host`).
    pub fn with_snappy(mut self, placement: crate::decode::gpu::SnappyPlacement) -> Self {
        self.snappy = Some(placement);
        self
    }

    /// Device loads: read and decode in waves of whole row groups of about `bytes` (reading
    /// the next wave while decoding the last; 0: one wave). Default from
    /// `CUPARQUET_DEVICE_WAVE_BYTES`, else, for loads of 128 MiB to 4 GiB: one wave when
    /// mostly in chunks the host decompresses, two waves when mostly in SNAPPY chunks
    /// (decompressed by the device), waves of 250 MiB otherwise; one wave below 128 MiB and
    /// waves of 1 GiB above 4 GiB. Up to 4 GiB the waves are read as one stream into one
    /// allocation (where every range is staged), each handed to a decoder as soon as it is in.
    pub fn with_wave_bytes(mut self, bytes: u64) -> Self {
        self.wave_bytes = Some(bytes);
        self
    }

    /// Loads the page index and records page locations in the plan.
    pub fn with_page_index(mut self, yes: bool) -> Self {
        self.page_index = yes;
        self
    }

    /// Reader threads (overrides `CUPARQUET_NTHREADS`).
    pub fn with_nthreads(mut self, n: usize) -> Self {
        self.nthreads = Some(n);
        self
    }

    /// Piece size large requests are split into (overrides `CUPARQUET_TASK_SIZE`).
    pub fn with_task_size(mut self, bytes: u64) -> Self {
        self.task_size = Some(bytes);
        self
    }

    /// Read with `O_DIRECT` (overrides `CUPARQUET_DIRECT_IO`).
    pub fn with_direct_io(mut self, yes: bool) -> Self {
        self.direct_io = Some(yes);
        self
    }

    /// When cuFile may be used, for device targets (overrides `CUPARQUET_COMPAT_MODE`).
    pub fn with_compat_mode(mut self, mode: crate::config::CompatMode) -> Self {
        self.compat_mode = Some(mode);
        self
    }

    /// Smallest range sent to cuFile (overrides `CUPARQUET_GDS_THRESHOLD`).
    pub fn with_gds_threshold(mut self, bytes: u64) -> Self {
        self.gds_threshold = Some(bytes);
        self
    }

    /// How staged ranges reach the device (overrides `CUPARQUET_STAGING`).
    pub fn with_staging(mut self, mode: StagingMode) -> Self {
        self.staging = Some(mode);
        self
    }

    /// Replaces the probed machine facts the path policy uses (for tests: e.g. "nvidia-fs
    /// loaded" on a machine without it).
    pub fn with_machine_facts(mut self, facts: MachineFacts) -> Self {
        self.machine_facts = Some(facts);
        self
    }

    /// Size and number of pinned bounce buffers for staged reads (override
    /// `CUPARQUET_BOUNCE_BUFFER_SIZE` and `CUPARQUET_BOUNCE_BUFFER_COUNT`).
    pub fn with_bounce_buffers(mut self, size: u64, count: usize) -> Self {
        self.bounce_buffers = Some((size, count));
        self
    }

    /// Coalescing parameters (default: the documented constants; device loads use units of
    /// `MAX_REQUEST_SIZE`).
    pub fn with_coalescing(mut self, cfg: CoalesceConfig) -> Self {
        self.coalesce = Some(cfg);
        self
    }

    /// A callback told of progress during [`ParquetGpuReader::load`].
    pub fn with_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Opens the file, reads the footer, resolves the device and makes the plan.
    pub fn build(self) -> Result<ParquetGpuReader> {
        let t0 = Instant::now();
        let mut settings = IoSettings::from_env()?;
        if let Some(n) = self.nthreads {
            settings.nthreads = n;
        }
        if let Some(t) = self.task_size {
            settings.task_size = t;
        }
        if let Some(d) = self.direct_io {
            settings.direct_io = d;
        }
        if let Some(m) = self.compat_mode {
            settings.compat_mode = m;
        }
        if let Some(t) = self.gds_threshold {
            settings.gds_threshold = t;
        }
        if let Some((size, count)) = self.bounce_buffers {
            settings.bounce_buffer_size = size;
            settings.bounce_buffer_count = count;
        }
        if let Some(m) = self.staging {
            settings.staging = m;
        }
        settings.validate()?;
        let snappy = match self.snappy {
            Some(p) => p,
            None => crate::decode::gpu::SnappyPlacement::from_env()?,
        };
        let wave_bytes = match (
            self.wave_bytes,
            std::env::var("CUPARQUET_DEVICE_WAVE_BYTES"),
        ) {
            (Some(b), _) => Some(b),
            (None, Ok(v)) => Some(crate::config::parse_size(
                "CUPARQUET_DEVICE_WAVE_BYTES",
                &v,
            )?),
            (None, Err(_)) => None,
        };
        let decoders = decoders_from_env()?;
        if self.batch_rows == 0 {
            return Err(Error::setting("batch_rows", "0", "must be at least 1"));
        }
        let device = device::resolve(self.device)?;
        let file = ParquetFile::open(&self.path)?;
        let meta = contain(|| read_metadata(&file, self.page_index)).map_err(|p| {
            Error::footer(
                &self.path,
                format!("unreadable footer (the parser panicked: {p})"),
            )
        })??;
        let t_footer = t0.elapsed();
        let coalesce = self.coalesce.unwrap_or_else(|| match device.location {
            // the GPU decodes whole passes, not units: device loads read in units of the
            // largest request, so requests are as large as the chunks allow, and units stay
            // within row groups so that waves of a pipelined load can cut between them
            Location::Cuda(_) => CoalesceConfig {
                unit_target_bytes: crate::plan::coalesce::MAX_REQUEST_SIZE,
                units_within_row_groups: true,
                ..CoalesceConfig::default()
            },
            Location::Host => CoalesceConfig::default(),
        });
        let plan = plan_with(&self.path, &meta, &self.selection, &coalesce)?;
        let decode_meta = sanitize_metadata(&self.path, &meta.metadata, &plan)?;
        let decoder = HostDecoder::new(
            &self.path,
            meta.file_len,
            decode_meta,
            &plan.leaves,
            self.batch_rows,
            self.keep_dictionaries,
        )?;
        let host_reader = HostReader::new(settings.clone())?;
        let gpu_reader = match device.location {
            Location::Host => None,
            Location::Cuda(n) => {
                let r = GpuReader::new(settings.clone(), n)?;
                Some(match self.machine_facts {
                    Some(f) => r.with_facts(f),
                    None => r,
                })
            }
        };
        Ok(ParquetGpuReader {
            gpu_reader,
            file,
            meta,
            plan,
            device,
            settings,
            decoder,
            host_reader,
            snappy,
            wave_bytes,
            decoders,
            progress: self.progress,
            t_setup: t0.elapsed(),
            t_footer,
        })
    }
}

/// Unit buffers kept for reuse, across units, loads and readers, up to this many bytes in all:
/// 256 MiB. On a warm page cache, faulting in fresh pages for every unit costs more than the
/// reads themselves.
pub const RETAINED_BUFFER_BYTES: usize = 256 << 20;

static BUFFERS: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A buffer of `len` bytes, recycled when one is free. Its contents are arbitrary: every byte is
/// overwritten by the unit's requests, which cover it end to end.
fn take_buffer(len: usize) -> Vec<u8> {
    let recycled = BUFFERS.lock().ok().and_then(|mut pool| {
        // the smallest that fits, so that large buffers stay for large units
        let i = (0..pool.len())
            .filter(|&i| pool[i].capacity() >= len)
            .min_by_key(|&i| pool[i].capacity())?;
        Some(pool.swap_remove(i))
    });
    match recycled {
        Some(mut b) => {
            b.resize(len, 0);
            b
        }
        None => vec![0u8; len],
    }
}

/// Frees the unit buffers kept for reuse (at most [`RETAINED_BUFFER_BYTES`]); returns the bytes
/// freed. Long-running processes may call it after a burst of loads.
pub fn release_cached_buffers() -> usize {
    let mut pool = BUFFERS.lock().unwrap_or_else(|p| p.into_inner());
    let n = pool.iter().map(Vec::capacity).sum();
    pool.clear();
    pool.shrink_to_fit();
    n
}

/// Returns a buffer for reuse, unless that would keep more than [`RETAINED_BUFFER_BYTES`].
fn give_buffer(b: Vec<u8>) {
    if let Ok(mut pool) = BUFFERS.lock() {
        let kept: usize = pool.iter().map(Vec::capacity).sum();
        if kept + b.capacity() <= RETAINED_BUFFER_BYTES {
            pool.push(b);
        }
    }
}

/// arrow-rs reads a chunk from its dictionary page offset whenever one is given; where the plan
/// ignored an impossible one (e.g. 0), drop it so that arrow-rs reads what the plan read.
fn sanitize_metadata(
    path: &Path,
    md: &Arc<ParquetMetaData>,
    plan: &ReadPlan,
) -> Result<Arc<ParquetMetaData>> {
    let fixes: Vec<(usize, usize)> = plan
        .chunks
        .iter()
        .filter(|c| c.ignored_dictionary_offset.is_some())
        .map(|c| (c.row_group, c.column))
        .collect();
    if fixes.is_empty() {
        return Ok(Arc::clone(md));
    }
    let mut builder = md.as_ref().clone().into_builder();
    let mut groups = builder.take_row_groups();
    for (rg, col) in fixes {
        let cols = groups[rg].columns_mut();
        let fixed = cols[col]
            .clone()
            .into_builder()
            .set_dictionary_page_offset(None)
            .build()
            .map_err(|e| Error::BadColumnChunk {
                path: path.to_path_buf(),
                row_group: rg,
                column: cols[col].column_path().string(),
                range: None,
                reason: e.to_string(),
            })?;
        cols[col] = fixed;
    }
    Ok(Arc::new(builder.set_row_groups(groups).build()))
}

/// Decoding threads of a pipelined device load, each on a decode stream of its own:
/// `CUPARQUET_DECODE_THREADS` (1 to [`device::DECODE_STREAMS`]), default 2. An invalid value is
/// an error naming the variable, as for every setting.
fn decoders_from_env() -> Result<usize> {
    const NAME: &str = "CUPARQUET_DECODE_THREADS";
    match std::env::var(NAME) {
        Err(_) => Ok(2),
        Ok(v) => match crate::config::parse_count(NAME, &v)? {
            n if n <= device::DECODE_STREAMS => Ok(n),
            _ => Err(Error::setting(
                NAME,
                &v,
                format!("at most {}", device::DECODE_STREAMS),
            )),
        },
    }
}

/// Whole row groups a pipelined device load reads and decodes together, with the consecutive
/// units ([`ReadPlan::units`]) that carry their chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Wave {
    /// Row groups, ascending.
    row_groups: Vec<usize>,
    /// Indices into the plan's chunks.
    chunks: std::ops::Range<usize>,
    /// Indices into the plan's requests (laid end to end in the destination).
    requests: std::ops::Range<usize>,
    /// Bytes of the requests.
    bytes: u64,
}

/// Bytes per wave of a device load of mostly uncompressed chunks ([`wave_target`]).
const UNCOMPRESSED_WAVE_BYTES: u64 = 250 << 20;

/// Bytes per wave of a device load that reads `total` bytes, `device_compressed` of them in
/// chunks the device decompresses (SNAPPY) and `host_compressed` in chunks the host
/// decompresses: `set` (the builder's, else `CUPARQUET_DEVICE_WAVE_BYTES`; 0: never pipeline);
/// else waves of 1 GiB above 4 GiB (which also bounds the device memory a huge load holds in
/// still-encoded chunks); else one wave below 128 MiB or when mostly host-decompressed; else
/// two waves when mostly decompressed by the device, and waves of
/// [`UNCOMPRESSED_WAVE_BYTES`] otherwise, each handed to a decoder as soon as the streamed
/// read has it. Measured on the H200 (benches/RESULTS.md): the SNAPPY lineitem file (550 MB)
/// loads 13 % faster in two waves than in one; the ZSTD file (host-decompressed) 4–10 %
/// slower, its decompression keeping busy the cores the reads need; the uncompressed file
/// (1.87 GB) 15–30 % faster in 250 MiB waves of a streamed read than in one wave.
fn wave_target(total: u64, device_compressed: u64, host_compressed: u64, set: Option<u64>) -> u64 {
    if let Some(v) = set {
        return if v == 0 { u64::MAX } else { v };
    }
    if total > 4 << 30 {
        1 << 30
    } else if total < 128 << 20 || host_compressed.saturating_mul(2) >= total {
        u64::MAX
    } else if device_compressed.saturating_mul(2) >= total {
        total.div_ceil(2)
    } else {
        UNCOMPRESSED_WAVE_BYTES
    }
}

/// Pipelined device loads up to this many bytes read as one stream into one allocation
/// ([`ParquetGpuReader::pipelined`]); larger ones (waves of 1 GiB) read wave by wave, each into
/// an allocation of its own, which bounds the device memory their still-encoded chunks hold.
const STREAM_MAX_BYTES: u64 = 4 << 30;

/// Whether `CUPARQUET_PROFILE` asks for stage times (set, and not `0`).
fn profile_requested() -> bool {
    std::env::var_os("CUPARQUET_PROFILE").is_some_and(|v| v != "0")
}

/// With `CUPARQUET_PROFILE` set: spans of a pipelined load (what, start, end), printed to
/// stderr relative to its start.
struct Timeline {
    t0: Instant,
    spans: Option<Mutex<Vec<(String, Duration, Duration)>>>,
    notes: Option<Mutex<Vec<(usize, String)>>>,
}

impl Timeline {
    fn from_env() -> Self {
        let on = profile_requested();
        Timeline {
            t0: Instant::now(),
            spans: on.then(|| Mutex::new(Vec::new())),
            notes: on.then(|| Mutex::new(Vec::new())),
        }
    }

    /// Records `what()` as running from `start` until now (named only when recording).
    fn add(&self, what: impl FnOnce() -> String, start: Instant) {
        if let Some(v) = &self.spans {
            let span = (what(), start - self.t0, self.t0.elapsed());
            v.lock().unwrap_or_else(|p| p.into_inner()).push(span);
        }
    }

    /// Records wave `i`'s decode stages (seconds each), printed after the spans.
    fn note(&self, i: usize, stages: &[(String, f64)]) {
        if let Some(v) = &self.notes {
            let st: Vec<String> = stages
                .iter()
                .map(|(n, s)| format!("{n} {:.2}", s * 1e3))
                .collect();
            let note = format!("wave {i} stages (ms): {}", st.join(", "));
            v.lock().unwrap_or_else(|p| p.into_inner()).push((i, note));
        }
    }

    fn print(&self) {
        if let Some(v) = &self.spans {
            let mut v = v.lock().unwrap_or_else(|p| p.into_inner());
            v.sort_by_key(|s| s.1);
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let line: Vec<String> = v
                .iter()
                .map(|(w, a, b)| format!("{w} {:.1}-{:.1}", ms(*a), ms(*b)))
                .collect();
            eprintln!("timeline (ms): {}", line.join(", "));
        }
        if let Some(v) = &self.notes {
            let mut v = v.lock().unwrap_or_else(|p| p.into_inner());
            v.sort();
            for (_, note) in v.iter() {
                eprintln!("  {note}");
            }
        }
    }
}

/// The plan's units grouped into waves of about `target` bytes that hold whole row groups; one
/// wave (or none, with no units) when the plan cannot be split.
fn waves(plan: &ReadPlan, target: u64) -> Vec<Wave> {
    let mut out: Vec<Wave> = Vec::new();
    let mut cur: Option<Wave> = None;
    for (k, u) in plan.units.iter().enumerate() {
        let w = cur.get_or_insert_with(|| Wave {
            row_groups: Vec::new(),
            chunks: u.chunks.start..u.chunks.start,
            requests: u.requests.start..u.requests.start,
            bytes: 0,
        });
        if u.chunks.start != w.chunks.end || u.requests.start != w.requests.end {
            // not consecutive: no pipelining
            return vec![];
        }
        w.chunks.end = u.chunks.end;
        w.requests.end = u.requests.end;
        w.bytes += u.bytes;
        for &rg in &u.row_groups {
            if w.row_groups.last() != Some(&rg) {
                w.row_groups.push(rg);
            }
        }
        let next_first = plan.units.get(k + 1).and_then(|n| n.row_groups.first());
        let whole = match (next_first, u.row_groups.last()) {
            (Some(n), Some(l)) => n > l,
            _ => true,
        };
        if whole && w.bytes >= target {
            out.extend(cur.take());
        }
    }
    out.extend(cur.take());
    // every planned row group exactly once, and requests that exist, or no pipelining
    let rgs: Vec<usize> = out
        .iter()
        .flat_map(|w| w.row_groups.iter().copied())
        .collect();
    if rgs != plan.row_groups || out.iter().any(|w| w.requests.is_empty()) {
        return vec![];
    }
    out
}

/// Loads Parquet columns into host or GPU memory. See the [module docs](self).
pub struct ParquetGpuReader {
    file: ParquetFile,
    meta: FileMetadata,
    plan: ReadPlan,
    device: DeviceChoice,
    settings: IoSettings,
    decoder: HostDecoder,
    host_reader: HostReader,
    gpu_reader: Option<GpuReader>,
    snappy: crate::decode::gpu::SnappyPlacement,
    wave_bytes: Option<u64>,
    decoders: usize,
    progress: Option<ProgressFn>,
    t_setup: Duration,
    t_footer: Duration,
}

impl std::fmt::Debug for ParquetGpuReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetGpuReader")
            .field("path", &self.file.path())
            .field("device", &self.device)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// What a load produced.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The batches, in row-group order: in host memory for a host load; for a device load
    /// one [`DeviceRecordBatch`](crate::array::DeviceRecordBatch) per row group.
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

/// What a load did: where, how many bytes, by which path, how long.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    /// The file.
    pub path: PathBuf,
    /// The device chosen and why.
    pub device: DeviceChoice,
    /// Rows loaded.
    pub rows: u64,
    /// Top-level columns in the result.
    pub columns: usize,
    /// Leaf columns read.
    pub leaf_columns: usize,
    /// Row groups read.
    pub row_groups: usize,
    /// Bytes of the selected column chunks.
    pub bytes_planned: u64,
    /// Bytes read (chunks plus alignment padding and coalesced gaps).
    pub bytes_read: u64,
    /// Footer bytes read.
    pub footer_bytes: u64,
    /// Footer reads.
    pub footer_reads: usize,
    /// Bytes of the resulting Arrow buffers.
    pub output_bytes: u64,
    /// I/O settings in use.
    pub settings: IoSettings,
    /// Per-request I/O record (its `wall`, like `io_time`, is summed over the units read in
    /// parallel).
    pub io: IoReport,
    /// Time to open, read the footer, plan (`build`).
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub setup_time: Duration,
    /// Of which reading and parsing the footer.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub footer_time: Duration,
    /// Time in I/O, summed over the units read in parallel.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub io_time: Duration,
    /// Time decoding, summed over the units decoded in parallel.
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub decode_time: Duration,
    /// Wall time of `load` (I/O + decode).
    #[serde(serialize_with = "crate::io::ser_secs")]
    pub load_time: Duration,
    /// For a device load: where each field was decoded and why, pages decompressed on the host.
    pub gpu_decode: Option<GpuDecodeReport>,
}

impl LoadReport {
    /// Bytes read per second of load time.
    pub fn read_throughput(&self) -> f64 {
        self.bytes_read as f64 / self.load_time.as_secs_f64().max(1e-9)
    }
}

/// Decoded batches of one row group, for some of its fields.
type RowGroupPart = (usize, Vec<RecordBatch>);

struct UnitResult {
    /// Decoded batches per row group, for the unit's fields of that row group.
    parts: Vec<(usize, Vec<RecordBatch>)>,
    io: IoReport,
    decode_time: Duration,
}

impl ParquetGpuReader {
    /// Reads one unit's requests into a buffer of its own and decodes its row groups.
    fn load_unit(&self, reader: &dyn RangeReader, unit: &ReadUnit) -> Result<UnitResult> {
        let plan = &self.plan;
        // The unit's requests are laid end to end from the first one's destination offset.
        let base = plan
            .requests
            .get(unit.requests.start)
            .map_or(0, |q| q.dest_offset);
        let local: Vec<IoRequest> = plan.requests[unit.requests.clone()]
            .iter()
            .map(|q| IoRequest {
                range: q.range.clone(),
                dest_offset: q.dest_offset - base,
                chunks: q.chunks.clone(),
            })
            .collect();
        let mut buf = take_buffer(unit.bytes as usize);
        let mut io = reader.read(&self.file, &local, Dest::Host(&mut buf))?;
        for (rec, k) in io.requests.iter_mut().zip(unit.requests.clone()) {
            rec.index = k;
        }
        let t = Instant::now();
        let data = Bytes::from(buf);
        let parts = self.decode_unit(unit, data.clone())?;
        // Recycle the buffer unless decoded arrays still point into it (view types do).
        if let Ok(m) = data.try_into_mut() {
            give_buffer(Vec::from(m));
        }
        Ok(UnitResult {
            parts,
            io,
            decode_time: t.elapsed(),
        })
    }

    /// Decodes one unit from `data`, its requests' bytes laid end to end (as the plan lays
    /// them from the unit's first destination offset).
    fn decode_unit(&self, unit: &ReadUnit, data: Bytes) -> Result<Vec<RowGroupPart>> {
        let plan = &self.plan;
        let base = plan
            .requests
            .get(unit.requests.start)
            .map_or(0, |q| q.dest_offset);
        let mut parts = Vec::new();
        let unit_chunks = &plan.chunks[unit.chunks.clone()];
        for &rg in &unit.row_groups {
            let mut leaves = Vec::new();
            let mut chunks = Vec::new();
            for c in unit_chunks.iter().filter(|c| c.row_group == rg) {
                leaves.push(c.column);
                if c.is_empty() {
                    continue;
                }
                let d = c
                    .dest_offset
                    .checked_sub(base)
                    .filter(|d| d + c.len() <= data.len() as u64)
                    .ok_or_else(|| Error::BadColumnChunk {
                        path: self.file.path().to_path_buf(),
                        row_group: rg,
                        column: c.path.clone(),
                        range: Some(c.range.clone()),
                        reason: "the chunk is not covered by the planned requests".into(),
                    })? as usize;
                chunks.push((c.range.clone(), data.slice(d..d + c.len() as usize)));
            }
            let decoded = self.decoder.decode_leaves(rg, &leaves, &chunks)?;
            parts.push((rg, decoded));
        }
        Ok(parts)
    }

    /// Joins the fields of each row group, decoded in different units, into batches of the
    /// projected schema. `parts` are in unit order, so a row group's parts come in field order.
    fn join_fields(&self, parts: Vec<(usize, Vec<RecordBatch>)>) -> Result<Vec<LoadedBatch>> {
        let schema = self.decoder.schema();
        let mut out = Vec::new();
        let mut i = 0;
        while i < parts.len() {
            let rg = parts[i].0;
            let n = parts[i..].iter().take_while(|(r, _)| *r == rg).count();
            let group = &parts[i..i + n];
            i += n;
            if n == 1 {
                out.extend(group[0].1.iter().cloned().map(|b| LoadedBatch::host(b, rg)));
                continue;
            }
            let mismatch = |what: String| Error::Decode {
                path: self.file.path().to_path_buf(),
                row_group: Some(rg),
                column: None,
                reason: format!("fields decoded apart do not line up: {what}"),
            };
            let batches = group[0].1.len();
            for (_, p) in group {
                if p.len() != batches {
                    return Err(mismatch(format!("{} vs {batches} batches", p.len())));
                }
            }
            for k in 0..batches {
                let rows = group[0].1[k].num_rows();
                let mut columns = Vec::with_capacity(schema.fields().len());
                for (_, p) in group {
                    if p[k].num_rows() != rows {
                        return Err(mismatch(format!(
                            "batch {k}: {} vs {rows} rows",
                            p[k].num_rows()
                        )));
                    }
                    columns.extend(p[k].columns().iter().cloned());
                }
                let opts = RecordBatchOptions::new().with_row_count(Some(rows));
                let b = RecordBatch::try_new_with_options(schema.clone(), columns, &opts)
                    .map_err(|e| mismatch(e.to_string()))?;
                out.push(LoadedBatch::host(b, rg));
            }
        }
        Ok(out)
    }

    /// Starts building a reader for the file at `path`.
    pub fn builder(path: impl AsRef<Path>) -> ReaderBuilder {
        ReaderBuilder {
            path: path.as_ref().to_path_buf(),
            selection: Selection::default(),
            device: Device::Auto,
            batch_rows: DEFAULT_BATCH_ROWS,
            keep_dictionaries: false,
            snappy: None,
            wave_bytes: None,
            page_index: false,
            nthreads: None,
            task_size: None,
            direct_io: None,
            compat_mode: None,
            gds_threshold: None,
            bounce_buffers: None,
            staging: None,
            machine_facts: None,
            coalesce: None,
            progress: None,
        }
    }

    /// The footer.
    pub fn metadata(&self) -> &FileMetadata {
        &self.meta
    }

    /// The plan.
    pub fn plan(&self) -> &ReadPlan {
        &self.plan
    }

    /// The device chosen and why.
    pub fn device(&self) -> &DeviceChoice {
        &self.device
    }

    /// The I/O settings in use.
    pub fn settings(&self) -> &IoSettings {
        &self.settings
    }

    /// The Arrow schema of the batches.
    pub fn schema(&self) -> &SchemaRef {
        self.decoder.schema()
    }

    /// Reads and decodes everything the plan selects.
    pub fn load(&self) -> Result<Loaded> {
        match &self.gpu_reader {
            Some(g) => self.load_with(g),
            None => self.load_with(&self.host_reader),
        }
    }

    /// Like [`load`](Self::load), reading through `reader` (e.g. a recording reader).
    ///
    /// The plan is split into independent units ([`ReadPlan::units`]); units are read and
    /// decoded in parallel, each into a buffer of its own that is freed once decoded, so the
    /// bytes just read are decoded while still warm in cache and memory stays bounded.
    pub fn load_with(&self, reader: &dyn RangeReader) -> Result<Loaded> {
        let t0 = Instant::now();
        if let Location::Cuda(n) = self.device.location {
            return self.load_to_device(reader, n, t0);
        }
        let plan = &self.plan;
        let total = plan.request_bytes();
        let n_rg = plan.row_groups.len();
        self.notify(0, 0);
        let units = &plan.units;
        let read_so_far = AtomicU64::new(0);
        let done_so_far = AtomicUsize::new(0);
        // A row group is done when the last of the units holding its fields is.
        let units_left: Vec<AtomicUsize> = plan
            .row_groups
            .iter()
            .map(|_| AtomicUsize::new(0))
            .collect();
        for u in units.iter() {
            for rg in &u.row_groups {
                if let Ok(i) = plan.row_groups.binary_search(rg) {
                    units_left[i].fetch_add(1, Relaxed);
                }
            }
        }
        let per_unit: Vec<Result<UnitResult>> = self.host_reader.pool().install(|| {
            units
                .par_iter()
                .map(|unit| {
                    let r = self.load_unit(reader, unit)?;
                    let b = read_so_far.fetch_add(unit.bytes, Relaxed) + unit.bytes;
                    let finished = unit
                        .row_groups
                        .iter()
                        .filter_map(|rg| plan.row_groups.binary_search(rg).ok())
                        .filter(|&i| units_left[i].fetch_sub(1, Relaxed) == 1)
                        .count();
                    let d = done_so_far.fetch_add(finished, Relaxed) + finished;
                    self.notify(b, d);
                    Ok(r)
                })
                .collect()
        });
        let mut parts: Vec<(usize, Vec<RecordBatch>)> = Vec::new();
        let mut records = Vec::with_capacity(plan.requests.len());
        let (mut io_time, mut decode_time) = (Duration::ZERO, Duration::ZERO);
        for r in per_unit {
            let r = r?;
            parts.extend(r.parts);
            records.extend(r.io.requests);
            io_time += r.io.wall;
            decode_time += r.decode_time;
        }
        let t_join = Instant::now();
        let batches = if units.is_empty() {
            // No leaf selected: batches carry row counts only; there is nothing to read.
            let mut v = Vec::new();
            for &rg in &plan.row_groups {
                let b = self.decoder.decode_leaves(rg, &[], &[])?;
                v.extend(b.into_iter().map(|b| LoadedBatch::host(b, rg)));
            }
            v
        } else {
            self.join_fields(parts)?
        };
        decode_time += t_join.elapsed();
        if units.is_empty() {
            self.notify(total, n_rg);
        }
        records.sort_by_key(|q| q.index);
        let io = IoReport {
            requests: records,
            wall: io_time,
            threads: self.settings.nthreads,
            direct_io: self.settings.direct_io,
            ..IoReport::default()
        };
        let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
        let output_bytes = batches.iter().map(|b| b.memory_size() as u64).sum();
        let schema = self.decoder.schema().clone();
        let report = LoadReport {
            path: self.file.path().to_path_buf(),
            device: self.device.clone(),
            rows,
            columns: schema.fields().len(),
            leaf_columns: plan.leaves.len(),
            row_groups: plan.row_groups.len(),
            bytes_planned: plan.chunk_bytes(),
            bytes_read: io.bytes(),
            footer_bytes: self.meta.reads.iter().map(|r| r.end - r.start).sum(),
            footer_reads: self.meta.reads.len(),
            output_bytes,
            settings: self.settings.clone(),
            io,
            setup_time: self.t_setup,
            footer_time: self.t_footer,
            io_time,
            decode_time,
            load_time: t0.elapsed(),
            gpu_decode: None,
        };
        Ok(Loaded {
            batches,
            schema,
            report,
        })
    }

    /// Reports progress to the callback, if one was set.
    fn notify(&self, bytes_read: u64, row_groups_done: usize) {
        if let Some(f) = &self.progress {
            f(Progress {
                bytes_read,
                bytes_total: self.plan.request_bytes(),
                row_groups_done,
                row_groups_total: self.plan.row_groups.len(),
            })
        }
    }

    /// Reads every planned request into one allocation on the device the reader was built
    /// for: the column chunks, still encoded, and the I/O record. An error for a host reader.
    pub fn load_chunks(&self) -> Result<(DeviceChunks, IoReport)> {
        match (&self.gpu_reader, self.device.location) {
            (Some(g), Location::Cuda(n)) => self.read_chunks(g, n),
            _ => Err(Error::Device {
                device: self.device.location.to_string(),
                reason: format!(
                    "load_chunks needs a reader built for a CUDA device ({})",
                    self.device.reason
                ),
            }),
        }
    }

    fn read_chunks(
        &self,
        reader: &dyn RangeReader,
        ordinal: usize,
    ) -> Result<(DeviceChunks, IoReport)> {
        let plan = &self.plan;
        let mut buffer = device::gpu(ordinal)?.alloc(plan.request_bytes() as usize)?;
        let io = reader.read(&self.file, &plan.requests, Dest::Device(&mut buffer))?;
        Ok((DeviceChunks::new(Arc::new(buffer), plan.chunks.clone()), io))
    }

    /// Reads the requests of `wave` into a device allocation of their own: its chunks, rebased.
    fn read_wave(
        &self,
        reader: &dyn RangeReader,
        ordinal: usize,
        wave: &Wave,
    ) -> Result<(DeviceChunks, IoReport)> {
        let plan = &self.plan;
        let base = plan.requests[wave.requests.start].dest_offset;
        let requests: Vec<IoRequest> = plan.requests[wave.requests.clone()]
            .iter()
            .map(|r| IoRequest {
                range: r.range.clone(),
                dest_offset: r.dest_offset - base,
                chunks: r.chunks.iter().map(|c| c - wave.chunks.start).collect(),
            })
            .collect();
        let bytes: u64 = requests.iter().map(|r| r.len()).sum();
        let mut buffer = device::gpu(ordinal)?.alloc(bytes as usize)?;
        let io = reader.read(&self.file, &requests, Dest::Device(&mut buffer))?;
        let chunks = plan.chunks[wave.chunks.clone()]
            .iter()
            .map(|c| {
                let mut c = c.clone();
                c.dest_offset -= base;
                c
            })
            .collect();
        Ok((DeviceChunks::new(Arc::new(buffer), chunks), io))
    }

    /// Reads and decodes wave after wave ([`waves`]): one thread reads, [`decoders_from_env`]
    /// threads decode, each on a decode stream of its own, so reading, decoding and the tails of
    /// decoding kernels overlap. Loads up to [`STREAM_MAX_BYTES`] read as one stream into one
    /// allocation where the reader can ([`RangeReader::read_stream`]: every thread reads on
    /// across wave boundaries, and each wave is handed over as soon as its bytes are in);
    /// otherwise each wave is read into an allocation of its own, at most one wave ahead of
    /// the decoders. Returns per wave, in order, its batches and reports.
    #[allow(clippy::type_complexity)]
    fn pipelined(
        &self,
        reader: &dyn RangeReader,
        ordinal: usize,
        waves: &[Wave],
    ) -> Result<Vec<(Vec<LoadedBatch>, GpuDecodeReport, IoReport, Duration)>> {
        use std::sync::atomic::AtomicBool;
        use std::sync::Condvar;
        let plan = &self.plan;
        // never blocks a sender: a streamed read's waves arrive as they complete; the
        // wave-by-wave reader limits itself below
        let (tx, rx) =
            std::sync::mpsc::sync_channel::<(usize, Result<(DeviceChunks, IoReport)>)>(waves.len());
        let rx = Mutex::new(rx);
        let stop = AtomicBool::new(false);
        let results: Mutex<Vec<Option<Result<_>>>> =
            Mutex::new((0..waves.len()).map(|_| None).collect());
        let read_so_far = AtomicU64::new(0);
        let done_so_far = AtomicUsize::new(0);
        // waves taken by the decoders, for the wave-by-wave reader's limit
        let taken = (Mutex::new(0usize), Condvar::new());
        // the streamed read's one allocation: its last reference is dropped here, after every
        // decode stream has finished with it
        let total = plan.request_bytes();
        let shared: Mutex<Option<Arc<DeviceBuffer>>> = Mutex::new(None);
        if total <= STREAM_MAX_BYTES {
            let gpu = device::gpu(ordinal)?;
            *shared.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(Arc::new(gpu.alloc(total as usize)?));
        }
        // with CUPARQUET_PROFILE: when each wave was read and decoded, printed at the end
        let timeline = Timeline::from_env();
        std::thread::scope(|s| {
            let stop = &stop;
            let timeline = &timeline;
            let (taken, shared) = (&taken, &shared);
            s.spawn(move || {
                let buffer = shared.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let Some(buffer) = buffer {
                    let parts: Vec<Vec<usize>> =
                        waves.iter().map(|w| w.requests.clone().collect()).collect();
                    let delivered: Vec<AtomicBool> =
                        waves.iter().map(|_| AtomicBool::new(false)).collect();
                    let t = Instant::now();
                    let streamed = reader.read_stream(
                        &self.file,
                        &plan.requests,
                        &parts,
                        &buffer,
                        &|i, io| {
                            delivered[i].store(true, Relaxed);
                            timeline.add(|| format!("read {i} (streamed)"), t);
                            let chunks = DeviceChunks::new(
                                Arc::clone(&buffer),
                                plan.chunks[waves[i].chunks.clone()].to_vec(),
                            );
                            let _ = tx.send((i, Ok((chunks, io))));
                        },
                    );
                    match streamed {
                        Some(Ok(())) => return,
                        Some(Err(e)) => {
                            if let Some(i) = delivered.iter().position(|d| !d.load(Relaxed)) {
                                let _ = tx.send((i, Err(e)));
                            }
                            return;
                        }
                        // this reader reads wave by wave: no shared allocation
                        None => {
                            drop(buffer);
                            *shared.lock().unwrap_or_else(|p| p.into_inner()) = None;
                        }
                    }
                }
                for (i, w) in waves.iter().enumerate() {
                    // at most one wave read and not yet taken by a decoder
                    let (n, cv) = taken;
                    let mut n = n.lock().unwrap_or_else(|p| p.into_inner());
                    while *n + 1 < i && !stop.load(Relaxed) {
                        n = cv.wait(n).unwrap_or_else(|p| p.into_inner());
                    }
                    drop(n);
                    if stop.load(Relaxed) {
                        break;
                    }
                    let t = Instant::now();
                    let r = self.read_wave(reader, ordinal, w);
                    timeline.add(|| format!("read {i} ({} MB)", w.bytes / 1_000_000), t);
                    let failed = r.is_err();
                    if tx.send((i, r)).is_err() || failed {
                        break;
                    }
                }
            });
            for slot in 0..self.decoders {
                let (rx, results) = (&rx, &results);
                let (read_so_far, done_so_far) = (&read_so_far, &done_so_far);
                s.spawn(move || loop {
                    let msg = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    let Ok((i, r)) = msg else { break };
                    {
                        let (n, cv) = taken;
                        *n.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                        cv.notify_all();
                    }
                    let out = r.and_then(|(chunks, io)| {
                        let t = Instant::now();
                        // the chunks are dropped on this slot's stream, after its kernels
                        let d = device::with_decode_slot(slot, move || {
                            let d = self.decode_part(&chunks, &waves[i].row_groups);
                            drop(chunks);
                            d
                        });
                        timeline.add(|| format!("decode {i} (slot {slot})"), t);
                        if let Ok((_, g)) = &d {
                            timeline.note(i, &g.stages);
                        }
                        d.map(|(b, g)| (b, g, io, t.elapsed()))
                    });
                    if out.is_err() {
                        stop.store(true, Relaxed);
                        taken.1.notify_all();
                    } else {
                        let bytes = read_so_far.fetch_add(waves[i].bytes, Relaxed);
                        let rgs = done_so_far.fetch_add(waves[i].row_groups.len(), Relaxed);
                        self.notify(bytes + waves[i].bytes, rgs + waves[i].row_groups.len());
                    }
                    results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(out);
                });
            }
        });
        if let Some(buffer) = shared.into_inner().unwrap_or_else(|p| p.into_inner()) {
            // decoders may have enqueued work that still reads it
            buffer.gpu().synchronize_all_decode()?;
            drop(buffer);
        }
        timeline.print();
        let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::with_capacity(waves.len());
        for (i, r) in results.into_iter().enumerate() {
            match r {
                Some(r) => out.push(r?),
                None => {
                    return Err(Error::Decode {
                        path: self.file.path().to_path_buf(),
                        row_group: waves[i].row_groups.first().copied(),
                        column: None,
                        reason: "a wave of the pipelined device load was neither read nor decoded"
                            .into(),
                    })
                }
            }
        }
        Ok(out)
    }

    /// Reads every planned request onto device `ordinal` through `reader`, then decodes there.
    /// Large loads are pipelined ([`Self::pipelined`]): the report's `io_time` then sums the
    /// reads and `decode_time` the decoding of every wave; they overlap, so together they can
    /// exceed `load_time`.
    fn load_to_device(
        &self,
        reader: &dyn RangeReader,
        ordinal: usize,
        t0: Instant,
    ) -> Result<Loaded> {
        let plan = &self.plan;
        let total = plan.request_bytes();
        self.notify(0, 0);
        // chunks decompressed by the device (SNAPPY unless sent to the host): their waves
        // overlap reads with kernels; host-decompressed codecs keep the cores busy that the
        // reads need, and measured slower in waves
        let md = &self.meta.metadata;
        let (mut device_compressed, mut host_compressed) = (0u64, 0u64);
        for c in &plan.chunks {
            use parquet::basic::Compression;
            match md.row_group(c.row_group).column(c.column).compression() {
                Compression::UNCOMPRESSED => {}
                Compression::SNAPPY if self.snappy != crate::decode::gpu::SnappyPlacement::Host => {
                    device_compressed += c.len()
                }
                _ => host_compressed += c.len(),
            }
        }
        let target = wave_target(total, device_compressed, host_compressed, self.wave_bytes);
        let waves = waves(plan, target);
        let (batches, gpu_decode, io, decode_time) = if waves.len() > 1 {
            let mut batches = Vec::with_capacity(plan.row_groups.len());
            let mut gpu_decode = GpuDecodeReport::default();
            let mut io = IoReport::default();
            let mut decode_time = Duration::ZERO;
            for (b, g, i, d) in self.pipelined(reader, ordinal, &waves)? {
                batches.extend(b);
                gpu_decode.absorb(g);
                io.absorb(i);
                decode_time += d;
            }
            (batches, gpu_decode, io, decode_time)
        } else {
            let (chunks, io) = self.read_chunks(reader, ordinal)?;
            let t_dec = Instant::now();
            let (batches, gpu_decode) = self.decode_on_gpu(&chunks)?;
            drop(chunks);
            (batches, gpu_decode, io, t_dec.elapsed())
        };
        self.notify(total, plan.row_groups.len());
        let schema = self.decoder.schema().clone();
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
            output_bytes: batches.iter().map(|b| b.memory_size() as u64).sum(),
            settings: self.settings.clone(),
            io_time: io.wall,
            io,
            setup_time: self.t_setup,
            footer_time: self.t_footer,
            decode_time,
            load_time: t0.elapsed(),
            gpu_decode: Some(gpu_decode),
        };
        Ok(Loaded {
            batches,
            schema,
            report,
        })
    }

    /// An error unless `chunks` hold exactly this reader's plan.
    fn check_chunks(&self, chunks: &DeviceChunks) -> Result<()> {
        let plan = &self.plan;
        let same = chunks.buffer().len() as u64 == plan.request_bytes()
            && chunks.chunks().len() == plan.chunks.len()
            && chunks
                .chunks()
                .iter()
                .zip(&plan.chunks)
                .all(|(a, b)| a.range == b.range && a.dest_offset == b.dest_offset);
        if same {
            return Ok(());
        }
        Err(Error::Device {
            device: format!("cuda:{}", chunks.buffer().gpu().ordinal()),
            reason: format!(
                "these device chunks were not loaded by this reader's plan of {}",
                self.file.path().display()
            ),
        })
    }

    /// Decodes column chunks in device memory ([`load_chunks`](Self::load_chunks)) into one
    /// device batch per row group. Flat columns the GPU decodes are decoded by the kernels of
    /// [`crate::decode::gpu`]; the others (nested, DELTA_*, BYTE_STREAM_SPLIT, ...) are decoded
    /// by arrow-rs on the host from a copy of their chunks and uploaded — the report names each
    /// and why. Both run at once.
    pub fn decode_on_gpu(
        &self,
        chunks: &DeviceChunks,
    ) -> Result<(Vec<LoadedBatch>, GpuDecodeReport)> {
        self.check_chunks(chunks)?;
        self.decode_part(chunks, &self.plan.row_groups)
    }

    /// [`decode_on_gpu`](Self::decode_on_gpu) of `chunks` holding every planned chunk of the
    /// row groups `row_groups` (a wave of a pipelined load, or the whole plan).
    fn decode_part(
        &self,
        chunks: &DeviceChunks,
        row_groups: &[usize],
    ) -> Result<(Vec<LoadedBatch>, GpuDecodeReport)> {
        let pass = PassInput {
            path: self.file.path(),
            metadata: &self.meta.metadata,
            leaves: &self.plan.leaves,
            decoder: &self.decoder,
            pool: self.host_reader.pool(),
            snappy: self.snappy,
            profile: profile_requested(),
        };
        let (batches, report) = decode_pass(&pass, chunks, row_groups)?;
        let batches = batches
            .into_iter()
            .map(|(rg, b)| {
                let ordinal = chunks.buffer().gpu().ordinal();
                LoadedBatch::device(b, ordinal, rg)
            })
            .collect();
        Ok((batches, report))
    }

    /// Decodes column chunks loaded into device memory on the host, from one device→host copy
    /// (the round trip GPU decoding will replace). The result equals a host load of the same
    /// plan.
    pub fn decode_on_host(&self, chunks: &DeviceChunks) -> Result<Vec<LoadedBatch>> {
        self.check_chunks(chunks)?;
        let plan = &self.plan;
        let mut host = take_buffer(chunks.buffer().len());
        chunks.buffer().copy_into(0, &mut host)?;
        let data = Bytes::from(host);
        let parts: Vec<Result<Vec<RowGroupPart>>> = self.host_reader.pool().install(|| {
            plan.units
                .par_iter()
                .map(|unit| {
                    let base = plan
                        .requests
                        .get(unit.requests.start)
                        .map_or(0, |q| q.dest_offset) as usize;
                    let end = (base + unit.bytes as usize).min(data.len());
                    self.decode_unit(unit, data.slice(base.min(end)..end))
                })
                .collect()
        });
        let mut all = Vec::new();
        for p in parts {
            all.extend(p?);
        }
        if plan.units.is_empty() {
            let mut v = Vec::new();
            for &rg in &plan.row_groups {
                let b = self.decoder.decode_leaves(rg, &[], &[])?;
                v.extend(b.into_iter().map(|b| LoadedBatch::host(b, rg)));
            }
            return Ok(v);
        }
        self.join_fields(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array};
    use parquet::file::properties::WriterProperties;

    /// A file of int64 columns `names`, `rows` rows, row groups of `rg_rows`.
    fn int_file(names: &[&str], rows: i64, rg_rows: usize) -> tempfile::NamedTempFile {
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
        let mut w =
            parquet::arrow::ArrowWriter::try_new(f.reopen().unwrap(), batch.schema(), Some(props))
                .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        f
    }

    #[test]
    fn decode_reports_of_waves_add_up() {
        let field = |name: &str, on_gpu: bool, reason: &str| FieldDecode {
            name: name.into(),
            on_gpu,
            reason: reason.into(),
        };
        let hd = |field: &str, codec: &str, pages: usize| HostDecompressed {
            field: field.into(),
            codec: codec.into(),
            pages,
        };
        let mut a = GpuDecodeReport::default();
        a.absorb(GpuDecodeReport {
            fields: vec![field("a", true, "INT64"), field("b", true, "BYTE_ARRAY")],
            host_decompressed_pages: 3,
            host_decompressed: vec![hd("a", "ZSTD", 3)],
            stages: vec![("page tables".into(), 0.5)],
        });
        a.absorb(GpuDecodeReport {
            fields: vec![
                field("a", true, "INT64"),
                field("b", false, "DELTA in this part"),
            ],
            host_decompressed_pages: 4,
            host_decompressed: vec![hd("a", "ZSTD", 1), hd("b", "SNAPPY", 3)],
            stages: vec![("page tables".into(), 0.25), ("kernel x".into(), 1.0)],
        });
        assert_eq!(a.fields[0], field("a", true, "INT64"));
        // a field decoded on the host in any wave is reported so
        assert_eq!(a.fields[1], field("b", false, "DELTA in this part"));
        assert_eq!(a.host_decompressed_pages, 7);
        assert_eq!(
            a.host_decompressed,
            vec![hd("a", "ZSTD", 4), hd("b", "SNAPPY", 3)]
        );
        assert_eq!(
            a.stages,
            vec![
                ("page tables".to_string(), 0.75),
                ("kernel x".to_string(), 1.0)
            ]
        );
    }

    #[test]
    fn waves_hold_whole_row_groups_and_cover_the_plan() {
        let f = int_file(&["a", "b", "c"], 40_000, 2_500); // 16 row groups
        for (unit, within) in [(1u64, false), (2 << 20, false), (32 << 20, true)] {
            let cfg = crate::plan::CoalesceConfig {
                unit_target_bytes: unit,
                units_within_row_groups: within,
                ..Default::default()
            };
            let reader = ParquetGpuReader::builder(f.path())
                .with_device(Device::Host)
                .with_coalescing(cfg)
                .build()
                .unwrap();
            let plan = reader.plan();
            let total = plan.request_bytes();
            // one wave when the target is the whole load
            let one = waves(plan, u64::MAX);
            assert_eq!(one.len(), 1);
            assert_eq!(one[0].row_groups, plan.row_groups);
            assert_eq!(one[0].bytes, total);
            for target in [1, total / 5, total / 2] {
                let w = waves(plan, target);
                // a unit is never split: with 2 MiB units this file is one unit, one wave
                assert!(
                    w.len() > 1 || plan.units.len() == 1,
                    "{unit}, {target}: {w:?}"
                );
                let rgs: Vec<usize> = w.iter().flat_map(|w| w.row_groups.clone()).collect();
                assert_eq!(rgs, plan.row_groups);
                assert_eq!(w.iter().map(|w| w.bytes).sum::<u64>(), total);
                for (a, b) in w.iter().zip(w.iter().skip(1)) {
                    assert_eq!(a.chunks.end, b.chunks.start);
                    assert_eq!(a.requests.end, b.requests.start);
                    assert!(a.bytes >= target, "only the last wave may be short");
                }
                for x in &w {
                    // the wave's chunks are exactly those of its row groups
                    assert!(plan.chunks[x.chunks.clone()]
                        .iter()
                        .all(|c| x.row_groups.contains(&c.row_group)));
                    let n: usize = x
                        .row_groups
                        .iter()
                        .map(|&rg| plan.chunks_of_row_group(rg).count())
                        .sum();
                    assert_eq!(n, x.chunks.len());
                }
            }
        }
        const MIB: u64 = 1 << 20;
        let wave = UNCOMPRESSED_WAVE_BYTES;
        // uncompressed loads: one wave below 128 MiB, streamed waves up to 4 GiB, then 1 GiB
        assert_eq!(wave_target(100 * MIB, 0, 0, None), u64::MAX);
        assert_eq!(wave_target(2 << 30, 0, 0, None), wave);
        assert_eq!(wave_target(16 << 30, 0, 0, None), 1 << 30);
        // loads mostly decompressed by the device: two waves from 128 MiB, below it one
        assert_eq!(wave_target(550 * MIB, 550 * MIB, 0, None), 275 * MIB);
        assert_eq!(wave_target(550 * MIB, 275 * MIB, 0, None), 275 * MIB);
        assert_eq!(wave_target(100 * MIB, 100 * MIB, 0, None), u64::MAX);
        assert_eq!(wave_target(16 << 30, 16 << 30, 0, None), 1 << 30);
        // loads mostly decompressed by the host: one wave up to 4 GiB
        assert_eq!(wave_target(550 * MIB, 0, 300 * MIB, None), u64::MAX);
        assert_eq!(wave_target(550 * MIB, 0, 275 * MIB, None), u64::MAX);
        assert_eq!(wave_target(550 * MIB, 100 * MIB, 200 * MIB, None), wave);
        assert_eq!(wave_target(16 << 30, 0, 16 << 30, None), 1 << 30);
        // a setting wins; 0 never pipelines
        assert_eq!(wave_target(550 * MIB, 550 * MIB, 0, Some(0)), u64::MAX);
        assert_eq!(wave_target(2 << 30, 2 << 30, 0, Some(MIB)), MIB);
    }

    #[test]
    fn unit_buffers_are_kept_and_released() {
        let f = int_file(&["x"], 10_000, 1 << 20);
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        let reader = ParquetGpuReader::builder(f.path())
            .with_device(Device::Host)
            .with_progress(move |p| sink.lock().unwrap().push(p))
            .build()
            .unwrap();
        for _ in 0..3 {
            assert_eq!(reader.load().unwrap().report.rows, 10_000);
        }
        // the loads recycled their buffer, which stays cached until released
        let kept = release_cached_buffers();
        assert!(kept >= reader.plan().request_bytes() as usize, "{kept}");
        assert_eq!(release_cached_buffers(), 0);
        // progress starts at zero and ends with everything read and decoded
        let ev = events.lock().unwrap().clone();
        assert_eq!(ev.len(), 6, "{ev:?}");
        assert_eq!((ev[0].bytes_read, ev[0].row_groups_done), (0, 0));
        let last = ev[1];
        assert_eq!(last.bytes_read, last.bytes_total);
        assert_eq!(last.row_groups_done, last.row_groups_total);
        assert_eq!(last.row_groups_total, 1);
    }

    #[test]
    fn progress_counts_row_groups_whose_fields_span_units() {
        let f = int_file(&["a", "b", "c"], 1000, 250);
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&events);
        let reader = ParquetGpuReader::builder(f.path())
            .with_device(Device::Host)
            .with_coalescing(CoalesceConfig {
                unit_target_bytes: 1,
                ..Default::default()
            })
            .with_progress(move |p| sink.lock().unwrap().push(p))
            .build()
            .unwrap();
        assert_eq!(reader.plan().units.len(), 12, "one unit per field");
        let loaded = reader.load().unwrap();
        assert_eq!(loaded.report.rows, 1000);
        let ev = events.lock().unwrap().clone();
        assert_eq!(ev.len(), 13);
        let mut done: Vec<usize> = ev.iter().map(|p| p.row_groups_done).collect();
        assert!(done.iter().all(|&d| d <= 4), "{done:?}");
        done.sort();
        assert_eq!(done.last(), Some(&4));
        let batch = crate::Loaded::to_host(&loaded).unwrap();
        assert_eq!(batch.len(), 4);
        assert!(batch
            .iter()
            .all(|b| b.num_columns() == 3 && b.num_rows() == 250));
    }
}
