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

/// The `--output` file being written: a temporary file beside `out`, removed unless
/// [`Pending::finish`] renames it to `out`.
pub(crate) struct Pending {
    out: std::path::PathBuf,
    tmp: std::path::PathBuf,
    file: Option<std::fs::File>,
}

impl Pending {
    /// Creates the temporary file beside `out` (an error now when its directory is missing
    /// or not writable).
    pub(crate) fn create(out: &Path) -> Result<Pending, Error> {
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
        })
    }

    /// Writes `batches` as an Arrow IPC file and renames it into place.
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
        write_ipc(&out, f, batches, schema)?;
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
