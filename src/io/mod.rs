//! Executing [`IoRequest`]s: moving planned byte ranges into a destination buffer.
//!
//! A [`RangeReader`] is the small core contract every backend implements:
//! - [`host`]: a `pread` thread pool into host memory, optionally `O_DIRECT`;
//! - [`staged`]: `pread` into a ring of pinned bounce buffers, copied to the device on several
//!   streams while the next reads run; small ranges gathered into one copy;
//! - [`cufile`]: `cuFileRead` straight into device memory, split into `task_size` pieces;
//! - [`gpu`]: the device-target reader — decides the path of every range ([`policy`]), runs
//!   the cuFile and staged parts, and reports the path each byte really took (cuFile's own
//!   counters say whether nvidia-fs or cuFile's POSIX path served its reads);
//! - `remote` (feature `object-store`): ranged GETs of objects named by URLs (S3, GCS, Azure,
//!   HTTP), many in flight, into host memory or copied to the device as they come;
//! - [`RecordingReader`](recording::RecordingReader) logs every request for tests.

#[allow(unsafe_code)] // the cuFile FFI (see the module docs)
pub mod cufile;
pub mod gpu;
pub mod host;
pub mod policy;
pub mod recording;
#[cfg(feature = "object-store")]
pub mod remote;
#[allow(unsafe_code)] // asynchronous copies out of pinned buffers (see the module docs)
pub mod staged;
pub(crate) mod staging;

use std::fmt;
use std::ops::Range;
use std::time::{Duration, Instant};

use crate::device::DeviceBuffer;
use crate::error::{Error, Result};
use crate::plan::IoRequest;
use crate::source::ParquetFile;

/// Where requests land. Every request `q` is written to `dest[q.dest_offset ..][.. q.len()]`.
#[derive(Debug)]
#[non_exhaustive]
pub enum Dest<'a> {
    /// Ordinary host memory.
    Host(&'a mut [u8]),
    /// Memory of a CUDA device.
    Device(&'a mut DeviceBuffer),
}

impl Dest<'_> {
    /// Size of the destination in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Dest::Host(b) => b.len() as u64,
            Dest::Device(b) => b.len() as u64,
        }
    }

    /// True for an empty destination.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where a streamed read ([`RangeReader::read_stream`]) puts its parts.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub enum StreamDest<'a> {
    /// One allocation: every request at its `dest_offset`.
    One(&'a DeviceBuffer),
    /// An allocation of its own per part, on CUDA device `ordinal`: `open(p)` gives part
    /// `p`'s just before its first byte is read, parts in order, and may wait (a memory
    /// budget admitting the part); a part's requests at their `dest_offset` in it. `Ok(None)`:
    /// no more parts are wanted, and the read stops. The reader drops its reference to a
    /// part's allocation once the part is done.
    PerPart {
        /// The device of every part's allocation.
        ordinal: usize,
        /// Opens part `p`.
        open: &'a (dyn Fn(usize) -> Result<Option<std::sync::Arc<DeviceBuffer>>> + Sync),
    },
}

impl fmt::Debug for StreamDest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamDest::One(b) => f.debug_tuple("One").field(b).finish(),
            StreamDest::PerPart { ordinal, .. } => f
                .debug_struct("PerPart")
                .field("ordinal", ordinal)
                .finish_non_exhaustive(),
        }
    }
}

impl StreamDest<'_> {
    /// The CUDA device the parts land on.
    pub fn ordinal(&self) -> usize {
        match self {
            StreamDest::One(b) => b.gpu().ordinal(),
            StreamDest::PerPart { ordinal, .. } => *ordinal,
        }
    }
}

/// The path a request's bytes really took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoPath {
    /// `pread` into host memory; the target is host memory.
    Host,
    /// `pread` into pinned bounce buffers, then a copy to the device.
    Staged,
    /// cuFile through nvidia-fs: GPUDirect Storage.
    Gds,
    /// cuFile, served by cuFile's own POSIX compat path.
    CufilePosix,
    /// Ranged GETs of an object store or HTTP server (into host memory, then copied to the
    /// device for a device load).
    Remote,
}

impl fmt::Display for IoPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoPath::Host => "host",
            IoPath::Staged => "staged",
            IoPath::Gds => "gds",
            IoPath::CufilePosix => "cufile-posix",
            IoPath::Remote => "remote",
        })
    }
}

