//! cuparquet's scan under datafusion-distributed, on loopback: 2 and 3 workers inside this
//! process, each on its own runtime, reached through gRPC as workers on other machines are.
//! Answers equal single-node DataFusion over its own Parquet scan; a worker that dies or a
//! file that fails mid-query gives the coordinator a clear error.
//!
//! The workers' scans run on `Device::Auto`: their CPUs on CI, the GPU on the GPU machine
//! (where `CUPARQUET_REQUIRE_GPU=1` makes a scan that did not use it a failure).

use std::path::Path;
use std::sync::{Arc, OnceLock};

use cuparquet_datafusion::{register_gpu_parquet, tpch, GpuParquetSource, GpuScanOptions};
use cuparquet_distributed::{
    coordinator_state, GpuScanCodec, LocalCluster, StaticWorkers, WorkerOptions,
};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::physical_plan::{FileScanConfig, FileSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::metrics::MetricValue;
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_distributed::{
    display_plan_ascii, rewrite_distributed_plan_with_metrics, DistributedExt,
    DistributedMetricsFormat,
};
use datafusion_proto::physical_plan::{DefaultPhysicalProtoConverter, PhysicalExtensionCodec};

/// Orders per table (lineitem has about four times as many rows), in `FILES` files each.
const ORDERS: usize = 30_000;
const FILES: usize = 6;

struct Data {
    dir: tempfile::TempDir,
    tables: tpch::Tables,
}

fn data() -> &'static Data {
    static DATA: OnceLock<Data> = OnceLock::new();
    DATA.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(10_000))
            .set_data_page_row_count_limit(2_000)
            .build();
        let tables = tpch::write_tables(&dir.path().join("tpch"), ORDERS, FILES, &props).unwrap();
        Data { dir, tables }
    })
}

const QUERIES: &[(&str, &str)] = &[
    ("Q1", tpch::Q1),
    ("Q3", tpch::Q3),
    ("Q6", tpch::Q6),
    ("Q12", tpch::Q12),
    (
        "count",
        "SELECT count(*), count(DISTINCT l_suppkey) FROM lineitem WHERE l_comment LIKE '%ironic%'",
    ),
    (
        "strings",
        "SELECT l_shipmode, count(*), min(l_comment) FROM lineitem
           WHERE l_shipinstruct = 'COLLECT COD' GROUP BY 1 ORDER BY 1",
    ),
    (
        "limit",
        "SELECT l_orderkey, l_linenumber FROM lineitem ORDER BY 1, 2 LIMIT 7",
    ),
];

fn dir(p: &Path) -> String {
    format!("{}/", p.display())
}

/// A coordinator over `workers`, every scan split into tasks (one byte a partition: the small
/// test files would otherwise make one task), the tables registered for cuparquet's scan.
async fn coordinator(workers: StaticWorkers, t: &tpch::Tables) -> SessionContext {
    let config = SessionConfig::new().with_target_partitions(2);
    let mut ctx = SessionContext::from(coordinator_state(config, workers));
    ctx.set_distributed_file_scan_config_bytes_per_partition(1)
        .unwrap();
    // every query's scan on the workers' GPUs where they have one (none left to the host
    // for being faster there), so that a GPU's decoding is what is checked
    let always = GpuScanOptions {
        host_when_faster: false,
        ..GpuScanOptions::default()
    };
    t.register(&ctx, Some(&always)).await.unwrap();
    ctx
}

/// One machine, DataFusion's own Parquet scan.
async fn datafusion(t: &tpch::Tables) -> SessionContext {
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(2));
    t.register(&ctx, None).await.unwrap();
    ctx
}

fn text(b: &[RecordBatch]) -> String {
    pretty_format_batches(b).unwrap().to_string()
}

