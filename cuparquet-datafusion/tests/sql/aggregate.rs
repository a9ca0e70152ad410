//! Partial aggregation on the GPU under DataFusion (`DeviceAggregateExec`), against DataFusion's
//! own scan and aggregation.

use super::*;

/// The plan's node names, depth first.
fn node_names(plan: &Arc<dyn ExecutionPlan>) -> Vec<String> {
    let mut out = vec![plan.name().to_string()];
    for c in plan.children() {
        out.extend(node_names(c));
    }
    out
}

/// Whether a plan of these node names aggregates on the device.
fn aggregates_on_device(names: &[String]) -> bool {
    names.iter().any(|n| n == "DeviceAggregateExec")
}

/// Partial aggregations over a device scan run on the GPU (`DeviceAggregateExec` in the plan,
/// the groups equal to DataFusion's own scan and aggregation): keys of strings, dates,
/// integers and booleans, COUNT(*), COUNT, exact decimal SUM and AVG, MIN and MAX of dates,
/// integers and decimals, exact decimal arithmetic (TPC-H Q1), a filter applied by the scan, no
/// key, an empty result; and where the rule declines (an expression as a key or a
/// MAX's argument, a decimal division, the option off). `COUNT(DISTINCT x)` is pushed as the
/// GROUP BY DataFusion plans below it. Without a GPU the scan decodes
/// on the host and the rule leaves every plan as DataFusion made it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn partial_aggregation_runs_on_the_device() {
    let t = &data().snappy;
    let ctx = gpu_ctx(t, GpuScanOptions::default()).await;
    let off = gpu_ctx(
        t,
        GpuScanOptions {
            device_aggregation: false,
            ..GpuScanOptions::default()
        },
    )
    .await;
    let df = df_ctx(t).await;
    for (sql, pushed) in [
        (
            "SELECT l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice),
                avg(l_quantity), avg(l_discount), count(*), count(l_comment), min(l_shipdate),
                max(l_shipdate), min(l_orderkey), max(l_linenumber), min(l_tax), max(l_tax)
               FROM lineitem GROUP BY 1, 2 ORDER BY 1, 2",
            true,
        ),
        (
            "SELECT l_shipmode, l_shipdate < date '1995-01-01' AS early, count(*), sum(l_quantity)
               FROM lineitem WHERE l_discount > 0.05 GROUP BY 1, 2 ORDER BY 1, 2",
            false,
        ),
        (
            "SELECT l_linenumber, l_shipmode, count(*), sum(l_extendedprice), max(l_comment IS NULL)
               FROM lineitem GROUP BY 1, 2 ORDER BY 1, 2",
            false,
        ),
        (
            "SELECT o_orderdate, count(*), sum(o_totalprice) FROM orders
               WHERE o_orderstatus = 'F' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 20",
            true,
        ),
        (
            "SELECT l_suppkey, count(*), min(l_partkey), max(l_partkey), sum(l_linenumber)
               FROM lineitem GROUP BY 1 ORDER BY 1 LIMIT 50",
            true,
        ),
        (
            "SELECT count(*), sum(l_quantity), avg(l_extendedprice), min(l_receiptdate) FROM lineitem
               WHERE l_shipmode = 'AIR'",
            true,
        ),
        (
            "SELECT l_returnflag, count(*), sum(l_quantity) FROM lineitem WHERE l_orderkey < 0
               GROUP BY 1 ORDER BY 1",
            true,
        ),
        // DataFusion's GROUP BY below its DISTINCT count
        (
            "SELECT l_returnflag, count(DISTINCT l_shipmode) FROM lineitem GROUP BY 1 ORDER BY 1",
            true,
        ),
        // decimal arithmetic, exact: TPC-H Q1 and a product of a sum and a difference
        (tpch::Q1, true),
        (
            "SELECT l_returnflag, sum(l_extendedprice * (1 - l_discount) + l_tax * -3),
                sum(l_linenumber * 2 - l_suppkey) FROM lineitem GROUP BY 1 ORDER BY 1",
            true,
        ),
        // a division of decimals: DataFusion's
        (
            "SELECT l_returnflag, sum(l_extendedprice / (1 + l_tax)) FROM lineitem
               GROUP BY 1 ORDER BY 1",
            false,
        ),
    ] {
        let plan = physical(&ctx, sql).await;
        let names = node_names(&plan);
        let device = aggregates_on_device(&names);
        assert_eq!(device, pushed && on_gpu(), "{sql}: {names:?}");
        let (out, _) = executed(&ctx, sql).await;
        let want = text(&run(&df, sql).await);
        assert_eq!(text(&out), want, "{sql}");
        // the option off: DataFusion's aggregation
        let plan = physical(&off, sql).await;
        assert!(
            !aggregates_on_device(&node_names(&plan)),
            "{sql}: the option is off"
        );
        assert_eq!(text(&run(&off, sql).await), want, "{sql}");
        if device {
            let explain = text(&run(&ctx, &format!("EXPLAIN {sql}")).await);
            assert!(explain.contains("DeviceAggregateExec: mode=Partial"), "{explain}");
        }
    }
}

