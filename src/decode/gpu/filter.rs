//! The exact row filter on device batches (kernels in `kernels/filter.cu`): each test of the
//! filter writes a byte per row, the bytes are combined into the row mask, one scan of it
//! gives every kept row its output position, and each column is compacted to the kept rows
//! (fixed-width values, bitmaps, strings, structs). The columns read for the filter only are
//! left out. What the kernels do not handle — a test on a kept-dictionary or Decimal256
//! column, a list, map, dictionary or view column — goes through the host filter
//! ([`BatchFilter`]) for that batch or that column, and is uploaded again.
//!
//! Kernels run on the calling thread's decode stream, in order; the host waits only for the
//! scans' span sums (to place the spans) and the null counts.

use std::sync::Arc;

use arrow::array::BooleanArray;
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{DataType, FieldRef};

use super::kernels::{
    COMPACT_BITS, COMPACT_CHARS, COMPACT_FIXED, COMPACT_OFFSETS, FILTER_MODULE, FILTER_SPAN,
    FILTER_THREADS, KEPT_LENGTHS, MASK_COMBINE, PRED_BYTES, PRED_COLS, PRED_FLOAT, PRED_INT,
    PRED_LIKE, PRED_VALID,
    SPAN_SCAN, SPAN_TOTAL,
};
use super::launch::{u64s, u64s_from_device, upload, zeroed, Const, Mut};
use crate::array::{DeviceArray, DeviceRecordBatch};
use crate::decode::filter::{leaf_count, locate, prune_column, BatchFilter};
use crate::device::nvrtc::Module;
use crate::device::{DeviceBuffer, Gpu};
use crate::error::Result;
use crate::plan::predicate::{CmpOp, LikePattern, RowKind, RowTest, RowValue};

/// What the filter left of a device batch.
#[derive(Debug)]
pub(crate) enum DeviceKept {
    /// No row.
    Nothing,
    /// Every row, and every column is wanted: the batch as it is.
    All,
    /// The kept rows of the wanted columns.
    Some(DeviceRecordBatch),
}

/// `batch` (on device `ordinal`) filtered by `f`.
pub(crate) fn filter_device(
    f: &BatchFilter,
    batch: &DeviceRecordBatch,
    ordinal: usize,
) -> Result<DeviceKept> {
    let gpu = crate::device::gpu(ordinal)?;
    let n = batch.num_rows;
    if n == 0 {
        return Ok(DeviceKept::Nothing);
    }
    if !tests_on_device(f, batch) {
        // a test the kernels do not run: the whole batch on the host
        let host = f.apply(&batch.to_host()?)?;
        return Ok(match host.num_rows() {
            0 => DeviceKept::Nothing,
            _ => DeviceKept::Some(DeviceRecordBatch::upload(&gpu, &host)?),
        });
    }
    let module = FILTER_MODULE.load(&gpu)?;
    let cx = Cx {
        gpu: &gpu,
        module: &module,
        batch,
        n: n as u64,
    };
    let mask = cx.eval(f.test())?;
    let (pos, kept) = cx.scan(Some(&mask), None)?;
    if kept == 0 {
        gpu.synchronize_decode()?;
        return Ok(DeviceKept::Nothing);
    }
    if kept as usize == n && f.keeps_all() {
        gpu.synchronize_decode()?;
        return Ok(DeviceKept::All);
    }
    let m = kept as u64;
    let mut host_mask: Option<BooleanArray> = None;
    let mut flags = f.kept_leaves().iter().copied();
    let mut out_fields = f.out_schema().fields().iter();
    let mut columns = Vec::new();
    for (field, array) in batch.schema.fields().iter().zip(&batch.columns) {
        let mine: Vec<bool> = flags.by_ref().take(leaf_count(field.data_type())).collect();
        if !mine.iter().any(|&k| k) {
            continue;
        }
        let Some(target) = out_fields.next() else {
            break;
        };
        let col = Compact {
            cx: &cx,
            mask: &mask,
            pos: &pos,
            m,
        };
        columns.push(col.array(field, array, target, &mine, &mut host_mask)?);
    }
    gpu.synchronize_decode()?;
    Ok(DeviceKept::Some(DeviceRecordBatch {
        schema: Arc::clone(f.out_schema()),
        columns,
        num_rows: m as usize,
    }))
}

