//! An open Parquet file — a local file, or (feature `object-store`) an object named by a URL —
//! its path, handle and length, and positioned reads with context.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
pub use crate::config::RemoteSettings;

#[cfg(feature = "object-store")]
pub mod remote;

/// An open Parquet file. Cheap to share by reference across reader threads (`pread` needs no
/// seek position; a remote object's GETs none either).
#[derive(Debug)]
pub struct ParquetFile {
    path: PathBuf,
    handle: Handle,
    len: u64,
}

#[derive(Debug)]
enum Handle {
    Local(File),
    #[cfg(feature = "object-store")]
    Remote(remote::RemoteObject),
}

/// The speculative tail a remote object's opening GET asks for: the footer's
/// ([`crate::metadata`] reads this much of a file's end first).
#[cfg(feature = "object-store")]
const REMOTE_TAIL: u64 = 64 << 10;

impl ParquetFile {
    /// Opens `path` for reading: a local path, or a URL (`s3://`, `gs://`, `az://`,
    /// `abfss://`, `http(s)://`, `file://`; feature `object-store`) with the stores
    /// configured from the environment.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, &Default::default())
    }

    /// [`ParquetFile::open`], a URL read with `remote`'s settings (storage options,
    /// concurrency, piece size).
    pub fn open_with(path: impl AsRef<Path>, remote: &RemoteSettings) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if is_url(&path) {
            return Self::open_url(path, remote, None);
        }
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
            handle: Handle::Local(file),
        })
    }

    /// [`ParquetFile::open_with`] for a file whose length the caller knows (from its footer,
    /// read earlier, or a listing): a URL is opened without a request, its reads trusting that
    /// length (a ranged GET past the object's end fails, naming the URL and range); a local
    /// file is opened as usual.
    pub fn open_sized(path: impl AsRef<Path>, remote: &RemoteSettings, len: u64) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if !is_url(&path) {
            return Self::open_with(path, remote);
        }
        Self::open_url(path, remote, Some(len))
    }

    #[cfg(feature = "object-store")]
    fn open_url(path: PathBuf, remote: &RemoteSettings, len: Option<u64>) -> Result<Self> {
        let url = path.to_string_lossy().into_owned();
        let obj = match len {
            Some(n) => remote::RemoteObject::with_size(&url, remote, n)?,
            None => remote::RemoteObject::open(&url, remote, REMOTE_TAIL)?,
        };
        Ok(ParquetFile {
            len: obj.size(),
            path,
            handle: Handle::Remote(obj),
        })
    }

    #[cfg(not(feature = "object-store"))]
    fn open_url(path: PathBuf, _remote: &RemoteSettings, _len: Option<u64>) -> Result<Self> {
        Err(Error::io(
            &path,
            "open",
            std::io::Error::other(
                "a URL: reading object stores and HTTP needs cuparquet's `object-store` feature",
            ),
        ))
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

    /// The local file's handle; `None` for a remote object.
    pub fn file(&self) -> Option<&File> {
        match &self.handle {
            Handle::Local(f) => Some(f),
            #[cfg(feature = "object-store")]
            Handle::Remote(_) => None,
        }
    }

    /// The remote object, for a file opened by its URL.
    #[cfg(feature = "object-store")]
    pub fn remote(&self) -> Option<&remote::RemoteObject> {
        match &self.handle {
            Handle::Remote(r) => Some(r),
            Handle::Local(_) => None,
        }
    }

    /// Whether it was opened by a URL (read by GETs, not `pread`).
    pub fn is_remote(&self) -> bool {
        !matches!(self.handle, Handle::Local(_))
    }

    /// The local handle, or an error naming the file for a remote object (which the readers
    /// of local files cannot read).
    pub(crate) fn local(&self) -> Result<&File> {
        self.file().ok_or_else(|| {
            Error::io(
                &self.path,
                "pread",
                std::io::Error::other("a remote object is read by GETs, not by a file reader"),
            )
        })
    }

    /// Reads exactly `range`, naming `what` in errors. Retries short reads and `EINTR`.
    pub fn read_range(&self, range: Range<u64>, what: &str) -> Result<Vec<u8>> {
        if range.end > self.len || range.start > range.end {
            return Err(self.short_read(range, what));
        }
        #[cfg(feature = "object-store")]
        if let Handle::Remote(r) = &self.handle {
            return r.read_range(range, what);
        }
        let file = self.local()?;
        let mut buf = vec![0u8; (range.end - range.start) as usize];
        read_fully_at(file, &mut buf, range.start)
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

/// The Parquet files `paths` name, in order: a file stands for itself; a directory for the
/// `*.parquet` files under it, at any depth (hive-partitioned `key=value/` directories
/// included; names starting with `_` or `.` skipped, as Spark's and Hive's `_SUCCESS` and
/// `.crc` files are; sorted by path); a path with `*`, `?` or `[` for the files matching it as a
/// glob (`data/*.parquet`, `data/**/*.parquet`). A directory or glob with no Parquet file is an
/// error naming it; a missing path is listed as a file, which opening names.
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    expand_sources(paths, &RemoteSettings::default())
}

/// [`expand_paths`], URLs too: a URL stands for its object; one ending in `/` for the
/// `*.parquet` objects under that prefix (listed with `remote`'s storage options).
pub fn expand_sources(paths: &[PathBuf], remote: &RemoteSettings) -> Result<Vec<PathBuf>> {
    Ok(list_files(paths, remote)?.into_iter().map(|(f, _)| f).collect())
}

/// [`expand_sources`], each file with the directory, prefix or glob base it was found under
/// (`None` for a file named itself): where its hive partition directories start.
pub fn list_files(
    paths: &[PathBuf],
    remote: &RemoteSettings,
) -> Result<Vec<(PathBuf, Option<String>)>> {
    let mut out = Vec::new();
    for p in paths {
        if is_url(p) {
            let root = p.to_string_lossy().into_owned();
            let under = root.ends_with('/').then_some(root.clone());
            out.extend(list_url(p, remote)?.into_iter().map(|f| (f, under.clone())));
            continue;
        }
        let text = p.to_string_lossy();
        if text.contains(['*', '?', '[']) {
            out.extend(glob_files(p)?);
            continue;
        }
        // a path that is not a directory is a file to open: opening it names what is wrong
        if !std::fs::metadata(p).is_ok_and(|m| m.is_dir()) {
            out.push((p.clone(), None));
            continue;
        }
        let mut found = Vec::new();
        walk(p, &mut found)?;
        if found.is_empty() {
            return Err(Error::io(
                p,
                "list",
                std::io::Error::other(
                    "the directory holds no *.parquet file, at any depth (names starting with \
                     _ or . are skipped)",
                ),
            ));
        }
        found.sort();
        let root = format!("{}/", text.trim_end_matches('/'));
        out.extend(found.into_iter().map(|f| (f, Some(root.clone()))));
    }
    Ok(out)
}

/// Whether a directory entry's name is skipped (`_SUCCESS`, `.crc`, `_temporary/`).
fn hidden(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.starts_with(['_', '.'])
}

fn is_parquet(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

/// The `*.parquet` files under `dir`, at any depth.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, "list", e))? {
        let path = entry.map_err(|e| Error::io(dir, "list", e))?.path();
        if hidden(&path) {
            continue;
        }
        if path.is_dir() {
            walk(&path, out)?;
        } else if is_parquet(&path) && path.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// The files matching glob `pattern` (hidden names skipped), sorted, each with the pattern's
/// directory before its first wildcard as its root.
fn glob_files(pattern: &Path) -> Result<Vec<(PathBuf, Option<String>)>> {
    let text = pattern.to_string_lossy();
    let wild = text.find(['*', '?', '[']).unwrap_or(text.len());
    let root = match text[..wild].rfind('/') {
        Some(i) => text[..=i].to_string(),
        None => String::new(),
    };
    let bad = |reason: String| Error::io(pattern, "list", std::io::Error::other(reason));
    let paths = glob::glob(&text).map_err(|e| bad(format!("not a glob pattern: {e}")))?;
    let mut found = Vec::new();
    for p in paths {
        let p = p.map_err(|e| bad(e.to_string()))?;
        let skipped = (p.strip_prefix(&root).unwrap_or(&p).components())
            .any(|c| hidden(Path::new(c.as_os_str())));
        if p.is_file() && !skipped {
            found.push(p);
        }
    }
    if found.is_empty() {
        return Err(bad("no file matches this pattern".into()));
    }
    found.sort();
    let root = (!root.is_empty()).then_some(root);
    Ok(found.into_iter().map(|f| (f, root.clone())).collect())
}

#[cfg(feature = "object-store")]
fn list_url(p: &Path, remote: &RemoteSettings) -> Result<Vec<PathBuf>> {
    let url = p.to_string_lossy();
    Ok(remote::list(&url, remote)?
        .into_iter()
        .map(PathBuf::from)
        .collect())
}

#[cfg(not(feature = "object-store"))]
fn list_url(p: &Path, _remote: &RemoteSettings) -> Result<Vec<PathBuf>> {
    Ok(vec![p.to_path_buf()]) // opening it says the feature is needed
}

/// Whether `path` is a URL (`scheme://…`: an object store or HTTP) rather than a local path.
pub fn is_url(path: &Path) -> bool {
    path.to_str().is_some_and(|s| {
        s.split_once("://").is_some_and(|(scheme, _)| {
            scheme.len() >= 2
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        })
    })
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
