//! Pushed filters that cuparquet applies to the rows: a DataFusion physical expression turned
//! into cuparquet's [`Predicate`] where the two agree on every row, so the filter is `Exact`.
//!
//! What converts: comparisons of a column with a literal (either side) or with another column
//! of the same type, `AND`, `OR`, `NOT`, `IS [NOT] NULL`, `IN (…)` / `NOT IN (…)`, `[NOT]
//! LIKE` (case-sensitive, without `\` in the pattern), and a bare boolean column, over
//! integer, boolean, string, date (`Date32`), timestamp and decimal columns (`BETWEEN` arrives
//! as two comparisons). What does not (and stays with DataFusion's `FilterExec`): float columns
//! (DataFusion orders NaN above every number and equal to itself, cuparquet as IEEE 754 does:
//! the rows kept would differ), casts, functions, `ILIKE`, columns of two types, null literals,
//! partition columns.

use std::sync::Arc;

use cuparquet::plan::predicate::{format_decimal, format_timestamp, LikePattern};
use cuparquet::plan::{CmpOp, Literal, Predicate};
use datafusion::arrow::datatypes::{DataType, Schema, TimeUnit};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{
    BinaryExpr, Column, InListExpr, IsNotNullExpr, IsNullExpr, LikeExpr, Literal as LitExpr,
    NotExpr,
};
use datafusion::physical_plan::PhysicalExpr;

/// What a filter keeps, in cuparquet's terms.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RowFilter {
    /// Every row (a filter simplified to `true`).
    All,
    /// No row (`false`, or null).
    Nothing,
    /// The rows where the predicate holds.
    Rows(Predicate),
}

/// `expr` (over `schema`, whose first `file_columns` fields are the file's) as a row filter,
/// or `None` where cuparquet would not keep exactly the rows DataFusion keeps.
pub(crate) fn row_filter(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
    file_columns: usize,
) -> Option<RowFilter> {
    if let Some(l) = expr.downcast_ref::<LitExpr>() {
        return match l.value() {
            ScalarValue::Boolean(Some(true)) => Some(RowFilter::All),
            ScalarValue::Boolean(_) | ScalarValue::Null => Some(RowFilter::Nothing),
            _ => None,
        };
    }
    // AND / OR fold their constants (a filter rewritten for a file that lacks a column holds
    // NULL or false there): in a WHERE, an unknown and a false drop the same rows, so
    // `NULL OR x` keeps what `x` keeps and `NULL AND x` keeps nothing
    if let Some(b) = expr.downcast_ref::<BinaryExpr>() {
        let both = || {
            Some((
                row_filter(b.left(), schema, file_columns)?,
                row_filter(b.right(), schema, file_columns)?,
            ))
        };
        match b.op() {
            Operator::And => {
                return Some(match both()? {
                    (RowFilter::Nothing, _) | (_, RowFilter::Nothing) => RowFilter::Nothing,
                    (RowFilter::All, x) | (x, RowFilter::All) => x,
                    (RowFilter::Rows(a), RowFilter::Rows(b)) => {
                        RowFilter::Rows(Predicate::And(Box::new(a), Box::new(b)))
                    }
                })
            }
            Operator::Or => {
                return Some(match both()? {
                    (RowFilter::All, _) | (_, RowFilter::All) => RowFilter::All,
                    (RowFilter::Nothing, x) | (x, RowFilter::Nothing) => x,
                    (RowFilter::Rows(a), RowFilter::Rows(b)) => {
                        RowFilter::Rows(Predicate::Or(Box::new(a), Box::new(b)))
                    }
                })
            }
            _ => {}
        }
    }
    to_predicate(expr, schema, file_columns).map(RowFilter::Rows)
}

