//! A file's batch in the table's terms: the table's columns in its order, cast where the
//! file's type differs, nulls where the file lacks a column.

use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::{exec_err, Result};

/// `batch` (a file's columns) as a batch of `schema`.
pub(crate) fn to_schema(
    batch: &RecordBatch,
    schema: &SchemaRef,
    file: &str,
) -> Result<RecordBatch> {
    if batch.schema().fields() == schema.fields() {
        return Ok(RecordBatch::try_new_with_options(
            Arc::clone(schema),
            batch.columns().to_vec(),
            &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )?);
    }
    let rows = batch.num_rows();
    let columns = schema
        .fields()
        .iter()
        .map(|field| -> Result<ArrayRef> {
            match batch.schema().index_of(field.name()) {
                Ok(i) => {
                    let column = batch.column(i);
                    if column.data_type() == field.data_type() {
                        Ok(Arc::clone(column))
                    } else {
                        cast(column, field.data_type()).map_err(|e| {
                            datafusion::error::DataFusionError::Execution(format!(
                                "{file}: column {} is {} in the file and {} in the table: {e}",
                                field.name(),
                                column.data_type(),
                                field.data_type()
                            ))
                        })
                    }
                }
                Err(_) if field.is_nullable() => Ok(new_null_array(field.data_type(), rows)),
                Err(_) => exec_err!(
                    "{file} has no column {} and the table's column is not nullable",
                    field.name()
                ),
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new_with_options(
        Arc::clone(schema),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}
