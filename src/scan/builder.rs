//! [`ScanBuilder`]: the sources and options of a scan, each a `with_*` method, defaults from
//! the environment; [`build`](ScanBuilder::build) lists the sources, reads every footer and
//! makes every file's plan (and, over several devices, the spread of its passes).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;


use super::{FileScan, Progress, ProgressFn, ReaderState, Scan, DEFAULT_BATCH_ROWS};
pub(super) use super::open::{open_builders, open_files, open_spread};
use super::open::list_sources;
use crate::array::Location;
use crate::config::{CompatMode, IoSettings, Tuning};
use crate::decode::filter::BatchFilter;
use crate::decode::host::HostDecoder;
use crate::error::panic_guard::contain;
use crate::device::{self, Device};
use crate::error::{Error, Result};
use crate::io::gpu::GpuReader;
use crate::io::host::HostReader;
use crate::io::policy::MachineFacts;
use crate::metadata::{read_metadata, FileMetadata};
use crate::plan::predicate::{fmt_column, parse_predicate, row_filter, Predicate};
use crate::plan::{plan_with, projected_leaves, CoalesceConfig, ReadPlan, Selection};
use crate::source::ParquetFile;

/// The variable that sets [`ScanBuilder::with_max_page_size`].
pub use crate::config::ENV_MAX_PAGE_SIZE;

/// Reads the footer of the file at `path` (with `page_index`, its column and offset indexes
/// too) as [`ScanBuilder::build`] does: a footer the parser panics on is an error. Hand it
/// to [`ScanBuilder::with_metadata`] to plan a load without reading it twice (an engine
/// pruning row groups and pages by the footer first).
pub fn read_footer(path: impl AsRef<Path>, page_index: bool) -> Result<FileMetadata> {
    read_footer_of(&ParquetFile::open(path)?, page_index)
}

/// [`read_footer`] of a path or URL, a URL read with `remote`'s settings (its store, storage
/// options): one suffix GET where the footer fits the speculative tail.
pub fn read_footer_with(
    path: impl AsRef<Path>,
    page_index: bool,
    remote: &crate::config::RemoteSettings,
) -> Result<FileMetadata> {
    read_footer_of(&ParquetFile::open_with(path, remote)?, page_index)
}

fn read_footer_of(file: &ParquetFile, page_index: bool) -> Result<FileMetadata> {
    contain(|| read_metadata(file, page_index)).map_err(|p| {
        Error::footer(
            file.path(),
            format!(
                "unreadable footer (the parser panicked: {})",
                crate::metadata::rephrase(p)
            ),
        )
    })?
}

/// Builds a [`Scan`] ([`Scan::builder`]). Settings not given come from the `CUPARQUET_*`
/// environment variables, then from the defaults.
#[derive(Clone)]
pub struct ScanBuilder {
    /// The sources as given: files, or directories of `*.parquet` files.
    pub(super) sources: Vec<PathBuf>,
    /// The file being built ([`Self::build_file`]).
    pub(super) path: PathBuf,
    /// Several CUDA devices to spread the scan over ([`Self::with_devices`]).
    pub(super) devices: Option<Vec<usize>>,
    /// One access plan per file, in file order ([`Self::with_access_plans`]).
    pub(super) access_plans: Option<Vec<Option<Vec<crate::plan::RowGroupAccess>>>>,
    pub(super) selection: Selection,
    device: Device,
    pub(super) batch_rows: usize,
    pub(super) keep_dictionaries: bool,
    tuning: Option<Tuning>,
    snappy: crate::decode::gpu::SnappyPlacement,
    pub(super) page_index: bool,
    nthreads: Option<usize>,
    task_size: Option<u64>,
    direct_io: Option<bool>,
    compat_mode: Option<CompatMode>,
    gds_threshold: Option<u64>,
    bounce_buffer_size: Option<u64>,
    machine_facts: Option<MachineFacts>,
    coalesce: Option<CoalesceConfig>,
    pub(super) memory_budget: Option<u64>,
    pub(super) rows: Option<RowsAsked>,
    progress: Option<ProgressFn>,
    metadata: Option<Arc<FileMetadata>>,
    max_page_size: Option<u64>,
    pub(super) row_filter: Option<RowFilterExpr>,
    string_views: bool,
    /// How URL sources are read (storage options, GETs in flight, piece size).
    pub(super) remote: crate::config::RemoteSettings,
}