/// Whether the kernels run every test: each test's column of a type they compare (LIKE on
/// plain strings; a column against a column of the same fixed-width type).
fn tests_on_device(f: &BatchFilter, batch: &DeviceRecordBatch) -> bool {
    fn on_device(t: &RowTest, batch: &DeviceRecordBatch) -> bool {
        let dt = |leaf: usize| leaf_of(batch, leaf).map(|(a, _)| &a.data_type);
        match t {
            RowTest::And(a, b) | RowTest::Or(a, b) => {
                on_device(a, batch) && on_device(b, batch)
            }
            RowTest::Cmp { leaf, kind, .. } => {
                dt(*leaf).is_some_and(|dt| device_comparable(dt, *kind))
            }
            RowTest::Like { leaf, .. } => dt(*leaf).is_some_and(|dt| {
                matches!(
                    dt,
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary
                )
            }),
            RowTest::CmpColumns { left, right, .. } => match (dt(*left), dt(*right)) {
                (Some(a), Some(b)) => columns_mode(a, b).is_some(),
                _ => false,
            },
            RowTest::Never { leaf } | RowTest::Valid { leaf } | RowTest::Null { leaf } => {
                dt(*leaf).is_some()
            }
        }
    }
    on_device(f.test(), batch)
}

fn device_comparable(dt: &DataType, kind: RowKind) -> bool {
    use arrow::datatypes::TimeUnit;
    match dt {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Float32
        | DataType::Float64
        | DataType::Boolean
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Binary
        | DataType::LargeBinary => true,
        DataType::Date32 => kind == RowKind::Date,
        DataType::Date64 | DataType::Time32(_) | DataType::Time64(_) | DataType::Duration(_) => {
            kind == RowKind::Int
        }
        DataType::Timestamp(unit, _) => {
            let nanos = match unit {
                TimeUnit::Second => 1_000_000_000,
                TimeUnit::Millisecond => 1_000_000,
                TimeUnit::Microsecond => 1_000,
                TimeUnit::Nanosecond => 1,
            };
            kind == RowKind::Timestamp { nanos } || kind == RowKind::Int
        }
        DataType::Decimal32(_, s) | DataType::Decimal64(_, s) | DataType::Decimal128(_, s) => {
            kind == RowKind::Decimal { scale: *s }
        }
        _ => false,
    }
}

/// How `pred_cols` compares a column of type `a` with one of type `b`: (byte width, signed,
/// float), for two columns of one fixed-width type (decimals of one storage and scale);
/// `None` for the pairs the host compares (other types, mixed types).
fn columns_mode(a: &DataType, b: &DataType) -> Option<(i32, bool, bool)> {
    use DataType as D;
    let same_decimal = |a: &DataType, b: &DataType| match (a, b) {
        (D::Decimal32(_, s), D::Decimal32(_, t))
        | (D::Decimal64(_, s), D::Decimal64(_, t))
        | (D::Decimal128(_, s), D::Decimal128(_, t)) => s == t,
        _ => false,
    };
    if a != b && !same_decimal(a, b) {
        return None;
    }
    Some(match a {
        D::Int8 => (1, true, false),
        D::Int16 => (2, true, false),
        D::Int32 | D::Date32 | D::Time32(_) | D::Decimal32(..) => (4, true, false),
        D::Int64
        | D::Date64
        | D::Time64(_)
        | D::Timestamp(..)
        | D::Duration(_)
        | D::Decimal64(..) => (8, true, false),
        D::Decimal128(..) => (16, true, false),
        D::UInt8 => (1, false, false),
        D::UInt16 => (2, false, false),
        D::UInt32 => (4, false, false),
        D::UInt64 => (8, false, false),
        D::Float32 => (4, true, true),
        D::Float64 => (8, true, true),
        _ => return None,
    })
}

