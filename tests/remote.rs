//! Reads from object stores and HTTP (feature `object-store`), against real servers started on
//! 127.0.0.1 by the test itself (scripts/py/remote_fixture.py): moto's S3 server, an HTTP
//! server answering range requests, and a proxy that misbehaves on request. What comes back
//! equals the load of the same local file; bad answers are retried or refused with an error
//! naming the URL and the byte range, never a hang or a wrong value.
//!
//! Needs Python with `moto[server]` (`CUPARQUET_TEST_PYTHON`, default `python3`): without it the
//! tests say so and pass, unless `CUPARQUET_REQUIRE_REMOTE=1` (CI sets it) makes that a failure.
//! `CUPARQUET_REMOTE_HTTP_ONLY=1`: without moto, the HTTP servers alone (Python's standard
//! library): the S3 cases are left out (the GPU machine runs them so).

#[path = "common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use arrow::compute::concat_batches;
use arrow::record_batch::RecordBatch;
use cuparquet::{Device, Scan, ScanBuilder};

struct Servers {
    child: Mutex<Child>,
    /// The S3 server's endpoint; `None` when only the HTTP servers run.
    s3: Option<String>,
    http: String,
    faults: String,
    bucket: String,
    /// The local files served, by key.
    files: Vec<(String, PathBuf)>,
}

impl Drop for Servers {
    fn drop(&mut self) {
        let mut c = self.child.lock().unwrap_or_else(|p| p.into_inner());
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// A small directory the prefix tests list: two Parquet files and two that are not read.
fn dir_files() -> Vec<(String, PathBuf)> {
    let sample = PathBuf::from("testdata/lineitem-sample.parquet");
    vec![
        ("dir/a.parquet".into(), sample.clone()),
        ("dir/b.parquet".into(), sample.clone()),
        ("dir/_SUCCESS".into(), PathBuf::from("Cargo.toml")),
        ("dir/notes.txt".into(), PathBuf::from("Cargo.toml")),
        ("sample.parquet".into(), sample),
    ]
}

fn corpus() -> Vec<(String, PathBuf)> {
    common::corpus_files("data", &[".parquet"])
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (format!("corpus/{name}"), p)
        })
        .collect()
}

/// The servers, started once for the whole test binary; `None` (the tests skip) without moto.
fn servers() -> Option<&'static Servers> {
    static S: OnceLock<Option<Servers>> = OnceLock::new();
    S.get_or_init(start).as_ref()
}

fn start() -> Option<Servers> {
    let python = std::env::var("CUPARQUET_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut files = dir_files();
    files.extend(corpus());
    let log = std::env::temp_dir().join(format!("cuparquet-remote-{}.log", std::process::id()));
    let http_only = std::env::var("CUPARQUET_REMOTE_HTTP_ONLY").as_deref() == Ok("1");
    let mut child = Command::new(&python)
        .arg("scripts/py/remote_fixture.py")
        .args(http_only.then_some("--s3-optional"))
        .args(files.iter().map(|(k, p)| format!("{k}={}", p.display())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("a log file"))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line);
    let v: serde_json::Value = match serde_json::from_str(&line) {
        Ok(v) => v,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            let why = std::fs::read_to_string(&log).unwrap_or_default();
            let why = why.lines().rev().take(3).collect::<Vec<_>>().join(" | ");
            if std::env::var("CUPARQUET_REQUIRE_REMOTE").as_deref() == Ok("1") {
                panic!(
                    "CUPARQUET_REQUIRE_REMOTE=1 but the servers did not start ({python}): {why}"
                );
            }
            eprintln!("remote tests skipped: the servers did not start ({python}; pip install \"moto[server]\"): {why}");
            return None;
        }
    };
    let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
    Some(Servers {
        s3: v["s3"].as_str().map(str::to_string),
        http: s("http"),
        faults: s("faults"),
        bucket: s("bucket"),
        child: Mutex::new(child),
        files,
    })
}

impl Servers {
    fn s3_url(&self, key: &str) -> String {
        format!("s3://{}/{key}", self.bucket)
    }

    /// The S3 URL of `key` and its options, or (HTTP only) the HTTP one.
    fn url(&self, key: &str) -> (String, Vec<(String, String)>) {
        match &self.s3 {
            Some(_) => (self.s3_url(key), self.s3_options()),
            None => (format!("{}/{key}", self.http), Self::http_options()),
        }
    }

