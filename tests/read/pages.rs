//! Page pruning by the filter: with the page index loaded, pages whose statistics prove no row
//! can match are dropped, and the load holds exactly the rows of the kept pages — arrow-rs's
//! full read restricted to them — which include every matching row. On the host and, where
//! there is one, on the GPU.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use arrow::record_batch::{RecordBatch, RecordBatchReader};
use common::*;
use cuparquet::plan::{RowSelection, RowSelector};
use cuparquet::{Device, LoadedBatch, Scan};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;

fn devices() -> Vec<Device> {
    let mut v = vec![Device::Host];
    if gpu_available("page pruning on cuda:0") {
        v.push(Device::Cuda(0));
    }
    v
}

/// 20,000 rows sorted by `k`, in row groups of 5,000 and pages of 500 rows (arrow-rs writes the
/// page index by default).
fn sorted_file(path: &Path) {
    let n = 20_000i64;
    let k: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n));
    let s: ArrayRef = Arc::new(StringArray::from_iter(
        (0..n).map(|i| (i % 5 != 0).then(|| format!("s{:05}", i % 977))),
    ));
    let x: ArrayRef = Arc::new(Float64Array::from_iter_values(
        (0..n).map(|i| i as f64 * 0.5),
    ));
    let b = RecordBatch::try_from_iter([("k", k), ("s", s), ("x", x)]).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(5000))
        .set_data_page_row_count_limit(500)
        .set_write_batch_size(100)
        .build();
    write(path, &[b], props);
}

/// arrow-rs's read of `row_groups` restricted to the rows `rows` (per row group) says.
fn arrow_rs_rows(path: &Path, plan: &cuparquet::plan::ReadPlan) -> RecordBatch {
    let rows = plan.rows.as_ref().expect("pages pruned: the plan's rows");
    let mut sel = Vec::new();
    let md = Scan::builder(path)
        .with_device(Device::Host)
        .build()
        .unwrap()
        .files()[0]
        .metadata()
        .metadata
        .clone();
    for &rg in &plan.row_groups {
        let n = md.row_group(rg).num_rows() as usize;
        let mut at = 0;
        for r in &rows[&rg] {
            let (s, e) = (r.start as usize, r.end as usize);
            if s > at {
                sel.push(RowSelector::skip(s - at));
            }
            sel.push(RowSelector::select(e - s));
            at = e;
        }
        if n > at {
            sel.push(RowSelector::skip(n - at));
        }
    }
    let f = std::fs::File::open(path).unwrap();
    let r = ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .with_row_groups(plan.row_groups.clone())
        .with_row_selection(RowSelection::from(sel))
        .build()
        .unwrap();
    let schema = r.schema();
    let batches: Vec<RecordBatch> = r.map(|b| b.unwrap()).collect();
    concat(&schema, &batches)
}

