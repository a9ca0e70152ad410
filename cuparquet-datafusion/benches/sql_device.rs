//! SQL over cuparquet's scan against DataFusion's own Parquet scan and a `MemTable` of the same
//! batches, in one run, on TPC-H-like tables — and the device→host copy of Q1's columns.
//!
//! `bench-sql_device` — environment:
//! - `CUPARQUET_BENCH_DIR` (default `target/bench-data`): the tables go to
//!   `tpch-<orders>/{lineitem,orders,customer}/part-N.parquet`, written when missing (SNAPPY,
//!   row groups of about 1,000,000 rows, `CUPARQUET_BENCH_FILES` files per table, default 8);
//! - `CUPARQUET_BENCH_ORDERS` (default 6,000,000: about 24M lineitem rows);
//! - `CUPARQUET_BENCH_ROUNDS` (default 5), `CUPARQUET_BENCH_OUT` (JSON lines appended);
//! - `CUPARQUET_BENCH_PARTITIONS` (default: the cores);
//! - `CUPARQUET_BENCH_DEVICES`: CUDA ordinals (e.g. `0,1`) the `cuparquet` scans' partitions
//!   are spread over (scan option `devices`; default: cuda:0 alone);
//! - `CUPARQUET_BENCH_QUERIES` (a comma-separated subset of `Q1`, `Q3`, `Q6`, `Q12`, `LIKE`,
//!   `GROUPBY` (a high-cardinality key, top 10), `GROUPBY-ORDERS` (6M groups), `GROUPBY-ROWS`
//!   (a group per row), `COUNT` (`count(*)`), `LIMIT`) and
//!   `CUPARQUET_BENCH_SCANS` (of `cuparquet`, `cuparquet-noagg` (the partial aggregation
//!   DataFusion's, over the scan's rows: `device_aggregation` off), `cuparquet-gpu` (every query on the GPU:
//!   `host_when_faster` off), `cuparquet-utf8` (strings as `Utf8`: the
//!   session's `schema_force_view_types` off), `cuparquet-inexact`, `cuparquet-host`,
//!   `datafusion`, `memtable`, `memtable-utf8` (the MemTable's string columns cast from
//!   views to `Utf8`)): default all.
//!
//! First, Q1's scan alone (its columns and filter, every partition drained, nothing
//! aggregated) through cuparquet's scan and DataFusion's: the floor a query's scan sets, and
//! when its partitions' first batches come.
//!
//! Each query runs once per scan as a warm-up whose answer must equal DataFusion's; then the
//! scans take turns, round by round. Figures: best and median wall time from `ctx.sql` to the
//! collected answer, warm page cache. Then, for Q1 and Q6, `EXPLAIN ANALYZE`'s metrics
//! (summed over partitions) of the scan, the partial aggregation and any repartition between
//! them, for cuparquet's scans, DataFusion's and the MemTable: what the same aggregation
//! costs over each input.
//!
//! The queries' SQL is also written to `<dir>/queries.json` for other engines (DuckDB:
//! `scripts/py/duckdb_tpch.py`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuparquet::{Device, Scan};
use cuparquet_datafusion::{tpch, GpuScanOptions};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::datasource::MemTable;
use datafusion::prelude::{SessionConfig, SessionContext};

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

const QUERIES: [(&str, &str); 10] = [
    ("Q1", tpch::Q1),
    ("Q3", tpch::Q3),
    ("Q6", tpch::Q6),
    ("Q12", tpch::Q12),
    // a substring filter on a string column and a flag, counted
    (
        "LIKE",
        "SELECT count(*) AS n FROM lineitem WHERE l_comment LIKE '%ironic dep%' AND l_returnflag = 'R'",
    ),
    // a high-cardinality GROUP BY, top 10
    (
        "GROUPBY",
        "SELECT l_partkey, sum(l_quantity) AS q FROM lineitem GROUP BY l_partkey ORDER BY q DESC, l_partkey LIMIT 10",
    ),
    // 6M groups (an order's lines), about 250,000 in each 1M-row batch: TPC-H Q18's inner query
    (
        "GROUPBY-ORDERS",
        "SELECT count(*) AS n FROM (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 250) t",
    ),
    // a group per row (24M groups): where a partial aggregation reduces nothing
    (
        "GROUPBY-ROWS",
        "SELECT count(*) AS n FROM (SELECT l_orderkey, l_linenumber FROM lineitem GROUP BY l_orderkey, l_linenumber HAVING sum(l_quantity) > 49) t",
    ),
    ("COUNT", "SELECT count(*) AS n FROM lineitem"),
    // a LIMIT that stops the scan early (the count of what it kept: the same on every scan)
    (
        "LIMIT",
        "SELECT count(*) AS n FROM (SELECT l_orderkey FROM lineitem WHERE l_shipmode = 'AIR' LIMIT 1000) t",
    ),
];

