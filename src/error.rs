//! The one public error type.
//!
//! Every variant carries the context a user needs to act: the file, the byte range, the row
//! group and column, the setting or the call that failed. Modules build these through the
//! constructors below so that messages stay uniform.


#[doc(hidden)]
pub mod fault;
pub(crate) mod panic_guard;

/// Not a stable API: `f` run with a panic on the calling thread caught and returned as its
/// message, not printed (other threads' panics print as before) — the crate's own guard
/// around arrow-rs, for the test suites' oracles, which read corrupt files with it.
#[doc(hidden)]
pub fn catch_quietly<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    panic_guard::contain(f)
}

use std::ops::Range;
use std::path::{Path, PathBuf};

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in cuparquet.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be opened, stat'ed or read.
    #[error("{}: {op}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done (`open`, `read bytes 10..20`, ...).
        op: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// The file ended before a range that the footer or the plan needs.
    #[error("{}: {}{}", path.display(), short_read_text(range, *file_len), fmt_ctx(context))]
    ShortRead {
        /// The file.
        path: PathBuf,
        /// The range that could not be read completely.
        range: Range<u64>,
        /// The file's length.
        file_len: u64,
        /// What the range was for.
        context: String,
    },

    /// The footer is missing, truncated or unreadable.
    #[error("{}: invalid Parquet footer: {}", path.display(), one_line(reason))]
    Footer {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// The footer parsed, but what it says about a column chunk cannot be true.
    #[error("{}: row group {row_group}, column '{}': {}{}", path.display(), one_line(column), one_line(reason), fmt_range(range))]
    BadColumnChunk {
        /// The file.
        path: PathBuf,
        /// Row group index.
        row_group: usize,
        /// Dotted column path.
        column: String,
        /// Byte range concerned, when known.
        range: Option<Range<u64>>,
        /// What is wrong.
        reason: String,
    },

    /// Decoding the column chunks failed (corrupt pages, unsupported encodings, ...).
    #[error("{}: decoding {}: {}", path.display(), fmt_where(*row_group, column.as_deref()), one_line(reason))]
    Decode {
        /// The file.
        path: PathBuf,
        /// Row group being decoded, when known.
        row_group: Option<usize>,
        /// Column, when known.
        column: Option<String>,
        /// What went wrong (the decoder's own message).
        reason: String,
    },

    /// A projection names something the schema does not have.
    #[error("{}: unknown column '{}'; available columns: {}", path.display(), one_line(name), one_line(available))]
    UnknownColumn {
        /// The file.
        path: PathBuf,
        /// The name as given.
        name: String,
        /// Top-level names the file has, comma separated.
        available: String,
    },

    /// A row-group selection is out of range or malformed.
    #[error("{}: {}", path.display(), one_line(reason))]
    RowGroupSelection {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// The filter expression could not be parsed or does not fit the schema.
    #[error("filter '{}': {}", one_line(expr), one_line(reason))]
    Filter {
        /// The expression as given.
        expr: String,
        /// What is wrong, with the position where useful.
        reason: String,
    },

    /// Files read together do not have the same schema.
    #[error("{} and {}: different schemas: {}", first.display(), second.display(), one_line(reason))]
    SchemaMismatch {
        /// The file whose schema the others must match.
        first: PathBuf,
        /// The file that differs.
        second: PathBuf,
        /// What differs (the field and both types).
        reason: String,
    },

    /// The sources of a scan hold no Parquet file: an empty list, or directories with no
    /// `*.parquet` file in them.
    #[error("no Parquet files to read in {}", if sources.is_empty() { "an empty list of sources".to_string() } else { sources.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ") })]
    NoFiles {
        /// The sources as given.
        sources: Vec<PathBuf>,
    },

    /// One row group needs more device memory than the load's budget allows.
    #[error("{}: row group {row_group} needs about {} of device memory while it decodes (beside the next row group's reads; where its page index cuts it into pieces of pages, its smallest piece), more than the memory budget of {}; raise the budget or read fewer columns (row groups are cut into pieces where the file has a page index, or where its page headers say each page's rows: columns that do not repeat, or v2 data pages)", path.display(), mib(*needed), mib(*budget))]
    MemoryBudget {
        /// The file.
        path: PathBuf,
        /// The row group.
        row_group: usize,
        /// Device bytes it needs (estimated from the footer).
        needed: u64,
        /// The budget.
        budget: u64,
    },

    /// A setting (builder value or environment variable) is invalid.
    #[error("invalid setting {name}={value:?}: {reason}")]
    Setting {
        /// Setting or environment variable name.
        name: String,
        /// The value as given.
        value: String,
        /// What is wrong.
        reason: String,
    },

    /// The requested device cannot be used.
    #[error("device {device}: {reason}")]
    Device {
        /// The device as requested (`cuda:1`, `auto`).
        device: String,
        /// Why it cannot be used.
        reason: String,
    },

    /// The file uses a feature cuparquet does not support (encryption, external chunks).
    #[error("{}: {what}", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is not supported, and where.
        what: String,
    },

    /// cuFile was required (`compat_mode=off`) but cannot be used, or a cuFile call failed.
    #[error("{}: cuFile{}: {reason}", path.display(), fmt_range(range))]
    CuFile {
        /// The file.
        path: PathBuf,
        /// The byte range concerned, when known.
        range: Option<Range<u64>>,
        /// What failed (the cuFile call and its code, or the missing machine fact).
        reason: String,
    },

    /// A batch could not be handed over, or taken in, through the Arrow C Device Data
    /// Interface (a type it cannot carry, a malformed struct from the other side).
    #[error("Arrow C Device Data Interface: {op}: {reason}")]
    Interface {
        /// What was being done (`export`, `import`, `stream`).
        op: String,
        /// What is wrong.
        reason: String,
    },

    /// Writing output (Arrow IPC, JSON) failed.
    #[error("{}: writing output: {reason}", path.display())]
    Output {
        /// The output file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// `n` bytes in MiB, for messages.
fn mib(n: u64) -> String {
    format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
}

impl Error {
    /// The error, naming the file `path` where it does not already: device errors (an
    /// allocation, a kernel) arise below the file's load, which adds its name here.
    pub(crate) fn in_file(self, path: &std::path::Path) -> Error {
        self.doing(path, "loading")
    }

    /// The error, naming `path` as the file of a batch being copied to the host.
    pub(crate) fn copying_from(self, path: &std::path::Path) -> Error {
        self.doing(path, "copying to the host a batch of")
    }

    fn doing(self, path: &std::path::Path, what: &str) -> Error {
        match self {
            Error::Device { device, reason } if !reason.contains(&path.display().to_string()) => {
                Error::Device {
                    device,
                    reason: format!("{reason} ({what} {})", path.display()),
                }
            }
            e => e,
        }
    }
}

/// A short read: a range past the end, or (within the length the file had when opened) a file
/// that ended early because it changed during the load.
fn short_read_text(range: &Range<u64>, file_len: u64) -> String {
    if range.end > file_len {
        format!(
            "bytes {}..{} lie past the end of the file ({file_len} bytes)",
            range.start, range.end
        )
    } else {
        format!(
            "bytes {}..{}: the file ended before them (it had {file_len} bytes when opened: truncated or replaced during the load)",
            range.start, range.end
        )
    }
}

fn fmt_ctx(ctx: &str) -> String {
    if ctx.is_empty() {
        String::new()
    } else {
        format!(" (reading {ctx})")
    }
}

fn fmt_range(r: &Option<Range<u64>>) -> String {
    match r {
        Some(r) => format!(" (bytes {}..{})", r.start, r.end),
        None => String::new(),
    }
}

fn fmt_where(rg: Option<usize>, col: Option<&str>) -> String {
    let col = col.map(one_line);
    match (rg, col.as_deref()) {
        (Some(rg), Some(c)) => format!("row group {rg}, column '{c}'"),
        (Some(rg), None) => format!("row group {rg}"),
        (None, Some(c)) => format!("column '{c}'"),
        (None, None) => "the file".to_string(),
    }
}

/// `s` with control characters escaped (a line break as the two characters `\` `n`): a
/// message quoting the file's own names or bytes (a column named with a line break, found by
/// cargo-fuzz) stays on one line.
pub(crate) fn one_line(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

impl Error {
    pub(crate) fn interface(op: &str, reason: impl Into<String>) -> Self {
        Error::Interface {
            op: op.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn io(path: &Path, op: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            op: op.into(),
            source,
        }
    }

    pub(crate) fn footer(path: &Path, reason: impl Into<String>) -> Self {
        Error::Footer {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }

    pub(crate) fn setting(
        name: impl Into<String>,
        value: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Error::Setting {
            name: name.into(),
            value: value.into(),
            reason: reason.into(),
        }
    }
}
