//! Row filters: a predicate bound to a file's schema in the terms of the decoded values, for
//! testing rows (the reader's exact filter, [`with_row_filter`]) rather than statistics.
//!
//! A [`RowFilter`] is a tree of [`RowTest`]s without `NOT`: negations are pushed down as for
//! pruning (De Morgan, comparisons negated, `IS NULL` ↔ `IS NOT NULL`), which is exact under
//! SQL's three-valued logic because a row is kept only where the whole test is true, and
//! without `NOT` above them an unknown and a false test drop the same rows. A negated float
//! comparison keeps its NaN rows (`NOT x < 5` holds for NaN), marked by `nan_too`. Literals are
//! in the column's terms: timestamps in its unit, decimals unscaled at its scale, dates in
//! days, booleans as 0 and 1; a literal finer than the unit or scale is already the bound that
//! is exact for the values the column can hold.
//!
//! [`with_row_filter`]: crate::ScanBuilder::with_row_filter

use std::cmp::Ordering;

use parquet::schema::types::SchemaDescriptor;

use super::{
    bind_inner, leaves_of, timestamp_unit, Bound, CmpOp, Kind, LikePattern, Predicate, Value,
};
use crate::error::Result;

/// How a column's decoded values compare with a row filter's literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowKind {
    /// Integers, signed or unsigned, compared as numbers.
    Int,
    /// FLOAT and DOUBLE, compared as IEEE 754 does (NaN satisfies no comparison but `!=`;
    /// `-0 = 0`).
    Float,
    /// Strings, by their bytes.
    Bytes,
    /// Booleans, as 0 and 1.
    Bool,
    /// DATE, in days since 1970-01-01.
    Date,
    /// INT64 timestamps, in units of `nanos` nanoseconds.
    Timestamp {
        /// Nanoseconds per unit (1, 1,000 or 1,000,000).
        nanos: i64,
    },
    /// Decimals, unscaled at `scale`.
    Decimal {
        /// The column's scale.
        scale: i8,
    },
}

/// A literal in a column's terms.
#[derive(Debug, Clone, PartialEq)]
pub enum RowValue {
    /// An integer (also dates, timestamps, unscaled decimals, booleans).
    Int(i128),
    /// A float.
    Float(f64),
    /// String bytes.
    Bytes(Vec<u8>),
}

/// One test of a row filter; `leaf` is the leaf column's index in the file's schema.
#[derive(Debug, Clone, PartialEq)]
pub enum RowTest {
    /// `leaf op value`: never true on a null row; also true on a NaN row when `nan_too`.
    Cmp {
        /// The leaf column.
        leaf: usize,
        /// How its values compare.
        kind: RowKind,
        /// The operator.
        op: CmpOp,
        /// The literal.
        value: RowValue,
        /// NaN rows hold too (a negated float comparison).
        nan_too: bool,
    },
    /// `left op right`, two columns: never true where either is null; also true where either
    /// is NaN when `nan_too` (a negated float comparison). Integers compare with floats as
    /// floats.
    CmpColumns {
        /// The left leaf column.
        left: usize,
        /// How its values compare.
        left_kind: RowKind,
        /// The operator.
        op: CmpOp,
        /// The right leaf column.
        right: usize,
        /// How its values compare.
        right_kind: RowKind,
        /// NaN rows hold too.
        nan_too: bool,
    },
    /// `leaf [NOT] LIKE pattern` on a string column: never true on a null row.
    Like {
        /// The leaf column.
        leaf: usize,
        /// The pattern.
        pattern: LikePattern,
        /// `NOT LIKE`.
        negated: bool,
    },
    /// True on no row (`int_col = 2.5`).
    Never {
        /// The leaf column.
        leaf: usize,
    },
    /// True on the rows where `leaf` is not null.
    Valid {
        /// The leaf column.
        leaf: usize,
    },
    /// True on the rows where `leaf` is null.
    Null {
        /// The leaf column.
        leaf: usize,
    },
    /// Both hold.
    And(Box<RowTest>, Box<RowTest>),
    /// Either holds.
    Or(Box<RowTest>, Box<RowTest>),
}

