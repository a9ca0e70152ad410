//! Device kernels over decoded batches that engines push down: partial aggregation (GROUP BY
//! keys, `COUNT`, `SUM`, `MIN`, `MAX`) of a batch in device memory, its groups brought to the
//! host — kilobytes where the rows are gigabytes.
//!
//! An [`Aggregator`] holds a [`GroupBy`] (key columns and aggregates, columns by their index in
//! the batch) and the device hash table it reuses from batch to batch. [`Aggregator::aggregate`]
//! takes one device batch ([`LoadedBatch::as_device`]) and returns its [`Groups`]: one row per
//! distinct key, in no particular order, with each aggregate's partial value. Groups of several
//! batches are not merged here: an engine's final aggregation merges them (as DataFusion's
//! `Final` step merges its `Partial` step's output).
//!
//! What is accepted ([`GroupBy::check`] says why not, before any device work):
//! - keys: integers, dates, times, timestamps, decimals, booleans, strings and binary (offsets
//!   or views) and dictionary-encoded columns (grouped by key, the dictionary's values attached
//!   to the result); a null key is a group of its own, as SQL wants;
//! - `COUNT(*)`, and `COUNT` of any column or [`Expr`];
//! - `SUM` of an integer or `Decimal128` column (up to 28 digits: exact, a 128-bit sum) as
//!   `Decimal128(38, scale)`, or of a float column or an arithmetic [`Expr`] over numeric
//!   columns, computed in doubles (`Float64`);
//! - `MIN` and `MAX` of integers (but `UInt64`), dates, times, timestamps, decimals of up to 18
//!   digits, and floats (ordered as IEEE 754's totalOrder, as arrow-rs orders them), in the
//!   column's type.
//!
//! A group's `SUM`, `MIN` or `MAX` is null where it saw no value. Float sums are added in the
//! order the device's atomics take them: equal to a host sum to rounding, not bit for bit.

#[allow(unsafe_code)] // kernel launches (each with its SAFETY line)
mod aggregate;

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Decimal128Array, Float32Array, Float64Array,
    Int64Array,
};
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Schema};

use crate::array::LoadedBatch;
use crate::device::Location;
use crate::error::{Error, Result};

pub use aggregate::Aggregator;

/// An aggregate's argument: a column, or arithmetic over numeric columns in doubles.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// The batch's column of this index.
    Column(usize),
    /// A constant.
    Literal(f64),
    /// `a + b`.
    Add(Box<Expr>, Box<Expr>),
    /// `a - b`.
    Sub(Box<Expr>, Box<Expr>),
    /// `a * b`.
    Mul(Box<Expr>, Box<Expr>),
    /// `a / b` (IEEE 754: a division by zero is infinite or NaN).
    Div(Box<Expr>, Box<Expr>),
    /// `-a`.
    Neg(Box<Expr>),
}

/// Exact integer arithmetic over integer and decimal columns, in 128 bits (decimals as their
/// unscaled values: the caller aligns scales with [`IntExpr::Scale`]); a result past 128 bits
/// is an error, as DataFusion's checked decimal arithmetic is.
#[derive(Debug, Clone, PartialEq)]
pub enum IntExpr {
    /// The batch's column of this index (an integer or `Decimal128` column).
    Column(usize),
    /// A constant.
    Literal(i64),
    /// `a * 10^n` (n at most 18): a decimal brought to a larger scale.
    Scale(Box<IntExpr>, u32),
    /// `a + b`.
    Add(Box<IntExpr>, Box<IntExpr>),
    /// `a - b`.
    Sub(Box<IntExpr>, Box<IntExpr>),
    /// `a * b`.
    Mul(Box<IntExpr>, Box<IntExpr>),
    /// `-a`.
    Neg(Box<IntExpr>),
}

