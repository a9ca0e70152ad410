//! Plans a read without reading any data: the footer, then pure planning.
//!
//! `cargo run --example 02-plan-only [FILE] [FILTER]`

use cuparquet::metadata::read_metadata;
use cuparquet::plan::{plan, Selection};
use cuparquet::source::ParquetFile;

fn main() -> cuparquet::Result<()> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .unwrap_or_else(|| "testdata/lineitem-sample.parquet".into());
    let filter = args
        .next()
        .unwrap_or_else(|| "l_shipdate < '1992-06-01'".into());
    let file = ParquetFile::open(&path)?;
    let meta = read_metadata(&file, true)?;
    let selection = Selection {
        columns: Some(vec!["l_quantity".into(), "l_comment".into()]),
        filter: Some(filter),
        ..Default::default()
    };
    let p = plan(file.path(), &meta, &selection)?;
    print!("{p}");
    for c in p.chunks.iter().take(2) {
        println!(
            "{}: {} pages",
            c.path,
            c.pages.as_ref().map_or(0, |p| p.len())
        );
    }
    Ok(())
}