fn config(partitions: usize) -> SessionConfig {
    SessionConfig::new().with_target_partitions(partitions)
}

async fn gpu_ctx(root: &Path, cfg: SessionConfig, device: Device) -> SessionContext {
    gpu_ctx_with(root, cfg, GpuScanOptions::default().with_device(device)).await
}

async fn gpu_ctx_with(root: &Path, cfg: SessionConfig, options: GpuScanOptions) -> SessionContext {
    let ctx = SessionContext::new_with_config(cfg);
    tpch::register_tables(&ctx, root, Some(&options))
        .await
        .unwrap();
    ctx
}

async fn df_ctx(root: &Path, partitions: usize) -> SessionContext {
    let ctx = SessionContext::new_with_config(config(partitions));
    tpch::register_tables(&ctx, root, None).await.unwrap();
    ctx
}

/// Whether the comma-separated list in environment variable `key` (all when unset) has `name`.
fn wanted(key: &str, name: &str) -> bool {
    std::env::var(key)
        .map(|v| v.split(',').any(|x| x.trim() == name))
        .unwrap_or(true)
}

/// Q1's scan alone, as its plan runs it (the query's columns and filter, every partition
/// drained at once, nothing aggregated): best and median wall time, and when the partitions'
/// first batches came (median and latest, over the partitions of the best round).
async fn scan_floor(ctx: &SessionContext, rounds: usize) -> String {
    let sql = "SELECT l_returnflag, l_linestatus, l_quantity, l_extendedprice, l_discount, l_tax \
        FROM lineitem WHERE l_shipdate <= date '1998-12-01' - interval '90' day";
    let mut runs = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let streams = ctx
            .sql(sql)
            .await
            .unwrap()
            .execute_stream_partitioned()
            .await
            .unwrap();
        let tasks: Vec<_> = streams
            .into_iter()
            .map(|mut s| {
                tokio::spawn(async move {
                    use futures::StreamExt;
                    let (mut first, mut batches, mut rows) = (None, 0usize, 0usize);
                    while let Some(b) = s.next().await {
                        let b = b.unwrap();
                        first.get_or_insert_with(|| t.elapsed());
                        batches += 1;
                        rows += b.num_rows();
                    }
                    (first, batches, rows)
                })
            })
            .collect();
        let mut firsts = Vec::new();
        let (mut batches, mut rows) = (0, 0);
        for h in tasks {
            let (f, b, r) = h.await.unwrap();
            firsts.extend(f);
            batches += b;
            rows += r;
        }
        firsts.sort();
        runs.push((t.elapsed(), firsts, batches, rows));
    }
    runs.sort_by_key(|r| r.0);
    let (best, firsts, batches, rows) = &runs[0];
    let median = runs[runs.len() / 2].0;
    let first = |i: usize| firsts.get(i).map_or(f64::NAN, |d| ms(*d));
    format!(
        "{:.1} ms best (median {:.1}); {} partitions with data, {batches} batches, {rows} rows; first batches: earliest {:.1} ms, median {:.1}, latest {:.1}",
        ms(*best),
        ms(median),
        firsts.len(),
        first(0),
        first(firsts.len() / 2),
        first(firsts.len().saturating_sub(1)),
    )
}