/// One aggregate function.
#[derive(Debug, Clone, PartialEq)]
pub enum Aggregate {
    /// `COUNT(*)`: the group's rows (`Int64`).
    CountRows,
    /// `COUNT(x)`: the group's rows where `x` is not null (`Int64`).
    Count(Expr),
    /// `SUM(x)`: exact for an integer or decimal column, in doubles otherwise.
    Sum(Expr),
    /// `SUM(x)` in doubles, integers converted (`SUM(CAST(x AS DOUBLE))`, as `AVG` sums).
    SumFloat(Expr),
    /// `SUM(x)` of exact integer arithmetic, as `Decimal128(38, scale)`.
    SumExact(IntExpr, i8),
    /// `MIN(column)`.
    Min(usize),
    /// `MAX(column)`.
    Max(usize),
}

/// What to compute: the key columns and the aggregates.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupBy {
    /// Key columns (indices into the batch); none: one group of every row.
    pub keys: Vec<usize>,
    /// The aggregates, in output order.
    pub aggregates: Vec<Aggregate>,
}

/// One batch's groups on the host: `keys[k]` and `values[a]` each hold one row per group.
#[derive(Debug, Clone)]
pub struct Groups {
    /// The key columns, of the batch's types.
    pub keys: Vec<ArrayRef>,
    /// The aggregates' values ([`GroupBy::output_type`]).
    pub values: Vec<ArrayRef>,
}

impl Groups {
    /// Groups.
    pub fn len(&self) -> usize {
        self.values
            .first()
            .or(self.keys.first())
            .map_or(0, |a| a.len())
    }

    /// Whether there is no group.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The largest decimal precision summed exactly (2^32 values of 28 digits stay within i128).
const SUM_DECIMAL_DIGITS: u8 = 28;

/// The largest decimal precision whose MIN/MAX the device takes (values within 64 bits).
const MINMAX_DECIMAL_DIGITS: u8 = 18;

fn is_float(t: &DataType) -> bool {
    matches!(t, DataType::Float32 | DataType::Float64)
}

/// Types held as integers of 4 or 8 bytes other than plain integers.
fn is_temporal(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Date32
            | DataType::Date64
            | DataType::Time32(_)
            | DataType::Time64(_)
            | DataType::Timestamp(..)
            | DataType::Duration(_)
    )
}

/// Whether a column of type `t` can be a GROUP BY key.
fn key_type_ok(t: &DataType) -> bool {
    match t {
        DataType::Boolean
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Binary
        | DataType::LargeBinary
        | DataType::Utf8View
        | DataType::BinaryView
        | DataType::Decimal128(..) => true,
        DataType::Dictionary(k, _) => DataType::is_integer(k),
        t => DataType::is_integer(t) || is_temporal(t),
    }
}

