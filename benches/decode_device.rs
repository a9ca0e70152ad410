//! File path → Arrow batches in device memory, against arrow-rs decoding on the host plus an
//! upload, in one run.
//!
//! `bench-decode_device` — environment:
//! - `CUPARQUET_BENCH_DIR`: where the generated files live (default `target/bench-data`);
//! - `CUPARQUET_BENCH_ROWS` (default 24,000,000; row groups of 1,000,000 rows);
//! - `CUPARQUET_BENCH_ROUNDS` (default 5), `CUPARQUET_BENCH_OUT` (a JSON-lines file to append
//!   results to), `CUPARQUET_BENCH_LATENCY_ROUNDS` (default 50);
//! - `CUPARQUET_BENCH_FILES`: a comma-separated subset of `snappy-dict`, `zstd-dict`,
//!   `lz4raw-dict`, `lz4hadoop-dict`, `gzip-dict`, `plain-uncompressed`, `latency` (default:
//!   all);
//! - `CUPARQUET_BENCH_EXTRA`: more files to measure the same way, `name=path` pairs separated
//!   by commas (files written by other writers: pyarrow, DuckDB, Polars);
//! - `CUPARQUET_BENCH_KEEP_DICTIONARIES=1`: every load (device, host, baseline) with
//!   `with_keep_dictionaries(true)` (string columns stored with a dictionary load as
//!   `Dictionary(Int32, Utf8)`);
//! - `CUPARQUET_BENCH_DEVICES`: CUDA ordinals (e.g. `0,1`) to also load each file spread over
//!   (`ScanBuilder::with_devices`), against the one-device load; and a directory of
//!   `CUPARQUET_BENCH_DIR_FILES` (default 8) links to the file, streamed (each batch dropped) as
//!   one dataset on the first device and spread over them (`with_devices` over a directory);
//! - `CUPARQUET_BENCH_BASELINE=0`: measure cuparquet only (quick comparisons of builds; figures
//!   for RESULTS.md always come with the baseline).
//!
//! Data: the lineitem-like table of `common::generate_lineitem` (sorted int64 key, random
//! int64, int32 in 1..50, double, double with 2 decimals, date32, a 3-value string, a comment
//! from 5000 distinct ~28-character values) written six ways — SNAPPY, ZSTD, LZ4_RAW, LZ4
//! (Hadoop's framing, as arrow-rs and parquet-mr write it: a frame per page) and GZIP (level
//! 6) with dictionaries, uncompressed without dictionaries — and a 100,000-row two-column
//! (int64 key, double) SNAPPY file for latency.
//!
//! Decoded GB/s = bytes of the resulting Arrow buffers ÷ wall time from the file path (reader
//! built: footer read, plan) to the batches in device memory, warm page cache, best and median
//! of the rounds after one warm-up load. The baseline, in the same run: cuparquet's host load
//! (arrow-rs decoding, row groups in parallel on all cores) and an upload of every batch
//! (`DeviceRecordBatch::upload`). The first device load of each file is checked equal to the
//! host load.

#[path = "common/mod.rs"]
mod common;

use common::env_usize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cuparquet::array::DeviceRecordBatch;
use cuparquet::{Device, Scan};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

struct Variant {
    name: &'static str,
    codec: Compression,
    dictionary: bool,
}

fn variants() -> [Variant; 6] {
    [
        Variant {
            name: "snappy-dict",
            codec: Compression::SNAPPY,
            dictionary: true,
        },
        Variant {
            name: "zstd-dict",
            codec: Compression::ZSTD(ZstdLevel::default()),
            dictionary: true,
        },
        Variant {
            name: "lz4raw-dict",
            codec: Compression::LZ4_RAW,
            dictionary: true,
        },
        Variant {
            name: "lz4hadoop-dict",
            codec: Compression::LZ4,
            dictionary: true,
        },
        Variant {
            name: "gzip-dict",
            codec: Compression::GZIP(parquet::basic::GzipLevel::default()),
            dictionary: true,
        },
        Variant {
            name: "plain-uncompressed",
            codec: Compression::UNCOMPRESSED,
            dictionary: false,
        },
    ]
}

fn props(codec: Compression, dictionary: bool, row_group: usize) -> WriterProperties {
    WriterProperties::builder()
        .set_compression(codec)
        .set_dictionary_enabled(dictionary)
        .set_max_row_group_row_count(Some(row_group))
        .build()
}

