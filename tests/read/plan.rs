//! Planning: completeness (arrow-rs's push decoder needs nothing beyond the planned chunks),
//! pruning by statistics, snapshots of plans and of the I/O pattern.

use crate::common;

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use arrow::array::*;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use common::*;
use cuparquet::io::host::HostReader;
use cuparquet::io::recording::RecordingReader;
use cuparquet::metadata::read_metadata;
use cuparquet::plan::{plan, Selection};
use cuparquet::source::ParquetFile;
use cuparquet::{Device, Scan};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::arrow::push_decoder::ParquetPushDecoderBuilder;
use parquet::arrow::ProjectionMask;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::DecodeResult;

/// Pushes exactly the planned chunk ranges (one buffer per chunk) into arrow-rs's push decoder
/// and decodes; returns rows decoded, or the ranges it asked for beyond the plan.
fn decode_planned(path: &Path, sel: &Selection) -> Result<usize, String> {
    let file = ParquetFile::open(path).map_err(|e| e.to_string())?;
    let meta = read_metadata(&file, false).map_err(|e| e.to_string())?;
    let p = plan(path, &meta, sel).map_err(|e| e.to_string())?;
    let bytes = std::fs::read(path).unwrap();
    let am = ArrowReaderMetadata::try_new(meta.metadata.clone(), Default::default())
        .map_err(|e| e.to_string())?;
    let mask = ProjectionMask::leaves(am.parquet_schema(), p.leaves.iter().copied());
    let mut d = ParquetPushDecoderBuilder::new_with_metadata(am)
        .with_projection(mask)
        .with_row_groups(p.row_groups.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let (ranges, bufs): (Vec<Range<u64>>, Vec<Bytes>) = p
        .chunks
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| {
            (
                c.range.clone(),
                Bytes::copy_from_slice(&bytes[c.range.start as usize..c.range.end as usize]),
            )
        })
        .unzip();
    d.push_ranges(ranges, bufs).map_err(|e| e.to_string())?;
    let mut rows = 0;
    loop {
        match d.try_decode() {
            Ok(DecodeResult::Data(b)) => rows += b.num_rows(),
            Ok(DecodeResult::Finished) => return Ok(rows),
            Ok(DecodeResult::NeedsData(r)) => return Err(format!("NEEDS MORE: {r:?}")),
            Err(e) => return Err(e.to_string()),
        }
    }
}

#[test]
fn planned_chunks_are_all_the_decoder_needs() {
    let dir = tempfile::tempdir().unwrap();
    let mut files: Vec<std::path::PathBuf> = corpus_files("data", &[".parquet"]);
    files.extend(generate_corpus(dir.path()).into_iter().map(|(_, p)| p));
    let mut checked = 0;
    for f in &files {
        let full = Selection::default();
        match decode_planned(f, &full) {
            Ok(_) => checked += 1,
            Err(e) => {
                assert!(
                    !e.contains("NEEDS MORE"),
                    "{}: plan incomplete: {e}",
                    f.display()
                );
                continue;
            }
        }
        // a projection and a row-group subset too
        let md = read_metadata(&ParquetFile::open(f).unwrap(), false).unwrap();
        let n_rg = md.metadata.num_row_groups();
        let first = md
            .metadata
            .file_metadata()
            .schema_descr()
            .root_schema()
            .get_fields()[0]
            .name()
            .to_string();
        let sel = Selection {
            columns: Some(vec![format!("`{first}`")]),
            row_groups: (n_rg > 1).then(|| vec![n_rg - 1]),
            filter: None,
            rows: None,
        };
        if let Err(e) = decode_planned(f, &sel) {
            assert!(
                !e.contains("NEEDS MORE"),
                "{}: plan incomplete: {e}",
                f.display()
            );
        }
    }
    assert!(checked > 80, "only {checked} files checked");
}

