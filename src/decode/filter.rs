//! The exact row filter on decoded batches ([`with_row_filter`]): which rows a
//! [`RowFilter`] keeps, and the batch cut down to them, without the columns that were read only
//! for the filter. This is the host side, over arrow-rs arrays; the device side
//! (`gpu::filter`) runs the same tests and compaction as kernels, and falls back to these
//! functions for the arrays it does not compact itself.
//!
//! Columns are found by their position among the load's leaf columns: a filter's leaf is flat
//! (no list above it), so it is a top-level column or a field of structs; a struct that is
//! null makes its fields null for the filter, as in SQL.
//!
//! [`with_row_filter`]: crate::ScanBuilder::with_row_filter

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, RecordBatch, RecordBatchOptions, StructArray,
};
use arrow::buffer::{BooleanBuffer, NullBuffer};
use arrow::datatypes::{
    i256, DataType, Date32Type, Date64Type, Decimal128Type, Decimal256Type, Decimal32Type,
    Decimal64Type, DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType,
    DurationSecondType, Field, FieldRef, Fields, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Int8Type, Schema, SchemaRef, Time32MillisecondType, Time32SecondType,
    Time64MicrosecondType, Time64NanosecondType, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};

use crate::error::{Error, Result};
use crate::plan::predicate::{CmpOp, LikePattern, RowFilter, RowKind, RowTest, RowValue};

/// A row filter bound to a load's columns: each test's leaf as its position among the load's
/// leaves, and which leaves the caller asked for (the others were read for the filter only).
#[derive(Debug, Clone)]
pub(crate) struct BatchFilter {
    path: PathBuf,
    /// The tests, `leaf` as a position among the loaded leaves.
    test: RowTest,
    text: String,
    /// Per loaded leaf, in order: whether the output keeps it.
    keep: Vec<bool>,
    /// The schema of the filtered batches.
    out_schema: SchemaRef,
}

/// Leaf columns under a type: 1 for a primitive, the sum over a struct's fields, a list's or
/// map's entries. (arrow-rs's schema has one leaf per Parquet leaf, in the same order.)
pub(crate) fn leaf_count(dt: &DataType) -> usize {
    match dt {
        DataType::Struct(fs) => fs.iter().map(|f| leaf_count(f.data_type())).sum(),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _)
        | DataType::Map(f, _) => leaf_count(f.data_type()),
        _ => 1,
    }
}

/// The child indices from a top-level column down to leaf position `pos` through structs only;
/// `None` when the position is past the fields or under a list or map.
pub(crate) fn locate(fields: &Fields, mut pos: usize) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    let mut fields = fields.clone();
    loop {
        let (i, f) = fields.iter().enumerate().find(|(_, f)| {
            let n = leaf_count(f.data_type());
            if pos < n {
                true
            } else {
                pos -= n;
                false
            }
        })?;
        out.push(i);
        match f.data_type() {
            DataType::Struct(fs) => fields = fs.clone(),
            DataType::List(_)
            | DataType::LargeList(_)
            | DataType::ListView(_)
            | DataType::LargeListView(_)
            | DataType::FixedSizeList(..)
            | DataType::Map(..) => return None,
            _ => return Some(out),
        }
    }
}

/// `fields` without the leaves `keep` (one flag per leaf, in order, consumed) leaves out;
/// structs keep the fields with kept leaves, other fields go whole or not at all.
pub(crate) fn prune_fields(fields: &Fields, keep: &mut impl Iterator<Item = bool>) -> Fields {
    let mut out: Vec<FieldRef> = Vec::new();
    for f in fields.iter() {
        if let Some(f) = prune_field(f, keep) {
            out.push(f);
        }
    }
    out.into()
}

fn prune_field(f: &FieldRef, keep: &mut impl Iterator<Item = bool>) -> Option<FieldRef> {
    match f.data_type() {
        DataType::Struct(fs) => {
            let n = leaf_count(f.data_type());
            let flags: Vec<bool> = keep.take(n).collect();
            if flags.iter().all(|&k| k) {
                return Some(Arc::clone(f));
            }
            if !flags.iter().any(|&k| k) {
                return None;
            }
            let kept = prune_fields(fs, &mut flags.into_iter());
            Some(Arc::new(
                Field::new(f.name(), DataType::Struct(kept), f.is_nullable())
                    .with_metadata(f.metadata().clone()),
            ))
        }
        dt => {
            let n = leaf_count(dt);
            let flags: Vec<bool> = keep.take(n).collect();
            flags.iter().any(|&k| k).then(|| Arc::clone(f))
        }
    }
}