#[test]
fn pages_the_filter_rules_out_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sorted.parquet");
    sorted_file(&f);
    let (lo, hi) = (3210i64, 7777i64);
    let filter = format!("k >= {lo} AND k < {hi}");
    for device in devices() {
        let reader = Scan::builder(&f)
            .with_device(device)
            .with_page_index(true)
            .with_filter(filter.clone())
            .with_batch_rows(1000)
            .build()
            .unwrap();
        let plan = reader.files()[0].plan();
        // row groups 0 and 1 hold matches (rows 3210..4999 and 5000..7776); 2 and 3 pruned
        assert_eq!(plan.row_groups, vec![0, 1], "{device}");
        let rows = plan.rows.as_ref().unwrap();
        assert_eq!(
            rows[&0],
            vec![3000..5000],
            "{device}: pages 6..9 of row group 0"
        );
        assert_eq!(
            rows[&1],
            vec![0..3000],
            "{device}: pages 0..5 of row group 1"
        );
        assert_eq!(plan.num_rows, 5000);
        let dropped: usize = plan.page_pruning.iter().map(|p| p.pages_dropped).sum();
        assert!(dropped >= 10, "{device}: {:?}", plan.page_pruning);
        assert!(plan.to_string().contains("page index:"), "{plan}");
        // the load: exactly the kept pages' rows, as arrow-rs reads them
        let want = arrow_rs_rows(&f, plan);
        let got: Vec<LoadedBatch> = reader.batches().collect::<cuparquet::Result<_>>().unwrap();
        let host: Vec<RecordBatch> = got.iter().map(|b| b.to_host().unwrap()).collect();
        let got = concat(reader.schema(), &host);
        assert_same(&format!("{device} kept pages"), &got, &want);
        // every matching row is there
        let k = got.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        let matching = k.values().iter().filter(|&&v| v >= lo && v < hi).count();
        assert_eq!(matching as i64, hi - lo, "{device}");
    }
    // without the page index: row groups only
    let reader = Scan::builder(&f)
        .with_device(Device::Host)
        .with_filter(filter)
        .build()
        .unwrap();
    assert!(
        reader.files()[0].plan().rows.is_none() && reader.files()[0].plan().page_pruning.is_empty()
    );
    assert_eq!(reader.files()[0].plan().num_rows, 10_000);
}

#[test]
fn page_pruning_and_a_row_selection_combine() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sorted.parquet");
    sorted_file(&f);
    // select rows 4000..6000 of the file; the filter keeps pages of k in 5500..5600
    let sel: RowSelection = vec![
        RowSelector::skip(4000),
        RowSelector::select(2000),
        RowSelector::skip(14_000),
    ]
    .into();
    for device in devices() {
        let reader = Scan::builder(&f)
            .with_device(device)
            .with_page_index(true)
            .with_filter("k >= 5500 AND k < 5600")
            .with_row_selection(sel.clone())
            .build()
            .unwrap();
        let plan = reader.files()[0].plan();
        assert_eq!(plan.row_groups, vec![1], "{device}");
        assert_eq!(plan.rows.as_ref().unwrap()[&1], vec![500..1000], "{device}");
        let got: Vec<LoadedBatch> = reader.batches().collect::<cuparquet::Result<_>>().unwrap();
        let host: Vec<RecordBatch> = got.iter().map(|b| b.to_host().unwrap()).collect();
        let got = concat(reader.schema(), &host);
        let k = got.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(
            k.values().to_vec(),
            (5500..6000).collect::<Vec<i64>>(),
            "{device}"
        );
    }
}

