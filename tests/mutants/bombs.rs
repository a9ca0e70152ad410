//! Decompression bombs and lying size claims, loaded by the CLI in a child process whose peak
//! resident memory (`ru_maxrss`, from `wait4`) is measured: each is refused, or loaded, within
//! a bound of the file's size and its real decoded output, never by what a header claims.
//! The figures are printed (issue 18's closing table); `CUPARQUET_MUTANTS_DEVICE=cuda:0` adds
//! device loads.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use parquet::basic::{Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::common::{cuparquet_bin, scratch_dir, write};
use super::model::{self, File};
use super::thrift;

/// The most device memory (bytes of cuparquet's allocations, [`Gpu::peak_live_bytes`]) a load
/// of `file` on `device` held, in this process; `None` for the host.
///
/// [`Gpu::peak_live_bytes`]: cuparquet::device::Gpu::peak_live_bytes
fn device_high_water(file: &Path, device: &str) -> Option<u64> {
    let ordinal: usize = device.strip_prefix("cuda:")?.parse().ok()?;
    let gpu = cuparquet::device::gpu(ordinal).unwrap();
    let before = gpu.live_bytes();
    gpu.reset_peak_live_bytes();
    let loaded = cuparquet::Scan::builder(file)
        .with_device(cuparquet::Device::Cuda(ordinal))
        .build()
        .and_then(|r| r.load());
    drop(loaded);
    Some(gpu.peak_live_bytes().saturating_sub(before))
}

/// Peak RSS (bytes), exit status and seconds of `cuparquet load --device DEV FILE`.
// (the child is reaped by `wait4`, which `Child::wait` cannot do with its usage)
#[allow(clippy::zombie_processes)]
fn measured_load(file: &Path, device: &str) -> (u64, bool, f64, String) {
    let t0 = Instant::now();
    let child = Command::new(cuparquet_bin())
        .args(["load", "--quiet", "--device", device])
        .arg(file)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be overwritten
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for; the out-pointers are valid
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    let secs = t0.elapsed().as_secs_f64();
    let mut err = String::new();
    if let Some(mut e) = child.stderr {
        use std::io::Read;
        let _ = e.read_to_string(&mut err);
    }
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    assert!(
        libc::WIFEXITED(status),
        "{}: the load did not exit (signal): {err}",
        file.display()
    );
    (usage.ru_maxrss as u64 * 1024, ok, secs, err)
}

fn source(dir: &Path, name: &str, codec: Compression, page_rows: usize) -> (PathBuf, File) {
    let n = 60_000;
    let batch = RecordBatch::try_from_iter([
        (
            "k",
            std::sync::Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
        ),
        (
            "s",
            std::sync::Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("v{}", i % 500)),
            )) as ArrayRef,
        ),
        (
            "x",
            std::sync::Arc::new(Float64Array::from_iter_values((0..n).map(|i| i as f64)))
                as ArrayRef,
        ),
    ])
    .unwrap();
    let p = dir.join(name);
    write(
        &p,
        &[batch],
        WriterProperties::builder()
            .set_compression(codec)
            .set_data_page_row_count_limit(page_rows)
            .set_write_batch_size(page_rows.min(1024))
            .build(),
    );
    let f = model::parse(&std::fs::read(&p).unwrap()).unwrap();
    (p, f)
}

