//! Opening one file of a partition: prune, plan, and stream cuparquet's batches, the blocking
//! work on a thread of its own.

use std::path::PathBuf;
use std::sync::Arc;

use cuparquet::{LoadedBatch, Scan};
use datafusion::arrow::array::{BooleanArray, RecordBatch, RecordBatchOptions};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::{exec_err, DataFusionError, Result};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileOpenFuture, FileOpener};
use datafusion::execution::cache::cache_manager::{
    CachedFileMetadataEntry, FileMetadata, FileMetadataCache,
};
use datafusion::physical_expr::simplifier::PhysicalExprSimplifier;
use datafusion::physical_expr::utils::collect_columns;
use datafusion::physical_expr_adapter::{
    DefaultPhysicalExprAdapterFactory, PhysicalExprAdapterFactory,
};
use datafusion::physical_expr_common::physical_expr::{
    snapshot_generation, snapshot_physical_expr,
};
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};
use datafusion::physical_plan::PhysicalExpr;
use datafusion_datasource_parquet::ParquetFileMetrics;
use futures::{FutureExt, StreamExt};
use object_store::ObjectStore;
use tokio::sync::mpsc;

use crate::options::GpuScanOptions;
use crate::prune::{access_plan, rows_of, to_reader_access, Pruning};
use crate::row_filter::RowFilter;

/// Batches a scan thread hands over before it waits for the consumer.
const CHANNEL_BATCHES: usize = 2;

/// Rows per batch of a scan that reads no column (`COUNT(*)`): only row counts.
const COUNT_BATCH_ROWS: usize = 1 << 20;

/// The filters a scan was given: all of them, for pruning, and those it applies to the rows.
pub(crate) struct ScanFilters {
    pub(crate) predicate: Option<Arc<dyn PhysicalExpr>>,
    pub(crate) row_filter: Option<Arc<dyn PhysicalExpr>>,
}

/// Opens the files of one partition for [`GpuParquetSource`](crate::GpuParquetSource):
/// yields host batches of the file columns read, in the file schema's order.
pub struct GpuParquetOpener {
    partition: usize,
    /// The table's columns that come from files.
    file_schema: SchemaRef,
    /// The columns read (indices into `file_schema`) and their schema.
    columns: Vec<usize>,
    output_schema: SchemaRef,
    predicate: Option<Arc<dyn PhysicalExpr>>,
    row_filter: Option<Arc<dyn PhysicalExpr>>,
    pruning: Pruning,
    limit: Option<usize>,
    options: GpuScanOptions,
    metrics: ExecutionPlanMetricsSet,
    /// The table's object store and its URL (`s3://bucket/`), where it is not the local file
    /// system: files are read from it by cuparquet's remote reader.
    remote: Option<Remote>,
    /// The session's file metadata cache ([`CachedFooter`]).
    footers: Option<Arc<FileMetadataCache>>,
}

/// A footer read by cuparquet, kept in the session's file metadata cache where DataFusion's
/// own Parquet scan keeps its footers (each reader reads its own kind of entry).
#[derive(Debug)]
pub struct CachedFooter(pub Arc<cuparquet::metadata::FileMetadata>);

impl FileMetadata for CachedFooter {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn memory_size(&self) -> usize {
        self.0.metadata.memory_size()
    }

    fn extra_info(&self) -> datafusion::common::HashMap<String, String> {
        datafusion::common::HashMap::from([
            ("reader".to_string(), "cuparquet".to_string()),
            (
                "page_index".to_string(),
                self.0.page_index_loaded.to_string(),
            ),
        ])
    }
}

/// An object store a table's files are read from, and its URL.
#[derive(Clone, Debug)]
pub(crate) struct Remote {
    pub(crate) url: String,
    // read only by the `object-store` feature's remote reader (without it, a remote table is
    // an error before any file is opened)
    #[cfg_attr(not(feature = "object-store"), allow(dead_code))]
    pub(crate) store: Arc<dyn ObjectStore>,
}

