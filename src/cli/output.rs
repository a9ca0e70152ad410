//! What `load` writes besides its summary: the Arrow IPC file of `--output`, and the error for a
//! failed write.

use std::io::Write as _;
use std::path::Path;

use cuparquet::Error;

pub(crate) fn out_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Output {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

pub(crate) fn write_ipc(
    out: &Path,
    batches: &[cuparquet::LoadedBatch],
    schema: &arrow::datatypes::SchemaRef,
) -> Result<(), Error> {
    let schema = batches
        .first()
        .map(|b| b.schema())
        .unwrap_or_else(|| schema.clone());
    let f = std::fs::File::create(out).map_err(|e| out_err(out, e))?;
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
