//! Where a scan that could decode on a GPU decodes ([`GpuScanOptions::host_when_faster`]): on
//! the host, through DataFusion's own Parquet reader, where the GPU is not expected to win.
//!
//! The GPU scan wins by moving fewer bytes back over PCIe than it read: its row filter drops
//! rows on the device. Where it drops few, every decoded row crosses PCIe and DataFusion's
//! own reader, decoding on every core while the next operator reads its batches, is as fast
//! or faster (an H100, 16 partitions, 24M lineitem rows: Q1, whose filter keeps 98% of the
//! rows, 0.76-0.87× DataFusion's scan on the GPU; `count(*)` and `LIMIT` are bound by the
//! first batch's latency). So a scan decodes on the host where it runs under a `LIMIT`,
//! applies no filter to the rows (`count(*)` reads no column at all), or keeps more than
//! [`MOST_ROWS`] of them by the
//! statistics of its files: each column's range narrowed by the filters' comparisons with
//! literals, its share of the column's min..max range taken as the rows kept (columns taken as
//! independent; a test the statistics say nothing of, such as `LIKE` or an equality, as
//! [`UNKNOWN_SHARE`]).
//!
//! [`GpuScanOptions::host_when_faster`]: crate::GpuScanOptions::host_when_faster

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::common::{ScalarValue, Statistics};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, Literal};
use datafusion::physical_expr::split_conjunction;
use datafusion::physical_expr::PhysicalExpr;

/// A scan whose filters keep more than this share of the rows decodes on the host.
pub const MOST_ROWS: f64 = 0.6;

/// The share of rows a test the statistics say nothing of is taken to keep.
pub const UNKNOWN_SHARE: f64 = 0.5;

/// Why a scan that could decode on a GPU decodes on the host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HostReason {
    /// It reads no column (`count(*)`).
    NoColumns,
    /// It runs under a `LIMIT`: the first batch's latency is the query's.
    Limit,
    /// No filter applies to its rows on the GPU.
    NoRowFilter,
    /// Its filters keep about this share of the rows.
    MostRowsKept(f64),
}

impl std::fmt::Display for HostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostReason::NoColumns => write!(f, "it reads no column"),
            HostReason::Limit => write!(f, "a LIMIT"),
            HostReason::NoRowFilter => write!(f, "no filter applies to the rows"),
            HostReason::MostRowsKept(s) => {
                write!(f, "its filters keep about {:.0}% of the rows", s * 100.0)
            }
        }
    }
}

/// Whether (and why) the scan of `config`, reading `columns` columns and applying
/// `row_filters` (over the table schema) to the rows on a GPU, decodes on the host instead.
pub fn host_reason(
    config: &FileScanConfig,
    columns: usize,
    row_filters: &[Arc<dyn PhysicalExpr>],
) -> Option<HostReason> {
    reason(config.limit, &config.statistics(), columns, row_filters)
}

/// [`host_reason`] of a scan under `limit`, over a table of statistics `stats`.
fn reason(
    limit: Option<usize>,
    stats: &Statistics,
    columns: usize,
    row_filters: &[Arc<dyn PhysicalExpr>],
) -> Option<HostReason> {
    if row_filters.is_empty() {
        // (with row filters, their columns are read whatever the output's)
        return Some(match columns {
            0 => HostReason::NoColumns,
            _ if limit.is_some() => HostReason::Limit,
            _ => HostReason::NoRowFilter,
        });
    }
    if limit.is_some() {
        return Some(HostReason::Limit);
    }
    let share = kept_share(stats, row_filters);
    (share > MOST_ROWS).then_some(HostReason::MostRowsKept(share))
}

