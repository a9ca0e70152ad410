//! The stream of batches into device memory: `load()` and `batches()` against arrow-rs decoding
//! on the host plus an upload, in one run, on the shapes writers produce.
//!
//! `bench-stream_device` — environment:
//! - `CUPARQUET_BENCH_DIR`: where the generated files live (default `target/bench-data`; the
//!   lineitem files are `bench-decode_device`'s, generated here when missing);
//! - `CUPARQUET_BENCH_ROUNDS` (default 5), `CUPARQUET_BENCH_OUT` (JSON lines appended);
//! - `CUPARQUET_BENCH_FILES`: a comma-separated subset of `small-row-groups`, `snappy-dict`,
//!   `plain-uncompressed`, `wide-no-index` (400 doubles, one 200k-row row group, no page
//!   index) (default: all);
//! - `CUPARQUET_BENCH_BATCH_ROWS`: batch sizes to measure `batches()` with (default the
//!   reader's default);
//! - `CUPARQUET_BENCH_EXTRA`: more files to measure, `name=path` pairs separated by commas
//!   (e.g. the pyarrow-written twin of `small-row-groups` from `scripts/py/cudf_compare.py`);
//! - `CUPARQUET_BENCH_BUDGETS`: memory budgets for the consumer-drops-each-batch runs
//!   (default `512MiB,2GiB`; `none` for none).
//!
//! Data: `small-row-groups`, 8,000,000 rows in 800 row groups of 10,000 rows (int64 key,
//! random int64, double, a string from 20,000 distinct values; SNAPPY with dictionaries);
//! the 24M-row lineitem files of `bench-decode_device` (row groups of 1,000,000 rows).
//!
//! Figures, warm page cache, best and median of the rounds after a warm-up that is checked equal
//! to the host load: wall time from the file path to every batch in device memory (`load()`, and
//! `batches()` collected), and the time from `build()` returning to the first batch of
//! `batches()` in hand. Then, for each memory budget and without one, `batches()` with a
//! consumer that drops each batch: the wall time and the high-water mark of the device's live
//! allocations (`Gpu::peak_live_bytes`, from what was alive before the reader was built).

#[path = "common/mod.rs"]
mod common;

use common::env_usize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use cuparquet::array::DeviceRecordBatch;
use cuparquet::{Device, LoadedBatch, Scan};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

