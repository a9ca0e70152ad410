//! Partial aggregation on the GPU: a physical optimizer rule ([`DeviceAggregation`]) that
//! replaces DataFusion's `AggregateExec(Partial)` directly over a cuparquet device scan — through
//! projections of columns and double arithmetic — by a [`DeviceAggregateExec`], which aggregates
//! each batch where it was decoded ([`cuparquet::compute`]) and hands DataFusion the partial
//! states its own `Final` step merges. Only the groups cross PCIe.
//!
//! What is pushed: `GROUP BY` columns (integers, dates, timestamps, decimals, booleans, strings,
//! dictionaries); `COUNT(*)`, `COUNT(x)`, `SUM`, `AVG`, `MIN`, `MAX` of columns and of double
//! arithmetic (`+ - * /`, negation, casts to double) over numeric columns; no `DISTINCT`, no
//! `FILTER`, no `ORDER BY` in the aggregate, no grouping sets. Anything else leaves the plan as
//! DataFusion made it, as does a scan that decodes on the host or the option
//! `device_aggregation` = false. `EXPLAIN` shows `DeviceAggregateExec` where the rule applied.

use std::fmt;
use std::sync::{Arc, Mutex};

use cuparquet::compute::{Aggregate, Aggregator, Expr, GroupBy, Groups, IntExpr};
use cuparquet::LoadedBatch;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Decimal128Type, SchemaRef};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{exec_err, DataFusionError, Result, ScalarValue};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, CastExpr, Column, Literal, NegativeExpr};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet, Time,
};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties,
};
use futures::StreamExt;

use datafusion::datasource::physical_plan::FileSource;

use crate::source::GpuParquetSource;

/// The rule: `AggregateExec(Partial)` over a cuparquet device scan → [`DeviceAggregateExec`].
#[derive(Debug, Default)]
pub struct DeviceAggregation;

/// Its name, as sessions list their rules.
pub(crate) const RULE_NAME: &str = "cuparquet_device_aggregation";

