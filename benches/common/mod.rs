//! Shared by the host benchmarks: the generated file and the contenders.
#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, Date32Array, Float64Array, Int32Array, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use cuparquet::plan::CoalesceConfig;
use cuparquet::{Device, Scan};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use rayon::prelude::*;

pub const ROWS: usize = 3_600_000;
pub const ROW_GROUP: usize = 256 * 1024;
pub const BATCH: usize = 65_536;

// Every contender materialises the whole table (keeps all batches until the end), as a load
// into memory does; counting rows of batches dropped on the fly would measure less work.

/// A lineitem-like table: sorted key, random key, small int, two doubles, a date, a 3-value
/// string and a comment from 5000 distinct values; uncompressed, no dictionaries (~275 MB).
pub fn generate(path: &Path) {
    let props = WriterProperties::builder()
        .set_compression(Compression::UNCOMPRESSED)
        .set_dictionary_enabled(false)
        .set_max_row_group_row_count(Some(ROW_GROUP))
        .build();
    generate_lineitem(path, ROWS, ROW_GROUP, props);
}

/// The lineitem-like table of [`generate`] with `rows` rows in row groups of `row_group` rows,
/// written with `props`.
pub fn generate_lineitem(path: &Path, rows: usize, row_group: usize, props: WriterProperties) {
    let mut state = 7u64;
    let mut rand = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let comments: Vec<String> = (0..5000)
        .map(|i| format!("furiously regular pinto {i:05}"))
        .collect();
    let schema_batch = |start: usize, n: usize, rand: &mut dyn FnMut() -> u64| {
        let cols: Vec<(&str, ArrayRef)> = vec![
            (
                "key",
                Arc::new(Int64Array::from_iter_values(
                    (start..start + n).map(|i| i as i64),
                )),
            ),
            (
                "rnd",
                Arc::new(Int64Array::from_iter_values((0..n).map(|_| rand() as i64))),
            ),
            (
                "qty",
                Arc::new(Int32Array::from_iter_values(
                    (0..n).map(|_| 1 + (rand() % 50) as i32),
                )),
            ),
            (
                "price",
                Arc::new(Float64Array::from_iter_values(
                    (0..n).map(|_| rand() as f64 / 3.0),
                )),
            ),
            (
                "disc",
                Arc::new(Float64Array::from_iter_values(
                    (0..n).map(|_| (rand() % 1000) as f64 / 100.0),
                )),
            ),
            (
                "ship",
                Arc::new(Date32Array::from_iter_values(
                    (0..n).map(|_| 8000 + (rand() % 2500) as i32),
                )),
            ),
            (
                "flag",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|_| ["A", "N", "R"][(rand() % 3) as usize]),
                )),
            ),
            (
                "comment",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|_| comments[(rand() % 5000) as usize].as_str()),
                )),
            ),
        ];
        RecordBatch::try_from_iter(cols).unwrap()
    };
    let first = schema_batch(0, 1, &mut rand);
    let tmp = path.with_extension("tmp");
    let mut w =
        ArrowWriter::try_new(File::create(&tmp).unwrap(), first.schema(), Some(props)).unwrap();
    let mut start = 0;
    while start < rows {
        let n = (rows - start).min(row_group);
        w.write(&schema_batch(start, n, &mut rand)).unwrap();
        start += n;
    }
    w.close().unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The number in environment variable `k`, else `d`.
pub fn env_usize(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

/// The lineitem-like table of [`generate_lineitem`] with `rows` rows, SNAPPY with
/// dictionaries, row groups of 1,000,000 rows, in `CUPARQUET_BENCH_DIR` (default
/// `target/bench-data`), written on first use (the file of `bench-filter_device` and
/// `bench-aggregate_device`).
pub fn snappy_lineitem(rows: usize) -> PathBuf {
    let dir = PathBuf::from(
        std::env::var("CUPARQUET_BENCH_DIR").unwrap_or_else(|_| "target/bench-data".into()),
    );
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("filter-lineitem-snappy-{rows}.parquet"));
    if !p.exists() {
        eprintln!("writing {} ...", p.display());
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(1_000_000))
            .build();
        generate_lineitem(&p, rows, 1_000_000, props);
    }
    p
}

pub fn bench_file() -> PathBuf {
    if let Some(p) = std::env::var_os("CUPARQUET_BENCH_FILE") {
        return PathBuf::from(p);
    }
    let dir = PathBuf::from("target/bench-data");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("host_load_lineitem_plain.parquet");
    if !p.exists() {
        eprintln!("writing {} ...", p.display());
        generate(&p);
    }
    p
}

pub fn cuparquet_load(path: &Path, threads: usize, unit: Option<u64>) -> usize {
    let mut b = Scan::builder(path)
        .with_device(Device::Host)
        .with_nthreads(threads)
        .with_batch_rows(BATCH);
    if let Some(u) = unit {
        b = b.with_coalescing(CoalesceConfig {
            unit_target_bytes: u,
            ..Default::default()
        });
    }
    let loaded = b.build().unwrap().load().unwrap();
    loaded.batches.iter().map(|b| b.num_rows()).sum()
}

pub fn arrow_parallel(path: &Path, pool: &rayon::ThreadPool) -> usize {
    let n_rg = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .metadata()
        .num_row_groups();
    let batches: Vec<Vec<RecordBatch>> = pool.install(|| {
        (0..n_rg)
            .into_par_iter()
            .map(|rg| {
                ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
                    .unwrap()
                    .with_row_groups(vec![rg])
                    .with_batch_size(BATCH)
                    .build()
                    .unwrap()
                    .map(|b| b.unwrap())
                    .collect()
            })
            .collect()
    });
    batches.iter().flatten().map(|b| b.num_rows()).sum()
}

pub fn arrow_serial(path: &Path) -> usize {
    let batches: Vec<RecordBatch> =
        ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
            .unwrap()
            .with_batch_size(BATCH)
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
    batches.iter().map(|b| b.num_rows()).sum()
}