    fn s3_options(&self) -> Vec<(String, String)> {
        [
            ("aws_endpoint", self.s3.as_deref().unwrap_or_default()),
            ("aws_allow_http", "true"),
            ("aws_access_key_id", "test"),
            ("aws_secret_access_key", "test"),
            ("aws_region", "us-east-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn http_options() -> Vec<(String, String)> {
        vec![("allow_http".into(), "true".into())]
    }

    fn local(&self, key: &str) -> &Path {
        &self
            .files
            .iter()
            .find(|(k, _)| k == key)
            .expect("a served key")
            .1
    }
}

/// A source loaded whole onto `device`, its batches as one host batch.
fn load(
    source: impl Into<PathBuf>,
    device: Device,
    opts: &[(String, String)],
    f: impl FnOnce(ScanBuilder) -> ScanBuilder,
) -> cuparquet::Result<(RecordBatch, cuparquet::ScanReport)> {
    let b = Scan::builder(vec![source.into()])
        .with_device(device)
        .with_storage_options(opts.iter().cloned());
    let loaded = f(b).build()?.load()?;
    let host: Vec<RecordBatch> = (loaded.batches.iter())
        .map(|b| b.to_host())
        .collect::<cuparquet::Result<_>>()?;
    let one = concat_batches(&loaded.schema, &host).map_err(|e| cuparquet::Error::Device {
        device: "test".into(),
        reason: e.to_string(),
    })?;
    Ok((one, loaded.report))
}

fn gpu() -> bool {
    let have = cuparquet::cuda_devices().is_ok_and(|d| !d.is_empty());
    if !have && std::env::var("CUPARQUET_REQUIRE_GPU").as_deref() == Ok("1") {
        panic!("CUPARQUET_REQUIRE_GPU=1 but there is no CUDA device");
    }
    have
}

#[test]
fn corpus_from_s3_and_http_equals_local_loads() {
    let Some(s) = servers() else { return };
    let devices: Vec<Device> = if gpu() {
        vec![Device::Host, Device::Cuda(0)]
    } else {
        vec![Device::Host]
    };
    let mut compared = 0;
    for (key, path) in s.files.iter().filter(|(k, _)| k.starts_with("corpus/")) {
        let want = load(path.clone(), Device::Host, &[], |b| b);
        let http = format!("{}/{key}", s.http);
        for device in &devices {
            let mut sources = vec![(http.clone(), Servers::http_options())];
            if s.s3.is_some() {
                sources.push((s.s3_url(key), s.s3_options()));
            }
            for (url, opts) in sources {
                let got = load(url.as_str(), *device, &opts, |b| b);
                match (&want, got) {
                    (Ok((w, _)), Ok((g, report))) => {
                        assert_eq!(g, *w, "{url} on {device} differs from {}", path.display());
                        let io = &report.loads[0].io;
                        assert!(io
                            .requests
                            .iter()
                            .all(|r| r.path == cuparquet::io::IoPath::Remote));
                        compared += 1;
                    }
                    (Err(_), Err(e)) => {
                        let m = e.to_string();
                        assert!(m.contains(&url), "{url}: the error does not name it: {m}");
                    }
                    (Ok(_), Err(e)) => panic!("{url} on {device}: {e}"),
                    (Err(e), Ok(_)) => panic!("{url} on {device} loads; the local file fails: {e}"),
                }
            }
        }
    }
    assert!(compared >= 60, "only {compared} loads compared");
}

#[test]
fn a_prefix_is_a_directory_of_parquet_objects() {
    let Some(s) = servers() else { return };
    if s.s3.is_none() {
        eprintln!("no S3 server: listing not tested (HTTP servers do not list)");
        return;
    }
    let want = load(s.local("dir/a.parquet"), Device::Host, &[], |b| b)
        .unwrap()
        .0;
    let want = concat_batches(&want.schema(), &[want.clone(), want]).unwrap();
    let (got, report) = load(s.s3_url("dir/"), Device::Host, &s.s3_options(), |b| b).unwrap();
    assert_eq!(got, want);
    let paths: Vec<String> = report
        .loads
        .iter()
        .map(|l| l.path.display().to_string())
        .collect();
    assert_eq!(
        paths,
        [s.s3_url("dir/a.parquet"), s.s3_url("dir/b.parquet")]
    );
}

#[test]
fn filters_columns_and_batches_equal_local_ones() {
    let Some(s) = servers() else { return };
    let shape = |b: ScanBuilder| {
        b.with_columns(["l_orderkey", "l_returnflag", "l_quantity"])
            .with_row_filter("l_quantity < 10 AND l_returnflag = 'R'")
            .with_batch_rows(1000)
    };
    let want = load(s.local("sample.parquet"), Device::Host, &[], shape)
        .unwrap()
        .0;
    assert!(want.num_rows() > 0);
    for device in if gpu() {
        vec![Device::Host, Device::Cuda(0)]
    } else {
        vec![Device::Host]
    } {
        let (url, opts) = s.url("sample.parquet");
        let (got, report) = load(url, device, &opts, shape).unwrap();
        assert_eq!(got, want, "on {device}");
        let remote = report.loads[0].io.remote.clone().expect("remote counters");
        assert!(remote.gets >= 1 && remote.max_in_flight >= 1, "{remote:?}");
    }
    // a memory budget on the device: passes read one after the other
    if gpu() {
        let (url, opts) = s.url("sample.parquet");
        let (got, _) = load(url, Device::Cuda(0), &opts, |b| {
            shape(b).with_memory_budget(1 << 20)
        })
        .unwrap();
        assert_eq!(got, want, "under a budget");
    }
}

#[test]
fn small_pieces_and_one_get_at_a_time_read_the_same() {
    let Some(s) = servers() else { return };
    let want = load(s.local("sample.parquet"), Device::Host, &[], |b| b)
        .unwrap()
        .0;
    let (url, opts) = s.url("sample.parquet");
    let (got, report) = load(url, Device::Host, &opts, |b| {
        b.with_remote_piece_size(10_000).with_remote_concurrency(1)
    })
    .unwrap();
    assert_eq!(got, want);
    let remote = report.loads[0].io.remote.clone().unwrap();
    assert!(remote.gets > 30, "{remote:?}");
    // one GET at a time per read (a host load's units read side by side)
    assert!(
        remote.max_in_flight <= report.loads[0].row_groups,
        "{remote:?}"
    );
}

#[test]
fn errors_name_the_url() {
    let Some(s) = servers() else { return };
    let missing = format!("{}/nope.parquet", s.http);
    let e = load(
        missing.as_str(),
        Device::Host,
        &Servers::http_options(),
        |b| b,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains(&missing) && e.contains("404"), "{e}");
    if s.s3.is_none() {
        return;
    }
    let missing = s.s3_url("nope.parquet");
    let e = load(missing.as_str(), Device::Host, &s.s3_options(), |b| b)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&missing) && e.contains("GET"), "{e}");
    let e = load(
        s.s3_url("sample.parquet"),
        Device::Host,
        &[("aws_no_such_key".into(), "1".into())],
        |b| b,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("aws_no_such_key") && e.contains("s3://"), "{e}");
    let e = load(
        s.s3_url("missing-prefix/"),
        Device::Host,
        &s.s3_options(),
        |b| b,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("missing-prefix") && e.contains("no *.parquet"),
        "{e}"
    );
}