/// `array` (of field `f`) without the leaves `keep` leaves out, as [`prune_fields`] does to
/// the field; `None` when none of its leaves is kept.
fn prune_array(
    f: &FieldRef,
    array: &ArrayRef,
    keep: &mut impl Iterator<Item = bool>,
) -> Option<ArrayRef> {
    let n = leaf_count(f.data_type());
    let flags: Vec<bool> = keep.take(n).collect();
    if flags.iter().all(|&k| k) {
        return Some(Arc::clone(array));
    }
    if !flags.iter().any(|&k| k) {
        return None;
    }
    let (DataType::Struct(fs), Some(s)) = (f.data_type(), array.as_struct_opt()) else {
        return Some(Arc::clone(array));
    };
    let mut flags = flags.into_iter();
    let mut fields = Vec::new();
    let mut arrays = Vec::new();
    for (cf, ca) in fs.iter().zip(s.columns()) {
        let m = leaf_count(cf.data_type());
        let sub: Vec<bool> = flags.by_ref().take(m).collect();
        if let Some(a) = prune_array(cf, ca, &mut sub.clone().into_iter()) {
            fields.push(prune_field(cf, &mut sub.into_iter()).unwrap_or_else(|| Arc::clone(cf)));
            arrays.push(a);
        }
    }
    Some(Arc::new(StructArray::new(
        fields.into(),
        arrays,
        s.nulls().cloned(),
    )))
}

/// `array` (of field `f`) without the leaves `keep` (one flag per leaf of `f`) leaves out;
/// `None` when it keeps none.
pub(crate) fn prune_column(f: &FieldRef, array: &ArrayRef, keep: &[bool]) -> Option<ArrayRef> {
    prune_array(f, array, &mut keep.iter().copied())
}

impl BatchFilter {
    /// `filter` over a load of leaves `loaded` (ascending) decoded into batches of `schema`,
    /// of which the caller asked for `asked` (ascending; the rest were read for the filter).
    pub(crate) fn new(
        path: &Path,
        filter: &RowFilter,
        loaded: &[usize],
        asked: &[usize],
        schema: &SchemaRef,
    ) -> Result<Self> {
        let bad = |reason: String| Error::Filter {
            expr: filter.text().to_string(),
            reason,
        };
        let test = positions(filter.test(), loaded)
            .ok_or_else(|| bad("a column of the filter is not among the loaded columns".into()))?;
        let mut leaves = Vec::new();
        test_leaves(&test, &mut leaves);
        for &p in &leaves {
            if locate(schema.fields(), p).is_none() {
                return Err(bad(format!(
                    "column {p} of the load is not a flat column of its Arrow schema"
                )));
            }
        }
        let keep: Vec<bool> = loaded
            .iter()
            .map(|l| asked.binary_search(l).is_ok())
            .collect();
        let fields = prune_fields(schema.fields(), &mut keep.iter().copied());
        let out_schema = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
        Ok(BatchFilter {
            path: path.to_path_buf(),
            test,
            text: filter.text().to_string(),
            keep,
            out_schema,
        })
    }

    /// The tests, leaves as positions among the loaded leaves.
    pub(crate) fn test(&self) -> &RowTest {
        &self.test
    }

    /// The schema of the filtered batches.
    pub(crate) fn out_schema(&self) -> &SchemaRef {
        &self.out_schema
    }

    /// Per loaded leaf: whether the output keeps it.
    pub(crate) fn kept_leaves(&self) -> &[bool] {
        &self.keep
    }

    /// Whether every loaded column is in the output.
    pub(crate) fn keeps_all(&self) -> bool {
        self.keep.iter().all(|&k| k)
    }

    /// An error about the filter on this file.
    pub(crate) fn error(&self, row_group: Option<usize>, reason: String) -> Error {
        Error::Decode {
            path: self.path.clone(),
            row_group,
            column: None,
            reason: format!("row filter `{}`: {reason}", self.text),
        }
    }

    /// The rows of `batch` the filter keeps.
    pub(crate) fn mask(&self, batch: &RecordBatch) -> Result<BooleanBuffer> {
        eval(&self.test, batch, &|r| self.error(None, r))
    }

