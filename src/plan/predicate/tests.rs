//! The predicate parser, binder and row-group pruning.
use super::*;

fn p(s: &str) -> String {
    parse_predicate(s).unwrap().to_string()
}

#[test]
fn parses_precedence_and_parentheses() {
    assert_eq!(
        p("a > 5 AND b = 'k' OR c < 1.5"),
        "a > 5 AND b = 'k' OR c < 1.5"
    );
    let e = parse_predicate("a > 5 AND b = 'k' OR c < 1.5").unwrap();
    assert!(matches!(e, Predicate::Or(..)), "AND binds tighter: {e:?}");
    let e = parse_predicate("a > 5 AND (b = 'k' OR c < 1.5)").unwrap();
    assert!(matches!(e, Predicate::And(..)), "{e:?}");
    assert_eq!(
        p("a>5 and (b='it''s' or c<>-2e3)"),
        "a > 5 AND (b = 'it''s' OR c != -2000.0)"
    );
    assert_eq!(p("5 < x"), "x > 5");
    assert_eq!(p("`a.b` >= 1 AND s.x = true"), "`a.b` >= 1 AND s.x = true");
    assert_eq!(p("d = '2024-02-29'"), "d = '2024-02-29'");
}

#[test]
fn parses_is_null_in_and_not() {
    assert_eq!(p("x IS NULL"), "x IS NULL");
    assert_eq!(p("x is not null"), "x IS NOT NULL");
    assert_eq!(p("s IN ('a', 'b')"), "s = 'a' OR s = 'b'");
    assert_eq!(p("s not in ('a','b')"), "s != 'a' AND s != 'b'");
    assert_eq!(
        p("y = 1 AND s IN ('a', 'b')"),
        "y = 1 AND (s = 'a' OR s = 'b')"
    );
    assert_eq!(p("NOT x > 5"), "NOT x > 5");
    assert_eq!(p("NOT (x > 5 AND s = 'a')"), "NOT (x > 5 AND s = 'a')");
    assert_eq!(p("NOT NOT x IS NULL"), "NOT NOT x IS NULL");
    assert!(matches!(
        parse_predicate("y = 1 AND s IN (1, 2)").unwrap(),
        Predicate::And(..)
    ));
    for (e, want) in [
        ("x IS 5", "expected NULL"),
        ("s IN 'a'", "expected '(' after IN"),
        ("s IN ('a' 'b')", "expected ',' or ')'"),
        ("s IN ()", "expected a literal"),
        ("NOT", "expected a literal"),
    ] {
        let msg = parse_predicate(e).unwrap_err().to_string();
        assert!(msg.contains(want), "{e:?}: {msg}");
    }
}

#[test]
fn parses_between_like_typed_literals_bare_columns_and_column_pairs() {
    assert_eq!(p("x BETWEEN 1 AND 5"), "x >= 1 AND x <= 5");
    assert_eq!(
        p("x between 1 and 5 and y = 2"),
        "x >= 1 AND x <= 5 AND y = 2"
    );
    assert_eq!(p("x NOT BETWEEN 1 AND 5"), "NOT (x >= 1 AND x <= 5)");
    assert!(matches!(
        parse_predicate("x BETWEEN 1 AND 5 OR y = 2").unwrap(),
        Predicate::Or(..)
    ));
    assert_eq!(p("s LIKE 'ab%'"), "s LIKE 'ab%'");
    assert_eq!(p("s not like '%it''s_'"), "s NOT LIKE '%it''s_'");
    assert_eq!(p("d >= DATE '2024-06-01'"), "d >= DATE '2024-06-01'");
    assert_eq!(
        p("TIMESTAMP '2024-06-01 12:00:00' > ts"),
        "ts < TIMESTAMP '2024-06-01 12:00:00'"
    );
    // `date` alone is a column; before a string, a typed literal
    assert_eq!(p("date > DATE '2024-01-01'"), "date > DATE '2024-01-01'");
    assert_eq!(p("date"), "date = true");
    assert_eq!(p("flag"), "flag = true");
    assert_eq!(p("NOT flag AND x > 1"), "NOT flag = true AND x > 1");
    assert_eq!(p("(flag) OR s.ok"), "flag = true OR s.ok = true");
    assert_eq!(p("a < b"), "a < b");
    assert_eq!(p("a.x = `b c`"), "a.x = `b c`");
    assert!(matches!(
        parse_predicate("a <> b").unwrap(),
        Predicate::CmpColumns { op: CmpOp::Ne, .. }
    ));
    for (e, want) in [
        ("x BETWEEN 1 5", "expected AND between BETWEEN's bounds"),
        ("x BETWEEN 1 AND", "expected a literal"),
        ("s LIKE 5", "expected a 'pattern' after LIKE"),
        ("s LIKE 'a\\'", "ends with the escape character"),
        ("d > INTERVAL '1'", "unknown typed literal INTERVAL"),
        ("flag x", "expected a comparison"),
    ] {
        let msg = parse_predicate(e).unwrap_err().to_string();
        assert!(msg.contains(want), "{e:?}: {msg}");
    }
}

