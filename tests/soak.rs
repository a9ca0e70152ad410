//! The soak (issue 18, item 5): many loads of mixed files from many threads at once, on the
//! GPU where there is one; every load equal to arrow-rs's read (or refused where arrow-rs
//! refuses too), and the device memory the loads leave behind steady: the live bytes after
//! are those before, the pool's high-water reported. `cargo test` runs a short soak (host
//! target without a GPU); `CUPARQUET_SOAK=N` runs N loads (1,000 on the GPU machine),
//! `CUPARQUET_SOAK_FILES=DIR` adds DIR's `*.parquet` files (`scripts/py/writers.py`).

mod common;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use cuparquet::{Device, Scan};

#[test]
fn many_loads_from_many_threads_leave_memory_steady() {
    let loads: usize = std::env::var("CUPARQUET_SOAK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let dir = scratch_dir();
    let mut files: Vec<PathBuf> = generate_corpus(dir.path())
        .into_iter()
        .map(|(_, p)| p)
        .step_by(3)
        .collect();
    files.extend(
        corpus_files("data", &[".parquet"])
            .into_iter()
            .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() < 4 << 20))
            .step_by(4),
    );
    if let Ok(d) = std::env::var("CUPARQUET_SOAK_FILES") {
        let mut more: Vec<PathBuf> = std::fs::read_dir(&d)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
            .collect();
        more.sort();
        files.extend(more);
    }
    // the oracle once per file
    let want: Vec<Option<arrow::record_batch::RecordBatch>> = files
        .iter()
        .map(|f| oracle(f, &Projection::All, None).ok())
        .collect();
    let device = if gpu_available("the soak on the GPU") {
        Device::Cuda(0)
    } else {
        Device::Host
    };
    let gpu = match device {
        Device::Cuda(n) => Some(cuparquet::device::gpu(n).unwrap()),
        _ => None,
    };
    // one warm-up pass: the pools fill to their working size
    for f in files.iter().take(4) {
        let _ = Scan::builder(f)
            .with_device(device)
            .build()
            .map(|r| r.load());
    }
    let before = gpu.as_ref().map(|g| {
        g.reset_peak_live_bytes();
        g.live_bytes()
    });
    let pinned_before = gpu.as_ref().map(|g| g.pinned_bytes());
    let next = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
    let threads = 16;
    std::thread::scope(|s| {
        for _ in 0..threads {
            let (next, failures, files, want) = (&next, &failures, &files, &want);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= loads {
                    break;
                }
                let k = (i * 7919) % files.len();
                let f = &files[k];
                let got = Scan::builder(f)
                    .with_device(device)
                    .build()
                    .and_then(|r| r.load())
                    .and_then(|l| Ok(concat(&l.schema, &l.to_host()?)));
                let bad = match (&got, &want[k]) {
                    (Ok(g), Some(w)) => (g.num_rows() != w.num_rows()
                        || g.columns()
                            .iter()
                            .zip(w.columns())
                            .any(|(a, b)| a.to_data() != b.to_data()))
                    .then(|| "differs from arrow-rs".to_string()),
                    (Ok(_), None) => Some("loaded what arrow-rs refuses".into()),
                    (Err(e), _) if !e.to_string().contains(&f.display().to_string()) => {
                        Some(format!("unclear error: {e}"))
                    }
                    (Err(_), _) => None,
                };
                if let Some(b) = bad {
                    failures
                        .lock()
                        .unwrap()
                        .push(format!("{}: {b}", f.display()));
                }
            });
        }
    });
    let failures = failures.lock().unwrap();
    use std::io::Write;
    let mut e = std::io::stderr().lock();
    let _ = writeln!(
        e,
        "soak: {loads} loads of {} files from {threads} threads on {device}: {} failures",
        files.len(),
        failures.len()
    );
    if let (Some(g), Some(before)) = (&gpu, before) {
        let (after, peak) = (g.live_bytes(), g.peak_live_bytes());
        let _ = writeln!(
            e,
            "soak: device memory live before {before} B, after {after} B, high-water {} MiB",
            peak >> 20
        );
        assert_eq!(after, before, "device memory left behind by the loads");
        // pinned memory: what the pool keeps may grow to its retain limit, no further
        let (pb, pa) = (pinned_before.unwrap_or(0), g.pinned_bytes());
        let _ = writeln!(
            e,
            "soak: pinned host memory before {} MiB, after {} MiB (the pool keeps up to {} MiB)",
            pb >> 20,
            pa >> 20,
            cuparquet::device::pinned_pool_retain() >> 20
        );
        assert!(
            pa <= pb.max(cuparquet::device::pinned_pool_retain() as u64),
            "pinned memory grew past the pool's retain limit: {pb} B before, {pa} B after"
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