/// With the page index, a narrow filter on the sorted column reads only the pages that may
/// hold a match — of every column, with its dictionary page where it has one — and the load
/// equals arrow-rs's read of those pages' rows.
#[test]
fn a_narrow_filter_reads_only_the_kept_pages() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sorted_plain.parquet");
    // one row group of 40 pages of 10,000 rows; `s` keeps its dictionary, the others are plain
    let n = 400_000i64;
    let k: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n));
    let s: ArrayRef = Arc::new(StringArray::from_iter(
        (0..n).map(|i| (i % 7 != 0).then(|| format!("s{:03}", i % 97))),
    ));
    let x: ArrayRef = Arc::new(Float64Array::from_iter_values((0..n).map(|i| i as f64)));
    let b = RecordBatch::try_from_iter([("k", k), ("s", s), ("x", x)]).unwrap();
    let props = WriterProperties::builder()
        .set_dictionary_enabled(false)
        .set_column_dictionary_enabled("s".into(), true)
        .set_compression(parquet::basic::Compression::SNAPPY)
        .set_data_page_row_count_limit(10_000)
        .set_write_batch_size(1000)
        .set_max_row_group_row_count(Some(1 << 20))
        .build();
    write(&f, &[b], props);
    let filter = "k >= 123450 AND k < 124000";
    for device in devices() {
        let with_index = Scan::builder(&f)
            .with_device(device)
            .with_page_index(true)
            .with_filter(filter)
            .build()
            .unwrap();
        let without = Scan::builder(&f)
            .with_device(device)
            .with_filter(filter)
            .build()
            .unwrap();
        let plan = with_index.files()[0].plan();
        assert_eq!(
            plan.rows.as_ref().unwrap()[&0],
            vec![120_000..130_000],
            "{device}"
        );
        // every chunk reads page 12 of 40, and `s` its dictionary page before the first
        for c in &plan.chunks {
            let read: Vec<_> = (c.read.as_ref().expect("a chunk of some pages").iter())
                .map(|p| p.file.clone())
                .collect();
            let pages = c.pages.as_ref().unwrap();
            assert_eq!(pages.len(), 40, "{device} {}", c.path);
            let page = &pages[12];
            let want = page.offset..page.offset + page.compressed_size;
            match c.path.as_str() {
                "s" => assert_eq!(read[..], [c.range.start..pages[0].offset, want]),
                _ => assert_eq!(read[..], [want], "{device} {}", c.path),
            }
        }
        let (a, b) = (
            plan.request_bytes(),
            without.files()[0].plan().request_bytes(),
        );
        assert!(
            a * 10 < b,
            "{device}: {a} bytes read with the page index, {b} without"
        );
        assert!(
            plan.to_string()
                .contains("read only the pages holding selected rows: 3 of 120"),
            "{plan}"
        );
        let loaded = with_index.load().unwrap();
        assert_eq!(loaded.report.loads[0].bytes_read, a, "{device}");
        let host: Vec<RecordBatch> = loaded
            .batches
            .iter()
            .map(|b| b.to_host().unwrap())
            .collect();
        let got = concat(with_index.schema(), &host);
        assert_same(
            &format!("{device} kept pages"),
            &got,
            &arrow_rs_rows(&f, plan),
        );
    }
}

/// One row group of 60,000 rows in pages of 700 (`flat_batch`'s columns; no dictionaries, which
/// its random values would fill), with or without a page index.
fn one_large_row_group(path: &Path, page_index: bool) {
    let mut props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(1 << 20))
        .set_dictionary_enabled(false)
        .set_data_page_row_count_limit(700)
        .set_write_batch_size(100);
    if !page_index {
        props = without_page_index(props);
    }
    write(path, &[flat_batch(60_000, 5)], props.build());
}

