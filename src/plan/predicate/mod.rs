//! Row-group pruning predicates: `col <op> literal`, `col <op> col`, `col IS [NOT] NULL`,
//! `col [NOT] IN (…)`, `col [NOT] BETWEEN a AND b`, `col [NOT] LIKE 'pattern'`, a bare boolean
//! column, joined by `AND` / `OR`, negated by `NOT`, with parentheses.
//!
//! Given to [`with_filter`](crate::ScanBuilder::with_filter), a predicate **prunes row
//! groups; it does not filter rows**. A row group is skipped only when its statistics prove
//! that no row in it can satisfy the predicate; the rows of the row groups that are kept are
//! all returned, matching or not. Given to
//! [`with_row_filter`](crate::ScanBuilder::with_row_filter), it prunes the same way and then
//! keeps only the rows where it is true ([`RowFilter`]: the same predicate bound for testing
//! rows).
//!
//! Grammar (keywords case-insensitive, `AND` binds tighter than `OR`):
//!
//! ```text
//! expr    := and ( OR and )*
//! and     := atom ( AND atom )*
//! atom    := NOT atom | '(' expr ')' | column op literal | literal op column
//!          | column op column | column
//!          | column IS [NOT] NULL | column [NOT] IN '(' literal ( ',' literal )* ')'
//!          | column [NOT] BETWEEN literal AND literal | column [NOT] LIKE 'pattern'
//! op      := '<' | '<=' | '>' | '>=' | '=' | '==' | '!=' | '<>'
//! column  := name ( '.' name )*        name: [A-Za-z_][A-Za-z0-9_]* or `any text`
//! literal := integer | float | 'string' ('' escapes a quote) | true | false
//!          | DATE 'YYYY-MM-DD' | TIMESTAMP 'YYYY-MM-DD[ HH:MM[:SS[.fraction]]][Z|±HH:MM]'
//! ```
//!
//! A bare column is `column = true` (a boolean column; `NOT flag` is `flag = false` for its
//! non-null rows). `x BETWEEN a AND b` is `x >= a AND x <= b`. `LIKE` takes a string column:
//! `%` matches any run of characters, `_` one character, `\` makes the next character literal
//! ([`LikePattern`]); a pattern with a literal prefix prunes by it (`s LIKE 'ab%'` keeps the
//! row groups whose range meets `['ab', 'ac')`), `NOT LIKE` prunes only all-null row groups.
//! Two columns compare when they are of the same kind (timestamps in the same unit, decimals
//! at the same scale) or both numbers (integers and floats compare as doubles); a row group is
//! pruned when the two columns' ranges rule the comparison out.
//!
//! `x IN (a, b)` is `x = a OR x = b`; `x NOT IN (a, b)` is `x != a AND x != b`. `NOT` follows
//! SQL: a comparison with NULL is not true, nor is its negation, so `NOT x < 5` prunes as
//! `x >= 5` — except on float columns, where NaN (left out of min/max) satisfies the
//! negation of every comparison: there `NOT` of a comparison prunes nothing. `IS NULL` prunes
//! a row group whose statistics count no null; `IS NOT NULL` one whose values are all null.
//!
//! Dates are written `DATE 'YYYY-MM-DD'` or as strings, `'YYYY-MM-DD'`, and compared against
//! DATE columns (a `TIMESTAMP` literal against a DATE column compares with the date's
//! midnight; a `DATE` against a TIMESTAMP column is its midnight).
//! Timestamps (INT64 TIMESTAMP columns of any unit) are written `TIMESTAMP '…'` or as strings,
//! `'YYYY-MM-DD[THH:MM[:SS[.fraction]]][Z|±HH:MM]'` (a space for the `T` too); a zone is accepted only for columns
//! adjusted to UTC (the literal is converted to UTC), and a local-time column compares with
//! the wall-clock time as written. A number compares with the raw value in the column's
//! unit. Decimals (INT32, INT64, FIXED_LEN_BYTE_ARRAY or BYTE_ARRAY) compare exactly at the
//! column's scale, with a number or a quoted number. A literal finer than the unit or scale
//! is a bound: `x < 1.005` on a scale-2 column prunes as `x <= 1.00`, and `x = 1.005` is never
//! true. INT96 timestamps cannot be filtered (their statistics have no defined order).
//!
//! Statistics are used only where they are trustworthy: a row group is kept when its column
//! has no statistics, no min or max, truncated (inexact) min or max, a NaN min or max, an
//! unknown column order, or legacy min/max fields for a column whose order is not signed.
//! Comparisons with NULL are never true, so a row group whose column is all null is pruned by
//! any comparison on it. Float comparisons follow IEEE 754: NaN satisfies none of them (the
//! Parquet format leaves NaN out of min/max for that reason).