#[test]
fn a_misbehaving_server_is_retried_or_refused_never_read_wrong() {
    let Some(s) = servers() else { return };
    let want = load(s.local("sample.parquet"), Device::Host, &[], |b| b)
        .unwrap()
        .0;
    let mut opts = Servers::http_options();
    opts.push(("timeout".into(), "2s".into()));
    let faults = ["503once", "reset", "short", "long", "stall"];
    let results: Vec<(String, Duration, cuparquet::Result<RecordBatch>)> =
        std::thread::scope(|t| {
            let handles: Vec<_> = faults
                .iter()
                .map(|f| {
                    let url = format!("{}/fault/{f}/sample.parquet", s.faults);
                    let opts = opts.clone();
                    t.spawn(move || {
                        let t0 = Instant::now();
                        let r = load(url.as_str(), Device::Host, &opts, |b| b).map(|(b, _)| b);
                        (url, t0.elapsed(), r)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
    let mut out = std::io::stderr();
    for (url, took, r) in &results {
        let _ = writeln!(
            out,
            "{url}: {:?} in {took:.1?}",
            r.as_ref().map(|b| b.num_rows())
        );
        assert!(*took < Duration::from_secs(120), "{url} took {took:?}");
        match r {
            Ok(b) => assert_eq!(*b, want, "{url} read wrong values"),
            Err(e) => {
                let m = e.to_string();
                assert!(
                    m.contains(url.as_str()),
                    "{url}: the error does not name it: {m}"
                );
            }
        }
    }
    // a 503 is retried; a body longer than its range is refused
    for (url, _, r) in &results {
        if url.contains("/503once/") {
            assert!(
                r.is_ok(),
                "{url}: a 503 was not retried: {:?}",
                r.as_ref().err()
            );
        }
        if url.contains("/long/") {
            assert!(r.is_err(), "{url}: a body longer than its range was read");
        }
    }
}

/// The C API's path argument takes a URL: its store is configured from the environment (the
/// `AWS_*` variables a C caller sets), as `object_store`'s builders read it.
#[test]
fn the_c_api_opens_a_url() {
    use cuparquet::array::c_device::ArrowSchema;
    use cuparquet::capi;
    use std::ffi::{CStr, CString};
    let Some(s) = servers() else { return };
    let Some(endpoint) = &s.s3 else {
        eprintln!("no S3 server: the C API's URL not tested");
        return;
    };
    // the other tests pass their options explicitly, which win over these
    for (k, v) in [
        ("AWS_ENDPOINT", endpoint.as_str()),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
    ] {
        std::env::set_var(k, v);
    }
    let url = CString::new(s.s3_url("sample.parquet")).unwrap();
    let columns = CString::new("l_orderkey, l_quantity").unwrap();
    let host = CString::new("host").unwrap();
    let mut reader = std::ptr::null_mut();
    // SAFETY: NUL-terminated strings (or null) and a pointer to fill
    let rc = unsafe {
        capi::cuparquet_open(
            url.as_ptr(),
            columns.as_ptr(),
            std::ptr::null(),
            host.as_ptr(),
            &mut reader,
        )
    };
    assert_eq!(rc, capi::CUPARQUET_OK);
    let mut schema = ArrowSchema::empty();
    // SAFETY: an open reader and a schema to fill
    let rc = unsafe { capi::cuparquet_reader_schema(reader, &mut schema) };
    assert_eq!(rc, capi::CUPARQUET_OK);
    assert_eq!(schema.n_children, 2);
    // SAFETY: opened above, closed once
    unsafe { capi::cuparquet_close(reader) };
    // a missing object: the error names its URL
    let missing = CString::new(s.s3_url("no-such.parquet")).unwrap();
    let mut reader = std::ptr::null_mut();
    // SAFETY: as above
    let rc = unsafe {
        capi::cuparquet_open(
            missing.as_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            host.as_ptr(),
            &mut reader,
        )
    };
    assert_ne!(rc, capi::CUPARQUET_OK);
    // SAFETY: this thread's last error, a NUL-terminated message
    let msg = unsafe { CStr::from_ptr(capi::cuparquet_last_error()) };
    let msg = msg.to_str().unwrap();
    assert!(msg.contains("s3://data/no-such.parquet"), "{msg}");
}

/// A read is cut into pieces small enough to have `concurrency` GETs in flight, within 1 MiB
/// and the piece size.
#[test]
fn pieces_fill_the_concurrency_within_their_bounds() {
    use cuparquet::config::RemoteSettings;
    use cuparquet::io::remote::{piece_for, REMOTE_MIN_PIECE};
    let at = |concurrency: usize, piece_size: u64| RemoteSettings {
        concurrency,
        piece_size,
        ..RemoteSettings::default()
    };
    let mib = 1u64 << 20;
    // 174 MiB with 64 in flight: 2.72 MiB pieces
    assert_eq!(
        piece_for(174 * mib, &at(64, 8 * mib)),
        (174 * mib).div_ceil(64)
    );
    // a large read: the piece size bounds them
    assert_eq!(piece_for(4096 * mib, &at(64, 8 * mib)), 8 * mib);
    // a small read: never below 1 MiB
    assert_eq!(piece_for(3 * mib, &at(64, 8 * mib)), REMOTE_MIN_PIECE);
    // a piece size below 1 MiB is kept
    assert_eq!(piece_for(3 * mib, &at(64, 10_000)), 10_000);
    // one GET at a time: pieces of the piece size
    assert_eq!(piece_for(174 * mib, &at(1, 8 * mib)), 8 * mib);
}
