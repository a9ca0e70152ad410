//! SQL over cuparquet's scan: writes small TPC-H-like tables (or uses the directory given),
//! registers them, and runs Q1, Q6 and an `EXPLAIN`.
//!
//! ```sh
//! cargo run -p cuparquet-datafusion --example datafusion-sql            # generated tables
//! cargo run -p cuparquet-datafusion --example datafusion-sql -- DIR     # DIR/lineitem/*.parquet, …
//! ```

use std::path::PathBuf;
use std::time::Instant;

use cuparquet_datafusion::{register_gpu_parquet, tpch, GpuScanOptions};
use datafusion::error::Result;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::SessionContext;

#[tokio::main]
async fn main() -> Result<()> {
    let dir = match std::env::args().nth(1) {
        Some(d) => PathBuf::from(d),
        None => {
            let dir = std::env::temp_dir().join("cuparquet-datafusion-example");
            if !dir.join("lineitem").is_dir() {
                let props = WriterProperties::builder()
                    .set_compression(Compression::SNAPPY)
                    .set_max_row_group_row_count(Some(100_000))
                    .build();
                let t = tpch::write_tables(&dir, 100_000, 2, &props)?;
                println!(
                    "wrote {} lineitem rows under {}",
                    t.lineitem_rows,
                    dir.display()
                );
            }
            dir
        }
    };

    let ctx = SessionContext::new();
    for table in ["lineitem", "orders", "customer"] {
        let path = dir.join(table);
        if path.is_dir() {
            let path = format!("{}/", path.display());
            register_gpu_parquet(&ctx, table, &path, GpuScanOptions::default()).await?;
        }
    }

    for (name, sql) in [("Q1", tpch::Q1), ("Q6", tpch::Q6)] {
        let t = Instant::now();
        let batches = ctx.sql(sql).await?.collect().await?;
        println!("{name} in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
        println!(
            "{}",
            datafusion::arrow::util::pretty::pretty_format_batches(&batches)?
        );
    }

    // the scan node: file_type=gpuparquet, the device, the pushed predicate and what prunes
    let explain = ctx
        .sql("EXPLAIN SELECT sum(l_quantity) FROM lineitem WHERE l_shipdate >= date '1998-09-01'")
        .await?
        .collect()
        .await?;
    println!(
        "{}",
        datafusion::arrow::util::pretty::pretty_format_batches(&explain)?
    );
    Ok(())
}