/// A row filter as given: text, parsed at build, or a typed predicate.
#[derive(Debug, Clone)]
pub(super) enum RowFilterExpr {
    Text(String),
    Typed(Predicate),
}

/// The rows asked for: a selection over the rows of the selected row groups, an access plan
/// of every row group, or (a pass of a spread load, [`super::Scan`]) the rows of each
/// row group read, as a plan holds them.
#[derive(Debug, Clone)]
pub(super) enum RowsAsked {
    Selection(crate::plan::RowSelection),
    Access(Vec<crate::plan::RowGroupAccess>),
    Ranges(crate::plan::RowRanges),
}

impl std::fmt::Debug for ScanBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanBuilder")
            .field("sources", &self.sources)
            .field("devices", &self.devices)
            .field("selection", &self.selection)
            .field("device", &self.device)
            .field("batch_rows", &self.batch_rows)
            .field("page_index", &self.page_index)
            .finish_non_exhaustive()
    }
}

impl ScanBuilder {
    /// The defaults, for `sources`.
    pub(super) fn new(sources: Vec<PathBuf>) -> Self {
        ScanBuilder {
            path: sources.first().cloned().unwrap_or_default(),
            sources,
            devices: None,
            access_plans: None,
            selection: Selection::default(),
            device: Device::Auto,
            batch_rows: DEFAULT_BATCH_ROWS,
            keep_dictionaries: false,
            tuning: None,
            snappy: Default::default(),
            page_index: false,
            nthreads: None,
            task_size: None,
            direct_io: None,
            compat_mode: None,
            gds_threshold: None,
            bounce_buffer_size: None,
            machine_facts: None,
            coalesce: None,
            remote: Default::default(),
            memory_budget: None,
            rows: None,
            progress: None,
            metadata: None,
            max_page_size: None,
            row_filter: None,
            string_views: false,
        }
    }

    /// The same options for the file at `path`.
    pub(super) fn with_path(mut self, path: &Path) -> Self {
        self.path = path.to_path_buf();
        self
    }

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

    /// Returns only the rows for which `expr` is true (SQL's `WHERE`: a row where it is
    /// unknown, e.g. compares a null, is left out), in the language of
    /// [`plan::predicate`](crate::plan::predicate). Row groups and (with
    /// [`with_page_index`](Self::with_page_index)) pages that cannot match are not read, as
    /// with [`with_filter`](Self::with_filter); the rows read are then tested, on the GPU for
    /// a device load. Columns the filter reads and the projection leaves out are loaded for
    /// the test and left out of the batches. A batch's [`rows`](crate::LoadedBatch::rows)
    /// still names the rows it was cut from; batches with no matching row are not yielded.
    pub fn with_row_filter(mut self, expr: impl Into<String>) -> Self {
        self.row_filter = Some(RowFilterExpr::Text(expr.into()));
        self
    }

    /// [`with_row_filter`](Self::with_row_filter) with a typed predicate (e.g. built by an
    /// engine from its own expressions) instead of text.
    pub fn with_row_predicate(mut self, predicate: Predicate) -> Self {
        self.row_filter = Some(RowFilterExpr::Typed(predicate));
        self
    }

    /// Where batches go: [`Device::Host`], [`Device::Cuda`] or [`Device::Auto`] (default).
    pub fn with_device(mut self, device: Device) -> Self {
        self.device = device;
        self.devices = None;
        self
    }

    /// Several GPUs: the scan is spread over the CUDA devices `ordinals` (each named once),
    /// each pass of row groups read, decoded and held by one of them, the batches in load
    /// order, each on the device that decoded it ([`LoadedBatch::location`](crate::LoadedBatch::location)).
    /// Each device's budget is [`with_memory_budget`](Self::with_memory_budget) (or
    /// `CUPARQUET_MEMORY_BUDGET`), else 80% of its free memory. A list of one device spreads
    /// over it alone: passes within half its budget, one ahead of the caller. See [`Scan`] for
    /// how passes are spread; [`crate::device::parse_device_list`] reads a list as users write
    /// it.
    pub fn with_devices(mut self, ordinals: impl IntoIterator<Item = usize>) -> Self {
        self.devices = Some(ordinals.into_iter().collect());
        self
    }