/// `expr` as a predicate, with no constant in it (under `NOT`, an unknown and a false differ).
fn to_predicate(
    expr: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
    file_columns: usize,
) -> Option<Predicate> {
    let conv = |e: &Arc<dyn PhysicalExpr>| to_predicate(e, schema, file_columns);
    if let Some(b) = expr.downcast_ref::<BinaryExpr>() {
        let op = match b.op() {
            Operator::And => {
                return Some(Predicate::And(
                    Box::new(conv(b.left())?),
                    Box::new(conv(b.right())?),
                ))
            }
            Operator::Or => {
                return Some(Predicate::Or(
                    Box::new(conv(b.left())?),
                    Box::new(conv(b.right())?),
                ))
            }
            Operator::Eq => CmpOp::Eq,
            Operator::NotEq => CmpOp::Ne,
            Operator::Lt => CmpOp::Lt,
            Operator::LtEq => CmpOp::Le,
            Operator::Gt => CmpOp::Gt,
            Operator::GtEq => CmpOp::Ge,
            _ => return None,
        };
        let col = |e: &Arc<dyn PhysicalExpr>| column(e, schema, file_columns);
        let (c, lit, op) = match (col(b.left()), col(b.right())) {
            (Some(c), None) => (c, b.right(), op),
            (None, Some(c)) => (c, b.left(), flip(op)),
            (Some(l), Some(r)) => {
                // two columns of one type (DataFusion casts where they differ)
                let same = schema.field(l.1).data_type() == schema.field(r.1).data_type();
                return same.then(|| Predicate::CmpColumns {
                    left: vec![l.0],
                    op,
                    right: vec![r.0],
                });
            }
            _ => return None,
        };
        let value = literal(lit, schema.field(c.1).data_type())?;
        return Some(Predicate::Cmp {
            column: vec![c.0],
            op,
            value,
        });
    }
    if let Some(l) = expr.downcast_ref::<LikeExpr>() {
        let (name, i) = column(l.expr(), schema, file_columns)?;
        let string = matches!(
            schema.field(i).data_type(),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
        );
        let text = match l.pattern().downcast_ref::<LitExpr>()?.value() {
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)) => s.clone(),
            _ => return None,
        };
        // `\` escapes in cuparquet's patterns; leave any pattern with one to DataFusion
        if !string || l.case_insensitive() || text.contains('\\') {
            return None;
        }
        return Some(Predicate::Like {
            column: vec![name],
            pattern: LikePattern::new(&text).ok()?,
            negated: l.negated(),
        });
    }
    if let Some(n) = expr.downcast_ref::<NotExpr>() {
        return Some(Predicate::Not(Box::new(conv(n.arg())?)));
    }
    if let Some(n) = expr.downcast_ref::<IsNullExpr>() {
        let (name, _) = column(n.arg(), schema, file_columns)?;
        return Some(Predicate::IsNull {
            column: vec![name],
            negated: false,
        });
    }
    if let Some(n) = expr.downcast_ref::<IsNotNullExpr>() {
        let (name, _) = column(n.arg(), schema, file_columns)?;
        return Some(Predicate::IsNull {
            column: vec![name],
            negated: true,
        });
    }
    if let Some(l) = expr.downcast_ref::<InListExpr>() {
        let (name, i) = column(l.expr(), schema, file_columns)?;
        let dt = schema.field(i).data_type();
        let (op, join): (CmpOp, fn(Predicate, Predicate) -> Predicate) = if l.negated() {
            (CmpOp::Ne, |a, b| Predicate::And(Box::new(a), Box::new(b)))
        } else {
            (CmpOp::Eq, |a, b| Predicate::Or(Box::new(a), Box::new(b)))
        };
        let mut out: Option<Predicate> = None;
        for v in l.list() {
            let p = Predicate::Cmp {
                column: vec![name.clone()],
                op,
                value: literal(v, dt)?,
            };
            out = Some(match out {
                None => p,
                Some(acc) => join(acc, p),
            });
        }
        return out;
    }
    // a bare boolean column
    let (name, i) = column(expr, schema, file_columns)?;
    (schema.field(i).data_type() == &DataType::Boolean).then(|| Predicate::Cmp {
        column: vec![name],
        op: CmpOp::Eq,
        value: Literal::Bool(true),
    })
}

fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
        op => op,
    }
}

/// A file column of a type whose comparisons agree: its name and index.
fn column(
    e: &Arc<dyn PhysicalExpr>,
    schema: &Schema,
    file_columns: usize,
) -> Option<(String, usize)> {
    let c = e.downcast_ref::<Column>()?;
    let i = c.index();
    if i >= file_columns || schema.fields().get(i)?.name() != c.name() {
        return None;
    }
    let ok = matches!(
        schema.field(i).data_type(),
        DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64
            | DataType::Boolean
            | DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Date32
            | DataType::Timestamp(..)
            | DataType::Decimal32(..)
            | DataType::Decimal64(..)
            | DataType::Decimal128(..)
            | DataType::Decimal256(..)
    );
    ok.then(|| (c.name().to_string(), i))
}