    /// `batch` cut down to the rows the filter keeps, without the columns read for the filter
    /// only.
    pub(crate) fn apply(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let mask = self.mask(batch)?;
        let filtered = if mask.count_set_bits() == batch.num_rows() {
            batch.clone()
        } else {
            arrow::compute::filter_record_batch(batch, &BooleanArray::new(mask, None))
                .map_err(|e| self.error(None, format!("filtering the batch: {e}")))?
        };
        self.project(&filtered)
    }

    /// `batch` without the columns read for the filter only.
    pub(crate) fn project(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        if self.keeps_all() {
            return Ok(batch.clone());
        }
        let mut keep = self.keep.iter().copied();
        let cols: Vec<ArrayRef> = batch
            .schema()
            .fields()
            .iter()
            .zip(batch.columns())
            .filter_map(|(f, a)| prune_array(f, a, &mut keep))
            .collect();
        let opts = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        RecordBatch::try_new_with_options(Arc::clone(&self.out_schema), cols, &opts)
            .map_err(|e| self.error(None, format!("leaving out the filter's columns: {e}")))
    }
}

/// `test` with each leaf replaced by its position in `loaded`; `None` if one is missing.
fn positions(test: &RowTest, loaded: &[usize]) -> Option<RowTest> {
    let pos = |leaf: &usize| loaded.binary_search(leaf).ok();
    Some(match test {
        RowTest::Cmp {
            leaf,
            kind,
            op,
            value,
            nan_too,
        } => RowTest::Cmp {
            leaf: pos(leaf)?,
            kind: *kind,
            op: *op,
            value: value.clone(),
            nan_too: *nan_too,
        },
        RowTest::CmpColumns {
            left,
            left_kind,
            op,
            right,
            right_kind,
            nan_too,
        } => RowTest::CmpColumns {
            left: pos(left)?,
            left_kind: *left_kind,
            op: *op,
            right: pos(right)?,
            right_kind: *right_kind,
            nan_too: *nan_too,
        },
        RowTest::Like {
            leaf,
            pattern,
            negated,
        } => RowTest::Like {
            leaf: pos(leaf)?,
            pattern: pattern.clone(),
            negated: *negated,
        },
        RowTest::Never { leaf } => RowTest::Never { leaf: pos(leaf)? },
        RowTest::Valid { leaf } => RowTest::Valid { leaf: pos(leaf)? },
        RowTest::Null { leaf } => RowTest::Null { leaf: pos(leaf)? },
        RowTest::And(a, b) => RowTest::And(
            Box::new(positions(a, loaded)?),
            Box::new(positions(b, loaded)?),
        ),
        RowTest::Or(a, b) => RowTest::Or(
            Box::new(positions(a, loaded)?),
            Box::new(positions(b, loaded)?),
        ),
    })
}

pub(crate) fn test_leaves(test: &RowTest, out: &mut Vec<usize>) {
    match test {
        RowTest::And(a, b) | RowTest::Or(a, b) => {
            test_leaves(a, out);
            test_leaves(b, out);
        }
        RowTest::CmpColumns { left, right, .. } => {
            for leaf in [left, right] {
                if !out.contains(leaf) {
                    out.push(*leaf)
                }
            }
        }
        RowTest::Cmp { leaf, .. }
        | RowTest::Like { leaf, .. }
        | RowTest::Never { leaf }
        | RowTest::Valid { leaf }
        | RowTest::Null { leaf } => {
            if !out.contains(leaf) {
                out.push(*leaf)
            }
        }
    }
}

/// The array at leaf position `pos` of `batch`, and its validity with that of the structs
/// above it.
fn leaf_array(batch: &RecordBatch, pos: usize) -> Option<(ArrayRef, Option<NullBuffer>)> {
    let path = locate(batch.schema().fields(), pos)?;
    let mut array = Arc::clone(batch.columns().get(path[0])?);
    let mut nulls = array.logical_nulls();
    for &i in &path[1..] {
        let child = Arc::clone(array.as_struct_opt()?.columns().get(i)?);
        nulls = NullBuffer::union(nulls.as_ref(), child.logical_nulls().as_ref());
        array = child;
    }
    Some((array, nulls))
}