fn small_file(path: &Path) {
    use arrow::array::{ArrayRef, Float64Array, Int64Array};
    use std::sync::Arc;
    let n = 100_000;
    let key: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n as i64));
    let price: ArrayRef = Arc::new(Float64Array::from_iter_values(
        (0..n).map(|i| ((i * 7919) % 100_000) as f64 / 100.0),
    ));
    let b =
        arrow::record_batch::RecordBatch::try_from_iter([("key", key), ("price", price)]).unwrap();
    let tmp = path.with_extension("tmp");
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&tmp).unwrap(),
        b.schema(),
        Some(props(Compression::SNAPPY, true, n)),
    )
    .unwrap();
    w.write(&b).unwrap();
    w.close().unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// One device load: (wall, Arrow bytes in device memory, report).
/// Whether `CUPARQUET_BENCH_KEEP_DICTIONARIES=1`.
fn keep_dictionaries() -> bool {
    std::env::var("CUPARQUET_BENCH_KEEP_DICTIONARIES").is_ok_and(|v| v == "1")
}

fn device_load(path: &Path) -> (Duration, u64, cuparquet::LoadReport, cuparquet::Loaded) {
    let t = Instant::now();
    let r = Scan::builder(path)
        .with_device(Device::Cuda(0))
        .with_keep_dictionaries(keep_dictionaries())
        .build()
        .unwrap();
    let loaded = r.load().unwrap();
    let dt = t.elapsed();
    let bytes = loaded.batches.iter().map(|b| b.memory_size() as u64).sum();
    (dt, bytes, loaded.report.loads[0].clone(), loaded)
}

/// Loads of `path` spread over the devices `ordinals` (`ScanBuilder::with_devices`), `rounds` times after a
/// warm-up, against the one-device load's `best` (its Arrow `bytes`): best and median, and
/// what each device did in the last round.
fn spread_loads(path: &Path, ordinals: &[usize], rounds: usize, bytes: u64, best: Duration) {
    let load = || {
        let t = Instant::now();
        let l = Scan::builder(path)
            .with_keep_dictionaries(keep_dictionaries())
            .with_devices(ordinals.iter().copied())
            .build()
            .unwrap()
            .load()
            .unwrap();
        (t.elapsed(), l.report.devices)
    };
    let _ = load();
    let mut times = Vec::new();
    let mut last = Vec::new();
    for _ in 0..rounds {
        let (dt, d) = load();
        times.push(dt);
        last = d;
    }
    let (b, m) = stats(&mut times);
    let per: Vec<String> = last
        .iter()
        .map(|d| {
            format!(
                "{} {} passes {:.1} ms",
                d.device,
                d.passes,
                d.time.as_secs_f64() * 1e3
            )
        })
        .collect();
    println!(
        "{:<20} spread over {ordinals:?}: {:.2} GB/s best ({:.1} ms, {:.2}x one device), {:.1} ms median; last round: {}",
        "",
        bytes as f64 / b.as_secs_f64() / 1e9,
        b.as_secs_f64() * 1e3,
        best.as_secs_f64() / b.as_secs_f64(),
        m.as_secs_f64() * 1e3,
        per.join(", ")
    );
}

/// A directory of `n` hard links to `path` (made once, beside it): a dataset of `n` such files.
fn directory_of(path: &Path, n: usize) -> PathBuf {
    let stem = path.file_stem().unwrap().to_string_lossy();
    let dir = path.with_file_name(format!("{stem}-x{n}"));
    std::fs::create_dir_all(&dir).unwrap();
    for k in 0..n {
        let link = dir.join(format!("part-{k}.parquet"));
        if !link.exists() {
            std::fs::hard_link(path, &link)
                .or_else(|_| std::fs::copy(path, &link).map(|_| ()))
                .unwrap();
        }
    }
    dir
}

