//! Several files read as one: a directory (or a list of files) streams as one sequence of
//! batches equal to the files read one by one with arrow-rs, in order; files whose schemas
//! disagree are a clear error naming both; `cuparquet load DIR` loads them all.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use common::*;
use cuparquet::{Device, LoadedBatch, Scan};
use parquet::file::properties::WriterProperties;

fn devices() -> Vec<Device> {
    let mut v = vec![Device::Host];
    if gpu_available("datasets on cuda:0") {
        v.push(Device::Cuda(0));
    }
    v
}

/// A file of `rows` rows from `start` (id, an optional string), in row groups of `rg_rows`;
/// `nullable`: whether the id field is nullable.
fn part(path: &Path, start: i64, rows: i64, rg_rows: usize, nullable: bool) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, nullable),
        Field::new("s", DataType::Utf8, true),
    ]));
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(start..start + rows));
    let s: ArrayRef = Arc::new(StringArray::from_iter(
        (start..start + rows).map(|i| (i % 7 != 0).then(|| format!("v{}", i % 300))),
    ));
    let b = RecordBatch::try_new(schema, vec![id, s]).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rg_rows))
        .build();
    write(path, &[b], props);
}

/// A directory of three parts (different row-group layouts, the second with a nullable id),
/// and files the directory listing skips.
fn dataset_dir() -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let files = vec![
        d.join("part-0.parquet"),
        d.join("part-1.parquet"),
        d.join("part-2.parquet"),
    ];
    part(&files[0], 0, 5000, 1000, false);
    part(&files[1], 5000, 3000, 3000, true);
    part(&files[2], 8000, 700, 100, false);
    // skipped: metadata, hidden and other files
    part(&d.join("_common_metadata.parquet"), 0, 10, 10, false);
    part(&d.join(".hidden.parquet"), 0, 10, 10, false);
    std::fs::write(d.join("notes.txt"), "not parquet").unwrap();
    (dir, files)
}

fn host(batches: &[LoadedBatch]) -> Vec<RecordBatch> {
    batches.iter().map(|b| b.to_host().unwrap()).collect()
}

#[test]
fn a_directory_streams_as_its_files_read_one_by_one() {
    let (dir, files) = dataset_dir();
    // the oracle: each file with arrow-rs, in name order, with the merged (nullable) schema
    let wants: Vec<RecordBatch> = files
        .iter()
        .map(|f| oracle(f, &Projection::All, None).unwrap())
        .collect();
    let merged = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
    ]));
    let want = arrow::compute::concat_batches(&merged, &wants).unwrap();
    for device in devices() {
        let ds = Scan::builder([dir.path()])
            .with_device(device)
            .with_batch_rows(1500)
            .build()
            .unwrap();
        assert_eq!(
            ds.files().iter().map(|f| f.path()).collect::<Vec<_>>(),
            files.iter().map(|f| f.as_path()).collect::<Vec<_>>(),
            "{device}: listed, sorted, skipped"
        );
        let streamed: Vec<LoadedBatch> = ds.batches().collect::<cuparquet::Result<_>>().unwrap();
        // file order, each batch within the size and of one file
        let order: Vec<&Path> = streamed.iter().map(|b| b.file()).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted, "{device}");
        assert!(streamed.iter().all(|b| b.num_rows() <= 1500));
        assert!(
            streamed.iter().all(|b| b.schema() == merged),
            "{device}: merged schema"
        );
        let got = concat(&merged, &host(&streamed));
        assert_same(&format!("{device} stream"), &got, &want);
        // load(): the same batches, a report per file
        let loaded = ds.load().unwrap();
        assert_eq!(loaded.report.loads.len(), 3);
        assert_eq!(
            loaded.report.loads.iter().map(|r| r.rows).sum::<u64>(),
            8700
        );
        assert_eq!(loaded.batches.len(), streamed.len());
        let got = concat(&merged, &host(&loaded.batches));
        assert_same(&format!("{device} load"), &got, &want);
        // a list of files, in the order given
        let ds = Scan::builder([&files[2], &files[0]])
            .with_device(device)
            .with_columns(["s"])
            .build()
            .unwrap();
        let got: Vec<LoadedBatch> = ds.batches().collect::<cuparquet::Result<_>>().unwrap();
        let rows: usize = got.iter().map(|b| b.num_rows()).sum();
        assert_eq!(rows, 5700);
        assert_eq!(got[0].file(), files[2].as_path());
        assert_eq!(got[0].num_columns(), 1);
    }
}

#[test]
fn mismatched_schemas_are_an_error_naming_both_files_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.parquet");
    let b = dir.path().join("b.parquet");
    part(&a, 0, 100, 50, false);
    // the same names, id as a string
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("s", DataType::Utf8, true),
    ]));
    let id: ArrayRef = Arc::new(StringArray::from(vec!["x"; 10]));
    let s: ArrayRef = Arc::new(StringArray::from(vec![Some("y"); 10]));
    write(
        &b,
        &[RecordBatch::try_new(schema, vec![id, s]).unwrap()],
        WriterProperties::default(),
    );
    // every footer is read when the dataset is built: the error comes before any batch
    let e = Scan::builder([dir.path()])
        .with_device(Device::Host)
        .build()
        .unwrap_err()
        .to_string();
    for needle in ["a.parquet", "b.parquet", "id"] {
        assert!(e.contains(needle), "{e}");
    }
    // an empty directory is an error too
    let empty = tempfile::tempdir().unwrap();
    let e = Scan::builder([empty.path()])
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("no *.parquet file"), "{e}");
}

