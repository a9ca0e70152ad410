//! The stream of batches: `batches()` yields what `load()` returns, batch by batch, in batches
//! of at most `with_batch_rows` rows whatever the row-group layout (small row groups gathered
//! whole, large ones cut), each saying which rows of which row groups it holds; the batches
//! concatenated equal arrow-rs. On the host and, where there is one, on the GPU.

mod common;

use std::path::Path;

use common::*;
use cuparquet::{Device, LoadedBatch, Scan};
use parquet::file::properties::WriterProperties;

/// Held by every test of this file: the memory-budget test reads the device's live bytes, which
/// the others' loads would change.
static GPU: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn devices() -> Vec<Device> {
    let mut v = vec![Device::Host];
    if gpu_available("the stream on cuda:0") {
        v.push(Device::Cuda(0));
    }
    v
}

/// (row group, rows) of each part of each batch.
fn spans(batches: &[LoadedBatch]) -> Vec<Vec<(usize, std::ops::Range<u64>)>> {
    batches
        .iter()
        .map(|b| {
            b.rows()
                .iter()
                .map(|r| (r.row_group, r.rows.clone()))
                .collect()
        })
        .collect()
}

/// A file of `rows` rows of the flat test batch, in row groups of `rg_rows`.
fn flat_file(dir: &Path, rows: usize, rg_rows: usize, dictionary: bool) -> std::path::PathBuf {
    let path = dir.join(format!("flat_{rows}_{rg_rows}_{dictionary}.parquet"));
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rg_rows))
        .set_dictionary_enabled(dictionary)
        .set_data_page_row_count_limit(700)
        .set_write_batch_size(100)
        .build();
    write(&path, &[flat_batch(rows, 3)], props);
    path
}

#[test]
fn the_stream_yields_the_batches_load_returns_within_the_batch_size() {
    let _gpu = GPU.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // small row groups (gathered), large ones (cut, pages split between batches), one row
    // group of the whole file
    let files = [
        flat_file(dir.path(), 6000, 250, true),
        flat_file(dir.path(), 6000, 2500, false),
        flat_file(dir.path(), 6000, 6000, true),
    ];
    for device in devices() {
        for f in &files {
            let want = oracle(f, &Projection::All, None).unwrap();
            // batches of one row on the host only: on a device each is a launch and a copy
            // back of its own (36,000 of them took a minute); batches of 7 rows cut every page
            // there too
            let one = (device == Device::Host).then_some(1usize);
            for batch_rows in one.into_iter().chain([7, 333, 1000, 2600, 1 << 20]) {
                let what = format!("{} on {device}, batches of {batch_rows}", f.display());
                let reader = Scan::builder(f)
                    .with_device(device)
                    .with_batch_rows(batch_rows)
                    .build()
                    .unwrap();
                let streamed: Vec<LoadedBatch> =
                    reader.batches().collect::<cuparquet::Result<_>>().unwrap();
                let loaded = reader.load().unwrap();
                assert_eq!(spans(&streamed), spans(&loaded.batches), "{what}");
                let md = reader.files()[0].metadata().metadata.clone();
                for b in &streamed {
                    assert!(b.num_rows() <= batch_rows, "{what}: {} rows", b.num_rows());
                    assert_eq!(b.file(), f.as_path());
                    // several parts only for whole row groups
                    if b.rows().len() > 1 {
                        for r in b.rows() {
                            let n = md.row_group(r.row_group).num_rows() as u64;
                            assert_eq!(r.rows, 0..n, "{what}: part of a row group gathered");
                        }
                    }
                }
                // as full as the layout allows: a batch is short only at a row-group end
                let rg_rows = md.row_group(0).num_rows() as usize;
                let full = batch_rows.min(if rg_rows > batch_rows {
                    batch_rows
                } else {
                    batch_rows / rg_rows * rg_rows
                });
                let short = streamed.iter().filter(|b| b.num_rows() < full).count();
                let ends = streamed
                    .iter()
                    .filter(|b| {
                        let last = b.rows().last().unwrap();
                        last.rows.end == md.row_group(last.row_group).num_rows() as u64
                    })
                    .count();
                assert!(short <= ends, "{what}: {short} short batches");
                let host: Vec<_> = streamed.iter().map(|b| b.to_host().unwrap()).collect();
                assert_same(&what, &concat(reader.schema(), &host), &want);
                let host: Vec<_> = loaded.to_host().unwrap();
                assert_same(&what, &concat(reader.schema(), &host), &want);
            }
        }
    }
}