impl std::fmt::Debug for GpuParquetOpener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuParquetOpener")
            .field("partition", &self.partition)
            .field("columns", &self.columns)
            .field("limit", &self.limit)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl GpuParquetOpener {
    pub(crate) fn new(
        partition: usize,
        file_schema: SchemaRef,
        columns: Vec<usize>,
        filters: ScanFilters,
        limit: Option<usize>,
        options: GpuScanOptions,
        metrics: ExecutionPlanMetricsSet,
    ) -> Self {
        let ScanFilters {
            predicate,
            row_filter,
        } = filters;
        let output_schema = Arc::new(Schema::new_with_metadata(
            columns
                .iter()
                .map(|&i| file_schema.field(i).clone())
                .collect::<Vec<_>>(),
            file_schema.metadata().clone(),
        ));
        let pruning = Pruning::new(predicate.as_ref(), &file_schema, &options);
        GpuParquetOpener {
            partition,
            file_schema,
            columns,
            output_schema,
            pruning,
            predicate,
            row_filter,
            limit,
            options,
            metrics,
            remote: None,
            footers: None,
        }
    }

    /// Reads the files from `remote` (a table on an object store).
    pub(crate) fn with_remote(mut self, remote: Option<Remote>) -> Self {
        self.remote = remote;
        self
    }

    /// Keeps footers in `cache` ([`CachedFooter`]).
    pub(crate) fn with_footers(mut self, cache: Option<Arc<FileMetadataCache>>) -> Self {
        self.footers = cache;
        self
    }

    /// The schema of the batches it yields.
    pub fn output_schema(&self) -> &SchemaRef {
        &self.output_schema
    }

    /// The work of opening `file`, to run on a thread of its own.
    pub(crate) fn job(&self, file: PartitionedFile) -> ScanJob {
        let name = file.object_meta.location.to_string();
        ScanJob {
            file,
            file_schema: Arc::clone(&self.file_schema),
            columns: self
                .columns
                .iter()
                .map(|&i| self.file_schema.field(i).name().clone())
                .collect(),
            output_schema: Arc::clone(&self.output_schema),
            predicate: self.predicate.clone(),
            row_filter: self.row_filter.clone(),
            host_filter: std::sync::OnceLock::new(),
            pruning: self.pruning.clone(),
            limit: self.limit,
            // the partition's own device where the scan is spread over several
            options: GpuScanOptions {
                device: self.options.device_of_partition(self.partition),
                devices: Vec::new(),
                ..self.options.clone()
            },
            metrics: ScanMetrics::new(&self.metrics, self.partition, &name),
            name,
            remote: self.remote.clone(),
            footers: self.footers.clone(),
        }
    }
}

impl FileOpener for GpuParquetOpener {
    fn open(&self, file: PartitionedFile) -> Result<FileOpenFuture> {
        let job = self.job(file);
        let rx = spawn(job, |job, b| match b {
            Scanned::Rows(n) => job.count_batch(n),
            Scanned::Batch(b) => job.host_batch(b),
        })?;
        Ok(async move { Ok(channel_stream(rx).boxed()) }.boxed())
    }
}

/// What a scan thread produces: batches, or, for a scan that reads no column of the file,
/// row counts.
pub(crate) enum Scanned {
    Rows(usize),
    Batch(LoadedBatch),
}

