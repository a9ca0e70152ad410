//! Faults survived (issue 18, item 5): a read that fails (EIO) or comes back short, through the
//! `RangeReader` seam and inside the readers; a file truncated between the footer read and the
//! data reads; a device allocation or a cuFile read that fails (on the GPU machine). Each gives
//! a clear error naming the file and what failed, no batch that is not whole is handed out as
//! whole, and the next load in the same process works.
//!
//! The injected sites ([`cuparquet::error::fault`]) are process-wide, so this file is one test.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use common::*;
use cuparquet::config::IoSettings;
use cuparquet::error::fault::{self, Site};
use cuparquet::io::host::HostReader;
use cuparquet::io::{Dest, IoReport, RangeReader};
use cuparquet::plan::IoRequest;
use cuparquet::source::ParquetFile;
use cuparquet::{Device, Scan};

/// Forwards to a host reader; fails the `fail_at`-th call (1-based) with EIO.
#[derive(Debug)]
struct FailingReader {
    inner: HostReader,
    calls: AtomicUsize,
    fail_at: usize,
}

impl RangeReader for FailingReader {
    fn name(&self) -> &'static str {
        "failing"
    }

    fn read(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        dest: Dest<'_>,
    ) -> cuparquet::Result<IoReport> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.fail_at {
            let r = requests.first().map_or(0..0, |q| q.range.clone());
            return Err(cuparquet::Error::Io {
                path: file.path().to_path_buf(),
                op: format!("read bytes {}..{}", r.start, r.end),
                source: std::io::Error::from_raw_os_error(5),
            });
        }
        self.inner.read(file, requests, dest)
    }
}

fn load(path: &Path, device: Device) -> cuparquet::Result<RecordBatch> {
    let loaded = Scan::builder(path)
        .with_device(device)
        .with_batch_rows(4096)
        .build()?
        .load()?;
    Ok(concat(&loaded.schema, &loaded.to_host()?))
}

/// A failed load's error: one line naming the file and containing `want`.
fn assert_clear(path: &Path, what: &str, e: &cuparquet::Error, want: &[&str]) {
    let msg = e.to_string();
    assert!(
        msg.contains(&path.display().to_string()) && !msg.contains('\n'),
        "{what}: {msg}"
    );
    for w in want {
        assert!(msg.contains(w), "{what}: '{w}' not in: {msg}");
    }
}

/// The stream's batches until the first error: each must be rows of `want` in order, whole;
/// returns (rows before the error, the error).
fn stream_until_error(
    reader: &Scan,
    via: Option<Arc<dyn RangeReader>>,
    want: &RecordBatch,
) -> (usize, Option<cuparquet::Error>) {
    let batches = match via {
        Some(r) => reader.batches_with(r),
        None => reader.batches(),
    };
    let mut rows = 0;
    let mut err = None;
    for b in batches {
        match b {
            Ok(b) => {
                assert!(err.is_none(), "a batch after the stream's error");
                let host = b.to_host().unwrap();
                let slice = want.slice(rows, host.num_rows());
                assert_same("a batch before the error", &host, &slice);
                rows += host.num_rows();
            }
            Err(e) => {
                assert!(
                    err.is_none(),
                    "two errors: the stream must end at the first"
                );
                err = Some(e);
            }
        }
    }
    (rows, err)
}