/// 10 row groups of 100 rows: `id` = row index, `s` = zero-padded id, `d` = date, `f` = float
/// with NaN in row group 3, `n` = all null in row group 5, `long` = long strings (truncated
/// statistics).
fn pruning_file(dir: &Path) -> std::path::PathBuf {
    let n: usize = 1000;
    let f: Vec<Option<f64>> = (0..n)
        .map(|i| {
            Some(if i / 100 == 3 && i % 10 == 0 {
                f64::NAN
            } else {
                i as f64
            })
        })
        .collect();
    let nul: Vec<Option<i64>> = (0..n).map(|i| (i / 100 != 5).then_some(i as i64)).collect();
    let batch = RecordBatch::try_from_iter(vec![
        (
            "id",
            Arc::new(Int64Array::from_iter_values(0..n as i64)) as ArrayRef,
        ),
        (
            "s",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("k{i:04}")),
            )),
        ),
        (
            "d",
            Arc::new(Date32Array::from_iter_values(
                (0..n).map(|i| 19_000 + i as i32),
            )),
        ),
        ("f", Arc::new(Float64Array::from(f))),
        ("n", Arc::new(Int64Array::from(nul))),
        (
            "u",
            Arc::new(UInt32Array::from_iter_values(
                (0..n).map(|i| u32::MAX - 999 + i as u32),
            )),
        ),
        (
            "long",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("{}{i:04}", "x".repeat(40))),
            )),
        ),
    ])
    .unwrap();
    let p = dir.join("pruning.parquet");
    write(
        &p,
        &[batch],
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(100))
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_statistics_truncate_length(Some(16))
            .build(),
    );
    p
}

fn kept(path: &Path, filter: &str) -> Vec<usize> {
    let r = Scan::builder(path)
        .with_device(Device::Host)
        .with_filter(filter)
        .build()
        .unwrap_or_else(|e| panic!("{filter}: {e}"));
    r.files()[0].plan().row_groups.clone()
}

#[test]
fn predicates_prune_exactly_what_statistics_prove() {
    let dir = tempfile::tempdir().unwrap();
    let p = pruning_file(dir.path());
    let all: Vec<usize> = (0..10).collect();
    assert_eq!(kept(&p, "id > 850"), vec![8, 9]);
    assert_eq!(kept(&p, "id >= 900"), vec![9]);
    assert_eq!(kept(&p, "id > 899"), vec![9]);
    assert_eq!(kept(&p, "id < 100"), vec![0]);
    assert_eq!(kept(&p, "id <= 100"), vec![0, 1]);
    assert_eq!(kept(&p, "id = 250"), vec![2]);
    assert_eq!(kept(&p, "id != 250"), all);
    assert_eq!(kept(&p, "250 = id"), vec![2]);
    assert_eq!(kept(&p, "id = 250.5"), Vec::<usize>::new());
    assert_eq!(kept(&p, "id < 199.5"), vec![0, 1]);
    assert_eq!(kept(&p, "id > 199.5"), (2..10).collect::<Vec<_>>());
    assert_eq!(kept(&p, "id < 50 OR id > 950"), vec![0, 9]);
    assert_eq!(kept(&p, "id > 950 AND id < 150 OR id = 120"), vec![1]);
    assert_eq!(
        kept(&p, "id > 950 AND (id < 150 OR id = 120)"),
        Vec::<usize>::new()
    );
    assert_eq!(kept(&p, "s = 'k0420'"), vec![4]);
    assert_eq!(kept(&p, "s >= 'k09'"), vec![9]);
    // 2022-01-01 is day 18993, before the first date
    assert_eq!(kept(&p, "d = '2022-01-01'"), Vec::<usize>::new());
    // 2022-01-13 is day 19005: row 5
    assert_eq!(kept(&p, "d = '2022-01-13'"), vec![0]);
    assert_eq!(kept(&p, "d >= '2024-01-01'"), vec![7, 8, 9]);
    // Writers leave NaN out of min/max (row group 3 holds NaNs): comparisons follow IEEE, so
    // NaN satisfies none and the statistics still prove `f = 5.0` impossible there.
    assert_eq!(kept(&p, "f = 5.0"), vec![0]);
    assert_eq!(kept(&p, "f >= 350"), (3..10).collect::<Vec<_>>());
    // All null: every comparison is false there.
    assert_eq!(kept(&p, "n = 550"), Vec::<usize>::new());
    assert_eq!(
        kept(&p, "n != 3"),
        (0..10).filter(|&g| g != 5).collect::<Vec<_>>()
    );
    // Unsigned statistics compare unsigned.
    assert_eq!(kept(&p, "u >= 4294967295"), vec![9]);
    // Truncated statistics keep everything.
    assert_eq!(kept(&p, "long = 'nothing like it'"), all);
}