impl PhysicalOptimizerRule for DeviceAggregation {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|p| {
            Ok(match rewrite(&p)? {
                Some(new) => Transformed::yes(new),
                None => Transformed::no(p),
            })
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        RULE_NAME
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// How one output state column of the partial aggregation is made from the device's values.
#[derive(Debug, Clone)]
struct StateColumn {
    /// The index of the device aggregate whose values it takes.
    value: usize,
    /// The state's type (DataFusion's accumulator's).
    data_type: DataType,
}

/// `plan` rewritten, where it is a partial aggregation the device computes.
fn rewrite(plan: &Arc<dyn ExecutionPlan>) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    device_plan(plan, true)
}

/// [`rewrite`]'s work; `placed`: only over a scan that asks for it (`device_aggregation`) and
/// whose partitions all decode on a device (false: whatever the options and the device, to
/// test the translation where there is none).
fn device_plan(
    plan: &Arc<dyn ExecutionPlan>,
    placed: bool,
) -> Result<Option<Arc<dyn ExecutionPlan>>> {
    let Some(agg) = plan.downcast_ref::<AggregateExec>() else {
        return Ok(None);
    };
    if *agg.mode() != AggregateMode::Partial
        || agg.group_expr().has_grouping_set()
        || agg.filter_expr().iter().any(Option::is_some)
    {
        return Ok(None);
    }
    // down to the scan through projections
    let Some((scan, source)) = find_scan(agg.input()) else {
        return Ok(None);
    };
    // (a scan that reads no column has no device batch: counts from row counts are
    // DataFusion's)
    if source.file_columns().is_empty()
        || (placed
            && (!source.options().device_aggregation || source.decodes_on_host_anywhere(scan)))
    {
        return Ok(None);
    }
    let input = &Level::Plan(agg.input());
    let mut keys = Vec::new();
    for (e, _) in agg.group_expr().expr() {
        match translate(e, input)? {
            Some(Expr::Column(c)) => keys.push(c),
            _ => return Ok(None),
        }
    }
    let mut aggregates = Vec::new();
    let mut states = Vec::new();
    for a in agg.aggr_expr() {
        if a.is_distinct() || !a.order_bys().is_empty() {
            return Ok(None);
        }
        let fields = a.state_fields()?;
        let args = a.expressions();
        let arg = |i: usize| -> Result<Option<Expr>> {
            match args.get(i) {
                Some(e) => translate(e, input),
                None => Ok(None),
            }
        };
        let name = a.fun().name().to_ascii_lowercase();
        let mut push = |agg: Aggregate, state: usize| {
            aggregates.push(agg);
            states.push(StateColumn {
                value: aggregates.len() - 1,
                data_type: fields[state].data_type().clone(),
            });
        };
        match (name.as_str(), fields.len(), args.len()) {
            ("count", 1, 1) => {
                if is_constant(&args[0]) {
                    push(Aggregate::CountRows, 0);
                } else {
                    let Some(e) = arg(0)? else { return Ok(None) };
                    push(Aggregate::Count(e), 0);
                }
            }
            ("sum", 1, 1) => match fields[0].data_type() {
                DataType::Float64 => {
                    let Some(e) = arg(0)? else { return Ok(None) };
                    push(Aggregate::SumFloat(e), 0);
                }
                t => {
                    let scale = match t {
                        DataType::Decimal128(_, s) => *s,
                        t if t.is_integer() => 0,
                        _ => return Ok(None),
                    };
                    match translate_int(&args[0], input)? {
                        Some((e, s)) if s == scale => push(Aggregate::SumExact(e, s), 0),
                        _ => return Ok(None),
                    }
                }
            },
            ("avg", 2, 1) => {
                // DataFusion's state: [count, sum]
                let Some(e) = arg(0)? else { return Ok(None) };
                match fields[1].data_type() {
                    DataType::Float64 => {
                        push(Aggregate::Count(e.clone()), 0);
                        push(Aggregate::SumFloat(e), 1);
                    }
                    DataType::Decimal128(_, scale) => {
                        let Expr::Column(c) = e else { return Ok(None) };
                        push(Aggregate::Count(e), 0);
                        push(Aggregate::SumExact(IntExpr::Column(c), *scale), 1);
                    }
                    _ => return Ok(None),
                }
            }
            ("min" | "max", 1, 1) => {
                let Some(Expr::Column(c)) = arg(0)? else {
                    return Ok(None);
                };
                push(
                    if name == "min" {
                        Aggregate::Min(c)
                    } else {
                        Aggregate::Max(c)
                    },
                    0,
                );
            }
            _ => return Ok(None),
        }
    }
    let spec = GroupBy { keys, aggregates };
    let batch_schema = Arc::new(
        source
            .table_schema()
            .file_schema()
            .project(source.file_columns())?,
    );
    if spec.check(&batch_schema).is_err() {
        return Ok(None);
    }
    // a state the device's values do not convert to: DataFusion's aggregation
    for s in &states {
        let from = spec.output_type(s.value, &batch_schema);
        if !converts(&from, &s.data_type) {
            return Ok(None);
        }
    }
    Ok(Some(Arc::new(DeviceAggregateExec::new(
        Arc::clone(plan),
        Arc::clone(scan),
        spec,
        batch_schema,
        states,
    ))))
}

/// The input of `plan` where it passes its input's rows and columns on as they are: a round
/// robin repartition (the device aggregation reads the scan's own partitions instead).
fn passes_through(plan: &Arc<dyn ExecutionPlan>) -> Option<&Arc<dyn ExecutionPlan>> {
    let r = plan.downcast_ref::<RepartitionExec>()?;
    matches!(r.partitioning(), Partitioning::RoundRobinBatch(_)).then(|| r.input())
}

/// The cuparquet scan under `plan`, through projections (and round robin repartitions).
fn find_scan(
    plan: &Arc<dyn ExecutionPlan>,
) -> Option<(&Arc<dyn ExecutionPlan>, &GpuParquetSource)> {
    if let Some(p) = plan.downcast_ref::<ProjectionExec>() {
        return find_scan(p.input());
    }
    if let Some(input) = passes_through(plan) {
        return find_scan(input);
    }
    let exec = plan.downcast_ref::<DataSourceExec>()?;
    let (_, source) = exec.downcast_to_file_source::<GpuParquetSource>()?;
    Some((plan, source))
}

/// Where an expression's columns come from: a plan's output, or the scan's table (whose file
/// columns are the device batches' columns).
#[derive(Clone, Copy)]
enum Level<'a> {
    Plan(&'a Arc<dyn ExecutionPlan>),
    Table(&'a GpuParquetSource),
}

/// A column resolved one level down.
enum Source<'a> {
    /// An expression over the level below.
    Expr(Arc<dyn PhysicalExpr>, Level<'a>),
    /// A column of the device batches.
    Device(usize),
}

impl<'a> Level<'a> {
    fn schema(&self) -> SchemaRef {
        match self {
            Level::Plan(p) => p.schema(),
            Level::Table(s) => Arc::clone(s.table_schema().table_schema()),
        }
    }

    /// What column `i` of this level is.
    fn column(&self, i: usize) -> Option<Source<'a>> {
        match *self {
            Level::Table(s) => {
                let width = s.table_schema().file_schema().fields().len();
                (i < width)
                    .then(|| s.file_columns().iter().position(|&f| f == i))
                    .flatten()
                    .map(Source::Device)
            }
            Level::Plan(p) => {
                if let Some(pr) = p.downcast_ref::<ProjectionExec>() {
                    let e = pr.expr().get(i)?;
                    return Some(Source::Expr(Arc::clone(&e.expr), Level::Plan(pr.input())));
                }
                if let Some(input) = passes_through(p) {
                    return Level::Plan(input).column(i);
                }
                let (_, source) = find_scan(p)?;
                let e = source.projection()?.iter().nth(i)?;
                Some(Source::Expr(Arc::clone(&e.expr), Level::Table(source)))
            }
        }
    }
}

/// Whether `e` is a non-null literal (`COUNT(1)`, DataFusion's `COUNT(*)`).
fn is_constant(e: &Arc<dyn PhysicalExpr>) -> bool {
    e.downcast_ref::<Literal>()
        .is_some_and(|l| !l.value().is_null())
}

/// `e` (over `plan`'s output) as a device expression over the scan's device batches, where it
/// is one: a column of the scan, or double arithmetic over such columns.
fn translate(e: &Arc<dyn PhysicalExpr>, at: &Level<'_>) -> Result<Option<Expr>> {
    let schema = at.schema();
    if let Some(c) = e.downcast_ref::<Column>() {
        return match at.column(c.index()) {
            Some(Source::Device(d)) => Ok(Some(Expr::Column(d))),
            Some(Source::Expr(inner, below)) => translate(&inner, &below),
            None => Ok(None),
        };
    }
    // arithmetic: only in doubles, as the device computes it
    if e.data_type(&schema)? != DataType::Float64 {
        return Ok(None);
    }
    if let Some(l) = e.downcast_ref::<Literal>() {
        return Ok(match l.value() {
            ScalarValue::Float64(Some(v)) => Some(Expr::Literal(*v)),
            _ => None,
        });
    }
    if let Some(c) = e.downcast_ref::<CastExpr>() {
        // integers and floats to double: exact or rounded as the device converts them
        let from = c.expr().data_type(&schema)?;
        if from.is_integer() || matches!(from, DataType::Float32 | DataType::Float64) {
            return translate(c.expr(), at);
        }
        return Ok(None);
    }
    if let Some(n) = e.downcast_ref::<NegativeExpr>() {
        return Ok(translate(n.arg(), at)?.map(|a| Expr::Neg(Box::new(a))));
    }
    if let Some(b) = e.downcast_ref::<BinaryExpr>() {
        let (Some(l), Some(r)) = (translate(b.left(), at)?, translate(b.right(), at)?) else {
            return Ok(None);
        };
        let (l, r) = (Box::new(l), Box::new(r));
        return Ok(match b.op() {
            Operator::Plus => Some(Expr::Add(l, r)),
            Operator::Minus => Some(Expr::Sub(l, r)),
            Operator::Multiply => Some(Expr::Mul(l, r)),
            Operator::Divide => Some(Expr::Div(l, r)),
            _ => None,
        });
    }
    Ok(None)
}

/// `e` as exact integer arithmetic over the scan's integer and decimal columns, with its scale
/// (decimals as unscaled integers), where its every step is DataFusion's own: sums and
/// differences at the larger scale, products at the sum of the scales, casts that widen.
fn translate_int(e: &Arc<dyn PhysicalExpr>, at: &Level<'_>) -> Result<Option<(IntExpr, i8)>> {
    let schema = at.schema();
    let scale_of = |t: &DataType| match t {
        DataType::Decimal128(_, s) if *s >= 0 => Some(*s),
        t if t.is_integer() => Some(0),
        _ => None,
    };
    let Some(scale) = scale_of(&e.data_type(&schema)?) else {
        return Ok(None);
    };
    if let Some(c) = e.downcast_ref::<Column>() {
        return match at.column(c.index()) {
            Some(Source::Device(d)) => Ok(Some((IntExpr::Column(d), scale))),
            Some(Source::Expr(inner, below)) => translate_int(&inner, &below),
            None => Ok(None),
        };
    }
    if let Some(l) = e.downcast_ref::<Literal>() {
        let v = match l.value() {
            ScalarValue::Int8(Some(v)) => Some(i128::from(*v)),
            ScalarValue::Int16(Some(v)) => Some(i128::from(*v)),
            ScalarValue::Int32(Some(v)) => Some(i128::from(*v)),
            ScalarValue::Int64(Some(v)) => Some(i128::from(*v)),
            ScalarValue::Decimal128(Some(v), _, _) => Some(*v),
            _ => None,
        };
        return Ok(v
            .and_then(|v| i64::try_from(v).ok())
            .map(|v| (IntExpr::Literal(v), scale)));
    }
    // `a` brought from scale `from` to `to` (never down)
    let rescale = |a: IntExpr, from: i8, to: i8| -> Option<IntExpr> {
        match to.checked_sub(from)? {
            0 => Some(a),
            n @ 1..=18 => Some(IntExpr::Scale(Box::new(a), n as u32)),
            _ => None,
        }
    };
    if let Some(c) = e.downcast_ref::<CastExpr>() {
        let Some((a, s)) = translate_int(c.expr(), at)? else {
            return Ok(None);
        };
        return Ok(rescale(a, s, scale).map(|a| (a, scale)));
    }
    if let Some(n) = e.downcast_ref::<NegativeExpr>() {
        return Ok(translate_int(n.arg(), at)?
            .filter(|(_, s)| *s == scale)
            .map(|(a, s)| (IntExpr::Neg(Box::new(a)), s)));
    }
    if let Some(b) = e.downcast_ref::<BinaryExpr>() {
        let (Some((l, ls)), Some((r, rs))) =
            (translate_int(b.left(), at)?, translate_int(b.right(), at)?)
        else {
            return Ok(None);
        };
        let out = match b.op() {
            Operator::Plus | Operator::Minus => {
                let at = ls.max(rs);
                if at != scale {
                    return Ok(None);
                }
                let (Some(l), Some(r)) = (rescale(l, ls, at), rescale(r, rs, at)) else {
                    return Ok(None);
                };
                let (l, r) = (Box::new(l), Box::new(r));
                if *b.op() == Operator::Plus {
                    IntExpr::Add(l, r)
                } else {
                    IntExpr::Sub(l, r)
                }
            }
            Operator::Multiply if ls + rs == scale => IntExpr::Mul(Box::new(l), Box::new(r)),
            _ => return Ok(None),
        };
        return Ok(Some((out, scale)));
    }
    Ok(None)
}

/// Whether the device's values of type `from` convert to DataFusion's state type `to`.
fn converts(from: &DataType, to: &DataType) -> bool {
    match (from, to) {
        (a, b) if a == b => true,
        (DataType::Decimal128(38, 0), DataType::Int64 | DataType::UInt64) => true,
        (DataType::Decimal128(38, s), DataType::Decimal128(_, t)) => s == t,
        (DataType::Int64, DataType::UInt64) => true,
        _ => false,
    }
}

/// `a` (the device's values) as DataFusion's state of type `to` ([`converts`]): integer sums
/// wrap to 64 bits as DataFusion's do, decimal sums take the state's precision.
fn convert(a: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    if a.data_type() == to {
        return Ok(Arc::clone(a));
    }
    match (a.data_type(), to) {
        (DataType::Decimal128(..), DataType::Int64) => {
            let d = a.as_primitive::<Decimal128Type>();
            Ok(Arc::new(
                d.unary::<_, datafusion::arrow::datatypes::Int64Type>(|v| v as i64),
            ))
        }
        (DataType::Decimal128(..), DataType::UInt64) => {
            let d = a.as_primitive::<Decimal128Type>();
            Ok(Arc::new(
                d.unary::<_, datafusion::arrow::datatypes::UInt64Type>(|v| v as u64),
            ))
        }
        (DataType::Decimal128(..), DataType::Decimal128(p, s)) => Ok(Arc::new(
            a.as_primitive::<Decimal128Type>()
                .clone()
                .with_precision_and_scale(*p, *s)?,
        )),
        _ => Ok(cast(a, to)?),
    }
}

/// The partial aggregation of a cuparquet device scan, on the GPU.
#[derive(Debug)]
pub struct DeviceAggregateExec {
    /// The `AggregateExec(Partial)` it replaces (its schema, and `EXPLAIN`'s words).
    replaced: Arc<dyn ExecutionPlan>,
    scan: Arc<dyn ExecutionPlan>,
    spec: GroupBy,
    batch_schema: SchemaRef,
    states: Vec<StateColumn>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl DeviceAggregateExec {
    fn new(
        replaced: Arc<dyn ExecutionPlan>,
        scan: Arc<dyn ExecutionPlan>,
        spec: GroupBy,
        batch_schema: SchemaRef,
        states: Vec<StateColumn>,
    ) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(replaced.schema()),
            scan.output_partitioning().clone(),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        DeviceAggregateExec {
            replaced,
            scan,
            spec,
            batch_schema,
            states,
            properties,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// What the device computes.
    pub fn spec(&self) -> &GroupBy {
        &self.spec
    }
}

impl DisplayAs for DeviceAggregateExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let agg = self.replaced.downcast_ref::<AggregateExec>();
        let gby: Vec<String> = agg
            .map(|a| {
                a.group_expr()
                    .expr()
                    .iter()
                    .map(|(_, n)| n.clone())
                    .collect()
            })
            .unwrap_or_default();
        let aggr: Vec<String> = agg
            .map(|a| a.aggr_expr().iter().map(|e| e.name().to_string()).collect())
            .unwrap_or_default();
        write!(
            f,
            "DeviceAggregateExec: mode=Partial, gby=[{}], aggr=[{}] (on the GPU, over its scan's \
             device batches)",
            gby.join(", "),
            aggr.join(", ")
        )
    }
}

/// One partition's aggregation, shared by its stream's tasks.
struct Partition {
    aggregator: Mutex<Aggregator>,
    ordinal: usize,
    /// The output (DataFusion's partial states) and the device batches' schemas.
    schema: SchemaRef,
    batch_schema: SchemaRef,
    states: Vec<StateColumn>,
    batches: Count,
    bytes: Count,
    groups: Count,
    rows_in: Count,
    time: Time,
}

impl Partition {
    /// One scan batch aggregated into DataFusion's partial-state batch.
    fn aggregate(&self, b: LoadedBatch) -> Result<RecordBatch> {
        let t = self.time.timer();
        let mut a = self
            .aggregator
            .lock()
            .map_err(|_| DataFusionError::Execution("a poisoned aggregator".into()))?;
        let external = |e: cuparquet::Error| DataFusionError::External(Box::new(e));
        // a file without some of the table's columns: its batch brought to the table's columns
        // (nulls for the missing) on the host, then aggregated
        let schema = &self.batch_schema;
        let same = b.schema().fields().len() == schema.fields().len()
            && b.schema()
                .fields()
                .iter()
                .zip(schema.fields())
                .all(|(x, y)| x.name() == y.name() && x.data_type() == y.data_type());
        let groups = match (b.as_host(), same) {
            (Some(h), true) => a.aggregate_host(h, self.ordinal),
            (None, true) => a.aggregate(&b),
            (_, false) => {
                let name = b.file().display().to_string();
                let host = b.to_host().map_err(external)?;
                let host = crate::adapt::to_schema(&host, schema, &name)?;
                a.aggregate_host(&host, self.ordinal)
            }
        }
        .map_err(external)?;
        t.done();
        self.batches.add(1);
        self.rows_in.add(b.num_rows());
        self.groups.add(groups.len());
        let out = self.to_batch(groups)?;
        self.bytes.add(out.get_array_memory_size());
        Ok(out)
    }