/// The share of rows `filters` keep, estimated from a table's statistics `stats` (its
/// columns' min and max).
pub fn kept_share(stats: &Statistics, filters: &[Arc<dyn PhysicalExpr>]) -> f64 {
    // per column: the range its comparisons keep, as (low, high) over f64
    let mut ranges: HashMap<usize, (f64, f64)> = HashMap::new();
    let mut unknown = 0i32;
    for f in filters {
        for c in split_conjunction(f) {
            match comparison(c) {
                Some((col, op, v)) => {
                    let r = ranges
                        .entry(col)
                        .or_insert((f64::NEG_INFINITY, f64::INFINITY));
                    match op {
                        Operator::Lt | Operator::LtEq => r.1 = r.1.min(v),
                        Operator::Gt | Operator::GtEq => r.0 = r.0.max(v),
                        _ => unknown += 1,
                    }
                }
                None => unknown += 1,
            }
        }
    }
    let mut share = UNKNOWN_SHARE.powi(unknown);
    for (col, (lo, hi)) in ranges {
        let bounds = stats.column_statistics.get(col).and_then(|s| {
            Some((
                number(s.min_value.get_value()?)?,
                number(s.max_value.get_value()?)?,
            ))
        });
        share *= match bounds {
            Some((min, max)) if max > min => {
                ((hi.min(max) - lo.max(min)) / (max - min)).clamp(0.0, 1.0)
            }
            Some((min, _)) => f64::from(u8::from(lo <= min && min <= hi)),
            None => UNKNOWN_SHARE,
        };
    }
    share
}

/// `column op literal` (or `literal op column`, turned around) with a numeric literal: the
/// column's index, the operator as the column sees it, and the literal as a number.
fn comparison(e: &Arc<dyn PhysicalExpr>) -> Option<(usize, Operator, f64)> {
    let b = e.downcast_ref::<BinaryExpr>()?;
    let (l, r) = (b.left(), b.right());
    let col = |e: &Arc<dyn PhysicalExpr>| e.downcast_ref::<Column>().map(|c| c.index());
    let lit =
        |e: &Arc<dyn PhysicalExpr>| e.downcast_ref::<Literal>().and_then(|l| number(l.value()));
    match (col(l), lit(r), lit(l), col(r)) {
        (Some(c), Some(v), ..) => Some((c, *b.op(), v)),
        (_, _, Some(v), Some(c)) => Some((c, b.op().swap()?, v)),
        _ => None,
    }
}