/// What happened to one request.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RequestRecord {
    /// Index of the request in the slice given to [`RangeReader::read`].
    pub index: usize,
    /// File bytes read.
    pub range: Range<u64>,
    /// The path the bytes took.
    pub path: IoPath,
    /// Pieces the request was split into.
    pub pieces: usize,
    /// From the first piece starting to the last piece ending.
    #[serde(serialize_with = "ser_secs")]
    pub time: Duration,
}

/// Serialises a duration as seconds (f64).
pub(crate) fn ser_secs<S: serde::Serializer>(
    d: &Duration,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// What a [`RangeReader::read`] did.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct IoReport {
    /// One record per request, in request order.
    pub requests: Vec<RequestRecord>,
    /// Wall time of the whole read.
    #[serde(serialize_with = "ser_secs")]
    pub wall: Duration,
    /// Reader threads used.
    pub threads: usize,
    /// Whether the file was read with `O_DIRECT`.
    pub direct_io: bool,
    /// Why each path was taken: one entry per distinct (path, reason), with its requests and
    /// bytes. Empty for readers that have one path.
    pub decisions: Vec<DecisionSummary>,
    /// cuFile's own counters over the cuFile reads of this call, when cuFile was used.
    pub cufile: Option<CufileCounters>,
    /// The GETs of a remote read (an object named by a URL).
    pub remote: Option<RemoteCounters>,
}

/// What the GETs of a remote read did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RemoteCounters {
    /// GETs issued (each request cut into pieces of at most the piece size).
    pub gets: usize,
    /// The most GETs in flight at once (reads side by side: the sum of theirs).
    pub max_in_flight: usize,
    /// From the read's start to the first answer's headers.
    #[serde(serialize_with = "ser_secs")]
    pub first_byte: Duration,
    /// Bytes the GETs asked for (gaps between chunks read through by coalescing included).
    pub bytes: u64,
}

impl RemoteCounters {
    /// Adds the counters of a read that ran beside this one (a host load's units): GETs and
    /// bytes summed, in flight at once summed, the earlier first byte.
    pub(crate) fn add_beside(&mut self, other: &RemoteCounters) {
        self.gets += other.gets;
        self.bytes += other.bytes;
        self.max_in_flight += other.max_in_flight;
        self.first_byte = self.first_byte.min(other.first_byte);
    }
}

/// Requests that took one path for one reason.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DecisionSummary {
    /// The path the bytes took.
    pub path: IoPath,
    /// Why.
    pub reason: String,
    /// Requests.
    pub requests: usize,
    /// Bytes.
    pub bytes: u64,
}

/// cuFile's Level-3 per-GPU counters, differenced over one read (the numbers `gds_stats`
/// shows). Other cuFile users in the process during the read are counted too.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CufileCounters {
    /// Reads cuFile counted (`n_total_reads`).
    pub reads: u64,
    /// Reads served by nvidia-fs: GPUDirect Storage (`n_nvfs_reads`).
    pub nvfs: u64,
    /// Reads served by cuFile's POSIX compat path (`n_posix_reads`).
    pub posix: u64,
    /// Bytes read (`read_bytes`).
    pub bytes: u64,
    /// Failed reads (`n_reads_err`).
    pub errors: u64,
}

impl IoReport {
    /// Adds `(path, reason)` for one request of `bytes` to [`IoReport::decisions`].
    pub(crate) fn note_decision(&mut self, path: IoPath, reason: &str, bytes: u64) {
        match self
            .decisions
            .iter_mut()
            .find(|d| d.path == path && d.reason == reason)
        {
            Some(d) => {
                d.requests += 1;
                d.bytes += bytes;
            }
            None => self.decisions.push(DecisionSummary {
                path,
                reason: reason.to_string(),
                requests: 1,
                bytes,
            }),
        }
    }
}