    /// The groups of one batch as DataFusion's partial-state batch.
    fn to_batch(&self, groups: Groups) -> Result<RecordBatch> {
        let schema = Arc::clone(&self.schema);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for (k, field) in groups.keys.iter().zip(schema.fields()) {
            columns.push(if k.data_type() == field.data_type() {
                Arc::clone(k)
            } else {
                cast(k, field.data_type())?
            });
        }
        for s in &self.states {
            columns.push(convert(&groups.values[s.value], &s.data_type)?);
        }
        Ok(RecordBatch::try_new(schema, columns)?)
    }
}

impl ExecutionPlan for DeviceAggregateExec {
    fn name(&self) -> &str {
        "DeviceAggregateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    /// The scan, for `EXPLAIN` and its metrics: this node reads it through
    /// [`device_batches`](crate::device_batches), never through its `execute`.
    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.scan]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if children.len() != 1 || find_scan(&children[0]).is_none() {
            return exec_err!("DeviceAggregateExec takes one cuparquet scan");
        }
        Ok(Arc::new(DeviceAggregateExec::new(
            Arc::clone(&self.replaced),
            children.swap_remove(0),
            self.spec.clone(),
            Arc::clone(&self.batch_schema),
            self.states.clone(),
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let aggregator = Aggregator::new(self.spec.clone(), Arc::clone(&self.batch_schema))
            .map_err(DataFusionError::Execution)?;
        let m = |name: &'static str| MetricBuilder::new(&self.metrics).counter(name, partition);
        let part = Arc::new(Partition {
            aggregator: Mutex::new(aggregator),
            ordinal: device_ordinal(&self.scan, partition)?,
            schema: self.schema(),
            batch_schema: Arc::clone(&self.batch_schema),
            states: self.states.clone(),
            batches: m("cuparquet_aggregated_batches"),
            bytes: m("cuparquet_bytes_to_host"),
            groups: m("cuparquet_groups_to_host"),
            rows_in: m("cuparquet_rows_aggregated"),
            time: MetricBuilder::new(&self.metrics)
                .subset_time("cuparquet_aggregate_time", partition),
        });
        let batches = crate::device::device_batches(&self.scan, partition)?;
        let stream = batches.then(move |b| {
            let part = Arc::clone(&part);
            async move {
                let b: LoadedBatch = b?;
                tokio::task::spawn_blocking(move || part.aggregate(b))
                    .await
                    .map_err(|e| DataFusionError::Execution(format!("device aggregation: {e}")))?
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema(),
            stream,
        )))
    }
}

/// The CUDA device partition `partition` of `scan` decodes on.
fn device_ordinal(scan: &Arc<dyn ExecutionPlan>, partition: usize) -> Result<usize> {
    let Some((_, source)) = find_scan(scan) else {
        return exec_err!("DeviceAggregateExec over a plan that is not a cuparquet scan");
    };
    match source.options().device_of_partition(partition).location() {
        Ok(cuparquet::Location::Cuda(n)) => Ok(n),
        Ok(cuparquet::Location::Host) => {
            exec_err!(
                "partition {partition} of the scan decodes on the host: no device to aggregate on"
            )
        }
        Err(e) => Err(DataFusionError::External(Box::new(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{SessionConfig, SessionContext};

    /// The partial aggregation of `sql` as the device would compute it (the placement aside).
    async fn device_spec(ctx: &SessionContext, sql: &str) -> Option<GroupBy> {
        let plan = ctx
            .sql(sql)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let mut found = None;
        plan.apply(|p| {
            if let Some(new) = device_plan(p, false)? {
                found = new
                    .downcast_ref::<DeviceAggregateExec>()
                    .map(|e| e.spec().clone());
                return Ok(TreeNodeRecursion::Stop);
            }
            Ok(TreeNodeRecursion::Continue)
        })
        .unwrap();
        found
    }

    /// TPC-H Q1 over decimal columns translates whole: exact sums of columns and of the
    /// products, AVG as a count and an exact sum, COUNT(*); a division and an expression as a
    /// key do not. (`COUNT(DISTINCT x)` is DataFusion's GROUP BY x below its own aggregation:
    /// that GROUP BY translates.)
    #[tokio::test]
    async fn q1_translates_to_exact_device_arithmetic() {
        let dir = tempfile::tempdir().unwrap();
        let props = datafusion::parquet::file::properties::WriterProperties::builder().build();
        let t = crate::tpch::write_tables(dir.path(), 200, 1, &props).unwrap();
        let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
        t.register(&ctx, Some(&crate::GpuScanOptions::default()))
            .await
            .unwrap();
        // Q1 without its filter, which DataFusion's FilterExec applies where the scan decodes
        // on the host (a device scan applies it to the rows)
        let q1 = crate::tpch::Q1.replace(
            "WHERE l_shipdate <= date '1998-12-01' - interval '90' day",
            "",
        );
        let spec = device_spec(&ctx, &q1).await.expect("Q1 translates");
        assert_eq!(spec.keys.len(), 2);
        let sums = spec
            .aggregates
            .iter()
            .filter(|a| matches!(a, Aggregate::SumExact(..)))
            .count();
        assert_eq!(sums, 7, "{:?}", spec.aggregates);
        assert!(spec.aggregates.contains(&Aggregate::CountRows));
        // sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)): products at scale 6
        assert!(
            spec.aggregates
                .iter()
                .any(|a| matches!(a, Aggregate::SumExact(IntExpr::Mul(..), 6))),
            "{:?}",
            spec.aggregates
        );
        let distinct = "SELECT l_returnflag, count(DISTINCT l_shipmode) FROM lineitem GROUP BY 1";
        let spec = device_spec(&ctx, distinct)
            .await
            .expect("the GROUP BY below DISTINCT");
        assert_eq!((spec.keys.len(), spec.aggregates.len()), (2, 0));
        for sql in [
            "SELECT l_returnflag, sum(l_extendedprice / (1 + l_tax)) FROM lineitem GROUP BY 1",
            "SELECT upper(l_returnflag), count(*) FROM lineitem GROUP BY 1",
        ] {
            assert!(device_spec(&ctx, sql).await.is_none(), "{sql}");
        }
    }
}
