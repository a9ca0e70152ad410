//! The scan's batches while still on the device, for GPU operators.

use std::pin::Pin;
use std::sync::Arc;

use cuparquet::LoadedBatch;
use datafusion::common::{exec_err, Result};
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::ExecutionPlan;
use futures::{Stream, StreamExt};

use crate::opener::{channel_stream, spawn, Scanned};
use crate::source::GpuParquetSource;

/// A stream of one partition's batches as cuparquet yields them: on the device that decoded
/// them ([`LoadedBatch::as_device`]), or on the host where the scan runs there.
pub type DeviceBatchStream = Pin<Box<dyn Stream<Item = Result<LoadedBatch>> + Send>>;

/// The batches of partition `partition` of `plan` — a `DataSourceExec` over a
/// [`GpuParquetSource`], as a physical plan over a [`GpuParquetFormat`](crate::GpuParquetFormat)
/// table has it — without copying them to the host: the same files, row groups, pruning and
/// columns as `plan.execute(partition, …)`, each batch where it was decoded.
///
/// The batches hold the file columns the scan reads
/// ([`GpuParquetSource::file_columns`]), in the file schema's order: the projection's
/// expressions and partition columns are for the engine to apply. A `LIMIT` pushed into the
/// scan prunes the row groups read, but batches are not cut to it. Pushed filters prune, as in
/// `execute`, and those the scan takes as `Exact` ([`GpuParquetSource::row_filter`]) are
/// applied to the rows (on the device, where a file's filter converts; else on the host, and
/// that batch comes back on the host).
pub fn device_batches(
    plan: &Arc<dyn ExecutionPlan>,
    partition: usize,
) -> Result<DeviceBatchStream> {
    let Some(exec) = plan.downcast_ref::<DataSourceExec>() else {
        return exec_err!("device_batches needs a DataSourceExec, not {}", plan.name());
    };
    let Some((config, source)) = exec.downcast_to_file_source::<GpuParquetSource>() else {
        return exec_err!("device_batches needs a scan of a cuparquet table (GpuParquetSource)");
    };
    if source.file_columns().is_empty() {
        return exec_err!("device_batches needs at least one column to read");
    }
    let Some(group) = config.file_groups.get(partition) else {
        return exec_err!(
            "partition {partition} does not exist: the scan has {}",
            config.file_groups.len()
        );
    };
    // a table on an object store needs the session's store: read it through the scan instead
    let opener = source.opener(config, partition, None)?;
    let files: Vec<_> = group.files().to_vec();
    let stream = futures::stream::iter(files)
        .map(move |file| {
            let job = opener.job(file);
            match spawn(job, |job, s| match s {
                Scanned::Batch(b) => job.device_batch(b),
                Scanned::Rows(_) => exec_err!("a scan with no column has no device batch"),
            }) {
                Ok(rx) => channel_stream(rx).boxed(),
                Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
            }
        })
        .flatten();
    Ok(Box::pin(stream))
}