/// The device array at leaf position `pos` of `batch`, and the validity bitmaps of the structs
/// above it (outermost first).
fn leaf_of(batch: &DeviceRecordBatch, pos: usize) -> Option<(&DeviceArray, Vec<u64>)> {
    let path = locate(batch.schema.fields(), pos)?;
    let mut a = batch.columns.get(path[0])?;
    let mut parents = Vec::new();
    for &i in &path[1..] {
        if let Some(v) = &a.validity {
            parents.push(v.device_ptr());
        }
        a = a.children.get(i)?;
    }
    Some((a, parents))
}

fn op_code(op: CmpOp) -> i32 {
    match op {
        CmpOp::Lt => 0,
        CmpOp::Le => 1,
        CmpOp::Gt => 2,
        CmpOp::Ge => 3,
        CmpOp::Eq => 4,
        CmpOp::Ne => 5,
    }
}

/// Blocks for a grid-strided kernel over `n` items of `per_block` each.
fn blocks(n: u64, per_block: u64) -> u32 {
    n.div_ceil(per_block).clamp(1, 8192) as u32
}

struct Cx<'a> {
    gpu: &'a Arc<Gpu>,
    module: &'a Module,
    batch: &'a DeviceRecordBatch,
    n: u64,
}

impl Cx<'_> {
    fn grid(&self) -> u32 {
        blocks(self.n, u64::from(FILTER_THREADS))
    }

    /// The row mask of `t`: one byte per row, 1 where it holds.
    fn eval(&self, t: &RowTest) -> Result<DeviceBuffer> {
        let n = self.n;
        match t {
            RowTest::And(a, b) | RowTest::Or(a, b) => {
                let x = self.eval(a)?;
                let y = self.eval(b)?;
                let or = matches!(t, RowTest::Or(..)) as i32;
                self.combine(&x, y.device_ptr(), or)?;
                Ok(x)
            }
            RowTest::Never { .. } => zeroed(self.gpu, n as usize),
            RowTest::Valid { leaf } | RowTest::Null { leaf } => {
                let (a, parents) = self.leaf(*leaf)?;
                let out = self.gpu.alloc((n as usize).max(1))?;
                let valid = a.validity.as_ref().map_or(0, |v| v.device_ptr());
                // SAFETY: `valid` is a bitmap of `n` bits (or null), `out` holds `n` bytes;
                // both live until the batch's final wait (the caller's scope).
                unsafe {
                    PRED_VALID.launch_nowait(
                        self.gpu,
                        self.module,
                        self.grid(),
                        FILTER_THREADS,
                        (Const::at(valid), n, 1, Mut::at(out.device_ptr())),
                    )?
                };
                for p in parents {
                    self.combine(&out, p, 2)?;
                }
                if matches!(t, RowTest::Null { .. }) {
                    self.combine(&out, 0, 4)?;
                }
                Ok(out)
            }
            RowTest::Like {
                leaf,
                pattern,
                negated,
            } => {
                let (a, parents) = self.leaf(*leaf)?;
                let out = self.like(a, pattern, *negated)?;
                for p in parents {
                    self.combine(&out, p, 2)?;
                }
                Ok(out)
            }
            RowTest::CmpColumns {
                left,
                op,
                right,
                nan_too,
                ..
            } => {
                let (a, pa) = self.leaf(*left)?;
                let (b, pb) = self.leaf(*right)?;
                let Some((width, sgn, float)) = columns_mode(&a.data_type, &b.data_type) else {
                    return Err(crate::error::Error::Device {
                        device: format!("cuda:{}", self.gpu.ordinal()),
                        reason: format!(
                            "a comparison of a {} column with a {} column reached the device \
                             filter (the host compares those)",
                            a.data_type, b.data_type
                        ),
                    });
                };
                let mode = op_code(*op)
                    | (width << 4)
                    | (i32::from(sgn) << 12)
                    | (i32::from(float) << 13)
                    | (i32::from(*nan_too) << 14);
                let values = |x: &DeviceArray| x.buffers.first().map_or(0, |b| b.0.device_ptr());
                let valid = |x: &DeviceArray| x.validity.as_ref().map_or(0, |v| v.device_ptr());
                let out = self.gpu.alloc((n as usize).max(1))?;
                // SAFETY: `a` and `b` hold `n` values of `width` bytes each (one batch's
                // columns of that type), their bitmaps `n` bits (or are null), `out` `n`
                // bytes; all live until the batch's final wait (the caller's scope).
                unsafe {
                    PRED_COLS.launch_nowait(
                        self.gpu,
                        self.module,
                        self.grid(),
                        FILTER_THREADS,
                        (
                            Const::at(values(a)),
                            Const::at(values(b)),
                            n,
                            Const::at(valid(a)),
                            Const::at(valid(b)),
                            mode,
                            Mut::at(out.device_ptr()),
                        ),
                    )?
                };
                for p in pa.into_iter().chain(pb) {
                    self.combine(&out, p, 2)?;
                }
                Ok(out)
            }
            RowTest::Cmp {
                leaf,
                op,
                value,
                nan_too,
                ..
            } => {
                let (a, parents) = self.leaf(*leaf)?;
                let out = self.compare(a, *op, value, *nan_too)?;
                for p in parents {
                    self.combine(&out, p, 2)?;
                }
                Ok(out)
            }
        }
    }

    fn leaf(&self, pos: usize) -> Result<(&DeviceArray, Vec<u64>)> {
        leaf_of(self.batch, pos).ok_or_else(|| crate::error::Error::Device {
            device: format!("cuda:{}", self.gpu.ordinal()),
            reason: format!("the row filter's column {pos} is not in the device batch"),
        })
    }

    /// `a[i] = a[i] AND/OR b[i]`; mode bit 0: OR, bit 1: `b` is a bitmap, bit 2: `a = !a`.
    fn combine(&self, a: &DeviceBuffer, b: u64, mode: i32) -> Result<()> {
        // SAFETY: `a` holds `n` bytes, `b` `n` bytes or bits (or is unread: mode 4); both live
        // until the batch's final wait.
        unsafe {
            MASK_COMBINE.launch_nowait(
                self.gpu,
                self.module,
                self.grid(),
                FILTER_THREADS,
                (Mut::at(a.device_ptr()), Const::at(b), self.n, mode),
            )
        }
    }

    /// The rows of string array `a` that match `pattern` (or do not, `negated`), null rows
    /// not.
    fn like(&self, a: &DeviceArray, pattern: &LikePattern, negated: bool) -> Result<DeviceBuffer> {
        let n = self.n;
        let out = self.gpu.alloc((n as usize).max(1))?;
        let valid = a.validity.as_ref().map_or(0, |v| v.device_ptr());
        let buf = |i: usize| a.buffers.get(i).map_or(0, |(b, _)| b.device_ptr());
        let large = matches!(a.data_type, DataType::LargeUtf8 | DataType::LargeBinary);
        let (kinds, bytes) = pattern.kernel_form();
        let kinds_buf = upload(self.gpu, &kinds)?;
        let bytes_buf = upload(self.gpu, &bytes)?;
        let mode = large as i32 | (negated as i32) << 1;
        // SAFETY: offsets hold `n + 1` entries of 4 (8 when large) bytes into the characters,
        // `kinds_buf` and `bytes_buf` `kinds.len()` bytes each, `valid` `n` bits (or null),
        // `out` `n` bytes; the pattern's buffers are freed in stream order after the launch,
        // the rest live until the batch's final wait.
        unsafe {
            PRED_LIKE.launch_nowait(
                self.gpu,
                self.module,
                self.grid(),
                FILTER_THREADS,
                (
                    Const::at(buf(0)),
                    Const::at(buf(1)),
                    n,
                    Const::at(valid),
                    mode,
                    Const::at(kinds_buf.device_ptr()),
                    Const::at(bytes_buf.device_ptr()),
                    kinds.len() as u64,
                    Mut::at(out.device_ptr()),
                ),
            )?
        };
        drop((kinds_buf, bytes_buf));
        Ok(out)
    }

    fn compare(
        &self,
        a: &DeviceArray,
        op: CmpOp,
        value: &RowValue,
        nan_too: bool,
    ) -> Result<DeviceBuffer> {
        let n = self.n;
        let out = self.gpu.alloc((n as usize).max(1))?;
        let valid = a.validity.as_ref().map_or(0, |v| v.device_ptr());
        let buf = |i: usize| a.buffers.get(i).map_or(0, |(b, _)| b.device_ptr());
        let op = op_code(op);
        let (grid, o) = (self.grid(), Mut::at(out.device_ptr()));
        let int_width = |dt: &DataType| -> Option<(i32, i32)> {
            Some(match dt {
                DataType::Boolean => (0, 0),
                DataType::Int8 => (1, 1),
                DataType::UInt8 => (1, 0),
                DataType::Int16 => (2, 1),
                DataType::UInt16 => (2, 0),
                DataType::Int32
                | DataType::Date32
                | DataType::Time32(_)
                | DataType::Decimal32(..) => (4, 1),
                DataType::UInt32 => (4, 0),
                DataType::Int64
                | DataType::Date64
                | DataType::Time64(_)
                | DataType::Duration(_)
                | DataType::Timestamp(..)
                | DataType::Decimal64(..) => (8, 1),
                DataType::UInt64 => (8, 0),
                DataType::Decimal128(..) => (16, 1),
                _ => return None,
            })
        };
        match (&a.data_type, value) {
            (DataType::Float32 | DataType::Float64, _) => {
                let v = match value {
                    RowValue::Float(f) => *f,
                    RowValue::Int(i) => *i as f64,
                    RowValue::Bytes(_) => f64::NAN,
                };
                let width = if a.data_type == DataType::Float32 {
                    4
                } else {
                    8
                };
                let mode = op | width << 4 | (nan_too as i32) << 12;
                // SAFETY: the values hold `n` floats of `width` bytes, `valid` `n` bits (or
                // null), `out` `n` bytes; all live until the batch's final wait.
                unsafe {
                    PRED_FLOAT.launch_nowait(
                        self.gpu,
                        self.module,
                        grid,
                        FILTER_THREADS,
                        (Const::at(buf(0)), n, Const::at(valid), mode, v.to_bits(), o),
                    )?
                };
            }
            (
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary,
                RowValue::Bytes(lit),
            ) => {
                let large = matches!(a.data_type, DataType::LargeUtf8 | DataType::LargeBinary);
                let lit_buf = upload(self.gpu, lit)?;
                let mode = op | (large as i32) << 4;
                // SAFETY: offsets hold `n + 1` entries of 4 (8 when large) bytes into the
                // characters, `lit_buf` `lit.len()` bytes, `valid` `n` bits (or null), `out`
                // `n` bytes; `lit_buf` is waited for below, the rest live until the batch's
                // final wait.
                unsafe {
                    PRED_BYTES.launch_nowait(
                        self.gpu,
                        self.module,
                        grid,
                        FILTER_THREADS,
                        (
                            Const::at(buf(0)),
                            Const::at(buf(1)),
                            n,
                            Const::at(valid),
                            mode,
                            Const::at(lit_buf.device_ptr()),
                            lit.len() as u64,
                            o,
                        ),
                    )?
                };
                // the literal's buffer is freed in stream order on this thread's stream
                drop(lit_buf);
            }
            (dt, RowValue::Int(v)) if int_width(dt).is_some() => {
                let (width, signed) = int_width(dt).unwrap_or((8, 1));
                let mode = op | width << 4 | signed << 12;
                let lo = *v as u64;
                let hi = (*v >> 64) as u64;
                // SAFETY: the values hold `n` integers of `width` bytes (bits when 0),
                // `valid` `n` bits (or null), `out` `n` bytes; all live until the batch's
                // final wait.
                unsafe {
                    PRED_INT.launch_nowait(
                        self.gpu,
                        self.module,
                        grid,
                        FILTER_THREADS,
                        (Const::at(buf(0)), n, Const::at(valid), mode, lo, hi, o),
                    )?
                };
            }
            _ => {
                // a type that never compares with the literal (binding refuses it first)
                return zeroed(self.gpu, n as usize);
            }
        }
        Ok(out)
    }

    /// Exclusive prefix sums over `n` rows of the mask bytes (or of i64 `values`): `n + 1`
    /// i64 (the last is the total), and the total.
    fn scan(
        &self,
        mask: Option<&DeviceBuffer>,
        values: Option<&DeviceBuffer>,
    ) -> Result<(DeviceBuffer, i64)> {
        let n = self.n;
        let spans = (n + 1).div_ceil(FILTER_SPAN);
        let sums = self.gpu.alloc(spans as usize * 8)?;
        let (m, v) = (
            mask.map_or(0, |b| b.device_ptr()),
            values.map_or(0, |b| b.device_ptr()),
        );
        // SAFETY: `m` holds `n` bytes or `v` `n` i64 (the other is null), `sums` one i64 per
        // span; one block per span; waited for just below.
        unsafe {
            SPAN_TOTAL.launch_nowait(
                self.gpu,
                self.module,
                spans as u32,
                FILTER_THREADS,
                (Const::at(m), Const::at(v), n, Mut::at(sums.device_ptr())),
            )?
        };
        self.gpu.synchronize_decode()?;
        let mut at = 0i64;
        let mut bases = Vec::with_capacity(spans as usize);
        for s in u64s_from_device(&sums, spans as usize)? {
            bases.push(at as u64);
            at = at
                .checked_add(s as i64)
                .ok_or_else(|| crate::error::Error::Device {
                    device: format!("cuda:{}", self.gpu.ordinal()),
                    reason: "the row filter's prefix sums overflow".into(),
                })?;
        }
        let bases = upload(self.gpu, &u64s(bases))?;
        let out = self.gpu.alloc((n as usize + 1) * 8)?;
        // SAFETY: as above, `bases` one i64 per span, `out` n + 1 i64; the spans cover n + 1
        // entries; `bases` and the inputs live until the caller's next wait (they are the
        // caller's or waited for before `bases` drops, in stream order).
        unsafe {
            SPAN_SCAN.launch_nowait(
                self.gpu,
                self.module,
                spans as u32,
                FILTER_THREADS,
                (
                    Const::at(m),
                    Const::at(v),
                    n,
                    Const::at(bases.device_ptr()),
                    Mut::at(out.device_ptr()),
                ),
            )?
        };
        Ok((out, at))
    }
}