/// The tables in memory as `from` scans them (the same batches), partitioned as it yields
/// them: as scanned (string columns as views, as DataFusion's schema gives them by default),
/// and with those columns cast to `Utf8`, to measure what views save DataFusion's operators.
/// Each table is scanned once for both.
async fn mem_ctxs(from: &SessionContext, partitions: usize) -> (SessionContext, SessionContext) {
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let (views, utf8) = (
        SessionContext::new_with_config(config(partitions)),
        SessionContext::new_with_config(config(partitions)),
    );
    for t in tpch::TABLE_NAMES {
        let df = from.table(t).await.unwrap();
        let schema = Arc::new(df.schema().as_arrow().clone());
        let parts = df.collect_partitioned().await.unwrap();
        let as_utf8 = |f: &Field| match f.data_type() {
            DataType::Utf8View => f.clone().with_data_type(DataType::Utf8),
            _ => f.clone(),
        };
        let to = Arc::new(Schema::new(
            schema
                .fields()
                .iter()
                .map(|f| as_utf8(f))
                .collect::<Vec<_>>(),
        ));
        let cast: Vec<Vec<RecordBatch>> = (parts.iter())
            .map(|p| {
                (p.iter())
                    .map(|b| {
                        let cols = (b.columns().iter().zip(to.fields()))
                            .map(|(c, f)| datafusion::arrow::compute::cast(c, f.data_type()))
                            .collect::<Result<Vec<_>, _>>()
                            .unwrap();
                        RecordBatch::try_new(Arc::clone(&to), cols).unwrap()
                    })
                    .collect()
            })
            .collect();
        views
            .register_table(t, Arc::new(MemTable::try_new(schema, parts).unwrap()))
            .unwrap();
        utf8.register_table(t, Arc::new(MemTable::try_new(to, cast).unwrap()))
            .unwrap();
    }
    (views, utf8)
}

