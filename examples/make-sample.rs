//! Writes `testdata/lineitem-sample.parquet`, the sample the README loads: 20,000 rows of a
//! lineitem-like table in 4 row groups, SNAPPY with dictionaries, page index and statistics.
//!
//! `cargo run --example make-sample [OUT]`

use std::sync::Arc;

use arrow::array::{ArrayRef, Date32Array, Float64Array, Int32Array, Int64Array, StringArray};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "testdata/lineitem-sample.parquet".into());
    let n = 20_000usize;
    // A fixed linear congruential sequence: the file is the same on every machine.
    let mut state = 42u64;
    let mut rand = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let comments: Vec<String> = (0..500)
        .map(|i| format!("carefully final deposits {i:03} sleep"))
        .collect();
    let mut key = Vec::with_capacity(n);
    let mut qty = Vec::with_capacity(n);
    let mut price = Vec::with_capacity(n);
    let mut ship = Vec::with_capacity(n);
    let mut flag = Vec::with_capacity(n);
    let mut comment = Vec::with_capacity(n);
    for i in 0..n {
        key.push(i as i64 * 4 + (rand() % 4) as i64);
        qty.push(1 + (rand() % 50) as i32);
        price.push((rand() % 10_000_000) as f64 / 100.0);
        ship.push(8_036 + (rand() % 2_500) as i32);
        flag.push(["A", "N", "R"][(rand() % 3) as usize]);
        comment.push(comments[(rand() % 500) as usize].as_str());
    }
    let batch = RecordBatch::try_from_iter(vec![
        ("l_orderkey", Arc::new(Int64Array::from(key)) as ArrayRef),
        ("l_quantity", Arc::new(Int32Array::from(qty))),
        ("l_extendedprice", Arc::new(Float64Array::from(price))),
        ("l_shipdate", Arc::new(Date32Array::from(ship))),
        ("l_returnflag", Arc::new(StringArray::from(flag))),
        ("l_comment", Arc::new(StringArray::from(comment))),
    ])?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(5_000))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_created_by("cuparquet make-sample".into())
        .build();
    let mut w = ArrowWriter::try_new(std::fs::File::create(&out)?, batch.schema(), Some(props))?;
    w.write(&batch)?;
    w.close()?;
    println!("wrote {out}");
    Ok(())
}
