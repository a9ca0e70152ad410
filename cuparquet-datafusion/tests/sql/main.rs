//! SQL over cuparquet's scan, checked against DataFusion's own Parquet scan of the same files:
//! TPC-H-like queries over several files (SNAPPY and ZSTD, page index on), filters, `LIMIT`,
//! projections, `COUNT(*)`, `EXPLAIN`, the scan's metrics, `CREATE EXTERNAL TABLE`, device
//! batches and bad files.
//!
//! The scan runs on `Device::Auto`: the host on CI, the GPU on the GPU machine (where
//! `CUPARQUET_REQUIRE_GPU=1` makes a scan that did not use it a failure).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use cuparquet_datafusion::{
    device_batches, register_gpu_parquet, register_gpu_parquet_format, tpch, GpuScanOptions,
};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::metrics::MetricValue;
use datafusion::physical_plan::{collect, ExecutionPlan};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use futures::StreamExt;

mod aggregate;
mod errors;

/// Orders per table (lineitem has about four times as many rows).
const ORDERS: usize = 40_000;

struct Data {
    _dir: tempfile::TempDir,
    snappy: tpch::Tables,
    zstd: tpch::Tables,
}

fn props(codec: Compression) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(codec)
        .set_max_row_group_row_count(Some(20_000))
        .set_data_page_row_count_limit(2_000)
        .build()
}

/// The tables, written once for every test of this binary.
fn data() -> &'static Data {
    static DATA: OnceLock<Data> = OnceLock::new();
    DATA.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let snappy = tpch::write_tables(
            &dir.path().join("snappy"),
            ORDERS,
            3,
            &props(Compression::SNAPPY),
        )
        .unwrap();
        let zstd = tpch::write_tables(
            &dir.path().join("zstd"),
            ORDERS,
            2,
            &props(Compression::ZSTD(ZstdLevel::try_new(3).unwrap())),
        )
        .unwrap();
        Data {
            _dir: dir,
            snappy,
            zstd,
        }
    })
}

fn config() -> SessionConfig {
    SessionConfig::new().with_target_partitions(4)
}

fn ctx() -> SessionContext {
    SessionContext::new_with_config(config())
}

fn s(p: &Path) -> String {
    format!("{}/", p.display())
}

/// A session with the tables scanned by cuparquet.
async fn gpu_ctx(t: &tpch::Tables, options: GpuScanOptions) -> SessionContext {
    let ctx = SessionContext::new_with_config(config());
    t.register(&ctx, Some(&options)).await.unwrap();
    ctx
}

/// A session with the same tables scanned by DataFusion.
async fn df_ctx(t: &tpch::Tables) -> SessionContext {
    let ctx = SessionContext::new_with_config(config());
    t.register(&ctx, None).await.unwrap();
    ctx
}

/// The files at `path` as table `t`: scanned by cuparquet (default options), and by
/// DataFusion's own Parquet scan.
async fn table_t(path: &str) -> (SessionContext, SessionContext) {
    let ours = SessionContext::new_with_config(config());
    register_gpu_parquet(&ours, "t", path, GpuScanOptions::default())
        .await
        .unwrap();
    let theirs = SessionContext::new_with_config(config());
    theirs
        .register_parquet("t", path, ParquetReadOptions::default())
        .await
        .unwrap();
    (ours, theirs)
}