/// Runs `job` on a thread of its own, each item converted by `convert` there; the receiver
/// gets them. Dropping the receiver stops the thread at its next batch.
pub(crate) fn spawn<T: Send + 'static>(
    job: ScanJob,
    convert: impl Fn(&ScanJob, Scanned) -> Result<T> + Send + 'static,
) -> Result<mpsc::Receiver<Result<T>>> {
    let (tx, rx) = mpsc::channel(CHANNEL_BATCHES);
    std::thread::Builder::new()
        .name("cuparquet-scan".into())
        .spawn(move || {
            // a panic must end the stream with an error, never end it early and quietly (a
            // query answered from part of the file)
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                job.run(&mut |item| {
                    let item = item.and_then(|s| convert(&job, s));
                    tx.blocking_send(item).is_ok()
                })
            }));
            if let Err(p) = ran {
                let why = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                let _ = tx.blocking_send(Err(DataFusionError::Execution(format!(
                    "the cuparquet scan of {} panicked: {why}",
                    job.name
                ))));
            }
        })
        .map_err(|e| DataFusionError::Execution(format!("cannot start a scan thread: {e}")))?;
    Ok(rx)
}

/// The items of `rx` as a stream.
pub(crate) fn channel_stream<T: Send + 'static>(
    rx: mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|v| (v, rx)) })
}

/// The scan's metrics of one file: DataFusion's Parquet pruning counters and cuparquet's own.
pub(crate) struct ScanMetrics {
    pub(crate) parquet: ParquetFileMetrics,
    /// Time to read the footer, prune and plan.
    open_time: Time,
    /// Time in the reader's stream: reads and decodes.
    load_time: Time,
    /// Time to copy device batches to the host.
    to_host_time: Time,
    /// Bytes the reads of the file's plan cover (column chunks and coalesced gaps).
    bytes_read: Count,
    /// Rows the reader yields.
    rows_read: Count,
    /// Batches decoded on a GPU.
    device_batches: Count,
    /// Bytes of the device batches copied to the host (their Arrow arrays there).
    bytes_to_host: Count,
    /// Batches decoded on the host (no GPU, or `device` = `host`): with `device_batches`,
    /// where `Device::Auto` took each partition's files (a distributed scan's workers each
    /// choose their own).
    host_batches: Count,
}

impl ScanMetrics {
    fn new(set: &ExecutionPlanMetricsSet, partition: usize, file: &str) -> Self {
        let b = || MetricBuilder::new(set);
        ScanMetrics {
            parquet: ParquetFileMetrics::new(partition, file, set),
            open_time: b().subset_time("cuparquet_open_time", partition),
            load_time: b().subset_time("cuparquet_load_time", partition),
            to_host_time: b().subset_time("cuparquet_to_host_time", partition),
            bytes_read: b().counter("cuparquet_bytes_read", partition),
            rows_read: b().counter("cuparquet_rows_read", partition),
            device_batches: b().counter("cuparquet_device_batches", partition),
            bytes_to_host: b().counter("cuparquet_bytes_to_host", partition),
            host_batches: b().counter("cuparquet_host_batches", partition),
        }
    }
}

/// Opening and reading one file.
pub(crate) struct ScanJob {
    file: PartitionedFile,
    name: String,
    file_schema: SchemaRef,
    columns: Vec<String>,
    output_schema: SchemaRef,
    predicate: Option<Arc<dyn PhysicalExpr>>,
    /// The pushed filters to apply to the rows (over the table's file schema).
    row_filter: Option<Arc<dyn PhysicalExpr>>,
    /// Where cuparquet cannot apply the row filter to this file (its schema differs and the
    /// filter rewritten for it does not convert, or does not bind): the filter over the
    /// file's schema, evaluated by DataFusion on each batch read.
    host_filter: std::sync::OnceLock<(Arc<dyn PhysicalExpr>, SchemaRef)>,
    /// The predicate's pruning over the table's file schema (files whose own schema differs
    /// get theirs, [`ScanJob::file_pruning`]).
    pruning: Pruning,
    limit: Option<usize>,
    options: GpuScanOptions,
    pub(crate) metrics: ScanMetrics,
    remote: Option<Remote>,
    footers: Option<Arc<FileMetadataCache>>,
}