    /// One access plan per file, in the order the scan reads its files (`None`: as the
    /// builder says; see [`with_access_plan`](Self::with_access_plan)) — the per-file plans a
    /// DataFusion scan hands down. A count other than the scan's files is an error at
    /// [`build`](Self::build).
    pub fn with_access_plans(
        mut self,
        plans: impl IntoIterator<Item = Option<Vec<crate::plan::RowGroupAccess>>>,
    ) -> Self {
        self.access_plans = Some(plans.into_iter().collect());
        self
    }

    /// Maximum rows per batch (default [`DEFAULT_BATCH_ROWS`]).
    pub fn with_batch_rows(mut self, rows: usize) -> Self {
        self.batch_rows = rows;
        self
    }

    /// Keeps dictionaries: top-level string and binary columns stored with a dictionary load
    /// as `Dictionary(Int32, Utf8 | Binary | …)` arrays (the dictionary of each row group and
    /// its keys) instead of their decoded values. Off by default. Device loads build the keys
    /// and the dictionaries on the GPU (a batch that spans row groups holds their dictionaries
    /// one after another as its values); a chunk whose writer fell back to PLAIN pages is
    /// decoded on the host and uploaded, and the report says so.
    pub fn with_keep_dictionaries(mut self, yes: bool) -> Self {
        self.keep_dictionaries = yes;
        self
    }

    /// Top-level string and binary columns as views: `Utf8View` (for `Utf8` and `LargeUtf8`)
    /// and `BinaryView` (for `Binary` and `LargeBinary`) — the layout DataFusion's operators
    /// and its own Parquet scan use by default — instead of offsets and values. Off by
    /// default. On the host arrow-rs decodes the views as it reads; on a device the columns
    /// are decoded as before and each row's 16-byte view is then built by a kernel from its
    /// offsets (after the row filter), the values staying where they are as the views' one
    /// data buffer (a batch's values of a column over 4 GiB are an error: views address them
    /// with 32-bit offsets). Kept dictionaries ([`with_keep_dictionaries`](Self::with_keep_dictionaries))
    /// stay dictionaries; nested fields keep their types. A memory budget's estimates do not
    /// count the views' 16 bytes a row.
    pub fn with_string_views(mut self, yes: bool) -> Self {
        self.string_views = yes;
        self
    }

    /// What a user may tune for their machine ([`Tuning`]); default from `CUPARQUET_TUNING`.
    pub fn with_tuning(mut self, tuning: Tuning) -> Self {
        self.tuning = Some(tuning);
        self
    }

    /// Not a setting: for the kernel tests, SNAPPY pages on the device kernel even where the
    /// model would send a small load's pages to the host's cores.
    #[doc(hidden)]
    pub fn with_snappy_placement(
        mut self,
        placement: crate::decode::gpu::SnappyPlacement,
    ) -> Self {
        self.snappy = placement;
        self
    }

    /// Loads the page index and records page locations in the plan: the filter then prunes
    /// pages too, and loads of some rows of a row group (row selections, pruned pages) read
    /// only the pages holding them. Read anyway when a memory budget needs a row group cut in
    /// pieces ([`with_memory_budget`](Self::with_memory_budget)).
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

    /// How URL sources are read, whole (feature `object-store`): storage options, GETs in
    /// flight, piece size, and the store to read from.
    pub fn with_remote_settings(mut self, remote: crate::config::RemoteSettings) -> Self {
        self.remote = remote;
        self
    }

    /// Storage options of URL sources (feature `object-store`): the `object_store` builders'
    /// configuration keys (`aws_endpoint`, `aws_region`, `aws_access_key_id`,
    /// `aws_allow_http`, `google_service_account`, `azure_storage_account_name`, `timeout`,
    /// `connect_timeout`, …), over what the environment sets (`AWS_*`, `GOOGLE_*`,
    /// `AZURE_*`). An unknown key is an error naming it when a URL is opened.
    pub fn with_storage_options<K: Into<String>, V: Into<String>>(
        mut self,
        options: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        for (k, v) in options {
            self.remote.options.insert(k.into(), v.into());
        }
        self
    }