#[test]
fn pruning_never_drops_a_matching_row() {
    let dir = tempfile::tempdir().unwrap();
    let p = pruning_file(dir.path());
    let full = oracle(&p, &Projection::All, None).unwrap();
    let id = full
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    for (filter, pred) in [
        (
            "id > 850",
            Box::new(|v: i64| v > 850) as Box<dyn Fn(i64) -> bool>,
        ),
        ("id < 333 OR id = 777", Box::new(|v| v < 333 || v == 777)),
        ("id != 500", Box::new(|v| v != 500)),
        (
            "id >= 99 AND id <= 101",
            Box::new(|v| (99..=101).contains(&v)),
        ),
    ] {
        let keep = kept(&p, filter);
        for (row, v) in id.values().iter().enumerate() {
            if pred(*v) {
                assert!(keep.contains(&(row / 100)), "{filter}: row {row} dropped");
            }
        }
    }
}

#[test]
fn filter_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let p = pruning_file(dir.path());
    for (f, want) in [
        ("nope > 1", "unknown column 'nope'"),
        ("s > 5", "cannot compare column 's'"),
        ("id = 'x'", "cannot compare column 'id'"),
        ("d = '2023-02-30'", "is not a date"),
        ("id >", "expected a literal"),
    ] {
        let e = Scan::builder(&p)
            .with_device(Device::Host)
            .with_filter(f)
            .build()
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{f}: {e}");
        assert!(e.starts_with(&format!("filter '{f}'")), "{e}");
    }
    // a filter written over several lines: the error is one line, the line breaks escaped
    // (found by the row_filter fuzz target)
    for (f, want) in [
        ("\n", "filter '\\n': empty expression"),
        (
            "id > 1\n  AND nope < 2",
            "filter 'id > 1\\n  AND nope < 2': unknown column 'nope'",
        ),
    ] {
        let e = Scan::builder(&p)
            .with_device(Device::Host)
            .with_filter(f)
            .build()
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n') && e.starts_with(want), "{e}");
    }
}

#[test]
fn footer_is_one_read_for_small_footers() {
    let p = corpus_dir().join("data/alltypes_plain.parquet");
    let m = read_metadata(&ParquetFile::open(&p).unwrap(), false).unwrap();
    assert_eq!(m.reads.len(), 1);
    // a footer larger than 64 KiB takes exactly one more read
    let dir = tempfile::tempdir().unwrap();
    let wide = dir.path().join("wide.parquet");
    let cols: Vec<(String, ArrayRef)> = (0..600)
        .map(|i| {
            (
                format!("column_with_a_long_name_{i:04}"),
                Arc::new(Int32Array::from(vec![i; 10])) as ArrayRef,
            )
        })
        .collect();
    write(
        &wide,
        &[RecordBatch::try_from_iter(cols).unwrap()],
        Default::default(),
    );
    let m = read_metadata(&ParquetFile::open(&wide).unwrap(), false).unwrap();
    assert!(
        m.footer_len > 64 << 10,
        "footer only {} bytes",
        m.footer_len
    );
    assert_eq!(m.reads.len(), 2, "{:?}", m.reads);
    // with the page index (written after the chunks, before the footer): one more
    let m = read_metadata(&ParquetFile::open(&wide).unwrap(), true).unwrap();
    assert!(m.metadata.offset_index().is_some());
    assert_eq!(m.reads.len(), 3, "{:?}", m.reads);
}

