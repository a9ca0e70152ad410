//! An open Parquet file: its path, handle and length, and positioned reads with context.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// An open Parquet file. Cheap to share by reference across reader threads (`pread` needs no
/// seek position).
#[derive(Debug)]
pub struct ParquetFile {
    path: PathBuf,
    file: File,
    len: u64,
}

impl ParquetFile {
    /// Opens `path` for reading.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|e| Error::io(&path, "open", e))?;
        let meta = file.metadata().map_err(|e| Error::io(&path, "stat", e))?;
        if meta.is_dir() {
            return Err(Error::io(
                &path,
                "open",
                std::io::Error::other("is a directory, not a Parquet file"),
            ));
        }
        Ok(ParquetFile {
            len: meta.len(),
            path,
            file,
        })
    }

    /// The path the file was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's length in bytes, as seen when it was opened.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The underlying handle.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Reads exactly `range`, naming `what` in errors. Retries short reads and `EINTR`.
    pub fn read_range(&self, range: Range<u64>, what: &str) -> Result<Vec<u8>> {
        if range.end > self.len || range.start > range.end {
            return Err(self.short_read(range, what));
        }
        let mut buf = vec![0u8; (range.end - range.start) as usize];
        read_fully_at(&self.file, &mut buf, range.start)
            .map_err(|e| self.read_error(range.clone(), what, e))?;
        Ok(buf)
    }

    pub(crate) fn short_read(&self, range: Range<u64>, what: &str) -> Error {
        Error::ShortRead {
            path: self.path.clone(),
            range,
            file_len: self.len,
            context: what.to_string(),
        }
    }

    pub(crate) fn read_error(&self, range: Range<u64>, what: &str, e: std::io::Error) -> Error {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            return self.short_read(range, what);
        }
        let op = if what.is_empty() {
            format!("read bytes {}..{}", range.start, range.end)
        } else {
            format!("read bytes {}..{} ({what})", range.start, range.end)
        };
        Error::io(&self.path, op, e)
    }
}

/// The Parquet files `paths` name, in order: a file stands for itself; a directory for its
/// `*.parquet` files (not recursive; names starting with `_` or `.` skipped, as Spark's and
/// Hive's `_SUCCESS` and `.crc` files are; sorted by name). A directory with no Parquet file is
/// an error naming it; a missing path is listed as a file, which opening names.
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        // a path that is not a directory is a file to open: opening it names what is wrong
        if !std::fs::metadata(p).is_ok_and(|m| m.is_dir()) {
            out.push(p.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(p)
            .map_err(|e| Error::io(p, "list", e))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|f| {
                let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
                !name.starts_with(['_', '.'])
                    && f.extension()
                        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
                    && f.is_file()
            })
            .collect();
        if found.is_empty() {
            return Err(Error::io(
                p,
                "list",
                std::io::Error::other("the directory holds no *.parquet file"),
            ));
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

/// `pread` until `buf` is full: retries on `EINTR` and short reads; a read of 0 bytes before
/// the buffer is full is `UnexpectedEof` (the file shrank or the range was wrong).
pub(crate) fn read_fully_at(
    file: &File,
    mut buf: &mut [u8],
    mut offset: u64,
) -> std::io::Result<()> {
    while !buf.is_empty() {
        let read = if crate::error::fault::hit(crate::error::fault::Site::Pread) {
            Err(std::io::Error::other(
                "Input/output error (os error 5) (injected fault)",
            ))
        } else if crate::error::fault::hit(crate::error::fault::Site::ShortRead) {
            Ok(0)
        } else {
            file.read_at(buf, offset)
        };
        match read {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "file ended before the range did",
                ))
            }
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