impl IoReport {
    /// Adds the report of a later read of the same load (the next wave of a pipelined device
    /// load): its requests follow (indices continued), walls add up (the reads ran one after
    /// the other), decisions and cuFile counters are summed.
    pub fn absorb(&mut self, other: IoReport) {
        let first = self.requests.len();
        self.requests
            .extend(other.requests.into_iter().map(|mut r| {
                r.index += first;
                r
            }));
        self.wall += other.wall;
        self.threads = self.threads.max(other.threads);
        self.direct_io |= other.direct_io;
        for d in other.decisions {
            match self
                .decisions
                .iter_mut()
                .find(|x| x.path == d.path && x.reason == d.reason)
            {
                Some(x) => {
                    x.requests += d.requests;
                    x.bytes += d.bytes;
                }
                None => self.decisions.push(d),
            }
        }
        if let Some(c) = other.cufile {
            let m = self.cufile.get_or_insert_with(Default::default);
            m.reads += c.reads;
            m.nvfs += c.nvfs;
            m.posix += c.posix;
            m.bytes += c.bytes;
            m.errors += c.errors;
        }
        if let Some(c) = other.remote {
            match &mut self.remote {
                Some(m) => {
                    m.gets += c.gets;
                    m.max_in_flight = m.max_in_flight.max(c.max_in_flight);
                    m.bytes += c.bytes;
                }
                None => self.remote = Some(c),
            }
        }
    }

    /// Bytes read.
    pub fn bytes(&self) -> u64 {
        self.requests
            .iter()
            .map(|r| r.range.end - r.range.start)
            .sum()
    }

    /// Bytes per path, in path order, only paths that carried bytes.
    pub fn bytes_by_path(&self) -> Vec<(IoPath, u64)> {
        let mut v: Vec<(IoPath, u64)> = Vec::new();
        for r in &self.requests {
            let n = r.range.end - r.range.start;
            match v.iter_mut().find(|(p, _)| *p == r.path) {
                Some((_, b)) => *b += n,
                None => v.push((r.path, n)),
            }
        }
        v.sort();
        v
    }
}

/// Moves file byte ranges into a destination.
///
/// # Contract
///
/// An implementation of [`read`](RangeReader::read):
/// - writes, for every request `q`, exactly the file bytes `q.range` to
///   `dest[q.dest_offset .. q.dest_offset + q.len()]`, and nothing outside those slices;
/// - returns `Ok` only when every byte of every request was written — a file shorter than a
///   range, a failed or interrupted read that cannot be completed, is an error naming the file
///   and the range;
/// - rejects requests whose destination slices overlap or exceed `dest` before reading;
/// - reports one [`RequestRecord`] per request, in request order, with the path its bytes took;
/// - may be called concurrently from several threads.
pub trait RangeReader: fmt::Debug + Send + Sync {
    /// Reads `requests` from `file` into `dest`.
    fn read(&self, file: &ParquetFile, requests: &[IoRequest], dest: Dest<'_>) -> Result<IoReport>;

    /// Short name for reports (`host`, `staged`, ...).
    fn name(&self) -> &'static str;

    /// [`read`](RangeReader::read) while the caller decodes what it read before (a pipelined
    /// load's reads wave by wave): a reader may leave some cores to the decoders. The default
    /// reads as [`read`](RangeReader::read) does.
    fn read_beside(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        dest: Dest<'_>,
    ) -> Result<IoReport> {
        self.read(file, requests, dest)
    }

    /// Reads `parts` of `requests` (each a list of request indices) into `dest` as one stream,
    /// calling `done(i, report)` as soon as every byte of part `i` is in its destination — so
    /// the caller can use a part while later ones are read — with the part's records numbered
    /// from 0 in its order and walls that add up to the stream's. After an error the parts not
    /// yet done stay undone and the error is returned. `None`: this reader does not stream (the
    /// caller reads part by part with [`RangeReader::read`]).
    fn read_stream(
        &self,
        _file: &ParquetFile,
        _requests: &[IoRequest],
        _parts: &[Vec<usize>],
        _dest: StreamDest<'_>,
        _done: &(dyn Fn(usize, IoReport) + Sync),
    ) -> Option<Result<()>> {
        None
    }
}

/// One piece of work done by a reader thread: (request index, start, end, pieces it counts as).
pub(crate) type Span = (usize, Instant, Instant, usize);

/// One [`RequestRecord`] per `selected` request (in that order), its time from its first
/// piece's start to its last piece's end and its pieces counted from `spans`.
pub(crate) fn records_from_spans(
    requests: &[IoRequest],
    selected: impl IntoIterator<Item = usize>,
    spans: impl IntoIterator<Item = Span>,
    path: IoPath,
) -> Vec<RequestRecord> {
    let mut by_request: Vec<Option<(Instant, Instant, usize)>> = vec![None; requests.len()];
    for (i, s, e, n) in spans {
        by_request[i] = Some(match by_request[i] {
            None => (s, e, n),
            Some((s0, e0, n0)) => (s0.min(s), e0.max(e), n0 + n),
        });
    }
    selected
        .into_iter()
        .map(|i| {
            let (time, pieces) =
                by_request[i].map_or((Duration::ZERO, 0), |(s, e, n)| (e.duration_since(s), n));
            RequestRecord {
                index: i,
                range: requests[i].range.clone(),
                path,
                pieces,
                time,
            }
        })
        .collect()
}

/// The `selected` requests cut into pieces of at most `task` bytes: (request, file range,
/// destination offset).
pub(crate) fn task_pieces(
    requests: &[IoRequest],
    selected: &[usize],
    task: u64,
) -> Vec<(usize, Range<u64>, u64)> {
    let task = task.max(1);
    let mut pieces = Vec::new();
    for &i in selected {
        let q = &requests[i];
        let mut off = q.range.start;
        while off < q.range.end {
            let end = (off + task).min(q.range.end);
            pieces.push((i, off..end, q.dest_offset + (off - q.range.start)));
            off = end;
        }
    }
    pieces
}

/// Checks requests against the destination: in bounds, non-overlapping. Returns the request
/// indices sorted by destination offset.
pub(crate) fn check_destinations(
    file: &ParquetFile,
    requests: &[IoRequest],
    dest_len: u64,
) -> Result<Vec<usize>> {
    let mut order: Vec<usize> = (0..requests.len()).collect();
    order.sort_by_key(|&i| requests[i].dest_offset);
    let mut end = 0u64;
    for &i in &order {
        let q = &requests[i];
        if q.range.start > q.range.end {
            return Err(file.short_read(q.range.clone(), "an inverted request"));
        }
        if q.range.end > file.len() {
            return Err(file.short_read(q.range.clone(), "a planned request"));
        }
        let q_end = q.dest_offset.saturating_add(q.len());
        if q.dest_offset < end || q_end > dest_len {
            return Err(Error::Io {
                path: file.path().to_path_buf(),
                op: format!(
                    "read bytes {}..{} into destination {}..{}",
                    q.range.start, q.range.end, q.dest_offset, q_end
                ),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "destination slice overlaps another request or exceeds the {dest_len}-byte destination"
                    ),
                ),
            });
        }
        end = q_end;
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(index: usize, range: Range<u64>, path: IoPath) -> RequestRecord {
        RequestRecord {
            index,
            range,
            path,
            pieces: 1,
            time: Duration::from_millis(1),
        }
    }