#[test]
fn page_locations_are_recorded_with_the_page_index() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate_corpus(dir.path());
    let p = &files.iter().find(|(n, _)| n == "page_index").unwrap().1;
    let r = Scan::builder(p)
        .with_device(Device::Host)
        .with_page_index(true)
        .with_columns(["i32"])
        .build()
        .unwrap();
    for c in &r.files()[0].plan().chunks {
        let pages = c.pages.as_ref().expect("pages recorded");
        assert!(pages.len() >= 10, "{} pages", pages.len());
        assert!(pages
            .iter()
            .all(|pg| pg.offset >= c.range.start && pg.offset + pg.compressed_size <= c.range.end));
        assert_eq!(pages[0].first_row_index, 0);
    }
    let r = Scan::builder(p).with_device(Device::Host).build().unwrap();
    assert!(r.files()[0].plan().chunks.iter().all(|c| c.pages.is_none()));
}

#[test]
fn plan_snapshots() {
    let d = corpus_dir().join("data");
    let p = |f: &str, sel: Selection| {
        let path = d.join(f);
        let m = read_metadata(&ParquetFile::open(&path).unwrap(), false).unwrap();
        plan(&path, &m, &sel).unwrap().to_string()
    };
    insta::assert_snapshot!(
        "alltypes_plain",
        p("alltypes_plain.parquet", Selection::default())
    );
    insta::assert_snapshot!(
        "alltypes_tiny_pages_projection",
        p(
            "alltypes_tiny_pages_plain.parquet",
            Selection {
                columns: Some(vec!["id".into(), "string_col".into()]),
                ..Default::default()
            }
        )
    );
    insta::assert_snapshot!(
        "nested_structs_projection",
        p(
            "nested_structs.rust.parquet",
            Selection {
                columns: Some(vec!["roll_num".into(), "PC_CUR.mean".into()]),
                ..Default::default()
            }
        )
    );
    insta::assert_snapshot!(
        "string_filter",
        p(
            "data_index_bloom_encoding_stats.parquet",
            Selection {
                filter: Some("String = 'Hello'".into()),
                ..Default::default()
            }
        )
    );
}

#[test]
fn io_pattern_snapshot() {
    // Many small row groups: neighbouring chunks coalesce into few requests.
    let dir = tempfile::tempdir().unwrap();
    let files = generate_corpus(dir.path());
    let path = &files
        .iter()
        .find(|(n, _)| n == "many_small_row_groups")
        .unwrap()
        .1;
    let reader = Scan::builder(path)
        .with_device(Device::Host)
        .with_columns(["i32", "utf8"])
        .with_row_groups([0, 1, 2, 20, 21, 40])
        .build()
        .unwrap();
    let rec = RecordingReader::new(HostReader::new(reader.files()[0].settings().clone()).unwrap());
    let loaded = reader.load_with(&rec).unwrap();
    assert_eq!(loaded.report.loads[0].rows, 5 * 37 + 20); // 1500 rows: the last group has 20
    assert_eq!(rec.log().len(), reader.files()[0].plan().requests.len());
    insta::assert_snapshot!("many_small_row_groups_io", rec.log_text());
}

