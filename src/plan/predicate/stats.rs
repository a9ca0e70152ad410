//! What statistics prove of a bound predicate: a row group's (or, through [`super::pages`],
//! a page's) min, max and null counts, trusted only where their order is defined and they are
//! exact.

use std::cmp::Ordering;

use parquet::basic::{ColumnOrder, SortOrder};
use parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use parquet::file::statistics::Statistics;

use super::{like, Bound, CmpOp, Kind, Value};

/// The sort order of leaf `leaf`'s statistics, or why none can be trusted.
pub(super) fn order_trusted(
    md: &ParquetMetaData,
    descr: &parquet::schema::types::ColumnDescriptor,
    leaf: usize,
) -> std::result::Result<SortOrder, &'static str> {
    let sort = descr.sort_order();
    if sort == SortOrder::UNDEFINED {
        return Err("no defined sort order");
    }
    match md.file_metadata().column_order(leaf) {
        ColumnOrder::UNKNOWN => Err("unknown column order"),
        ColumnOrder::UNDEFINED if sort != SortOrder::SIGNED => {
            Err("legacy statistics with an undefined order")
        }
        _ => Ok(sort),
    }
}

/// Min and max of a column chunk as comparable values, or why they cannot be trusted.
fn trusted_min_max(
    md: &ParquetMetaData,
    rg: &RowGroupMetaData,
    leaf: usize,
    kind: Kind,
) -> std::result::Result<(Value, Value), &'static str> {
    let cc = rg.column(leaf);
    let stats = cc.statistics().ok_or("no statistics")?;
    if !stats.min_is_exact() || !stats.max_is_exact() {
        return Err("truncated statistics");
    }
    let sort = order_trusted(md, cc.column_descr(), leaf)?;
    if stats.is_min_max_deprecated() && sort != SortOrder::SIGNED {
        return Err("legacy min/max fields with an unsigned order");
    }
    let none = "no min/max";
    let pair = match (stats, kind) {
        (Statistics::Boolean(s), _) => (
            Value::Int(*s.min_opt().ok_or(none)? as i128),
            Value::Int(*s.max_opt().ok_or(none)? as i128),
        ),
        (Statistics::Int32(s), Kind::Unsigned) => (
            Value::Int(*s.min_opt().ok_or(none)? as u32 as i128),
            Value::Int(*s.max_opt().ok_or(none)? as u32 as i128),
        ),
        (Statistics::Int64(s), Kind::Unsigned) => (
            Value::Int(*s.min_opt().ok_or(none)? as u64 as i128),
            Value::Int(*s.max_opt().ok_or(none)? as u64 as i128),
        ),
        (Statistics::Int32(s), _) => (
            Value::Int(*s.min_opt().ok_or(none)? as i128),
            Value::Int(*s.max_opt().ok_or(none)? as i128),
        ),
        (Statistics::Int64(s), _) => (
            Value::Int(*s.min_opt().ok_or(none)? as i128),
            Value::Int(*s.max_opt().ok_or(none)? as i128),
        ),
        (Statistics::Float(s), _) => (
            Value::Float(*s.min_opt().ok_or(none)? as f64),
            Value::Float(*s.max_opt().ok_or(none)? as f64),
        ),
        (Statistics::Double(s), _) => (
            Value::Float(*s.min_opt().ok_or(none)?),
            Value::Float(*s.max_opt().ok_or(none)?),
        ),
        (Statistics::FixedLenByteArray(s), Kind::DecimalBytes) => (
            Value::Int(be_int(s.min_opt().ok_or(none)?.data()).ok_or("a decimal too wide")?),
            Value::Int(be_int(s.max_opt().ok_or(none)?.data()).ok_or("a decimal too wide")?),
        ),
        (Statistics::ByteArray(s), Kind::DecimalBytes) => (
            Value::Int(be_int(s.min_opt().ok_or(none)?.data()).ok_or("a decimal too wide")?),
            Value::Int(be_int(s.max_opt().ok_or(none)?.data()).ok_or("a decimal too wide")?),
        ),
        (Statistics::ByteArray(s), _) => (
            Value::Bytes(s.min_opt().ok_or(none)?.data().to_vec()),
            Value::Bytes(s.max_opt().ok_or(none)?.data().to_vec()),
        ),
        _ => return Err("statistics of an unexpected type"),
    };
    if let (Value::Float(a), Value::Float(b)) = &pair {
        if a.is_nan() || b.is_nan() {
            return Err("NaN in statistics");
        }
    }
    if value_cmp(&pair.0, &pair.1) == Some(Ordering::Greater) {
        return Err("min greater than max");
    }
    Ok(pair)
}

/// A big-endian two's-complement integer of at most 16 bytes (a decimal's statistics).
pub(super) fn be_int(b: &[u8]) -> Option<i128> {
    if b.is_empty() || b.len() > 16 {
        return None;
    }
    let fill = if b[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut buf = [fill; 16];
    buf[16 - b.len()..].copy_from_slice(b);
    Some(i128::from_be_bytes(buf))
}

pub(super) fn value_cmp(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
        (Value::Float(a), Value::Float(b)) => a.partial_cmp(b),
        (Value::Bytes(a), Value::Bytes(b)) => Some(a.as_slice().cmp(b.as_slice())),
        _ => None,
    }
}

fn all_null(rg: &RowGroupMetaData, leaf: usize) -> bool {
    let n = rg
        .column(leaf)
        .statistics()
        .and_then(|s| s.null_count_opt());
    rg.num_rows() > 0 && n == Some(rg.num_rows() as u64)
}

