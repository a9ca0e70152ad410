//! # cuparquet-datafusion
//!
//! SQL over Parquet decoded on the GPU: a DataFusion file format whose scan is cuparquet's
//! reader. Where there is no GPU the same scan decodes with arrow-rs on the host, so a query
//! runs everywhere.
//!
//! ```text
//!  SQL ─▶ DataFusion planner ─▶ DataSourceExec(FileScanConfig) ─▶ GpuParquetSource ─▶ GpuParquetOpener
//!                                 files and row groups split        projection, the      per file: prune row groups and
//!                                 over target_partitions            pushed filters       pages (DataFusion's PruningPredicate),
//!                                                                                        then cuparquet's stream of batches
//! ```
//!
//! It is built the way DataFusion's own Parquet scan is:
//!
//! * [`GpuParquetFormat`] is a [`FileFormat`](datafusion::datasource::file_format::FileFormat):
//!   `ListingTable`, directories and `CREATE EXTERNAL TABLE … STORED AS GPUPARQUET` (after
//!   [`register_gpu_parquet_format`]) use it. Schemas and statistics come from the footers,
//!   as DataFusion's own format reads them: string and binary columns as views where the
//!   session's `schema_force_view_types` says so (DataFusion's default), and the reader
//!   decodes them as views.
//! * [`GpuParquetSource`] is its [`FileSource`](datafusion::datasource::physical_plan::FileSource):
//!   it takes the projection and the filters DataFusion pushes down, and prints them in
//!   `EXPLAIN`.
//! * [`GpuParquetOpener`] opens one file of a partition: it prunes row groups by their
//!   statistics and pages by the page index with DataFusion's `PruningPredicate`, keeps only
//!   the row groups of the partition's byte range (a table of fewer files than partitions is cut
//!   into byte ranges, one load each, so that a one-file table uses every partition; otherwise
//!   files are read whole: one load each, its row groups pipelined on the device), hands the resulting access plan to
//!   [`cuparquet::Scan`] and streams its batches. The reader's blocking work runs
//!   on a thread of its own, never on the async executor.
//! * [`register_gpu_parquet`] registers a file or a directory as a table in one call.
//!
//! Every pushed filter prunes row groups and pages. Those cuparquet evaluates exactly as
//! DataFusion does (comparisons with literals and of two columns of one type, `IN`,
//! `IS [NOT] NULL`, `LIKE`, `AND`/`OR`/`NOT` over integer, boolean, string, date, timestamp
//! and decimal columns) are applied to the rows by
//! the reader's row filter ([`cuparquet::ScanBuilder::with_row_predicate`]; on the GPU for
//! device scans) and are `Exact`; the others stay `Inexact`, under DataFusion's own
//! `FilterExec` ([`GpuScanOptions::row_filter`]). `LIMIT` without a filter reads only the row groups it
//! needs, and the stream stops once DataFusion has its rows.
//!
//! ## Output
//!
//! Batches are host [`RecordBatch`](datafusion::arrow::record_batch::RecordBatch)es for
//! DataFusion's CPU operators: decoded on the GPU and copied back where a GPU is used, decoded
//! by arrow-rs where there is none. A GPU engine takes them while still on the device with
//! [`device_batches`]: the same scan, files and pruning, yielding
//! [`cuparquet::LoadedBatch`]es.
//!
//! ## Example
//!
//! ```no_run
//! # async fn f() -> datafusion::error::Result<()> {
//! use datafusion::prelude::SessionContext;
//! use cuparquet_datafusion::{register_gpu_parquet, GpuScanOptions};
//!
//! let ctx = SessionContext::new();
//! register_gpu_parquet(&ctx, "lineitem", "data/lineitem/", GpuScanOptions::default()).await?;
//! let df = ctx.sql("SELECT l_returnflag, sum(l_quantity) FROM lineitem GROUP BY 1").await?;
//! df.show().await?;
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod adapt;
mod aggregate;
mod device;
mod format;
mod morsel;
mod opener;
mod options;
pub mod placement;
mod prune;
mod row_filter;
mod source;
/// Not part of the API: TPC-H-like test data for this workspace's tests, examples and
/// benchmarks. Anything in it may change or go at any time.
#[doc(hidden)]
pub mod tpch;