/// Passes under a budget, from the footer alone: every selected row group once, in order,
/// every row in exactly one batch of at most `batch_rows`, pass chunks consecutive and
/// covering the plan; a budget too small for one row group is an error naming it.
#[test]
fn passes_cover_the_plan_under_a_budget() {
    use cuparquet::plan::plan_passes;
    let mut files = vec![std::path::PathBuf::from("testdata/lineitem-sample.parquet")];
    files.extend(corpus_files("data", &[".parquet"]).into_iter().take(40));
    let mut checked = 0;
    for path in files {
        let Ok(file) = ParquetFile::open(&path) else {
            continue;
        };
        let Ok(meta) = read_metadata(&file, false) else {
            continue;
        };
        let Ok(p) = plan(&path, &meta, &Selection::default()) else {
            continue;
        };
        for (budget, batch_rows, keep) in [
            (u64::MAX / 4, 65_536, false),
            (4 << 20, 3, false),
            (1 << 20, 1000, true),
        ] {
            let passes = match plan_passes(&path, &p, &meta.metadata, budget, batch_rows, keep) {
                Ok(x) => x,
                Err(e) => {
                    let msg = e.to_string();
                    assert!(msg.contains("row group") && msg.contains("budget"), "{msg}");
                    continue;
                }
            };
            let rgs: Vec<usize> = passes
                .passes
                .iter()
                .flat_map(|x| x.row_groups.clone())
                .collect();
            assert_eq!(rgs, p.row_groups, "{}", path.display());
            let mut at = 0;
            for pass in &passes.passes {
                assert_eq!(pass.chunks.start, at);
                at = pass.chunks.end;
                let mut want = pass.row_groups.iter().flat_map(|&rg| {
                    (0..meta.metadata.row_group(rg).num_rows() as u64).map(move |r| (rg, r))
                });
                for b in &pass.batches {
                    assert!(b.num_rows() >= 1 && b.num_rows() <= batch_rows);
                    assert!(!keep || b.parts.len() == 1);
                    for part in &b.parts {
                        assert!(part
                            .rows
                            .clone()
                            .all(|r| want.next() == Some((part.row_group, r))));
                    }
                }
                assert_eq!(want.next(), None);
            }
            assert_eq!(at, p.chunks.len());
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} plans checked");
    // too small: the error names the row group and both sizes
    let path = Path::new("testdata/lineitem-sample.parquet");
    let meta = read_metadata(&ParquetFile::open(path).unwrap(), false).unwrap();
    let p = plan(path, &meta, &Selection::default()).unwrap();
    let e = plan_passes(path, &p, &meta.metadata, 64 << 10, 1000, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("row group 0 needs about") && e.contains("memory budget of 0.1 MiB"),
        "{e}"
    );
    let one = plan_passes(path, &p, &meta.metadata, 1 << 30, 65_536, false).unwrap();
    assert_eq!(one.passes.len(), 1);
    assert_eq!(
        one.passes[0].batches.len(),
        1,
        "20,000 rows in one batch across 4 row groups"
    );
    assert_eq!(one.passes[0].batches[0].parts.len(), 4);
}

/// A path into a map takes the whole map (Arrow reads a map's keys and values together): the
/// load equals arrow-rs reading that top-level column.
#[test]
fn a_path_into_a_map_takes_the_whole_map() {
    let f = corpus_dir().join("data/nested_maps.snappy.parquet");
    let want = oracle(&f, &Projection::Roots(vec![0]), None).unwrap();
    let top = want.schema().field(0).name().clone();
    for path in [
        format!("{top}.key_value.key"),
        format!("{top}.key_value.value"),
    ] {
        let reader = Scan::builder(&f)
            .with_device(Device::Host)
            .with_columns([path.clone()])
            .build()
            .unwrap();
        let loaded = reader.load().unwrap();
        let got = concat(reader.schema(), &loaded.to_host().unwrap());
        assert_same(&path, &got, &want);
    }
}

/// `IS [NOT] NULL`, `[NOT] IN` and `NOT` prune row groups by their statistics.
#[test]
fn is_null_in_and_not_prune_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("nulls.parquet");
    // 4 row groups of 10,000 sorted keys; v is null now and then in the first two only
    let n = 40_000i64;
    let k: ArrayRef = Arc::new(Int64Array::from_iter_values(0..n));
    let v: ArrayRef = Arc::new(Int64Array::from_iter(
        (0..n).map(|i| (i >= 20_000 || i % 7 != 0).then_some(i)),
    ));
    let b = RecordBatch::try_from_iter([("k", k), ("v", v)]).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(10_000))
        .build();
    write(&f, &[b], props);
    let meta = read_metadata(&ParquetFile::open(&f).unwrap(), false).unwrap();
    for (filter, want) in [
        ("v IS NULL", vec![0, 1]),
        ("v IS NOT NULL", vec![0, 1, 2, 3]),
        ("k IN (5, 35000)", vec![0, 3]),
        ("k NOT IN (5)", vec![0, 1, 2, 3]),
        ("NOT k < 30000", vec![3]),
        ("NOT (k < 10000 OR k >= 20000)", vec![1]),
        ("v IS NULL AND k IN (15000)", vec![1]),
    ] {
        let sel = Selection {
            filter: Some(filter.into()),
            ..Default::default()
        };
        let p = plan(&f, &meta, &sel).unwrap();
        assert_eq!(p.row_groups, want, "{filter}");
    }
}

