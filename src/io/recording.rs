//! A reader that logs every request it forwards, for tests and I/O-pattern snapshots.

use std::ops::Range;
use std::sync::Mutex;

use crate::error::Result;
use crate::io::{Dest, IoReport, RangeReader, StreamDest};
use crate::plan::IoRequest;
use crate::source::ParquetFile;

/// Wraps another [`RangeReader`] and records each request's file range and destination. It
/// forwards every method, so a load through it takes the path the same load takes without it
/// (a streamed read is logged once the stream returns, its requests in part order).
#[derive(Debug)]
pub struct RecordingReader<R> {
    inner: R,
    log: Mutex<Vec<(Range<u64>, u64)>>,
}

impl<R: RangeReader> RecordingReader<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Self {
        RecordingReader {
            inner,
            log: Mutex::new(Vec::new()),
        }
    }

    /// The (file range, destination offset) of every request so far, in call order.
    pub fn log(&self) -> Vec<(Range<u64>, u64)> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The log as text, one request per line, for snapshots.
    pub fn log_text(&self) -> String {
        self.log()
            .iter()
            .map(|(r, d)| {
                format!(
                    "{}..{} ({} bytes) -> {d}\n",
                    r.start,
                    r.end,
                    r.end - r.start
                )
            })
            .collect()
    }
}

impl<R: RangeReader> RangeReader for RecordingReader<R> {
    fn read(&self, file: &ParquetFile, requests: &[IoRequest], dest: Dest<'_>) -> Result<IoReport> {
        if let Ok(mut log) = self.log.lock() {
            log.extend(requests.iter().map(|q| (q.range.clone(), q.dest_offset)));
        }
        self.inner.read(file, requests, dest)
    }

    fn read_beside(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        dest: Dest<'_>,
    ) -> Result<IoReport> {
        if let Ok(mut log) = self.log.lock() {
            log.extend(requests.iter().map(|q| (q.range.clone(), q.dest_offset)));
        }
        self.inner.read_beside(file, requests, dest)
    }

    fn read_stream(
        &self,
        file: &ParquetFile,
        requests: &[IoRequest],
        parts: &[Vec<usize>],
        dest: StreamDest<'_>,
        done: &(dyn Fn(usize, IoReport) + Sync),
    ) -> Option<Result<()>> {
        // the parts' requests, in the order the stream reads them
        let streamed = self.inner.read_stream(file, requests, parts, dest, done)?;
        if let Ok(mut log) = self.log.lock() {
            log.extend(
                parts
                    .iter()
                    .flatten()
                    .filter_map(|&i| requests.get(i))
                    .map(|q| (q.range.clone(), q.dest_offset)),
            );
        }
        Some(streamed)
    }

    fn name(&self) -> &'static str {
        self.inner.name()
    }
}