fn show(v: &Value, kind: Kind) -> String {
    match (v, kind) {
        (Value::Int(d), Kind::Date) => format!("day {d}"),
        (Value::Int(i), _) => i.to_string(),
        (Value::Float(f), _) => format!("{f:?}"),
        (Value::Bytes(b), _) => format!("'{}'", String::from_utf8_lossy(b)),
    }
}

/// What some rows' statistics (a row group's, or a page's of each column) say of a leaf: all
/// its values null, and its min and max (or why they cannot be trusted).
/// What statistics say of a leaf's nulls: all rows null, or none.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Nulls {
    pub(super) all: bool,
    pub(super) none: bool,
}

pub(super) type LeafStats = (Nulls, std::result::Result<(Value, Value), &'static str>);

/// `None` when the row group may match; `Some(reason)` when it provably cannot.
pub(super) fn eval(b: &Bound, md: &ParquetMetaData, rg: &RowGroupMetaData) -> Option<String> {
    eval_with(b, &|leaf, kind| {
        let nulls = Nulls {
            all: all_null(rg, leaf),
            none: rg.num_rows() > 0
                && (rg.column(leaf).statistics()).and_then(|s| s.null_count_opt()) == Some(0),
        };
        (nulls, trusted_min_max(md, rg, leaf, kind))
    })
}

/// `None` when rows whose statistics `stats` gives (per leaf and kind) may match; else why
/// they cannot.
pub(super) fn eval_with(b: &Bound, stats: &dyn Fn(usize, Kind) -> LeafStats) -> Option<String> {
    match b {
        Bound::And(x, y) => eval_with(x, stats).or_else(|| eval_with(y, stats)),
        Bound::Or(x, y) => {
            let a = eval_with(x, stats)?;
            let b = eval_with(y, stats)?;
            Some(format!("{a} and {b}"))
        }
        Bound::Never { leaf, text } => {
            let _ = leaf;
            Some(format!("{text}: never true for the column's type"))
        }
        Bound::NotNull { leaf, text } => stats(*leaf, Kind::Bool)
            .0
            .all
            .then(|| format!("{text}: all values are null")),
        Bound::IsNull { leaf, text } => stats(*leaf, Kind::Bool)
            .0
            .none
            .then(|| format!("{text}: no value is null")),
        Bound::Keep { .. } => None,
        Bound::Like {
            leaf,
            text,
            pattern,
            negated,
        } => {
            let (nulls, min_max) = stats(*leaf, Kind::Bytes);
            if nulls.all {
                return Some(format!("{text}: all values are null"));
            }
            let prefix = pattern.prefix();
            if *negated || prefix.is_empty() {
                return None;
            }
            // every match starts with the prefix: it lies in [prefix, the prefix's end)
            let (min, max) = min_max.ok()?;
            let (Value::Bytes(min), Value::Bytes(max)) = (&min, &max) else {
                return None;
            };
            let below = max.as_slice() < prefix.as_slice();
            let above = like::prefix_end(&prefix).is_some_and(|end| min.as_slice() >= end.as_slice());
            (below || above).then(|| {
                format!(
                    "{text}: min {} max {}",
                    show(&Value::Bytes(min.clone()), Kind::Bytes),
                    show(&Value::Bytes(max.clone()), Kind::Bytes)
                )
            })
        }
        Bound::CmpCols {
            left,
            right,
            text,
            kinds,
            op,
            nan_too,
        } => {
            let (ln, lmm) = stats(*left, kinds.0);
            let (rn, rmm) = stats(*right, kinds.1);
            if ln.all || rn.all {
                return Some(format!("{text}: all values of a column are null"));
            }
            if *nan_too {
                return None;
            }
            let ((lmin, lmax), (rmin, rmax)) = (lmm.ok()?, rmm.ok()?);
            use Ordering::*;
            let cannot = match op {
                CmpOp::Lt => value_cmp(&lmin, &rmax)? != Less,
                CmpOp::Le => value_cmp(&lmin, &rmax)? == Greater,
                CmpOp::Gt => value_cmp(&lmax, &rmin)? != Greater,
                CmpOp::Ge => value_cmp(&lmax, &rmin)? == Less,
                CmpOp::Eq => {
                    value_cmp(&lmax, &rmin)? == Less || value_cmp(&lmin, &rmax)? == Greater
                }
                // NaN (left out of min/max) differs from everything: never pruned
                CmpOp::Ne => false,
            };
            cannot.then(|| {
                format!(
                    "{text}: left min {} max {}, right min {} max {}",
                    show(&lmin, kinds.0),
                    show(&lmax, kinds.0),
                    show(&rmin, kinds.1),
                    show(&rmax, kinds.1)
                )
            })
        }
        Bound::Cmp {
            leaf,
            text,
            kind,
            op,
            value,
        } => {
            let (nulls, min_max) = stats(*leaf, *kind);
            if nulls.all {
                return Some(format!("{text}: all values are null"));
            }
            let (min, max) = min_max.ok()?;
            let c_min = value_cmp(&min, value)?;
            let c_max = value_cmp(&max, value)?;
            use Ordering::*;
            let cannot = match op {
                CmpOp::Eq => c_min == Greater || c_max == Less,
                CmpOp::Ne => c_min == Equal && c_max == Equal,
                CmpOp::Lt => c_min != Less,
                CmpOp::Le => c_min == Greater,
                CmpOp::Gt => c_max != Greater,
                CmpOp::Ge => c_max == Less,
            };
            cannot.then(|| {
                format!(
                    "{text}: min {} max {}",
                    show(&min, *kind),
                    show(&max, *kind)
                )
            })
        }
    }
}

