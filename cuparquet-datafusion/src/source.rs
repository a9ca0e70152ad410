//! The scan's `FileSource`: projection, pushed filters, `EXPLAIN`, metrics.

use std::fmt;
use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{exec_err, Result};
use datafusion::config::TableParquetOptions;
use datafusion::datasource::physical_plan::{
    FileGroupPartitioner, FileOpener, FileScanConfig, FileSource,
};
use datafusion::datasource::projection::{ProjectionOpener, SplitProjection};
use datafusion::datasource::table_schema::TableSchema;
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::physical_expr::conjunction;
use datafusion::physical_expr::projection::ProjectionExprs;
use datafusion::physical_plan::filter_pushdown::{FilterPushdownPropagation, PushedDown};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use datafusion::physical_plan::{apply_expression_roots, DisplayFormatType, PhysicalExpr};
use datafusion_datasource::morsel::Morselizer;
use datafusion_datasource_parquet::source::ParquetSource;
use datafusion_datasource_parquet::CachedParquetFileReaderFactory;
use object_store::ObjectStore;

use crate::opener::{GpuParquetOpener, Remote};
use crate::options::GpuScanOptions;

/// cuparquet's scan inside DataFusion's `DataSourceExec`. It takes the columns DataFusion
/// projects (expressions over them are evaluated on the batches read) and the filters it
/// pushes down. Every filter prunes row groups and pages; those cuparquet can evaluate exactly
/// as DataFusion does (comparisons, `IN`, `IS NULL`, `AND`,
/// `OR`, `NOT` over integer, boolean, string, date, timestamp and decimal columns) are applied
/// to the rows, on the GPU for device scans, and are `Exact`; the others stay `Inexact` and
/// DataFusion keeps its `FilterExec` for them.
///
/// Where the scan decodes on the host (no GPU, or `device` = `host`), it is DataFusion's own
/// Parquet scan that reads and decodes, with the scan's projection, pruning, options, metrics
/// and `EXPLAIN` line: a host scan is as fast as the scan it replaces, and filters stay with
/// DataFusion's `FilterExec` there, as they do over its own scan.
#[derive(Clone)]
pub struct GpuParquetSource {
    table_schema: TableSchema,
    projection: SplitProjection,
    predicate: Option<Arc<dyn PhysicalExpr>>,
    /// The pushed filters applied to the rows (each also in `predicate`).
    row_filters: Vec<Arc<dyn PhysicalExpr>>,
    /// Filters cuparquet evaluates exactly, pushed where the plan's scan decodes on the host
    /// (a coordinator without a GPU): DataFusion's `FilterExec` stays over them, and a scan
    /// that decodes on a GPU after all (a worker with one) applies them to the rows too, so
    /// that fewer rows come back ([`Self::gpu_filters`]).
    gpu_filters: Vec<Arc<dyn PhysicalExpr>>,
    options: GpuScanOptions,
    batch_size: Option<usize>,
    /// DataFusion's own Parquet scan of the table, unconfigured: the host scan is built from
    /// it ([`Self::host_source`]), and its metrics are this scan's (`EXPLAIN ANALYZE` reads one
    /// set, which both fill).
    host: ParquetSource,
    /// The session's file metadata cache, where footers read are kept ([`Self::with_footers`]).
    footers: Option<Arc<FileMetadataCache>>,
    /// DataFusion's Parquet options of the session ([`Self::with_parquet_options`]), for the
    /// host scan ([`Self::host_source`]).
    parquet_options: TableParquetOptions,
}