#[test]
fn cli_loads_a_directory() {
    let (dir, _) = dataset_dir();
    let out = std::process::Command::new(cuparquet_bin())
        .args(["load", "--device", "host", "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rows"], 8700);
    assert_eq!(v["files"].as_array().unwrap().len(), 3);
    let ipc = dir.path().join("all.arrow");
    let out = std::process::Command::new(cuparquet_bin())
        .args(["load", "--device", "host", "--output"])
        .arg(&ipc)
        .arg(dir.path().join("part-0.parquet"))
        .arg(dir.path().join("part-2.parquet"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2 files, one schema of 2 columns: 5700 rows"),
        "{text}"
    );
    let r =
        arrow::ipc::reader::FileReader::try_new(std::fs::File::open(&ipc).unwrap(), None).unwrap();
    let rows: usize = r.map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(rows, 5700);
}

#[test]
fn per_file_access_plans_read_what_each_says() {
    use cuparquet::plan::{RowGroupAccess, RowSelector};
    let (_dir, files) = dataset_dir();
    // part-0: row groups 1 and 3 of its 5; part-1: rows 10..20 of its one; part-2 as it is
    let a0: Vec<RowGroupAccess> = (0..5)
        .map(|i| {
            if i % 2 == 1 {
                RowGroupAccess::Scan
            } else {
                RowGroupAccess::Skip
            }
        })
        .collect();
    let a1 = vec![RowGroupAccess::Selection(
        vec![
            RowSelector::skip(10),
            RowSelector::select(10),
            RowSelector::skip(2980),
        ]
        .into(),
    )];
    for device in devices() {
        let ds = Scan::builder(&files)
            .with_device(device)
            .with_access_plans([Some(a0.clone()), Some(a1.clone()), None])
            .build()
            .unwrap();
        let got: Vec<LoadedBatch> = ds.batches().collect::<cuparquet::Result<_>>().unwrap();
        let ids: Vec<i64> = host(&got)
            .iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect();
        let want: Vec<i64> = (1000..2000)
            .chain(3000..4000)
            .chain(5010..5020)
            .chain(8000..8700)
            .collect();
        assert_eq!(ids, want, "{device}");
        assert_eq!(
            ds.load()
                .unwrap()
                .batches
                .iter()
                .map(|b| b.num_rows())
                .sum::<usize>(),
            want.len()
        );
    }
}

/// A hive-partitioned directory (`year=…/region=…/`, as pyarrow's `write_to_dataset` and
/// DuckDB's `PARTITION_BY` write it), with a null partition and files the listing skips.
fn hive_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let mut start = 0;
    for (year, region) in [
        ("2023", "eu"),
        ("2023", "us"),
        ("2024", "eu"),
        ("2024", "__HIVE_DEFAULT_PARTITION__"),
    ] {
        let sub = dir
            .path()
            .join(format!("year={year}"))
            .join(format!("region={region}"));
        std::fs::create_dir_all(&sub).unwrap();
        part(&sub.join("part-0.parquet"), start, 400, 150, true);
        start += 1000;
    }
    std::fs::write(dir.path().join("_SUCCESS"), "").unwrap();
    std::fs::create_dir_all(dir.path().join("_temporary/year=1999/region=x")).unwrap();
    part(
        &dir.path().join("_temporary/year=1999/region=x/p.parquet"),
        0,
        10,
        10,
        true,
    );
    dir
}

type HiveRow = (i64, Option<i64>, Option<String>);

/// `got` equals `want`; else the counts and the first difference.
fn same_rows(got: &[HiveRow], want: &[HiveRow], ctx: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{ctx}: {} rows, want {}; first difference at {at:?}: {:?} against {:?}",
            got.len(),
            want.len(),
            at.map(|i| &got[i]),
            at.map(|i| &want[i])
        );
    }
}

/// The ids, years and regions of `batches` (of the scan's schema), in order.
fn hive_rows(batches: &[RecordBatch]) -> Vec<HiveRow> {
    use arrow::array::{Array, AsArray};
    use arrow::datatypes::Int64Type;
    let mut out = Vec::new();
    for b in batches {
        let id = b.column_by_name("id").unwrap().as_primitive::<Int64Type>();
        let year = b
            .column_by_name("year")
            .map(|c| c.as_primitive::<Int64Type>().clone());
        let region = b
            .column_by_name("region")
            .map(|c| c.as_string::<i32>().clone());
        for i in 0..b.num_rows() {
            out.push((
                id.value(i),
                year.as_ref()
                    .and_then(|y| y.is_valid(i).then(|| y.value(i))),
                region
                    .as_ref()
                    .and_then(|r| r.is_valid(i).then(|| r.value(i).to_string())),
            ));
        }
    }
    out
}