    /// Reads every URL source from `store` (feature `object-store`), the object at the URL's
    /// path in it: a store the caller built — its own credentials, client options or
    /// wrapper, or an engine's registered store — instead of one made from the URL.
    #[cfg(feature = "object-store")]
    pub fn with_object_store(mut self, store: Arc<dyn object_store::ObjectStore>) -> Self {
        self.remote.store = Some(store);
        self
    }

    /// GETs in flight at once per remote read (default
    /// [`DEFAULT_REMOTE_CONCURRENCY`](crate::config::DEFAULT_REMOTE_CONCURRENCY)).
    pub fn with_remote_concurrency(mut self, n: usize) -> Self {
        self.remote.concurrency = n.max(1);
        self
    }

    /// The most bytes one GET of a remote read asks for (default
    /// [`DEFAULT_REMOTE_PIECE_SIZE`](crate::config::DEFAULT_REMOTE_PIECE_SIZE)).
    pub fn with_remote_piece_size(mut self, bytes: u64) -> Self {
        self.remote.piece_size = bytes.max(1);
        self
    }

    /// Read with `O_DIRECT` (overrides `CUPARQUET_DIRECT_IO`).
    pub fn with_direct_io(mut self, yes: bool) -> Self {
        self.direct_io = Some(yes);
        self
    }

    /// When cuFile may be used, for device targets (overrides `CUPARQUET_COMPAT_MODE`).
    pub fn with_compat_mode(mut self, mode: CompatMode) -> Self {
        self.compat_mode = Some(mode);
        self
    }

    /// Smallest range sent to cuFile (overrides `CUPARQUET_GDS_THRESHOLD`).
    pub fn with_gds_threshold(mut self, bytes: u64) -> Self {
        self.gds_threshold = Some(bytes);
        self
    }

    /// Replaces the probed machine facts the path policy uses (for tests: e.g. "nvidia-fs
    /// loaded" on a machine without it).
    pub fn with_machine_facts(mut self, facts: MachineFacts) -> Self {
        self.machine_facts = Some(facts);
        self
    }

    /// Size of one pinned bounce buffer for staged reads (overrides
    /// `CUPARQUET_BOUNCE_BUFFER_SIZE`).
    pub fn with_bounce_buffer_size(mut self, bytes: u64) -> Self {
        self.bounce_buffer_size = Some(bytes);
        self
    }

    /// Coalescing parameters (default: the documented constants; device loads use units of
    /// `MAX_REQUEST_SIZE`).
    pub fn with_coalescing(mut self, cfg: CoalesceConfig) -> Self {
        self.coalesce = Some(cfg);
        self
    }

    /// Reads only the rows `selection` selects, arrow-rs's way: over the rows of the selected
    /// row groups ([`with_row_groups`](Self::with_row_groups), in ascending order, else all),
    /// in order; rows past its end are not read; row groups it selects nothing of are not
    /// read at all. Row groups the filter prunes drop out with their rows. Batches hold the
    /// selected rows only (their [`rows`](crate::LoadedBatch::rows) say which); pages with no
    /// selected row are not decoded. Replaces an access plan.
    pub fn with_row_selection(mut self, selection: crate::plan::RowSelection) -> Self {
        self.rows = Some(RowsAsked::Selection(selection));
        self
    }

    /// Reads each row group as `access` (one entry per row group of the file) says: skipped,
    /// scanned, or only the rows of its own selection — the shape of DataFusion's
    /// `ParquetAccessPlan`. Combines with [`with_row_groups`](Self::with_row_groups) (row
    /// groups outside it are skipped) and the filter. Replaces a row selection.
    pub fn with_access_plan(mut self, access: Vec<crate::plan::RowGroupAccess>) -> Self {
        self.rows = Some(RowsAsked::Access(access));
        self
    }