/// The sum of metric `name` over the plan's nodes.
fn metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    let mut total = 0;
    plan.apply(|p| {
        if let Some(m) = p.metrics() {
            for v in m.iter() {
                if let MetricValue::Count { name: n, count } = v.value() {
                    if n == name {
                        total += count.value();
                    }
                }
            }
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    total
}

async fn same_answers(workers: usize) {
    let t = &data().tables;
    let cluster = LocalCluster::start(workers, WorkerOptions::default(), 2).unwrap();
    let ctx = coordinator(cluster.resolver(), t).await;
    let df = datafusion(t).await;
    for (name, q) in QUERIES {
        let plan = ctx
            .sql(q)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let shown = display_plan_ascii(plan.as_ref(), false);
        let ours = text(
            &collect(Arc::clone(&plan), ctx.task_ctx())
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}\n{shown}")),
        );
        let theirs = text(&df.sql(q).await.unwrap().collect().await.unwrap());
        assert_eq!(ours, theirs, "{name} on {workers} workers:\n{shown}");
        assert!(ours.lines().count() > 4, "{name}: too few rows:\n{ours}");
        // the scans ran on the workers, in more than one task
        assert!(
            shown.contains("gpuparquet"),
            "{name}: not our scan:\n{shown}"
        );
        let tasks = shown.matches("t1:").count();
        assert!(tasks > 0, "{name}: the scan was not distributed:\n{shown}");
        let plan =
            rewrite_distributed_plan_with_metrics(plan, DistributedMetricsFormat::Aggregated)
                .await
                .unwrap();
        // a GPU's batches, or the bytes DataFusion's own reader decoded on a CPU
        let (gpu, host) = (
            metric(&plan, "cuparquet_device_batches"),
            metric(&plan, "bytes_scanned"),
        );
        assert!(
            gpu + host > 0,
            "{name}: no scan counted:\n{}",
            display_plan_ascii(plan.as_ref(), true)
        );
        if std::env::var("CUPARQUET_REQUIRE_GPU").as_deref() == Ok("1") {
            assert!(
                gpu > 0,
                "{name}: CUPARQUET_REQUIRE_GPU=1 but the workers decoded on their CPUs"
            );
        }
        if *name == "Q1" {
            eprintln!("{}", display_plan_ascii(plan.as_ref(), true));
        }
        eprintln!(
            "{name} on {workers} workers: {gpu} batches decoded on a GPU, {host} bytes on a CPU"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_answer_as_datafusion_does() {
    same_answers(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_answer_as_datafusion_does() {
    same_answers(3).await;
}

/// The cuparquet scan of `sql`'s plan on a single-node session.
async fn planned_scan(sql: &str, options: GpuScanOptions) -> Arc<dyn ExecutionPlan> {
    let t = &data().tables;
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(3));
    register_gpu_parquet(&ctx, "lineitem", &dir(&t.lineitem), options)
        .await
        .unwrap();
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let mut scan = None;
    plan.apply(|p| {
        if p.downcast_ref::<DataSourceExec>().is_some() {
            scan = Some(Arc::clone(p));
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    scan.expect("a scan")
}

/// The one count `sql` gives over the test's lineitem, through the provider (on this machine's
/// device, or DataFusion's own reader where it has none).
async fn count(sql: &str) -> usize {
    let ctx = SessionContext::new();
    register_gpu_parquet(
        &ctx,
        "lineitem",
        &dir(&data().tables.lineitem),
        GpuScanOptions::default(),
    )
    .await
    .unwrap();
    let b = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    let c = b[0].column(0).as_any();
    c.downcast_ref::<datafusion::arrow::array::Int64Array>()
        .unwrap()
        .value(0) as usize
}

fn source(plan: &Arc<dyn ExecutionPlan>) -> (FileScanConfig, GpuParquetSource) {
    let dse = plan.downcast_ref::<DataSourceExec>().unwrap();
    let fsc = dse.data_source().downcast_ref::<FileScanConfig>().unwrap();
    let s = fsc
        .file_source()
        .downcast_ref::<GpuParquetSource>()
        .unwrap();
    (fsc.clone(), s.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scan_travels_whole() {
    let options = GpuScanOptions {
        batch_rows: Some(4096),
        memory_budget: Some(1 << 30),
        page_index: false,
        ..GpuScanOptions::default()
    };
    let scan = planned_scan(
        "SELECT l_orderkey, l_quantity FROM lineitem
           WHERE l_quantity > 30 AND upper(l_shipmode) = 'AIR' AND l_orderkey < 90000",
        options.clone(),
    )
    .await;
    let conv = DefaultPhysicalProtoConverter {};
    let mut buf = Vec::new();
    GpuScanCodec::default()
        .try_encode(Arc::clone(&scan), &mut buf, &conv)
        .unwrap();
    // a worker of its own settings: the device of an `Auto` scan, a smaller budget
    let worker = GpuScanCodec::for_worker(WorkerOptions {
        device: Some(cuparquet::Device::Host),
        memory_budget: Some(256 << 20),
        ..WorkerOptions::default()
    });
    let task = SessionContext::new().task_ctx();
    let back = worker.try_decode(&buf, &[], &task, &conv).unwrap();
    let ((f0, s0), (f1, s1)) = (source(&scan), source(&back));
    assert_eq!(s1.options().device, cuparquet::Device::Host);
    assert_eq!(s1.options().memory_budget, Some(256 << 20));
    assert_eq!(s1.options().batch_rows, Some(4096));
    assert!(!s1.options().page_index);
    let (p0, p1) = (
        FileSource::filter(&s0).unwrap(),
        FileSource::filter(&s1).unwrap(),
    );
    assert_eq!(p0.to_string(), p1.to_string());
    assert!(p1.to_string().contains("upper("), "{p1}");
    let rf = |s: &GpuParquetSource| s.row_filter().map(|r| r.to_string());
    assert_eq!(rf(&s0), rf(&s1));
    let gpu = cuparquet::device::probe_cuda().devices > 0;
    if gpu {
        let carried = rf(&s1).unwrap();
        assert!(
            carried.contains("l_quantity") && carried.contains("l_orderkey"),
            "{carried}"
        );
    } else {
        // planned where the scan decodes on the host: every filter stays with DataFusion's
        // FilterExec; those cuparquet evaluates travel to be applied where a worker has a GPU
        assert_eq!(rf(&s1), None);
        let g = |s: &GpuParquetSource| {
            let f: Vec<String> = s.gpu_filters().iter().map(|e| e.to_string()).collect();
            f.join(" AND ")
        };
        assert_eq!(g(&s0), g(&s1));
        assert!(
            g(&s1).contains("l_quantity") && g(&s1).contains("l_orderkey"),
            "{}",
            g(&s1)
        );
    }
    assert_eq!(s0.file_columns(), s1.file_columns());
    assert_eq!(f0.file_groups.len(), f1.file_groups.len());
    for (a, b) in f0.file_groups.iter().zip(&f1.file_groups) {
        let names = |g: &datafusion::datasource::physical_plan::FileGroup| {
            g.files()
                .iter()
                .map(|f| f.object_meta.location.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(a), names(b));
    }
    assert_eq!(scan.schema(), back.schema());
    // what it reads is the same: with a row filter, the rows it keeps, on the worker's host as
    // on the GPU
    let ctx = SessionContext::new();
    let (x, y) = (
        collect(scan, ctx.task_ctx()).await.unwrap(),
        collect(back, ctx.task_ctx()).await.unwrap(),
    );
    let rows = |b: &[RecordBatch]| b.iter().map(|b| b.num_rows()).sum::<usize>();
    assert!(rows(&x) > 0);
    assert_eq!(rows(&x), rows(&y));
    if gpu {
        let sql = "SELECT count(*) FROM lineitem WHERE l_quantity > 30 AND l_orderkey < 90000";
        let want = count(sql).await;
        assert_eq!(rows(&y), want);
        // planned on the host (a coordinator without a GPU), run by a worker with one: the
        // filters travel as GPU filters and the worker's GPU applies them to the rows
        let host = GpuScanOptions {
            device: cuparquet::Device::Host,
            ..options.clone()
        };
        let planned = planned_scan(
            "SELECT l_orderkey, l_quantity FROM lineitem
               WHERE l_quantity > 30 AND upper(l_shipmode) = 'AIR' AND l_orderkey < 90000",
            host,
        )
        .await;
        // a coordinator without a GPU plans with the device left to the machine (auto, the
        // host there); here the host was named to plan as it does, and auto is shipped
        let (fsc, s) = source(&planned);
        let auto = s.with_options(GpuScanOptions {
            device: cuparquet::Device::Auto,
            ..options.clone()
        });
        let fsc = datafusion::datasource::physical_plan::FileScanConfigBuilder::from(fsc)
            .with_source(Arc::new(auto))
            .build();
        let planned: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(fsc);
        let mut buf = Vec::new();
        GpuScanCodec::default()
            .try_encode(planned, &mut buf, &conv)
            .unwrap();
        let on_gpu = GpuScanCodec::for_worker(WorkerOptions {
            device: Some(cuparquet::Device::Cuda(0)),
            ..WorkerOptions::default()
        });
        let back = on_gpu.try_decode(&buf, &[], &task, &conv).unwrap();
        let (_, s2) = source(&back);
        assert!(s2.row_filters().is_empty() && !s2.gpu_filters().is_empty());
        let got = collect(back, ctx.task_ctx()).await.unwrap();
        assert_eq!(rows(&got), want);
    }

    // other nodes are declined, for the codecs after this one
    let other = datafusion::physical_plan::empty::EmptyExec::new(scan_schema());
    let e = GpuScanCodec::default()
        .try_encode(Arc::new(other), &mut Vec::new(), &conv)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a cuparquet scan"), "{e}");
    // bytes that are no scan, and a scan of another version, are refused clearly
    let e = worker
        .try_decode(b"\x08\x07", &[], &task, &conv)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("version 7") && e.contains("same cuparquet-distributed"),
        "{e}"
    );
    let e = worker
        .try_decode(&[0xff; 5], &[], &task, &conv)
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not decode"), "{e}");
}

/// A shipped scan whose filter does not type-check (an integer column compared with bytes: the
/// codec fuzz target's find) is refused by the worker, naming the filter; DataFusion's
/// pruning panicked on it before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_that_does_not_type_check_is_refused() {
    use datafusion::common::ScalarValue;
    use datafusion::datasource::physical_plan::FileScanConfigBuilder;
    use datafusion::logical_expr::Operator;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};

    let scan = planned_scan(
        "SELECT l_orderkey, l_comment FROM lineitem WHERE l_orderkey < 90000",
        GpuScanOptions::default(),
    )
    .await;
    let (fsc, s) = source(&scan);
    let at = fsc.file_schema().index_of("l_orderkey").unwrap();
    let bad = Arc::new(BinaryExpr::new(
        Arc::new(Column::new("l_orderkey", at)),
        Operator::Lt,
        Arc::new(Literal::new(ScalarValue::Binary(Some(vec![5])))),
    ));
    let conf = FileScanConfigBuilder::from(fsc)
        .with_source(Arc::new(s.with_predicate(bad)))
        .build();
    let plan: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(conf);
    let conv = DefaultPhysicalProtoConverter {};
    let mut buf = Vec::new();
    GpuScanCodec::default()
        .try_encode(plan, &mut buf, &conv)
        .unwrap();
    let worker = GpuScanCodec::for_worker(WorkerOptions {
        device: Some(cuparquet::Device::Host),
        ..WorkerOptions::default()
    });
    let task = SessionContext::new().task_ctx();
    let e = worker
        .try_decode(&buf, &[], &task, &conv)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("does not type-check") && e.contains("l_orderkey"),
        "{e}"
    );
}

fn scan_schema() -> datafusion::arrow::datatypes::SchemaRef {
    Arc::new(datafusion::arrow::datatypes::Schema::empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_worker_is_a_clear_error() {
    let t = &data().tables;
    let mut cluster = LocalCluster::start(2, WorkerOptions::default(), 2).unwrap();
    let ctx = coordinator(cluster.resolver(), t).await;
    let dead = cluster.urls()[1].clone();
    cluster.stop(1);
    let e = ctx
        .sql(tpch::Q6)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err()
        .to_string();
    let port = dead.port().unwrap().to_string();
    assert!(
        e.contains(&port),
        "the error does not name the worker {dead}: {e}"
    );
    eprintln!("a dead worker: {e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_failing_mid_query_is_a_clear_error() {
    // a copy of lineitem whose last file is cut after the coordinator planned it
    let t = &data().tables;
    let broken = data().dir.path().join("broken-lineitem");
    std::fs::create_dir_all(&broken).unwrap();
    let mut files: Vec<_> = std::fs::read_dir(&t.lineitem)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in &files {
        std::fs::copy(f, broken.join(f.file_name().unwrap())).unwrap();
    }
    let cluster = LocalCluster::start(2, WorkerOptions::default(), 2).unwrap();
    let ctx = coordinator(cluster.resolver(), t).await;
    register_gpu_parquet(&ctx, "broken", &dir(&broken), GpuScanOptions::default())
        .await
        .unwrap();
    let plan = ctx
        .sql("SELECT l_returnflag, sum(l_quantity) FROM broken GROUP BY 1")
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let victim = broken.join(files.last().unwrap().file_name().unwrap());
    let bytes = std::fs::read(&victim).unwrap();
    // its data cut in the middle, its footer kept
    let footer = 8
        + u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap()) as usize;
    let mut cut = bytes[..bytes.len() / 3].to_vec();
    cut.extend_from_slice(&bytes[bytes.len() - footer..]);
    std::fs::write(&victim, cut).unwrap();
    let e = collect(plan, ctx.task_ctx()).await.unwrap_err().to_string();
    let name = victim.file_name().unwrap().to_string_lossy().to_string();
    assert!(e.contains(&name), "the error does not name {name}: {e}");
    eprintln!("a file failing mid-query: {e}");
}
