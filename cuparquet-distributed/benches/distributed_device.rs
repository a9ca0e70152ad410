//! TPC-H-like queries over cuparquet's scan on one machine, then under datafusion-distributed
//! with 1 and 2 workers in this process (on the GPU machine: both sharing its one GPU, each
//! with its own memory budget), and DataFusion's own scan as the answer and the reference.
//!
//! `bench-distributed_device` — environment:
//! - `CUPARQUET_BENCH_DIR` (default `target/bench-data`), `CUPARQUET_BENCH_ORDERS` (default
//!   6,000,000: about 24M lineitem rows), `CUPARQUET_BENCH_FILES` (default 8): the tables of
//!   `cuparquet_datafusion::tpch::bench_tables`, shared with `bench-sql_device`;
//! - `CUPARQUET_BENCH_ROUNDS` (default 5);
//! - `CUPARQUET_BENCH_WORKER_BUDGET` (default 8GiB): each worker's memory budget.
//!
//! Each query runs once per setup as a warm-up whose answer must equal DataFusion's; then the
//! setups take turns, round by round. Figures: best and median wall time from `ctx.sql` to the
//! collected answer.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cuparquet_datafusion::{tpch, GpuScanOptions};
use cuparquet_distributed::{coordinator_state, LocalCluster, WorkerOptions};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::prelude::{SessionConfig, SessionContext};

const QUERIES: [(&str, &str); 4] = [
    ("Q1", tpch::Q1),
    ("Q3", tpch::Q3),
    ("Q6", tpch::Q6),
    ("Q12", tpch::Q12),
];

fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

async fn register(ctx: &SessionContext, root: &std::path::Path, cuparquet: bool) {
    let options = GpuScanOptions::default();
    tpch::register_tables(ctx, root, cuparquet.then_some(&options))
        .await
        .unwrap();
}

async fn run(ctx: &SessionContext, sql: &str) -> (Duration, String) {
    let t = Instant::now();
    let out = ctx.sql(sql).await.unwrap().collect().await.unwrap();
    (
        t.elapsed(),
        pretty_format_batches(&out).unwrap().to_string(),
    )
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
    let budget = std::env::var("CUPARQUET_BENCH_WORKER_BUDGET")
        .ok()
        .map(|v| cuparquet::config::parse_size("CUPARQUET_BENCH_WORKER_BUDGET", &v).unwrap())
        .unwrap_or(8 << 30);
    let root = tpch::bench_tables(&dir, orders, files).expect("writing the tables");
    let gpu = cuparquet::device::probe_cuda();
    println!(
        "machine: {cores} cores, {} GPU(s) ({}); {orders} orders in {files} files per table; worker budget {} MiB; {rounds} rounds",
        gpu.devices,
        gpu.detail,
        budget >> 20
    );

    let df = SessionContext::new_with_config(SessionConfig::new().with_target_partitions(cores));
    register(&df, &root, false).await;
    let single =
        SessionContext::new_with_config(SessionConfig::new().with_target_partitions(cores));
    register(&single, &root, true).await;
    let options = WorkerOptions {
        device: None,
        memory_budget: Some(budget),
        ..WorkerOptions::default()
    };
    // each worker with its share of the cores, as on a machine of its own
    let one = LocalCluster::start(1, options.clone(), cores).unwrap();
    let two = LocalCluster::start(2, options, (cores / 2).max(1)).unwrap();
    let d1 = SessionContext::from(coordinator_state(
        SessionConfig::new().with_target_partitions(cores),
        one.resolver(),
    ));
    register(&d1, &root, true).await;
    // every setup plans for the machine's cores: with fewer partitions than cores, DataFusion
    // puts no round-robin repartition after a scan of as many files, and the aggregations above
    // it ran on a worker's four files' partitions only (Q1 on 2 workers: 0.55–0.60× 1 worker, the
    // partial aggregate 2.1 s of compute on 8 partitions instead of 16)
    let d2 = SessionContext::from(coordinator_state(
        SessionConfig::new().with_target_partitions(cores),
        two.resolver(),
    ));
    register(&d2, &root, true).await;
    let setups: [(&str, &SessionContext); 4] = [
        ("one machine", &single),
        ("1 worker", &d1),
        ("2 workers", &d2),
        ("DataFusion's scan", &df),
    ];
    println!("| query | cuparquet, one machine | 1 worker | 2 workers | DataFusion's scan | 2 workers vs 1 |");
    println!("|---|---|---|---|---|---|");
    for (name, sql) in QUERIES {
        let (_, want) = run(&df, sql).await;
        for (setup, ctx) in setups {
            let (_, got) = run(ctx, sql).await;
            assert_eq!(
                got, want,
                "{name} through {setup} differs from DataFusion's scan"
            );
        }
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); setups.len()];
        for _ in 0..rounds {
            for (i, (_, ctx)) in setups.iter().enumerate() {
                times[i].push(run(ctx, sql).await.0);
            }
        }
        let stats: Vec<(f64, f64)> = times
            .into_iter()
            .map(|mut v| {
                v.sort();
                (v[0].as_secs_f64() * 1e3, v[v.len() / 2].as_secs_f64() * 1e3)
            })
            .collect();
        let cell = |(b, m): (f64, f64)| format!("{b:.1} ms ({m:.1})");
        println!(
            "| {name} | {} | {} | {} | {} | {:.2}× |",
            cell(stats[0]),
            cell(stats[1]),
            cell(stats[2]),
            cell(stats[3]),
            stats[1].0 / stats[2].0,
        );
    }
    // CUPARQUET_BENCH_EXPLAIN=Q1 (a query's name): each setup's EXPLAIN ANALYZE of it (stages,
    // tasks, the scans' load and copy-back times), to see where a setup's time goes
    let explain = std::env::var("CUPARQUET_BENCH_EXPLAIN").unwrap_or_default();
    for (name, sql) in QUERIES.iter().filter(|(n, _)| *n == explain) {
        for (setup, ctx) in setups {
            let (_, plan) = run(ctx, &format!("EXPLAIN ANALYZE {sql}")).await;
            println!("EXPLAIN ANALYZE {name}, {setup}:\n{plan}");
        }
    }
    // where the batches were decoded, from the workers' scan metrics
    let (_, explain) = run(&d2, &format!("EXPLAIN ANALYZE {}", tpch::Q6)).await;
    for line in explain
        .lines()
        .filter(|l| l.contains("DistributedLeafExec"))
    {
        let m: Vec<&str> = line
            .split(", ")
            .filter(|m| m.contains("batches=") && m.contains("cuparquet"))
            .collect();
        println!("Q6 on 2 workers: {}", m.join(", "));
    }
}