    /// Reads only the rows `rows` of each row group it names (row groups it does not name
    /// are not read): a pass of a spread load, its rows planned over the whole load.
    pub(super) fn with_row_ranges(mut self, rows: crate::plan::RowRanges) -> Self {
        self.rows = Some(RowsAsked::Ranges(rows));
        self
    }

    /// The most device memory a device load's own live allocations may reach at once: raw
    /// chunks, decompressed pages, scratch, and decoded batches not yet handed to the caller
    /// (batches the caller holds are the caller's; the memory pool's retained free memory and
    /// the CUDA context are not counted). Default: `CUPARQUET_MEMORY_BUDGET`, else
    /// [`DEFAULT_MEMORY_BUDGET_SHARE`] of the device's free memory when the reader is built
    /// (loads estimated at most [`SMALL_LOAD_BYTES`] are not checked against it).
    ///
    /// Passes of whole row groups are planned from the footer ([`crate::plan::load_passes`],
    /// printed by `cuparquet plan --memory-budget`): when the whole load's estimate fits, it is
    /// read and decoded in overlapping waves as without a budget; otherwise in passes of a
    /// third or a half of the budget, pipelined like waves: a pass is read once its raw chunks
    /// fit beside what is held (passes read, decoding, or decoded and not yet in the caller's
    /// hands) with room left for the largest decode still to come, and decoded once its
    /// working set fits ([`Scan::batches`]: a pass is the caller's once it holds
    /// every batch of it;
    /// [`Scan::load`] returns every batch, so its memory is the whole output). A
    /// row group larger than the budget is read in pieces cut at page boundaries, each
    /// reading only its pages ([`crate::plan::passes::split_row_group`]; the page index is read for it when
    /// the file has one); without one, or where a single page range does not fit, it is an
    /// error at [`build`](Self::build) naming the row group and the budget it needs. Host
    /// loads ignore it.
    pub fn with_memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = Some(bytes);
        self
    }

    /// Uses a footer already read ([`read_footer`]) instead
    /// of reading it again: an engine that prunes by the footer first hands it over. It must
    /// be this file's footer; with its page index loaded, it counts as
    /// [`with_page_index(true)`](Self::with_page_index). A URL is then opened without a
    /// request: the footer's file length is taken as the object's.
    pub fn with_metadata(mut self, metadata: Arc<FileMetadata>) -> Self {
        self.page_index |= metadata.page_index_loaded;
        self.metadata = Some(metadata);
        self
    }

    /// Refuses pages whose header claims more than `bytes` uncompressed bytes (an error naming
    /// the page, before anything is allocated for it). Default
    /// [`MAX_PAGE_BYTES`](crate::config::MAX_PAGE_BYTES) (1 GiB), or `CUPARQUET_MAX_PAGE_SIZE`.
    pub fn with_max_page_size(mut self, bytes: u64) -> Self {
        self.max_page_size = Some(bytes);
        self
    }

    /// A callback told of progress during a load, file by file (each file's own counts).
    pub fn with_progress(mut self, f: impl Fn(Progress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(f));
        self
    }

    /// Lists the sources (a directory stands for its `*.parquet` files), reads every file's
    /// footer and makes its plan (several files in parallel), resolves the device, and merges
    /// the files' schemas: a mismatch is an error naming both files and the field. Over
    /// several devices, the passes are planned and given to the devices here too.
    pub fn build(self) -> Result<Scan> {
        let listed = list_sources(&self.sources, &self.remote)?;
        let files: Vec<PathBuf> = listed.iter().map(|(f, _)| f.clone()).collect();
        let access = match &self.access_plans {
            None => vec![None; files.len()],
            Some(a) if a.len() == files.len() => a.clone(),
            Some(a) => {
                return Err(Error::setting(
                    "access_plans",
                    format!("{} plans", a.len()),
                    format!("one access plan per file: the scan reads {} files", files.len()),
                ))
            }
        };
        let hive: Vec<(PathBuf, Vec<(String, String)>)> = (listed.iter())
            .map(|(f, root)| {
                let kv = match root {
                    Some(r) => super::partitions::hive_values(r, &f.to_string_lossy()),
                    None => Vec::new(),
                };
                (f.clone(), kv)
            })
            .collect();
        if let Some(parts) = super::partitions::Partitions::new(&hive)? {
            return self.build_partitioned(parts, files, access);
        }
        match self.devices.clone() {
            Some(ordinals) => {
                crate::config::check_devices(&ordinals)?;
                let devices = ordinals.into_iter().map(Device::Cuda).collect();
                let n = files.len();
                open_spread(self, files, access, vec![None; n], devices)
            }
            None => {
                let (files, schema) = open_files(&self, &files, &access)?;
                Ok(Scan {
                    files,
                    file_schema: schema.clone(),
                    schema,
                    spread: None,
                    partitions: None,
                })
            }
        }
    }

    /// Opens the file at `self.path`, reads its footer, resolves the device and makes its plan.
    pub(super) fn build_file(self) -> Result<FileScan> {
        let t0 = Instant::now();
        let mut settings = IoSettings::from_env()?;
        crate::config::env::validate_diagnostics()?;
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
        if let Some(size) = self.bounce_buffer_size {
            settings.bounce_buffer_size = size;
        }
        let tuning = match self.tuning.clone() {
            Some(t) => {
                t.validate()?;
                t
            }
            None => Tuning::from_env()?,
        };
        settings.bounce_buffer_count = tuning.bounce_buffer_count;
        settings.validate()?;
        if self.batch_rows == 0 {
            return Err(Error::setting("batch_rows", "0", "must be at least 1"));
        }
        let t_cuda = Instant::now();
        let device = device::resolve(self.device)?;
        if let Location::Cuda(n) = device.location {
            // the device's context, created here on a process's first device load
            device::gpu(n)?;
        }
        let t_cuda = t_cuda.elapsed();
        let t_open = Instant::now();
        // a footer handed over gives the length: a URL is opened without a request
        let file = match &self.metadata {
            Some(m) => ParquetFile::open_sized(&self.path, &self.remote, m.file_len)?,
            None => ParquetFile::open_with(&self.path, &self.remote)?,
        };
        let meta = match &self.metadata {
            Some(m) if m.file_len != file.len() => {
                return Err(Error::footer(
                    &self.path,
                    format!(
                        "the footer handed over is of a file of {} bytes, this one has {}",
                        m.file_len,
                        file.len()
                    ),
                ))
            }
            Some(m) if self.page_index && !m.page_index_loaded => read_footer_of(&file, true)?,
            Some(m) => FileMetadata::clone(m),
            None => read_footer_of(&file, self.page_index)?,
        };
        let t_footer = t_open.elapsed();
        let t_plan = Instant::now();
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
        // a round trip to a store costs more than reading a megabyte through
        #[cfg(feature = "object-store")]
        let coalesce = match (file.is_remote(), &self.coalesce) {
            (true, None) => CoalesceConfig {
                max_gap: crate::io::remote::REMOTE_COALESCE_GAP,
                ..coalesce
            },
            _ => coalesce,
        };
        let mut selection = self.selection.clone();
        let md = &meta.metadata;
        selection.rows = match &self.rows {
            None => None,
            Some(RowsAsked::Selection(sel)) => {
                let mut rgs: Vec<usize> = match &selection.row_groups {
                    Some(r) => r
                        .iter()
                        .copied()
                        .filter(|&rg| rg < md.num_row_groups())
                        .collect(),
                    None => (0..md.num_row_groups()).collect(),
                };
                rgs.sort_unstable();
                rgs.dedup();
                Some(crate::plan::rows_of_selection(&self.path, md, &rgs, sel)?)
            }
            Some(RowsAsked::Access(a)) => {
                Some(crate::plan::rows_of_access_plan(&self.path, md, a)?)
            }
            Some(RowsAsked::Ranges(r)) => Some(r.clone()),
        };
        // a row filter prunes like a filter, and reads the columns it tests
        let filter = match &self.row_filter {
            None => None,
            Some(expr) => {
                let (pred, text) = match expr {
                    RowFilterExpr::Text(t) => (parse_predicate(t)?, t.clone()),
                    RowFilterExpr::Typed(p) => (p.clone(), p.to_string()),
                };
                let schema = md.file_metadata().schema_descr();
                let rf = row_filter(&pred, &text, schema)?;
                let asked = projected_leaves(&self.path, md, selection.columns.as_deref())?;
                if let Some(cols) = &mut selection.columns {
                    for &leaf in rf.leaves() {
                        if asked.binary_search(&leaf).is_err() {
                            cols.push(fmt_column(schema.column(leaf).path().parts()));
                        }
                    }
                }
                let canonical = pred.to_string();
                selection.filter = Some(match selection.filter.take() {
                    None => canonical,
                    Some(f) => format!("({f}) AND ({canonical})"),
                });
                Some((rf, asked))
            }
        };
        let plan = plan_with(&self.path, &meta, &selection, &coalesce)?;
        let mut plan = crate::plan::bloom::prune_by_bloom_filters(
            &self.path, &meta, plan, &selection, &coalesce, &file,
        )?;
        plan.row_filter = filter.as_ref().map(|(rf, _)| rf.text().to_string());
        let decode_meta = crate::metadata::without_dictionary_offsets(
            &self.path,
            &meta.metadata,
            &plan.ignored_dictionary_offsets(),
        )?;
        let max_page_size = match self.max_page_size {
            Some(n) => n,
            None => crate::config::env::max_page_size()?.unwrap_or(crate::config::MAX_PAGE_BYTES),
        };
        let decoder = HostDecoder::new(
            &self.path,
            meta.file_len,
            decode_meta,
            &plan.leaves,
            self.batch_rows,
            // a device decodes strings as offsets and values, and builds the views after
            (
                self.keep_dictionaries,
                self.string_views && device.location == Location::Host,
            ),
        )?
        .with_max_page_bytes(max_page_size);
        let row_filter = match &filter {
            None => None,
            Some((rf, asked)) => Some(BatchFilter::new(
                &self.path,
                rf,
                &plan.leaves,
                asked,
                decoder.schema(),
            )?),
        };
        // a device's batches as views: the schema they take once the views are built
        let views = match device.location {
            Location::Cuda(_) if self.string_views => {
                let out = row_filter.as_ref().map_or(decoder.schema(), |f| f.out_schema());
                crate::decode::host::view_schema(out)
            }
            _ => None,
        };
        let mut memory_budget = u64::MAX;
        let budgeted = match device.location {
            Location::Cuda(n) => {
                let budget = match self.memory_budget {
                    Some(b) => b,
                    // small loads skip asking the driver (cuMemGetInfo costs more than
                    // planning them): a device without that much free memory fails the load's
                    // first allocation with an error saying so
                    None => default_budget(n, crate::plan::passes::load_estimate(&plan, &meta.metadata) <= SMALL_LOAD_BYTES)?,
                };
                if budget == 0 {
                    return Err(Error::setting(
                        "memory_budget",
                        "0",
                        "must be at least 1 byte",
                    ));
                }
                memory_budget = budget;
                match budget_waves(
                    &self.path,
                    &plan,
                    &meta,
                    budget,
                    self.batch_rows,
                    self.keep_dictionaries,
                ) {
                    // a row group too large: split by pages, with the page index if the file
                    // has one (read now when it was not asked for)
                    Err(Error::MemoryBudget { .. }) if !self.page_index => {
                        return self.clone().with_page_index(true).build_file();
                    }
                    // and where it has none, with one built from the page headers of the row
                    // groups to cut
                    Err(Error::MemoryBudget {
                        path,
                        row_group,
                        needed,
                        budget,
                    }) => {
                        let e = Error::MemoryBudget {
                            path,
                            row_group,
                            needed,
                            budget,
                        };
                        let mended = crate::plan::header_index_for_budget(
                            &file, &meta, &plan, row_group, budget,
                        )?;
                        return match mended {
                            Some(m) => self.clone().with_metadata(Arc::new(m)).build_file(),
                            None => Err(e),
                        };
                    }
                    other => other?,
                }
            }
            Location::Host => {
                // host loads have no budget, but a bad value is an error, not ignored
                crate::config::env::memory_budget()?;
                None
            }
        };
        let (spans, passes) = match budgeted {
            Some((spans, waves)) => (spans, Some(waves)),
            None => (
                crate::plan::batches_of(
                    &meta.metadata,
                    &plan.row_groups,
                    plan.rows.as_ref(),
                    self.batch_rows as u64,
                    self.keep_dictionaries,
                ),
                None,
            ),
        };
        let cuts = crate::plan::batch_cuts(&spans, &plan.row_groups);
        let t_plan = t_plan.elapsed();
        let t_readers = Instant::now();
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
        Ok(FileScan::from_state(ReaderState {
            gpu_reader,
            path: Arc::from(self.path.as_path()),
            file,
            meta,
            plan,
            device,
            settings,
            decoder,
            row_filter,
            host_reader,
            tuning,
            snappy: self.snappy,
            keep_dictionaries: self.keep_dictionaries,
            cuts,
            spans,
            views,
            wave_costs: passes.as_ref().map(|p| p.1.clone()).unwrap_or_default(),
            budget_waves: passes.map(|p| p.0),
            budget: memory_budget,
            progress: self.progress,
            t_setup: t0.elapsed(),
            setup: super::SetupTimes {
                cuda: t_cuda,
                footer: t_footer,
                plan: t_plan,
                readers: t_readers.elapsed(),
            },
        }))
    }
}

