//! The exact row filter (`with_row_filter`): a device load that filters on the GPU against the
//! same load unfiltered, against filtering on the host (a host load with the same filter), and
//! against what an engine would do without it (load the filter's columns too, bring them all
//! back, filter with arrow-rs), in one run.
//!
//! `bench-filter_device` — environment: `CUPARQUET_BENCH_DIR` (default `target/bench-data`),
//! `CUPARQUET_BENCH_ROWS` (default 24,000,000), `CUPARQUET_BENCH_ROUNDS` (default 5).
//!
//! Data: the lineitem-like table of the host benchmarks (key, rnd, qty, price, disc, ship date,
//! flag, comment), SNAPPY with dictionaries, row groups of 1,000,000 rows, written by arrow-rs.
//! Figures: best and median wall time of the rounds after a warm-up whose filtered result is
//! checked equal to the host's.

#[path = "common/mod.rs"]
mod common;

use common::env_usize;
use std::path::Path;
use std::time::{Duration, Instant};

use arrow::record_batch::RecordBatch;
use cuparquet::{Device, Scan};

/// Rows loaded and the batches on the host (`to_host` when asked).
fn run(
    path: &Path,
    device: Device,
    columns: &[&str],
    filter: Option<&str>,
    to_host: bool,
) -> (usize, Vec<RecordBatch>) {
    let mut b = Scan::builder(path)
        .with_device(device)
        .with_columns(columns.iter().copied());
    if let Some(f) = filter {
        b = b.with_row_filter(f);
    }
    let loaded = b.build().unwrap().load().unwrap();
    let rows = loaded.batches.iter().map(|b| b.num_rows()).sum();
    let host = if to_host {
        loaded.to_host().unwrap()
    } else {
        Vec::new()
    };
    (rows, host)
}

fn time(rounds: usize, mut f: impl FnMut() -> usize) -> (Duration, Duration, usize) {
    let rows = f();
    let mut t: Vec<Duration> = (0..rounds)
        .map(|_| {
            let s = Instant::now();
            std::hint::black_box(f());
            s.elapsed()
        })
        .collect();
    t.sort();
    (t[0], t[t.len() / 2], rows)
}

/// One contender: loads and returns the rows it yields.
type Case<'a> = Box<dyn FnMut() -> usize + 'a>;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rows = env_usize("CUPARQUET_BENCH_ROWS", 24_000_000);
    let rounds = env_usize("CUPARQUET_BENCH_ROUNDS", 5);
    let path = common::snappy_lineitem(rows);
    let gpu = Device::Cuda(0);
    let out = ["price", "disc"];
    let all = ["price", "disc", "ship", "qty"];
    let filters = [
        (
            "Q6-like (~1.3%)",
            "ship >= '1992-01-01' AND ship < '1993-01-01' AND disc >= 5 AND disc <= 7 AND qty < 24",
        ),
        ("half (qty < 26)", "qty < 26"),
        ("nearly all (qty < 50)", "qty < 50"),
    ];
    println!(
        "file {} ({rows} rows), {rounds} rounds after a warm-up",
        path.display()
    );
    for (name, f) in filters {
        // warm-up and check: the GPU's filtered rows equal the host's
        let (_, g) = run(&path, gpu, &out, Some(f), true);
        let (_, h) = run(&path, Device::Host, &out, Some(f), true);
        let cat = |b: &[RecordBatch]| arrow::compute::concat_batches(&b[0].schema(), b).unwrap();
        assert_eq!(cat(&g), cat(&h), "{name}: GPU and host filters disagree");
        let cases: Vec<(&str, Case<'_>)> = vec![
            (
                "gpu load, filtered on the GPU",
                Box::new(|| run(&path, gpu, &out, Some(f), false).0),
            ),
            (
                "gpu load, filtered on the GPU, to_host",
                Box::new(|| run(&path, gpu, &out, Some(f), true).0),
            ),
            (
                "gpu load of the 4 columns, unfiltered",
                Box::new(|| run(&path, gpu, &all, None, false).0),
            ),
            (
                "gpu load of the 4 columns, to_host, arrow-rs filter",
                Box::new(|| {
                    let (_, batches) = run(&path, gpu, &all, None, true);
                    // the engine's own filter: arrow-rs compute over the batches
                    batches.iter().map(|b| filter_host(b, f).num_rows()).sum()
                }),
            ),
            (
                "host load, filtered on the host",
                Box::new(|| run(&path, Device::Host, &out, Some(f), false).0),
            ),
        ];
        for (case, mut c) in cases {
            let (best, median, n) = time(rounds, &mut c);
            println!(
                "{name:<24} {case:<52} best {:>8.2} ms  median {:>8.2} ms  rows {n}",
                ms(best),
                ms(median)
            );
        }
    }
}

/// arrow-rs's compute filter of `b` by the bench's predicates (written out by hand).
fn filter_host(b: &RecordBatch, f: &str) -> RecordBatch {
    use arrow::array::{Date32Array, Float64Array, Int32Array};
    use arrow::compute::kernels::cmp::{gt_eq, lt, lt_eq};
    use arrow::compute::{and, filter_record_batch};
    let c = |n: &str| b.column_by_name(n).unwrap();
    let qty = |v: i32| lt(c("qty"), &Int32Array::new_scalar(v)).unwrap();
    let mask = match f {
        "qty < 26" => qty(26),
        "qty < 50" => qty(50),
        _ => {
            let ship = and(
                &gt_eq(c("ship"), &Date32Array::new_scalar(8035)).unwrap(),
                &lt(c("ship"), &Date32Array::new_scalar(8401)).unwrap(),
            )
            .unwrap();
            let disc = and(
                &gt_eq(c("disc"), &Float64Array::new_scalar(5.0)).unwrap(),
                &lt_eq(c("disc"), &Float64Array::new_scalar(7.0)).unwrap(),
            )
            .unwrap();
            and(&and(&ship, &disc).unwrap(), &qty(24)).unwrap()
        }
    };
    filter_record_batch(b, &mask).unwrap()
}