#[test]
fn faults_fail_loads_clearly_and_the_next_load_works() {
    // the memory hog's process (memory_pressure): holds the device memory it is told to until
    // its standard input closes
    if let Ok(bytes) = std::env::var("CUPARQUET_TEST_HOG") {
        hog(bytes.parse().unwrap());
        return;
    }
    let step = watchdog();
    let dir = scratch_dir();
    let path = dir.path().join("faults.parquet");
    let batch = flat_batch(20_000, 3);
    write(
        &path,
        &[batch],
        parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(2_500))
            .build(),
    );
    let want = oracle(&path, &Projection::All, None).unwrap();
    let mut devices = vec![Device::Host];
    if gpu_available("faults on the GPU") {
        devices.push(Device::Cuda(0));
    }
    for &device in &devices {
        let ctx = |what: &str| format!("{device}: {what}");
        // a pread failing with EIO, then one finding the file ended, at a few places
        for (site, words) in [
            (Site::Pread, &["Input/output error", "injected fault"][..]),
            (Site::ShortRead, &["ended"][..]),
        ] {
            for nth in [1, 2, 5] {
                step(format!("{device}: {} #{nth}", site.name()));
                let reader = Scan::builder(&path)
                    .with_device(device)
                    .with_batch_rows(4096)
                    .build()
                    .unwrap();
                fault::arm(site, nth);
                let r = reader.load();
                fault::disarm();
                let what = ctx(&format!("{} #{nth}", site.name()));
                match r {
                    Err(e) => assert_clear(&path, &what, &e, words),
                    // the site was not reached n times on this path (a device load reads
                    // through fewer, larger preads)
                    Ok(l) => assert_same(&what, &concat(&l.schema, &l.to_host().unwrap()), &want),
                }
                assert_same(&ctx("the next load"), &load(&path, device).unwrap(), &want);
            }
        }
        // the stream: batches before the failure whole and right, then one error, then the end
        step(format!("{device}: the stream"));
        let reader = Scan::builder(&path)
            .with_device(device)
            .with_batch_rows(2_500)
            .build()
            .unwrap();
        fault::arm(Site::Pread, 3);
        let (rows, err) = stream_until_error(&reader, None, &want);
        fault::disarm();
        if let Some(e) = err {
            assert_clear(&path, &ctx("stream"), &e, &["Input/output error"]);
        } else {
            assert_eq!(rows, want.num_rows(), "{}", ctx("stream without error"));
        }
        assert_same(&ctx("the next load"), &load(&path, device).unwrap(), &want);
    }

    // the RangeReader seam: a reader whose n-th call fails (host target)
    let host = HostReader::new(IoSettings::default()).unwrap();
    for fail_at in [1, 2, 4] {
        step(format!("the range reader failing at call {fail_at}"));
        let reader = Scan::builder(&path)
            .with_device(Device::Host)
            .with_batch_rows(2_500)
            .build()
            .unwrap();
        let failing = FailingReader {
            inner: host.clone(),
            calls: AtomicUsize::new(0),
            fail_at,
        };
        match reader.load_with(&failing) {
            Err(e) => assert_clear(&path, "load_with", &e, &["Input/output error"]),
            Ok(_) => assert!(
                failing.calls.load(Ordering::SeqCst) < fail_at,
                "the failing call's error was lost"
            ),
        }
        let failing = Arc::new(FailingReader {
            inner: host.clone(),
            calls: AtomicUsize::new(0),
            fail_at,
        });
        let (rows, err) = stream_until_error(&reader, Some(failing.clone()), &want);
        match err {
            Some(e) => assert_clear(&path, "batches_with", &e, &["Input/output error"]),
            None => {
                assert!(failing.calls.load(Ordering::SeqCst) < fail_at);
                assert_eq!(rows, want.num_rows());
            }
        }
        assert_same("the next load", &load(&path, Device::Host).unwrap(), &want);
    }

    // the file truncated after the footer was read: the data reads run past its end
    let bytes = std::fs::read(&path).unwrap();
    for &device in &devices {
        step(format!("{device}: the file truncated"));
        let reader = Scan::builder(&path).with_device(device).build().unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(bytes.len() as u64 / 2).unwrap();
        let e = reader.load().expect_err("half the file is gone");
        assert_clear(&path, &format!("{device}: truncated"), &e, &[]);
        std::fs::write(&path, &bytes).unwrap();
        assert_same("the restored file", &load(&path, device).unwrap(), &want);
    }

    // the device layer: an allocation failing at each of the first few, a cuFile read failing
    if devices.contains(&Device::Cuda(0)) {
        for nth in 1..=8 {
            step(format!("device-alloc #{nth}"));
            fault::arm(Site::DeviceAlloc, nth);
            let r = load(&path, Device::Cuda(0));
            fault::disarm();
            match r {
                Err(e) => assert_clear(
                    &path,
                    &format!("device-alloc #{nth}"),
                    &e,
                    &["cuda:0", "allocating"],
                ),
                Ok(got) => assert_same(&format!("device-alloc #{nth}"), &got, &want),
            }
            assert_same(
                "the next load",
                &load(&path, Device::Cuda(0)).unwrap(),
                &want,
            );
        }
        // pinned host memory that cannot be allocated, at each of the first few allocations
        // (the process's pool emptied first, so that the load allocates its staging)
        for nth in 1..=4 {
            step(format!("pinned-alloc #{nth}"));
            cuparquet::device::gpu(0).unwrap().release_pinned();
            fault::arm(Site::PinnedAlloc, nth);
            let r = load(&path, Device::Cuda(0));
            fault::disarm();
            match r {
                Err(e) => assert_clear(
                    &path,
                    &format!("pinned-alloc #{nth}"),
                    &e,
                    &["cuda:0", "pinned host memory"],
                ),
                Ok(got) => assert_same(&format!("pinned-alloc #{nth}"), &got, &want),
            }
            assert_same(
                "the next load",
                &load(&path, Device::Cuda(0)).unwrap(),
                &want,
            );
        }
        // cuFile only where the policy sends ranges to it (a threshold of 0: every range)
        let via_cufile = || {
            Scan::builder(&path)
                .with_device(Device::Cuda(0))
                .with_gds_threshold(0)
                .build()
                .unwrap()
        };
        step("cufile-read".into());
        fault::arm(Site::CufileRead, 1);
        let r = via_cufile().load();
        fault::disarm();
        match r {
            Err(e) => assert_clear(&path, "cufile-read", &e, &["5011"]),
            Ok(l) => assert_same(
                "cufile-read (no cuFile read on this machine)",
                &concat(&l.schema, &l.to_host().unwrap()),
                &want,
            ),
        }
        let l = via_cufile().load().unwrap();
        assert_same(
            "the next load",
            &concat(&l.schema, &l.to_host().unwrap()),
            &want,
        );
        memory_pressure(&path, &want, &step);
    }
}

