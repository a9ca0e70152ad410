//! Parquet from an S3-compatible server into device memory (feature `object-store`): what the
//! server can serve, and cuparquet's load of the same objects, at several concurrencies.
//!
//! `bench-remote_device NAME=URL...` — each URL an object or a prefix ending in `/` (its
//! `*.parquet` objects); the store comes from the `AWS_*` environment as for any load.
//! Environment: `CUPARQUET_BENCH_ROUNDS` (default 5), `CUPARQUET_BENCH_OUT` (JSON lines
//! appended), `CUPARQUET_BENCH_CONCURRENCY` (comma-separated GETs in flight, default
//! `16,64,256`), `CUPARQUET_BENCH_DEVICE` (default `cuda:0`; `host` decodes on the host).
//!
//! For each source, after one warm-up load checked equal to the host load of the same URLs:
//! - `ceiling`: the bytes cuparquet's plan reads (its coalesced requests, cut into the pieces
//!   a load cuts them into), fetched by `object_store` GETs at each concurrency and discarded: what
//!   the server can serve this client, with nothing else to do;
//! - `load`: `Scan::load()` into device memory at each concurrency: wall time, GETs issued,
//!   bytes over-read by coalescing (bytes asked of the server beyond the column chunks), time
//!   to the first byte, and the time from the URL to the first batch of `batches()`.
//!
//! `bench-remote_device proxy LISTEN UPSTREAM DELAY_MS` runs a TCP proxy that holds every
//! chunk DELAY_MS/2 in each direction (DELAY_MS of round trip), for the latency runs: point
//! `AWS_ENDPOINT_URL` (and KvikIO, cuDF) at LISTEN.

#[path = "common/mod.rs"]
mod common;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::env_usize;
use cuparquet::config::RemoteSettings;
use cuparquet::io::remote::piece_for;
use cuparquet::source::remote::store_for;
use cuparquet::{Device, Scan};
use futures::stream::{self, StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args.first().map(String::as_str) == Some("proxy") {
        let [_, listen, upstream, delay] = &args[..] else {
            eprintln!("usage: bench-remote_device proxy LISTEN UPSTREAM DELAY_MS");
            std::process::exit(2);
        };
        let delay = Duration::from_millis(delay.parse().expect("DELAY_MS: a number"));
        proxy(listen, upstream, delay);
        return;
    }
    let rounds = env_usize("CUPARQUET_BENCH_ROUNDS", 5).max(1);
    let conc: Vec<usize> = std::env::var("CUPARQUET_BENCH_CONCURRENCY")
        .unwrap_or_else(|_| "16,64,256".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let device: Device = std::env::var("CUPARQUET_BENCH_DEVICE")
        .unwrap_or_else(|_| "cuda:0".into())
        .parse()
        .expect("CUPARQUET_BENCH_DEVICE");
    let mut out = std::env::var("CUPARQUET_BENCH_OUT").ok().map(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .expect("CUPARQUET_BENCH_OUT")
    });
    let label = std::env::var("CUPARQUET_BENCH_LABEL").unwrap_or_default();
    for a in &args {
        let Some((name, url)) = a.split_once('=') else {
            eprintln!("NAME=URL expected, got {a}");
            std::process::exit(2);
        };
        let r = source(name, url, device, rounds, &conc, &label);
        for line in r {
            println!("{line}");
            if let Some(f) = &mut out {
                writeln!(f, "{line}").unwrap();
            }
        }
    }
}

fn best_median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

