//! Host backend: `pread` on a thread pool into host memory.
//!
//! Requests larger than `task_size` are cut into `task_size` pieces, and all pieces of all
//! requests are read in parallel. With `direct_io` the file is opened `O_DIRECT`; each piece is
//! read through an aligned bounce buffer (widened to [`DIRECT_IO_ALIGNMENT`]) and copied into
//! place, so destinations need no alignment. No `unsafe` is needed here.

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rayon::prelude::*;

use crate::config::IoSettings;
use crate::error::{Error, Result};
use crate::io::{check_destinations, records_from_spans, Dest, IoPath, IoReport, RangeReader};
use crate::plan::IoRequest;
use crate::source::{read_fully_at, ParquetFile};

/// Offsets, lengths and buffer addresses of `O_DIRECT` reads are multiples of this.
pub const DIRECT_IO_ALIGNMENT: u64 = 4096;

/// Reads requests into host memory with a pool of `pread` threads.
#[derive(Debug, Clone)]
pub struct HostReader {
    settings: IoSettings,
    pool: Arc<rayon::ThreadPool>,
}

impl HostReader {
    /// A reader on the process-wide pool of `settings.nthreads` threads.
    pub fn new(settings: IoSettings) -> Result<Self> {
        settings.validate()?;
        let pool = shared_pool(settings.nthreads)?;
        Ok(Self::with_pool(settings, pool))
    }

    /// A reader that runs on an existing pool (shared with the decoder).
    pub fn with_pool(settings: IoSettings, pool: Arc<rayon::ThreadPool>) -> Self {
        HostReader { settings, pool }
    }

    /// The settings in use.
    pub fn settings(&self) -> &IoSettings {
        &self.settings
    }

    /// The thread pool.
    pub fn pool(&self) -> &Arc<rayon::ThreadPool> {
        &self.pool
    }
}

/// The process-wide pool of `n` threads, created on first use. Readers share pools as KvikIO
/// shares its thread pool: a new pool per reader costs more than a small load (fresh threads
/// start with fresh allocator arenas, so their first large buffers fault in page by page).
pub(crate) fn shared_pool(n: usize) -> Result<Arc<rayon::ThreadPool>> {
    static POOLS: Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>> = Mutex::new(Vec::new());
    let mut pools = POOLS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, p)) = pools.iter().find(|(k, _)| *k == n) {
        return Ok(Arc::clone(p));
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .thread_name(|i| format!("cuparquet-{i}"))
        .build()
        .map_err(|e| Error::setting("nthreads", n.to_string(), e.to_string()))?;
    let pool = Arc::new(pool);
    pools.push((n, Arc::clone(&pool)));
    Ok(pool)
}

struct ReadSlice<'a> {
    request: usize,
    offset: u64,
    buf: &'a mut [u8],
}

impl RangeReader for HostReader {
    fn read(&self, file: &ParquetFile, requests: &[IoRequest], dest: Dest<'_>) -> Result<IoReport> {
        let t0 = Instant::now();
        let buf = match dest {
            Dest::Host(b) => b,
            Dest::Device(_) => {
                return Err(Error::Device {
                    device: "host reader".into(),
                    reason: "the host reader writes host memory; use io::gpu::GpuReader for a device destination".into(),
                })
            }
        };
        let order = check_destinations(file, requests, buf.len() as u64)?;
        #[cfg(feature = "object-store")]
        if let Some(r) = file.remote() {
            return r.read(requests, Dest::Host(buf));
        }
        let local = file.local()?;

        // Carve the destination into one disjoint slice per piece.
        let task = self.settings.task_size.max(1);
        let mut pieces: Vec<ReadSlice<'_>> = Vec::new();
        let mut rest: &mut [u8] = buf;
        let mut consumed = 0u64;
        for &i in &order {
            let q = &requests[i];
            let skip = (q.dest_offset - consumed) as usize;
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(skip);
            let (mut mine, tail) = tail.split_at_mut(q.len() as usize);
            rest = tail;
            consumed = q.dest_offset + q.len();
            let mut off = q.range.start;
            while !mine.is_empty() {
                let n = (task as usize).min(mine.len());
                let (head, t) = std::mem::take(&mut mine).split_at_mut(n);
                pieces.push(ReadSlice {
                    request: i,
                    offset: off,
                    buf: head,
                });
                mine = t;
                off += n as u64;
            }
        }

        let direct = if self.settings.direct_io {
            Some(open_direct(file)?)
        } else {
            None
        };
        let timings: Vec<Result<(usize, Instant, Instant)>> = self.pool.install(|| {
            pieces
                .into_par_iter()
                .map(|p| {
                    let start = Instant::now();
                    let range = p.offset..p.offset + p.buf.len() as u64;
                    let r = match &direct {
                        Some(f) => read_direct(f, p.buf, p.offset),
                        None => read_fully_at(local, p.buf, p.offset),
                    };
                    r.map_err(|e| file.read_error(range, "", e))?;
                    Ok((p.request, start, Instant::now()))
                })
                .collect()
        });

        let mut spans = Vec::with_capacity(timings.len());
        for t in timings {
            let (i, s, e) = t?;
            spans.push((i, s, e, 1));
        }
        let records = records_from_spans(requests, 0..requests.len(), spans, IoPath::Host);
        Ok(IoReport {
            requests: records,
            wall: t0.elapsed(),
            threads: self.settings.nthreads,
            direct_io: self.settings.direct_io,
            ..IoReport::default()
        })
    }

