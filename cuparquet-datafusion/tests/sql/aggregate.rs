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
        let device = names.iter().any(|n| n == "DeviceAggregateExec");
        assert_eq!(device, pushed && on_gpu(), "{sql}: {names:?}");
        let (out, _) = executed(&ctx, sql).await;
        let want = text(&run(&df, sql).await);
        assert_eq!(text(&out), want, "{sql}");
        // the option off: DataFusion's aggregation
        let plan = physical(&off, sql).await;
        assert!(
            !node_names(&plan).iter().any(|n| n == "DeviceAggregateExec"),
            "{sql}: the option is off"
        );
        assert_eq!(text(&run(&off, sql).await), want, "{sql}");
        if device {
            let explain = text(&run(&ctx, &format!("EXPLAIN {sql}")).await);
            assert!(explain.contains("DeviceAggregateExec: mode=Partial"), "{explain}");
        }
    }
}
