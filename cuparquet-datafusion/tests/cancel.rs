//! Cancellation and concurrency through the provider: streams dropped mid-read (after their
//! first batch, by a `LIMIT`, by a cancelled query) stop their scan threads and their reads,
//! and 32 queries at once over one device answer as DataFusion's own scan does while one over a
//! corrupt file fails naming it. After each, the scan threads have exited and, on a GPU, the
//! device and pinned memory cuparquet holds are back to where they were (the high-water marks
//! are printed). On the GPU (`cuda:0`) where there is one, else on the host;
//! `CUPARQUET_REQUIRE_GPU=1` makes a run without one a failure.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use cuparquet_datafusion::{register_gpu_parquet, tpch, GpuScanOptions};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::metrics::MetricsSet;
use datafusion::physical_plan::{collect, execute_stream, ExecutionPlan};
use datafusion::prelude::{SessionConfig, SessionContext};
use futures::StreamExt;

struct Data {
    _dir: tempfile::TempDir,
    tables: tpch::Tables,
    /// A copy of `orders` with one file's column data overwritten.
    broken: std::path::PathBuf,
}

fn data() -> &'static Data {
    static DATA: OnceLock<Data> = OnceLock::new();
    DATA.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(20_000))
            .set_data_page_row_count_limit(2_000)
            .build();
        let tables = tpch::write_tables(&dir.path().join("t"), 100_000, 8, &props).unwrap();
        let broken = dir.path().join("broken");
        std::fs::create_dir(&broken).unwrap();
        for k in 0..8 {
            let name = format!("part-{k}.parquet");
            let mut bytes = std::fs::read(tables.orders.join(&name)).unwrap();
            if k == 5 {
                bytes[4..4000].fill(0xA5);
            }
            std::fs::write(broken.join(name), bytes).unwrap();
        }
        Data {
            _dir: dir,
            tables,
            broken,
        }
    })
}

/// `cuda:0` where there is a GPU (its handle), else the host.
fn device() -> (GpuScanOptions, Option<Arc<cuparquet::device::Gpu>>) {
    let mut o = GpuScanOptions {
        batch_rows: Some(4096),
        ..GpuScanOptions::default()
    };
    if cuparquet::device::probe_cuda().devices > 0 {
        o.set("device", "cuda:0").unwrap();
        (o, Some(cuparquet::device::gpu(0).unwrap()))
    } else {
        assert!(
            std::env::var("CUPARQUET_REQUIRE_GPU").as_deref() != Ok("1"),
            "CUPARQUET_REQUIRE_GPU=1 but there is no GPU"
        );
        eprintln!("no GPU: the scans run on the host (device and pinned memory not checked)");
        o.set("device", "host").unwrap();
        (o, None)
    }
}

async fn ctx(options: Option<&GpuScanOptions>) -> SessionContext {
    let ctx = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(4));
    data().tables.register(&ctx, options).await.unwrap();
    ctx
}

/// The process's scan threads (one per file a partition is reading).
fn scan_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim() == "cuparquet-scan")
        .count()
}

/// Waits for every scan thread to exit (a minute at most: one still running then is a
/// failure, a scan that did not stop).
fn threads_exit(what: &str) {
    let t0 = Instant::now();
    while scan_threads() > 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{what}: {} scan threads still running after a minute",
            scan_threads()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The metrics of the scans of `plan`: their counters stay live after the plan is dropped
/// (a cancelled query drops its plan, and with it the tasks DataFusion spawned to drive it).
fn metrics(plan: &Arc<dyn ExecutionPlan>) -> Vec<MetricsSet> {
    let mut all: Vec<MetricsSet> = Vec::new();
    if plan.name() == "DataSourceExec" {
        all.extend(plan.metrics());
    }
    for c in plan.children() {
        all.extend(metrics(c));
    }
    all
}

/// The rows the scans handed over so far (on the host DataFusion's own reader decodes them).
fn rows_read(sets: &[MetricsSet]) -> usize {
    sets.iter().filter_map(|m| m.output_rows()).sum()
}

/// The rows a stopped scan read, checked to be fewer than the table's and to stay so.
fn reads_stopped(what: &str, sets: &[MetricsSet], total: usize) {
    threads_exit(what);
    // tasks aborted by the drop finish the batch they are decoding (DataFusion's own reader on
    // the host decodes on them): the count settles within a minute, or the scan did not stop
    let t0 = Instant::now();
    let mut read = rows_read(sets);
    loop {
        std::thread::sleep(Duration::from_millis(50));
        let now = rows_read(sets);
        if now == read {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{what}: still reading after a minute ({now} rows)"
        );
        read = now;
    }
    assert!(read < total, "{what}: {read} rows read of {total}");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(rows_read(sets), read, "{what}: reads went on");
    eprintln!("{what}: {read} rows read of {total}, every scan thread exited");
}

/// Device and pinned memory back to `base` (bytes live, pinned bytes), the high-water mark
/// printed.
fn memory_back(what: &str, gpu: &Option<Arc<cuparquet::device::Gpu>>, base: (u64, u64)) {
    let Some(g) = gpu else { return };
    g.release_pinned();
    let now = (g.live_bytes(), g.pinned_bytes());
    eprintln!(
        "{what}: device memory {} bytes live (before: {}), high-water {} MiB; pinned {} bytes (before: {})",
        now.0,
        base.0,
        g.peak_live_bytes() >> 20,
        now.1,
        base.1
    );
    assert_eq!(now, base, "{what}: device and pinned memory not given back");
}

fn baseline(gpu: &Option<Arc<cuparquet::device::Gpu>>) -> (u64, u64) {
    gpu.as_ref().map_or((0, 0), |g| {
        g.release_pinned();
        g.reset_peak_live_bytes();
        (g.live_bytes(), g.pinned_bytes())
    })
}

/// One test, its parts one after another: they count the process's scan threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancellation_and_concurrency() {
    dropped_streams_stop_their_scans().await;
    thirty_two_queries_share_one_device().await;
}