#[test]
fn kept_dictionaries_never_span_row_groups() {
    let _gpu = GPU.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let f = flat_file(dir.path(), 3000, 250, true);
    for device in devices() {
        let reader = Scan::builder(&f)
            .with_device(device)
            .with_keep_dictionaries(true)
            .build()
            .unwrap();
        let batches: Vec<LoadedBatch> = reader.batches().collect::<cuparquet::Result<_>>().unwrap();
        assert_eq!(batches.len(), 12, "{device}: one batch per row group");
        assert!(batches.iter().all(|b| b.rows().len() == 1));
    }
}

#[test]
fn a_stream_ends_after_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let f = flat_file(dir.path(), 3000, 250, false);
    let reader = Scan::builder(&f).with_device(Device::Host).build().unwrap();
    // the file cut short after the footer was read: the first step's reads fail
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
    let mut s = reader.batches();
    let first = s.next().expect("an item");
    let e = first.expect_err("reads past the end fail").to_string();
    assert!(e.contains(&f.display().to_string()), "{e}");
    assert!(s.next().is_none(), "the stream ends after its error");
}

#[test]
fn gpu_memory_budget_bounds_the_live_device_memory() {
    if !gpu_available("memory budget") {
        return;
    }
    let _gpu = GPU.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let f = flat_file(dir.path(), 60_000, 3000, true);
    let want = oracle(&f, &Projection::All, None).unwrap();
    // the footer's estimate of the whole load, and of its largest row group with the reads
    // of the next
    let r = Scan::builder(&f)
        .with_device(Device::Cuda(0))
        .build()
        .unwrap();
    let md = r.files()[0].metadata().metadata.clone();
    let costs: Vec<_> = (0..md.num_row_groups())
        .map(|rg| cuparquet::plan::passes::row_group_cost(r.files()[0].plan(), &md, rg))
        .collect();
    let total: u64 = costs.iter().map(|c| c.device_bytes).sum();
    let least = costs
        .windows(2)
        .map(|w| w[0].device_bytes + w[1].read_bytes)
        .max()
        .unwrap()
        .max(costs.last().unwrap().device_bytes);
    let g = cuparquet::device::gpu(0).unwrap();
    for budget in [least, least * 3, total / 2] {
        let reader = Scan::builder(&f)
            .with_device(Device::Cuda(0))
            .with_memory_budget(budget)
            .with_batch_rows(4000)
            .build()
            .unwrap();
        let passes =
            cuparquet::plan::plan_passes(&f, reader.files()[0].plan(), &md, budget, 4000, false)
                .unwrap()
                .passes
                .len();
        assert!(passes > 1, "budget {budget}: {passes} passes");
        let base = g.live_bytes();
        g.reset_peak_live_bytes();
        let mut host = Vec::new();
        for b in reader.batches() {
            let b = b.unwrap();
            host.push(b.to_host().unwrap());
            drop(b); // the consumer drops each batch
        }
        let peak = g.peak_live_bytes() - base;
        eprintln!("budget {budget}: {passes} passes, live device memory peaked at {peak} bytes");
        assert!(peak <= budget, "budget {budget}: peak {peak}");
        assert_same(
            &format!("budget {budget}"),
            &concat(reader.schema(), &host),
            &want,
        );
    }
    // a budget no row group fits, in a file without a page index: an error at build, naming
    // the row group and what it needs
    let g = dir.path().join("no_index.parquet");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(3000))
        .set_statistics_enabled(parquet::file::properties::EnabledStatistics::Chunk)
        .set_offset_index_disabled(true)
        .build();
    write(&g, &[flat_batch(60_000, 3)], props);
    let e = Scan::builder(&g)
        .with_device(Device::Cuda(0))
        .with_memory_budget(least / 2)
        .build()
        .unwrap_err();
    assert!(
        matches!(e, cuparquet::Error::MemoryBudget { row_group: _, needed, budget, .. }
            if needed > budget && budget == least / 2),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("row group") && msg.contains(&g.display().to_string()),
        "{msg}"
    );
}