/// Environment variable for [`ScanBuilder::with_memory_budget`] (a size: `512MiB`, `2GiB`).
pub use crate::config::ENV_MEMORY_BUDGET;

/// The share of the device's free memory a device load may use by default
/// ([`ScanBuilder::with_memory_budget`]): 0.8, leaving room for the caller's own work and
/// for other processes' allocations made meanwhile.
pub const DEFAULT_MEMORY_BUDGET_SHARE: f64 = 0.8;

/// Device `n`'s memory budget when none is given: `CUPARQUET_MEMORY_BUDGET` where it is set,
/// else none at all (`u64::MAX`) for a `small` load, else [`DEFAULT_MEMORY_BUDGET_SHARE`] of
/// the device's free memory.
pub(super) fn default_budget(n: usize, small: bool) -> Result<u64> {
    match crate::config::env::memory_budget()? {
        Some(b) => Ok(b),
        None if small => Ok(u64::MAX),
        None => {
            let (free, _) = device::gpu(n)?.memory_info()?;
            Ok((free as f64 * DEFAULT_MEMORY_BUDGET_SHARE) as u64)
        }
    }
}

/// Device loads whose footer estimate is at most this (1 GiB) are not checked against the
/// device's free memory when no budget is set ([`ScanBuilder::with_memory_budget`]).
pub const SMALL_LOAD_BYTES: u64 = 1 << 30;