async fn run(ctx: &SessionContext, sql: &str) -> Vec<RecordBatch> {
    ctx.sql(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The batches as a table of text (the same for `Utf8` and `Utf8View` columns).
fn text(batches: &[RecordBatch]) -> String {
    pretty_format_batches(batches).unwrap().to_string()
}

/// The queries every scan must answer as DataFusion's does.
const QUERIES: &[&str] = &[
    tpch::Q1,
    tpch::Q3,
    tpch::Q6,
    tpch::Q12,
    // strings and dates
    "SELECT l_shipmode, count(*), min(l_comment), max(l_shipdate) FROM lineitem
       WHERE l_shipinstruct = 'COLLECT COD' AND l_comment LIKE '%ironic%' GROUP BY 1 ORDER BY 1",
    "SELECT o_orderstatus, count(*) FROM orders WHERE o_orderdate BETWEEN date '1996-01-01' AND date '1996-03-31'
       GROUP BY 1 ORDER BY 1",
    // a selective range on a sorted column: row groups and pages pruned
    "SELECT l_orderkey, l_linenumber, l_quantity, l_comment FROM lineitem
       WHERE l_orderkey BETWEEN 40001 AND 40100 ORDER BY 1, 2",
    "SELECT * FROM orders WHERE o_orderkey IN (1, 5, 81, 159997) ORDER BY o_orderkey",
    // projections and counts
    "SELECT count(*) FROM lineitem",
    "SELECT count(*) FROM lineitem WHERE l_receiptdate > date '1998-01-01'",
    "SELECT count(l_comment), count(DISTINCT l_shipmode) FROM lineitem",
    "SELECT l_tax + l_discount AS x, upper(l_shipmode) FROM lineitem ORDER BY l_orderkey, l_linenumber LIMIT 7",
    "SELECT c_name, c_acctbal FROM customer WHERE c_acctbal < 0 ORDER BY c_acctbal, c_name LIMIT 5",
    // LIMIT with nothing to order: only the count is certain
    "SELECT count(*) FROM (SELECT l_orderkey FROM lineitem LIMIT 25)",
    // a filter that keeps nothing
    "SELECT count(*), sum(l_quantity) FROM lineitem WHERE l_orderkey < 0",
    // filters the scan applies to the rows: NOT, IS NULL, IN lists, OR, decimals, dates, and
    // beside ones DataFusion keeps
    "SELECT l_returnflag, count(*), sum(l_extendedprice) FROM lineitem
       WHERE NOT (l_quantity < 10) AND l_returnflag <> 'R' AND l_comment IS NOT NULL GROUP BY 1 ORDER BY 1",
    "SELECT count(*) FROM lineitem WHERE l_shipmode IN ('MAIL', 'SHIP') AND upper(l_comment) LIKE '%A%'",
    "SELECT count(*), min(l_orderkey) FROM lineitem
       WHERE (l_shipdate < date '1993-01-01' OR l_discount >= 0.09) AND l_shipmode NOT IN ('AIR', 'RAIL')",
    "SELECT o_orderpriority, count(*) FROM orders WHERE o_totalprice > 400000.5 OR o_orderstatus = 'P'
       GROUP BY 1 ORDER BY 1",
    // LIKE (prefix, suffix, contains, NOT) and column pairs, applied by the scan
    "SELECT l_shipmode, count(*) FROM lineitem WHERE l_shipmode LIKE 'MA%' OR l_shipinstruct LIKE '%RN'
       GROUP BY 1 ORDER BY 1",
    "SELECT count(*), min(l_orderkey) FROM lineitem
       WHERE l_comment NOT LIKE '%the%' AND l_commitdate < l_receiptdate AND l_shipdate >= l_commitdate",
];

async fn same_answers(t: &tpch::Tables, options: GpuScanOptions) {
    let gpu = gpu_ctx(t, options).await;
    let df = df_ctx(t).await;
    for q in QUERIES {
        let ours = text(&run(&gpu, q).await);
        let theirs = text(&run(&df, q).await);
        assert_eq!(ours, theirs, "{q}");
        assert!(
            ours.lines().count() > 4 || q.contains("< 0"),
            "{q}: too few rows to mean anything:\n{ours}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queries_equal_datafusion_snappy() {
    same_answers(&data().snappy, GpuScanOptions::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn queries_equal_datafusion_zstd_small_batches() {
    same_answers(
        &data().zstd,
        GpuScanOptions::default().with_batch_rows(3_000),
    )
    .await;
}

/// Several GPUs: the scan's partitions dealt to the devices (`devices`), shown in `EXPLAIN`;
/// the queries equal DataFusion's where there are GPUs (4 partitions over every CUDA device
/// here). A device that is not here is an error when the table is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn partitions_spread_over_several_gpus() {
    let t = &data().snappy;
    let here = cuparquet::cuda_devices().unwrap_or_default();
    if here.len() >= 2 {
        let ctx = gpu_ctx(t, GpuScanOptions::default().with_devices([1, 0])).await;
        let explain = text(&run(&ctx, "EXPLAIN SELECT sum(l_quantity) FROM lineitem").await);
        assert!(explain.contains("devices=cuda:1,cuda:0"), "{explain}");
    }
    let missing = here.len();
    let ctx = SessionContext::new_with_config(config());
    let e = register_gpu_parquet(
        &ctx,
        "lineitem",
        &s(&t.lineitem),
        GpuScanOptions::default().with_devices([missing]),
    )
    .await
    .expect_err("a device that is not here")
    .to_string();
    assert!(
        e.contains(&format!("cuparquet option device = cuda:{missing}")),
        "{e}"
    );
    register_gpu_parquet_format(&ctx).unwrap();
    let e = ctx
        .sql(&format!(
            "CREATE EXTERNAL TABLE l STORED AS GPUPARQUET LOCATION '{}' OPTIONS ('device' 'cuda:{missing}')",
            s(&t.lineitem)
        ))
        .await
        .expect_err("a device that is not here")
        .to_string();
    assert!(
        e.contains(&format!("cuparquet option device = cuda:{missing}")) && !e.contains("--device"),
        "{e}"
    );
    let Ok(all) = cuparquet::cuda_devices() else {
        let _ = writeln!(
            std::io::stderr().lock(),
            "skipping the queries over several GPUs: {}",
            cuparquet::device::probe_cuda().detail
        );
        return;
    };
    let _ = writeln!(
        std::io::stderr().lock(),
        "queries with the scan's partitions over {all:?}"
    );
    same_answers(t, GpuScanOptions::default().with_devices(all)).await;
}

/// The physical plan of `sql`.
async fn physical(ctx: &SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
    ctx.sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap()
}

/// The plan's first scan node (depth first), under whatever DataFusion put on top.
fn scan_node(plan: &Arc<dyn ExecutionPlan>) -> Arc<dyn ExecutionPlan> {
    let mut stack = vec![Arc::clone(plan)];
    while let Some(p) = stack.pop() {
        if p.name() == "DataSourceExec" {
            return p;
        }
        stack.extend(p.children().into_iter().rev().cloned());
    }
    panic!("no scan in the plan")
}

/// The plan of `sql` over cuparquet's tables, run to the end, with its scan node.
async fn executed(ctx: &SessionContext, sql: &str) -> (Vec<RecordBatch>, Arc<dyn ExecutionPlan>) {
    let plan = physical(ctx, sql).await;
    let out = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
    (out, plan)
}

/// The rows the plan's scans handed over (their `output_rows`).
fn scanned(plan: &Arc<dyn ExecutionPlan>) -> usize {
    let own = match (plan.name(), plan.metrics()) {
        ("DataSourceExec", Some(m)) => m.output_rows().unwrap_or(0),
        _ => 0,
    };
    own + plan.children().iter().map(|c| scanned(c)).sum::<usize>()
}

/// Whether scans decode on a GPU here (else DataFusion's own reader decodes them).
fn on_gpu() -> bool {
    cuparquet::device::probe_cuda().devices > 0
}

/// The sum of metric `name` over the plan's nodes (of a pruning metric: what it pruned).
fn metric(plan: &Arc<dyn ExecutionPlan>, name: &str) -> usize {
    let mut total = 0;
    if let Some(m) = plan.metrics() {
        for v in m.iter() {
            total += match v.value() {
                MetricValue::PruningMetrics {
                    name: n,
                    pruning_metrics,
                } if n == name => pruning_metrics.pruned(),
                other if other.name() == name => other.as_usize(),
                _ => 0,
            };
        }
    }
    for c in plan.children() {
        total += metric(c, name);
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn filters_prune_row_groups_and_pages_and_show_in_explain() {
    let t = &data().snappy;
    let ctx = gpu_ctx(t, GpuScanOptions::default()).await;
    let explain = text(
        &run(
            &ctx,
            "EXPLAIN SELECT l_quantity FROM lineitem WHERE l_orderkey BETWEEN 40001 AND 40100",
        )
        .await,
    );
    assert!(explain.contains("file_type=gpuparquet"), "{explain}");
    assert!(
        explain.contains("predicate=l_orderkey@0 >= 40001"),
        "{explain}"
    );
    assert!(explain.contains("pruning_predicate="), "{explain}");
    if on_gpu() {
        assert!(
            explain.contains("row_filter=l_orderkey@0 >= 40001 AND l_orderkey@0 <= 40100"),
            "{explain}"
        );
        assert!(
            !explain.contains("FilterExec"),
            "the filters are exact: the scan filters the rows\n{explain}"
        );
        // a filter the scan cannot evaluate stays with DataFusion, beside one it can
        let explain = text(
            &run(
                &ctx,
                "EXPLAIN SELECT l_quantity FROM lineitem WHERE upper(l_shipmode) = 'AIR' AND l_orderkey < 100",
            )
            .await,
        );
        assert!(explain.contains("FilterExec: upper("), "{explain}");
        assert!(explain.contains("row_filter=l_orderkey@"), "{explain}");
        // LIKE and column pairs are the scan's too
        let explain = text(
            &run(
                &ctx,
                "EXPLAIN SELECT l_quantity FROM lineitem
                   WHERE l_comment LIKE '%ironic%' AND l_commitdate < l_receiptdate",
            )
            .await,
        );
        assert!(!explain.contains("FilterExec"), "{explain}");
        let row_filter = explain.split("row_filter=").nth(1).unwrap_or_default();
        assert!(
            row_filter.contains("LIKE %ironic%") && row_filter.contains("> l_commitdate@"),
            "{explain}"
        );
    } else {
        // on the host DataFusion's own reader decodes and its FilterExec filters, as over its
        // own scan; the filters still prune
        assert!(!explain.contains("row_filter="), "{explain}");
        assert!(explain.contains("FilterExec"), "{explain}");
    }
    // and without row filters every filter is DataFusion's
    let no_rows = gpu_ctx(
        t,
        GpuScanOptions {
            row_filter: false,
            ..GpuScanOptions::default()
        },
    )
    .await;
    let explain = text(
        &run(
            &no_rows,
            "EXPLAIN SELECT l_quantity FROM lineitem WHERE l_orderkey BETWEEN 40001 AND 40100",
        )
        .await,
    );
    assert!(explain.contains("FilterExec"), "{explain}");
    assert!(!explain.contains("row_filter="), "{explain}");

    let (out, plan) = executed(
        &ctx,
        "SELECT l_quantity FROM lineitem WHERE l_orderkey BETWEEN 40001 AND 40100",
    )
    .await;
    let rows: usize = out.iter().map(|b| b.num_rows()).sum();
    assert!(rows > 50, "{rows}");
    let read = scanned(&plan);
    let pruned_rg = metric(&plan, "row_groups_pruned_statistics");
    let pages_pruned = metric(&plan, "page_index_rows_pruned");
    assert!(pruned_rg > 0, "no row group pruned");
    assert!(pages_pruned > 0, "no page pruned");
    // one row group at most is read, and of it only the pages holding the range
    assert!(read >= rows && read <= 4_000, "read {read} rows for {rows}");
    let bytes = if on_gpu() {
        "cuparquet_bytes_read"
    } else {
        "bytes_scanned"
    };
    assert!(metric(&plan, bytes) > 0, "no {bytes}");
}

/// String columns follow the session's `schema_force_view_types`: `Utf8View` by default (as
/// DataFusion's own scan reads them), decoded as views by the reader (no cast after it), a
/// string filter still applied by the scan's row filter; `Utf8` when the session says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn string_columns_follow_the_sessions_view_types() {
    let t = &data().snappy;
    let sql = "SELECT l_shipmode, l_comment, l_orderkey FROM lineitem \
               WHERE l_shipmode IN ('MAIL', 'SHIP') AND l_orderkey < 30000";
    for views in [true, false] {
        let mut config = config();
        config
            .options_mut()
            .execution
            .parquet
            .schema_force_view_types = views;
        let gpu = SessionContext::new_with_config(config.clone());
        t.register(&gpu, Some(&GpuScanOptions::default()))
            .await
            .unwrap();
        let df = SessionContext::new_with_config(config);
        t.register(&df, None).await.unwrap();
        let want = if views {
            DataType::Utf8View
        } else {
            DataType::Utf8
        };
        let schema = gpu
            .table("lineitem")
            .await
            .unwrap()
            .schema()
            .as_arrow()
            .clone();
        assert_eq!(
            schema.field_with_name("l_shipmode").unwrap().data_type(),
            &want
        );
        let (ours, plan) = executed(&gpu, sql).await;
        for b in &ours {
            assert_eq!(b.column(0).data_type(), &want, "views {views}");
            assert_eq!(b.column(1).data_type(), &want, "views {views}");
        }
        assert_eq!(text(&ours), text(&run(&df, sql).await), "views {views}");
        assert!(ours.iter().map(|b| b.num_rows()).sum::<usize>() > 100);
        let explain = text(&run(&gpu, &format!("EXPLAIN {sql}")).await);
        if on_gpu() {
            assert!(
                explain.contains("row_filter=(l_shipmode@"),
                "views {views}: the string filter is the scan's\n{explain}"
            );
            assert!(!explain.contains("FilterExec"), "views {views}\n{explain}");
        }
        assert!(scanned(&plan) > 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn limit_reads_only_the_row_groups_it_needs() {
    let t = &data().snappy;
    let ctx = gpu_ctx(t, GpuScanOptions::default()).await;
    let (out, plan) = executed(&ctx, "SELECT l_orderkey, l_comment FROM lineitem LIMIT 10").await;
    assert_eq!(out.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
    let read = scanned(&plan);
    assert!(
        read > 0 && read < t.lineitem_rows / 2,
        "read {read} of {} rows",
        t.lineitem_rows
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_scan_uses_the_gpu_when_one_is_required() {
    let t = &data().snappy;
    // (a query without a filter is the host's where the GPU is not expected to win)
    let always = GpuScanOptions {
        host_when_faster: false,
        ..GpuScanOptions::default()
    };
    let ctx = gpu_ctx(t, always).await;
    let (_, plan) = executed(&ctx, "SELECT sum(l_quantity) FROM lineitem").await;
    let on_device = metric(&plan, "cuparquet_device_batches");
    let probe = cuparquet::device::probe_cuda();
    eprintln!(
        "scan: {on_device} batches decoded on a GPU ({})",
        probe.detail
    );
    if std::env::var("CUPARQUET_REQUIRE_GPU").as_deref() == Ok("1") {
        assert!(
            on_device > 0,
            "CUPARQUET_REQUIRE_GPU=1 but the scan ran on the host: {}",
            probe.detail
        );
    }
    // decoded on the host, by DataFusion's own reader: its counters, in the scan's metrics
    let on_host = metric(&plan, "bytes_scanned");
    if probe.devices == 0 {
        assert_eq!(on_device, 0);
        assert!(on_host > 0, "the host scan counted no byte");
    } else {
        assert!(on_device > 0, "no batch counted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn create_external_table_stored_as_gpuparquet() {
    let t = &data().zstd;
    let ctx = SessionContext::new_with_config(config());
    register_gpu_parquet_format(&ctx).unwrap();
    let sql = format!(
        "CREATE EXTERNAL TABLE lineitem STORED AS GPUPARQUET LOCATION '{}' OPTIONS ('device' 'host', 'batch_rows' '5000')",
        s(&t.lineitem)
    );
    run(&ctx, &sql).await;
    let explain = text(
        &run(
            &ctx,
            "EXPLAIN SELECT sum(l_tax) FROM lineitem WHERE l_shipmode = 'AIR'",
        )
        .await,
    );
    assert!(
        explain.contains("file_type=gpuparquet") && explain.contains("device=host"),
        "{explain}"
    );
    let ours = text(&run(&ctx, tpch::Q1).await);
    let theirs = text(&run(&df_ctx(t).await, tpch::Q1).await);
    assert_eq!(ours, theirs);

    let bad = format!(
        "CREATE EXTERNAL TABLE l2 STORED AS GPUPARQUET LOCATION '{}' OPTIONS ('colour' 'red')",
        s(&t.lineitem)
    );
    let e = ctx
        .sql(&bad)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("unknown option") && e.contains("colour"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn device_batches_hold_the_scanned_columns() {
    let t = &data().snappy;
    let ctx = gpu_ctx(t, GpuScanOptions::default()).await;
    let plan = physical(&ctx, "SELECT l_shipmode, l_quantity FROM lineitem").await;
    let scan = scan_node(&plan);
    let mut rows = 0;
    let partitions = scan.properties().output_partitioning().partition_count();
    for p in 0..partitions {
        let mut s = device_batches(&scan, p).unwrap();
        while let Some(b) = s.next().await {
            let b = b.unwrap();
            assert_eq!(b.num_columns(), 2);
            rows += b.num_rows();
        }
    }
    assert_eq!(rows, t.lineitem_rows);
    let e = device_batches(&plan, 0).err().map(|e| e.to_string());
    assert!(plan.name() == "DataSourceExec" || e.is_some_and(|e| e.contains("DataSourceExec")));
}

/// Bloom filters prune row groups on `=` and `IN` as DataFusion's own scan does (its metric).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bloom_filters_prune_as_datafusion_does() {
    use datafusion::arrow::array::{ArrayRef, Int64Array};
    let dir = tempfile::tempdir().unwrap();
    let (path, n) = (dir.path().join("bloom.parquet"), 80_000i64);
    let k: ArrayRef = Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 7_919 % n)));
    let v: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n));
    let batch = RecordBatch::try_from_iter([("k", k), ("v", v)]).unwrap();
    let props = WriterProperties::builder().set_max_row_group_row_count(Some(10_000));
    let props = props.set_bloom_filter_enabled(true).build();
    let f = std::fs::File::create(&path).unwrap();
    let mut w =
        datafusion::parquet::arrow::ArrowWriter::try_new(f, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let (ours, theirs, p) = (ctx(), ctx(), path.to_str().unwrap());
    register_gpu_parquet(&ours, "t", p, GpuScanOptions::default())
        .await
        .unwrap();
    let options = ParquetReadOptions::default();
    theirs.register_parquet("t", p, options).await.unwrap();
    for q in [
        "SELECT k, v FROM t WHERE k = 4242",
        "SELECT k, v FROM t WHERE k IN (1, 2, 3) ORDER BY k",
    ] {
        let (a, plan) = executed(&ours, q).await;
        let (b, their_plan) = executed(&theirs, q).await;
        assert_eq!(text(&a), text(&b), "{q}");
        let pruned = metric(&plan, "row_groups_pruned_bloom_filter");
        assert!(pruned > 0, "{q}: no row group pruned by bloom filters");
        assert_eq!(
            pruned,
            metric(&their_plan, "row_groups_pruned_bloom_filter"),
            "{q}: as DataFusion's own scan"
        );
    }
}

/// `cuparquet-sql` (what `cuparquet sql` runs): a table named on the command line, a query.
#[test]
fn the_sql_binary_answers_a_query() {
    let exe = std::env::var("CUPARQUET_SQL_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_cuparquet-sql").to_string());
    if !Path::new(&exe).exists() {
        // a test binary run away from its build (the GPU machine, where pack.sh packs the
        // binary as .dev/bin/cuparquet-sql only when asked)
        eprintln!("skipping the cuparquet-sql binary: {exe} is not here (set CUPARQUET_SQL_BIN)");
        return;
    }
    let t = &data().snappy;
    let table = format!("l={}", s(&t.lineitem));
    let mut cmd = std::process::Command::new(exe);
    let q = "SELECT count(*) AS n FROM l WHERE l_shipmode LIKE 'MA%' OR l_orderkey > 0";
    let o = cmd.args(["--csv", "--table", &table, q]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out, format!("n\n{}\n", t.lineitem_rows), "{o:?}");
}

/// A one-file table is cut into byte ranges over the partitions (fewer files than partitions),
/// each range read as a load of its own: every partition works, and the answers are
/// DataFusion's. A table of as many files as partitions keeps them whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_file_spreads_over_the_partitions() {
    let t = &data().snappy;
    let file = t.lineitem.join("part-0.parquet");
    let config = || {
        let mut c = config();
        c.options_mut().optimizer.repartition_file_min_size = 64 << 10;
        c
    };
    let gpu = SessionContext::new_with_config(config());
    // (the rows each partition's scan hands over are counted: DataFusion aggregates them)
    register_gpu_parquet(
        &gpu,
        "lineitem",
        file.to_str().unwrap(),
        GpuScanOptions {
            device_aggregation: false,
            ..GpuScanOptions::default()
        },
    )
    .await
    .unwrap();
    let df = SessionContext::new_with_config(config());
    df.register_parquet(
        "lineitem",
        file.to_str().unwrap(),
        ParquetReadOptions::default(),
    )
    .await
    .unwrap();
    let explain = text(&run(&gpu, "EXPLAIN SELECT sum(l_quantity) FROM lineitem").await);
    assert!(explain.contains("file_groups={4 groups:"), "{explain}");
    assert!(
        explain.contains("part-0.parquet:0.."),
        "byte ranges: {explain}"
    );
    for q in [
        tpch::Q1,
        tpch::Q6,
        "SELECT count(*) FROM lineitem",
        "SELECT count(*), min(l_orderkey), max(l_orderkey), sum(l_quantity) FROM lineitem
           WHERE l_shipmode LIKE 'MA%'",
        "SELECT count(*) FROM (SELECT l_orderkey FROM lineitem LIMIT 25)",
    ] {
        let ours = run(&gpu, q).await;
        assert_eq!(text(&ours), text(&run(&df, q).await), "{q}");
    }
    // every row group read once, whichever range holds it
    let (_, plan) = executed(&gpu, "SELECT sum(l_quantity) FROM lineitem").await;
    let rows = text(&run(&df, "SELECT count(*) AS n FROM lineitem").await);
    let read = scanned(&plan);
    assert!(
        rows.contains(&format!("| {read} ")),
        "{read} rows read:\n{rows}"
    );
    // as many files as partitions: whole files
    let whole = SessionContext::new_with_config(
        SessionConfig::new()
            .with_target_partitions(3)
            .set_usize("datafusion.optimizer.repartition_file_min_size", 64 << 10),
    );
    register_gpu_parquet(
        &whole,
        "lineitem",
        &s(&t.lineitem),
        GpuScanOptions::default(),
    )
    .await
    .unwrap();
    let explain = text(&run(&whole, "EXPLAIN SELECT sum(l_quantity) FROM lineitem").await);
    assert!(!explain.contains(".parquet:0.."), "{explain}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn files_with_different_columns_read_as_one_table() {
    use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
    let dir = tempfile::tempdir().unwrap();
    // nullable columns, as pyarrow writes them
    let write = |name: &str, cols: Vec<(&str, ArrayRef)>| {
        let batch =
            RecordBatch::try_from_iter_with_nullable(cols.into_iter().map(|(n, a)| (n, a, true)))
                .unwrap();
        let f = std::fs::File::create(dir.path().join(name)).unwrap();
        let mut w =
            datafusion::parquet::arrow::ArrowWriter::try_new(f, batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    };
    // the second file lacks `s` and has its columns in another order
    write(
        "a.parquet",
        vec![
            (
                "k",
                Arc::new(Int64Array::from_iter_values(0..100)) as ArrayRef,
            ),
            (
                "s",
                Arc::new(StringArray::from_iter_values(
                    (0..100).map(|i| format!("s{i}")),
                )),
            ),
            (
                "v",
                Arc::new(Int64Array::from_iter_values((0..100).map(|i| i * 10))),
            ),
        ],
    );
    write(
        "b.parquet",
        vec![
            (
                "v",
                Arc::new(Int64Array::from_iter_values((100..150).map(|i| i * 10))) as ArrayRef,
            ),
            ("k", Arc::new(Int64Array::from_iter_values(100..150))),
        ],
    );
    let path = s(dir.path());
    let (ours, theirs) = table_t(&path).await;
    for q in [
        "SELECT k, s, v FROM t ORDER BY k",
        "SELECT count(s), count(*), sum(v) FROM t",
        "SELECT k FROM t WHERE s IS NULL ORDER BY k LIMIT 3",
        // row filters over a column one file lacks (rewritten for it: null there)
        "SELECT k FROM t WHERE s = 's5' OR v > 1400 ORDER BY k",
        "SELECT count(*), sum(k) FROM t WHERE s <> 'x' AND k > 10",
        "SELECT count(*) FROM t WHERE s IS NOT NULL OR k >= 140",
    ] {
        let a = text(&run(&ours, q).await);
        let b = text(&run(&theirs, q).await);
        assert_eq!(a, b, "{q}");
    }
    let n = text(&run(&ours, "SELECT count(*) FROM t WHERE s IS NULL").await);
    assert!(n.contains("| 50 "), "{n}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hive_partitioned_directories_read_as_datafusion_reads_them() {
    use datafusion::arrow::array::{ArrayRef, Int64Array};
    let dir = tempfile::tempdir().unwrap();
    for (year, from) in [("2023", 0i64), ("2024", 1000)] {
        let sub = dir.path().join(format!("year={year}"));
        std::fs::create_dir_all(&sub).unwrap();
        let k: ArrayRef = Arc::new(Int64Array::from_iter_values(from..from + 500));
        let batch = RecordBatch::try_from_iter_with_nullable([("k", k, true)]).unwrap();
        let f = std::fs::File::create(sub.join("part-0.parquet")).unwrap();
        let mut w =
            datafusion::parquet::arrow::ArrowWriter::try_new(f, batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }
    let ours = SessionContext::new_with_config(config());
    register_gpu_parquet_format(&ours).unwrap();
    let theirs = SessionContext::new_with_config(config());
    for (ctx, format) in [(&ours, "GPUPARQUET"), (&theirs, "PARQUET")] {
        let sql = format!(
            "CREATE EXTERNAL TABLE t STORED AS {format} LOCATION '{}'",
            s(dir.path())
        );
        run(ctx, &sql).await;
    }
    for q in [
        "SELECT year, count(*), sum(k) FROM t GROUP BY year ORDER BY year",
        "SELECT k, year FROM t WHERE year = '2024' AND k < 1003 ORDER BY k",
        "SELECT count(*) FROM t WHERE year = '2023' OR k > 1490",
    ] {
        let a = text(&run(&ours, q).await);
        let b = text(&run(&theirs, q).await);
        assert_eq!(a, b, "{q}");
        assert!(a.lines().count() > 4, "{q}: {a}");
    }
}

/// The footers a query reads are kept in the session's file metadata cache, as DataFusion's
/// own scan keeps its own (on the host, where its reader scans, they are its own), and the
/// next query is answered from them alike; the files' statistics are kept in the session's
/// statistics cache, as `register_parquet` keeps them (not read again at every query's
/// planning).
#[tokio::test]
async fn footers_are_kept_in_the_session_cache() {
    let t = &data().snappy;
    let ctx = SessionContext::new_with_config(config());
    let always = GpuScanOptions {
        host_when_faster: false,
        ..GpuScanOptions::default()
    };
    register_gpu_parquet(&ctx, "orders", &s(&t.orders), always)
        .await
        .unwrap();
    let sql = "SELECT o_orderstatus, count(*), sum(o_totalprice) FROM orders GROUP BY 1 ORDER BY 1";
    let first = text(&run(&ctx, sql).await);
    let cache = ctx.runtime_env().cache_manager.get_file_metadata_cache();
    let mut ours = 0;
    for entry in std::fs::read_dir(&t.orders).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_none_or(|e| e != "parquet") {
            continue;
        }
        let key = object_store::path::Path::from_filesystem_path(&p).unwrap();
        let e = cache
            .get(&key)
            .unwrap_or_else(|| panic!("no footer cached for {}", p.display()));
        let info = e.file_metadata.extra_info();
        if on_gpu() {
            let f = (e.file_metadata.as_any())
                .downcast_ref::<cuparquet_datafusion::CachedFooter>()
                .unwrap_or_else(|| panic!("{}: {info:?}", p.display()));
            assert_eq!(f.0.file_len, std::fs::metadata(&p).unwrap().len());
            assert_eq!(info["reader"], "cuparquet");
        } else {
            // DataFusion's own reader scans on the host, and caches its footers as it does
            assert!(
                !info.contains_key("reader") && info.contains_key("page_index"),
                "{}: {info:?}",
                p.display()
            );
        }
        ours += 1;
    }
    assert!(ours > 1, "{ours} files");
    let stats = (ctx.runtime_env().cache_manager)
        .get_file_statistic_cache()
        .expect("the session's statistics cache");
    assert_eq!(stats.len(), ours, "statistics cached per file");
    assert_eq!(text(&run(&ctx, sql).await), first);
    assert_eq!(first, text(&run(&df_ctx(t).await, sql).await));
}

/// Where the GPU is not expected to win (`host_when_faster`, on by default) the scan decodes
/// on the host through DataFusion's reader, its `Exact` filters applied as that reader's row
/// filters; where it is, on the GPU. The answers are DataFusion's either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_scan_decodes_where_it_is_faster() {
    let t = &data().snappy;
    // (the placement of the scan alone: an aggregation over it on the device is another test's)
    let ctx = gpu_ctx(
        t,
        GpuScanOptions {
            device_aggregation: false,
            ..GpuScanOptions::default()
        },
    )
    .await;
    let df = df_ctx(t).await;
    for (sql, on_device) in [
        // the filter keeps almost every row: the host
        (
            "SELECT l_returnflag, count(*) AS n, sum(l_quantity) AS q FROM lineitem
               WHERE l_shipdate <= date '1998-09-02' GROUP BY 1 ORDER BY 1",
            false,
        ),
        // a few percent of the rows: the GPU
        (tpch::Q6, true),
        // no column, no filter: the host
        ("SELECT count(*) AS n FROM lineitem", false),
        // a LIKE and a flag, counted: the GPU
        (
            "SELECT count(*) AS n FROM lineitem WHERE l_comment LIKE '%ironic%' AND l_returnflag = 'R'",
            true,
        ),
    ] {
        let (out, plan) = executed(&ctx, sql).await;
        assert_eq!(text(&out), text(&run(&df, sql).await), "{sql}");
        if on_gpu() {
            let batches = metric(&plan, "cuparquet_device_batches");
            assert_eq!(batches > 0, on_device, "{sql}: {batches} device batches");
            // EXPLAIN ANALYZE counts the partitions placed on the host (a count(*) the
            // statistics answer runs no scan)
            let placed = metric(&plan, "cuparquet_placed_on_host");
            if on_device || scanned(&plan) > 0 {
                assert_eq!(placed > 0, !on_device, "{sql}: {placed} partitions placed");
            }
        }
    }
}

/// Filters taken as `Exact` where a GPU was, run where the scan decodes on the host: DataFusion's
/// reader applies them as its row filters, and the scan's rows are those they keep (a filter
/// left to DataFusion's `FilterExec` is not applied by the scan).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_filters_decoded_on_the_host_keep_their_rows() {
    use datafusion::datasource::physical_plan::{FileScanConfig, FileScanConfigBuilder};
    use datafusion::datasource::source::DataSourceExec;
    use datafusion::physical_expr::expressions::{BinaryExpr, Column};
    let t = &data().snappy;
    let host = GpuScanOptions {
        device: cuparquet::Device::Host,
        ..GpuScanOptions::default()
    };
    let ctx = gpu_ctx(t, host).await;
    let sql = "SELECT l_orderkey, l_quantity FROM lineitem
       WHERE l_quantity > 30 AND upper(l_shipmode) = 'AIR' AND l_orderkey < 9000";
    let scan = scan_node(&physical(&ctx, sql).await);
    let fsc = (scan.downcast_ref::<DataSourceExec>().unwrap().data_source())
        .downcast_ref::<FileScanConfig>()
        .unwrap()
        .clone();
    let source = fsc
        .file_source()
        .downcast_ref::<cuparquet_datafusion::GpuParquetSource>()
        .unwrap()
        .clone();
    // the comparisons of a column with a literal, as a GPU would have taken them
    let exact: Vec<_> = datafusion::physical_expr::split_conjunction(
        &datafusion::datasource::physical_plan::FileSource::filter(&source).expect("a predicate"),
    )
    .into_iter()
    .filter(|c| {
        c.downcast_ref::<BinaryExpr>()
            .is_some_and(|b| b.left().downcast_ref::<Column>().is_some())
    })
    .cloned()
    .collect();
    assert_eq!(exact.len(), 2, "{exact:?}");
    let fsc = FileScanConfigBuilder::from(fsc)
        .with_source(Arc::new(source.with_row_filters(exact)))
        .build();
    let exec: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(fsc);
    let got = collect(exec, ctx.task_ctx()).await.unwrap();
    let rows: usize = got.iter().map(|b| b.num_rows()).sum();
    let want = run(
        &df_ctx(t).await,
        "SELECT count(*) AS n FROM lineitem WHERE l_quantity > 30 AND l_orderkey < 9000",
    )
    .await;
    let want = want[0]
        .column(0)
        .as_any()
        .downcast_ref::<datafusion::arrow::array::Int64Array>()
        .unwrap()
        .value(0) as usize;
    assert!(want > 0);
    assert_eq!(rows, want);
}