/// A row group larger than the budget, in a file with a page index (read for the purpose) or
/// without one (the page headers give it): loaded in pieces cut at page boundaries, each
/// reading only its pages; the live device memory stays within 1.1 × the budget and the
/// batches equal arrow-rs.
#[test]
fn gpu_a_row_group_larger_than_the_budget_loads_in_pieces() {
    if !gpu_available("memory budget") {
        return;
    }
    let _gpu = GPU.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("large.parquet");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(1 << 20))
        .set_dictionary_enabled(false)
        .set_data_page_row_count_limit(700)
        .set_write_batch_size(100)
        .build();
    write(&f, &[flat_batch(60_000, 5)], props);
    let want = oracle(&f, &Projection::All, None).unwrap();
    let r = Scan::builder(&f)
        .with_device(Device::Cuda(0))
        .with_page_index(true)
        .build()
        .unwrap();
    let md = r.files()[0].metadata().metadata.clone();
    let whole = cuparquet::plan::passes::row_group_cost(r.files()[0].plan(), &md, 0).device_bytes;
    let g = cuparquet::device::gpu(0).unwrap();
    // the same rows without a page index: cut by the page headers
    let no_index = dir.path().join("large-no-index.parquet");
    let props = without_page_index(
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(1 << 20))
            .set_dictionary_enabled(false)
            .set_data_page_row_count_limit(700)
            .set_write_batch_size(100),
    )
    .build();
    write(&no_index, &[flat_batch(60_000, 5)], props);
    for (parts, page_index, file) in [
        (2u64, false, &f),
        (4, true, &f),
        (8, false, &f),
        (4, false, &no_index),
    ] {
        let budget = whole / parts;
        let reader = Scan::builder(file)
            .with_device(Device::Cuda(0))
            .with_page_index(page_index)
            .with_memory_budget(budget)
            .with_batch_rows(5000)
            .build()
            .unwrap();
        let base = g.live_bytes();
        g.reset_peak_live_bytes();
        let mut host = Vec::new();
        let mut rows = Vec::new();
        for b in reader.batches() {
            let b = b.unwrap();
            assert!(b.num_rows() <= 5000);
            rows.extend(b.rows().iter().map(|r| (r.row_group, r.rows.clone())));
            host.push(b.to_host().unwrap());
            drop(b);
        }
        let peak = g.peak_live_bytes() - base;
        eprintln!(
            "one row group of ~{whole} bytes, budget {budget} ({}): peaked at {peak} bytes",
            file.display()
        );
        assert!(
            peak as f64 <= 1.1 * budget as f64,
            "budget {budget}: peak {peak}"
        );
        // every row once, in order
        let mut next = 0;
        for (rg, r) in rows {
            assert_eq!((rg, r.start), (0, next));
            next = r.end;
        }
        assert_eq!(next, 60_000);
        assert_same(
            &format!("budget {budget}"),
            &concat(reader.schema(), &host),
            &want,
        );
        let loaded = reader.load().unwrap();
        assert_same(
            &format!("budget {budget}, load()"),
            &concat(reader.schema(), &loaded.to_host().unwrap()),
            &want,
        );
    }
}

/// `batch` with its top-level string and binary columns cast to views, as
/// `with_string_views` reads them.
fn as_views(batch: &arrow::record_batch::RecordBatch) -> arrow::record_batch::RecordBatch {
    use arrow::datatypes::{DataType, Field, Schema};
    let (mut fields, mut cols) = (Vec::new(), Vec::new());
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        let t = match f.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 => DataType::Utf8View,
            DataType::Binary | DataType::LargeBinary => DataType::BinaryView,
            t => t.clone(),
        };
        cols.push(arrow::compute::cast(c, &t).unwrap());
        fields.push(Field::new(f.name(), t, f.is_nullable()));
    }
    arrow::record_batch::RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), cols)
        .unwrap()
}

