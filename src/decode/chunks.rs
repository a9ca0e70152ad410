//! The fetched column chunks of one row group, as a [`ChunkReader`] for arrow-rs.
//!
//! arrow-rs asks for byte ranges by file offset; each must lie inside one planned chunk. A
//! request outside every chunk is an error ("the plan was incomplete"), never a file read.

use std::ops::Range;

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

/// Planned chunk bytes keyed by their file ranges.
#[derive(Debug, Clone)]
pub(crate) struct FetchedChunks {
    file_len: u64,
    /// Sorted by start offset.
    chunks: Vec<(Range<u64>, Bytes)>,
}

impl FetchedChunks {
    /// Wraps `chunks` (file range, bytes of exactly that range) of a file of `file_len` bytes.
    pub(crate) fn new(file_len: u64, mut chunks: Vec<(Range<u64>, Bytes)>) -> Self {
        chunks.retain(|(r, _)| r.end > r.start);
        chunks.sort_by_key(|(r, _)| r.start);
        FetchedChunks { file_len, chunks }
    }

    fn slice(&self, start: u64, len: u64) -> Result<Bytes, ParquetError> {
        let end = start.saturating_add(len);
        // The last chunk starting at or before `start`; chunks may overlap in odd files, so
        // also look one further back.
        let i = self.chunks.partition_point(|(r, _)| r.start <= start);
        for (r, b) in self.chunks[..i].iter().rev().take(2) {
            if r.start <= start && end <= r.end {
                let from = (start - r.start) as usize;
                return Ok(b.slice(from..from + len as usize));
            }
        }
        Err(ParquetError::General(format!(
            "bytes {start}..{end} lie outside the planned column chunks"
        )))
    }
}

impl Length for FetchedChunks {
    fn len(&self) -> u64 {
        self.file_len
    }
}

impl ChunkReader for FetchedChunks {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        use bytes::Buf;
        let i = self.chunks.partition_point(|(r, _)| r.start <= start);
        match i.checked_sub(1).map(|k| &self.chunks[k]) {
            Some((r, b)) if start < r.end => Ok(b.slice((start - r.start) as usize..).reader()),
            _ => Err(ParquetError::General(format!(
                "byte {start} lies outside the planned column chunks"
            ))),
        }
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, length as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn serves_only_planned_bytes() {
        let c = FetchedChunks::new(
            1000,
            vec![
                (100..110, Bytes::from_static(b"0123456789")),
                (200..203, Bytes::from_static(b"abc")),
            ],
        );
        assert_eq!(&c.get_bytes(102, 3).unwrap()[..], b"234");
        assert_eq!(&c.get_bytes(200, 3).unwrap()[..], b"abc");
        assert!(c.get_bytes(108, 5).is_err());
        assert!(c.get_bytes(50, 1).is_err());
        let mut s = String::new();
        c.get_read(105).unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s, "56789");
        assert!(c.get_read(110).is_err());
        assert!(c.get_read(0).is_err());
    }
}
