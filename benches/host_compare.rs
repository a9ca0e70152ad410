//! Interleaved comparison on the `host_load` file: each round runs every contender once, in
//! turn, so that drifts of a shared or noisy machine hit all of them alike; reports the median
//! and the minimum of the rounds, and the ratio to arrow-rs's parallel reader.
//!
//! `cargo bench --bench host_compare` (the file is written once, as for `host_load`).
//! `CUPARQUET_BENCH_THREADS` (default: cores), `CUPARQUET_BENCH_ROUNDS` (default 15), `CUPARQUET_BENCH_UNITS` (extra unit targets in bytes,
//! comma separated), `CUPARQUET_BENCH_SERIAL` (also arrow-rs single-threaded).

mod common;

use std::path::Path;
use std::time::Instant;

use common::*;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let path = bench_file();
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<usize>().ok());
    let threads = env("CUPARQUET_BENCH_THREADS")
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let rounds = env("CUPARQUET_BENCH_ROUNDS").unwrap_or(15);
    let len = std::fs::metadata(&path)
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run `cargo bench --bench host_load` first)",
                path.display()
            )
        })
        .len();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let rows = arrow_serial(&path);
    // CUPARQUET_BENCH_UNITS: extra unit targets (bytes, comma separated) to compare.
    let units: Vec<u64> = std::env::var("CUPARQUET_BENCH_UNITS")
        .unwrap_or_default()
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    let mut contenders: Vec<(String, Box<dyn Fn() -> usize + '_>)> = vec![
        (
            "arrow-rs parallel row groups".into(),
            Box::new(|| arrow_parallel(&path, &pool)),
        ),
        (
            "cuparquet host".into(),
            Box::new(|| cuparquet_load(&path, threads, None)),
        ),
    ];
    let p: &Path = &path;
    for u in units {
        contenders.push((
            format!("cuparquet host, {} KiB units", u >> 10),
            Box::new(move || cuparquet_load(p, threads, Some(u))),
        ));
    }
    if std::env::var_os("CUPARQUET_BENCH_SERIAL").is_some() {
        contenders.push(("arrow-rs serial".into(), Box::new(|| arrow_serial(&path))));
    }
    let mut times = vec![Vec::new(); contenders.len()];
    for _ in 0..rounds {
        for (k, (_, f)) in contenders.iter().enumerate() {
            let t = Instant::now();
            assert_eq!(f(), rows);
            times[k].push(t.elapsed().as_secs_f64());
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let meds: Vec<f64> = times.iter_mut().map(median).collect();
    let base = meds[0];
    println!(
        "host_compare: {} ({len} bytes, {rows} rows), {threads} threads, {rounds} interleaved rounds",
        path.display()
    );
    for (k, (name, _)) in contenders.iter().enumerate() {
        println!(
            "  {name:<34} median {:>8.1} ms  min {:>8.1} ms  {:>6.2} GB/s  {:.2}x arrow-rs parallel",
            meds[k] * 1e3,
            times[k][0] * 1e3,
            len as f64 / meds[k] / 1e9,
            base / meds[k]
        );
    }
}