/// String views ([`cuparquet::ScanBuilder::with_string_views`]): Utf8, LargeUtf8, Binary
/// and LargeBinary columns (nulls, short values inline, long ones in the data buffer, PLAIN
/// and dictionary pages) come as `Utf8View` / `BinaryView` holding the values arrow-rs reads —
/// streamed, loaded, after a row filter, in several batches — on the host and on the GPU.
#[test]
fn string_views_hold_the_values_arrow_rs_reads() {
    let _gpu = GPU.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // values of 0 to 40 bytes (inline up to 12, in the data buffer past it), nulls
    let long = dir.path().join("long.parquet");
    let text: arrow::array::StringArray = (0..6000)
        .map(|i: usize| (i % 11 != 3).then(|| format!("{i:05}-{}", "x".repeat(i % 36))))
        .collect();
    let blob: arrow::array::LargeBinaryArray = (0..6000)
        .map(|i: usize| (i % 13 != 5).then(|| vec![(i % 251) as u8; i % 29]))
        .collect();
    let i32s = arrow::array::Int32Array::from_iter_values((0..6000).map(|i| i * 3 - 100));
    let large: arrow::array::LargeStringArray =
        text.iter().map(|v| v.map(|v| v.repeat(2))).collect();
    let batch = arrow::record_batch::RecordBatch::try_from_iter([
        ("i32", std::sync::Arc::new(i32s) as arrow::array::ArrayRef),
        ("utf8", std::sync::Arc::new(text) as _),
        ("large_utf8", std::sync::Arc::new(large) as _),
        ("binary", std::sync::Arc::new(blob) as _),
    ])
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(2500))
        .set_data_page_row_count_limit(700)
        .set_write_batch_size(100)
        .build();
    write(&long, &[batch], props);
    let files = [
        flat_file(dir.path(), 6000, 2500, true),
        flat_file(dir.path(), 6000, 6000, false),
        long,
    ];
    for device in devices() {
        for f in &files {
            let want = as_views(&oracle(f, &Projection::All, None).unwrap());
            for batch_rows in [1000usize, 1 << 20] {
                let what = format!("{} on {device}, batches of {batch_rows}", f.display());
                let reader = Scan::builder(f)
                    .with_device(device)
                    .with_batch_rows(batch_rows)
                    .with_string_views(true)
                    .build()
                    .unwrap();
                let types = |s: &arrow::datatypes::Schema| -> Vec<arrow::datatypes::DataType> {
                    s.fields().iter().map(|f| f.data_type().clone()).collect()
                };
                assert_eq!(types(reader.schema()), types(&want.schema()), "{what}");
                let streamed: Vec<_> = reader
                    .batches()
                    .map(|b| b.unwrap().to_host().unwrap())
                    .collect();
                assert_same(&what, &concat(reader.schema(), &streamed), &want);
                let loaded = reader.load().unwrap().to_host().unwrap();
                assert_same(&what, &concat(reader.schema(), &loaded), &want);
            }
            // after the row filter: the rows it keeps, the filter's own column left out
            let reader = Scan::builder(f)
                .with_device(device)
                .with_columns(["utf8", "binary", "large_utf8"])
                .with_row_filter("i32 >= 2000")
                .with_string_views(true)
                .build()
                .unwrap();
            let got: Vec<_> = (reader.batches())
                .map(|b| b.unwrap().to_host().unwrap())
                .collect();
            let got = concat(reader.schema(), &got);
            let keep = want.slice(700, want.num_rows() - 700); // i32 = 3i - 100
            let want = keep
                .project(&[
                    want.schema().index_of("utf8").unwrap(),
                    want.schema().index_of("large_utf8").unwrap(),
                    want.schema().index_of("binary").unwrap(),
                ])
                .unwrap();
            assert_same(
                &format!("{} on {device}, filtered", f.display()),
                &got,
                &want,
            );
        }
    }
}