impl fmt::Debug for GpuParquetSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuParquetSource")
            .field("file_columns", &self.projection.file_indices)
            .field("predicate", &self.predicate.as_ref().map(|p| p.to_string()))
            .field("row_filter", &self.row_filter().map(|p| p.to_string()))
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl GpuParquetSource {
    /// A scan of every column of `table_schema`, with no filter.
    pub fn new(table_schema: impl Into<TableSchema>, options: GpuScanOptions) -> Self {
        let table_schema = table_schema.into();
        GpuParquetSource {
            projection: SplitProjection::unprojected(&table_schema),
            host: ParquetSource::new(table_schema.clone()),
            table_schema,
            predicate: None,
            row_filters: Vec::new(),
            gpu_filters: Vec::new(),
            options,
            batch_size: None,
            footers: None,
            parquet_options: TableParquetOptions::default(),
        }
    }

    /// The same scan, with the session's Parquet options (`datafusion.execution.parquet.*`)
    /// for where it decodes on the host, by DataFusion's own reader: its metadata size hint,
    /// bloom filters, filter pushdown and the rest, as DataFusion's own scan would read
    /// ([`GpuScanOptions`]'s `page_index` and `pruning` over them).
    pub fn with_parquet_options(mut self, options: TableParquetOptions) -> Self {
        self.parquet_options = options;
        self
    }

    /// Whether `partition` decodes on the host: `device` = `host`, or `auto` where no GPU can
    /// be used.
    pub fn decodes_on_host(&self, partition: usize) -> bool {
        match self.options.device_of_partition(partition) {
            cuparquet::Device::Host => true,
            d @ cuparquet::Device::Auto => {
                d.location().is_ok_and(|l| l == cuparquet::Location::Host)
            }
            _ => false,
        }
    }

    /// Whether some partition of `scan` (a plan over this source) decodes on the host.
    pub(crate) fn decodes_on_host_anywhere(
        &self,
        scan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    ) -> bool {
        use datafusion::physical_plan::ExecutionPlanProperties;
        let n = scan.output_partitioning().partition_count();
        (0..n.max(1)).any(|p| self.decodes_on_host(p))
    }

    /// Whether every partition decodes on the host ([`Self::decodes_on_host`]).
    fn decodes_on_host_everywhere(&self) -> bool {
        self.options.devices.is_empty() && self.decodes_on_host(0)
    }

    /// DataFusion's own Parquet scan of the same files with this scan's projection, pruning
    /// predicate, options and metrics: what reads them where the scan decodes on the host. The
    /// filters taken as `Exact` ([`Self::row_filters`]) are applied to the rows by its row
    /// filter (`pushdown_filters`), and prune.
    fn host_source(&self, store: Arc<dyn ObjectStore>) -> Result<ParquetSource> {
        let mut options = self.parquet_options.clone();
        options.global.pruning = self.options.pruning;
        options.global.enable_page_index = self.options.page_index;
        if !self.row_filters.is_empty() {
            options.global.pushdown_filters = true;
        }
        // built from `host`, whose metrics every clone shares
        let mut source = (self.host.clone()).with_table_parquet_options(options);
        if let Some(cache) = &self.footers {
            source = source.with_parquet_file_reader_factory(Arc::new(
                CachedParquetFileReaderFactory::new(store, Arc::clone(cache)),
            ));
        }
        // the Exact filters where there are some: its row filter applies every conjunct of
        // its predicate, and the scan's rows are those they keep (the other filters stay in
        // DataFusion's FilterExec above); else the predicate, for pruning
        let predicate = match self.row_filters.is_empty() {
            true => self.predicate.clone(),
            false => Some(conjunction(self.row_filters.clone())),
        };
        if let Some(p) = predicate {
            source = source.with_predicate(p);
        }
        // its projection is every column: this scan's merged over it
        let projected = source
            .try_pushdown_projection(&self.projection.source)?
            .ok_or_else(|| datafusion::common::internal_datafusion_err!("no projection"))?;
        let batch_size = (self.options.batch_rows)
            .or(self.batch_size)
            .unwrap_or(crate::options::HOST_BATCH_ROWS);
        let sized = projected.with_batch_size(batch_size);
        sized
            .downcast_ref::<ParquetSource>()
            .cloned()
            .ok_or_else(|| datafusion::common::internal_datafusion_err!("not a ParquetSource"))
    }

    /// The same scan, keeping the footers it reads in `cache` (the session's file metadata
    /// cache, where DataFusion's own Parquet scan keeps its footers) and reading a file's
    /// footer from there while the file's size and modification time are those cached.
    pub fn with_footers(mut self, cache: Option<Arc<FileMetadataCache>>) -> Self {
        self.footers = cache;
        self
    }

    /// The same scan with these options.
    pub fn with_options(mut self, options: GpuScanOptions) -> Self {
        self.options = options;
        self
    }

    /// The same scan, pruning by `predicate` (over the table schema) too.
    pub fn with_predicate(mut self, predicate: Arc<dyn PhysicalExpr>) -> Self {
        self.predicate = Some(match self.predicate.take() {
            Some(p) => conjunction([p, predicate]),
            None => predicate,
        });
        self
    }

    /// The pushed filters the scan applies to the rows, as one conjunction (`Exact` filters).
    pub fn row_filter(&self) -> Option<Arc<dyn PhysicalExpr>> {
        (!self.row_filters.is_empty()).then(|| conjunction(self.row_filters.clone()))
    }

    /// The filters `partition` applies to the rows: the `Exact` ones, and where it decodes on
    /// a GPU the [`gpu_filters`](Self::gpu_filters).
    fn row_filter_of(&self, partition: usize) -> Option<Arc<dyn PhysicalExpr>> {
        if self.gpu_filters.is_empty() || self.decodes_on_host(partition) {
            return self.row_filter();
        }
        Some(conjunction(
            self.row_filters.iter().chain(&self.gpu_filters).cloned(),
        ))
    }

    /// The pushed filters the scan applies to the rows, each as it was pushed.
    pub fn row_filters(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.row_filters
    }

    /// The same scan, applying `filters` (over the table schema) to the rows: filters that
    /// [`try_pushdown_filters`](FileSource::try_pushdown_filters) accepted as `Exact` in the
    /// scan this one is rebuilt from (a plan decoded in another process). Each must also be in
    /// the predicate ([`with_predicate`](Self::with_predicate)) to prune.
    pub fn with_row_filters(mut self, filters: Vec<Arc<dyn PhysicalExpr>>) -> Self {
        self.row_filters = filters;
        self
    }

    /// Filters applied to the rows only where the scan decodes on a GPU, DataFusion's
    /// `FilterExec` kept over them: those the scan would have taken as `Exact` had it been
    /// planned where a GPU is.
    pub fn gpu_filters(&self) -> &[Arc<dyn PhysicalExpr>] {
        &self.gpu_filters
    }

    /// The same scan, applying `filters` (over the table schema) to the rows where it decodes
    /// on a GPU ([`Self::gpu_filters`]; a plan decoded in another process).
    pub fn with_gpu_filters(mut self, filters: Vec<Arc<dyn PhysicalExpr>>) -> Self {
        self.gpu_filters = filters;
        self
    }

    /// The scan options.
    pub fn options(&self) -> &GpuScanOptions {
        &self.options
    }

    /// The indices (into the file schema) of the columns read.
    pub fn file_columns(&self) -> &[usize] {
        &self.projection.file_indices
    }

    /// The opener of one partition's files, yielding batches of the file columns read
    /// ([`file_columns`](Self::file_columns)), on the host or (through
    /// [`device_batches`](crate::device_batches)) where they were decoded.
    pub(crate) fn opener(
        &self,
        base_config: &FileScanConfig,
        partition: usize,
        store: Option<Arc<dyn ObjectStore>>,
    ) -> Result<GpuParquetOpener> {
        let url = base_config.object_store_url.as_str();
        let remote = match (url.starts_with("file://"), store) {
            (true, _) => None,
            (false, Some(store)) if cfg!(feature = "object-store") => Some(Remote {
                url: url.to_string(),
                store,
            }),
            (false, _) => {
                return exec_err!(
                    "this table is on {url}: cuparquet-datafusion reads object stores when \
                     built with its `object-store` feature"
                )
            }
        };
        Ok(GpuParquetOpener::new(
            partition,
            self.table_schema.file_schema().clone(),
            self.projection.file_indices.clone(),
            crate::opener::ScanFilters {
                predicate: self.predicate.clone(),
                row_filter: self.row_filter_of(partition),
            },
            base_config.limit,
            self.options.clone(),
            self.host.metrics().clone(),
        )
        .with_remote(remote)
        .with_footers(self.footers.clone()))
    }
}