use std::fmt;

use parquet::basic::{ConvertedType, LogicalType, Type as PhysicalType};
use parquet::file::metadata::ParquetMetaData;
use parquet::schema::types::SchemaDescriptor;

use crate::error::{Error, Result};
use crate::plan::projection::resolve_leaves;

/// Comparison operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum CmpOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `=`
    Eq,
    /// `!=`
    Ne,
}

impl CmpOp {
    fn flip(self) -> Self {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            op => op,
        }
    }
    /// The operator true exactly where `self` is false, for non-null, non-NaN values.
    fn negate(self) -> Self {
        match self {
            CmpOp::Lt => CmpOp::Ge,
            CmpOp::Le => CmpOp::Gt,
            CmpOp::Gt => CmpOp::Le,
            CmpOp::Ge => CmpOp::Lt,
            CmpOp::Eq => CmpOp::Ne,
            CmpOp::Ne => CmpOp::Eq,
        }
    }
    fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "=",
            CmpOp::Ne => "!=",
        }
    }
}

/// A literal as written.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Literal {
    /// An integer.
    Int(i128),
    /// A number with a fraction or exponent.
    Float(f64),
    /// A quoted string.
    Str(String),
    /// `true` / `false`.
    Bool(bool),
    /// `DATE 'YYYY-MM-DD'`: the text between the quotes.
    Date(String),
    /// `TIMESTAMP 'YYYY-MM-DD[ HH:MM[:SS[.fff]]][Z|±HH:MM]'`: the text between the quotes.
    Timestamp(String),
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Literal::Int(v) => write!(f, "{v}"),
            Literal::Float(v) => write!(f, "{v:?}"),
            Literal::Str(s) => write!(f, "'{}'", s.replace('\'', "''")),
            Literal::Bool(b) => write!(f, "{b}"),
            Literal::Date(s) => write!(f, "DATE '{}'", s.replace('\'', "''")),
            Literal::Timestamp(s) => write!(f, "TIMESTAMP '{}'", s.replace('\'', "''")),
        }
    }
}

/// A parsed predicate, not yet bound to a schema.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Predicate {
    /// `column op literal`
    Cmp {
        /// Column path segments.
        column: Vec<String>,
        /// Operator.
        op: CmpOp,
        /// Literal.
        value: Literal,
    },
    /// `column IS NULL`, or `IS NOT NULL` when `negated`.
    IsNull {
        /// Column path segments.
        column: Vec<String>,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// `column op column`: both values non-null and the comparison true.
    CmpColumns {
        /// The left column's path segments.
        left: Vec<String>,
        /// Operator.
        op: CmpOp,
        /// The right column's path segments.
        right: Vec<String>,
    },
    /// `column [NOT] LIKE 'pattern'` on a string column.
    Like {
        /// Column path segments.
        column: Vec<String>,
        /// The pattern.
        pattern: LikePattern,
        /// `NOT LIKE`.
        negated: bool,
    },
    /// Both hold.
    And(Box<Predicate>, Box<Predicate>),
    /// Either holds.
    Or(Box<Predicate>, Box<Predicate>),
    /// Does not hold (SQL: not true where the predicate is NULL either).
    Not(Box<Predicate>),
}