async fn run(ctx: &SessionContext, sql: &str) -> (Duration, Vec<RecordBatch>) {
    let t = Instant::now();
    let out = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    (t.elapsed(), out)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn best_median(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    (ms(v[0]), ms(v[v.len() / 2]))
}

/// Q1's columns loaded into device memory, then copied back: GB/s of the copy (bytes of the
/// host batches over the time of every `to_host`, one thread, then 4 threads).
fn device_to_host(root: &Path, rounds: usize) -> Option<String> {
    if cuparquet::device::probe_cuda().devices == 0 {
        return None;
    }
    let files: Vec<PathBuf> = {
        let mut v: Vec<_> = std::fs::read_dir(root.join("lineitem"))
            .ok()?
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
            .collect();
        v.sort();
        v
    };
    let cols = [
        "l_returnflag",
        "l_linestatus",
        "l_quantity",
        "l_extendedprice",
        "l_discount",
        "l_tax",
        "l_shipdate",
    ];
    let mut batches = Vec::new();
    for f in &files {
        let r = Scan::builder(f)
            .with_columns(cols)
            .with_device(Device::Cuda(0))
            .build()
            .unwrap();
        batches.extend(r.load().unwrap().batches);
    }
    let mut lines = Vec::new();
    for threads in [1usize, 4] {
        let mut times = Vec::new();
        let mut bytes = 0;
        for _ in 0..rounds {
            let t = Instant::now();
            let chunk = batches.len().div_ceil(threads);
            bytes = std::thread::scope(|s| {
                let hs: Vec<_> = batches
                    .chunks(chunk)
                    .map(|part| {
                        s.spawn(move || {
                            part.iter()
                                .map(|b| b.to_host().unwrap().get_array_memory_size())
                                .sum::<usize>()
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
            });
            times.push(t.elapsed());
        }
        let (best, med) = best_median(times);
        lines.push(format!(
            "device→host of Q1's 7 columns ({} batches, {:.2} GB), {threads} thread(s): best {best:.1} ms ({:.1} GB/s), median {med:.1} ms",
            batches.len(),
            bytes as f64 / 1e9,
            bytes as f64 / 1e6 / best,
        ));
    }
    Some(lines.join("\n"))
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench(cores));
}

async fn bench(cores: usize) {
    let dir = PathBuf::from(
        std::env::var("CUPARQUET_BENCH_DIR").unwrap_or_else(|_| "target/bench-data".into()),
    );
    let orders = env_usize("CUPARQUET_BENCH_ORDERS", 6_000_000);
    let files = env_usize("CUPARQUET_BENCH_FILES", 8);
    let rounds = env_usize("CUPARQUET_BENCH_ROUNDS", 5).max(1);
    let partitions = env_usize("CUPARQUET_BENCH_PARTITIONS", cores);
    let root = tpch::bench_tables(&dir, orders, files).expect("writing the tables");
    let queries: serde_json::Map<String, serde_json::Value> = QUERIES
        .iter()
        .map(|(n, q)| (n.to_string(), serde_json::Value::from(*q)))
        .collect();
    std::fs::write(
        root.join("queries.json"),
        serde_json::to_vec_pretty(&queries).unwrap(),
    )
    .unwrap();

    let gpu_device = if cuparquet::device::probe_cuda().devices > 0 {
        Device::Cuda(0)
    } else {
        Device::Host
    };
    // the device scans: on cuda:0, or their partitions spread over CUPARQUET_BENCH_DEVICES
    let devices: Vec<usize> = std::env::var("CUPARQUET_BENCH_DEVICES")
        .map(|v| {
            cuparquet::scan::parse_device_list(&v)
                .expect("CUPARQUET_BENCH_DEVICES: ordinals, e.g. 0,1")
        })
        .unwrap_or_default();
    let base = GpuScanOptions::default()
        .with_device(gpu_device)
        .with_devices(devices.iter().copied());
    let gpu = gpu_ctx_with(&root, config(partitions), base.clone()).await;
    // the filters pruning only (Inexact: DataFusion's FilterExec over every row read)
    let inexact = gpu_ctx_with(
        &root,
        config(partitions),
        GpuScanOptions {
            row_filter: false,
            ..base.clone()
        },
    )
    .await;
    // every query on the GPU (host_when_faster off)
    let always = gpu_ctx_with(
        &root,
        config(partitions),
        GpuScanOptions {
            host_when_faster: false,
            ..base.clone()
        },
    )
    .await;
    // the partial aggregation by DataFusion over the scan's rows (device aggregation off)
    let noagg = gpu_ctx_with(
        &root,
        config(partitions),
        GpuScanOptions {
            device_aggregation: false,
            ..base.clone()
        },
    )
    .await;
    let host = gpu_ctx(&root, config(partitions), Device::Host).await;
    let df = df_ctx(&root, partitions).await;
    let (mem, mem_utf8) = mem_ctxs(&inexact, partitions).await;
    // strings as Utf8 (the session's schema_force_view_types off), not as views
    let utf8 = {
        let mut cfg = config(partitions);
        cfg.options_mut().execution.parquet.schema_force_view_types = false;
        gpu_ctx_with(&root, cfg, base.clone()).await
    };
    let scans: [(&str, &SessionContext); 9] = [
        ("cuparquet", &gpu),
        ("cuparquet-noagg", &noagg),
        ("cuparquet-gpu", &always),
        ("cuparquet-utf8", &utf8),
        ("cuparquet-inexact", &inexact),
        ("cuparquet-host", &host),
        ("datafusion", &df),
        ("memtable", &mem),
        ("memtable-utf8", &mem_utf8),
    ];
    println!(
        "machine: {cores} cores, {partitions} partitions; cuparquet scan on {}; {orders} orders in {files} files per table; {rounds} rounds",
        if devices.is_empty() {
            gpu_device.to_string()
        } else {
            format!("devices {devices:?}")
        }
    );
    let mut out = std::env::var("CUPARQUET_BENCH_OUT").ok().map(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap()
    });
    let scans: Vec<(&str, &SessionContext)> = scans
        .into_iter()
        .filter(|(s, _)| wanted("CUPARQUET_BENCH_SCANS", s))
        .collect();
    for (scan, ctx) in &scans {
        if matches!(*scan, "cuparquet" | "cuparquet-gpu" | "datafusion") {
            println!("Q1's scan alone, {scan}: {}", scan_floor(ctx, rounds).await);
        }
    }
    // the columns of the rows printed below
    println!("| query | cuparquet | cuparquet, no device aggregation | cuparquet, always the GPU | cuparquet, strings as Utf8 | cuparquet, filters pruning only | cuparquet on host | DataFusion's scan | MemTable | MemTable, strings as Utf8 | vs DataFusion | no device aggregation vs DataFusion | always the GPU vs DataFusion | vs MemTable |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (name, sql) in QUERIES {
        if !wanted("CUPARQUET_BENCH_QUERIES", name) {
            continue;
        }
        let (_, reference) = run(&df, sql).await;
        let want = pretty_format_batches(&reference).unwrap().to_string();
        for &(scan, ctx) in &scans {
            let (_, got) = run(ctx, sql).await;
            let got = pretty_format_batches(&got).unwrap().to_string();
            assert_eq!(
                got, want,
                "{name} through {scan} differs from DataFusion's scan"
            );
        }
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); scans.len()];
        for _ in 0..rounds {
            for (i, (_, ctx)) in scans.iter().enumerate() {
                times[i].push(run(ctx, sql).await.0);
            }
        }
        let stats: Vec<(f64, f64)> = times.into_iter().map(best_median).collect();
        let of = |n: &str| scans.iter().position(|(s, _)| *s == n).map(|i| stats[i]);
        let cell = |n: &str| {
            of(n).map_or("—".to_string(), |(b, m)| {
                format!("{b:.1} ms (median {m:.1})")
            })
        };
        let ratio = |a: &str, b: &str| match (of(a), of(b)) {
            (Some(x), Some(y)) => format!("{:.2}×", x.0 / y.0),
            _ => "—".to_string(),
        };
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell("cuparquet"),
            cell("cuparquet-noagg"),
            cell("cuparquet-gpu"),
            cell("cuparquet-utf8"),
            cell("cuparquet-inexact"),
            cell("cuparquet-host"),
            cell("datafusion"),
            cell("memtable"),
            cell("memtable-utf8"),
            ratio("datafusion", "cuparquet"),
            ratio("datafusion", "cuparquet-noagg"),
            ratio("datafusion", "cuparquet-gpu"),
            ratio("cuparquet", "memtable"),
        );
        if let Some(f) = out.as_mut() {
            let fields: Vec<String> = scans
                .iter()
                .zip(&stats)
                .map(|((s, _), (b, m))| {
                    format!("\"{s}\":{{\"best_ms\":{b:.3},\"median_ms\":{m:.3}}}")
                })
                .collect();
            writeln!(f, "{{\"query\":\"{name}\",\"orders\":{orders},\"files\":{files},\"partitions\":{partitions},{}}}", fields.join(",")).unwrap();
        }
    }
    // where the time goes: the scan's metrics, the partial aggregation's and any repartition
    // between them, summed over partitions (DataFusion's scan and the MemTable beside ours:
    // the same aggregation over other inputs)
    for (name, sql) in [QUERIES[0], QUERIES[2]] {
        let shown = ["cuparquet", "cuparquet-noagg", "datafusion", "memtable"];
        for &(scan, ctx) in scans.iter().filter(|(s, _)| shown.contains(s)) {
            let (_, out) = run(ctx, &format!("EXPLAIN ANALYZE {sql}")).await;
            let text = pretty_format_batches(&out).unwrap().to_string();
            for line in text.lines().filter(|l| {
                l.contains("DataSourceExec")
                    || l.contains("AggregateExec: mode=Partial")
                    || l.contains("RepartitionExec")
            }) {
                let metrics = line
                    .split("metrics=")
                    .nth(1)
                    .unwrap_or(line)
                    .trim_end_matches(['|', ' ']);
                let op = if line.contains("DataSourceExec") {
                    "scan".to_string()
                } else if line.contains("AggregateExec") {
                    "partial aggregate".to_string()
                } else {
                    let p = line.split("partitioning=").nth(1).unwrap_or("");
                    format!("repartition {}", p.split(", input_").next().unwrap_or(""))
                };
                println!("{name} {scan}, {op}: {metrics}");
            }
        }
    }
    if let Some(s) = device_to_host(&root, rounds) {
        println!("{s}");
    }
}