impl FileSource for GpuParquetSource {
    /// DataFusion's own Parquet reader where this partition decodes on the host — no GPU, or
    /// one not expected to win ([`GpuScanOptions::host_when_faster`]) — with the filters taken
    /// as exact (on a GPU: [`Self::try_pushdown_filters`]) as its row filters; cuparquet's
    /// opener otherwise.
    fn create_morselizer(
        &self,
        object_store: Arc<dyn ObjectStore>,
        base_config: &FileScanConfig,
        partition: usize,
    ) -> Result<Box<dyn Morselizer>> {
        let on_host = self.decodes_on_host(partition);
        let placed = !on_host && self.options.host_when_faster && {
            // the filters a GPU applies to the rows: the Exact ones and the GPU filters
            let on_gpu: Vec<Arc<dyn PhysicalExpr>> = self
                .row_filters
                .iter()
                .chain(&self.gpu_filters)
                .cloned()
                .collect();
            let columns = self.projection.file_indices.len();
            crate::placement::host_reason(base_config, columns, &on_gpu).is_some()
        };
        if placed {
            // EXPLAIN ANALYZE: the partitions the scan placed on the host
            datafusion::physical_plan::metrics::MetricBuilder::new(self.host.metrics())
                .counter("cuparquet_placed_on_host", partition)
                .add(1);
        }
        if placed || on_host {
            let inner = self
                .host_source(Arc::clone(&object_store))?
                .create_morselizer(Arc::clone(&object_store), base_config, partition)?;
            return Ok(Box::new(crate::morsel::NamingMorsels {
                inner,
                store: object_store,
            }));
        }
        let opener = self.create_file_opener(object_store, base_config, partition)?;
        Ok(Box::new(crate::morsel::OpenerMorsels(opener)))
    }