/// A column path as the predicate language writes it (names with other characters quoted).
pub(crate) fn fmt_column(column: &[String]) -> String {
    column
        .iter()
        .map(|s| {
            if !s.is_empty()
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !s.starts_with(|c: char| c.is_ascii_digit())
            {
                s.clone()
            } else {
                format!("`{s}`")
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Predicate::Cmp { column, op, value } => {
                write!(f, "{} {} {value}", fmt_column(column), op.symbol())
            }
            Predicate::And(a, b) => {
                let wrap = |p: &Predicate| match p {
                    Predicate::Or(..) => format!("({p})"),
                    _ => p.to_string(),
                };
                write!(f, "{} AND {}", wrap(a), wrap(b))
            }
            Predicate::Or(a, b) => write!(f, "{a} OR {b}"),
            Predicate::IsNull { column, negated } => write!(
                f,
                "{} IS {}NULL",
                fmt_column(column),
                if *negated { "NOT " } else { "" }
            ),
            Predicate::CmpColumns { left, op, right } => write!(
                f,
                "{} {} {}",
                fmt_column(left),
                op.symbol(),
                fmt_column(right)
            ),
            Predicate::Like {
                column,
                pattern,
                negated,
            } => write!(
                f,
                "{} {}LIKE '{}'",
                fmt_column(column),
                if *negated { "NOT " } else { "" },
                pattern.text().replace('\'', "''")
            ),
            Predicate::Not(p) => match **p {
                Predicate::Cmp { .. }
                | Predicate::CmpColumns { .. }
                | Predicate::Like { .. }
                | Predicate::IsNull { .. }
                | Predicate::Not(_) => {
                    write!(f, "NOT {p}")
                }
                _ => write!(f, "NOT ({p})"),
            },
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Binding and evaluation

/// How a column's statistics are compared.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Signed,
    Unsigned,
    Float,
    Bytes,
    Bool,
    Date,
    /// INT64 timestamps (compared as signed integers in the column's unit).
    Timestamp,
    /// Decimals stored as INT32/INT64 (compared as signed integers at the column's scale).
    Decimal,
    /// Decimals stored as big-endian two's-complement bytes (FIXED_LEN_BYTE_ARRAY,
    /// BYTE_ARRAY): statistics decoded to integers.
    DecimalBytes,
}

/// A literal converted to the column's domain.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Int(i128),
    Float(f64),
    Bytes(Vec<u8>),
}

#[derive(Debug, Clone)]
enum Bound {
    Cmp {
        leaf: usize,
        text: String,
        kind: Kind,
        op: CmpOp,
        value: Value,
    },
    /// Cannot be true for any row (e.g. `int_col = 2.5`).
    Never {
        leaf: usize,
        text: String,
    },
    /// True for every non-null row (e.g. `int_col != 2.5`, `IS NOT NULL`).
    NotNull {
        leaf: usize,
        text: String,
    },
    /// True for the null rows (`IS NULL`).
    IsNull {
        leaf: usize,
        text: String,
    },
    /// Float `leaf op value`, or NaN: prunes nothing (a negated comparison on floats: NaN,
    /// left out of min/max, satisfies it).
    Keep {
        leaf: usize,
        op: CmpOp,
        value: Value,
    },
    /// `left op right`, two columns of comparable kinds; `nan_too`: a negated float
    /// comparison, true on NaN rows too (prunes nothing but all-null row groups).
    CmpCols {
        left: usize,
        right: usize,
        text: String,
        kinds: (Kind, Kind),
        op: CmpOp,
        nan_too: bool,
    },
    /// `leaf [NOT] LIKE pattern` (a pattern with a wildcard).
    Like {
        leaf: usize,
        text: String,
        pattern: LikePattern,
        negated: bool,
    },
    And(Box<Bound>, Box<Bound>),
    Or(Box<Bound>, Box<Bound>),
}

/// A predicate bound to a file's schema, ready to test row groups.
#[derive(Debug, Clone)]
pub struct BoundPredicate {
    bound: Bound,
    text: String,
}

impl BoundPredicate {
    /// The predicate as text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// `None` when row group `rg` may hold matching rows; otherwise why it cannot.
    pub fn prune_reason(&self, md: &ParquetMetaData, rg: usize) -> Option<String> {
        eval(&self.bound, md, md.row_group(rg))
    }
}

/// Nanoseconds per unit of a timestamp column, and whether it is adjusted to UTC (legacy
/// converted types are).
fn timestamp_unit(col: &parquet::schema::types::ColumnDescriptor) -> (i128, bool) {
    use parquet::basic::TimeUnit;
    match col.logical_type_ref() {
        Some(LogicalType::Timestamp(t)) => (
            match t.unit {
                TimeUnit::MILLIS => 1_000_000,
                TimeUnit::MICROS => 1_000,
                TimeUnit::NANOS => 1,
            },
            t.is_adjusted_to_u_t_c,
        ),
        _ if col.converted_type() == ConvertedType::TIMESTAMP_MILLIS => (1_000_000, true),
        _ => (1_000, true),
    }
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    // Howard Hinnant's algorithm: days since 1970-01-01 of a proleptic Gregorian date.
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn parse_date(s: &str) -> Option<i64> {
    let mut it = s.trim().splitn(3, '-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: u32 = it.next()?.parse().ok()?;
    let d: u32 = it.next()?.parse().ok()?;
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let dim = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&m) || d == 0 || d > dim[m as usize - 1] {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

/// Binds `pred` to the schema: resolves columns and converts literals.
pub fn bind(pred: &Predicate, expr: &str, schema: &SchemaDescriptor) -> Result<BoundPredicate> {
    Ok(BoundPredicate {
        bound: bind_inner(pred, expr, schema)?,
        text: pred.to_string(),
    })
}

/// The leaf `column` names, and its name as written: an error unless it is one flat
/// (unrepeated) primitive column.
fn flat_leaf(column: &[String], expr: &str, schema: &SchemaDescriptor) -> Result<(usize, String)> {
    let ferr = |reason: String| Error::Filter {
        expr: expr.to_string(),
        reason,
    };
    let name = fmt_column(column);
    let leaves =
        resolve_leaves(schema, column).ok_or_else(|| ferr(format!("unknown column '{name}'")))?;
    let [leaf] = leaves[..] else {
        return Err(ferr(format!(
            "column '{name}' is not a primitive column (it has {} leaves)",
            leaves.len()
        )));
    };
    if schema.column(leaf).max_rep_level() > 0 {
        return Err(ferr(format!(
            "column '{name}' is repeated (inside a list or map): filters take flat columns"
        )));
    }
    Ok((leaf, name))
}

/// `NOT pred` bound: the negation pushed down (De Morgan; comparisons negated, `IS NULL` ↔
/// `IS NOT NULL`). A negated comparison on a float column prunes nothing: NaN satisfies it and
/// min/max leave NaN out.
fn bind_not(pred: &Predicate, expr: &str, schema: &SchemaDescriptor) -> Result<Bound> {
    Ok(match pred {
        Predicate::Not(p) => bind_inner(p, expr, schema)?,
        Predicate::And(a, b) => Bound::Or(
            Box::new(bind_not(a, expr, schema)?),
            Box::new(bind_not(b, expr, schema)?),
        ),
        Predicate::Or(a, b) => Bound::And(
            Box::new(bind_not(a, expr, schema)?),
            Box::new(bind_not(b, expr, schema)?),
        ),
        Predicate::IsNull { column, negated } => bind_inner(
            &Predicate::IsNull {
                column: column.clone(),
                negated: !negated,
            },
            expr,
            schema,
        )?,
        Predicate::Like {
            column,
            pattern,
            negated,
        } => bind_inner(
            &Predicate::Like {
                column: column.clone(),
                pattern: pattern.clone(),
                negated: !negated,
            },
            expr,
            schema,
        )?,
        Predicate::CmpColumns { left, op, right } => {
            match bind_inner(
                &Predicate::CmpColumns {
                    left: left.clone(),
                    op: op.negate(),
                    right: right.clone(),
                },
                expr,
                schema,
            )? {
                Bound::CmpCols {
                    left,
                    right,
                    text,
                    kinds,
                    op,
                    ..
                } => Bound::CmpCols {
                    left,
                    right,
                    text,
                    kinds,
                    op,
                    nan_too: kinds.0 == Kind::Float || kinds.1 == Kind::Float,
                },
                b => b,
            }
        }
        Predicate::Cmp { column, op, value } => {
            let b = bind_inner(
                &Predicate::Cmp {
                    column: column.clone(),
                    op: op.negate(),
                    value: value.clone(),
                },
                expr,
                schema,
            )?;
            match b {
                Bound::Cmp {
                    leaf,
                    kind: Kind::Float,
                    op,
                    value,
                    ..
                } => Bound::Keep { leaf, op, value },
                b => b,
            }
        }
    })
}

/// How leaf `leaf` (written `name`) compares, and its type as text; an error for a type that
/// filters do not support.
fn column_kind(
    leaf: usize,
    name: &str,
    expr: &str,
    schema: &SchemaDescriptor,
) -> Result<(Kind, String)> {
    let ferr = |reason: String| Error::Filter {
        expr: expr.to_string(),
        reason,
    };
    let col = schema.column(leaf);
    let ty = col.physical_type();
    let logical = col.logical_type_ref();
    let conv = col.converted_type();
    let type_name = match logical {
        Some(l) => format!("{ty} ({l:?})"),
        None if conv != ConvertedType::NONE => format!("{ty} ({conv})"),
        None => ty.to_string(),
    };
    let kind = match (ty, logical, conv) {
        (PhysicalType::INT32 | PhysicalType::INT64, Some(LogicalType::Decimal(_)), _)
        | (PhysicalType::INT32 | PhysicalType::INT64, _, ConvertedType::DECIMAL) => {
            Some(Kind::Decimal)
        }
        (
            PhysicalType::FIXED_LEN_BYTE_ARRAY | PhysicalType::BYTE_ARRAY,
            Some(LogicalType::Decimal(_)),
            _,
        )
        | (
            PhysicalType::FIXED_LEN_BYTE_ARRAY | PhysicalType::BYTE_ARRAY,
            _,
            ConvertedType::DECIMAL,
        ) => Some(Kind::DecimalBytes),
        (PhysicalType::INT64, Some(LogicalType::Timestamp(_)), _)
        | (
            PhysicalType::INT64,
            _,
            ConvertedType::TIMESTAMP_MILLIS | ConvertedType::TIMESTAMP_MICROS,
        ) => Some(Kind::Timestamp),
        (PhysicalType::INT96, _, _) => {
            return Err(ferr(format!(
                "column '{name}' is an INT96 timestamp: its statistics have no defined \
                 order, so filters cannot use them"
            )))
        }
        (PhysicalType::INT32, Some(LogicalType::Date), _)
        | (PhysicalType::INT32, _, ConvertedType::DATE) => Some(Kind::Date),
        (PhysicalType::INT32 | PhysicalType::INT64, Some(LogicalType::Integer(int)), _)
            if !int.is_signed =>
        {
            Some(Kind::Unsigned)
        }
        (
            PhysicalType::INT32 | PhysicalType::INT64,
            _,
            ConvertedType::UINT_8
            | ConvertedType::UINT_16
            | ConvertedType::UINT_32
            | ConvertedType::UINT_64,
        ) => Some(Kind::Unsigned),
        (PhysicalType::INT32 | PhysicalType::INT64, _, _) => Some(Kind::Signed),
        (PhysicalType::FLOAT | PhysicalType::DOUBLE, _, _) => Some(Kind::Float),
        (PhysicalType::BOOLEAN, _, _) => Some(Kind::Bool),
        (
            PhysicalType::BYTE_ARRAY,
            Some(LogicalType::String | LogicalType::Enum | LogicalType::Json),
            _,
        )
        | (
            PhysicalType::BYTE_ARRAY,
            _,
            ConvertedType::UTF8 | ConvertedType::ENUM | ConvertedType::JSON,
        ) => Some(Kind::Bytes),
        _ => None,
    };
    match kind {
        Some(kind) => Ok((kind, type_name)),
        None => Err(ferr(format!(
            "column '{name}' has type {type_name}, which filters do not support \
             (supported: integers, floats, booleans, strings, dates, timestamps, decimals)"
        ))),
    }
}

/// Whether columns of kinds `a` and `b` (leaves `la`, `lb`) compare with each other: the same
/// kind (timestamps in the same unit, decimals at the same scale), or integers and floats.
fn kinds_compare(a: Kind, b: Kind, la: usize, lb: usize, schema: &SchemaDescriptor) -> bool {
    let number = |k| matches!(k, Kind::Signed | Kind::Unsigned | Kind::Float);
    match (a, b) {
        _ if number(a) && number(b) => true,
        (Kind::Timestamp, Kind::Timestamp) => {
            timestamp_unit(&schema.column(la)).0 == timestamp_unit(&schema.column(lb)).0
        }
        (Kind::Decimal | Kind::DecimalBytes, Kind::Decimal | Kind::DecimalBytes) => {
            schema.column(la).type_scale() == schema.column(lb).type_scale()
        }
        (a, b) => a == b,
    }
}

fn bind_inner(pred: &Predicate, expr: &str, schema: &SchemaDescriptor) -> Result<Bound> {
    let ferr = |reason: String| Error::Filter {
        expr: expr.to_string(),
        reason,
    };
    match pred {
        Predicate::And(a, b) => Ok(Bound::And(
            Box::new(bind_inner(a, expr, schema)?),
            Box::new(bind_inner(b, expr, schema)?),
        )),
        Predicate::Or(a, b) => Ok(Bound::Or(
            Box::new(bind_inner(a, expr, schema)?),
            Box::new(bind_inner(b, expr, schema)?),
        )),
        Predicate::Not(p) => bind_not(p, expr, schema),
        Predicate::IsNull { column, negated } => {
            let (leaf, name) = flat_leaf(column, expr, schema)?;
            let text = format!("{name} IS {}NULL", if *negated { "NOT " } else { "" });
            Ok(if *negated {
                Bound::NotNull { leaf, text }
            } else {
                Bound::IsNull { leaf, text }
            })
        }
        Predicate::Like {
            column,
            pattern,
            negated,
        } => {
            let (leaf, name) = flat_leaf(column, expr, schema)?;
            let (kind, type_name) = column_kind(leaf, &name, expr, schema)?;
            if kind != Kind::Bytes {
                return Err(ferr(format!(
                    "LIKE takes a string column; '{name}' has type {type_name}"
                )));
            }
            let text = pred.to_string();
            Ok(match pattern.exact() {
                // no wildcard: equality
                Some(value) => Bound::Cmp {
                    leaf,
                    text,
                    kind,
                    op: if *negated { CmpOp::Ne } else { CmpOp::Eq },
                    value: Value::Bytes(value),
                },
                None => Bound::Like {
                    leaf,
                    text,
                    pattern: pattern.clone(),
                    negated: *negated,
                },
            })
        }
        Predicate::CmpColumns { left, op, right } => {
            let (l, lname) = flat_leaf(left, expr, schema)?;
            let (r, rname) = flat_leaf(right, expr, schema)?;
            let (lk, lt) = column_kind(l, &lname, expr, schema)?;
            let (rk, rt) = column_kind(r, &rname, expr, schema)?;
            if !kinds_compare(lk, rk, l, r, schema) {
                return Err(ferr(format!(
                    "cannot compare column '{lname}' of type {lt} with column '{rname}' of \
                     type {rt} (columns compare with columns of the same type, or numbers with \
                     numbers)"
                )));
            }
            Ok(Bound::CmpCols {
                left: l,
                right: r,
                text: pred.to_string(),
                kinds: (lk, rk),
                op: *op,
                nan_too: false,
            })
        }
        Predicate::Cmp { column, op, value } => {
            let (leaf, name) = flat_leaf(column, expr, schema)?;
            let col = schema.column(leaf);
            let text = format!("{name} {} {value}", op.symbol());
            let (kind, type_name) = column_kind(leaf, &name, expr, schema)?;
            let mismatch = || {
                ferr(format!(
                    "cannot compare column '{name}' of type {type_name} with {value}"
                ))
            };
            let mk = |op: CmpOp, value: Value| Bound::Cmp {
                leaf,
                text: text.clone(),
                kind,
                op,
                value,
            };
            // a literal between two values the column can hold (finer than its unit or scale)
            let between = |below: i128, above: i128| match op {
                CmpOp::Lt | CmpOp::Le => mk(CmpOp::Le, Value::Int(below)),
                CmpOp::Gt | CmpOp::Ge => mk(CmpOp::Ge, Value::Int(above)),
                CmpOp::Eq => Bound::Never {
                    leaf,
                    text: text.clone(),
                },
                CmpOp::Ne => Bound::NotNull {
                    leaf,
                    text: text.clone(),
                },
            };
            let of_scaled = |v: literals::Scaled| match v {
                literals::Scaled::Exact(v) => mk(*op, Value::Int(v)),
                literals::Scaled::Between(a, b) => between(a, b),
            };
            Ok(match (kind, value) {
                (Kind::Date, Literal::Date(s)) => {
                    let d = parse_date(s).ok_or_else(|| {
                        ferr(format!("DATE '{s}' is not a date: write DATE 'YYYY-MM-DD'"))
                    })?;
                    mk(*op, Value::Int(d as i128))
                }
                (Kind::Date, Literal::Timestamp(s)) => {
                    // a date is its midnight: compared in days, a time of day between two
                    let (nanos, zoned) = literals::parse_timestamp(s).ok_or_else(|| {
                        ferr(format!(
                            "TIMESTAMP '{s}' is not a timestamp: write TIMESTAMP \
                             'YYYY-MM-DD[ HH:MM[:SS[.fff]]]'"
                        ))
                    })?;
                    if zoned {
                        return Err(ferr(format!(
                            "DATE column '{name}' compares with a timestamp without a time zone; \
                             TIMESTAMP '{s}' names one"
                        )));
                    }
                    of_scaled(literals::scaled(nanos, 86_400_000_000_000))
                }
                (Kind::Timestamp, Literal::Str(s) | Literal::Timestamp(s) | Literal::Date(s)) => {
                    let (unit_nanos, utc) = timestamp_unit(&col);
                    let (nanos, zoned) = literals::parse_timestamp(s).ok_or_else(|| {
                        ferr(format!(
                            "'{s}' is not a timestamp: TIMESTAMP column '{name}' compares with \
                             'YYYY-MM-DD[THH:MM[:SS[.fff]]][Z|±HH:MM]' (or a raw number in its unit)"
                        ))
                    })?;
                    if zoned && !utc {
                        return Err(ferr(format!(
                            "column '{name}' holds local times (not adjusted to UTC): write '{s}' \
                             without a time zone"
                        )));
                    }
                    of_scaled(literals::scaled(nanos, unit_nanos))
                }
                (Kind::Decimal | Kind::DecimalBytes, Literal::Int(v)) => {
                    let scale = col.type_scale().max(0) as u32;
                    of_scaled(literals::at_scale(*v, 0, scale).ok_or_else(mismatch)?)
                }
                (Kind::Decimal | Kind::DecimalBytes, Literal::Float(f)) => {
                    // the shortest text that reads back as the same double: the digits written
                    let (num, digits) =
                        literals::parse_decimal(&format!("{f}")).ok_or_else(mismatch)?;
                    let scale = col.type_scale().max(0) as u32;
                    of_scaled(literals::at_scale(num, digits, scale).ok_or_else(mismatch)?)
                }
                (Kind::Decimal | Kind::DecimalBytes, Literal::Str(s)) => {
                    let (num, digits) = literals::parse_decimal(s).ok_or_else(|| {
                        ferr(format!(
                            "'{s}' is not a decimal: DECIMAL column '{name}' compares with a number"
                        ))
                    })?;
                    let scale = col.type_scale().max(0) as u32;
                    of_scaled(literals::at_scale(num, digits, scale).ok_or_else(mismatch)?)
                }
                (Kind::Signed | Kind::Unsigned | Kind::Date | Kind::Timestamp, Literal::Int(v)) => {
                    mk(*op, Value::Int(*v))
                }
                (Kind::Signed | Kind::Unsigned, Literal::Float(f)) => {
                    if f.fract() == 0.0 {
                        mk(*op, Value::Int(*f as i128))
                    } else {
                        // An integer never equals a fraction; turn the rest into exact bounds.
                        match op {
                            CmpOp::Lt | CmpOp::Le => mk(CmpOp::Le, Value::Int(f.floor() as i128)),
                            CmpOp::Gt | CmpOp::Ge => mk(CmpOp::Ge, Value::Int(f.ceil() as i128)),
                            CmpOp::Eq => Bound::Never { leaf, text },
                            CmpOp::Ne => Bound::NotNull { leaf, text },
                        }
                    }
                }
                (Kind::Date, Literal::Str(s)) => {
                    let d = parse_date(s).ok_or_else(|| {
                        ferr(format!(
                            "'{s}' is not a date: DATE column '{name}' compares with 'YYYY-MM-DD'"
                        ))
                    })?;
                    mk(*op, Value::Int(d as i128))
                }
                (Kind::Float, Literal::Int(v)) => mk(*op, Value::Float(*v as f64)),
                (Kind::Float, Literal::Float(v)) => mk(*op, Value::Float(*v)),
                (Kind::Bytes, Literal::Str(s)) => mk(*op, Value::Bytes(s.as_bytes().to_vec())),
                (Kind::Bool, Literal::Bool(b)) => mk(*op, Value::Int(*b as i128)),
                _ => return Err(mismatch()),
            })
        }
    }
}

/// The leaves a bound predicate reads.
fn leaves_of(b: &Bound, out: &mut Vec<usize>) {
    match b {
        Bound::And(x, y) | Bound::Or(x, y) => {
            leaves_of(x, out);
            leaves_of(y, out);
        }
        Bound::CmpCols { left, right, .. } => {
            for leaf in [left, right] {
                if !out.contains(leaf) {
                    out.push(*leaf)
                }
            }
        }
        Bound::Cmp { leaf, .. }
        | Bound::Like { leaf, .. }
        | Bound::Never { leaf, .. }
        | Bound::NotNull { leaf, .. }
        | Bound::IsNull { leaf, .. }
        | Bound::Keep { leaf, .. } => {
            if !out.contains(leaf) {
                out.push(*leaf)
            }
        }
    }
}

mod bloom;
mod like;
mod literals;
pub mod pages;
mod parse;
mod rows;
mod stats;
use stats::{be_int, eval, eval_with, order_trusted, value_cmp, Nulls};
pub use like::{LikePattern, LikeToken};
pub use literals::{format_date, format_decimal, format_time_of_day, format_timestamp};
pub use parse::parse_predicate;
pub use rows::{row_filter, RowFilter, RowKind, RowTest, RowValue};
#[cfg(test)]
mod tests;