/// What a device load under a memory budget it does not fit at once reads and decodes: its
/// waves and their estimated device bytes.
type BudgetWaves = (Vec<super::waves::Wave>, Vec<super::waves::WaveCost>);

/// When a device load does not fit `budget` at once: its batches and its waves with their
/// estimated device bytes, the passes of [`crate::plan::load_passes`] (None when it fits: then
/// it is read and decoded as without a budget). A row group the budget cannot hold is an error.
fn budget_waves(
    path: &Path,
    plan: &ReadPlan,
    meta: &crate::metadata::FileMetadata,
    budget: u64,
    batch_rows: usize,
    keep_dictionaries: bool,
) -> Result<Option<(Vec<crate::plan::BatchSpan>, BudgetWaves)>> {
    if budget == u64::MAX {
        return Ok(None);
    }
    let passes = crate::plan::load_passes(
        path,
        plan,
        &meta.metadata,
        budget,
        batch_rows as u64,
        keep_dictionaries,
    )?;
    if passes.fits() {
        return Ok(None);
    }
    let waves = super::waves::pass_waves(plan, &passes).ok_or_else(|| {
        Error::setting(
            "memory_budget",
            budget.to_string(),
            format!(
                "{} needs passes cut between row groups under this budget, and the coalescing \
                 settings merge reads across row groups",
                path.display()
            ),
        )
    })?;
    let spans = passes.passes.into_iter().flat_map(|p| p.batches).collect();
    Ok(Some((spans, waves)))
}