    #[test]
    fn reports_of_consecutive_reads_add_up() {
        let mut a = IoReport {
            requests: vec![
                record(0, 0..10, IoPath::Staged),
                record(1, 10..30, IoPath::Staged),
            ],
            wall: Duration::from_millis(5),
            threads: 4,
            direct_io: false,
            decisions: vec![DecisionSummary {
                path: IoPath::Staged,
                reason: "auto".into(),
                requests: 2,
                bytes: 30,
            }],
            cufile: None,
            remote: None,
        };
        let b = IoReport {
            requests: vec![record(0, 30..70, IoPath::CufilePosix)],
            wall: Duration::from_millis(7),
            threads: 16,
            direct_io: true,
            decisions: vec![
                DecisionSummary {
                    path: IoPath::Staged,
                    reason: "auto".into(),
                    requests: 1,
                    bytes: 40,
                },
                DecisionSummary {
                    path: IoPath::CufilePosix,
                    reason: "forced".into(),
                    requests: 1,
                    bytes: 40,
                },
            ],
            cufile: Some(CufileCounters {
                reads: 1,
                posix: 1,
                bytes: 40,
                ..Default::default()
            }),
            remote: None,
        };
        a.absorb(b);
        assert_eq!(
            a.requests.iter().map(|r| r.index).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_eq!(a.bytes(), 70);
        assert_eq!(a.wall, Duration::from_millis(12));
        assert_eq!((a.threads, a.direct_io), (16, true));
        assert_eq!(a.decisions.len(), 2);
        assert_eq!((a.decisions[0].requests, a.decisions[0].bytes), (3, 70));
        assert_eq!(a.cufile.as_ref().map(|c| (c.reads, c.posix)), Some((1, 1)));
        assert_eq!(
            a.bytes_by_path(),
            vec![(IoPath::Staged, 30), (IoPath::CufilePosix, 40)]
        );
    }
}