#[test]
fn like_patterns_match_as_sql_reads_them() {
    let m = |pat: &str, s: &str| LikePattern::new(pat).unwrap().matches(s.as_bytes());
    assert!(m("ab%", "abc") && m("ab%", "ab") && !m("ab%", "a"));
    assert!(m("%bc", "abc") && !m("%bc", "abcd"));
    assert!(m("%b%", "abc") && m("%%", "") && !m("%b%", "ac"));
    assert!(m("a_c", "abc") && !m("a_c", "ac") && !m("a_c", "abbc"));
    // `_` is one character, not one byte
    assert!(m("a_c", "aéc") && m("___", "日本語") && !m("____", "日本語"));
    assert!(m("%a%b%c%", "xaxbxcx") && !m("%a%b%c%", "xaxcxbx"));
    assert!(m("%aab", "aaab"), "going back to the last %");
    assert!(m("a\\%b", "a%b") && !m("a\\%b", "axb"));
    assert!(m("a\\_", "a_") && !m("a\\_", "ab"));
    assert!(m("a\\\\", "a\\"));
    assert!(m("", "") && !m("", "a"));
    let pat = LikePattern::new("ab\\%c%d_").unwrap();
    assert_eq!(pat.prefix(), b"ab%c");
    assert_eq!(pat.exact(), None);
    assert_eq!(LikePattern::new("a\\_b").unwrap().exact(), Some(b"a_b".to_vec()));
    assert_eq!(like::prefix_end(b"ab"), Some(b"ac".to_vec()));
    assert_eq!(like::prefix_end(b"a\xff"), Some(b"b".to_vec()));
    assert_eq!(like::prefix_end(b"\xff"), None);
}

#[test]
fn parse_errors_say_where() {
    for (e, want) in [
        ("", "empty expression"),
        ("a >", "expected a literal"),
        ("a 5", "expected a comparison"),
        ("(a > 5", "expected ')'"),
        ("a > 5 b", "unexpected input"),
        ("a > 'x", "unterminated string"),
        ("a ! 3", "expected '!='"),
        ("a > 5 AND", "expected a literal"),
        ("a # 1", "unexpected character '#'"),
        ("a > 1.2.3", "invalid number"),
    ] {
        let msg = parse_predicate(e).unwrap_err().to_string();
        assert!(msg.contains(want), "{e:?}: {msg}");
    }
}

mod stats {
    use super::super::*;
    use parquet::basic::{ColumnOrder, SortOrder};
    use parquet::file::statistics::Statistics;
    use parquet::file::metadata::{ColumnChunkMetaData, FileMetaData, RowGroupMetaData};
    use parquet::schema::parser::parse_message_type;
    use parquet::schema::types::SchemaDescriptor;
    use std::sync::Arc;

