//! SQL over cuparquet's scan on several workers (datafusion-distributed).
//!
//! ```sh
//! # N workers inside this process, small generated TPC-H-like tables (or DIR/lineitem/…)
//! cargo run --release -p cuparquet-distributed --example distributed-sql -- local 2 [DIR]
//! # a worker process (one per machine, or several sharing a GPU, each with its budget)
//! cargo run --release -p cuparquet-distributed --example distributed-sql -- worker 0.0.0.0:7000 [BUDGET]
//! # a coordinator over running workers (it needs no GPU); DIR must be at the same path on
//! # every worker (a shared file system)
//! cargo run --release -p cuparquet-distributed --example distributed-sql -- coordinator host1:7000,host2:7000 DIR
//! ```

use std::path::{Path, PathBuf};
use std::time::Instant;

use cuparquet_datafusion::{register_gpu_parquet, tpch, GpuScanOptions};
use cuparquet_distributed::{
    coordinator_state, serve, worker, LocalCluster, StaticWorkers, WorkerOptions,
};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::error::{DataFusionError, Result};
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{SessionConfig, SessionContext};

const USAGE: &str =
    "usage: distributed-sql local N [DIR] | worker ADDR [BUDGET] | coordinator ADDR,ADDR,... DIR";

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    match arg(0) {
        Some("worker") => {
            let addr = arg(1).ok_or_else(|| usage("a worker needs an address"))?;
            let memory_budget = arg(2)
                .map(|b| cuparquet::config::parse_size("BUDGET", b))
                .transpose()
                .map_err(|e| usage(&e.to_string()))?;
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| usage(&format!("binding {addr}: {e}")))?;
            println!("worker on {addr}, cuparquet scans on {}", device());
            let options = WorkerOptions {
                device: None,
                memory_budget,
                ..WorkerOptions::default()
            };
            serve(worker(options), listener).await
        }
        Some("coordinator") => {
            let addrs: Vec<&str> = arg(1)
                .ok_or_else(|| usage("the coordinator needs the workers' addresses"))?
                .split(',')
                .collect();
            let dir = arg(2).ok_or_else(|| usage("the coordinator needs the tables' directory"))?;
            queries(StaticWorkers::parse(&addrs)?, Path::new(dir)).await
        }
        Some("local") => {
            let n: usize = arg(1)
                .and_then(|n| n.parse().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| usage("local needs a number of workers"))?;
            let dir = match arg(2) {
                Some(d) => PathBuf::from(d),
                None => generated()?,
            };
            let cores = std::thread::available_parallelism().map_or(4, |c| c.get());
            let cluster = LocalCluster::start(n, WorkerOptions::default(), (cores / n).max(1))?;
            println!(
                "{n} workers at {:?}, cuparquet scans on {}",
                cluster.urls(),
                device()
            );
            queries(cluster.resolver(), &dir).await
        }
        _ => Err(usage("")),
    }
}

fn usage(why: &str) -> DataFusionError {
    DataFusionError::Configuration(format!("{why}\n{USAGE}"))
}

/// Where `Device::Auto` decodes on this machine.
fn device() -> String {
    let p = cuparquet::device::probe_cuda();
    if p.devices > 0 {
        format!("the GPU ({})", p.detail)
    } else {
        format!("the CPU ({})", p.detail)
    }
}

/// Small TPC-H-like tables in the temporary directory, written once.
fn generated() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join("cuparquet-distributed-example");
    if !dir.join("lineitem").is_dir() {
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(100_000))
            .build();
        let t = tpch::write_tables(&dir, 100_000, 4, &props)?;
        println!(
            "wrote {} lineitem rows under {}",
            t.lineitem_rows,
            dir.display()
        );
    }
    Ok(dir)
}

/// Registers the tables of `dir` on a coordinator over `workers` and runs Q1, Q6 and Q3.
async fn queries(workers: StaticWorkers, dir: &Path) -> Result<()> {
    let ctx = SessionContext::from(coordinator_state(SessionConfig::new(), workers));
    for table in ["lineitem", "orders", "customer"] {
        let path = dir.join(table);
        if path.is_dir() {
            let path = format!("{}/", path.display());
            register_gpu_parquet(&ctx, table, &path, GpuScanOptions::default()).await?;
        }
    }
    for (name, sql) in [("Q1", tpch::Q1), ("Q6", tpch::Q6), ("Q3", tpch::Q3)] {
        let t = Instant::now();
        let batches = ctx.sql(sql).await?.collect().await?;
        println!("{name} in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
        println!("{}", pretty_format_batches(&batches)?);
    }
    // the stages, their tasks on the workers, and where each scan decoded its batches
    let explain = ctx
        .sql(&format!("EXPLAIN ANALYZE {}", tpch::Q6))
        .await?
        .collect()
        .await?;
    for line in pretty_format_batches(&explain)?.to_string().lines() {
        if line.contains("Stage") || line.contains("DistributedLeafExec") {
            let metrics: Vec<&str> = line
                .split(", ")
                .filter(|m| {
                    m.contains("Stage") || m.contains("cuparquet_") && m.contains("batches")
                })
                .collect();
            println!("{}", metrics.join(", "));
        }
    }
    Ok(())
}
