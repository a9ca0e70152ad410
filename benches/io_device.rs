//! The GPU range reader on one file, against the machine's ceilings, in one run.
//!
//! `bench-io_device [--prepare-only]` — environment:
//! - `CUPARQUET_BENCH_FILE`: the data file (default `target/bench-data/io-2304MiB.bin`, created
//!   with pseudo-random bytes when missing; size `CUPARQUET_BENCH_FILE_MIB`, default 2304);
//! - `CUPARQUET_BENCH_ROUNDS` (default 5), `CUPARQUET_BENCH_OUT` (a JSON-lines file to append
//!   results to), `CUPARQUET_BENCH_COLD` (0 to skip the O_DIRECT workloads),
//!   `CUPARQUET_BENCH_SMALL_READS` (default 20000).
//!
//! Workloads: ceilings (pinned host→device copy of 1 GiB; page-cache `pread` and `O_DIRECT`
//! `pread` of the whole file into host memory, 16 threads); the whole file into device memory
//! as 32 MiB requests (the coalescer's largest) — warm at default settings, at 1/4/16 threads,
//! bounce sizes — and cold (`O_DIRECT`); many small random page-aligned ranges
//! (4/16/64 KiB) in one read call. Each figure is the best of the rounds after one warm-up;
//! the median is printed too.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cuparquet::config::IoSettings;
use cuparquet::device::gpu;
use cuparquet::io::gpu::GpuReader;
use cuparquet::io::host::HostReader;
use cuparquet::io::{Dest, RangeReader};
use cuparquet::plan::IoRequest;
use cuparquet::source::ParquetFile;

const MIB: u64 = 1 << 20;

fn env_u64(k: &str, d: u64) -> u64 {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn prepare(path: &Path, mib: u64) {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == mib * MIB) {
        return;
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let t = Instant::now();
    let mut f = std::io::BufWriter::with_capacity(8 << 20, std::fs::File::create(path).unwrap());
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut block = vec![0u8; 8 << 20];
    for _ in 0..mib / 8 {
        for c in block.chunks_exact_mut(8) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            c.copy_from_slice(&s.to_le_bytes());
        }
        f.write_all(&block).unwrap();
    }
    f.flush().unwrap();
    eprintln!(
        "wrote {} ({mib} MiB) in {:.1?}",
        path.display(),
        t.elapsed()
    );
}

struct Out {
    file: Option<std::fs::File>,
}

impl Out {
    fn record(
        &mut self,
        workload: &str,
        config: &str,
        bytes: u64,
        times: &mut [Duration],
        extra: &str,
    ) {
        times.sort();
        let best = times[0].as_secs_f64();
        let median = times[times.len() / 2].as_secs_f64();
        println!(
            "{workload:<14} {config:<44} {:>8.2} GB/s best  {:>8.2} GB/s median  ({} MiB, {:.2} ms best){extra}",
            bytes as f64 / best / 1e9,
            bytes as f64 / median / 1e9,
            bytes / MIB,
            best * 1e3
        );
        if let Some(f) = &mut self.file {
            let _ = writeln!(
                f,
                "{{\"tool\":\"cuparquet\",\"workload\":\"{workload}\",\"config\":\"{config}\",\"bytes\":{bytes},\"seconds\":{best},\"median_seconds\":{median},\"gbps\":{},\"median_gbps\":{}}}",
                bytes as f64 / best / 1e9,
                bytes as f64 / median / 1e9
            );
        }
    }
}

fn time<F: FnMut()>(rounds: usize, mut f: F) -> Vec<Duration> {
    f(); // warm-up
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect()
}

fn whole_file(len: u64, piece: u64) -> Vec<IoRequest> {
    let mut v = Vec::new();
    let mut off = 0;
    while off < len {
        let n = piece.min(len - off);
        v.push(IoRequest {
            range: off..off + n,
            dest_offset: off,
            chunks: vec![],
        });
        off += n;
    }
    v
}

