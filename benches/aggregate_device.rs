//! The partial aggregation on the device (`cuparquet::compute::Aggregator`, what the DataFusion
//! provider's `DeviceAggregateExec` runs per batch) over the device batches of one load: every
//! batch aggregated on one thread, and the batches shared by `THREADS` threads at once (as an
//! engine's partitions share the GPU), each thread with an aggregator of its own; then one
//! round's stages (kernels waited for, tables uploaded, groups copied back) summed over its
//! batches. Checked first: every group's count adds up to the batch's rows, and the counts
//! and sums per key equal the host's.
//!
//! `bench-aggregate_device` — environment: `CUPARQUET_BENCH_DIR` (default `target/bench-data`),
//! `CUPARQUET_BENCH_ROWS` (24,000,000), `CUPARQUET_BENCH_ROUNDS` (5), `CUPARQUET_BENCH_THREADS`
//! (16).
//!
//! Data: the lineitem-like table of the host benchmarks (key, rnd, qty, price, disc, ship date,
//! flag, comment), SNAPPY with dictionaries, row groups of 1,000,000 rows, written by arrow-rs
//! (the file of `bench-filter_device`).

#[path = "common/mod.rs"]
mod common;

use common::env_usize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::{Float64Type, Int64Type};
use cuparquet::compute::{Aggregate, Aggregator, Expr, GroupBy};
use cuparquet::{Device, LoadedBatch, Scan};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The columns loaded, in the batches' order.
const COLUMNS: [&str; 6] = ["key", "qty", "price", "disc", "ship", "flag"];
const KEY: usize = 0;
const QTY: usize = 1;
const PRICE: usize = 2;
const DISC: usize = 3;
const SHIP: usize = 4;
const FLAG: usize = 5;

fn col(i: usize) -> Box<Expr> {
    Box::new(Expr::Column(i))
}

/// The aggregations measured: few groups with Q1's kind of aggregates, thousands of groups,
/// and every row a group of its own.
fn specs() -> Vec<(&'static str, GroupBy)> {
    let discounted = Expr::Mul(
        col(PRICE),
        Box::new(Expr::Sub(Box::new(Expr::Literal(1.0)), col(DISC))),
    );
    vec![
        (
            "3 groups (flag), Q1's aggregates",
            GroupBy {
                keys: vec![FLAG],
                aggregates: vec![
                    Aggregate::CountRows,
                    Aggregate::Sum(Expr::Column(QTY)),
                    Aggregate::SumFloat(Expr::Column(PRICE)),
                    Aggregate::SumFloat(discounted.clone()),
                    Aggregate::SumFloat(Expr::Mul(
                        Box::new(discounted),
                        Box::new(Expr::Add(Box::new(Expr::Literal(1.0)), col(DISC))),
                    )),
                    Aggregate::Count(Expr::Column(DISC)),
                    Aggregate::SumFloat(Expr::Column(DISC)),
                    Aggregate::Min(SHIP),
                    Aggregate::Max(SHIP),
                ],
            },
        ),
        (
            "2,500 groups (ship), count and sum",
            GroupBy {
                keys: vec![SHIP],
                aggregates: vec![
                    Aggregate::CountRows,
                    Aggregate::SumFloat(Expr::Column(PRICE)),
                ],
            },
        ),
        (
            "a group per row (key), count and sum",
            GroupBy {
                keys: vec![KEY],
                aggregates: vec![Aggregate::CountRows, Aggregate::Sum(Expr::Column(QTY))],
            },
        ),
    ]
}

