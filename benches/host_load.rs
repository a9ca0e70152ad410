//! Host load of a generated ≥ 256 MiB file: cuparquet (`Device::Host`) against arrow-rs on the
//! same file — single-threaded `ParquetRecordBatchReader`, and one reader per row group in
//! parallel on the same number of threads.
//!
//! `cargo bench --bench host_load` (the file is written once under target/bench-data/;
//! `CUPARQUET_BENCH_FILE` points at another file; `CUPARQUET_BENCH_THREADS` sets the threads).

mod common;

use std::time::Duration;

use common::*;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn host_load(c: &mut Criterion) {
    let path = bench_file();
    let len = std::fs::metadata(&path).unwrap().len();
    let threads: usize = std::env::var("CUPARQUET_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let expect = arrow_serial(&path);
    assert_eq!(cuparquet_load(&path, threads, None), expect);
    assert_eq!(arrow_parallel(&path, &pool), expect);
    eprintln!(
        "file {} ({len} bytes, {expect} rows), {threads} threads",
        path.display()
    );

    let mut g = c.benchmark_group(format!("host_load_{threads}t"));
    g.throughput(Throughput::Bytes(len));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.bench_function("cuparquet_host", |b| {
        b.iter(|| cuparquet_load(&path, threads, None))
    });
    g.bench_function("arrow_rs_parallel_row_groups", |b| {
        b.iter(|| arrow_parallel(&path, &pool))
    });
    g.bench_function("arrow_rs_serial", |b| b.iter(|| arrow_serial(&path)));
    g.finish();
}

criterion_group!(benches, host_load);
criterion_main!(benches);
