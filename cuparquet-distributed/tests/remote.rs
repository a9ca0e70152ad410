//! Two workers over one bucket (feature `object-store`): the coordinator and each worker
//! register the same S3 store (moto's server, started on 127.0.0.1 by the test through
//! scripts/py/remote_fixture.py), the scan's files are dealt to the workers, and each reads its
//! files' URLs from the store; the answers equal DataFusion's own scan of the same objects.
//! Without moto the test says so and passes, unless `CUPARQUET_REQUIRE_REMOTE=1` (CI sets it).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use cuparquet_datafusion::{register_gpu_parquet, tpch, GpuScanOptions};
use cuparquet_distributed::{coordinator_state, LocalCluster, WorkerOptions};
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::collect;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use datafusion_distributed::{display_plan_ascii, DistributedExt};
use object_store::aws::AmazonS3Builder;
use object_store::ObjectStore;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn server(items: &[String]) -> Option<(Server, String)> {
    let python = std::env::var("CUPARQUET_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut child = Command::new(&python)
        .arg("../scripts/py/remote_fixture.py")
        .args(items)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    let mut line = String::new();
    let _ = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line);
    let endpoint = serde_json::from_str::<serde_json::Value>(&line)
        .ok()
        .and_then(|v| v["s3"].as_str().map(str::to_string));
    let Some(endpoint) = endpoint else {
        let _ = child.kill();
        let _ = child.wait();
        if std::env::var("CUPARQUET_REQUIRE_REMOTE").as_deref() == Ok("1") {
            panic!("CUPARQUET_REQUIRE_REMOTE=1 but moto's S3 server did not start ({python})");
        }
        eprintln!("distributed remote test skipped: no S3 server ({python})");
        return None;
    };
    Some((Server(child), endpoint))
}

fn store(endpoint: &str) -> Arc<dyn ObjectStore> {
    Arc::new(
        AmazonS3Builder::new()
            .with_endpoint(endpoint)
            .with_allow_http(true)
            .with_bucket_name("data")
            .with_access_key_id("test")
            .with_secret_access_key("test")
            .with_region("us-east-1")
            .build()
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_read_the_same_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(10_000))
        .build();
    let t = tpch::write_tables(dir.path(), 8_000, 4, &props).unwrap();
    let Some((_server, endpoint)) = server(&[format!("lineitem/={}", t.lineitem.display())]) else {
        return;
    };
    let bucket = url::Url::parse("s3://data").unwrap();
    let s3 = store(&endpoint);
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