fn eval(
    test: &RowTest,
    batch: &RecordBatch,
    err: &dyn Fn(String) -> Error,
) -> Result<BooleanBuffer> {
    let n = batch.num_rows();
    let leaf = |pos: usize| {
        leaf_array(batch, pos).ok_or_else(|| err(format!("no flat column at leaf {pos}")))
    };
    let valid = |nulls: &Option<NullBuffer>| match nulls {
        Some(nb) => nb.inner().clone(),
        None => BooleanBuffer::new_set(n),
    };
    Ok(match test {
        RowTest::And(a, b) => &eval(a, batch, err)? & &eval(b, batch, err)?,
        RowTest::Or(a, b) => &eval(a, batch, err)? | &eval(b, batch, err)?,
        RowTest::Never { .. } => BooleanBuffer::new_unset(n),
        RowTest::Valid { leaf: p } => valid(&leaf(*p)?.1),
        RowTest::Null { leaf: p } => !&valid(&leaf(*p)?.1),
        RowTest::Cmp {
            leaf: p,
            kind,
            op,
            value,
            nan_too,
        } => {
            let (array, nulls) = leaf(*p)?;
            let holds = compare(&array, *kind, *op, value, *nan_too).map_err(err)?;
            &holds & &valid(&nulls)
        }
        RowTest::Like {
            leaf: p,
            pattern,
            negated,
        } => {
            let (array, nulls) = leaf(*p)?;
            let holds = like(&array, pattern).map_err(err)?;
            let holds = if *negated { !&holds } else { holds };
            &holds & &valid(&nulls)
        }
        RowTest::CmpColumns {
            left,
            left_kind,
            op,
            right,
            right_kind,
            nan_too,
        } => {
            let (a, an) = leaf(*left)?;
            let (b, bn) = leaf(*right)?;
            let holds = compare_columns((&a, *left_kind), (&b, *right_kind), *op, *nan_too)
                .map_err(err)?;
            &(&holds & &valid(&an)) & &valid(&bn)
        }
    })
}

/// Whether each row matches `pattern` (null rows: anything; the caller masks them).
fn like(array: &ArrayRef, pattern: &LikePattern) -> std::result::Result<BooleanBuffer, String> {
    let n = array.len();
    macro_rules! each {
        ($a:expr) => {{
            let a = $a;
            BooleanBuffer::collect_bool(n, |i| pattern.matches(a.value(i).as_ref()))
        }};
    }
    Ok(match array.data_type() {
        DataType::Utf8 => each!(array.as_string::<i32>()),
        DataType::LargeUtf8 => each!(array.as_string::<i64>()),
        DataType::Utf8View => each!(array.as_string_view()),
        DataType::Binary => each!(array.as_binary::<i32>()),
        DataType::LargeBinary => each!(array.as_binary::<i64>()),
        DataType::BinaryView => each!(array.as_binary_view()),
        DataType::Dictionary(..) => {
            let d = array.as_any_dictionary();
            let values = like(d.values(), pattern)?;
            let keys = d.normalized_keys();
            BooleanBuffer::collect_bool(n, |i| values.value(keys[i]))
        }
        dt => return Err(format!("LIKE on a {dt} column")),
    })
}