/// A directory of `n` links to `path` streamed as one dataset on the first of `ordinals` and
/// spread over all of them, each batch dropped as it comes (so that `n` files need not fit in
/// device memory at once), `rounds` times after a warm-up: Arrow GB/s of each and the ratio.
fn directory_loads(
    path: &Path,
    name: &str,
    ordinals: &[usize],
    n: usize,
    rounds: usize,
) -> serde_json::Value {
    let dir = directory_of(path, n);
    let one = || {
        let t = Instant::now();
        let d = Scan::builder(&dir)
            .with_device(Device::Cuda(ordinals[0]))
            .with_keep_dictionaries(keep_dictionaries())
            .build()
            .unwrap();
        let mut bytes = 0u64;
        for b in d.batches() {
            bytes += b.unwrap().memory_size() as u64;
        }
        (t.elapsed(), bytes)
    };
    let spread = || {
        let t = Instant::now();
        let s = Scan::builder(&dir)
            .with_keep_dictionaries(keep_dictionaries())
            .with_devices(ordinals.iter().copied())
            .build()
            .unwrap();
        let mut bytes = 0u64;
        for b in s.batches() {
            bytes += b.unwrap().memory_size() as u64;
        }
        (t.elapsed(), bytes)
    };
    let (_, want) = one();
    let (_, got) = spread();
    assert_eq!(got, want, "{name}: the spread dataset's Arrow bytes differ");
    let (mut t1, mut t2) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        // alternately, so that neither side has the warmer machine
        t1.push(one().0);
        t2.push(spread().0);
    }
    let ((b1, m1), (b2, m2)) = (stats(&mut t1), stats(&mut t2));
    let gbps = |d: Duration| want as f64 / d.as_secs_f64() / 1e9;
    println!(
        "{:<20} directory of {n}: cuda:{} {:.2} GB/s best ({:.1} ms), {:.1} ms median | spread over {ordinals:?} {:.2} GB/s best ({:.1} ms), {:.1} ms median | {:.2}x",
        "",
        ordinals[0],
        gbps(b1),
        b1.as_secs_f64() * 1e3,
        m1.as_secs_f64() * 1e3,
        gbps(b2),
        b2.as_secs_f64() * 1e3,
        m2.as_secs_f64() * 1e3,
        b1.as_secs_f64() / b2.as_secs_f64()
    );
    serde_json::json!({
        "bench": "decode_device_directory", "file": name, "files": n, "devices": ordinals,
        "arrow_bytes": want, "rounds": rounds,
        "one_best_s": b1.as_secs_f64(), "one_median_s": m1.as_secs_f64(),
        "spread_best_s": b2.as_secs_f64(), "spread_median_s": m2.as_secs_f64(),
    })
}

/// The baseline: arrow-rs on the host (all cores), then every batch uploaded.
fn host_then_upload(path: &Path) -> (Duration, u64, Vec<DeviceRecordBatch>) {
    let g = cuparquet::device::gpu(0).unwrap();
    let t = Instant::now();
    let r = Scan::builder(path)
        .with_device(Device::Host)
        .with_keep_dictionaries(keep_dictionaries())
        .build()
        .unwrap();
    let loaded = r.load().unwrap();
    let dev: Vec<DeviceRecordBatch> = loaded
        .batches
        .iter()
        .map(|b| DeviceRecordBatch::upload(&g, b.as_host().unwrap()).unwrap())
        .collect();
    let dt = t.elapsed();
    let bytes = dev.iter().map(|b| b.device_bytes() as u64).sum();
    (dt, bytes, dev)
}

fn stats(v: &mut [Duration]) -> (Duration, Duration) {
    v.sort();
    match v.first() {
        Some(&first) => (first, v[v.len() / 2]),
        None => (Duration::ZERO, Duration::ZERO),
    }
}

