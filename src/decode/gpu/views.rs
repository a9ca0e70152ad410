//! String and binary columns of device batches as views
//! ([`ScanBuilder::with_string_views`](crate::ScanBuilder::with_string_views)): one thread
//! per row builds the row's 16-byte view from the column's offsets (`make_views` in
//! `kernels/decode_bytes.cu`); the values stay where they are, as the views' one data buffer.

use std::sync::Arc;

use arrow::datatypes::{DataType, SchemaRef};

use super::kernels::{DECODE_BYTES_MODULE, MAKE_VIEWS};
use super::launch::{Const, Mut};
use crate::array::{DeviceArray, DeviceRecordBatch};
use crate::error::{Error, Result};

/// `batch` (on device `ordinal`) as `schema`, the same fields with some string and binary
/// columns as views: each column whose field there is `Utf8View` or `BinaryView` and which
/// holds offsets and values gets its views built; the others are moved over unchanged. An
/// error where a column's values are over 4 GiB (views address them with 32-bit offsets),
/// naming it, or where `schema` does not match the batch.
pub(crate) fn to_views(
    batch: DeviceRecordBatch,
    schema: &SchemaRef,
    ordinal: usize,
) -> Result<DeviceRecordBatch> {
    let gpu = crate::device::gpu(ordinal)?;
    let device = format!("cuda:{ordinal}");
    if schema.fields().len() != batch.columns.len() {
        return Err(Error::Device {
            device,
            reason: format!(
                "a batch of {} columns cannot take a schema of {} fields",
                batch.columns.len(),
                schema.fields().len()
            ),
        });
    }
    let module = DECODE_BYTES_MODULE.load(&gpu)?;
    let rows = batch.num_rows;
    let mut columns = Vec::with_capacity(batch.columns.len());
    // the arrays whose offsets the kernels read, kept until they are done
    let mut sources = Vec::new();
    for (mut a, field) in batch.columns.into_iter().zip(schema.fields()) {
        let target = field.data_type();
        if crate::decode::host::view_type(&a.data_type).as_ref() != Some(target) {
            columns.push(a);
            continue;
        }
        let wide = i32::from(matches!(
            a.data_type,
            DataType::LargeUtf8 | DataType::LargeBinary
        ));
        let (offsets, values) = match a.buffers.len() {
            2 => {
                let values = a.buffers.pop();
                (a.buffers.pop(), values)
            }
            _ => (None, None),
        };
        let (Some(offsets), Some(values)) = (offsets, values) else {
            return Err(Error::Device {
                device,
                reason: format!(
                    "column {} ({}) does not hold offsets and values",
                    field.name(),
                    a.data_type
                ),
            });
        };
        if values.1 > u32::MAX as usize {
            return Err(Error::Device {
                device,
                reason: format!(
                    "column {} holds {} bytes of values in one batch: views address at most \
                     4 GiB; read it without string views, or in smaller batches",
                    field.name(),
                    values.1
                ),
            });
        }
        let n = a.len;
        let need = if wide == 1 { 8 } else { 4 } * (n + 1);
        if offsets.1 < need || offsets.0.len() < need {
            return Err(Error::Device {
                device,
                reason: format!(
                    "column {} holds {} bytes of offsets for {n} rows",
                    field.name(),
                    offsets.1
                ),
            });
        }
        let views = gpu.alloc((16 * n).max(1))?;
        if n > 0 {
            let validity = a.validity.as_ref().map_or(0, |v| v.device_ptr());
            // SAFETY: `offsets` holds n + 1 offsets of the width `wide` names (checked above),
            // each within `values` (the decoder's, or the filter's, whose last offset is the
            // values' length); `validity` (when not 0) holds n bits; `views` holds 16 bytes
            // for each of the n rows, one thread per row; all of them live until the
            // `synchronize_decode` below (kept in `sources` and `columns`).
            unsafe {
                MAKE_VIEWS.launch_nowait(
                    &gpu,
                    &module,
                    (n as u64).div_ceil(256) as u32,
                    256,
                    (
                        Const::at(offsets.0.device_ptr()),
                        wide,
                        Const::at(values.0.device_ptr()),
                        Const::at(validity),
                        n as u64,
                        Mut::at(views.device_ptr()),
                    ),
                )?
            };
        }
        sources.push(offsets);
        columns.push(DeviceArray {
            data_type: target.clone(),
            len: n,
            null_count: a.null_count,
            validity: a.validity.take(),
            buffers: vec![(views, 16 * n), values],
            children: Vec::new(),
            dictionary: None,
        });
    }
    gpu.synchronize_decode()?;
    drop(sources);
    Ok(DeviceRecordBatch {
        schema: Arc::clone(schema),
        columns,
        num_rows: rows,
    })
}