    fn create_file_opener(
        &self,
        object_store: Arc<dyn ObjectStore>,
        base_config: &FileScanConfig,
        partition: usize,
    ) -> Result<Arc<dyn FileOpener>> {
        let inner: Arc<dyn FileOpener> =
            Arc::new(self.opener(base_config, partition, Some(object_store))?);
        ProjectionOpener::try_new(
            self.projection.clone(),
            inner,
            self.table_schema.file_schema(),
        )
    }

    fn table_schema(&self) -> &TableSchema {
        &self.table_schema
    }

    fn with_batch_size(&self, batch_size: usize) -> Arc<dyn FileSource> {
        let mut s = self.clone();
        s.batch_size = Some(batch_size);
        Arc::new(s)
    }

    fn filter(&self) -> Option<Arc<dyn PhysicalExpr>> {
        self.predicate.clone()
    }

    fn projection(&self) -> Option<&ProjectionExprs> {
        Some(&self.projection.source)
    }

    fn try_pushdown_projection(
        &self,
        projection: &ProjectionExprs,
    ) -> Result<Option<Arc<dyn FileSource>>> {
        let mut s = self.clone();
        let merged = self.projection.source.try_merge(projection)?;
        s.projection = SplitProjection::new(self.table_schema.file_schema(), &merged);
        Ok(Some(Arc::new(s)))
    }

    fn metrics(&self) -> &ExecutionPlanMetricsSet {
        self.host.metrics()
    }

    /// Files are cut into byte ranges only where the table has fewer files than partitions:
    /// then each range is a load of its own (the row groups whose middle lies in it, as
    /// DataFusion's own scan assigns them), so a one-file table uses every partition. With as
    /// many files as partitions or more, files are spread over the partitions whole: each file
    /// one load, its row groups pipelined on the device; on the H200
    /// (benches/history/2026-12-01.md, late night) whole files beat byte ranges there in
    /// every query (Q1 402 ms against 566, Q6 74 against 83; 24M lineitem rows in 8 files, 16
    /// partitions).
    fn repartitioned(
        &self,
        target_partitions: usize,
        repartition_file_min_size: usize,
        output_ordering: Option<datafusion::physical_expr::LexOrdering>,
        config: &FileScanConfig,
    ) -> Result<Option<FileScanConfig>> {
        let files: usize = config.file_groups.iter().map(|g| g.len()).sum();
        if files >= target_partitions || config.file_compression_type.is_compressed() {
            return Ok(None);
        }
        let groups = FileGroupPartitioner::new()
            .with_target_partitions(target_partitions)
            .with_repartition_file_min_size(repartition_file_min_size)
            .with_preserve_order_within_groups(output_ordering.is_some())
            .repartition_file_groups(&config.file_groups);
        Ok(groups.map(|file_groups| {
            let mut c = config.clone();
            c.file_groups = file_groups;
            c
        }))
    }