impl ScanJob {
    /// The file's local path, or for a table on an object store its URL.
    fn path(&self) -> Result<PathBuf> {
        if let Some(r) = &self.remote {
            return Ok(PathBuf::from(format!(
                "{}/{}",
                r.url.trim_end_matches('/'),
                self.file.object_meta.location
            )));
        }
        let store = object_store::local::LocalFileSystem::new();
        store
            .path_to_filesystem(&self.file.object_meta.location)
            .map_err(|e| DataFusionError::Execution(format!("{}: {e}", self.name)))
    }

    /// How cuparquet reads the file: from the table's store where it is remote.
    fn remote_settings(&self) -> cuparquet::config::RemoteSettings {
        #[allow(unused_mut)]
        let mut s = cuparquet::config::RemoteSettings::default();
        #[cfg(feature = "object-store")]
        if let Some(r) = &self.remote {
            s.store = Some(Arc::clone(&r.store));
        }
        s
    }

    /// Prunes and plans the file, then hands each batch to `emit` until it returns false.
    /// An error is handed over once, then the scan ends.
    pub(crate) fn run(&self, emit: &mut dyn FnMut(Result<Scanned>) -> bool) {
        match self.open() {
            Err(e) => {
                emit(Err(e));
            }
            Ok(Opened::Nothing) => {}
            Ok(Opened::Rows(mut rows)) => {
                while rows > 0 {
                    let n = rows.min(COUNT_BATCH_ROWS);
                    rows -= n;
                    if !emit(Ok(Scanned::Rows(n))) {
                        return;
                    }
                }
            }
            Ok(Opened::Scan(scan)) => {
                self.metrics
                    .bytes_read
                    .add(scan.files()[0].plan().request_bytes() as usize);
                let mut batches = scan.batches();
                loop {
                    let t = self.metrics.load_time.timer();
                    let next = batches.next();
                    t.done();
                    let Some(b) = next else { break };
                    let item = b.map_err(|e| external(&self.name, e));
                    let failed = item.is_err();
                    if let Ok(b) = &item {
                        self.metrics.rows_read.add(b.num_rows());
                        if b.as_device().is_some() {
                            self.metrics.device_batches.add(1);
                        } else {
                            self.metrics.host_batches.add(1);
                        }
                    }
                    if !emit(item.map(Scanned::Batch)) || failed {
                        return;
                    }
                }
            }
        }
    }

    /// The file's footer: from the session's cache while the file's size and modification time
    /// are those cached (and its page index loaded where `page_index` asks), else read and
    /// cached (in place of DataFusion's own footer of the file, which lacks the footer's
    /// length cuparquet checks chunks against).
    fn footer(
        &self,
        path: &std::path::Path,
        page_index: bool,
        remote: &cuparquet::config::RemoteSettings,
    ) -> Result<Arc<cuparquet::metadata::FileMetadata>> {
        let key = &self.file.object_meta.location;
        let cached = self.footers.as_ref().and_then(|c| c.get(key));
        if let Some(e) = &cached {
            if let Some(f) = e.file_metadata.as_any().downcast_ref::<CachedFooter>() {
                if e.is_valid_for(&self.file.object_meta) && (f.0.page_index_loaded || !page_index)
                {
                    return Ok(Arc::clone(&f.0));
                }
            }
        }
        let meta = Arc::new(
            cuparquet::scan::read_footer_with(path, page_index, remote)
                .map_err(|e| external(&self.name, e))?,
        );
        if let Some(c) = &self.footers {
            c.put(
                key,
                CachedFileMetadataEntry::new(
                    self.file.object_meta.clone(),
                    Arc::new(CachedFooter(Arc::clone(&meta))),
                ),
            );
        }
        Ok(meta)
    }