/// Timestamps (ISO literals with and without a zone, raw numbers, every unit) and decimals
/// (INT64 and FIXED_LEN_BYTE_ARRAY) prune row groups; literals finer than the column's unit or
/// scale are bounds, not rounded values.
#[test]
fn timestamps_and_decimals_prune_row_groups() {
    use arrow::array::{
        Decimal128Array, TimestampMicrosecondArray, TimestampMillisecondArray,
        TimestampNanosecondArray,
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("ts-dec.parquet");
    // 4 row groups of 10,000 rows; row i is 2024-01-01T00:00:00Z + i seconds, and i cents
    let base = 1_704_067_200i64;
    let n = 40_000i64;
    let secs = || (0..n).map(move |i| base + i);
    let cols: Vec<(&str, ArrayRef)> = vec![
        (
            "ts_us",
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(secs().map(|s| s * 1_000_000))
                    .with_timezone("UTC"),
            ),
        ),
        (
            "ts_ms",
            Arc::new(TimestampMillisecondArray::from_iter_values(
                secs().map(|s| s * 1_000),
            )),
        ),
        (
            "ts_ns",
            Arc::new(
                TimestampNanosecondArray::from_iter_values(secs().map(|s| s * 1_000_000_000))
                    .with_timezone("+00:00"),
            ),
        ),
        (
            "d64",
            Arc::new(
                Decimal128Array::from_iter_values((0..n).map(i128::from))
                    .with_precision_and_scale(15, 2)
                    .unwrap(),
            ),
        ),
        (
            "d25",
            Arc::new(
                Decimal128Array::from_iter_values((0..n).map(i128::from))
                    .with_precision_and_scale(25, 2)
                    .unwrap(),
            ),
        ),
    ];
    let b = RecordBatch::try_from_iter(cols).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(10_000))
        .build();
    write(&f, &[b], props);
    let meta = read_metadata(&ParquetFile::open(&f).unwrap(), false).unwrap();
    let kept = |filter: &str| {
        let sel = Selection {
            filter: Some(filter.into()),
            ..Default::default()
        };
        plan(&f, &meta, &sel).map(|p| p.row_groups)
    };
    for (filter, want) in [
        ("ts_us > '2024-01-01T05:33:20Z'", vec![2, 3]),
        ("ts_us >= '2024-01-01T06:33:20+01:00'", vec![2, 3]),
        ("ts_us < '2024-01-01'", vec![]),
        ("ts_us <= '2023-12-31 23:59:59.999999'", vec![]),
        ("ts_us = '2024-01-01T00:00:00.0000005Z'", vec![]),
        ("ts_us <= '2024-01-01T02:46:39.9999999Z'", vec![0]),
        ("ts_us = 1704067200000000", vec![0]),
        ("ts_ms = '2024-01-01T02:46:40'", vec![1]),
        ("ts_ms > '2024-01-01 08:19:59.999'", vec![3]),
        ("ts_ns >= '2024-01-01T08:20:00Z'", vec![3]),
        ("ts_ns < '2024-01-01T00:00:00.000000001Z'", vec![0]),
        ("d64 >= 300.00", vec![3]),
        ("d64 < 100.005", vec![0, 1]),
        ("d64 = '0.015'", vec![]),
        ("d64 <= 99", vec![0]),
        ("d25 > 399.98", vec![3]),
        ("d25 < -1", vec![]),
        ("d25 = '200.00' OR d64 = 0.5", vec![0, 2]),
    ] {
        assert_eq!(kept(filter).unwrap(), want, "{filter}");
    }
    for (filter, why) in [
        ("ts_ms = '2024-01-01T02:46:40Z'", "local times"),
        ("ts_us > '2024-13-01'", "not a timestamp"),
        ("d64 > 'abc'", "not a decimal"),
    ] {
        let e = kept(filter).unwrap_err().to_string();
        assert!(e.contains(why), "{filter}: {e}");
    }
}