/// The JSON lines of one source.
fn source(
    name: &str,
    url: &str,
    device: Device,
    rounds: usize,
    conc: &[usize],
    label: &str,
) -> Vec<String> {
    let mut lines = Vec::new();
    let settings = RemoteSettings::default();
    // the warm-up, checked against the host load of the same URLs
    let scan = Scan::builder(url)
        .with_device(device)
        .build()
        .expect("build");
    let got = scan.load().expect("load");
    let want = Scan::builder(url)
        .with_device(Device::Host)
        .build()
        .and_then(|s| s.load())
        .expect("host load");
    let rows: u64 = got.report.rows();
    assert_eq!(
        rows,
        want.report.rows(),
        "{name}: rows differ from the host load"
    );
    let (a, b) = (got.to_host().unwrap(), want.to_host().unwrap());
    let a = arrow::compute::concat_batches(&a[0].schema(), &a).unwrap();
    let b = arrow::compute::concat_batches(&b[0].schema(), &b).unwrap();
    assert!(a == b, "{name}: the device load differs from the host load");
    drop((a, b, got, want));
    // what the plan reads: (url, ranges) of each file
    let reads: Vec<(String, Vec<std::ops::Range<u64>>)> = scan
        .files()
        .iter()
        .map(|f| {
            let url = f.path().to_string_lossy().into_owned();
            (
                url,
                f.plan().requests.iter().map(|q| q.range.clone()).collect(),
            )
        })
        .collect();
    let planned: u64 = scan.files().iter().map(|f| f.plan().request_bytes()).sum();
    drop(scan);
    for &c in conc {
        // the server's ceiling: the same bytes by plain GETs, discarded
        let mut times = Vec::new();
        for _ in 0..rounds {
            let t = Instant::now();
            let n = ceiling(&reads, c, &settings);
            assert_eq!(
                n, planned,
                "{name}: the ceiling read {n} bytes of {planned}"
            );
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let (best, median) = best_median(times);
        let gbs = planned as f64 / best / 1e6;
        println!(
            "{label}{name} ceiling c={c}: {best:.1} ms best, {median:.1} median, {gbs:.2} GB/s"
        );
        lines.push(format!(
            r#"{{"bench":"remote_device","label":"{label}","source":"{name}","what":"ceiling","concurrency":{c},"bytes":{planned},"best_ms":{best:.3},"median_ms":{median:.3}}}"#
        ));
        // cuparquet's load at this concurrency
        let mut times = Vec::new();
        let mut first = Vec::new();
        let mut last = None;
        for _ in 0..rounds {
            let t = Instant::now();
            let s = Scan::builder(url)
                .with_device(device)
                .with_remote_concurrency(c)
                .build()
                .expect("build");
            let loaded = s.load().expect("load");
            times.push(t.elapsed().as_secs_f64() * 1e3);
            last = Some(loaded.report);
            let t = Instant::now();
            let s = Scan::builder(url)
                .with_device(device)
                .with_remote_concurrency(c)
                .build()
                .expect("build");
            let mut b = s.batches();
            let one = b.next().expect("a batch").expect("the first batch");
            first.push(t.elapsed().as_secs_f64() * 1e3);
            drop((one, b));
        }
        let report = last.unwrap();
        let (best, median) = best_median(times);
        let (first_best, _) = best_median(first);
        let remote: Vec<_> = report
            .loads
            .iter()
            .filter_map(|l| l.io.remote.clone())
            .collect();
        let gets: usize = remote.iter().map(|r| r.gets).sum();
        let asked: u64 = remote.iter().map(|r| r.bytes).sum();
        let chunks: u64 = report.loads.iter().map(|l| l.bytes_planned).sum();
        let ttfb = remote
            .iter()
            .map(|r| r.first_byte)
            .min()
            .unwrap_or_default()
            .as_secs_f64()
            * 1e3;
        let in_flight = remote.iter().map(|r| r.max_in_flight).max().unwrap_or(0);
        let gbs = asked as f64 / best / 1e6;
        println!(
            "{label}{name} load c={c}: {best:.1} ms best, {median:.1} median, {gbs:.2} GB/s; \
             {gets} GETs ({in_flight} in flight at most), {} MiB asked, {} KiB over-read, \
             first byte {ttfb:.1} ms, first batch {first_best:.1} ms",
            asked >> 20,
            asked.saturating_sub(chunks) >> 10
        );
        lines.push(format!(
            r#"{{"bench":"remote_device","label":"{label}","source":"{name}","what":"load","device":"{device}","concurrency":{c},"rows":{rows},"bytes":{asked},"chunk_bytes":{chunks},"gets":{gets},"max_in_flight":{in_flight},"best_ms":{best:.3},"median_ms":{median:.3},"first_byte_ms":{ttfb:.3},"first_batch_ms":{first_best:.3}}}"#
        ));
    }
    lines
}

/// GETs of `reads` in the pieces a load at concurrency `c` cuts each file's reads into
/// ([`piece_for`]), `c` in flight, bodies discarded: the bytes read.
fn ceiling(
    reads: &[(String, Vec<std::ops::Range<u64>>)],
    c: usize,
    settings: &RemoteSettings,
) -> u64 {
    let mut gets = Vec::new();
    let at_c = RemoteSettings {
        concurrency: c,
        ..settings.clone()
    };
    for (url, ranges) in reads {
        let (store, path) = store_for(url, settings).expect("store");
        let piece = piece_for(ranges.iter().map(|r| r.end - r.start).sum(), &at_c);
        for r in ranges {
            let mut at = r.start;
            while at < r.end {
                let end = (at + piece).min(r.end);
                gets.push((Arc::clone(&store), path.clone(), at..end));
                at = end;
            }
        }
    }
    runtime().block_on(async {
        stream::iter(gets)
            .map(|(store, path, range)| async move {
                let want = range.end - range.start;
                let body = store.get_range(&path, range).await?;
                assert_eq!(body.len() as u64, want);
                Ok::<u64, object_store::Error>(want)
            })
            .buffer_unordered(c.max(1))
            .try_fold(0u64, |a, n| async move { Ok(a + n) })
            .await
            .expect("a GET")
    })
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

/// A TCP proxy from `listen` to `upstream` that holds each chunk `delay / 2` in each direction.
fn proxy(listen: &str, upstream: &str, delay: Duration) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let half = delay / 2;
    let upstream = upstream.to_string();
    runtime().block_on(async move {
        let l = tokio::net::TcpListener::bind(listen).await.expect("bind");
        eprintln!(
            "proxy {listen} -> {upstream}, {} ms round trip",
            delay.as_millis()
        );
        loop {
            let (down, _) = l.accept().await.expect("accept");
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(up) = tokio::net::TcpStream::connect(&upstream).await else {
                    return;
                };
                let _ = (down.set_nodelay(true), up.set_nodelay(true));
                let (dr, dw) = down.into_split();
                let (ur, uw) = up.into_split();
                // each direction: a reader that stamps chunks, a writer that sends each one
                // `half` after it came
                fn pump(
                    mut r: tokio::net::tcp::OwnedReadHalf,
                    mut w: tokio::net::tcp::OwnedWriteHalf,
                    half: Duration,
                ) {
                    let (tx, mut rx) =
                        tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 1 << 20];
                        while let Ok(n) = r.read(&mut buf).await {
                            if n == 0
                                || tx
                                    .send((tokio::time::Instant::now(), buf[..n].to_vec()))
                                    .is_err()
                            {
                                break;
                            }
                        }
                    });
                    tokio::spawn(async move {
                        while let Some((at, chunk)) = rx.recv().await {
                            tokio::time::sleep_until(at + half).await;
                            if w.write_all(&chunk).await.is_err() {
                                break;
                            }
                        }
                        let _ = w.shutdown().await;
                    });
                }
                pump(dr, uw, half);
                pump(ur, dw, half);
            });
        }
    });
}