/// Every batch aggregated by `threads` threads (batch i on thread i % threads), each with its
/// own aggregator: the wall time and the groups.
fn run(
    spec: &GroupBy,
    schema: &arrow::datatypes::SchemaRef,
    batches: &[LoadedBatch],
    threads: usize,
) -> (Duration, usize) {
    let t = Instant::now();
    let groups: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                s.spawn(move || {
                    let mut a = Aggregator::new(spec.clone(), Arc::clone(schema)).unwrap();
                    batches
                        .iter()
                        .skip(k)
                        .step_by(threads)
                        .map(|b| a.aggregate(b).unwrap().len())
                        .sum::<usize>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    (t.elapsed(), groups)
}

/// The groups of `batch` checked against the host: each key's count, and its first float sum
/// (the spec's third aggregate where it has one) to 1e-9 relative.
fn check(name: &str, spec: &GroupBy, batch: &LoadedBatch, a: &mut Aggregator) {
    let g = a.aggregate(batch).unwrap();
    let host: RecordBatch = batch.to_host().unwrap();
    let key =
        arrow::compute::cast(host.column(spec.keys[0]), &arrow::datatypes::DataType::Utf8).unwrap();
    let key = key.as_string::<i32>();
    let mut want: HashMap<String, (i64, f64)> = HashMap::new();
    let price = host.column(PRICE).as_primitive::<Float64Type>();
    for r in 0..host.num_rows() {
        let e = want.entry(key.value(r).to_string()).or_default();
        e.0 += 1;
        e.1 += price.value(r);
    }
    let got_keys = arrow::compute::cast(&g.keys[0], &arrow::datatypes::DataType::Utf8).unwrap();
    let got_keys = got_keys.as_string::<i32>();
    let counts = g.values[0].as_primitive::<Int64Type>();
    assert_eq!(g.len(), want.len(), "{name}: groups");
    let total: i64 = (0..g.len()).map(|i| counts.value(i)).sum();
    assert_eq!(total as usize, batch.num_rows(), "{name}: rows");
    let sums = spec
        .aggregates
        .iter()
        .position(|x| *x == Aggregate::SumFloat(Expr::Column(PRICE)))
        .map(|i| g.values[i].as_primitive::<Float64Type>().clone());
    for i in 0..g.len() {
        let (n, s) = want[got_keys.value(i)];
        assert_eq!(counts.value(i), n, "{name}: count of {}", got_keys.value(i));
        if let Some(sums) = &sums {
            let got = sums.value(i);
            assert!(
                (got - s).abs() <= 1e-9 * s.abs().max(1.0),
                "{name}: sum {got} against {s}"
            );
        }
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rows = env_usize("CUPARQUET_BENCH_ROWS", 24_000_000);
    let rounds = env_usize("CUPARQUET_BENCH_ROUNDS", 5).max(1);
    let threads = env_usize("CUPARQUET_BENCH_THREADS", 16).max(1);
    if cuparquet::device::probe_cuda().devices == 0 {
        println!("skipping bench-aggregate_device: no CUDA device");
        return;
    }
    let path = common::snappy_lineitem(rows);
    let loaded = Scan::builder(&path)
        .with_device(Device::Cuda(0))
        .with_columns(COLUMNS)
        .build()
        .unwrap()
        .load()
        .unwrap();
    let schema = loaded.schema.clone();
    let batches = loaded.batches;
    println!(
        "file {} ({rows} rows, {} device batches), {rounds} rounds after a warm-up, {threads} threads",
        path.display(),
        batches.len()
    );
    for (name, spec) in specs() {
        let mut a = Aggregator::new(spec.clone(), Arc::clone(&schema)).unwrap();
        // warm-up and check (keys as text; the row-per-group case by its count only)
        for b in &batches {
            if spec.keys[0] == KEY {
                let n = a.aggregate(b).unwrap().len();
                assert_eq!(n, b.num_rows(), "{name}");
            } else {
                check(name, &spec, b, &mut a);
            }
        }
        for t in [1, threads] {
            let mut times: Vec<(Duration, usize)> = (0..rounds)
                .map(|_| run(&spec, &schema, &batches, t))
                .collect();
            times.sort();
            let (best, groups) = times[0];
            println!(
                "{name:<40} {t:>2} thread(s): best {:>8.2} ms  median {:>8.2} ms  ({:.2} ms a batch, {groups} groups)",
                ms(best),
                ms(times[times.len() / 2].0),
                ms(best) * t as f64 / batches.len() as f64,
            );
        }
        // one round on one thread, by stage
        let mut stages: Vec<(String, Duration)> = Vec::new();
        for b in &batches {
            let (_, s) = a.aggregate_profiled(b).unwrap();
            for (n, d) in s {
                match stages.iter_mut().find(|(m, _)| *m == n) {
                    Some((_, t)) => *t += d,
                    None => stages.push((n, d)),
                }
            }
        }
        let line: Vec<String> = stages
            .iter()
            .map(|(n, d)| format!("{n} {:.2}", ms(*d)))
            .collect();
        println!(
            "{name:<40} stages, ms over the batches: {}",
            line.join(", ")
        );
    }
}