    /// One row group of 100 rows with one DOUBLE column `x` and one UTF8 column `s`;
    /// column orders default to type-defined.
    fn md(x: Statistics, s: Statistics, orders: Option<Vec<ColumnOrder>>) -> ParquetMetaData {
        let schema = Arc::new(SchemaDescriptor::new(Arc::new(
            parse_message_type("message m { optional double x; optional binary s (UTF8); }")
                .unwrap(),
        )));
        let cols = vec![
            ColumnChunkMetaData::builder(schema.column(0))
                .set_statistics(x)
                .build()
                .unwrap(),
            ColumnChunkMetaData::builder(schema.column(1))
                .set_statistics(s)
                .build()
                .unwrap(),
        ];
        let rg = RowGroupMetaData::builder(schema.clone())
            .set_num_rows(100)
            .set_column_metadata(cols)
            .build()
            .unwrap();
        let orders = orders.unwrap_or(vec![
            ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::SIGNED),
            ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::UNSIGNED),
        ]);
        let fm = FileMetaData::new(2, 100, None, None, schema, Some(orders));
        ParquetMetaData::new(fm, vec![rg])
    }

    fn pruned(md: &ParquetMetaData, expr: &str) -> bool {
        let p = parse_predicate(expr).unwrap();
        let b = bind(&p, expr, md.file_metadata().schema_descr()).unwrap();
        b.prune_reason(md, 0).is_some()
    }

    fn s(min: &str, max: &str) -> Statistics {
        Statistics::byte_array(Some(min.into()), Some(max.into()), None, Some(0), false)
    }

    #[test]
    fn trusted_statistics_prune() {
        let m = md(
            Statistics::double(Some(1.0), Some(5.0), None, Some(0), false),
            s("b", "d"),
            None,
        );
        assert!(pruned(&m, "x > 5"));
        assert!(!pruned(&m, "x >= 5"));
        assert!(pruned(&m, "s = 'a'"));
        assert!(!pruned(&m, "s = 'c'"));
    }

    #[test]
    fn nan_statistics_keep() {
        let m = md(
            Statistics::double(Some(f64::NAN), Some(5.0), None, Some(0), false),
            s("b", "d"),
            None,
        );
        assert!(!pruned(&m, "x > 5"));
        let m = md(
            Statistics::double(Some(1.0), Some(f64::NAN), None, Some(0), false),
            s("b", "d"),
            None,
        );
        assert!(!pruned(&m, "x < 0"));
    }

    #[test]
    fn truncated_statistics_keep() {
        let t = match s("b", "d") {
            Statistics::ByteArray(v) => Statistics::ByteArray(v.with_max_is_exact(false)),
            _ => unreachable!(),
        };
        let m = md(
            Statistics::double(Some(1.0), Some(5.0), None, Some(0), false),
            t,
            None,
        );
        assert!(!pruned(&m, "s = 'z'"));
    }

    #[test]
    fn legacy_order_keeps_unsigned_columns_only() {
        // Legacy (undefined) column order: strings used signed byte order, so keep;
        // doubles are signed and still prune.
        let m = md(
            Statistics::double(Some(1.0), Some(5.0), None, Some(0), false),
            s("b", "d"),
            Some(vec![ColumnOrder::UNDEFINED, ColumnOrder::UNDEFINED]),
        );
        assert!(!pruned(&m, "s = 'z'"));
        assert!(pruned(&m, "x > 7"));
        let m = md(
            Statistics::double(Some(1.0), Some(5.0), None, Some(0), false),
            Statistics::byte_array(Some("b".into()), Some("d".into()), None, Some(0), true),
            None,
        );
        assert!(
            !pruned(&m, "s = 'z'"),
            "deprecated min/max fields on a string column"
        );
    }

    #[test]
    fn is_null_in_and_not_prune_as_sql_reads_them() {
        let m = md(
            Statistics::double(Some(1.0), Some(5.0), None, Some(0), false),
            s("b", "d"),
            None,
        );
        assert!(pruned(&m, "x IS NULL"), "no null counted");
        assert!(!pruned(&m, "x IS NOT NULL"));
        assert!(pruned(&m, "s IN ('a', 'z')"));
        assert!(!pruned(&m, "s IN ('a', 'c')"));
        assert!(!pruned(&m, "s NOT IN ('b')"));
        assert!(pruned(&m, "NOT s < 'e'"), "s >= 'e' against max 'd'");
        assert!(pruned(&m, "NOT (s < 'e' OR s = 'c')"));
        assert!(
            !pruned(&m, "NOT (s >= 'b' AND x > 0)"),
            "x <= 0 may hold for a NaN"
        );
        // floats: NaN satisfies the negation of every comparison, and min/max leave it out
        assert!(!pruned(&m, "NOT x < 10"));
        assert!(pruned(&m, "x >= 10"));
        assert!(pruned(&m, "NOT NOT x >= 10"));
        // null counts: all null, or unknown
        let m = md(
            Statistics::double(Some(1.0), Some(5.0), None, None, false),
            Statistics::byte_array(None, None, None, Some(100), false),
            None,
        );
        assert!(pruned(&m, "s IS NOT NULL"));
        assert!(!pruned(&m, "s IS NULL"));
        assert!(!pruned(&m, "x IS NULL"), "no null count: keep");
    }

    #[test]
    fn missing_statistics_keep_and_all_null_prunes() {
        let m = md(
            Statistics::double(None, None, None, Some(0), false),
            Statistics::byte_array(None, None, None, Some(100), false),
            None,
        );
        assert!(!pruned(&m, "x = 1"));
        assert!(pruned(&m, "s = 'a'"), "all 100 values null");
        assert!(pruned(&m, "s != 'a'"));
    }
}

#[test]
fn dates() {
    assert_eq!(parse_date("1970-01-01"), Some(0));
    assert_eq!(parse_date("2000-03-01"), Some(11017));
    assert_eq!(parse_date("1969-12-31"), Some(-1));
    assert_eq!(parse_date("2023-02-29"), None);
    assert_eq!(parse_date("2024-02-29"), Some(19782));
    assert_eq!(parse_date("2024-13-01"), None);
    assert_eq!(parse_date("x"), None);
}