use std::sync::Arc;

use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::datasource::listing_table_factory::ListingTableFactory;
use datafusion::error::Result;
use datafusion::prelude::SessionContext;

pub use aggregate::{DeviceAggregateExec, DeviceAggregation};
pub use device::{device_batches, DeviceBatchStream};
pub use format::{GpuParquetFormat, GpuParquetFormatFactory, FORMAT_NAME};
pub use opener::{CachedFooter, GpuParquetOpener};
pub use options::{GpuScanOptions, HOST_BATCH_ROWS, OPTION_KEYS};
pub use source::GpuParquetSource;

/// Registers the file or directory at `path` (a local path or a `file://` URL; a directory
/// means every `.parquet` file in it) as the table `name`, scanned by cuparquet.
pub async fn register_gpu_parquet(
    ctx: &SessionContext,
    name: &str,
    path: &str,
    options: GpuScanOptions,
) -> Result<()> {
    options.check_devices()?;
    let url = ListingTableUrl::parse(path)?;
    let listing = ListingOptions::new(Arc::new(GpuParquetFormat::new(options)))
        .with_file_extension(".parquet");
    let state = ctx.state();
    let schema = listing.infer_schema(&state, &url).await?;
    let config = ListingTableConfig::new(url)
        .with_listing_options(listing)
        .with_schema(schema);
    // the files' statistics kept in the session's cache, as DataFusion's own
    // `register_parquet` keeps them (else every query's planning reads them again)
    let table = ListingTable::try_new(config)?
        .with_cache(ctx.runtime_env().cache_manager.get_file_statistic_cache());
    ctx.register_table(name, Arc::new(table))?;
    enable_device_aggregation(ctx);
    Ok(())
}

/// Adds the [`DeviceAggregation`] rule to `ctx`'s physical optimizer, once: partial
/// aggregations over cuparquet device scans then run on the GPU (per table, the option
/// `device_aggregation` = false keeps them on the host). [`register_gpu_parquet`] and
/// [`register_gpu_parquet_format`] call it. A distributed session (`cuparquet-distributed`)
/// is left as it is: its workers are shipped scans, not device aggregations.
pub fn enable_device_aggregation(ctx: &SessionContext) {
    let state = ctx.state();
    let names: Vec<&str> = state
        .physical_optimizers()
        .iter()
        .map(|r| r.name())
        .collect();
    if names.contains(&aggregate::RULE_NAME) || names.contains(&"cuparquet_shippable_scans") {
        return;
    }
    let state = datafusion::execution::SessionStateBuilder::new_from_existing(state)
        .with_physical_optimizer_rule(Arc::new(DeviceAggregation))
        .build();
    *ctx.state_ref().write() = state;
}

/// Makes `CREATE EXTERNAL TABLE … STORED AS GPUPARQUET LOCATION '…'` scan with cuparquet.
/// `OPTIONS` take the keys of [`GpuScanOptions::set`] (`'device' 'host'`, `'batch_rows'
/// '65536'`, …). DataFusion's own `STORED AS PARQUET` is left as it is.
pub fn register_gpu_parquet_format(ctx: &SessionContext) -> Result<()> {
    {
        let state = ctx.state_ref();
        let mut state = state.write();
        state.register_file_format(Arc::new(GpuParquetFormatFactory::default()), true)?;
        state.table_factories_mut().insert(
            FORMAT_NAME.to_uppercase(),
            Arc::new(ListingTableFactory::new()),
        );
    }
    enable_device_aggregation(ctx);
    Ok(())
}