#[test]
fn hive_partitions_are_typed_columns_and_prune_whole_directories() {
    let dir = hive_dir();
    let region = |k: i64| match k / 1000 {
        0 | 2 => Some("eu".to_string()),
        1 => Some("us".to_string()),
        _ => None,
    };
    let year = |k: i64| if k < 2000 { 2023 } else { 2024 };
    let all: Vec<i64> = (0..4).flat_map(|f| f * 1000..f * 1000 + 400).collect();
    for device in devices() {
        let scan = Scan::builder(dir.path())
            .with_device(device)
            .build()
            .unwrap();
        assert_eq!(
            scan.files().len(),
            4,
            "{device}: _temporary and _SUCCESS skipped"
        );
        let names: Vec<(&str, DataType)> = (scan.schema().fields().iter())
            .map(|f| (f.name().as_str(), f.data_type().clone()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("id", DataType::Int64),
                ("s", DataType::Utf8),
                ("year", DataType::Int64),
                ("region", DataType::Utf8)
            ],
            "{device}"
        );
        let got = hive_rows(&host(&scan.load().unwrap().batches));
        let mut want: Vec<_> = all.iter().map(|&k| (k, Some(year(k)), region(k))).collect();
        // files in path order: region=__HIVE_DEFAULT_PARTITION__ before region=eu
        want.sort_by_key(|r| (r.1, r.2.clone().unwrap_or_default(), r.0));
        same_rows(&got, &want, &format!("{device}"));
        // the stream appends them too
        let streamed: Vec<LoadedBatch> = scan.batches().collect::<cuparquet::Result<_>>().unwrap();
        same_rows(
            &hive_rows(&host(&streamed)),
            &want,
            &format!("{device} stream"),
        );

        // filters on partition columns prune whole directories; the rest filters the rows
        let scan = Scan::builder(dir.path())
            .with_device(device)
            .with_row_filter("year = 2024 AND (region IS NULL OR id < 2100)")
            .build()
            .unwrap();
        assert_eq!(scan.files().len(), 2, "{device}: only year=2024 opened");
        let got = hive_rows(&host(&scan.load().unwrap().batches));
        let mut want: Vec<_> = (all.iter().copied())
            .filter(|&k| year(k) == 2024 && (region(k).is_none() || k < 2100))
            .map(|k| (k, Some(2024), region(k)))
            .collect();
        want.sort_by_key(|r| (r.2.clone().unwrap_or_default(), r.0));
        same_rows(&got, &want, &format!("{device} filtered"));
        assert!(!got.is_empty());
        let scan = Scan::builder(dir.path())
            .with_device(device)
            .with_row_filter("NOT region LIKE 'e%' AND id >= 0")
            .with_columns(["id", "region"])
            .build()
            .unwrap();
        assert_eq!(
            scan.files().len(),
            1,
            "{device}: NULL region is not 'NOT LIKE'"
        );
        let batches = host(&scan.load().unwrap().batches);
        assert_eq!(batches[0].num_columns(), 2, "{device}: id, region");
        assert!(hive_rows(&batches)
            .iter()
            .all(|r| r.2.as_deref() == Some("us")));
        // every file ruled out: an empty scan of the files' schema
        let scan = Scan::builder(dir.path())
            .with_device(device)
            .with_filter("year > 2030")
            .build()
            .unwrap();
        let loaded = scan.load().unwrap();
        assert_eq!(
            loaded.batches.iter().map(|b| b.num_rows()).sum::<usize>(),
            0
        );
        assert_eq!(loaded.schema.fields().len(), 4);
    }
    // globs, relative to their first wildcard's directory
    let pattern = format!("{}/year=2024/*/*.parquet", dir.path().display());
    let scan = Scan::builder(&pattern)
        .with_device(Device::Host)
        .build()
        .unwrap();
    assert_eq!(scan.files().len(), 2);
    let fields: Vec<&str> = scan
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().as_str())
        .collect();
    assert_eq!(fields, ["id", "s", "region"]);
    let pattern = format!("{}/**/*.parquet", dir.path().display());
    let scan = Scan::builder(&pattern)
        .with_device(Device::Host)
        .build()
        .unwrap();
    assert_eq!(scan.files().len(), 4, "** descends, _temporary skipped");
    // errors name the file and what is wrong
    let e = Scan::builder(dir.path())
        .with_row_filter("year = 'x'")
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("partition column 'year' holds integers"), "{e}");
    let e = Scan::builder(format!("{}/nothing-*.parquet", dir.path().display()))
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("no file matches this pattern"), "{e}");
    std::fs::create_dir_all(dir.path().join("year=2025")).unwrap();
    part(&dir.path().join("year=2025/odd.parquet"), 0, 5, 5, true);
    let e = Scan::builder(dir.path()).build().unwrap_err().to_string();
    assert!(
        e.contains("odd.parquet") && e.contains("differ from"),
        "{e}"
    );
}