    fn open(&self) -> Result<Opened> {
        let _t = self.metrics.open_time.timer();
        let path = self.path()?;
        // where the reader will decode
        let on = self.options.device.location().ok();
        // (a dynamic filter's pages are known at open only: its page index read then)
        let dynamic = (self.predicate.as_ref()).is_some_and(|p| snapshot_generation(p) != 0);
        let page_index = self.pruning.wants_page_index()
            || (dynamic && self.options.pruning && self.options.page_index);
        let remote = self.remote_settings();
        let meta = self.footer(&path, page_index, &remote)?;
        let md = &meta.metadata;
        let (schema, pruning) = self.file_pruning(md, dynamic)?;
        let plan = access_plan(
            &self.file,
            md,
            &schema,
            &pruning,
            self.predicate.is_some(),
            self.limit,
            &self.metrics.parquet,
        )?;
        if plan.row_group_index_iter().next().is_none() {
            return Ok(Opened::Nothing);
        }
        // the row filter in the file's terms: applied by cuparquet where it converts
        let mut rows = None;
        if let Some(expr) = &self.row_filter {
            let expr = self.for_file(expr, &schema)?;
            match crate::row_filter::row_filter(&expr, &schema, schema.fields().len()) {
                Some(RowFilter::Nothing) => return Ok(Opened::Nothing),
                Some(RowFilter::All) => {}
                Some(RowFilter::Rows(p)) => rows = Some((p, expr)),
                None => {
                    let _ = self.host_filter.set((expr, nullable(&schema)));
                }
            }
        }
        // the table's columns this file has (a file may lack some: they read as nulls)
        let names: Vec<String> = (md.file_metadata().schema_descr().root_schema())
            .get_fields()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        let has = |c: &str| names.iter().any(|f| f == c);
        let mut present: Vec<String> = self.columns.iter().filter(|c| has(c)).cloned().collect();
        if let Some((expr, _)) = self.host_filter.get() {
            // the filter's columns are read too (and left out after it)
            for c in collect_columns(expr) {
                if !present.iter().any(|p| p == c.name()) && has(c.name()) {
                    present.push(c.name().to_string());
                }
            }
        }
        if present.is_empty() && rows.is_none() {
            return Ok(Opened::Rows(rows_of(&plan, md)));
        }
        let mut b = Scan::builder(&path)
            .with_remote_settings(remote)
            .with_metadata(Arc::clone(&meta))
            .with_columns(present.iter().map(|c| quoted(c)))
            .with_device(self.options.device)
            .with_access_plan(to_reader_access(plan));
        if let Some(n) = self.batch_rows(on) {
            b = b.with_batch_rows(n);
        }
        if let Some(m) = self.options.memory_budget {
            b = b.with_memory_budget(m);
        }
        if views_in(&self.file_schema) {
            b = b.with_string_views(true);
        }
        let reader = match rows {
            None => b.build(),
            Some((p, expr)) => match b.clone().with_row_predicate(p).build() {
                // a filter cuparquet's types refuse for this file (e.g. a timestamp stored as
                // a plain integer): DataFusion evaluates it on the batches read
                Err(cuparquet::Error::Filter { .. }) => {
                    let _ = self.host_filter.set((expr.clone(), nullable(&schema)));
                    let extra: Vec<String> = collect_columns(&expr)
                        .iter()
                        .map(|c| c.name().to_string())
                        .filter(|c| !present.contains(c) && has(c))
                        .collect();
                    present.extend(extra);
                    b.with_columns(present.iter().map(|c| quoted(c))).build()
                }
                other => other,
            },
        }
        .map_err(|e| external(&self.name, e))?;
        // the row groups the reader's bloom filters ruled out (of those DataFusion's pruning
        // kept), reported as DataFusion's own scan reports its bloom-filter pruning
        if let Some(f) = reader.files().first() {
            let bloom = (f.plan().pruned.iter())
                .filter(|p| p.reason.contains("bloom filter"))
                .count();
            let kept = f.plan().row_groups.len();
            self.metrics
                .parquet
                .row_groups_pruned_bloom_filter
                .add_pruned(bloom);
            self.metrics
                .parquet
                .row_groups_pruned_bloom_filter
                .add_matched(kept);
        }
        Ok(Opened::Scan(reader))
    }

