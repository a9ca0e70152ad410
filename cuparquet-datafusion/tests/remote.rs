//! SQL over tables on S3 (feature `object-store`): `CREATE EXTERNAL TABLE … STORED AS
//! GPUPARQUET LOCATION 's3://…'` and `register_gpu_parquet` read through the object store the
//! session registered, checked against DataFusion's own Parquet scan of the same objects. The
//! S3 server is moto's, started on 127.0.0.1 by the test (scripts/py/remote_fixture.py); without
//! it the test says so and passes, unless `CUPARQUET_REQUIRE_REMOTE=1` (CI sets it).

use cuparquet_datafusion::{
    register_gpu_parquet, register_gpu_parquet_format, tpch, GpuScanOptions,
};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::{ParquetReadOptions, SessionContext};

mod moto;

fn context(endpoint: &str) -> SessionContext {
    let ctx = SessionContext::new();
    let url = url::Url::parse("s3://data").unwrap();
    ctx.register_object_store(&url, moto::store(endpoint));
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
    let Some(s) = moto::start(
        &[format!("lineitem/={}", t.lineitem.display())],
        "remote SQL tests",
    ) else {
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
