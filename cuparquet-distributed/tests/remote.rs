//! Two workers over one bucket (feature `object-store`): the coordinator and each worker
//! register the same S3 store (moto's server, started on 127.0.0.1 by the test through
//! scripts/py/remote_fixture.py), the scan's files are dealt to the workers, and each reads its
//! files' URLs from the store; the answers equal DataFusion's own scan of the same objects.
//! Without moto the test says so and passes, unless `CUPARQUET_REQUIRE_REMOTE=1` (CI sets it).

use std::sync::Arc;

use cuparquet_datafusion::{register_gpu_parquet, tpch, GpuScanOptions};
use cuparquet_distributed::{coordinator_state, LocalCluster, WorkerOptions};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::collect;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_distributed::{display_plan_ascii, DistributedExt};

#[path = "../../cuparquet-datafusion/tests/moto/mod.rs"]
mod moto;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_read_the_same_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(10_000))
        .build();
    let t = tpch::write_tables(dir.path(), 8_000, 4, &props).unwrap();
    let Some(server) = moto::start(
        &[format!("lineitem/={}", t.lineitem.display())],
        "distributed remote test",
    ) else {
        return;
    };
    let bucket = url::Url::parse("s3://data").unwrap();
    let s3 = moto::store(&server.endpoint);
    let options = WorkerOptions {
        object_stores: vec![(bucket.clone(), Arc::clone(&s3))],
        ..WorkerOptions::default()
    };
    let cluster = LocalCluster::start(2, options, 2).unwrap();
    let mut ctx = SessionContext::from(coordinator_state(
        SessionConfig::new().with_target_partitions(2),
        cluster.resolver(),
    ));
    // small files: a task per file, as the other distributed tests plan them
    ctx.set_distributed_file_scan_config_bytes_per_partition(1)
        .unwrap();
    ctx.register_object_store(&bucket, Arc::clone(&s3));
    register_gpu_parquet(
        &ctx,
        "lineitem",
        "s3://data/lineitem/",
        GpuScanOptions::default(),
    )
    .await
    .unwrap();
    let df = SessionContext::new();
    df.register_object_store(&bucket, s3);
    df.register_parquet(
        "lineitem",
        "s3://data/lineitem/",
        ParquetReadOptions::default(),
    )
    .await
    .unwrap();
    for q in [tpch::Q1, tpch::Q6] {
        let plan = ctx
            .sql(q)
            .await
            .unwrap()
            .create_physical_plan()
            .await
            .unwrap();
        let shown = display_plan_ascii(plan.as_ref(), false);
        let ours = collect(plan, ctx.task_ctx()).await.unwrap();
        let theirs = df.sql(q).await.unwrap().collect().await.unwrap();
        assert_eq!(
            pretty_format_batches(&ours).unwrap().to_string(),
            pretty_format_batches(&theirs).unwrap().to_string(),
            "{q}\n{shown}"
        );
        // our scan, in tasks of the workers
        assert!(shown.contains("gpuparquet"), "not our scan:\n{shown}");
        assert!(
            shown.matches("t1:").count() > 0,
            "not distributed:\n{shown}"
        );
    }
}