    /// Rows per batch asked of the reader: the option, else
    /// [`HOST_BATCH_ROWS`](crate::HOST_BATCH_ROWS) where the scan decodes on the host (`on`:
    /// where the reader resolves its device), else the reader's default.
    fn batch_rows(&self, on: Option<cuparquet::Location>) -> Option<usize> {
        let host = on == Some(cuparquet::Location::Host);
        (self.options.batch_rows).or(host.then_some(crate::options::HOST_BATCH_ROWS))
    }

    /// `expr` (over the table's file schema) over `schema`, this file's: the same where the
    /// file's columns are the table's, else rewritten as DataFusion's own scan does (a missing
    /// column is null, a type cast) and simplified.
    fn for_file(
        &self,
        expr: &Arc<dyn PhysicalExpr>,
        schema: &SchemaRef,
    ) -> Result<Arc<dyn PhysicalExpr>> {
        if Arc::ptr_eq(schema, &self.file_schema) {
            return Ok(Arc::clone(expr));
        }
        let rewritten = DefaultPhysicalExprAdapterFactory
            .create(Arc::clone(&self.file_schema), Arc::clone(schema))?
            .rewrite(Arc::clone(expr))?;
        PhysicalExprSimplifier::new(schema).simplify(rewritten)
    }

    /// The schema pruning sees for this file, and the pruning: the table's, or — where the
    /// file's own columns differ (some missing, other types) — the predicate rewritten for the
    /// file as DataFusion's own scan does (a missing column is null), so that statistics of
    /// one file are never read as another column's.
    ///
    /// A predicate holding a dynamic filter (`dynamic`: a hash join's build side, a TopK's
    /// threshold) prunes by its value as the file is opened — the build side is done by the
    /// time the join asks for its probe side's rows — as DataFusion's own scan prunes by it,
    /// not by its value at planning (`true`).
    fn file_pruning(
        &self,
        md: &cuparquet::parquet::file::metadata::ParquetMetaData,
        dynamic: bool,
    ) -> Result<(SchemaRef, Pruning)> {
        let Some(predicate) = &self.predicate else {
            return Ok((Arc::clone(&self.file_schema), self.pruning.clone()));
        };
        let snapshot;
        let predicate = if dynamic {
            snapshot = snapshot_physical_expr(Arc::clone(predicate))?;
            &snapshot
        } else {
            predicate
        };
        let fm = md.file_metadata();
        let physical = cuparquet::parquet::arrow::parquet_to_arrow_schema(
            fm.schema_descr(),
            fm.key_value_metadata(),
        )
        .map_err(|e| DataFusionError::Execution(format!("{}: {e}", self.name)))?;
        // a string or binary column the table holds as views is the file's own: the reader
        // decodes it as views (`with_string_views`)
        let same = physical.fields().len() == self.file_schema.fields().len()
            && physical
                .fields()
                .iter()
                .zip(self.file_schema.fields())
                .all(|(a, b)| a.name() == b.name() && same_type(a.data_type(), b.data_type()));
        if same {
            let pruning = match dynamic {
                true => Pruning::new(Some(predicate), &self.file_schema, &self.options),
                false => self.pruning.clone(),
            };
            return Ok((Arc::clone(&self.file_schema), pruning));
        }
        let physical = Arc::new(physical);
        let rewritten = DefaultPhysicalExprAdapterFactory
            .create(Arc::clone(&self.file_schema), Arc::clone(&physical))?
            .rewrite(Arc::clone(predicate))?;
        let rewritten = PhysicalExprSimplifier::new(&physical).simplify(rewritten)?;
        let pruning = Pruning::new(Some(&rewritten), &physical, &self.options);
        Ok((physical, pruning))
    }