fn record(out: &mut Option<std::fs::File>, line: serde_json::Value) {
    if let Some(f) = out {
        let _ = writeln!(f, "{line}");
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // nothing for cargo's test harness to list
    }
    let probe = cuparquet::device::probe_cuda();
    if probe.devices == 0 {
        println!("decode_device: skipped, no CUDA device ({})", probe.detail);
        return;
    }
    let dir = std::env::var_os("CUPARQUET_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/bench-data"));
    std::fs::create_dir_all(&dir).unwrap();
    let rows = env_usize("CUPARQUET_BENCH_ROWS", 24_000_000);
    let rounds = env_usize("CUPARQUET_BENCH_ROUNDS", 5).max(1);
    let lat_rounds = env_usize("CUPARQUET_BENCH_LATENCY_ROUNDS", 50).max(1);
    let mut out = std::env::var_os("CUPARQUET_BENCH_OUT").map(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap()
    });
    let wanted = std::env::var("CUPARQUET_BENCH_FILES").ok();
    let wants = |name: &str| {
        wanted
            .as_deref()
            .is_none_or(|w| w.split(',').any(|x| x.trim() == name))
    };
    let baseline = std::env::var("CUPARQUET_BENCH_BASELINE").map_or(true, |v| v != "0");
    let mut variants: Vec<Variant> = variants().into_iter().filter(|v| wants(v.name)).collect();
    let mut files: Vec<PathBuf> = variants
        .iter()
        .map(|v| dir.join(format!("lineitem-{rows}-{}.parquet", v.name)))
        .collect();
    // files of other writers, measured after the generated ones (never generated here)
    let extra = std::env::var("CUPARQUET_BENCH_EXTRA").unwrap_or_default();
    let n_generated = files.len();
    for pair in extra.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, path) = pair
            .split_once('=')
            .expect("CUPARQUET_BENCH_EXTRA: name=path");
        variants.push(Variant {
            name: Box::leak(name.trim().to_string().into_boxed_str()),
            codec: Compression::UNCOMPRESSED,
            dictionary: false,
        });
        files.push(PathBuf::from(path.trim()));
    }
    let small = dir.join("small-100k-2col-snappy.parquet");
    // generate what is missing, the files in parallel
    let t = Instant::now();
    std::thread::scope(|s| {
        for (v, f) in variants.iter().zip(&files).take(n_generated) {
            if !f.exists() {
                s.spawn(move || {
                    common::generate_lineitem(
                        f,
                        rows,
                        1_000_000,
                        props(v.codec, v.dictionary, 1_000_000),
                    )
                });
            }
        }
        if !small.exists() && wants("latency") {
            s.spawn(|| small_file(&small));
        }
    });
    // write freshly generated files back now, so that their writeback does not run during
    // the measurements
    let _ = std::process::Command::new("sync").status();
    println!(
        "data ready in {:.1?} ({rows} rows, row groups of 1,000,000)",
        t.elapsed()
    );
    let gpu = cuparquet::device::gpu(0).unwrap();
    println!("device: cuda:0 {}", gpu.name());
    let spread_over: Option<Vec<usize>> = std::env::var("CUPARQUET_BENCH_DEVICES").ok().map(|v| {
        cuparquet::device::parse_device_list(&v)
            .expect("CUPARQUET_BENCH_DEVICES: ordinals, e.g. 0,1")
    });

    for (v, f) in variants.iter().zip(&files) {
        let size = std::fs::metadata(f).unwrap().len();
        // warm-up (page cache, kernels) and a correctness check against the host load
        let (_, _, _, first) = device_load(f);
        let host = Scan::builder(f)
            .with_device(Device::Host)
            .with_keep_dictionaries(keep_dictionaries())
            .build()
            .unwrap()
            .load()
            .unwrap();
        let want = arrow::compute::concat_batches(&host.schema, &host.to_host().unwrap()).unwrap();
        let got = arrow::compute::concat_batches(&first.schema, &first.to_host().unwrap()).unwrap();
        assert!(
            got == want,
            "{}: the device load differs from the host load",
            v.name
        );
        let g = first.report.loads[0].gpu_decode.clone().unwrap();
        drop((first, host, want, got));
        let mut times = Vec::new();
        let mut last = None;
        let mut bytes = 0;
        for _ in 0..rounds {
            let (dt, b, rep, loaded) = device_load(f);
            drop(loaded);
            times.push(dt);
            bytes = b;
            last = Some(rep);
        }
        let (best, median) = stats(&mut times);
        let rep = last.unwrap();
        let mut base = Vec::new();
        let mut base_bytes = 0;
        if baseline {
            let _ = host_then_upload(f); // warm-up
        }
        for _ in 0..if baseline { rounds } else { 0 } {
            let (dt, b, dev) = host_then_upload(f);
            drop(dev);
            base.push(dt);
            base_bytes = b;
        }
        let (bbest, bmedian) = stats(&mut base);
        let gbps = |b: u64, d: Duration| b as f64 / d.as_secs_f64() / 1e9;
        println!(
            "{:<20} file {:>6.0} MB, Arrow {:>6.0} MB | cuparquet GPU {:>6.2} GB/s best ({:.1} ms), {:>6.2} median | arrow-rs host + upload {:>6.2} GB/s best ({:.1} ms), {:>6.2} median | {:.2}x",
            v.name,
            size as f64 / 1e6,
            bytes as f64 / 1e6,
            gbps(bytes, best),
            best.as_secs_f64() * 1e3,
            gbps(bytes, median),
            gbps(base_bytes, bbest),
            bbest.as_secs_f64() * 1e3,
            gbps(base_bytes, bmedian),
            bbest.as_secs_f64() / best.as_secs_f64(),
        );
        println!(
            "{:<20} last round: setup {:.1} ms, io {:.1} ms, decode {:.1} ms; {} of {} fields on the GPU, {} pages host-decompressed, {} by nvCOMP",
            "",
            rep.setup_time.as_secs_f64() * 1e3,
            rep.io_time.as_secs_f64() * 1e3,
            rep.decode_time.as_secs_f64() * 1e3,
            g.fields.iter().filter(|f| f.on_gpu).count(),
            g.fields.len(),
            g.host_decompressed_pages,
            g.nvcomp_pages
        );
        if let Some(ords) = &spread_over {
            spread_loads(f, ords, rounds, bytes, best);
            let n = env_usize("CUPARQUET_BENCH_DIR_FILES", 8);
            if n > 0 {
                let r = directory_loads(f, v.name, ords, n, rounds);
                record(&mut out, r);
            }
        }
        if let Some(g) = &rep.gpu_decode {
            if !g.stages.is_empty() {
                let st: Vec<String> = g
                    .stages
                    .iter()
                    .map(|(n, t)| format!("{n} {:.1} ms", t * 1e3))
                    .collect();
                println!("{:<20} stages: {}", "", st.join(", "));
            }
        }
        record(
            &mut out,
            serde_json::json!({
                "bench": "decode_device", "file": v.name, "rows": rows, "file_bytes": size,
                "arrow_bytes": bytes, "rounds": rounds,
                "gpu_best_s": best.as_secs_f64(), "gpu_median_s": median.as_secs_f64(),
                "baseline_best_s": bbest.as_secs_f64(), "baseline_median_s": bmedian.as_secs_f64(),
                "decode_s": rep.decode_time.as_secs_f64(), "io_s": rep.io_time.as_secs_f64(),
                "setup_s": rep.setup_time.as_secs_f64(),
            }),
        );
    }

    if !wants("latency") {
        return;
    }
    // latency of a small file
    for _ in 0..3 {
        let _ = device_load(&small);
        if baseline {
            let _ = host_then_upload(&small);
        }
    }
    let mut split = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut last_stages = Vec::new();
    let mut t_gpu: Vec<Duration> = (0..lat_rounds)
        .map(|_| {
            let (dt, _, rep, _) = device_load(&small);
            split.0 += rep.setup_time;
            split.1 += rep.io_time;
            split.2 += rep.decode_time;
            last_stages = rep.gpu_decode.map(|g| g.stages).unwrap_or_default();
            dt
        })
        .collect();
    let mut t_base: Vec<Duration> = (0..if baseline { lat_rounds } else { 0 })
        .map(|_| host_then_upload(&small).0)
        .collect();
    let (gb, gm) = stats(&mut t_gpu);
    let (bb, bm) = stats(&mut t_base);
    println!(
        "100k rows, 2 columns, snappy: cuparquet GPU {:.2} ms median ({:.2} best) | arrow-rs host + upload {:.2} ms median ({:.2} best); {lat_rounds} loads each",
        gm.as_secs_f64() * 1e3,
        gb.as_secs_f64() * 1e3,
        bm.as_secs_f64() * 1e3,
        bb.as_secs_f64() * 1e3
    );
    let per = |d: Duration| d.as_secs_f64() * 1e3 / lat_rounds as f64;
    println!(
        "  mean split of a GPU load: setup {:.2} ms, io {:.2} ms, decode {:.2} ms",
        per(split.0),
        per(split.1),
        per(split.2)
    );
    if !last_stages.is_empty() {
        let st: Vec<String> = last_stages
            .iter()
            .map(|(n, t)| format!("{n} {:.2} ms", t * 1e3))
            .collect();
        println!("  stages of the last GPU load: {}", st.join(", "));
    }
    record(
        &mut out,
        serde_json::json!({
            "bench": "decode_device_latency", "rows": 100000, "rounds": lat_rounds,
            "gpu_median_s": gm.as_secs_f64(), "gpu_best_s": gb.as_secs_f64(),
            "baseline_median_s": bm.as_secs_f64(), "baseline_best_s": bb.as_secs_f64(),
        }),
    );
}