/// A row group larger than the memory budget is planned in pieces cut at page boundaries:
/// they hold every row once, in order, each reads only the pages holding its rows and fits
/// half the budget; `plan` prints them. Without a page index, or with a budget below a page,
/// an error names the row group.
#[test]
fn a_row_group_larger_than_the_budget_is_planned_in_pieces() {
    use cuparquet::metadata::read_metadata;
    use cuparquet::plan::{passes::row_group_cost, plan, plan_passes, Selection};
    use cuparquet::source::ParquetFile;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("large.parquet");
    one_large_row_group(&f, true);
    let meta = read_metadata(&ParquetFile::open(&f).unwrap(), true).unwrap();
    let md = &meta.metadata;
    let p = plan(&f, &meta, &Selection::default()).unwrap();
    let whole = row_group_cost(&p, md, 0);
    for parts in [2u64, 4, 8] {
        let budget = whole.device_bytes / parts;
        let passes = plan_passes(&f, &p, md, budget, 1 << 20, false).unwrap();
        assert!(passes.passes.len() >= parts as usize, "{passes}");
        let mut next = 0u64;
        for pass in &passes.passes {
            let piece = pass.piece.as_ref().expect("a piece");
            assert!(pass.device_bytes <= budget / 2, "{pass:?}");
            let rows = &piece.rows.as_ref().unwrap()[&0];
            assert_eq!(rows.len(), 1);
            assert_eq!(rows[0].start, next, "pieces in order, every row once");
            next = rows[0].end;
            assert_eq!(
                pass.batches.iter().map(|b| b.num_rows()).sum::<u64>(),
                piece.num_rows
            );
            // each chunk reads its dictionary page and the pages that overlap the piece
            for c in &piece.chunks {
                let pages = c.pages.as_ref().unwrap();
                let want: Vec<usize> = (0..pages.len())
                    .filter(|&k| {
                        let end = pages.get(k + 1).map_or(60_000, |n| n.first_row_index);
                        pages[k].first_row_index < rows[0].end && rows[0].start < end
                    })
                    .collect();
                let read = c.read.as_ref().expect("some pages");
                let got: Vec<usize> = (0..pages.len())
                    .filter(|&k| read.iter().any(|r| r.file.contains(&pages[k].offset)))
                    .collect();
                assert_eq!(got, want, "{}: rows {:?}", c.path, rows[0]);
            }
            assert!(piece.request_bytes() < p.request_bytes());
        }
        assert_eq!(next, 60_000);
        assert!(
            passes
                .to_string()
                .contains("(a piece: only its pages read)"),
            "{passes}"
        );
    }
    // below one page's worth: an error naming the row group
    let e = plan_passes(&f, &p, md, whole.device_bytes / 2000, 1 << 20, false).unwrap_err();
    assert!(
        matches!(e, cuparquet::Error::MemoryBudget { row_group: 0, .. }),
        "{e}"
    );
    // no page index: the same error, until the page headers give one; then the same pieces
    let passes = |path: &Path, p: &cuparquet::plan::ReadPlan, md: &_| {
        plan_passes(path, p, md, whole.device_bytes / 3, 1 << 20, false)
    };
    let want = passes(&f, &p, md).unwrap();
    let g = dir.path().join("large_no_index.parquet");
    one_large_row_group(&g, false);
    let file = ParquetFile::open(&g).unwrap();
    let meta = read_metadata(&file, true).unwrap();
    let q = plan(&g, &meta, &Selection::default()).unwrap();
    let e = passes(&g, &q, &meta.metadata).unwrap_err();
    assert!(
        e.to_string().contains("where the file has a page index"),
        "{e}"
    );
    let cuparquet::Error::MemoryBudget {
        row_group, budget, ..
    } = e
    else {
        panic!("{e}")
    };
    let rgs = cuparquet::plan::unindexed_for_budget(&q, &meta.metadata, row_group, budget);
    assert_eq!(rgs, [0]);
    let meta = cuparquet::plan::with_header_index(&file, &meta, &rgs, &q.leaves)
        .unwrap()
        .unwrap();
    let q = plan(&g, &meta, &Selection::default()).unwrap();
    let got = passes(&g, &q, &meta.metadata).unwrap();
    let rows = |passes: &cuparquet::plan::PassPlan| -> Vec<_> {
        (passes.passes.iter())
            .map(|p| (p.piece.as_ref().unwrap().rows.clone(), p.read_bytes))
            .collect()
    };
    // the same rows in each piece; the bytes of pages without their statistics
    let (w, g2) = (rows(&want), rows(&got));
    assert_eq!(w.len(), g2.len());
    for ((wr, wb), (gr, gb)) in w.iter().zip(&g2) {
        assert_eq!(wr, gr);
        assert!(gb <= wb, "{gb} > {wb}");
    }
}

