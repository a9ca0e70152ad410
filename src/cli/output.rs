//! What the commands write: stdout ([`emit`], behind the `out!` macro: a closed stdout ends
//! the process quietly), the Arrow IPC file of `load --output` (through a temporary file
//! beside it, created before the load and renamed when every batch is written, so a failing
//! load leaves nothing behind and a missing directory fails before any read), and the error
//! for a failed write.

use std::io::Write as _;
use std::path::Path;

use cuparquet::Error;

/// Writes `text` to stdout. When stdout has been closed (a pipe whose reader is gone, as with
/// `| head`), the process ends here with exit code 0 and no message: the reader has what it
/// wanted. Another write error ends it with exit code 1 and one line saying so.
pub(crate) fn emit(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("cuparquet: error: writing to stdout: {e}");
        std::process::exit(1);
    }
}

pub(crate) fn out_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Output {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// What `--output` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// An Arrow IPC file (`.arrow`, `.feather`, `.ipc`).
    Arrow,
    /// An Arrow IPC stream (`.arrows`).
    Arrows,
    /// Parquet, ZSTD-compressed (`.parquet`).
    Parquet,
    /// CSV with a header line (`.csv`).
    Csv,
}

impl Format {
    /// The format `--format` names, else the one `out`'s extension says; an error naming the
    /// extensions known.
    pub(crate) fn of(out: &Path, asked: Option<Format>) -> Result<Format, Error> {
        if let Some(f) = asked {
            return Ok(f);
        }
        let ext = out
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match ext.as_deref() {
            Some("arrow" | "feather" | "ipc") => Ok(Format::Arrow),
            Some("arrows") => Ok(Format::Arrows),
            Some("parquet") => Ok(Format::Parquet),
            Some("csv") => Ok(Format::Csv),
            _ => Err(Error::Setting {
                name: "--output".into(),
                value: out.display().to_string(),
                reason: "the extension does not say the format: .arrow (an Arrow IPC file), \
                         .arrows (an IPC stream), .parquet or .csv, or give --format"
                    .into(),
            }),
        }
    }
}

/// The `--output` file being written: a temporary file beside `out`, removed unless
/// [`Pending::finish`] renames it to `out`.
pub(crate) struct Pending {
    out: std::path::PathBuf,
    tmp: std::path::PathBuf,
    file: Option<std::fs::File>,
    format: Format,
}

impl Pending {
    /// Creates the temporary file beside `out` (an error now when its directory is missing
    /// or not writable).
    pub(crate) fn create(out: &Path, format: Format) -> Result<Pending, Error> {
        let name = out
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "output".into());
        let tmp = out.with_file_name(format!(".{name}.cuparquet-{}.tmp", std::process::id()));
        let file = std::fs::File::create(&tmp).map_err(|e| out_err(out, e))?;
        Ok(Pending {
            out: out.to_path_buf(),
            tmp,
            file: Some(file),
            format,
        })
    }

    /// Writes `batches` in the format asked and renames the file into place.
    pub(crate) fn finish(
        mut self,
        batches: &[cuparquet::LoadedBatch],
        schema: &arrow::datatypes::SchemaRef,
    ) -> Result<(), Error> {
        let out = self.out.clone();
        let f = self
            .file
            .take()
            .ok_or_else(|| out_err(&out, "written twice"))?;
        match self.format {
            Format::Arrow => write_ipc(&out, f, batches, schema)?,
            other => write_other(&out, f, batches, schema, other)?,
        }
        std::fs::rename(&self.tmp, &out).map_err(|e| out_err(&out, e))
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // not renamed: the load or the write failed
        let _ = std::fs::remove_file(&self.tmp);
    }
}

fn write_ipc(
    out: &Path,
    f: std::fs::File,
    batches: &[cuparquet::LoadedBatch],
    schema: &arrow::datatypes::SchemaRef,
) -> Result<(), Error> {
    let schema = batches
        .first()
        .map(|b| b.schema())
        .unwrap_or_else(|| schema.clone());
    let mut w = arrow::ipc::writer::FileWriter::try_new(std::io::BufWriter::new(f), &schema)
        .map_err(|e| out_err(out, e))?;
    let dictionaries = schema
        .fields()
        .iter()
        .any(|f| matches!(f.data_type(), arrow::datatypes::DataType::Dictionary(..)));
    if dictionaries {
        // an IPC file holds one dictionary per field: join the batches (row groups have
        // dictionaries of their own) into one, whose dictionaries are merged
        let host = batches
            .iter()
            .map(|b| b.to_host())
            .collect::<Result<Vec<_>, _>>()?;
        let one = arrow::compute::concat_batches(&schema, &host).map_err(|e| out_err(out, e))?;
        w.write(&one).map_err(|e| out_err(out, e))?;
    } else {
        for b in batches {
            w.write(&b.to_host()?).map_err(|e| out_err(out, e))?;
        }
    }
    w.finish().map_err(|e| out_err(out, e))?;
    let mut inner = w.into_inner().map_err(|e| out_err(out, e))?;
    inner.flush().map_err(|e| out_err(out, e))?;
    Ok(())
}

/// `batches` as an IPC stream, Parquet or CSV.
fn write_other(
    out: &Path,
    f: std::fs::File,
    batches: &[cuparquet::LoadedBatch],
    schema: &arrow::datatypes::SchemaRef,
    format: Format,
) -> Result<(), Error> {
    let schema = batches
        .first()
        .map(|b| b.schema())
        .unwrap_or_else(|| schema.clone());
    let e = |e: &dyn std::fmt::Display| out_err(out, e);
    let w = std::io::BufWriter::new(f);
    match format {
        Format::Arrows => {
            let mut s = arrow::ipc::writer::StreamWriter::try_new(w, &schema).map_err(|x| e(&x))?;
            for b in batches {
                s.write(&b.to_host()?).map_err(|x| e(&x))?;
            }
            s.finish().map_err(|x| e(&x))?;
            s.into_inner()
                .map_err(|x| e(&x))?
                .flush()
                .map_err(|x| e(&x))?;
        }
        Format::Parquet => {
            let props = parquet::file::properties::WriterProperties::builder()
                .set_compression(parquet::basic::Compression::ZSTD(Default::default()))
                .build();
            let mut p = parquet::arrow::ArrowWriter::try_new(w, schema.clone(), Some(props))
                .map_err(|x| e(&x))?;
            for b in batches {
                p.write(&b.to_host()?).map_err(|x| e(&x))?;
            }
            p.into_inner()
                .map_err(|x| e(&x))?
                .flush()
                .map_err(|x| e(&x))?;
        }
        Format::Csv | Format::Arrow => {
            let mut c = arrow::csv::WriterBuilder::new().with_header(true).build(w);
            for b in batches {
                c.write(&b.to_host()?).map_err(|x| e(&x))?;
            }
            c.into_inner().flush().map_err(|x| e(&x))?;
        }
    }
    Ok(())
}
