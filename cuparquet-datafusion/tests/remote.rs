//! SQL over tables on S3 (feature `object-store`): `CREATE EXTERNAL TABLE … STORED AS
//! GPUPARQUET LOCATION 's3://…'` and `register_gpu_parquet` read through the object store the
//! session registered, checked against DataFusion's own Parquet scan of the same objects. The
//! S3 server is moto's, started on 127.0.0.1 by the test (scripts/py/remote_fixture.py); without
//! it the test says so and passes, unless `CUPARQUET_REQUIRE_REMOTE=1` (CI sets it).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use cuparquet_datafusion::{
    register_gpu_parquet, register_gpu_parquet_format, tpch, GpuScanOptions,
};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionContext};
use object_store::aws::AmazonS3Builder;

struct Server {
    child: Child,
    endpoint: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Moto's S3 server holding `items` (`KEY=PATH` or `PREFIX/=DIR`) in bucket `data`.
fn server(items: &[String]) -> Option<Server> {
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
        eprintln!(
            "remote SQL tests skipped: no S3 server ({python}; pip install \"moto[server]\")"
        );
        return None;
    };
    Some(Server { child, endpoint })
}

fn context(endpoint: &str) -> SessionContext {
    let ctx = SessionContext::new();
    let store = AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_bucket_name("data")
        .with_access_key_id("test")
        .with_secret_access_key("test")
        .with_region("us-east-1")
        .build()
        .unwrap();
    let url = url::Url::parse("s3://data").unwrap();
    ctx.register_object_store(&url, Arc::new(store));
    register_gpu_parquet_format(&ctx).unwrap();
    ctx
}

async fn sql(ctx: &SessionContext, q: &str) -> Vec<RecordBatch> {
    ctx.sql(q).await.unwrap().collect().await.unwrap()
}

fn text(b: &[RecordBatch]) -> String {
    pretty_format_batches(b).unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sql_over_s3_equals_datafusions_own_scan() {
    let dir = tempfile::tempdir().unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(10_000))
        .build();
    let t = tpch::write_tables(dir.path(), 8_000, 3, &props).unwrap();
    let Some(s) = server(&[format!("lineitem/={}", t.lineitem.display())]) else {
        return;
    };
    let ctx = context(&s.endpoint);
    sql(
        &ctx,
        "CREATE EXTERNAL TABLE lineitem STORED AS GPUPARQUET LOCATION 's3://data/lineitem/'",
    )
    .await;
    ctx.register_parquet(
        "theirs",
        "s3://data/lineitem/",
        ParquetReadOptions::default(),
    )
    .await
    .unwrap();
    register_gpu_parquet(
        &ctx,
        "ours2",
        "s3://data/lineitem/",
        GpuScanOptions::default(),
    )
    .await
    .unwrap();
    for q in [tpch::Q1, tpch::Q6, "SELECT count(*) AS n FROM lineitem"] {
        let ours = text(&sql(&ctx, q).await);
        let theirs = text(&sql(&ctx, &q.replace("FROM lineitem", "FROM theirs")).await);
        let ours2 = text(&sql(&ctx, &q.replace("FROM lineitem", "FROM ours2")).await);
        assert_eq!(ours, theirs, "{q}");
        assert_eq!(ours2, theirs, "{q} (register_gpu_parquet)");
    }
    // the scan really went through cuparquet on the store
    let plan = text(&sql(&ctx, "EXPLAIN SELECT sum(l_quantity) FROM lineitem").await);
    assert!(
        plan.contains("GpuParquet") || plan.contains("gpu"),
        "{plan}"
    );
}
