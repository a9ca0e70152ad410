//! Loads the bundled sample into host memory and prints what came back.
//!
//! `cargo run --example 01-load-host [FILE]`

use cuparquet::{Device, Scan};

fn main() -> cuparquet::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "testdata/lineitem-sample.parquet".into());
    let scan = Scan::builder(&path)
        .with_columns(["l_orderkey", "l_shipdate", "l_returnflag"])
        .with_filter("l_orderkey >= 40000")
        .with_device(Device::Host)
        .build()?;
    println!("{}", scan.files()[0].plan());
    let loaded = scan.load()?;
    for batch in &loaded.batches {
        let b = batch.to_host()?;
        let groups: Vec<String> = batch
            .rows()
            .iter()
            .map(|r| format!("{}[{}..{}]", r.row_group, r.rows.start, r.rows.end))
            .collect();
        println!(
            "{} rows on {} from row groups {}",
            b.num_rows(),
            batch.location(),
            groups.join(", ")
        );
    }
    let r = &loaded.report;
    println!(
        "{} rows, {} bytes read in {} requests, {:.3} ms",
        r.rows(),
        r.bytes_read(),
        r.loads.iter().map(|l| l.io.requests.len()).sum::<usize>(),
        r.wall.as_secs_f64() * 1e3
    );
    Ok(())
}