/// The partial aggregation on generated data, against DataFusion's own scan and aggregation:
/// a million groups (every row its own), null keys, a column of nulls only (SUM, MIN, AVG and
/// COUNT of it), decimal sums near the precision's limit (38 digits, both signs), string keys
/// of many distinct values, and an empty input; MIN/MAX of what the device does not compare
/// (38-digit decimals, strings) left to DataFusion. Large results are compared whole through an
/// aggregation of them and in part row by row. Without a GPU the rule declines and the
/// answers are DataFusion's reader's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn generated_groups_equal_datafusion() {
    use datafusion::arrow::array::{ArrayRef, Decimal128Array, Int64Array, StringArray};
    const ROWS: i64 = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let cols: Vec<(&str, ArrayRef)> = vec![
        // a million groups
        ("id", Arc::new(Int64Array::from_iter_values(0..ROWS))),
        // 97 groups and the null one
        (
            "gn",
            Arc::new(Int64Array::from_iter(
                (0..ROWS).map(|i| (i % 7 != 3).then_some(i % 97)),
            )),
        ),
        // 250,000 distinct strings, some null
        (
            "s",
            Arc::new(StringArray::from_iter((0..ROWS).map(|i| {
                (i % 101 != 0).then(|| format!("key-{:06}", (i * 7919) % 250_000))
            }))),
        ),
        (
            "v",
            Arc::new(Int64Array::from_iter_values(
                (0..ROWS).map(|i| (i * 31) % 1000 - 500),
            )),
        ),
        // nothing but nulls
        (
            "x",
            Arc::new(Int64Array::from_iter((0..ROWS).map(|_| None::<i64>))),
        ),
        // decimals of 32 digits, a tenth of them negative: the whole table's sum about
        // 4 * 10^37, near the 38 digits' limit
        (
            "d",
            Arc::new(
                Decimal128Array::from_iter_values((0..ROWS).map(|i| {
                    let big = 10i128.pow(31) * (1 + (i % 9) as i128) + i as i128;
                    if i % 10 == 4 {
                        -big
                    } else {
                        big
                    }
                }))
                .with_precision_and_scale(38, 2)
                .unwrap(),
            ),
        ),
    ];
    let batch =
        RecordBatch::try_from_iter_with_nullable(cols.into_iter().map(|(n, a)| (n, a, true)))
            .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(250_000))
        .set_compression(Compression::SNAPPY)
        .build();
    for part in 0..2 {
        let f = std::fs::File::create(dir.path().join(format!("g{part}.parquet"))).unwrap();
        let mut w = datafusion::parquet::arrow::ArrowWriter::try_new(
            f,
            batch.schema(),
            Some(props.clone()),
        )
        .unwrap();
        let half = batch.num_rows() / 2;
        w.write(&batch.slice(part * half, half)).unwrap();
        w.close().unwrap();
    }
    let path = s(dir.path());
    let (ours, theirs) = table_t(&path).await;
    for (sql, pushed) in [
        // a million groups, summed up (and a few of them as they are)
        (
            "SELECT count(*), sum(c), sum(sv), min(mv), max(mv) FROM
               (SELECT id, count(*) AS c, sum(v) AS sv, max(v) AS mv FROM t GROUP BY id) g",
            true,
        ),
        (
            "SELECT id, count(*), sum(v), sum(d) FROM t GROUP BY id ORDER BY id DESC LIMIT 25",
            true,
        ),
        // null keys, a column of nulls, decimals near the limit
        (
            "SELECT gn, count(*), count(x), sum(x), min(x), avg(x), sum(d), avg(v), max(v)
               FROM t GROUP BY gn ORDER BY gn NULLS FIRST",
            true,
        ),
        // MIN/MAX of 38-digit decimals and of strings: DataFusion's
        (
            "SELECT gn, min(d), max(d), min(s) FROM t GROUP BY gn ORDER BY gn NULLS FIRST",
            false,
        ),
        // strings of many distinct values
        (
            "SELECT count(*), sum(c), sum(sv) FROM
               (SELECT s, count(*) AS c, sum(v) AS sv FROM t GROUP BY s) g",
            true,
        ),
        (
            "SELECT s, count(*), sum(v), max(gn) FROM t GROUP BY s ORDER BY s NULLS FIRST LIMIT 30",
            true,
        ),
        // no key, and nothing in
        ("SELECT count(*), sum(x), sum(d), count(s) FROM t", true),
        (
            "SELECT gn, count(*), sum(d) FROM t WHERE v > 1000 GROUP BY gn ORDER BY gn",
            true,
        ),
    ] {
        let plan = physical(&ours, sql).await;
        let names = node_names(&plan);
        let device = aggregates_on_device(&names);
        assert_eq!(device, pushed && on_gpu(), "{sql}: {names:?}");
        let got = text(&run(&ours, sql).await);
        assert_eq!(got, text(&run(&theirs, sql).await), "{sql}");
    }
}