/// A page index that cannot describe its chunk (two page locations swapped) is an error naming
/// the row group and column when it is loaded, never a load in the wrong order: readers take
/// page locations from it.
#[test]
fn an_offset_index_that_does_not_describe_its_chunk_is_an_error() {
    use cuparquet::metadata::{read_metadata, FileMetadata};
    use cuparquet::plan::{plan, Selection};
    use cuparquet::source::ParquetFile;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("sorted.parquet");
    sorted_file(&f);
    let meta = read_metadata(&ParquetFile::open(&f).unwrap(), true).unwrap();
    assert!(plan(&f, &meta, &Selection::default()).is_ok());
    let mut oi = meta.metadata.offset_index().unwrap().clone();
    oi[1][2].page_locations.swap(3, 4);
    let md = meta
        .metadata
        .as_ref()
        .clone()
        .into_builder()
        .set_offset_index(Some(oi))
        .build();
    let bad = FileMetadata {
        metadata: Arc::new(md),
        ..meta.clone()
    };
    let e = plan(&f, &bad, &Selection::default()).unwrap_err();
    assert!(
        matches!(&e, cuparquet::Error::BadColumnChunk { row_group: 1, column, .. } if column == "x"),
        "{e}"
    );
    assert!(e.to_string().contains("offset index puts page 4"), "{e}");
}

/// Bloom filters: a high-cardinality key in random order (statistics prune nothing) in 8 row
/// groups with bloom filters (as arrow-rs writes them, offset and length in the footer): `k =
/// v` reads only the row group holding v, `k IN (…)` only those holding one, and the rows are
/// arrow-rs's; `plan` says which row groups the bloom filters ruled out.
#[test]
fn bloom_filters_prune_row_groups_on_equalities() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bloom.parquet");
    let n = 80_000i64;
    // a permutation of 0..n: every row group's min and max span nearly the whole range
    let k: Vec<i64> = (0..n).map(|i| (i * 7_919) % n).collect();
    let s: Vec<String> = k.iter().map(|v| format!("key-{v}")).collect();
    let batch = RecordBatch::try_from_iter([
        ("k", Arc::new(Int64Array::from(k.clone())) as ArrayRef),
        ("s", Arc::new(StringArray::from(s)) as ArrayRef),
    ])
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(10_000))
        .set_bloom_filter_enabled(true)
        .build();
    write(&path, &[batch], props);
    let where_is = |v: i64| k.iter().position(|&x| x == v).unwrap() / 10_000;
    for device in devices() {
        for (expr, want_groups, want_rows) in [
            ("k = 4242", vec![where_is(4242)], 1usize),
            (
                "s = 'key-77' OR k = 12345",
                {
                    let mut g = vec![where_is(77), where_is(12_345)];
                    g.sort_unstable();
                    g.dedup();
                    g
                },
                2,
            ),
            (
                "k IN (1, 2, 3) AND s != 'x'",
                {
                    let mut g = vec![where_is(1), where_is(2), where_is(3)];
                    g.sort_unstable();
                    g.dedup();
                    g
                },
                3,
            ),
            ("k = -5", vec![], 0),
        ] {
            let reader = Scan::builder(&path)
                .with_device(device)
                .with_row_filter(expr)
                .build()
                .unwrap();
            let f = &reader.files()[0];
            assert_eq!(f.plan().row_groups, want_groups, "{expr} on {device}");
            // statistics prune first (a group whose min is above 3 for `IN (1, 2, 3)`), the
            // bloom filters the rest
            let pruned = &f.plan().pruned;
            let bloom = pruned
                .iter()
                .filter(|p| p.reason.contains("bloom filter"))
                .count();
            assert_eq!(pruned.len(), 8 - want_groups.len(), "{expr}: {pruned:?}");
            assert!(bloom >= 1 || want_rows == 0, "{expr}: {pruned:?}");
            let got: usize = reader
                .load()
                .unwrap()
                .batches
                .iter()
                .map(|b| b.num_rows())
                .sum();
            assert_eq!(got, want_rows, "{expr} on {device}");
        }
    }
    // a float or a range is not a bloom filter's to decide: statistics only
    let reader = Scan::builder(&path)
        .with_device(Device::Host)
        .with_row_filter("k < 5")
        .build()
        .unwrap();
    let pruned = &reader.files()[0].plan().pruned;
    assert!(
        pruned.iter().all(|p| !p.reason.contains("bloom")),
        "{pruned:?}"
    );
}