/// Whether `a op b` holds per row (null rows: anything; the caller masks them). A float on
/// either side compares both as doubles, IEEE 754's way; other columns in a type both cast
/// to without loss.
fn compare_columns(
    (a, ak): (&ArrayRef, RowKind),
    (b, bk): (&ArrayRef, RowKind),
    op: CmpOp,
    nan_too: bool,
) -> std::result::Result<BooleanBuffer, String> {
    use arrow::compute::kernels::cmp;
    let cast = |x: &ArrayRef, t: &DataType| {
        arrow::compute::cast(x, t).map_err(|e| format!("bringing a column to {t}: {e}"))
    };
    let plain = |x: &ArrayRef, k: RowKind| -> std::result::Result<ArrayRef, String> {
        let x = canonical(x, k)?;
        match x.data_type() {
            DataType::Dictionary(_, v) => cast(&x, &v.clone()),
            _ => Ok(x),
        }
    };
    let (a, b) = (plain(a, ak)?, plain(b, bk)?);
    if ak == RowKind::Float || bk == RowKind::Float {
        let (a, b) = (cast(&a, &DataType::Float64)?, cast(&b, &DataType::Float64)?);
        let (x, y) = (
            a.as_primitive::<Float64Type>().values(),
            b.as_primitive::<Float64Type>().values(),
        );
        return Ok(BooleanBuffer::collect_bool(a.len(), |i| {
            ieee(x[i], op, y[i]) || (nan_too && (x[i].is_nan() || y[i].is_nan()))
        }));
    }
    let common = |t: &DataType, u: &DataType| -> Option<DataType> {
        use DataType::*;
        Some(match (t, u) {
            _ if t == u => t.clone(),
            _ if t.is_integer() && u.is_integer() => Decimal128(38, 0),
            (
                Decimal32(_, s) | Decimal64(_, s) | Decimal128(_, s) | Decimal256(_, s),
                Decimal32(..) | Decimal64(..) | Decimal128(..) | Decimal256(..),
            ) => Decimal256(76, *s),
            (Timestamp(unit, _), Timestamp(..)) => Timestamp(*unit, None),
            (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8 | Utf8View) => LargeUtf8,
            (Binary | LargeBinary | BinaryView, Binary | LargeBinary | BinaryView) => LargeBinary,
            _ => return None,
        })
    };
    let t = common(a.data_type(), b.data_type()).ok_or_else(|| {
        format!(
            "a {} column does not compare with a {} column",
            a.data_type(),
            b.data_type()
        )
    })?;
    let (a, b) = (cast(&a, &t)?, cast(&b, &t)?);
    let holds = match op {
        CmpOp::Lt => cmp::lt(&a, &b),
        CmpOp::Le => cmp::lt_eq(&a, &b),
        CmpOp::Gt => cmp::gt(&a, &b),
        CmpOp::Ge => cmp::gt_eq(&a, &b),
        CmpOp::Eq => cmp::eq(&a, &b),
        CmpOp::Ne => cmp::neq(&a, &b),
    }
    .map_err(|e| format!("comparing the columns: {e}"))?;
    Ok(holds.values().clone())
}

