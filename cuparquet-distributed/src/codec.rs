//! Shipping cuparquet's scan to a worker: [`GpuScanCodec`] encodes a `DataSourceExec` whose
//! source is a [`GpuParquetSource`] — its `FileScanConfig` (files, schema, projection, limit,
//! statistics) as DataFusion's own protobuf message, the scan's options, its predicate and the
//! filters it applies to the rows — and rebuilds the same scan on the worker.

use std::sync::Arc;

use cuparquet::Device;
use cuparquet_datafusion::{GpuParquetSource, GpuScanOptions};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{plan_err, DataFusionError, Result};
use datafusion::config::ConfigOptions;
use datafusion::datasource::physical_plan::{FileScanConfig, FileSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::physical_plan::from_proto::{
    parse_protobuf_file_scan_config, parse_table_schema_from_proto,
};
use datafusion_proto::physical_plan::to_proto::serialize_file_scan_config;
use datafusion_proto::physical_plan::{
    DefaultPhysicalProtoConverter, PhysicalExtensionCodec, PhysicalPlanDecodeContext,
    PhysicalProtoConverterExtension,
};
use datafusion_proto::protobuf::{self, proto_error};
use prost::Message;

/// The version of the encoded scan; a worker refuses any other (coordinator and workers must
/// run the same cuparquet-distributed).
const VERSION: u32 = 1;

/// A cuparquet scan as it travels.
#[derive(Clone, PartialEq, prost::Message)]
struct GpuScanProto {
    #[prost(uint32, tag = "1")]
    version: u32,
    /// The `FileScanConfig`: files and their groups, schemas, projection, limit, statistics.
    #[prost(message, optional, tag = "2")]
    conf: Option<protobuf::FileScanExecConf>,
    /// [`GpuScanOptions::to_pairs`].
    #[prost(message, repeated, tag = "3")]
    options: Vec<OptionPair>,
    /// Every pushed filter, for pruning (over the table schema).
    #[prost(message, optional, tag = "4")]
    predicate: Option<protobuf::PhysicalExprNode>,
    /// The pushed filters the scan applies to the rows.
    #[prost(message, repeated, tag = "5")]
    row_filters: Vec<protobuf::PhysicalExprNode>,
    /// Those it applies to the rows where it decodes on a GPU (a coordinator without one
    /// planned it; `FilterExec` above them).
    #[prost(message, repeated, tag = "6")]
    gpu_filters: Vec<protobuf::PhysicalExprNode>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct OptionPair {
    #[prost(string, tag = "1")]
    key: String,
    #[prost(string, tag = "2")]
    value: String,
}

/// A worker's own settings for the scans it runs, whatever the coordinator planned: the device
/// of a scan planned with [`Device::Auto`] (a plan that names a device keeps it), and a memory
/// budget for each file's load (the smaller of the plan's and the worker's where both are
/// set): workers that share a GPU each get their share of it.
#[derive(Debug, Clone, Default)]
pub struct WorkerOptions {
    /// The device for scans planned with `Device::Auto`; `None`: `Auto` on the worker (its
    /// first GPU when it has one, else its CPU).
    pub device: Option<Device>,
    /// A device-memory budget for each file's load on this worker.
    pub memory_budget: Option<u64>,
    /// Object stores this worker reads tables from, by URL (`s3://bucket`): registered in the
    /// worker's sessions as the coordinator registers them in its own, so that every worker
    /// reads the same URLs from the shared store (cuparquet-datafusion's `object-store`
    /// feature reads them).
    pub object_stores: Vec<(url::Url, std::sync::Arc<dyn object_store::ObjectStore>)>,
}

impl WorkerOptions {
    /// The options a scan decoded on this worker runs with.
    pub fn apply(&self, mut o: GpuScanOptions) -> GpuScanOptions {
        if let (Device::Auto, Some(d)) = (o.device, self.device) {
            o.device = d;
        }
        o.memory_budget = match (o.memory_budget, self.memory_budget) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        o
    }
}

/// The `PhysicalExtensionCodec` of cuparquet's scan: register it on the coordinator and on
/// every worker, in the same place of each one's codec list (datafusion-distributed's
/// `with_distributed_user_codec`; [`crate::coordinator_state`] and [`crate::worker`] do).
/// It encodes only `DataSourceExec`s whose source is a [`GpuParquetSource`] and declines
/// every other node, for the codecs after it.
#[derive(Debug, Clone, Default)]
pub struct GpuScanCodec {
    worker: WorkerOptions,
}

impl GpuScanCodec {
    /// The codec of a worker whose scans run with `options`.
    pub fn for_worker(options: WorkerOptions) -> Self {
        GpuScanCodec { worker: options }
    }
}

/// The file scan of `plan` when it is cuparquet's.
pub(crate) fn gpu_scan(
    plan: &Arc<dyn ExecutionPlan>,
) -> Option<(&FileScanConfig, &GpuParquetSource)> {
    let dse = plan.downcast_ref::<DataSourceExec>()?;
    let fsc = dse.data_source().downcast_ref::<FileScanConfig>()?;
    let source = fsc.file_source().downcast_ref::<GpuParquetSource>()?;
    Some((fsc, source))
}

/// The files of a scan, for messages: the first few paths and how many in all.
pub(crate) fn files_of(fsc: &FileScanConfig) -> String {
    let files: Vec<String> = fsc
        .file_groups
        .iter()
        .flat_map(|g| g.files())
        .map(|f| f.object_meta.location.to_string())
        .collect();
    match files.len() {
        0 => "no file".into(),
        n if n <= 3 => files.join(", "),
        n => format!("{}, … ({n} files)", files[..3].join(", ")),
    }
}

impl PhysicalExtensionCodec for GpuScanCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        _inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
        conv: &dyn PhysicalProtoConverterExtension,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let bad = |why: String| {
            DataFusionError::Plan(format!("cuparquet-distributed: a shipped scan {why}"))
        };
        let p = GpuScanProto::decode(buf).map_err(|e| bad(format!("does not decode: {e}")))?;
        if p.version != VERSION {
            return Err(bad(format!(
                "was encoded as version {} and this worker reads version {VERSION}: run the \
                 same cuparquet-distributed on the coordinator and the workers",
                p.version
            )));
        }
        let conf = p.conf.ok_or_else(|| bad("has no file scan".into()))?;
        let table_schema = parse_table_schema_from_proto(&conf)?;
        let mut options = GpuScanOptions::default();
        for OptionPair { key, value } in &p.options {
            options.set(key, value)?;
        }
        let options = self.worker.apply(options);
        let schema = Arc::clone(table_schema.table_schema());
        let dctx = PhysicalPlanDecodeContext::new(ctx, self);
        let mut source = GpuParquetSource::new(table_schema, options);
        // each expression types over the schema (its operands' types agree): DataFusion's
        // pruning panics on one that does not (found by the codec fuzz target)
        let typed = |e: Arc<dyn datafusion::physical_expr::PhysicalExpr>| -> Result<Arc<dyn datafusion::physical_expr::PhysicalExpr>> {
            e.data_type(&schema)
                .map_err(|err| bad(format!("has a filter that does not type-check ({e}): {err}")))?;
            Ok(e)
        };
        if let Some(e) = &p.predicate {
            source = source.with_predicate(typed(conv.proto_to_physical_expr(e, &schema, &dctx)?)?);
        }
        let row_filters = (p.row_filters.iter())
            .map(|e| typed(conv.proto_to_physical_expr(e, &schema, &dctx)?))
            .collect::<Result<Vec<_>>>()?;
        let gpu_filters = (p.gpu_filters.iter())
            .map(|e| typed(conv.proto_to_physical_expr(e, &schema, &dctx)?))
            .collect::<Result<Vec<_>>>()?;
        let source = source
            .with_row_filters(row_filters)
            .with_gpu_filters(gpu_filters);
        let fsc = parse_protobuf_file_scan_config(&conf, &dctx, conv, Arc::new(source))?;
        Ok(DataSourceExec::from_data_source(fsc))
    }

    fn try_encode(
        &self,
        node: Arc<dyn ExecutionPlan>,
        buf: &mut Vec<u8>,
        conv: &dyn PhysicalProtoConverterExtension,
    ) -> Result<()> {
        let Some((fsc, source)) = gpu_scan(&node) else {
            return Err(proto_error(format!(
                "{} is not a cuparquet scan (GpuScanCodec encodes only those)",
                node.name()
            )));
        };
        let shipped = |what: &str, e: DataFusionError| {
            DataFusionError::Plan(format!(
                "cuparquet's scan of {} cannot be shipped to a worker: {what}: {e}",
                files_of(fsc)
            ))
        };
        let conf =
            serialize_file_scan_config(fsc, self, conv).map_err(|e| shipped("its files", e))?;
        let predicate = FileSource::filter(source)
            .map(|e| conv.physical_expr_to_proto(&e, self))
            .transpose()
            .map_err(|e| shipped("its predicate", e))?;
        let row_filters = (source.row_filters().iter())
            .map(|e| conv.physical_expr_to_proto(e, self))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| shipped("its row filter", e))?;
        let gpu_filters = (source.gpu_filters().iter())
            .map(|e| conv.physical_expr_to_proto(e, self))
            .collect::<Result<Vec<_>>>()
            .map_err(|e| shipped("its row filter", e))?;
        let options = (source.options().to_pairs().into_iter())
            .map(|(k, v)| OptionPair {
                key: k.to_string(),
                value: v,
            })
            .collect();
        GpuScanProto {
            version: VERSION,
            conf: Some(conf),
            options,
            predicate,
            row_filters,
            gpu_filters,
        }
        .encode(buf)
        .map_err(|e| shipped("encoding", DataFusionError::External(Box::new(e))))
    }
}

/// A physical optimizer rule, last on the coordinator: every cuparquet scan of the plan must
/// encode, or planning fails with the reason. (A plan that cannot be shipped would otherwise
/// fail only when a worker waits for it, with a time-out that hides the cause.)
#[derive(Debug, Default)]
pub(crate) struct ShippableScans {
    codec: GpuScanCodec,
}

impl PhysicalOptimizerRule for ShippableScans {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.apply(|p| {
            if gpu_scan(p).is_some() {
                let mut buf = Vec::new();
                let conv = DefaultPhysicalProtoConverter {};
                if let Err(e) = self.codec.try_encode(Arc::clone(p), &mut buf, &conv) {
                    return plan_err!("{e}");
                }
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        Ok(plan)
    }

    fn name(&self) -> &str {
        "cuparquet_shippable_scans"
    }

    fn schema_check(&self) -> bool {
        true
    }
}