impl GroupBy {
    /// Why the device cannot compute this over batches of `schema`, if it cannot.
    pub fn check(&self, schema: &Schema) -> std::result::Result<(), String> {
        let field = |i: usize| {
            schema
                .fields()
                .get(i)
                .ok_or_else(|| format!("column {i} is not in a batch of {}", schema.fields().len()))
        };
        for &k in &self.keys {
            let f = field(k)?;
            if !key_type_ok(f.data_type()) {
                return Err(format!(
                    "GROUP BY {} ({}) is not a key type the device groups",
                    f.name(),
                    f.data_type()
                ));
            }
        }
        for a in &self.aggregates {
            match a {
                Aggregate::CountRows => {}
                Aggregate::Count(Expr::Column(c)) => {
                    field(*c)?;
                }
                Aggregate::Count(e) => self.check_expr(e, schema)?,
                Aggregate::Sum(Expr::Column(c)) => {
                    let f = field(*c)?;
                    match f.data_type() {
                        t if DataType::is_integer(t) || is_float(t) => {}
                        DataType::Decimal128(p, _) if *p <= SUM_DECIMAL_DIGITS => {}
                        t => {
                            return Err(format!(
                                "SUM({}) of {t}: the device sums integers, floats and decimals of \
                                 up to {SUM_DECIMAL_DIGITS} digits",
                                f.name()
                            ))
                        }
                    }
                }
                Aggregate::Sum(e) | Aggregate::SumFloat(e) => self.check_expr(e, schema)?,
                Aggregate::SumExact(e, _) => {
                    let (mut depth, mut max) = (0, 0);
                    check_int_expr(e, schema, &mut depth, &mut max)?;
                    stack_fits(max)?;
                }
                Aggregate::Min(c) | Aggregate::Max(c) => {
                    let f = field(*c)?;
                    match f.data_type() {
                        DataType::UInt64 => {
                            return Err(format!("MIN/MAX({}) of UInt64", f.name()))
                        }
                        t if DataType::is_integer(t) || is_float(t) || is_temporal(t) => {}
                        DataType::Decimal128(p, _) if *p <= MINMAX_DECIMAL_DIGITS => {}
                        t => {
                            return Err(format!(
                                "MIN/MAX({}) of {t} is not computed on the device",
                                f.name()
                            ))
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn check_expr(&self, e: &Expr, schema: &Schema) -> std::result::Result<(), String> {
        let (mut depth, mut max) = (0, 0);
        check_expr_at(e, schema, &mut depth, &mut max)?;
        stack_fits(max)
    }

    /// The type of aggregate `a`'s values over batches of `schema` (checked).
    pub fn output_type(&self, a: usize, schema: &Schema) -> DataType {
        match &self.aggregates[a] {
            Aggregate::CountRows | Aggregate::Count(_) => DataType::Int64,
            Aggregate::Sum(Expr::Column(c)) => match schema.field(*c).data_type() {
                DataType::Decimal128(_, s) => DataType::Decimal128(38, *s),
                t if DataType::is_integer(t) => DataType::Decimal128(38, 0),
                _ => DataType::Float64,
            },
            Aggregate::Sum(_) | Aggregate::SumFloat(_) => DataType::Float64,
            Aggregate::SumExact(_, scale) => DataType::Decimal128(38, *scale),
            Aggregate::Min(c) | Aggregate::Max(c) => schema.field(*c).data_type().clone(),
        }
    }
}

/// Whether a program needing `max` operands at once fits the device's evaluation stack.
fn stack_fits(max: usize) -> std::result::Result<(), String> {
    if max > aggregate::EXPR_STACK {
        return Err(format!(
            "an expression needing {max} operands at once (the device evaluates {} at most)",
            aggregate::EXPR_STACK
        ));
    }
    Ok(())
}

/// Checks an expression's columns are numeric, and counts its stack depth.
fn check_expr_at(
    e: &Expr,
    schema: &Schema,
    depth: &mut usize,
    max: &mut usize,
) -> std::result::Result<(), String> {
    match e {
        Expr::Column(c) => {
            let f = schema
                .fields()
                .get(*c)
                .ok_or_else(|| format!("column {c} is not in the batch"))?;
            if !(DataType::is_integer(f.data_type()) || is_float(f.data_type())) {
                return Err(format!(
                    "{} ({}) in arithmetic: the device computes over integers and floats",
                    f.name(),
                    f.data_type()
                ));
            }
            *depth += 1;
        }
        Expr::Literal(_) => *depth += 1,
        Expr::Neg(a) => check_expr_at(a, schema, depth, max)?,
        Expr::Add(a, b) | Expr::Sub(a, b) | Expr::Mul(a, b) | Expr::Div(a, b) => {
            check_expr_at(a, schema, depth, max)?;
            check_expr_at(b, schema, depth, max)?;
            *depth -= 1;
        }
    }
    *max = (*max).max(*depth);
    Ok(())
}

/// Checks an integer expression's columns are integers or decimals, and counts its stack depth.
fn check_int_expr(
    e: &IntExpr,
    schema: &Schema,
    depth: &mut usize,
    max: &mut usize,
) -> std::result::Result<(), String> {
    match e {
        IntExpr::Column(c) => {
            let f = schema
                .fields()
                .get(*c)
                .ok_or_else(|| format!("column {c} is not in a batch of {}", schema.fields().len()))?;
            if !(DataType::is_integer(f.data_type()) || matches!(f.data_type(), DataType::Decimal128(..))) {
                return Err(format!(
                    "{} ({}) in exact arithmetic: the device computes over integers and decimals",
                    f.name(),
                    f.data_type()
                ));
            }
            *depth += 1;
        }
        IntExpr::Literal(_) => *depth += 1,
        IntExpr::Scale(a, n) => {
            if *n > 18 {
                return Err(format!("a scale of 10^{n} (at most 10^18)"));
            }
            check_int_expr(a, schema, depth, max)?
        }
        IntExpr::Neg(a) => check_int_expr(a, schema, depth, max)?,
        IntExpr::Add(a, b) | IntExpr::Sub(a, b) | IntExpr::Mul(a, b) => {
            check_int_expr(a, schema, depth, max)?;
            check_int_expr(b, schema, depth, max)?;
            *depth -= 1;
        }
    }
    *max = (*max).max(*depth);
    Ok(())
}

/// The ordinal of the device holding `batch`, or an error naming its file.
fn device_of(batch: &LoadedBatch) -> Result<usize> {
    match batch.location() {
        Location::Cuda(n) => Ok(n),
        Location::Host => Err(Error::Device {
            device: "host".into(),
            reason: format!(
                "{}: a batch in host memory cannot be aggregated on a device",
                batch.file().display()
            ),
        }),
    }
}

/// The validity of `seen` (a byte per group), None where every group saw a value.
fn nulls_of(seen: &[u8]) -> Option<NullBuffer> {
    let n = NullBuffer::from(seen.iter().map(|&b| b != 0).collect::<Vec<_>>());
    (n.null_count() > 0).then_some(n)
}

/// MIN/MAX results (64-bit words from the device) in the column's type.
fn minmax_array(words: &[i64], seen: &[u8], t: &DataType) -> Result<ArrayRef> {
    let nulls = nulls_of(seen);
    if matches!(t, DataType::Float32 | DataType::Float64) {
        // back from the total-order integer
        let f = words
            .iter()
            .map(|&w| f64::from_bits((if w < 0 { w ^ i64::MAX } else { w }) as u64));
        let a: ArrayRef = if *t == DataType::Float32 {
            Arc::new(Float32Array::new(f.map(|x| x as f32).collect(), nulls))
        } else {
            Arc::new(Float64Array::new(f.collect(), nulls))
        };
        return Ok(a);
    }
    // integers, dates, times, timestamps, durations and decimals: each word's low bytes as
    // wide as the type's values (a decimal's sign-extended to its 16)
    let width = t.primitive_width().unwrap_or(8);
    let bytes: Vec<u8> = words
        .iter()
        .flat_map(|&w| (w as i128).to_le_bytes().into_iter().take(width))
        .collect();
    fixed_array(t, words.len(), bytes, nulls, None)
        .map_err(|e| aggregate::device_error(0, format!("MIN/MAX of {t}: {e}")))
}

/// An array of `t` over `len` values of `bytes` (fixed width, or dictionary keys with
/// `dictionary` as their values).
fn fixed_array(
    t: &DataType,
    len: usize,
    bytes: Vec<u8>,
    nulls: Option<NullBuffer>,
    dictionary: Option<ArrayRef>,
) -> arrow::error::Result<ArrayRef> {
    let mut data = arrow::array::ArrayData::builder(t.clone())
        .len(len)
        .add_buffer(Buffer::from(bytes))
        .nulls(nulls);
    if let Some(d) = dictionary {
        data = data.child_data(vec![d.to_data()]);
    }
    Ok(arrow::array::make_array(data.build()?))
}

/// SUM results of integers or decimals (128-bit, two words each) as `Decimal128(38, scale)`.
fn decimal_sums(words: &[u64], seen: &[u8], scale: i8) -> Result<ArrayRef> {
    let v: Vec<i128> = words
        .chunks_exact(2)
        .map(|w| (w[0] as u128 | (w[1] as u128) << 64) as i128)
        .collect();
    Ok(Arc::new(
        Decimal128Array::new(v.into(), nulls_of(seen))
            .with_precision_and_scale(38, scale)
            .map_err(|e| aggregate::device_error(0, format!("a SUM's result: {e}")))?,
    ))
}

/// COUNT results.
fn counts(words: &[u64]) -> ArrayRef {
    Arc::new(Int64Array::from(
        words.iter().map(|&w| w as i64).collect::<Vec<_>>(),
    ))
}

/// Float SUM results.
fn float_sums(words: &[u64], seen: &[u8]) -> ArrayRef {
    Arc::new(Float64Array::new(
        words.iter().map(|&w| f64::from_bits(w)).collect::<Vec<_>>().into(),
        nulls_of(seen),
    ))
}

/// A key column of `t` from the device's gathered bytes: fixed-width values (`width` each),
/// booleans (a byte each) or strings (`offsets` and `chars`), and a validity byte per group.
fn key_array(
    t: &DataType,
    groups: usize,
    fixed: &[u8],
    valid: &[u8],
    strings: Option<(Vec<i64>, Vec<u8>)>,
    dictionary: Option<ArrayRef>,
) -> Result<ArrayRef> {
    let nulls = nulls_of(valid);
    let bad = |e: arrow::error::ArrowError| aggregate::device_error(0, format!("a {t} key: {e}"));
    let a: ArrayRef = match (t, strings) {
        (DataType::Boolean, _) => Arc::new(BooleanArray::new(
            fixed.iter().map(|&b| b != 0).collect::<Vec<_>>().into(),
            nulls,
        )),
        (DataType::Dictionary(..), _) => {
            let values = dictionary.ok_or_else(|| {
                aggregate::device_error(0, "a dictionary key without its dictionary".into())
            })?;
            fixed_array(t, groups, fixed.to_vec(), nulls, Some(values)).map_err(bad)?
        }
        (_, Some((offsets, chars))) => {
            let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
            let text = matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
            let large: ArrayRef = if text {
                Arc::new(
                    arrow::array::LargeStringArray::try_new(offsets, Buffer::from(chars), nulls)
                        .map_err(bad)?,
                )
            } else {
                Arc::new(
                    arrow::array::LargeBinaryArray::try_new(offsets, Buffer::from(chars), nulls)
                        .map_err(bad)?,
                )
            };
            arrow::compute::cast(&large, t).map_err(bad)?
        }
        (t, None) => fixed_array(t, groups, fixed.to_vec(), nulls, None).map_err(bad)?,
    };
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Date32Array, Int32Array, StringArray};

    /// The host side of the groups: keys of every type from the device's gathered bytes, and
    /// the aggregates' words in their output types.
    #[test]
    fn groups_come_back_in_the_batch_types() {
        let valid = [1u8, 0, 1];
        let strings = || Some((vec![0i64, 2, 2, 5], b"abxyz".to_vec()));
        for t in [
            DataType::Utf8,
            DataType::LargeUtf8,
            DataType::Utf8View,
            DataType::Binary,
            DataType::LargeBinary,
            DataType::BinaryView,
        ] {
            let a = key_array(&t, 3, &[], &valid, strings(), None).unwrap();
            assert_eq!(a.data_type(), &t);
            let s = arrow::compute::cast(&a, &DataType::Utf8).unwrap();
            let s = s.as_any().downcast_ref::<StringArray>().unwrap();
            assert_eq!(
                s.iter().collect::<Vec<_>>(),
                [Some("ab"), None, Some("xyz")],
                "{t}"
            );
        }
        let ints: Vec<u8> = [7i32, 0, -3].iter().flat_map(|v| v.to_le_bytes()).collect();
        let a = key_array(&DataType::Date32, 3, &ints, &valid, None, None).unwrap();
        assert_eq!(
            a.as_any().downcast_ref::<Date32Array>().unwrap(),
            &Date32Array::from(vec![Some(7), None, Some(-3)])
        );
        let a = key_array(&DataType::Boolean, 3, &[1, 0, 0], &[1, 1, 1], None, None).unwrap();
        assert_eq!(
            a.as_any().downcast_ref::<BooleanArray>().unwrap(),
            &BooleanArray::from(vec![true, false, false])
        );
        let dict_t = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        let values: ArrayRef = Arc::new(StringArray::from(vec!["x", "y"]));
        let keys: Vec<u8> = [1i32, 0, 1].iter().flat_map(|v| v.to_le_bytes()).collect();
        let a = key_array(&dict_t, 3, &keys, &valid, None, Some(values)).unwrap();
        let plain = arrow::compute::cast(&a, &DataType::Utf8).unwrap();
        assert_eq!(
            plain.as_any().downcast_ref::<StringArray>().unwrap(),
            &StringArray::from(vec![Some("y"), None, Some("y")])
        );
        let dec: Vec<u8> = [5i128, -12].iter().flat_map(|v| v.to_le_bytes()).collect();
        let a = key_array(&DataType::Decimal128(15, 2), 2, &dec, &[1, 1], None, None).unwrap();
        assert_eq!(a.data_type(), &DataType::Decimal128(15, 2));
        // sums: 128-bit words, null where nothing was seen
        let big = -(1i128 << 90) + 3;
        let words = [big as u64, (big >> 64) as u64, 9, 0];
        let s = decimal_sums(&words, &[1, 0], 2).unwrap();
        let s = s.as_any().downcast_ref::<Decimal128Array>().unwrap();
        assert_eq!(s.value(0), big);
        assert!(s.is_null(1));
        assert_eq!(s.data_type(), &DataType::Decimal128(38, 2));
        // MIN/MAX words back to the column's type, floats from their total-order integers
        let m = minmax_array(&[-4, 9], &[1, 1], &DataType::Int32).unwrap();
        assert_eq!(
            m.as_any().downcast_ref::<Int32Array>().unwrap(),
            &Int32Array::from(vec![-4, 9])
        );
        let order = |x: f64| {
            let b = x.to_bits() as i64;
            if b < 0 {
                b ^ i64::MAX
            } else {
                b
            }
        };
        let m = minmax_array(&[order(-0.0), order(2.5)], &[1, 0], &DataType::Float64).unwrap();
        let m = m.as_any().downcast_ref::<Float64Array>().unwrap();
        assert_eq!(m.value(0).to_bits(), (-0.0f64).to_bits());
        assert!(m.is_null(1));
    }

    #[test]
    fn what_the_device_computes_is_checked_first() {
        let schema = Schema::new(vec![
            arrow::datatypes::Field::new("k", DataType::Utf8View, true),
            arrow::datatypes::Field::new("d", DataType::Decimal128(38, 2), true),
            arrow::datatypes::Field::new("f", DataType::Float64, true),
            arrow::datatypes::Field::new("u", DataType::UInt64, true),
            arrow::datatypes::Field::new(
                "l",
                DataType::List(Arc::new(arrow::datatypes::Field::new("x", DataType::Int32, true))),
                true,
            ),
        ]);
        let ok = GroupBy {
            keys: vec![0],
            aggregates: vec![
                Aggregate::CountRows,
                Aggregate::Sum(Expr::Column(2)),
                Aggregate::Min(2),
            ],
        };
        assert_eq!(ok.check(&schema), Ok(()));
        assert_eq!(ok.output_type(1, &schema), DataType::Float64);
        for (keys, aggregates, why) in [
            (vec![4], vec![], "key type"),
            (vec![], vec![Aggregate::Sum(Expr::Column(1))], "28 digits"),
            (vec![], vec![Aggregate::Max(3)], "UInt64"),
            (vec![], vec![Aggregate::Sum(Expr::Column(9))], "not in a batch"),
            (
                vec![],
                vec![Aggregate::SumFloat(Expr::Mul(
                    Box::new(Expr::Column(1)),
                    Box::new(Expr::Literal(2.0)),
                ))],
                "arithmetic",
            ),
        ] {
            let g = GroupBy { keys, aggregates };
            let e = g.check(&schema).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }
}