async fn dropped_streams_stop_their_scans() {
    let (options, gpu) = device();
    let ctx = ctx(Some(&options)).await;
    let total = data().tables.lineitem_rows;
    let base = baseline(&gpu);
    let plan = |sql: &'static str| {
        let ctx = ctx.clone();
        async move {
            ctx.sql(sql)
                .await
                .unwrap()
                .create_physical_plan()
                .await
                .unwrap()
        }
    };

    // a stream dropped after its first batch
    let p = plan("SELECT * FROM lineitem").await;
    let mut stream = execute_stream(Arc::clone(&p), ctx.task_ctx()).unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert!(first.num_rows() > 0);
    drop((first, stream));
    reads_stopped(
        "a stream dropped after its first batch",
        &metrics(&p),
        total,
    );
    memory_back("a stream dropped after its first batch", &gpu, base);

    // LIMIT: the scan stops once the rows are there
    let p = plan("SELECT l_orderkey, l_comment FROM lineitem LIMIT 10").await;
    let got = collect(Arc::clone(&p), ctx.task_ctx()).await.unwrap();
    assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), 10);
    drop(got);
    reads_stopped("LIMIT 10", &metrics(&p), total);
    memory_back("LIMIT 10", &gpu, base);

    // a query cancelled while its scans are reading: its task aborted and its plan dropped, as
    // DataFusion's callers cancel one (the plan owns the tasks its RepartitionExec spawned to
    // drive the scans). The counters are taken as the plan is dropped: the files opened by then.
    let p = plan("SELECT l_returnflag, sum(l_extendedprice) FROM lineitem GROUP BY 1").await;
    let task = tokio::spawn(collect(Arc::clone(&p), ctx.task_ctx()));
    let t0 = Instant::now();
    while rows_read(&metrics(&p)) == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the query read nothing"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    task.abort();
    assert!(task.await.is_err_and(|e| e.is_cancelled()));
    let sets = metrics(&p);
    drop(p);
    reads_stopped("a cancelled query", &sets, total);
    memory_back("a cancelled query", &gpu, base);
}

fn text(batches: &[RecordBatch]) -> String {
    pretty_format_batches(batches).unwrap().to_string()
}

async fn thirty_two_queries_share_one_device() {
    let (options, gpu) = device();
    let ours = ctx(Some(&options)).await;
    register_gpu_parquet(
        &ours,
        "broken",
        &format!("{}/", data().broken.display()),
        options.clone(),
    )
    .await
    .unwrap();
    let theirs = ctx(None).await;
    let queries: Vec<String> = (0..32)
        .map(|k| match k % 4 {
            0 => format!(
                "SELECT l_returnflag, count(*), sum(l_quantity) FROM lineitem WHERE l_orderkey % 32 = {k} GROUP BY 1 ORDER BY 1"
            ),
            1 => format!(
                "SELECT count(*), max(l_comment) FROM lineitem WHERE l_quantity < {} AND l_shipmode <> 'AIR'",
                k + 1
            ),
            2 => format!(
                "SELECT o_orderstatus, count(*), min(o_totalprice) FROM orders WHERE o_orderkey > {} GROUP BY 1 ORDER BY 1",
                k * 1000
            ),
            _ => format!(
                "SELECT l_orderkey, l_linenumber, l_comment FROM lineitem ORDER BY l_orderkey DESC, l_linenumber LIMIT {k}"
            ),
        })
        .collect();
    let mut want = Vec::new();
    for q in &queries {
        want.push(text(&theirs.sql(q).await.unwrap().collect().await.unwrap()));
    }
    let base = baseline(&gpu);
    let mut tasks = Vec::new();
    for q in queries.clone() {
        let ctx = ours.clone();
        tasks.push(tokio::spawn(
            async move { ctx.sql(&q).await?.collect().await },
        ));
    }
    // beside them, a query whose scan meets a corrupt file
    let ctx = ours.clone();
    let broken = tokio::spawn(async move {
        ctx.sql("SELECT sum(o_orderkey), count(o_comment) FROM broken")
            .await?
            .collect()
            .await
    });
    for (k, t) in tasks.into_iter().enumerate() {
        let got = t
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{}: {e}", queries[k]));
        assert_eq!(text(&got), want[k], "{}", queries[k]);
    }
    let e = broken
        .await
        .unwrap()
        .expect_err("a corrupt file fails its query")
        .to_string();
    assert!(e.contains("part-5.parquet"), "{e}");
    threads_exit("32 queries");
    memory_back("32 queries and a failing one", &gpu, base);
}