/// Whether `value op literal` holds, per row (null rows: anything; the caller masks them).
fn compare(
    array: &ArrayRef,
    kind: RowKind,
    op: CmpOp,
    lit: &RowValue,
    nan_too: bool,
) -> std::result::Result<BooleanBuffer, String> {
    let n = array.len();
    let array = canonical(array, kind)?;
    let mismatch = || {
        format!(
            "a {} column does not compare with {lit:?}",
            array.data_type()
        )
    };
    macro_rules! ints {
        ($t:ty) => {{
            let RowValue::Int(v) = lit else {
                return Err(mismatch());
            };
            let vals = array.as_primitive::<$t>().values();
            BooleanBuffer::collect_bool(n, |i| op.holds((vals[i] as i128).cmp(v)))
        }};
    }
    macro_rules! floats {
        ($t:ty) => {{
            let v = match lit {
                RowValue::Float(f) => *f,
                RowValue::Int(i) => *i as f64,
                _ => return Err(mismatch()),
            };
            let vals = array.as_primitive::<$t>().values();
            BooleanBuffer::collect_bool(n, |i| {
                let x = vals[i] as f64;
                ieee(x, op, v) || (nan_too && x.is_nan())
            })
        }};
    }
    macro_rules! bytes {
        ($a:expr) => {{
            let RowValue::Bytes(v) = lit else {
                return Err(mismatch());
            };
            let a = $a;
            BooleanBuffer::collect_bool(n, |i| {
                let x: &[u8] = a.value(i).as_ref();
                op.holds(x.cmp(v.as_slice()))
            })
        }};
    }
    Ok(match array.data_type() {
        DataType::Int8 => ints!(Int8Type),
        DataType::Int16 => ints!(Int16Type),
        DataType::Int32 => ints!(Int32Type),
        DataType::Int64 => ints!(Int64Type),
        DataType::UInt8 => ints!(UInt8Type),
        DataType::UInt16 => ints!(UInt16Type),
        DataType::UInt32 => ints!(UInt32Type),
        DataType::UInt64 => ints!(UInt64Type),
        DataType::Date32 => ints!(Date32Type),
        DataType::Date64 => ints!(Date64Type),
        DataType::Time32(TimeUnit::Second) => ints!(Time32SecondType),
        DataType::Time32(TimeUnit::Millisecond) => ints!(Time32MillisecondType),
        DataType::Time64(TimeUnit::Microsecond) => ints!(Time64MicrosecondType),
        DataType::Time64(TimeUnit::Nanosecond) => ints!(Time64NanosecondType),
        DataType::Duration(TimeUnit::Second) => ints!(DurationSecondType),
        DataType::Duration(TimeUnit::Millisecond) => ints!(DurationMillisecondType),
        DataType::Duration(TimeUnit::Microsecond) => ints!(DurationMicrosecondType),
        DataType::Duration(TimeUnit::Nanosecond) => ints!(DurationNanosecondType),
        DataType::Timestamp(TimeUnit::Second, _) => ints!(TimestampSecondType),
        DataType::Timestamp(TimeUnit::Millisecond, _) => ints!(TimestampMillisecondType),
        DataType::Timestamp(TimeUnit::Microsecond, _) => ints!(TimestampMicrosecondType),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => ints!(TimestampNanosecondType),
        DataType::Decimal32(..) => ints!(Decimal32Type),
        DataType::Decimal64(..) => ints!(Decimal64Type),
        DataType::Decimal128(..) => ints!(Decimal128Type),
        DataType::Decimal256(..) => {
            let RowValue::Int(v) = lit else {
                return Err(mismatch());
            };
            let v = i256::from_i128(*v);
            let vals = array.as_primitive::<Decimal256Type>().values();
            BooleanBuffer::collect_bool(n, |i| op.holds(vals[i].cmp(&v)))
        }
        DataType::Float32 => floats!(Float32Type),
        DataType::Float64 => floats!(Float64Type),
        DataType::Boolean => {
            let RowValue::Int(v) = lit else {
                return Err(mismatch());
            };
            let b = array.as_boolean();
            BooleanBuffer::collect_bool(n, |i| op.holds((b.value(i) as i128).cmp(v)))
        }
        DataType::Utf8 => bytes!(array.as_string::<i32>()),
        DataType::LargeUtf8 => bytes!(array.as_string::<i64>()),
        DataType::Utf8View => bytes!(array.as_string_view()),
        DataType::Binary => bytes!(array.as_binary::<i32>()),
        DataType::LargeBinary => bytes!(array.as_binary::<i64>()),
        DataType::BinaryView => bytes!(array.as_binary_view()),
        DataType::Dictionary(..) => {
            let d = array.as_any_dictionary();
            let values = compare(d.values(), kind, op, lit, nan_too)?;
            let keys = d.normalized_keys();
            BooleanBuffer::collect_bool(n, |i| values.value(keys[i]))
        }
        _ => return Err(mismatch()),
    })
}

/// IEEE 754 comparison: NaN satisfies only `!=`.
fn ieee(x: f64, op: CmpOp, v: f64) -> bool {
    match op {
        CmpOp::Lt => x < v,
        CmpOp::Le => x <= v,
        CmpOp::Gt => x > v,
        CmpOp::Ge => x >= v,
        CmpOp::Eq => x == v,
        CmpOp::Ne => x != v,
    }
}

/// `array` in the terms the filter's literal is in: an embedded Arrow schema may have the
/// column read as Date64, in another timestamp unit, or at another decimal scale.
fn canonical(array: &ArrayRef, kind: RowKind) -> std::result::Result<ArrayRef, String> {
    let target = match (kind, array.data_type()) {
        (RowKind::Date, DataType::Date64) => Some(DataType::Date32),
        (RowKind::Timestamp { nanos }, DataType::Timestamp(unit, tz)) => {
            let want = match nanos {
                1 => TimeUnit::Nanosecond,
                1_000 => TimeUnit::Microsecond,
                1_000_000 => TimeUnit::Millisecond,
                _ => TimeUnit::Second,
            };
            (*unit != want).then(|| DataType::Timestamp(want, tz.clone()))
        }
        (
            RowKind::Decimal { scale },
            DataType::Decimal32(_, s)
            | DataType::Decimal64(_, s)
            | DataType::Decimal128(_, s)
            | DataType::Decimal256(_, s),
        ) if *s != scale => Some(DataType::Decimal256(76, scale)),
        _ => None,
    };
    match target {
        None => Ok(Arc::clone(array)),
        Some(t) => arrow::compute::cast(array, &t)
            .map_err(|e| format!("bringing the column to the filter's terms ({t}): {e}")),
    }
}