fn main() {
    let mib = env_u64("CUPARQUET_BENCH_FILE_MIB", 2304);
    let path: PathBuf = std::env::var_os("CUPARQUET_BENCH_FILE").map_or_else(
        || PathBuf::from(format!("target/bench-data/io-{mib}MiB.bin")),
        PathBuf::from,
    );
    prepare(&path, mib);
    if std::env::args().any(|a| a == "--prepare-only") {
        return;
    }
    // cargo bench passes --bench; nothing else to parse.
    let rounds = env_u64("CUPARQUET_BENCH_ROUNDS", 5) as usize;
    let cold = env_u64("CUPARQUET_BENCH_COLD", 1) != 0;
    let small_reads = env_u64("CUPARQUET_BENCH_SMALL_READS", 20_000) as usize;
    let mut out = Out {
        file: std::env::var_os("CUPARQUET_BENCH_OUT").map(|p| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .unwrap()
        }),
    };
    let g = match gpu(0) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("io_device: skipped: {e}");
            return;
        }
    };
    let file = ParquetFile::open(&path).unwrap();
    let len = file.len();
    let defaults = IoSettings::default();
    println!(
        "io_device: {} ({} MiB), {} ({} threads by default), rounds {rounds}",
        path.display(),
        len / MIB,
        g.name(),
        defaults.nthreads
    );

    // Ceilings.
    {
        let n = (1u64 << 30).min(len) as usize;
        let mut pinned = g.pinned(n).unwrap();
        pinned.as_mut_slice().fill(1);
        let dev = g.alloc(n).unwrap();
        let mut t = time(rounds, || {
            pinned
                .copy_to_device(0..n, &dev, 0, &g.streams()[0])
                .unwrap();
        });
        out.record(
            "ceiling",
            "pinned copy 1 GiB, 1 stream",
            n as u64,
            &mut t,
            "",
        );
        // the same 1 GiB split over the copy streams
        let k = g.streams().len();
        let part = n / k;
        let mut t = time(rounds, || {
            for (i, s) in g.streams().iter().enumerate() {
                // SAFETY: the buffers outlive the copies: every stream is synchronized below,
                // before either is touched or dropped.
                unsafe {
                    pinned
                        .copy_to_device_async(i * part..(i + 1) * part, &dev, i * part, s)
                        .unwrap();
                }
            }
            g.synchronize().unwrap();
        });
        out.record(
            "ceiling",
            &format!("pinned copy 1 GiB, {k} streams"),
            (part * k) as u64,
            &mut t,
            "",
        );
    }
    let reqs = whole_file(len, 32 * MIB);
    let mut host = vec![0u8; len as usize];
    for (direct, name) in [
        (false, "page-cache pread 16t"),
        (true, "O_DIRECT pread 16t"),
    ] {
        if direct && !cold {
            continue;
        }
        let r = HostReader::new(IoSettings {
            nthreads: 16,
            direct_io: direct,
            ..IoSettings::default()
        })
        .unwrap();
        let mut t = time(if direct { rounds.min(3) } else { rounds }, || {
            r.read(&file, &reqs, Dest::Host(&mut host)).unwrap();
        });
        out.record("ceiling", &format!("{name} → host memory"), len, &mut t, "");
    }
    drop(host);

    // The whole file into device memory.
    let mut dev = g.alloc(len as usize).unwrap();
    let mut run = |out: &mut Out, workload: &str, config: &str, s: IoSettings, rounds: usize| {
        let r = GpuReader::new(s, 0).unwrap();
        let mut t = time(rounds, || {
            r.read(&file, &reqs, Dest::Device(&mut dev)).unwrap();
        });
        out.record(workload, config, len, &mut t, "");
    };
    run(
        &mut out,
        "warm",
        "default settings",
        IoSettings::default(),
        rounds,
    );
    for threads in [1, 4, 16, 32] {
        let s = IoSettings {
            nthreads: threads,
            ..IoSettings::default()
        };
        run(&mut out, "warm", &format!("{threads} threads"), s, rounds);
    }
    for (size, count) in [(MIB, 4), (4 * MIB, 2), (8 * MIB, 2), (16 * MIB, 1)] {
        let s = IoSettings {
            bounce_buffer_size: size,
            bounce_buffer_count: count,
            ..IoSettings::default()
        };
        run(
            &mut out,
            "warm",
            &format!("bounce {} MiB × {count}/thread", size / MIB),
            s,
            rounds,
        );
    }
    if cold {
        let s = IoSettings {
            direct_io: true,
            ..IoSettings::default()
        };
        run(
            &mut out,
            "cold",
            "O_DIRECT, default settings",
            s,
            rounds.min(3),
        );
    }
    drop(dev);

    // Many small ranges in one call (as narrow row groups make).
    let mut state = 12345u64;
    for size in [4u64 << 10, 16 << 10, 64 << 10] {
        let mut reqs = Vec::with_capacity(small_reads);
        for i in 0..small_reads as u64 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let page = (state >> 20) % ((len - size) / 4096);
            reqs.push(IoRequest {
                range: page * 4096..page * 4096 + size,
                dest_offset: i * size,
                chunks: vec![],
            });
        }
        let total = size * small_reads as u64;
        let mut dev = g.alloc(total as usize).unwrap();
        for threads in [1, 16] {
            let r = GpuReader::new(
                IoSettings {
                    nthreads: threads,
                    ..IoSettings::default()
                },
                0,
            )
            .unwrap();
            let mut t = time(rounds, || {
                r.read(&file, &reqs, Dest::Device(&mut dev)).unwrap();
            });
            t.sort();
            let per_s = small_reads as f64 / t[0].as_secs_f64();
            out.record(
                "small-random",
                &format!("{} KiB × {small_reads}, {threads} threads", size >> 10),
                total,
                &mut t,
                &format!("  {:.0}k reads/s", per_s / 1e3),
            );
        }
    }
}