impl CmpOp {
    /// Whether `value op literal` holds, given how the value compares with the literal.
    pub fn holds(self, ord: Ordering) -> bool {
        match self {
            CmpOp::Lt => ord == Ordering::Less,
            CmpOp::Le => ord != Ordering::Greater,
            CmpOp::Gt => ord == Ordering::Greater,
            CmpOp::Ge => ord != Ordering::Less,
            CmpOp::Eq => ord == Ordering::Equal,
            CmpOp::Ne => ord != Ordering::Equal,
        }
    }
}

/// A predicate bound for testing rows: a tree of [`RowTest`]s without `NOT` (negations pushed
/// down, exact under SQL's three-valued logic since a row is kept only where the whole test is
/// true), literals in the column's terms (timestamps in its unit, decimals unscaled at its
/// scale, dates in days, booleans as 0 and 1).
#[derive(Debug, Clone)]
pub struct RowFilter {
    test: RowTest,
    text: String,
    leaves: Vec<usize>,
}

impl RowFilter {
    /// The tests.
    pub fn test(&self) -> &RowTest {
        &self.test
    }

    /// The predicate as text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The leaf columns the tests read, ascending.
    pub fn leaves(&self) -> &[usize] {
        &self.leaves
    }
}

/// Binds `pred` (written as `expr`) to `schema` for testing rows: the same columns, types and
/// literals as for pruning ([`bind`](super::bind)), and the same errors.
pub fn row_filter(pred: &Predicate, expr: &str, schema: &SchemaDescriptor) -> Result<RowFilter> {
    let bound = bind_inner(pred, expr, schema)?;
    let mut leaves = Vec::new();
    leaves_of(&bound, &mut leaves);
    leaves.sort_unstable();
    Ok(RowFilter {
        test: to_test(&bound, schema),
        text: pred.to_string(),
        leaves,
    })
}

fn row_kind(kind: Kind, leaf: usize, schema: &SchemaDescriptor) -> RowKind {
    let col = schema.column(leaf);
    match kind {
        Kind::Signed | Kind::Unsigned => RowKind::Int,
        Kind::Float => RowKind::Float,
        Kind::Bytes => RowKind::Bytes,
        Kind::Bool => RowKind::Bool,
        Kind::Date => RowKind::Date,
        Kind::Timestamp => RowKind::Timestamp {
            nanos: timestamp_unit(&col).0 as i64,
        },
        Kind::Decimal | Kind::DecimalBytes => RowKind::Decimal {
            scale: col.type_scale().clamp(0, i8::MAX as i32) as i8,
        },
    }
}

fn row_value(v: &Value) -> RowValue {
    match v {
        Value::Int(i) => RowValue::Int(*i),
        Value::Float(f) => RowValue::Float(*f),
        Value::Bytes(b) => RowValue::Bytes(b.clone()),
    }
}

fn to_test(b: &Bound, schema: &SchemaDescriptor) -> RowTest {
    match b {
        Bound::Cmp {
            leaf,
            kind,
            op,
            value,
            ..
        } => RowTest::Cmp {
            leaf: *leaf,
            kind: row_kind(*kind, *leaf, schema),
            op: *op,
            value: row_value(value),
            nan_too: false,
        },
        Bound::Keep { leaf, op, value } => RowTest::Cmp {
            leaf: *leaf,
            kind: RowKind::Float,
            op: *op,
            value: row_value(value),
            nan_too: true,
        },
        Bound::CmpCols {
            left,
            right,
            kinds,
            op,
            nan_too,
            ..
        } => RowTest::CmpColumns {
            left: *left,
            left_kind: row_kind(kinds.0, *left, schema),
            op: *op,
            right: *right,
            right_kind: row_kind(kinds.1, *right, schema),
            nan_too: *nan_too,
        },
        Bound::Like {
            leaf,
            pattern,
            negated,
            ..
        } => RowTest::Like {
            leaf: *leaf,
            pattern: pattern.clone(),
            negated: *negated,
        },
        Bound::Never { leaf, .. } => RowTest::Never { leaf: *leaf },
        Bound::NotNull { leaf, .. } => RowTest::Valid { leaf: *leaf },
        Bound::IsNull { leaf, .. } => RowTest::Null { leaf: *leaf },
        Bound::And(x, y) => {
            RowTest::And(Box::new(to_test(x, schema)), Box::new(to_test(y, schema)))
        }
        Bound::Or(x, y) => RowTest::Or(Box::new(to_test(x, schema)), Box::new(to_test(y, schema))),
    }
}