/// Says each step of the test as it starts, and ends the process naming the step where one
/// takes more than two minutes: a hang is a failure that names where it hangs, not a time
/// limit running out in silence.
fn watchdog() -> impl Fn(String) {
    use std::sync::Mutex;
    use std::time::{Duration, Instant};
    let at = Arc::new(Mutex::new(("the start".to_string(), Instant::now())));
    let seen = Arc::clone(&at);
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(5));
        let (what, since) = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if since.elapsed() > Duration::from_secs(120) {
            eprintln!("faults: no progress for two minutes at: {what}");
            std::process::exit(101);
        }
    });
    move |what: String| {
        eprintln!("faults: {what}");
        *at.lock().unwrap_or_else(|p| p.into_inner()) = (what, Instant::now());
    }
}

/// Holds `bytes` of device memory on `cuda:0`, says so on its standard output, and lets go
/// when its standard input closes (the test's end, or its death).
fn hog(bytes: usize) {
    use std::io::{Read, Write};
    // (its progress on standard error, which the test's shares: where it stops, if it does)
    eprintln!("hog: taking {} MiB of cuda:0", bytes >> 20);
    let gpu = cuparquet::device::gpu(0).unwrap();
    eprintln!("hog: context ready");
    // in pieces of 1 GiB: as much of `bytes` as the device gives
    let mut held = Vec::new();
    let mut left = bytes;
    while left > 0 {
        let n = left.min(1 << 30);
        match gpu.alloc(n) {
            Ok(b) => held.push(b),
            Err(e) => {
                eprintln!("hog: {e}");
                break;
            }
        }
        left -= n;
        if held.len() % 16 == 0 {
            eprintln!("hog: {} GiB held", held.len());
        }
    }
    println!("holding {}", bytes - left);
    std::io::stdout().flush().unwrap();
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// Another process holding all but `spare` bytes of the device's free memory: loads (the
/// default budget, computed from the free memory when the scan starts, and a budget set above
/// what is free) fit or fail with an error naming the memory, within a minute each (never a
/// CUDA abort, never a hang), and the next load, once the memory is back, works.
fn memory_pressure(path: &Path, want: &RecordBatch, step: &dyn Fn(String)) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let gpu = cuparquet::device::gpu(0).unwrap();
    let (free, _) = gpu.memory_info().unwrap();
    for spare in [256usize << 20, 32 << 20, 0] {
        step(format!(
            "memory pressure: another process holding all but {} MiB",
            spare >> 20
        ));
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "faults_fail_loads_clearly_and_the_next_load_works",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CUPARQUET_TEST_HOG", free.saturating_sub(spare).to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // its "holding" line, within 90 s (else the test fails naming the wait, never hangs)
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut out = BufReader::new(out);
            let mut line = String::new();
            // (libtest's "test NAME ... " starts the line the child's own output continues)
            while !line.contains("holding ") {
                line.clear();
                if out.read_line(&mut line).unwrap_or(0) == 0 {
                    let _ = tx.send(None);
                    return;
                }
            }
            let at = line.find("holding ").unwrap_or(0);
            let _ = tx.send(Some(line[at..].to_string()));
        });
        let line = match rx.recv_timeout(std::time::Duration::from_secs(90)) {
            Ok(Some(line)) => line,
            Ok(None) => panic!("the other process ended before it held the memory"),
            Err(_) => {
                let _ = child.kill();
                panic!("the other process did not take the memory in 90 s (its progress above)")
            }
        };
        let (now, _) = gpu.memory_info().unwrap();
        eprintln!("another process {}; {} MiB free", line.trim(), now >> 20);
        for budget in [None, Some(free as u64)] {
            let what = format!("{} MiB free, budget {budget:?}", now >> 20);
            let p = path.to_path_buf();
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut b = Scan::builder(&p).with_device(Device::Cuda(0));
                if let Some(n) = budget {
                    b = b.with_memory_budget(n);
                }
                let r = b
                    .build()
                    .and_then(|r| r.load())
                    .and_then(|l| Ok(concat(&l.schema, &l.to_host()?)));
                let _ = tx.send(r);
            });
            match rx.recv_timeout(std::time::Duration::from_secs(60)) {
                Ok(Ok(got)) => assert_same(&what, &got, want),
                Ok(Err(e)) => {
                    let msg = e.to_string();
                    assert!(
                        msg.contains(&path.display().to_string())
                            && !msg.contains('\n')
                            && (msg.contains("free") || msg.contains("budget")),
                        "{what}: {msg}"
                    );
                    eprintln!("{what}: {msg}");
                }
                Err(_) => panic!("{what}: the load neither ended nor failed in a minute"),
            }
        }
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
        assert_same(
            "the next load, the memory back",
            &load(path, Device::Cuda(0)).unwrap(),
            want,
        );
    }
}