#[test]
fn bombs_are_refused_or_loaded_within_their_memory() {
    let dir = scratch_dir();
    let d = dir.path();
    let mut cases: Vec<(&str, PathBuf)> = Vec::new();
    let mut add = |name: &'static str, g: &File| {
        let p = d.join(format!("{}.parquet", name.replace(' ', "-")));
        std::fs::write(&p, model::write(g)).unwrap();
        cases.push((name, p));
    };

    let (snappy, f) = source(d, "snappy.parquet", Compression::SNAPPY, 20_000);
    // a dictionary page claiming 2^31 - 1 entries
    let mut g = f.clone();
    for c in &mut g.chunks {
        for p in c.pages.iter_mut().filter(|p| p.kind() == 2) {
            if let Some(h) = thrift::child_mut(&mut p.header, 7) {
                thrift::set_int(h, 1, i64::from(i32::MAX));
            }
        }
    }
    add("dictionary of 2^31-1 entries", &g);
    // every SNAPPY page claiming 2^31 - 1 bytes
    let mut g = f.clone();
    for c in &mut g.chunks {
        for p in &mut c.pages {
            thrift::set_int(&mut p.header, 2, i64::from(i32::MAX));
        }
    }
    add("SNAPPY pages claiming 2 GiB", &g);

    // 160+ ZSTD pages each claiming 256 MiB
    let (_, f) = source(
        d,
        "zstd.parquet",
        Compression::ZSTD(ZstdLevel::default()),
        1_000,
    );
    let pages: usize = f.chunks.iter().map(|c| c.pages.len()).sum();
    assert!(pages >= 160, "{pages} pages");
    let mut g = f.clone();
    for c in &mut g.chunks {
        for p in &mut c.pages {
            thrift::set_int(&mut p.header, 2, 256 << 20);
        }
    }
    add("ZSTD pages claiming 256 MiB each", &g);

    // real bombs: a GZIP page inflating to 64 MiB claiming its old size, and a ZSTD page
    // inflating to 64 MiB saying so (a true page: loaded or refused by the page cap)
    let (_, f) = source(
        d,
        "gzip.parquet",
        Compression::GZIP(GzipLevel::default()),
        20_000,
    );
    let zeros = vec![0u8; 64 << 20];
    let mut g = f.clone();
    let gz = model::compress(2, &zeros).unwrap();
    let p = g.chunks[0].pages.iter_mut().find(|p| p.is_data()).unwrap();
    p.body = gz;
    thrift::set_int(&mut p.header, 3, p.body.len() as i64);
    add("GZIP page inflating to 64 MiB, claiming less", &g);
    let (_, f) = source(
        d,
        "zstd2.parquet",
        Compression::ZSTD(ZstdLevel::default()),
        20_000,
    );
    let mut g = f.clone();
    let zs = model::compress(6, &zeros).unwrap();
    let p = g.chunks[0].pages.iter_mut().find(|p| p.is_data()).unwrap();
    p.body = zs;
    thrift::set_int(&mut p.header, 3, p.body.len() as i64);
    thrift::set_int(&mut p.header, 2, zeros.len() as i64);
    add("ZSTD page inflating to 64 MiB, claimed", &g);
    drop(zeros);

    let mut devices = vec!["host".to_string()];
    if let Ok(dev) = std::env::var("CUPARQUET_MUTANTS_DEVICE") {
        if super::common::gpu_available("bombs on the GPU") {
            devices.push(dev);
        }
    }
    use std::io::Write;
    let mut out = std::io::stderr().lock();
    for device in &devices {
        // a warm-up pass, unmeasured: with a cold kernel cache the first load that needs a
        // module compiles it (NVRTC: a few hundred MiB and seconds), which is not what a file
        // costs (measured on a fresh H200: the unmutated load 258 MiB, a refusal 537 MiB)
        for p in std::iter::once(&snappy).chain(cases.iter().map(|(_, p)| p)) {
            let _ = measured_load(p, device);
        }
        let (base, ok, secs, err) = measured_load(&snappy, device);
        assert!(ok, "the unmutated file loads: {err}");
        let on_device = |p: &Path| {
            device_high_water(p, device).map_or(String::new(), |b| {
                format!(", device high-water {:.1} MiB", b as f64 / (1 << 20) as f64)
            })
        };
        let _ = writeln!(
            out,
            "{device}: unmutated file: peak RSS {} MiB, {secs:.2} s{}",
            base >> 20,
            on_device(&snappy)
        );
        for (name, p) in &cases {
            let size = std::fs::metadata(p).unwrap().len();
            let (rss, ok, secs, err) = measured_load(p, device);
            let high_water = device_high_water(p, device);
            let _ = writeln!(
                out,
                "{device}: {name} ({} KiB): {} , peak RSS {} MiB, {secs:.2} s{}{}",
                size >> 10,
                if ok { "loaded" } else { "refused" },
                rss >> 20,
                on_device(p),
                if ok {
                    String::new()
                } else {
                    format!(": {}", err.lines().last().unwrap_or(""))
                }
            );
            // the bound: the unmutated load's peak, 4× the file, and one page cap's worth
            // for the truthful 256 MiB page
            let truthful = name.contains("claimed");
            let bound = base + 4 * size + if truthful { 3 * (64 << 20) } else { 64 << 20 };
            assert!(
                rss <= bound,
                "{device}: {name}: peak RSS {} MiB over the bound {} MiB",
                rss >> 20,
                bound >> 20
            );
            if let Some(b) = high_water {
                // on the device: 4× the file and 16 MiB (page tables, job tables, a
                // chunk's pages decompressed before one is refused), and the truthful page's
                // 64 MiB three times (compressed, inflated, decoded). Measured on the H200:
                // 0.4–3.5 MiB for the refused bombs; 32 GiB for the dictionary of 2^31 - 1
                // entries before its count was checked when its chunk is selected.
                let bound = 4 * size + (16 << 20) + if truthful { 3 * (64 << 20) } else { 0 };
                assert!(
                    b <= bound,
                    "{device}: {name}: device high-water {} MiB over the bound {} MiB",
                    b >> 20,
                    bound >> 20
                );
            }
            assert!(secs < 60.0, "{device}: {name}: {secs:.1} s");
            if !truthful {
                assert!(!ok, "{device}: {name} loaded");
            }
        }
    }
}