    fn file_type(&self) -> &str {
        "gpuparquet"
    }

    fn fmt_extra(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                match self.options.devices.as_slice() {
                    [] => write!(f, ", device={}", self.options.device)?,
                    d => write!(f, ", devices={}", crate::options::device_list(d))?,
                }
                if let Some(p) = &self.predicate {
                    write!(f, ", predicate={p}")?;
                    if let Some(pp) =
                        crate::prune::pruning_predicate(p, self.table_schema.file_schema())
                    {
                        write!(f, ", pruning_predicate={}", pp.predicate_expr())?;
                    }
                }
                if let Some(r) = self.row_filter() {
                    write!(f, ", row_filter={r}")?;
                }
                if !self.gpu_filters.is_empty() {
                    let g = conjunction(self.gpu_filters.clone());
                    write!(f, ", row_filter_on_gpu={g}")?;
                }
                if self.options.page_index {
                    write!(f, ", page_index=true")?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                match self.options.devices.as_slice() {
                    [] => writeln!(f, "device={}", self.options.device)?,
                    d => writeln!(f, "devices={}", crate::options::device_list(d))?,
                }
                if let Some(p) = &self.predicate {
                    writeln!(f, "predicate={p}")?;
                }
                if let Some(r) = self.row_filter() {
                    writeln!(f, "row_filter={r}")?;
                }
                if !self.gpu_filters.is_empty() {
                    let g = conjunction(self.gpu_filters.clone());
                    writeln!(f, "row_filter_on_gpu={g}")?;
                }
                Ok(())
            }
        }
    }

    /// Every filter prunes row groups and pages. Those cuparquet evaluates exactly as
    /// DataFusion does are also applied to the rows (`PushedDown::Yes`: DataFusion drops its
    /// `FilterExec` for them) where the scan decodes on a GPU; the others stay with DataFusion
    /// (`PushedDown::No`). Where the scan is planned to decode on the host, every filter stays
    /// with DataFusion, those cuparquet evaluates kept as [`gpu_filters`](Self::gpu_filters)
    /// for a worker that has a GPU.
    fn try_pushdown_filters(
        &self,
        filters: Vec<Arc<dyn PhysicalExpr>>,
        _config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn FileSource>>> {
        if filters.is_empty() || !(self.options.pruning || self.options.row_filter) {
            return Ok(FilterPushdownPropagation::with_parent_pushdown_result(
                vec![PushedDown::No; filters.len()],
            ));
        }
        let mut s = self.clone();
        // DataFusion's own reader decodes a host scan, and its `FilterExec` filters the rows
        // as over its own scan
        let exact_here = !self.decodes_on_host_everywhere();
        let table = self.table_schema.table_schema();
        let file_columns = self.table_schema.file_schema().fields().len();
        let pushed: Vec<PushedDown> = filters
            .iter()
            .map(|f| {
                let evaluable = self.options.row_filter
                    && crate::row_filter::row_filter(f, table, file_columns).is_some();
                match (evaluable, exact_here) {
                    (true, true) => {
                        s.row_filters.push(Arc::clone(f));
                        PushedDown::Yes
                    }
                    (true, false) => {
                        s.gpu_filters.push(Arc::clone(f));
                        PushedDown::No
                    }
                    (false, _) => PushedDown::No,
                }
            })
            .collect();
        if self.options.pruning {
            s = s.with_predicate(conjunction(filters));
        }
        Ok(
            FilterPushdownPropagation::with_parent_pushdown_result(pushed)
                .with_updated_node(Arc::new(s) as Arc<dyn FileSource>),
        )
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        apply_expression_roots(
            self.predicate
                .iter()
                .chain(&self.row_filters)
                .chain(&self.gpu_filters)
                .chain(self.projection.source.iter().map(|p| &p.expr)),
            f,
        )
    }
}