    /// A batch of `rows` rows of a scan that reads no column of this file: no column, or
    /// only columns the file lacks (all null).
    fn count_batch(&self, rows: usize) -> Result<RecordBatch> {
        let empty = RecordBatch::try_new_with_options(
            Arc::new(Schema::empty()),
            vec![],
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?;
        crate::adapt::to_schema(&empty, &self.output_schema, &self.name)
    }

    /// `b` on the host, in the output schema (the row filter applied by DataFusion where
    /// cuparquet could not apply it to this file).
    pub(crate) fn host_batch(&self, b: LoadedBatch) -> Result<RecordBatch> {
        let t = self.metrics.to_host_time.timer();
        let on_device = b.as_device().is_some();
        let host = b.into_host().map_err(|e| external(&self.name, e))?;
        t.done();
        if on_device {
            self.metrics.bytes_to_host.add(host.get_array_memory_size());
        }
        let host = self.filter_on_host(host)?;
        crate::adapt::to_schema(&host, &self.output_schema, &self.name)
    }

    /// `b` as the scan yields it for GPU operators: where it was decoded, unless DataFusion
    /// has to apply the row filter to it (then on the host).
    pub(crate) fn device_batch(&self, b: LoadedBatch) -> Result<LoadedBatch> {
        if self.host_filter.get().is_none() {
            return Ok(b);
        }
        let host = b.to_host().map_err(|e| external(&self.name, e))?;
        Ok(b.replace_host(self.filter_on_host(host)?))
    }

    /// The rows of `batch` (columns of this file) the row filter keeps, where DataFusion
    /// evaluates it ([`Self::host_filter`]); `batch` itself otherwise.
    fn filter_on_host(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let Some((expr, schema)) = self.host_filter.get() else {
            return Ok(batch);
        };
        let full = crate::adapt::to_schema(&batch, schema, &self.name)?;
        let mask = expr.evaluate(&full)?.into_array(full.num_rows())?;
        let Some(mask) = mask.as_any().downcast_ref::<BooleanArray>() else {
            return exec_err!("{}: the row filter {expr} is not boolean", self.name);
        };
        Ok(filter_record_batch(&batch, mask)?)
    }
}

enum Opened {
    /// Nothing of the file is read.
    Nothing,
    /// Only the number of rows is wanted.
    Rows(usize),
    /// The file's scan.
    Scan(Scan),
}

/// Whether a file's column of type `file` is the table's of type `table`: the same type, or a
/// string or binary type the table holds as views (DataFusion's `schema_force_view_types`),
/// which the reader decodes as such.
fn same_type(file: &DataType, table: &DataType) -> bool {
    file == table || cuparquet::scan::view_type(file).as_ref() == Some(table)
}

/// Whether the table holds some string or binary column as views: the reader then decodes
/// every top-level string and binary column as views, as DataFusion's schema gives them.
fn views_in(schema: &Schema) -> bool {
    (schema.fields().iter())
        .any(|f| matches!(f.data_type(), DataType::Utf8View | DataType::BinaryView))
}

/// `schema` with every field nullable: the batches the host filter is evaluated on hold nulls
/// for the columns not read.
fn nullable(schema: &SchemaRef) -> SchemaRef {
    Arc::new(Schema::new_with_metadata(
        schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect::<Vec<_>>(),
        schema.metadata().clone(),
    ))
}

/// A column name as cuparquet's paths take it: backquoted where it holds a dot.
fn quoted(name: &str) -> String {
    if name.contains('.') {
        format!("`{name}`")
    } else {
        name.to_string()
    }
}

/// A cuparquet error as DataFusion's, naming the file.
pub(crate) fn external(file: &str, e: cuparquet::Error) -> DataFusionError {
    DataFusionError::External(Box::new(ScanError {
        file: file.to_string(),
        source: e,
    }))
}

/// A cuparquet error in a scan of `file`.
#[derive(Debug)]
struct ScanError {
    file: String,
    source: cuparquet::Error,
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cuparquet scan of {}: {}", self.file, self.source)
    }
}