/// A literal of the column's own type (DataFusion coerces them) in the predicate language:
/// numbers and strings as they are, dates as days, timestamps as ISO text (the instant, in any
/// unit), decimals as exact decimal text.
fn literal(e: &Arc<dyn PhysicalExpr>, column: &DataType) -> Option<Literal> {
    let v = e.downcast_ref::<LitExpr>()?.value();
    let int = |i: Option<i128>| i.map(Literal::Int);
    // ISO text without a zone: cuparquet reads it as the instant itself for columns adjusted
    // to UTC and as the wall-clock value for local ones, which is what the column's raw values
    // are in both
    let ts = |v: Option<i64>, unit: TimeUnit| {
        let digits = match unit {
            TimeUnit::Second => 0,
            TimeUnit::Millisecond => 3,
            TimeUnit::Microsecond => 6,
            TimeUnit::Nanosecond => 9,
        };
        v.map(|v| Literal::Str(format_timestamp(v, digits, false)))
    };
    let decimal = |v: i128, scale: i8| Literal::Str(format_decimal(v, i32::from(scale)));
    let same = |dt: DataType| &dt == column;
    match v {
        ScalarValue::Int8(i) if same(DataType::Int8) => int(i.map(i128::from)),
        ScalarValue::Int16(i) if same(DataType::Int16) => int(i.map(i128::from)),
        ScalarValue::Int32(i) if same(DataType::Int32) => int(i.map(i128::from)),
        ScalarValue::Int64(i) if same(DataType::Int64) => int(i.map(i128::from)),
        ScalarValue::UInt8(i) if same(DataType::UInt8) => int(i.map(i128::from)),
        ScalarValue::UInt16(i) if same(DataType::UInt16) => int(i.map(i128::from)),
        ScalarValue::UInt32(i) if same(DataType::UInt32) => int(i.map(i128::from)),
        ScalarValue::UInt64(i) if same(DataType::UInt64) => int(i.map(i128::from)),
        ScalarValue::Boolean(b) if same(DataType::Boolean) => b.map(Literal::Bool),
        ScalarValue::Utf8(s) | ScalarValue::LargeUtf8(s) | ScalarValue::Utf8View(s)
            if matches!(
                column,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) =>
        {
            s.clone().map(Literal::Str)
        }
        ScalarValue::Date32(d) if same(DataType::Date32) => int(d.map(i128::from)),
        ScalarValue::TimestampSecond(v, _) if matches!(column, DataType::Timestamp(..)) => {
            ts(*v, TimeUnit::Second)
        }
        ScalarValue::TimestampMillisecond(v, _) if matches!(column, DataType::Timestamp(..)) => {
            ts(*v, TimeUnit::Millisecond)
        }
        ScalarValue::TimestampMicrosecond(v, _) if matches!(column, DataType::Timestamp(..)) => {
            ts(*v, TimeUnit::Microsecond)
        }
        ScalarValue::TimestampNanosecond(v, _) if matches!(column, DataType::Timestamp(..)) => {
            ts(*v, TimeUnit::Nanosecond)
        }
        ScalarValue::Decimal32(v, _, s) => v.map(|v| decimal(i128::from(v), *s)),
        ScalarValue::Decimal64(v, _, s) => v.map(|v| decimal(i128::from(v), *s)),
        ScalarValue::Decimal128(v, _, s) => v.map(|v| decimal(v, *s)),
        _ => None,
    }
    .filter(|_| {
        // a decimal literal only against a decimal column, and no other mix
        !matches!(
            v,
            ScalarValue::Decimal32(..) | ScalarValue::Decimal64(..) | ScalarValue::Decimal128(..)
        ) || matches!(
            column,
            DataType::Decimal32(..)
                | DataType::Decimal64(..)
                | DataType::Decimal128(..)
                | DataType::Decimal256(..)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::Field;

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("k", DataType::Int64, true),
            Field::new("s", DataType::Utf8, true),
            Field::new("f", DataType::Float64, true),
            Field::new("d", DataType::Decimal128(15, 2), true),
            // a partition column, after the file's
            Field::new("p", DataType::Int64, true),
        ])
    }

    fn col(name: &str, i: usize) -> Arc<dyn PhysicalExpr> {
        Arc::new(Column::new(name, i))
    }

    fn lit(v: ScalarValue) -> Arc<dyn PhysicalExpr> {
        Arc::new(LitExpr::new(v))
    }

    fn bin(
        l: Arc<dyn PhysicalExpr>,
        op: Operator,
        r: Arc<dyn PhysicalExpr>,
    ) -> Arc<dyn PhysicalExpr> {
        Arc::new(BinaryExpr::new(l, op, r))
    }

    #[test]
    fn what_converts_and_what_stays_with_datafusion() {
        let s = schema();
        let conv = |e: &Arc<dyn PhysicalExpr>| row_filter(e, &s, 4);
        let k_gt_5 = bin(col("k", 0), Operator::Gt, lit(ScalarValue::Int64(Some(5))));
        let s_eq = bin(
            lit(ScalarValue::Utf8(Some("x".into()))),
            Operator::Eq,
            col("s", 1),
        );
        let p = conv(&bin(Arc::clone(&k_gt_5), Operator::And, s_eq)).unwrap();
        let RowFilter::Rows(p) = p else {
            panic!("{p:?}")
        };
        assert_eq!(p.to_string(), "k > 5 AND s = 'x'");
        // a string column the table holds as views, its literals coerced to views
        let views = Schema::new(vec![Field::new("v", DataType::Utf8View, true)]);
        let v_eq = bin(
            col("v", 0),
            Operator::Eq,
            lit(ScalarValue::Utf8View(Some("MAIL".into()))),
        );
        let Some(RowFilter::Rows(p)) = row_filter(&v_eq, &views, 1) else {
            panic!("a view column's comparison stays with DataFusion")
        };
        assert_eq!(p.to_string(), "v = 'MAIL'");
        let d = bin(
            col("d", 3),
            Operator::LtEq,
            lit(ScalarValue::Decimal128(Some(-5), 15, 2)),
        );
        assert_eq!(
            conv(&d),
            Some(RowFilter::Rows(Predicate::Cmp {
                column: vec!["d".into()],
                op: CmpOp::Le,
                value: Literal::Str("-0.05".into()),
            }))
        );
        // constants fold as a WHERE reads them
        let null_or = bin(
            lit(ScalarValue::Boolean(None)),
            Operator::Or,
            Arc::clone(&k_gt_5),
        );
        assert!(matches!(conv(&null_or), Some(RowFilter::Rows(_))));
        let null_and = bin(
            lit(ScalarValue::Boolean(None)),
            Operator::And,
            Arc::clone(&k_gt_5),
        );
        assert_eq!(conv(&null_and), Some(RowFilter::Nothing));
        assert_eq!(
            conv(&lit(ScalarValue::Boolean(Some(true)))),
            Some(RowFilter::All)
        );
        // floats (NaN orders differently), partition columns, column pairs and casts do not
        let f = bin(
            col("f", 2),
            Operator::Lt,
            lit(ScalarValue::Float64(Some(1.0))),
        );
        assert_eq!(conv(&f), None);
        let part = bin(col("p", 4), Operator::Eq, lit(ScalarValue::Int64(Some(1))));
        assert_eq!(conv(&part), None);
        assert_eq!(conv(&bin(col("k", 0), Operator::Lt, col("p", 4))), None);
        // two file columns of one type convert; of two types (or floats) they do not
        let Some(RowFilter::Rows(p)) = conv(&bin(col("k", 0), Operator::Lt, col("k", 0))) else {
            panic!("a column pair stays with DataFusion")
        };
        assert_eq!(p.to_string(), "k < k");
        assert_eq!(conv(&bin(col("k", 0), Operator::Lt, col("d", 3))), None);
        assert_eq!(conv(&bin(col("f", 2), Operator::Lt, col("f", 2))), None);
        // LIKE, case-sensitive and without escapes
        let like = |negated: bool, ci: bool, pat: &str| {
            let e: Arc<dyn PhysicalExpr> = Arc::new(LikeExpr::new(
                negated,
                ci,
                col("s", 1),
                lit(ScalarValue::Utf8(Some(pat.into()))),
            ));
            conv(&e).map(|f| match f {
                RowFilter::Rows(p) => p.to_string(),
                f => format!("{f:?}"),
            })
        };
        assert_eq!(like(false, false, "ab%"), Some("s LIKE 'ab%'".into()));
        assert_eq!(like(true, false, "%x_"), Some("s NOT LIKE '%x_'".into()));
        assert_eq!(like(false, true, "ab%"), None);
        assert_eq!(like(false, false, "a\\%"), None);
        // a literal of another type than the column's
        let mixed = bin(col("k", 0), Operator::Eq, lit(ScalarValue::Int32(Some(1))));
        assert_eq!(conv(&mixed), None);
        // a NOT above a constant is not folded
        let not_null = Arc::new(NotExpr::new(null_and)) as Arc<dyn PhysicalExpr>;
        assert_eq!(conv(&not_null), None);
    }

    #[test]
    fn literals_as_text() {
        let dec = |v: i128, s: i8| {
            let e = lit(ScalarValue::Decimal128(Some(v), 15, s));
            literal(&e, &DataType::Decimal128(15, s))
        };
        assert_eq!(dec(1234, 2), Some(Literal::Str("12.34".into())));
        assert_eq!(dec(-5, 2), Some(Literal::Str("-0.05".into())));
        let ts = |v: i64| {
            let e = lit(ScalarValue::TimestampMillisecond(Some(v), None));
            literal(&e, &DataType::Timestamp(TimeUnit::Millisecond, None))
        };
        assert_eq!(ts(-1), Some(Literal::Str("1969-12-31T23:59:59.999".into())));
        // 1995-03-15T12:34:56.5
        let v = (9204 * 86_400 + 12 * 3600 + 34 * 60 + 56) * 1000 + 500;
        assert_eq!(ts(v), Some(Literal::Str("1995-03-15T12:34:56.500".into())));
    }
}
