//! Reading a remote object's requests (feature `object-store`): ranged GETs, many in flight,
//! into host memory or copied to the device as each arrives. The object and its store are
//! [`crate::source::remote`]'s.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt, TryStreamExt};

use crate::error::{Error, Result};
use crate::io::staged::Upload;
use crate::io::{records_from_spans, task_pieces, Dest, IoPath, IoReport, RemoteCounters, Span};
use crate::plan::IoRequest;
use crate::source::remote::{block_on, RemoteObject};

pub use crate::source::remote::register_store;

/// Gaps up to this many bytes between the column chunks of a remote read are read through
/// (one GET instead of two): a round trip costs more than a megabyte at object-store speeds.
/// `object_store`'s own `get_ranges` merges gaps of the same size.
pub const REMOTE_COALESCE_GAP: u64 = 1 << 20;

/// Pinned buffers between a remote read's bodies and device memory: a body is copied into a
/// free one and its copy to the device left running while the next bodies come in.
const REMOTE_PINNED_BUFFERS: usize = 4;

/// The smallest piece a read is cut into to have more GETs in flight ([`piece_for`]).
pub const REMOTE_MIN_PIECE: u64 = 1 << 20;

/// The piece size of a read of `total` bytes: small enough that the read has
/// [`concurrency`](crate::config::RemoteSettings::concurrency) GETs in flight (a server's
/// connections each serve at their own pace: more of them, more bytes a second), at least
/// [`REMOTE_MIN_PIECE`] and at most [`piece_size`](crate::config::RemoteSettings::piece_size).
pub fn piece_for(total: u64, settings: &crate::config::RemoteSettings) -> u64 {
    let most = settings.piece_size.max(1);
    let fill = total.div_ceil(settings.concurrency.max(1) as u64);
    fill.clamp(REMOTE_MIN_PIECE.min(most), most)
}

/// Where a remote read's bodies go.
enum Sink<'a> {
    Host(&'a mut [u8]),
    Device(Upload<'a>),
}

impl RemoteObject {
    /// Reads `requests` into `dest` by ranged GETs,
    /// [`concurrency`](crate::config::RemoteSettings::concurrency) in flight, each request cut
    /// into pieces of [`piece_for`] bytes: a piece is
    /// written to host memory, or copied into a pinned buffer whose copy to the device is left
    /// running, as soon as its body is in, while the others download. The destinations were
    /// checked by the caller. After a failed GET no other is started, and the error is
    /// returned (after the copies already enqueued have completed).
    pub fn read(&self, requests: &[IoRequest], dest: Dest<'_>) -> Result<IoReport> {
        let t0 = Instant::now();
        let all: Vec<usize> = (0..requests.len()).collect();
        let total: u64 = requests.iter().map(|q| q.len()).sum();
        let pieces = task_pieces(requests, &all, piece_for(total, self.settings()));
        let gets_before = self.gets();
        let in_flight = AtomicUsize::new(0);
        let max_in_flight = AtomicUsize::new(0);
        let largest = pieces.iter().map(|p| p.1.end - p.1.start).max().unwrap_or(0);
        let mut sink = match dest {
            Dest::Host(b) => Sink::Host(b),
            Dest::Device(b) => Sink::Device(Upload::new(
                b,
                REMOTE_PINNED_BUFFERS.min(pieces.len()),
                largest as usize,
            )?),
        };
        let mut spans: Vec<Span> = Vec::with_capacity(pieces.len());
        let mut first_byte: Option<Duration> = None;
        let concurrency = self.settings().concurrency.max(1);
        let outcome = block_on(async {
            let mut bodies = stream::iter(pieces.iter().cloned())
                .map(|(i, range, at)| {
                    let in_flight = &in_flight;
                    let max_in_flight = &max_in_flight;
                    async move {
                        let n = in_flight.fetch_add(1, Ordering::Relaxed) + 1;
                        max_in_flight.fetch_max(n, Ordering::Relaxed);
                        let start = Instant::now();
                        let got = self.get(range).await;
                        in_flight.fetch_sub(1, Ordering::Relaxed);
                        got.map(|g| (i, at, start, g))
                    }
                })
                .buffer_unordered(concurrency);
            while let Some((i, at, start, got)) = bodies.try_next().await? {
                first_byte.get_or_insert(got.headers.duration_since(t0));
                let at = at as usize;
                let n = got.bytes.len();
                match &mut sink {
                    Sink::Host(b) => b[at..at + n].copy_from_slice(&got.bytes),
                    Sink::Device(u) => u.put(at, &got.bytes)?,
                }
                spans.push((i, start, Instant::now(), 1));
            }
            Ok::<(), Error>(())
        })?;
        outcome?;
        if let Sink::Device(u) = sink {
            u.finish()?;
        }
        let requests_done = records_from_spans(requests, all, spans, IoPath::Remote);
        let gets = self.gets() - gets_before;
        Ok(IoReport {
            requests: requests_done,
            wall: t0.elapsed(),
            threads: concurrency,
            remote: Some(RemoteCounters {
                gets,
                max_in_flight: max_in_flight.load(Ordering::Relaxed),
                first_byte: first_byte.unwrap_or_default(),
                bytes: pieces.iter().map(|p| p.1.end - p.1.start).sum(),
            }),
            ..IoReport::default()
        })
    }
}