/// A scalar as a number on one scale for every value of its type (dates as days, timestamps
/// in their unit, decimals scaled); `None` for other types and nulls.
fn number(v: &ScalarValue) -> Option<f64> {
    use ScalarValue as S;
    Some(match v {
        S::Int8(Some(x)) => f64::from(*x),
        S::Int16(Some(x)) => f64::from(*x),
        S::Int32(Some(x)) | S::Date32(Some(x)) => f64::from(*x),
        S::Int64(Some(x)) | S::Date64(Some(x)) => *x as f64,
        S::UInt8(Some(x)) => f64::from(*x),
        S::UInt16(Some(x)) => f64::from(*x),
        S::UInt32(Some(x)) => f64::from(*x),
        S::UInt64(Some(x)) => *x as f64,
        S::Float32(Some(x)) => f64::from(*x),
        S::Float64(Some(x)) => *x,
        S::Decimal128(Some(x), _, s) => *x as f64 / 10f64.powi(i32::from(*s)),
        S::Decimal64(Some(x), _, s) => *x as f64 / 10f64.powi(i32::from(*s)),
        S::Decimal32(Some(x), _, s) => f64::from(*x) / 10f64.powi(i32::from(*s)),
        S::TimestampSecond(Some(x), _)
        | S::TimestampMillisecond(Some(x), _)
        | S::TimestampMicrosecond(Some(x), _)
        | S::TimestampNanosecond(Some(x), _) => *x as f64,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::common::stats::Precision;
    use datafusion::common::ColumnStatistics;
    use datafusion::physical_expr::expressions::{binary, col, lit};

    /// lineitem's shipdate (days 8036..10561, 1992-01-02..1998-12-01), discount (0..0.10) and
    /// quantity (1..50), a flag without statistics.
    fn table() -> (Schema, Statistics) {
        let schema = Schema::new(vec![
            Field::new("shipdate", DataType::Date32, false),
            Field::new("discount", DataType::Float64, false),
            Field::new("quantity", DataType::Int64, false),
            Field::new("flag", DataType::Utf8, false),
        ]);
        let range = |a: ScalarValue, b: ScalarValue| ColumnStatistics {
            min_value: Precision::Exact(a),
            max_value: Precision::Exact(b),
            ..ColumnStatistics::new_unknown()
        };
        let stats = Statistics {
            num_rows: Precision::Exact(1000),
            total_byte_size: Precision::Absent,
            column_statistics: vec![
                range(
                    ScalarValue::Date32(Some(8036)),
                    ScalarValue::Date32(Some(10561)),
                ),
                range(
                    ScalarValue::Float64(Some(0.0)),
                    ScalarValue::Float64(Some(0.1)),
                ),
                range(ScalarValue::Int64(Some(1)), ScalarValue::Int64(Some(50))),
                ColumnStatistics::new_unknown(),
            ],
        };
        (schema, stats)
    }

    fn cmp(schema: &Schema, c: &str, op: Operator, v: ScalarValue) -> Arc<dyn PhysicalExpr> {
        binary(col(c, schema).unwrap(), op, lit(v), schema).unwrap()
    }

    #[test]
    fn the_share_kept_follows_the_statistics() {
        let (s, stats) = table();
        let day = |d: i32| ScalarValue::Date32(Some(d));
        // Q1: shipdate <= 1998-09-02 keeps almost every row: the host
        let q1 = [cmp(&s, "shipdate", Operator::LtEq, day(10471))];
        let share = kept_share(&stats, &q1);
        assert!((share - 0.964).abs() < 0.01, "{share}");
        assert_eq!(
            reason(None, &stats, 7, &q1),
            Some(HostReason::MostRowsKept(share))
        );
        // Q6: a year of shipdate, a band of discount, quantity < 24: about 1%, the GPU
        let q6 = [
            cmp(&s, "shipdate", Operator::GtEq, day(8766)),
            cmp(&s, "shipdate", Operator::Lt, day(9131)),
            cmp(
                &s,
                "discount",
                Operator::GtEq,
                ScalarValue::Float64(Some(0.05)),
            ),
            cmp(
                &s,
                "discount",
                Operator::LtEq,
                ScalarValue::Float64(Some(0.07)),
            ),
            cmp(&s, "quantity", Operator::Lt, ScalarValue::Int64(Some(24))),
        ];
        let share = kept_share(&stats, &q6);
        assert!(share > 0.005 && share < 0.02, "{share}");
        assert_eq!(reason(None, &stats, 4, &q6), None);
        // the literal on the left reads the same
        let flipped = [binary(
            lit(day(10471)),
            Operator::GtEq,
            col("shipdate", &s).unwrap(),
            &s,
        )
        .unwrap()];
        assert!((kept_share(&stats, &flipped) - 0.964).abs() < 0.01);
        // a test the statistics say nothing of: half; two of them, a quarter
        let flag = cmp(
            &s,
            "flag",
            Operator::Eq,
            ScalarValue::Utf8(Some("R".into())),
        );
        assert_eq!(kept_share(&stats, std::slice::from_ref(&flag)), 0.5);
        assert_eq!(reason(None, &stats, 1, std::slice::from_ref(&flag)), None);
        // a range outside the column's: nothing kept
        let none = [cmp(
            &s,
            "quantity",
            Operator::Gt,
            ScalarValue::Int64(Some(80)),
        )];
        assert_eq!(kept_share(&stats, &none), 0.0);
        // a LIMIT: the host, whatever the filters; no column and no filter (count(*)): the
        // host; no column read for the output but a filter's (count(*) WHERE …): its share
        assert_eq!(reason(Some(10), &stats, 3, &q6), Some(HostReason::Limit));
        assert_eq!(reason(None, &stats, 0, &[]), Some(HostReason::NoColumns));
        assert_eq!(reason(None, &stats, 0, &q6), None);
        assert_eq!(reason(None, &stats, 3, &[]), Some(HostReason::NoRowFilter));
        // no statistics: each column's range half
        let absent = Statistics::new_unknown(&s);
        assert_eq!(kept_share(&absent, &q1), 0.5);
    }
}