/// 400 double columns of 200,000 rows in one row group, without a page index (SNAPPY, no
/// dictionaries): a row group larger than a 2 GiB budget's pass, cut by its page headers.
fn wide_no_index(path: &Path) {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(false)
        .set_max_row_group_row_count(Some(200_000))
        .set_statistics_enabled(parquet::file::properties::EnabledStatistics::Chunk)
        .set_offset_index_disabled(true)
        .build();
    let rows = 200_000usize;
    let cols: Vec<(String, ArrayRef)> = (0..400)
        .map(|c| {
            let v = Float64Array::from_iter_values(
                (0..rows).map(|i| ((i * 31 + c * 7919) % 100_003) as f64 / 7.0),
            );
            (format!("c{c:03}"), Arc::new(v) as ArrayRef)
        })
        .collect();
    let batch = arrow::record_batch::RecordBatch::try_from_iter(cols).unwrap();
    let tmp = path.with_extension("tmp");
    let f = std::fs::File::create(&tmp).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(f, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// 8M rows in 800 row groups of 10,000: key, random int64, double, string of 20,000 values.
fn small_row_groups(path: &Path) {
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_dictionary_enabled(true)
        .set_max_row_group_row_count(Some(10_000))
        .build();
    let tmp = path.with_extension("tmp");
    let f = std::fs::File::create(&tmp).unwrap();
    let words: Vec<String> = (0..20_000).map(|i| format!("value-{i:06}-xyz")).collect();
    let mut state = 11u64;
    let mut rand = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let mut w: Option<parquet::arrow::ArrowWriter<std::fs::File>> = None;
    let n = 8_000_000usize;
    let chunk = 1_000_000usize;
    let mut f = Some(f);
    for start in (0..n).step_by(chunk) {
        let cols: Vec<(&str, ArrayRef)> = vec![
            (
                "k",
                Arc::new(Int64Array::from_iter_values(
                    (start..start + chunk).map(|i| i as i64),
                )),
            ),
            (
                "v",
                Arc::new(Int64Array::from_iter_values(
                    (0..chunk).map(|_| rand() as i64),
                )),
            ),
            (
                "x",
                Arc::new(Float64Array::from_iter_values(
                    (0..chunk).map(|_| rand() as f64 / 1e3),
                )),
            ),
            (
                "s",
                Arc::new(StringArray::from_iter_values(
                    (0..chunk).map(|_| words[rand() as usize % words.len()].as_str()),
                )),
            ),
        ];
        let b = arrow::record_batch::RecordBatch::try_from_iter(cols).unwrap();
        let writer = w.get_or_insert_with(|| {
            parquet::arrow::ArrowWriter::try_new(f.take().unwrap(), b.schema(), Some(props.clone()))
                .unwrap()
        });
        writer.write(&b).unwrap();
    }
    w.unwrap().close().unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn reader(path: &Path, device: Device, batch_rows: Option<usize>) -> Scan {
    let mut b = Scan::builder(path).with_device(device);
    if let Some(n) = batch_rows {
        b = b.with_batch_rows(n);
    }
    b.build().unwrap()
}

fn bytes_of(batches: &[LoadedBatch]) -> u64 {
    batches.iter().map(|b| b.memory_size() as u64).sum()
}

/// `load()` from the path: (wall, batches).
fn load(path: &Path, batch_rows: Option<usize>) -> (Duration, Vec<LoadedBatch>) {
    let t = Instant::now();
    let b = reader(path, Device::Cuda(0), batch_rows)
        .load()
        .unwrap()
        .batches;
    (t.elapsed(), b)
}

/// `batches()` collected from the path: (wall, time from `build()` to the first batch,
/// batches).
fn stream(path: &Path, batch_rows: Option<usize>) -> (Duration, Duration, Vec<LoadedBatch>) {
    let t = Instant::now();
    let r = reader(path, Device::Cuda(0), batch_rows);
    let built = Instant::now();
    let mut s = r.batches();
    let first = s.next().unwrap().unwrap();
    let t_first = built.elapsed();
    let mut out = vec![first];
    out.extend(s.map(|b| b.unwrap()));
    (t.elapsed(), t_first, out)
}

/// `batches()` under `budget`, the consumer dropping each batch: (wall, peak live bytes above
/// those alive before, batches).
fn stream_dropping(path: &Path, budget: Option<u64>) -> (Duration, u64, usize) {
    let g = cuparquet::device::gpu(0).unwrap();
    let base = g.live_bytes();
    g.reset_peak_live_bytes();
    let t = Instant::now();
    let mut b = Scan::builder(path).with_device(Device::Cuda(0));
    if let Some(m) = budget {
        b = b.with_memory_budget(m);
    }
    let r = b.build().unwrap();
    let mut n = 0;
    for batch in r.batches() {
        drop(batch.unwrap());
        n += 1;
    }
    let dt = t.elapsed();
    (dt, g.peak_live_bytes().saturating_sub(base), n)
}

/// The footer's estimate of a row group's device bytes ([`cuparquet::plan::passes`]) against
/// the high-water mark of live allocations while that row group alone is loaded (the first, a
/// middle and the last), the consumer dropping each batch: how much room the estimate leaves.
fn estimate_check(name: &str, path: &Path) {
    let g = cuparquet::device::gpu(0).unwrap();
    let probe = reader(path, Device::Cuda(0), None);
    let md = probe.files()[0].metadata().metadata.clone();
    let n = md.num_row_groups();
    let mut picked = vec![0, n / 2, n.saturating_sub(1)];
    picked.dedup();
    for rg in picked {
        let r = Scan::builder(path)
            .with_device(Device::Cuda(0))
            .with_row_groups([rg])
            .build()
            .unwrap();
        let cost = cuparquet::plan::passes::row_group_cost(r.files()[0].plan(), &md, rg);
        let base = g.live_bytes();
        g.reset_peak_live_bytes();
        for b in r.batches() {
            drop(b.unwrap());
        }
        let peak = g.peak_live_bytes().saturating_sub(base);
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        println!(
            "{name:<20} row group {rg} alone: estimate {:.1} MiB (read {:.1} MiB), live device memory peak {:.1} MiB = {:.2}x the estimate",
            mib(cost.device_bytes),
            mib(cost.read_bytes),
            mib(peak),
            peak as f64 / cost.device_bytes.max(1) as f64
        );
    }
}

/// arrow-rs on the host, then every batch uploaded.
fn host_then_upload(path: &Path) -> Duration {
    let g = cuparquet::device::gpu(0).unwrap();
    let t = Instant::now();
    let loaded = reader(path, Device::Host, None).load().unwrap();
    let dev: Vec<DeviceRecordBatch> = loaded
        .batches
        .iter()
        .map(|b| DeviceRecordBatch::upload(&g, b.as_host().unwrap()).unwrap())
        .collect();
    let dt = t.elapsed();
    drop(dev);
    dt
}

fn stats(v: &mut [Duration]) -> (f64, f64) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    match v.first() {
        Some(&first) => (ms(first), ms(v[v.len() / 2])),
        None => (0.0, 0.0),
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let probe = cuparquet::device::probe_cuda();
    if probe.devices == 0 {
        println!("stream_device: skipped, no CUDA device ({})", probe.detail);
        return;
    }
    let dir = std::env::var_os("CUPARQUET_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/bench-data"));
    std::fs::create_dir_all(&dir).unwrap();
    let rounds = env_usize("CUPARQUET_BENCH_ROUNDS", 5).max(1);
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
    let sizes: Vec<Option<usize>> = match std::env::var("CUPARQUET_BENCH_BATCH_ROWS") {
        Ok(v) => v.split(',').map(|x| x.trim().parse().ok()).collect(),
        Err(_) => vec![None],
    };
    let budgets: Vec<Option<u64>> = std::env::var("CUPARQUET_BENCH_BUDGETS")
        .unwrap_or_else(|_| "512MiB,2GiB".into())
        .split(',')
        .filter(|x| x.trim() != "none" && !x.trim().is_empty())
        .map(|x| Some(cuparquet::config::parse_size("CUPARQUET_BENCH_BUDGETS", x).unwrap()))
        .collect();
    let mut files: Vec<(&str, PathBuf)> = Vec::new();
    let t = Instant::now();
    if wants("small-row-groups") {
        let p = dir.join("small-row-groups-8m-800rg-snappy.parquet");
        if !p.exists() {
            small_row_groups(&p);
        }
        files.push(("small-row-groups", p));
    }
    for (name, codec, dict) in [
        ("snappy-dict", Compression::SNAPPY, true),
        ("plain-uncompressed", Compression::UNCOMPRESSED, false),
    ] {
        if wants(name) {
            let p = dir.join(format!("lineitem-24000000-{name}.parquet"));
            if !p.exists() {
                let props = WriterProperties::builder()
                    .set_compression(codec)
                    .set_dictionary_enabled(dict)
                    .set_max_row_group_row_count(Some(1_000_000))
                    .build();
                common::generate_lineitem(&p, 24_000_000, 1_000_000, props);
            }
            files.push((name, p));
        }
    }
    if wants("wide-no-index") {
        let p = dir.join("wide-400x200k-no-index.parquet");
        if !p.exists() {
            wide_no_index(&p);
        }
        files.push(("wide-no-index", p));
    }
    let extra = std::env::var("CUPARQUET_BENCH_EXTRA").unwrap_or_default();
    let extra: Vec<(String, PathBuf)> = extra
        .split(',')
        .filter_map(|x| x.split_once('='))
        .map(|(n, p)| (n.trim().to_string(), PathBuf::from(p.trim())))
        .collect();
    for (n, p) in &extra {
        files.push((n.as_str(), p.clone()));
    }
    let _ = std::process::Command::new("sync").status();
    println!("data ready in {:.1?}", t.elapsed());
    for (name, f) in &files {
        // warm-up and check
        let host = reader(f, Device::Host, None).load().unwrap();
        let want = arrow::compute::concat_batches(&host.schema, &host.to_host().unwrap()).unwrap();
        let (_, got) = load(f, None);
        let got: Vec<_> = got.iter().map(|b| b.to_host().unwrap()).collect();
        assert!(
            arrow::compute::concat_batches(&host.schema, &got).unwrap() == want,
            "{name}: the device load differs from the host load"
        );
        drop((host, got));
        let mut base: Vec<Duration> = Vec::new();
        let _ = host_then_upload(f);
        for _ in 0..rounds {
            base.push(host_then_upload(f));
        }
        let (bb, bm) = stats(&mut base);
        for &n in &sizes {
            let (_, _, b) = stream(f, n);
            let batches = b.len();
            let arrow_bytes = bytes_of(&b);
            drop(b);
            let (mut tl, mut ts, mut tf) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..rounds {
                let (dt, b) = load(f, n);
                drop(b);
                tl.push(dt);
                let (dt, first, b) = stream(f, n);
                drop(b);
                ts.push(dt);
                tf.push(first);
            }
            let ((lb, lm), (sb, sm), (fb, fm)) = (stats(&mut tl), stats(&mut ts), stats(&mut tf));
            let rows = n.map_or("default".to_string(), |n| n.to_string());
            println!(
                "{name:<20} batch rows {rows:>8}: {batches} batches, Arrow {:.0} MB | load {lb:.1} ms best ({lm:.1} median, {:.1} GB/s) | batches() {sb:.1} ms ({sm:.1}), first batch {fb:.2} ms ({fm:.2}) | arrow-rs host + upload {bb:.1} ms ({bm:.1}) | {:.2}x",
                arrow_bytes as f64 / 1e6,
                arrow_bytes as f64 / (lb / 1e3) / 1e9,
                bb / lb
            );
            if let Some(o) = &mut out {
                let _ = writeln!(
                    o,
                    "{}",
                    serde_json::json!({
                        "bench": "stream_device", "file": name, "batch_rows": n,
                        "batches": batches, "arrow_bytes": arrow_bytes, "rounds": rounds,
                        "load_best_ms": lb, "load_median_ms": lm,
                        "stream_best_ms": sb, "stream_median_ms": sm,
                        "first_batch_best_ms": fb, "first_batch_median_ms": fm,
                        "baseline_best_ms": bb, "baseline_median_ms": bm,
                    })
                );
            }
        }
        if budgets.is_empty() {
            continue;
        }
        estimate_check(name, f);
        let mut unbounded = Vec::new();
        let mut peak0 = 0;
        for _ in 0..rounds {
            let (dt, peak, _) = stream_dropping(f, None);
            unbounded.push(dt);
            peak0 = peak0.max(peak);
        }
        let (ub, um) = stats(&mut unbounded);
        println!(
            "{name:<20} no budget, consumer drops each batch: {ub:.1} ms best ({um:.1} median), live device memory peak {:.0} MiB",
            peak0 as f64 / (1 << 20) as f64
        );
        for &budget in &budgets {
            let (mut t, mut peak, mut batches) = (Vec::new(), 0, 0);
            for _ in 0..rounds {
                let (dt, p, n) = stream_dropping(f, budget);
                t.push(dt);
                peak = peak.max(p);
                batches = n;
            }
            let (bb, bm) = stats(&mut t);
            let b = budget.unwrap_or(0);
            println!(
                "{name:<20} budget {:>5.0} MiB: {batches} batches, {bb:.1} ms best ({bm:.1} median; {:.2}x the unbounded best), live device memory peak {:.0} MiB = {:.2}x the budget",
                b as f64 / (1 << 20) as f64,
                bb / ub,
                peak as f64 / (1 << 20) as f64,
                peak as f64 / b as f64
            );
            if let Some(o) = &mut out {
                let _ = writeln!(
                    o,
                    "{}",
                    serde_json::json!({
                        "bench": "stream_device_budget", "file": name, "budget": b,
                        "best_ms": bb, "median_ms": bm, "peak_live_bytes": peak,
                        "unbounded_best_ms": ub, "unbounded_median_ms": um,
                        "unbounded_peak_live_bytes": peak0,
                    })
                );
            }
        }
    }
}