    fn name(&self) -> &'static str {
        "host"
    }
}

pub(crate) fn open_direct(file: &ParquetFile) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(file.path())
        .map_err(|e| {
            let hint = if e.raw_os_error() == Some(libc::EINVAL) {
                " (the filesystem does not support O_DIRECT; unset CUPARQUET_DIRECT_IO)"
            } else {
                ""
            };
            Error::io(file.path(), format!("open with O_DIRECT{hint}"), e)
        })
}

thread_local! {
    static BOUNCE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Reads `dest.len()` bytes at `offset` through an aligned bounce buffer.
pub(crate) fn read_direct(f: &File, dest: &mut [u8], offset: u64) -> std::io::Result<()> {
    let a = DIRECT_IO_ALIGNMENT;
    let start = offset / a * a;
    let end = (offset + dest.len() as u64).div_ceil(a) * a;
    let span = (end - start) as usize;
    BOUNCE.with(|cell| {
        let mut bounce = cell.borrow_mut();
        if bounce.len() < span + a as usize {
            bounce.resize(span + a as usize, 0);
        }
        let shift = bounce.as_ptr().align_offset(a as usize);
        let aligned = &mut bounce[shift..shift + span];
        let need = (offset - start) as usize + dest.len();
        let mut got = 0usize;
        while got < need {
            match f.read_at(&mut aligned[got..], start + got as u64) {
                Ok(0) => break,
                Ok(n) => {
                    got += n;
                    // A read that ends off an aligned boundary has hit the end of the file.
                    if !got.is_multiple_of(a as usize) {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if got < need {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "file ended before the range did",
            ));
        }
        let from = (offset - start) as usize;
        dest.copy_from_slice(&aligned[from..from + dest.len()]);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::ops::Range;

    fn sample(len: usize) -> (tempfile::NamedTempFile, Vec<u8>) {
        let data: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(&data).unwrap();
        f.flush().unwrap();
        (f, data)
    }

    fn reqs(ranges: &[Range<u64>]) -> Vec<IoRequest> {
        let mut d = 0;
        ranges
            .iter()
            .map(|r| {
                let q = IoRequest {
                    range: r.clone(),
                    dest_offset: d,
                    chunks: vec![],
                };
                d += r.end - r.start;
                q
            })
            .collect()
    }

    fn run(settings: IoSettings, len: usize, ranges: &[Range<u64>]) {
        let (f, data) = sample(len);
        let file = ParquetFile::open(f.path()).unwrap();
        let requests = reqs(ranges);
        let total: u64 = ranges.iter().map(|r| r.end - r.start).sum();
        let mut buf = vec![0u8; total as usize];
        let reader = HostReader::new(settings).unwrap();
        let report = reader.read(&file, &requests, Dest::Host(&mut buf)).unwrap();
        assert_eq!(report.bytes(), total);
        assert_eq!(report.requests.len(), requests.len());
        for q in &requests {
            let d = q.dest_offset as usize;
            assert_eq!(
                &buf[d..d + q.len() as usize],
                &data[q.range.start as usize..q.range.end as usize]
            );
        }
    }

    #[test]
    fn pieces_and_threads() {
        let s = IoSettings {
            nthreads: 4,
            task_size: 4096,
            direct_io: false,
            ..IoSettings::default()
        };
        run(
            s,
            100_000,
            &[
                0..1,
                7..9000,
                9000..50_001,
                60_000..100_000,
                99_999..100_000,
            ],
        );
    }

    #[test]
    fn direct_io_unaligned() {
        let s = IoSettings {
            nthreads: 2,
            task_size: 8192,
            direct_io: true,
            ..IoSettings::default()
        };
        let (f, _) = sample(10);
        // tmpfs has no O_DIRECT: skip there, with the reason.
        if let Err(e) = open_direct(&ParquetFile::open(f.path()).unwrap()) {
            eprintln!("skipping: {e}");
            return;
        }
        run(
            s,
            70_001,
            &[3..5000, 4096..8192, 10_000..70_001, 69_999..70_001],
        );
    }

    #[test]
    fn past_eof_is_an_error_naming_the_range() {
        let (f, _) = sample(1000);
        let file = ParquetFile::open(f.path()).unwrap();
        let mut buf = vec![0u8; 200];
        let reader = HostReader::new(IoSettings::default()).unwrap();
        let e = reader
            .read(&file, &reqs(&[900..1100, 1100..1100]), Dest::Host(&mut buf))
            .unwrap_err()
            .to_string();
        assert!(e.contains("900..1100") && e.contains("1000 bytes"), "{e}");
    }

    #[test]
    fn overlapping_destinations_are_rejected() {
        let (f, _) = sample(1000);
        let file = ParquetFile::open(f.path()).unwrap();
        let mut buf = vec![0u8; 200];
        let mut r = reqs(&[0..100, 100..200]);
        r[1].dest_offset = 50;
        let reader = HostReader::new(IoSettings::default()).unwrap();
        let e = reader
            .read(&file, &r, Dest::Host(&mut buf))
            .unwrap_err()
            .to_string();
        assert!(e.contains("overlaps"), "{e}");
        let r = reqs(&[0..150, 150..300]);
        let e = reader
            .read(&file, &r, Dest::Host(&mut buf))
            .unwrap_err()
            .to_string();
        assert!(e.contains("exceeds"), "{e}");
    }
}
