//! Device batches joined end to end on their device (kernels `concat_bits` and
//! `concat_offsets` in `kernels/filter.cu`, the rest copies between device buffers): a row
//! filter's small batches gathered into batches of about the rows asked for, without a trip
//! to the host. Fixed-width values and characters are copied as they are; validity and boolean
//! bits are set at their new positions; offsets (strings, binaries, lists, maps) are shifted by
//! the values or children before them; dictionaries join their values, and each part's keys
//! are shifted past the values before them. Views (whose buffers are indexed by number) and
//! keys narrower than 32 bits are not joined here ([`joinable`]).

use arrow::datatypes::DataType;

use super::kernels::{CONCAT_BITS, CONCAT_OFFSETS, FILTER_MODULE, FILTER_THREADS};
use super::launch::{zeroed, Const, Mut};
use crate::array::{DeviceArray, DeviceRecordBatch};
use crate::device::nvrtc::Module;
use crate::device::{DeviceBuffer, Gpu};
use crate::error::{Error, Result};

use std::sync::Arc;

/// Whether arrays of type `dt` are joined on the device ([`concat_device`]).
pub(crate) fn joinable(dt: &DataType) -> bool {
    match dt {
        DataType::Null
        | DataType::Boolean
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::FixedSizeBinary(_) => true,
        DataType::List(f) | DataType::LargeList(f) | DataType::Map(f, _) => {
            joinable(f.data_type())
        }
        DataType::FixedSizeList(f, _) => joinable(f.data_type()),
        DataType::Struct(fs) => fs.iter().all(|f| joinable(f.data_type())),
        DataType::Dictionary(k, v) => {
            matches!(k.as_ref(), DataType::Int32 | DataType::Int64) && joinable(v)
        }
        dt => dt.primitive_width().is_some(),
    }
}

/// `parts` (batches of one schema on device `ordinal`, every column [`joinable`]) joined end
/// to end into one batch; `None` where a list's offsets do not start at its first child
/// element or end at its last (such parts stay apart).
pub(crate) fn concat_device(
    parts: &[&DeviceRecordBatch],
    ordinal: usize,
) -> Result<Option<DeviceRecordBatch>> {
    let first = parts.first().ok_or_else(|| Error::Device {
        device: format!("cuda:{ordinal}"),
        reason: "joining no device batches".into(),
    })?;
    let gpu = crate::device::gpu(ordinal)?;
    let module = FILTER_MODULE.load(&gpu)?;
    let cx = Join {
        gpu: &gpu,
        module: &module,
    };
    let mut columns = Vec::with_capacity(first.columns.len());
    for (c, field) in first.schema.fields().iter().enumerate() {
        let arrays: Vec<&DeviceArray> = parts.iter().map(|p| &p.columns[c]).collect();
        match cx.array(field.data_type(), &arrays)? {
            Some(a) => columns.push(a),
            None => return Ok(None),
        }
    }
    gpu.synchronize_decode()?;
    Ok(Some(DeviceRecordBatch {
        schema: Arc::clone(&first.schema),
        columns,
        num_rows: parts.iter().map(|p| p.num_rows).sum(),
    }))
}

struct Join<'a> {
    gpu: &'a Arc<Gpu>,
    module: &'a Module,
}

/// Blocks for `n` threads' work, at least one.
fn blocks(n: u64) -> u32 {
    n.div_ceil(u64::from(FILTER_THREADS)).clamp(1, 65_535) as u32
}