/// Compaction of one batch's columns to the `m` kept rows.
struct Compact<'a> {
    cx: &'a Cx<'a>,
    mask: &'a DeviceBuffer,
    pos: &'a DeviceBuffer,
    m: u64,
}

impl Compact<'_> {
    /// `array` (of `field`, whose leaves `keep` flags) compacted, as `target` (the field
    /// without the leaves left out).
    fn array(
        &self,
        field: &FieldRef,
        array: &DeviceArray,
        target: &FieldRef,
        keep: &[bool],
        host_mask: &mut Option<BooleanArray>,
    ) -> Result<DeviceArray> {
        let all = keep.iter().all(|&k| k);
        match (&array.data_type, target.data_type()) {
            (DataType::Struct(fs), DataType::Struct(ts)) => {
                let validity = self.validity(array)?;
                let mut flags = keep.iter().copied();
                let mut targets = ts.iter();
                let mut children = Vec::new();
                for (cf, ca) in fs.iter().zip(&array.children) {
                    let mine: Vec<bool> = flags.by_ref().take(leaf_count(cf.data_type())).collect();
                    if !mine.iter().any(|&k| k) {
                        continue;
                    }
                    let Some(t) = targets.next() else { break };
                    children.push(self.array(cf, ca, t, &mine, host_mask)?);
                }
                Ok(DeviceArray {
                    data_type: target.data_type().clone(),
                    len: self.m as usize,
                    null_count: validity.as_ref().map_or(0, |v| v.1),
                    validity: validity.map(|v| v.0),
                    buffers: Vec::new(),
                    children,
                    dictionary: None,
                })
            }
            (dt, _) if all => match self.flat(array, dt)? {
                Some(a) => Ok(a),
                None => self.on_host(field, array, keep, host_mask),
            },
            _ => self.on_host(field, array, keep, host_mask),
        }
    }

    /// A flat array compacted on the device; `None` for a type the kernels do not compact.
    fn flat(&self, array: &DeviceArray, dt: &DataType) -> Result<Option<DeviceArray>> {
        let gpu = self.cx.gpu;
        let (n, m) = (self.cx.n, self.m);
        let width = match dt {
            DataType::FixedSizeBinary(w) => Some(*w as usize),
            DataType::Boolean => None,
            dt => dt.primitive_width(),
        };
        let buffers = match dt {
            DataType::Null => Vec::new(),
            DataType::Boolean => {
                let (words, _) =
                    self.bits(array.buffers.first().map_or(0, |b| b.0.device_ptr()))?;
                vec![(words, (m as usize).div_ceil(8))]
            }
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary => self
                .strings(
                    array,
                    matches!(dt, DataType::LargeUtf8 | DataType::LargeBinary),
                )?,
            _ => match width {
                Some(w) if matches!(w, 1 | 2 | 4 | 8) || (w > 0 && w % 8 == 0 && w <= 256) => {
                    let src = array.buffers.first().map_or(0, |b| b.0.device_ptr());
                    let out = gpu.alloc((m as usize * w).max(1))?;
                    // SAFETY: `src` holds `n` values of `w` bytes, the mask `n` bytes, `pos`
                    // n + 1 i64 below `m`, `out` `m` values; all live until the batch's final
                    // wait.
                    unsafe {
                        COMPACT_FIXED.launch_nowait(
                            gpu,
                            self.cx.module,
                            self.cx.grid(),
                            FILTER_THREADS,
                            (
                                Const::at(src),
                                w as i32,
                                n,
                                Const::at(self.mask.device_ptr()),
                                Const::at(self.pos.device_ptr()),
                                Mut::at(out.device_ptr()),
                            ),
                        )?
                    };
                    vec![(out, m as usize * w)]
                }
                _ => return Ok(None),
            },
        };
        let validity = self.validity(array)?;
        Ok(Some(DeviceArray {
            data_type: dt.clone(),
            len: m as usize,
            null_count: validity.as_ref().map_or(0, |v| v.1),
            validity: validity.map(|v| v.0),
            buffers,
            children: Vec::new(),
            dictionary: None,
        }))
    }

    /// The array's validity compacted, and its null count (`None` without one, or when no
    /// kept row is null).
    fn validity(&self, array: &DeviceArray) -> Result<Option<(DeviceBuffer, usize)>> {
        let Some(v) = &array.validity else {
            return Ok(None);
        };
        let (words, nulls) = self.bits(v.device_ptr())?;
        Ok((nulls > 0).then_some((words, nulls)))
    }

    /// The kept rows' bits of the bitmap at `src` (`n` bits), and how many of them are 0.
    fn bits(&self, src: u64) -> Result<(DeviceBuffer, usize)> {
        let gpu = self.cx.gpu;
        let words = zeroed(gpu, (self.m as usize).div_ceil(32) * 4)?;
        let zeros = zeroed(gpu, 8)?;
        // SAFETY: `src` holds `n` bits, the mask `n` bytes, `pos` positions below `m`, `words`
        // `m` bits, `zeros` one u64; waited for below (the count is read).
        unsafe {
            COMPACT_BITS.launch_nowait(
                gpu,
                self.cx.module,
                self.cx.grid(),
                FILTER_THREADS,
                (
                    Const::at(src),
                    self.cx.n,
                    Const::at(self.mask.device_ptr()),
                    Const::at(self.pos.device_ptr()),
                    Mut::at(words.device_ptr()),
                    Mut::at(zeros.device_ptr()),
                ),
            )?
        };
        gpu.synchronize_decode()?;
        let z = u64s_from_device(&zeros, 1)?.first().copied().unwrap_or(0);
        Ok((words, z as usize))
    }

    /// A string column's offsets and characters for the kept rows.
    fn strings(&self, array: &DeviceArray, large: bool) -> Result<Vec<(DeviceBuffer, usize)>> {
        let (gpu, module) = (self.cx.gpu, self.cx.module);
        let (n, m) = (self.cx.n, self.m);
        let offsets = array.buffers.first().map_or(0, |b| b.0.device_ptr());
        let chars = array.buffers.get(1).map_or(0, |b| b.0.device_ptr());
        let lengths = gpu.alloc((n as usize) * 8)?;
        // SAFETY: `offsets` holds n + 1 entries, the mask `n` bytes, `lengths` `n` i64; all
        // live until the scan below has waited.
        unsafe {
            KEPT_LENGTHS.launch_nowait(
                gpu,
                module,
                self.cx.grid(),
                FILTER_THREADS,
                (
                    Const::at(offsets),
                    large as i32,
                    n,
                    Const::at(self.mask.device_ptr()),
                    Mut::at(lengths.device_ptr()),
                ),
            )?
        };
        let (starts, total) = self.cx.scan(None, Some(&lengths))?;
        if !large && total > i64::from(i32::MAX) {
            return Err(crate::error::Error::Device {
                device: format!("cuda:{}", gpu.ordinal()),
                reason: format!("{total} bytes of kept strings do not fit 32-bit offsets"),
            });
        }
        let w = if large { 8 } else { 4 };
        let out_off = gpu.alloc((m as usize + 1) * w)?;
        let out_chars = gpu.alloc((total as usize).max(1))?;
        // SAFETY: `starts` holds n + 1 i64, the mask `n` bytes, `pos` positions below `m`,
        // `out_off` m + 1 offsets of `w` bytes; all live until the batch's final wait.
        unsafe {
            COMPACT_OFFSETS.launch_nowait(
                gpu,
                module,
                blocks(n + 1, u64::from(FILTER_THREADS)),
                FILTER_THREADS,
                (
                    Const::at(starts.device_ptr()),
                    n,
                    Const::at(self.mask.device_ptr()),
                    Const::at(self.pos.device_ptr()),
                    m,
                    large as i32,
                    Mut::at(out_off.device_ptr()),
                ),
            )?
        };
        // SAFETY: `offsets`/`chars` are the column's (n + 1 offsets into its characters),
        // `starts` n + 1 i64 with each kept row's start, `out_chars` `total` bytes (the sum of
        // the kept lengths); one warp per row; all live until the batch's final wait.
        unsafe {
            COMPACT_CHARS.launch_nowait(
                gpu,
                module,
                blocks(n * 32, u64::from(FILTER_THREADS)),
                FILTER_THREADS,
                (
                    Const::at(offsets),
                    large as i32,
                    Const::at(chars),
                    n,
                    Const::at(self.mask.device_ptr()),
                    Const::at(starts.device_ptr()),
                    Mut::at(out_chars.device_ptr()),
                ),
            )?
        };
        // `starts` and `lengths` are freed in stream order, after the kernels reading them
        gpu.synchronize_decode()?;
        Ok(vec![
            (out_off, (m as usize + 1) * w),
            (out_chars, total as usize),
        ])
    }

    /// A column the kernels do not compact (lists, maps, dictionaries, views; a struct partly
    /// left out under one of those): filtered on the host and uploaded.
    fn on_host(
        &self,
        field: &FieldRef,
        array: &DeviceArray,
        keep: &[bool],
        host_mask: &mut Option<BooleanArray>,
    ) -> Result<DeviceArray> {
        let mask = match host_mask {
            Some(m) => &*m,
            None => {
                self.cx.gpu.synchronize_decode()?;
                let bytes = self.mask.copy_to_host(0..self.cx.n as usize)?;
                let bits = BooleanBuffer::collect_bool(bytes.len(), |i| bytes[i] != 0);
                &*host_mask.insert(BooleanArray::new(bits, None))
            }
        };
        let host = array.to_host()?;
        let filtered =
            arrow::compute::filter(&host, mask).map_err(|e| crate::error::Error::Device {
                device: format!("cuda:{}", self.cx.gpu.ordinal()),
                reason: format!("filtering column {} on the host: {e}", field.name()),
            })?;
        let pruned = prune_column(field, &filtered, keep).unwrap_or(filtered);
        DeviceArray::upload(self.cx.gpu, pruned.as_ref())
    }
}