impl std::error::Error for ScanError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuparquet::Device;
    use datafusion::arrow::datatypes::{DataType, Field};

    /// The rows per batch a scan with `options` asks of the reader, where `open` resolves it.
    fn batch_rows(options: GpuScanOptions) -> Option<usize> {
        let j = job(options);
        j.batch_rows(j.options.device.location().ok())
    }

    fn job(options: GpuScanOptions) -> ScanJob {
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
        let opener = GpuParquetOpener::new(
            0,
            schema,
            vec![0],
            ScanFilters {
                predicate: None,
                row_filter: None,
            },
            None,
            options,
            ExecutionPlanMetricsSet::new(),
        );
        opener.job(PartitionedFile::new("a.parquet", 0))
    }

    /// A hash join's dynamic filter prunes the row groups of a file opened after its build
    /// side is done (by the filter's value then, not `true` as at planning), as DataFusion's
    /// own scan prunes by it.
    #[test]
    fn dynamic_filters_prune_by_their_value_at_open() {
        use datafusion::arrow::array::Int64Array;
        use datafusion::logical_expr::Operator;
        use datafusion::physical_expr::expressions::{
            col, lit, BinaryExpr, DynamicFilterPhysicalExpr,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.parquet");
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from_iter_values(0..100_000))],
        )
        .unwrap();
        let props = datafusion::parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(10_000))
            .build();
        let f = std::fs::File::create(&path).unwrap();
        let mut w =
            datafusion::parquet::arrow::ArrowWriter::try_new(f, Arc::clone(&schema), Some(props))
                .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let a = col("a", &schema).unwrap();
        let dynamic = Arc::new(DynamicFilterPhysicalExpr::new(
            vec![Arc::clone(&a)],
            lit(true),
        ));
        let opener = GpuParquetOpener::new(
            0,
            Arc::clone(&schema),
            vec![0],
            ScanFilters {
                predicate: Some(Arc::clone(&dynamic) as Arc<dyn PhysicalExpr>),
                row_filter: None,
            },
            None,
            GpuScanOptions::default().with_device(Device::Host),
            ExecutionPlanMetricsSet::new(),
        );
        let location = object_store::path::Path::from_filesystem_path(&path).unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        let rows_read = || {
            let job = opener.job(PartitionedFile::new(location.to_string(), size));
            let mut rows = 0;
            job.run(&mut |item| {
                match item.unwrap() {
                    Scanned::Batch(b) => rows += b.num_rows(),
                    Scanned::Rows(n) => rows += n,
                }
                true
            });
            rows
        };
        // at planning: every row group
        assert_eq!(rows_read(), 100_000);
        // the build side done: a >= 95,000 AND a < 96,000, one row group
        let bounds = Arc::new(BinaryExpr::new(
            Arc::new(BinaryExpr::new(
                Arc::clone(&a),
                Operator::GtEq,
                lit(95_000i64),
            )),
            Operator::And,
            Arc::new(BinaryExpr::new(a, Operator::Lt, lit(96_000i64))),
        ));
        dynamic.update(bounds).unwrap();
        assert_eq!(rows_read(), 10_000);
    }

    #[test]
    fn host_scans_decode_smaller_batches_unless_asked() {
        let host = GpuScanOptions::default().with_device(Device::Host);
        assert_eq!(batch_rows(host.clone()), Some(crate::HOST_BATCH_ROWS));
        assert_eq!(batch_rows(host.with_batch_rows(5000)), Some(5000));
        // a device scan keeps the reader's default (2^20) unless asked
        let gpu = GpuScanOptions::default().with_device(Device::Cuda(0));
        assert_eq!(batch_rows(gpu.clone()), None);
        assert_eq!(batch_rows(gpu.with_batch_rows(7)), Some(7));
        // Auto: the host's where there is no GPU
        let auto = batch_rows(GpuScanOptions::default());
        match cuparquet::cuda_devices() {
            Ok(_) => assert_eq!(auto, None),
            Err(_) => assert_eq!(auto, Some(crate::HOST_BATCH_ROWS)),
        }
    }
}
