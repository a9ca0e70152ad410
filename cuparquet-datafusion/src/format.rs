//! The file format: schemas and statistics from the footers, scans by cuparquet.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::{internal_datafusion_err, not_impl_err, GetExt, Statistics};
use datafusion::datasource::file_format::file_compression_type::FileCompressionType;
use datafusion::datasource::file_format::{FileFormat, FileFormatFactory};
use datafusion::datasource::physical_plan::{
    FileScanConfig, FileScanConfigBuilder, FileSinkConfig, FileSource,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::table_schema::TableSchema;
use datafusion::error::DataFusionError;
use datafusion::error::Result;
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_expr::LexRequirement;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_datasource_parquet::metadata::DFParquetMetadata;
use datafusion_datasource_parquet::ParquetFormat;
use object_store::{ObjectMeta, ObjectStore};

use crate::opener::CachedFooter;
use crate::options::GpuScanOptions;
use crate::source::GpuParquetSource;

/// The name `CREATE EXTERNAL TABLE … STORED AS` knows the format by.
pub const FORMAT_NAME: &str = "gpuparquet";

/// Parquet files scanned by cuparquet. Schemas and statistics are read from the footers by
/// DataFusion's own Parquet format — string and binary columns as views (`Utf8View`,
/// `BinaryView`) where the session's `datafusion.execution.parquet.schema_force_view_types`
/// says so (DataFusion's default), which cuparquet's batches then hold too
/// (`ScanBuilder::with_string_views`); scans go through [`GpuParquetSource`].
#[derive(Debug)]
pub struct GpuParquetFormat {
    options: GpuScanOptions,
    footers: ParquetFormat,
}

impl Default for GpuParquetFormat {
    fn default() -> Self {
        Self::new(GpuScanOptions::default())
    }
}

impl GpuParquetFormat {
    /// The format with these scan options.
    pub fn new(options: GpuScanOptions) -> Self {
        GpuParquetFormat {
            options,
            footers: footers(false),
        }
    }

    /// The scan options.
    pub fn options(&self) -> &GpuScanOptions {
        &self.options
    }
}

#[async_trait]
impl FileFormat for GpuParquetFormat {
    fn get_ext(&self) -> String {
        "parquet".into()
    }

    fn get_ext_with_compression(&self, c: &FileCompressionType) -> Result<String> {
        if c.is_compressed() {
            return not_impl_err!(
                "cuparquet reads Parquet files, not files compressed as a whole ({c:?})"
            );
        }
        Ok(self.get_ext())
    }

    /// Uncompressed as a whole (pages carry their own codecs): a directory given to
    /// `CREATE EXTERNAL TABLE` is read as its `*.parquet` files.
    fn compression_type(&self) -> Option<FileCompressionType> {
        Some(FileCompressionType::UNCOMPRESSED)
    }

    /// DataFusion's schema of the files, each footer's counts checked as a scan checks them
    /// ([`cuparquet::metadata::check_claims`]); an error names the file.
    async fn infer_schema(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        objects: &[ObjectMeta],
    ) -> Result<SchemaRef> {
        let footers = footers_for(state);
        let schema = match footers.infer_schema(state, store, objects).await {
            Ok(s) => s,
            Err(e) => {
                // which file: asked one at a time (only on this path)
                for object in objects {
                    if let Err(e) = footers
                        .infer_schema(state, store, std::slice::from_ref(object))
                        .await
                    {
                        return Err(unreadable(store, object, e));
                    }
                }
                return Err(e);
            }
        };
        for object in objects {
            checked_footer(state, store, object).await?;
        }
        Ok(schema)
    }

    /// DataFusion's statistics of the file, from its footer checked as a scan checks it; an
    /// error names the file.
    async fn infer_stats(
        &self,
        state: &dyn Session,
        store: &Arc<dyn ObjectStore>,
        table_schema: SchemaRef,
        object: &ObjectMeta,
    ) -> Result<Statistics> {
        let md = checked_footer(state, store, object).await?;
        DFParquetMetadata::statistics_from_parquet_metadata(&md, &table_schema)
            .map_err(|e| named(store, object, e))
    }

    async fn create_physical_plan(
        &self,
        state: &dyn Session,
        conf: FileScanConfig,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let source = conf
            .file_source()
            .downcast_ref::<GpuParquetSource>()
            .cloned()
            .ok_or_else(|| internal_datafusion_err!("expected a GpuParquetSource"))?
            .with_options(self.options.clone())
            .with_footers(Some(
                state.runtime_env().cache_manager.get_file_metadata_cache(),
            ))
            .with_parquet_options(state.table_options().parquet.clone());
        let conf = FileScanConfigBuilder::from(conf)
            .with_source(Arc::new(source))
            .build();
        Ok(DataSourceExec::from_data_source(conf))
    }

    /// Writing is DataFusion's own Parquet writer.
    async fn create_writer_physical_plan(
        &self,
        input: Arc<dyn ExecutionPlan>,
        state: &dyn Session,
        conf: FileSinkConfig,
        order_requirements: Option<LexRequirement>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.footers
            .create_writer_physical_plan(input, state, conf, order_requirements)
            .await
    }

    fn file_source(&self, table_schema: TableSchema) -> Arc<dyn FileSource> {
        Arc::new(GpuParquetSource::new(table_schema, self.options.clone()))
    }
}

/// Makes [`GpuParquetFormat`]s for `CREATE EXTERNAL TABLE … STORED AS GPUPARQUET`, each
/// with these options and the statement's `OPTIONS` over them.
#[derive(Debug, Clone, Default)]
pub struct GpuParquetFormatFactory {
    /// The options each table starts from.
    pub options: GpuScanOptions,
}

impl FileFormatFactory for GpuParquetFormatFactory {
    fn create(
        &self,
        _state: &dyn Session,
        format_options: &HashMap<String, String>,
    ) -> Result<Arc<dyn FileFormat>> {
        let mut options = self.options.clone();
        let mut keys: Vec<_> = format_options.iter().collect();
        keys.sort();
        for (k, v) in keys {
            options.set(k, v)?;
        }
        options.check_devices()?;
        Ok(Arc::new(GpuParquetFormat::new(options)))
    }

    fn default(&self) -> Arc<dyn FileFormat> {
        Arc::new(GpuParquetFormat::new(self.options.clone()))
    }
}

impl GetExt for GpuParquetFormatFactory {
    fn get_ext(&self) -> String {
        FORMAT_NAME.into()
    }
}

/// The name errors give `object` of `store`: its path for a local file, else its location
/// and the store.
pub(crate) fn object_name(store: &Arc<dyn ObjectStore>, object: &ObjectMeta) -> String {
    let store = store.to_string();
    if store.starts_with("LocalFileSystem") {
        format!("/{}", object.location)
    } else {
        format!("{} in {store}", object.location)
    }
}

/// `e`, an error reading `object`, naming it.
fn named(store: &Arc<dyn ObjectStore>, object: &ObjectMeta, e: DataFusionError) -> DataFusionError {
    e.context(object_name(store, object))
}

/// `e`, DataFusion's error reading `object`'s footer, naming it; for a local file cuparquet's
/// own reading of the footer says what is wrong where it can (a truncated file, where the
/// footer should be) instead of the parquet crate's words.
fn unreadable(
    store: &Arc<dyn ObjectStore>,
    object: &ObjectMeta,
    e: DataFusionError,
) -> DataFusionError {
    let name = object_name(store, object);
    if name.starts_with('/') {
        if let Err(ours) = cuparquet::scan::read_footer(&name, false) {
            return DataFusionError::External(Box::new(ours));
        }
    }
    e.context(name)
}

/// `object`'s footer, from the session's file metadata cache (cuparquet's footer where a scan
/// put it there, else DataFusion's, read and cached as its own scan does), its counts checked
/// ([`cuparquet::metadata::check_claims`]) before DataFusion sizes statistics by them (once
/// per file: the table keeps the statistics in the session's cache, [`crate::register_gpu_parquet`]).
async fn checked_footer(
    state: &dyn Session,
    store: &Arc<dyn ObjectStore>,
    object: &ObjectMeta,
) -> Result<Arc<ParquetMetaData>> {
    let cache = state.runtime_env().cache_manager.get_file_metadata_cache();
    if let Some(e) = cache.get(&object.location) {
        if let Some(f) = e.file_metadata.as_any().downcast_ref::<CachedFooter>() {
            if e.is_valid_for(object) {
                // (checked when it was read)
                return Ok(Arc::clone(&f.0.metadata));
            }
        }
    }
    let md = DFParquetMetadata::new(store.as_ref(), object)
        .with_file_metadata_cache(Some(cache))
        .fetch_metadata()
        .await
        .map_err(|e| unreadable(store, object, e))?;
    let name = object_name(store, object);
    cuparquet::metadata::check_claims(std::path::Path::new(&name), &md)
        .map_err(|e| DataFusionError::External(Box::new(e)))?;
    Ok(md)
}

/// DataFusion's Parquet format reading the footers for `state`: strings as views where its
/// `schema_force_view_types` says so.
fn footers_for(state: &dyn Session) -> ParquetFormat {
    footers(
        state
            .config_options()
            .execution
            .parquet
            .schema_force_view_types,
    )
}

/// DataFusion's Parquet format for reading footers: binary columns as binary, strings as
/// views with `views`.
fn footers(views: bool) -> ParquetFormat {
    ParquetFormat::new()
        .with_force_view_types(views)
        .with_binary_as_string(false)
}