impl Join<'_> {
    fn unsupported(&self, dt: &DataType) -> Error {
        Error::Device {
            device: format!("cuda:{}", self.gpu.ordinal()),
            reason: format!("joining device arrays of type {dt} is not supported"),
        }
    }

    /// `arrays` (of type `dt`) joined (`None`: see [`concat_device`]).
    fn array(&self, dt: &DataType, arrays: &[&DeviceArray]) -> Result<Option<DeviceArray>> {
        let len: usize = arrays.iter().map(|a| a.len).sum();
        let null_count: usize = arrays.iter().map(|a| a.null_count).sum();
        let validity = match arrays.iter().any(|a| a.validity.is_some() && a.null_count > 0) {
            true => {
                let parts: Vec<_> = arrays.iter().map(|a| (a.validity.as_ref(), a.len)).collect();
                Some(self.bits(&parts)?)
            }
            false => None,
        };
        let child = |k: usize| -> Result<Vec<&DeviceArray>> {
            arrays
                .iter()
                .map(|a| a.children.get(k).ok_or_else(|| self.unsupported(dt)))
                .collect()
        };
        let (buffers, children) = match dt {
            DataType::Null => (Vec::new(), Vec::new()),
            DataType::Boolean => {
                // values, every part's (a missing one is an error, not every bit set)
                let values: Vec<_> = arrays
                    .iter()
                    .map(|a| match a.buffers.first() {
                        Some(b) => Some((Some(&b.0), a.len)),
                        None => (a.len == 0).then_some((None, 0)),
                    })
                    .collect::<Option<_>>()
                    .ok_or_else(|| self.unsupported(dt))?;
                (vec![(self.bits(&values)?, len.div_ceil(8))], Vec::new())
            }
            DataType::Utf8 | DataType::Binary | DataType::LargeUtf8 | DataType::LargeBinary => {
                let large = matches!(dt, DataType::LargeUtf8 | DataType::LargeBinary);
                let ends = self.ends(arrays, large)?;
                let chars: Vec<(&DeviceBuffer, std::ops::Range<usize>)> = arrays
                    .iter()
                    .zip(&ends)
                    .map(|(a, e)| a.buffers.get(1).map(|b| (&b.0, e.clone())))
                    .collect::<Option<_>>()
                    .ok_or_else(|| self.unsupported(dt))?;
                let total: usize = ends.iter().map(|e| e.len()).sum();
                let offsets = self.offsets(arrays, large, &ends)?;
                (vec![offsets, (self.copies(&chars)?, total)], Vec::new())
            }
            DataType::List(f) | DataType::LargeList(f) | DataType::Map(f, _) => {
                let large = matches!(dt, DataType::LargeList(_));
                let kids = child(0)?;
                let ends = self.ends(arrays, large)?;
                // each part's offsets span its whole child
                if ends.iter().zip(&kids).any(|(e, k)| e.start != 0 || e.end != k.len) {
                    return Ok(None);
                }
                let offsets = self.offsets(arrays, large, &ends)?;
                let Some(kid) = self.array(f.data_type(), &kids)? else {
                    return Ok(None);
                };
                (vec![offsets], vec![kid])
            }
            DataType::FixedSizeList(f, _) => {
                let Some(kid) = self.array(f.data_type(), &child(0)?)? else {
                    return Ok(None);
                };
                (Vec::new(), vec![kid])
            }
            DataType::Struct(fs) => {
                let mut kids = Vec::with_capacity(fs.len());
                for (k, f) in fs.iter().enumerate() {
                    let Some(kid) = self.array(f.data_type(), &child(k)?)? else {
                        return Ok(None);
                    };
                    kids.push(kid);
                }
                (Vec::new(), kids)
            }
            DataType::Dictionary(k, v) => {
                // the values joined; each part's keys shifted past the values before it
                let large = matches!(k.as_ref(), DataType::Int64);
                let values: Vec<&DeviceArray> = arrays
                    .iter()
                    .map(|a| a.dictionary.as_deref().ok_or_else(|| self.unsupported(dt)))
                    .collect::<Result<_>>()?;
                let Some(joined) = self.array(v, &values)? else {
                    return Ok(None);
                };
                let sizes: Vec<usize> = values.iter().map(|v| v.len).collect();
                if !large && joined.len > i32::MAX as usize {
                    return Ok(None);
                }
                let keys = self.keys(arrays, large, &sizes)?;
                return Ok(Some(DeviceArray {
                    data_type: dt.clone(),
                    len,
                    null_count: if validity.is_some() { null_count } else { 0 },
                    validity,
                    buffers: vec![keys],
                    children: Vec::new(),
                    dictionary: Some(Box::new(joined)),
                }));
            }
            dt => {
                let w = match dt {
                    DataType::FixedSizeBinary(w) => *w as usize,
                    dt => dt.primitive_width().ok_or_else(|| self.unsupported(dt))?,
                };
                let values: Vec<(&DeviceBuffer, std::ops::Range<usize>)> = arrays
                    .iter()
                    .map(|a| a.buffers.first().map(|b| (&b.0, 0..a.len * w)))
                    .collect::<Option<_>>()
                    .ok_or_else(|| self.unsupported(dt))?;
                (vec![(self.copies(&values)?, len * w)], Vec::new())
            }
        };
        Ok(Some(DeviceArray {
            data_type: dt.clone(),
            len,
            null_count: if validity.is_some() { null_count } else { 0 },
            validity,
            buffers,
            children,
            dictionary: None,
        }))
    }

    /// Byte ranges of buffers copied one after another into a new buffer.
    fn copies(&self, parts: &[(&DeviceBuffer, std::ops::Range<usize>)]) -> Result<DeviceBuffer> {
        let total: usize = parts.iter().map(|p| p.1.len()).sum();
        let mut out = self.gpu.alloc(total.max(1))?;
        let mut at = 0;
        for (b, r) in parts {
            out.copy_from_device(at, b, r.clone())?;
            at += r.len();
        }
        Ok(out)
    }

    /// Each array's first and last offset (`large`: i64), as a range.
    fn ends(&self, arrays: &[&DeviceArray], large: bool) -> Result<Vec<std::ops::Range<usize>>> {
        let w = if large { 8 } else { 4 };
        arrays
            .iter()
            .map(|a| {
                let (b, bytes) = a.buffers.first().ok_or_else(|| self.unsupported(&a.data_type))?;
                if *bytes < (a.len + 1) * w {
                    return Err(self.unsupported(&a.data_type));
                }
                let at = |i: usize| -> Result<i64> {
                    let v = b.copy_to_host(i * w..(i + 1) * w)?;
                    Ok(match large {
                        true => i64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8])),
                        false => i64::from(i32::from_le_bytes(v[..4].try_into().unwrap_or([0; 4]))),
                    })
                };
                let (first, last) = (at(0)?, at(a.len)?);
                if first < 0 || last < first {
                    return Err(Error::Device {
                        device: format!("cuda:{}", self.gpu.ordinal()),
                        reason: format!("offsets from {first} to {last} in a device array"),
                    });
                }
                Ok(first as usize..last as usize)
            })
            .collect()
    }

    /// Bitmaps `(bits or None: all set, bits)` joined.
    fn bits(&self, parts: &[(Option<&DeviceBuffer>, usize)]) -> Result<DeviceBuffer> {
        let total: usize = parts.iter().map(|p| p.1).sum();
        let out = zeroed(self.gpu, total.div_ceil(32) * 4)?;
        let mut at = 0u64;
        for &(b, n) in parts {
            let src = b.map_or(0, |b| b.device_ptr());
            // SAFETY: `src` holds `n` bits (or is null: every bit set), `out` `total` bits
            // from `at + n <= total`; both live until the caller's final wait.
            unsafe {
                CONCAT_BITS.launch_nowait(
                    self.gpu,
                    self.module,
                    blocks(n as u64),
                    FILTER_THREADS,
                    (Const::at(src), n as u64, at, Mut::at(out.device_ptr())),
                )?
            };
            at += n as u64;
        }
        Ok(out)
    }

    /// The dictionary keys of `arrays` (`large`: i64) joined, each part's shifted past the
    /// `sizes` of the dictionaries before it.
    fn keys(
        &self,
        arrays: &[&DeviceArray],
        large: bool,
        sizes: &[usize],
    ) -> Result<(DeviceBuffer, usize)> {
        let w = if large { 8 } else { 4 };
        let len: usize = arrays.iter().map(|a| a.len).sum();
        let out = self.gpu.alloc((len * w).max(1))?;
        let (mut row, mut base) = (0usize, 0i64);
        for (a, size) in arrays.iter().zip(sizes) {
            let src = a.buffers.first().ok_or_else(|| self.unsupported(&a.data_type))?;
            if src.1 < a.len * w {
                return Err(self.unsupported(&a.data_type));
            }
            self.shift(src.0.device_ptr(), a.len, (large as i32) | 2, base, out.device_ptr() + (row * w) as u64)?;
            row += a.len;
            base += *size as i64;
        }
        Ok((out, len * w))
    }

    /// `concat_offsets` over `n` entries at `src` (mode: bit 0 i64, bit 1 `n` entries rather
    /// than n + 1) plus `base`, to `dst`.
    fn shift(&self, src: u64, n: usize, mode: i32, base: i64, dst: u64) -> Result<()> {
        let count = if mode & 2 != 0 { n } else { n + 1 };
        // SAFETY: the callers give `src` holding `count` entries of the mode's width and
        // `dst` room for as many inside their output; parts write in stream order (offsets:
        // each its first over the last one of the part before, the same value); all live
        // until the caller's final wait.
        unsafe {
            CONCAT_OFFSETS.launch_nowait(
                self.gpu,
                self.module,
                blocks(count as u64),
                FILTER_THREADS,
                (Const::at(src), n as u64, mode, base, Mut::at(dst)),
            )
        }
    }

    /// The offsets of `arrays` (`large`: i64; each spanning `ends`) joined, each part's
    /// shifted to follow the parts before it.
    fn offsets(
        &self,
        arrays: &[&DeviceArray],
        large: bool,
        ends: &[std::ops::Range<usize>],
    ) -> Result<(DeviceBuffer, usize)> {
        let w = if large { 8 } else { 4 };
        let len: usize = arrays.iter().map(|a| a.len).sum();
        let total: usize = ends.iter().map(|e| e.len()).sum();
        if !large && total > i32::MAX as usize {
            return Err(Error::Device {
                device: format!("cuda:{}", self.gpu.ordinal()),
                reason: format!("{total} values joined do not fit 32-bit offsets"),
            });
        }
        let out = self.gpu.alloc((len + 1) * w)?;
        let (mut row, mut base) = (0usize, 0i64);
        for (a, e) in arrays.iter().zip(ends) {
            let src = a.buffers.first().ok_or_else(|| self.unsupported(&a.data_type))?;
            // (`ends` checked that `src` holds a.len + 1 offsets)
            self.shift(
                src.0.device_ptr(),
                a.len,
                large as i32,
                base - e.start as i64,
                out.device_ptr() + (row * w) as u64,
            )?;
            row += a.len;
            base += e.len() as i64;
        }
        Ok((out, (len + 1) * w))
    }
}
