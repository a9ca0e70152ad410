//! Row selections: what a load with arrow-rs's `RowSelection` (or an access plan of skip / scan
//! / select per row group, DataFusion's shape) returns equals arrow-rs reading with the same
//! selection; row groups with no selected row are not read; bad selections are clear errors.
//! On the host and, where there is one, on the GPU.

use crate::common;

use std::path::Path;
use std::sync::Arc;

use arrow::record_batch::{RecordBatch, RecordBatchReader};
use common::*;
use cuparquet::plan::{RowGroupAccess, RowSelection, RowSelector};
use cuparquet::{Device, LoadedBatch, Scan};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::properties::WriterProperties;

fn devices() -> Vec<Device> {
    let mut v = vec![Device::Host];
    if gpu_available("row selections on cuda:0") {
        v.push(Device::Cuda(0));
    }
    v
}

/// arrow-rs's read of `row_groups` (ascending) with `sel`.
fn arrow_rs(path: &Path, row_groups: Option<&[usize]>, sel: &RowSelection) -> RecordBatch {
    let f = std::fs::File::open(path).unwrap();
    let mut b = ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
    if let Some(r) = row_groups {
        b = b.with_row_groups(r.to_vec());
    }
    let r = b.with_row_selection(sel.clone()).build().unwrap();
    let schema = r.schema();
    let batches: Vec<RecordBatch> = r.map(|b| b.unwrap()).collect();
    concat(&schema, &batches)
}

/// A random selection of `total` rows: runs of skips and selects of random lengths (long
/// skips now and then, so whole pages and row groups drop out).
fn random_selection(r: &mut Rng, total: usize) -> RowSelection {
    let mut v = Vec::new();
    let mut at = 0;
    let mut skip = r.below(2) == 0;
    while at < total {
        let n = if r.below(5) == 0 {
            1 + r.below(3000) as usize
        } else {
            1 + r.below(300) as usize
        }
        .min(total - at);
        v.push(if skip {
            RowSelector::skip(n)
        } else {
            RowSelector::select(n)
        });
        at += n;
        skip = !skip;
    }
    v.into()
}

fn file(dir: &Path, rows: usize, rg_rows: usize) -> std::path::PathBuf {
    let path = dir.join(format!("sel_{rows}_{rg_rows}.parquet"));
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(rg_rows))
        .set_data_page_row_count_limit(500)
        .set_write_batch_size(100)
        .build();
    write(&path, &[flat_batch(rows, 11)], props);
    path
}

fn to_host(batches: &[LoadedBatch]) -> Vec<RecordBatch> {
    batches.iter().map(|b| b.to_host().unwrap()).collect()
}

#[test]
fn random_row_selections_equal_arrow_rs() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        file(dir.path(), 12_000, 2_000),
        file(dir.path(), 9_000, 9_000),
    ];
    let mut r = Rng(0x5eed);
    // with the page index, the pages without a selected row are not read
    let mut fewer_bytes = 0;
    for (device, page_index) in devices().into_iter().flat_map(|d| [(d, false), (d, true)]) {
        for f in &files {
            let md = Scan::builder(f)
                .with_device(Device::Host)
                .build()
                .unwrap()
                .files()[0]
                .metadata()
                .metadata
                .clone();
            let n_rg = md.num_row_groups();
            for case in 0..6 {
                // every row group, or an ascending subset of them
                let rgs: Option<Vec<usize>> =
                    (case % 2 == 1 && n_rg > 1).then(|| (0..n_rg).filter(|i| i % 2 == 0).collect());
                let total: usize = match &rgs {
                    Some(v) => v.iter().map(|&g| md.row_group(g).num_rows() as usize).sum(),
                    None => md.file_metadata().num_rows() as usize,
                };
                let sel = random_selection(&mut r, total);
                let want = arrow_rs(f, rgs.as_deref(), &sel);
                for batch_rows in [700usize, 1 << 20] {
                    let what = format!(
                        "{} on {device}, case {case}, batches of {batch_rows}, page index \
                         {page_index}",
                        f.display()
                    );
                    let builder = || {
                        let mut b = Scan::builder(f)
                            .with_device(device)
                            .with_batch_rows(batch_rows)
                            .with_page_index(page_index);
                        if let Some(g) = &rgs {
                            b = b.with_row_groups(g.iter().copied());
                        }
                        b
                    };
                    let reader = builder().with_row_selection(sel.clone()).build().unwrap();
                    assert_eq!(
                        reader.files()[0].plan().num_rows,
                        sel.row_count() as u64,
                        "{what}"
                    );
                    let whole = builder().build().unwrap().files()[0].plan().request_bytes();
                    let read = reader.files()[0].plan().request_bytes();
                    if page_index {
                        assert!(read <= whole, "{what}: {read} > {whole}");
                        fewer_bytes += usize::from(read < whole);
                    }
                    let streamed: Vec<LoadedBatch> =
                        reader.batches().collect::<cuparquet::Result<_>>().unwrap();
                    assert!(
                        streamed.iter().all(|b| b.num_rows() <= batch_rows),
                        "{what}"
                    );
                    let n: u64 = streamed
                        .iter()
                        .flat_map(|b| b.rows().iter().map(|r| r.rows.end - r.rows.start))
                        .sum();
                    assert_eq!(
                        n,
                        sel.row_count() as u64,
                        "{what}: rows() count the selected rows"
                    );
                    assert_same(&what, &concat(reader.schema(), &to_host(&streamed)), &want);
                    let loaded = reader.load().unwrap();
                    assert_same(
                        &what,
                        &concat(reader.schema(), &to_host(&loaded.batches)),
                        &want,
                    );
                    assert_eq!(loaded.report.loads[0].bytes_read, read, "{what}");
                }
            }
        }
    }
    assert!(
        fewer_bytes > 0,
        "no selection read fewer bytes with the page index"
    );
}

#[test]
fn access_plans_skip_scan_and_select_per_row_group() {
    let dir = tempfile::tempdir().unwrap();
    let f = file(dir.path(), 10_000, 2_000); // 5 row groups
    let access = vec![
        RowGroupAccess::Scan,
        RowGroupAccess::Skip,
        RowGroupAccess::Selection(
            vec![
                RowSelector::skip(10),
                RowSelector::select(990),
                RowSelector::skip(1000),
            ]
            .into(),
        ),
        RowGroupAccess::Skip,
        RowGroupAccess::Selection(vec![RowSelector::select(5), RowSelector::skip(1995)].into()),
    ];
    // the same rows as one selection over row groups 0, 2 and 4
    let sel: RowSelection = vec![
        RowSelector::select(2000),
        RowSelector::skip(10),
        RowSelector::select(990),
        RowSelector::skip(1000),
        RowSelector::select(5),
        RowSelector::skip(1995),
    ]
    .into();
    let want = arrow_rs(&f, Some(&[0, 2, 4]), &sel);
    let whole = Scan::builder(&f)
        .with_device(Device::Host)
        .build()
        .unwrap()
        .files()[0]
        .plan()
        .request_bytes();
    for device in devices() {
        let reader = Scan::builder(&f)
            .with_device(device)
            .with_access_plan(access.clone())
            .build()
            .unwrap();
        // skipped row groups are not read
        assert_eq!(
            reader.files()[0].plan().row_groups,
            vec![0, 2, 4],
            "{device}"
        );
        assert!(reader.files()[0].plan().request_bytes() < whole);
        let got: Vec<LoadedBatch> = reader.batches().collect::<cuparquet::Result<_>>().unwrap();
        assert_same(
            &format!("{device} access plan"),
            &concat(reader.schema(), &to_host(&got)),
            &want,
        );
    }
    // errors: an access plan of the wrong length, a selection longer than the rows
    let e = Scan::builder(&f)
        .with_device(Device::Host)
        .with_access_plan(vec![RowGroupAccess::Scan])
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 entries") && e.contains("5 row groups"), "{e}");
    let e = Scan::builder(&f)
        .with_device(Device::Host)
        .with_row_selection(vec![RowSelector::select(10_001)].into())
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("10001 rows") && e.contains(&f.display().to_string()),
        "{e}"
    );
    let e = Scan::builder(&f)
        .with_device(Device::Host)
        .with_access_plan(vec![
            RowGroupAccess::Skip,
            RowGroupAccess::Skip,
            RowGroupAccess::Selection(vec![RowSelector::select(2001)].into()),
            RowGroupAccess::Skip,
            RowGroupAccess::Skip,
        ])
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("row group 2") && e.contains("2001"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Exact row filters (`with_row_filter`): the rows arrow-rs's compute kernels keep.

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date64Array, Decimal128Array, Decimal256Array, Decimal32Array,
    Decimal64Array, Float32Array, Float64Array, Int16Array, Int32Array, Int64Array, Scalar,
    StringArray, TimestampMicrosecondArray, TimestampMillisecondArray, TimestampSecondArray,
    UInt32Array, UInt64Array,
};
use arrow::compute::kernels::cmp::{eq, gt, gt_eq, lt, lt_eq, neq};
use arrow::compute::{and_kleene, filter_record_batch, is_not_null, is_null, not, or_kleene};
use arrow::datatypes::i256;
use cuparquet::plan::{CmpOp, Literal, Predicate};
use parquet::arrow::ProjectionMask;

type Oracle = fn(&RecordBatch) -> BooleanArray;

fn col<'a>(b: &'a RecordBatch, name: &str) -> &'a ArrayRef {
    b.column_by_name(name).unwrap()
}

fn and(a: BooleanArray, b: BooleanArray) -> BooleanArray {
    and_kleene(&a, &b).unwrap()
}

fn or(a: BooleanArray, b: BooleanArray) -> BooleanArray {
    or_kleene(&a, &b).unwrap()
}

fn scalar<A: Array>(a: A) -> Scalar<A> {
    Scalar::new(a)
}

/// arrow-rs's read of `path` (the leaves of `columns`, or every column), and of every column.
fn read_all(path: &Path, columns: Option<&[&str]>) -> (RecordBatch, RecordBatch) {
    let read = |cols: Option<&[&str]>| {
        let f = std::fs::File::open(path).unwrap();
        let mut b = ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
        if let Some(c) = cols {
            let mask = ProjectionMask::columns(b.parquet_schema(), c.iter().copied());
            b = b.with_projection(mask);
        }
        let r = b.build().unwrap();
        let schema = r.schema();
        let batches: Vec<RecordBatch> = r.map(|b| b.unwrap()).collect();
        concat(&schema, &batches)
    };
    (read(columns), read(None))
}

/// Loads `path` with row filter `expr` (projection `columns`) on `device` and checks the
/// result against `oracle` over arrow-rs's read; returns the rows kept.
fn check_row_filter(
    path: &Path,
    device: Device,
    expr: &str,
    oracle: Oracle,
    columns: Option<&[&str]>,
    page_index: bool,
) -> usize {
    let (asked, full) = read_all(path, columns);
    let mask = oracle(&full);
    let expected = filter_record_batch(&asked, &mask).unwrap();
    let mut b = Scan::builder(path)
        .with_device(device)
        .with_batch_rows(4096)
        .with_page_index(page_index)
        .with_row_filter(expr);
    if let Some(c) = columns {
        b = b.with_columns(c.iter().copied());
    }
    let reader = b.build().unwrap_or_else(|e| panic!("{expr}: {e}"));
    let loaded = reader
        .load()
        .unwrap_or_else(|e| panic!("{expr} on {device:?}: {e}"));
    let got = concat(reader.schema(), &to_host(&loaded.batches));
    let ctx = format!("`{expr}` on {device:?}, columns {columns:?}, page index {page_index}");
    assert_eq!(got.num_rows(), expected.num_rows(), "{ctx}: rows");
    assert_eq!(got.num_columns(), expected.num_columns(), "{ctx}: columns");
    for (i, f) in expected.schema().fields().iter().enumerate() {
        assert_eq!(reader.schema().field(i).name(), f.name(), "{ctx}");
        assert_eq!(
            got.column(i).as_ref(),
            expected.column(i).as_ref(),
            "{ctx}: column {}",
            f.name()
        );
    }
    assert!(
        loaded.batches.iter().all(|b| b.num_rows() > 0),
        "{ctx}: an empty batch"
    );
    expected.num_rows()
}

fn row_filter_cases() -> Vec<(&'static str, Oracle)> {
    vec![
        ("i32 > 1000 AND i32 <= 30000", |b| {
            and(
                gt(col(b, "i32"), &Int32Array::new_scalar(1000)).unwrap(),
                lt_eq(col(b, "i32"), &Int32Array::new_scalar(30000)).unwrap(),
            )
        }),
        ("i64 < 0 OR utf8 = 's7'", |b| {
            or(
                lt(col(b, "i64"), &Int64Array::new_scalar(0)).unwrap(),
                eq(col(b, "utf8"), &StringArray::new_scalar("s7")).unwrap(),
            )
        }),
        ("NOT f64 < 100000", |b| {
            not(&lt(col(b, "f64"), &Float64Array::new_scalar(100000.0)).unwrap()).unwrap()
        }),
        ("f32 != 3 AND f64 >= 1000.5", |b| {
            and(
                neq(col(b, "f32"), &Float32Array::new_scalar(3.0)).unwrap(),
                gt_eq(col(b, "f64"), &Float64Array::new_scalar(1000.5)).unwrap(),
            )
        }),
        ("utf8 IN ('s1', 's2', 's3') AND NOT i8 IS NULL", |b| {
            let s = |v| eq(col(b, "utf8"), &StringArray::new_scalar(v)).unwrap();
            and(
                or(or(s("s1"), s("s2")), s("s3")),
                is_not_null(col(b, "i8")).unwrap(),
            )
        }),
        ("i8 IS NULL", |b| is_null(col(b, "i8")).unwrap()),
        ("bool = true AND u32 != 5", |b| {
            and(
                eq(col(b, "bool"), &BooleanArray::new_scalar(true)).unwrap(),
                neq(col(b, "u32"), &UInt32Array::new_scalar(5)).unwrap(),
            )
        }),
        ("u64 > 100000000000", |b| {
            gt(col(b, "u64"), &UInt64Array::new_scalar(100_000_000_000)).unwrap()
        }),
        ("i16 < 2.5", |b| {
            lt_eq(col(b, "i16"), &Int16Array::new_scalar(2)).unwrap()
        }),
        ("i32 = 0.5", |b| {
            eq(col(b, "i32"), &Int32Array::new_scalar(i32::MIN)).unwrap()
        }),
        ("date32 >= '2019-06-01'", |b| {
            gt_eq(
                col(b, "date32"),
                &arrow::array::Date32Array::new_scalar(18048),
            )
            .unwrap()
        }),
        // arrow-rs writes Date64 as a plain INT64 (milliseconds)
        ("date64 > 86400000 AND time32s < 40000", |b| {
            let t = arrow::array::Time32SecondArray::new_scalar(40000);
            and(
                gt(col(b, "date64"), &Date64Array::new_scalar(86_400_000)).unwrap(),
                lt(col(b, "time32s"), &t).unwrap(),
            )
        }),
        ("date64 > 86400000", |b| {
            gt(col(b, "date64"), &Date64Array::new_scalar(86_400_000)).unwrap()
        }),
        // arrow-rs writes second timestamps as a plain INT64
        ("ts_s < 1641600", |b| {
            lt(col(b, "ts_s"), &TimestampSecondArray::new_scalar(1_641_600)).unwrap()
        }),
        ("ts_ms_utc >= '1970-01-01T01:00:00Z'", |b| {
            let v = TimestampMillisecondArray::from(vec![3_600_000]).with_timezone("UTC");
            gt_eq(col(b, "ts_ms_utc"), &scalar(v)).unwrap()
        }),
        ("ts_us < '1970-01-02T00:00:00+02:00'", |b| {
            let v = TimestampMicrosecondArray::from(vec![79_200_000_000]).with_timezone("+02:00");
            lt(col(b, "ts_us"), &scalar(v)).unwrap()
        }),
        ("dec128 > 12.5", |b| {
            let v = Decimal128Array::from(vec![125_000_000_000i128])
                .with_precision_and_scale(38, 10)
                .unwrap();
            gt(col(b, "dec128"), &scalar(v)).unwrap()
        }),
        ("dec32 <= -1.5", |b| {
            let v = Decimal32Array::from(vec![-150])
                .with_precision_and_scale(7, 2)
                .unwrap();
            lt_eq(col(b, "dec32"), &scalar(v)).unwrap()
        }),
        ("dec64 < 100", |b| {
            let v = Decimal64Array::from(vec![100_000])
                .with_precision_and_scale(15, 3)
                .unwrap();
            lt(col(b, "dec64"), &scalar(v)).unwrap()
        }),
        ("dec256 > -1000", |b| {
            let v = Decimal256Array::from(vec![i256::from_i128(-100_000_000)])
                .with_precision_and_scale(50, 5)
                .unwrap();
            gt(col(b, "dec256"), &scalar(v)).unwrap()
        }),
        // the language as SQL writes it: LIKE (on the device: a kernel for plain strings),
        // BETWEEN, typed literals, bare booleans, column pairs
        ("utf8 LIKE 's1%'", |b| {
            arrow::compute::kernels::comparison::like(
                col(b, "utf8"),
                &StringArray::new_scalar("s1%"),
            )
            .unwrap()
        }),
        ("utf8 NOT LIKE '%3' AND large_utf8 LIKE '%_%'", |b| {
            use arrow::compute::kernels::comparison::{like, nlike};
            let large = arrow::array::LargeStringArray::new_scalar("%_%");
            and(
                nlike(col(b, "utf8"), &StringArray::new_scalar("%3")).unwrap(),
                like(col(b, "large_utf8"), &large).unwrap(),
            )
        }),
        ("dict_utf8 LIKE '%e%'", |b| {
            let d = arrow::compute::cast(col(b, "dict_utf8"), &arrow::datatypes::DataType::Utf8)
                .unwrap();
            arrow::compute::kernels::comparison::like(&d, &StringArray::new_scalar("%e%")).unwrap()
        }),
        ("i32 BETWEEN -1000 AND 30000", |b| {
            and(
                gt_eq(col(b, "i32"), &Int32Array::new_scalar(-1000)).unwrap(),
                lt_eq(col(b, "i32"), &Int32Array::new_scalar(30000)).unwrap(),
            )
        }),
        ("bool AND NOT i8 IS NULL", |b| {
            and(
                eq(col(b, "bool"), &BooleanArray::new_scalar(true)).unwrap(),
                is_not_null(col(b, "i8")).unwrap(),
            )
        }),
        ("NOT bool", |b| {
            use arrow::array::AsArray;
            not(col(b, "bool").as_boolean()).unwrap()
        }),
        ("date32 >= DATE '2019-06-01'", |b| {
            gt_eq(
                col(b, "date32"),
                &arrow::array::Date32Array::new_scalar(18048),
            )
            .unwrap()
        }),
        ("i32 < i64 OR i16 = i8", |b| {
            let wide = |c: &str| {
                arrow::compute::cast(col(b, c), &arrow::datatypes::DataType::Int64).unwrap()
            };
            or(
                lt(&wide("i32"), col(b, "i64")).unwrap(),
                eq(&wide("i16"), &wide("i8")).unwrap(),
            )
        }),
        ("u32 >= i16", |b| {
            let wide = |c: &str| {
                arrow::compute::cast(col(b, c), &arrow::datatypes::DataType::Int64).unwrap()
            };
            gt_eq(&wide("u32"), &wide("i16")).unwrap()
        }),
        ("dict_utf8 = 'red' OR dict_utf8 IS NULL", |b| {
            let d = arrow::compute::cast(col(b, "dict_utf8"), &arrow::datatypes::DataType::Utf8)
                .unwrap();
            or(
                eq(&d, &StringArray::new_scalar("red")).unwrap(),
                is_null(&d).unwrap(),
            )
        }),
    ]
}

/// Under a row filter, batches hold about `batch_rows` kept rows (filtered batches of a wave
/// gathered: on the host by arrow-rs, on a device by its join kernels), not the few rows kept
/// of each batch read; never more than asked. Flat columns of every type, and lists, structs
/// and maps.
#[test]
fn filtered_batches_hold_about_the_rows_asked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gather.parquet");
    let props = || {
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(20_000))
            .build()
    };
    write(&path, &[flat_batch(100_000, 9)], props());
    // nested columns, and `k`: a tenth of the rows 3
    let nested = dir.path().join("gather-nested.parquet");
    let b = nested_batch(100_000);
    let k = Arc::new(arrow::array::Int32Array::from_iter_values(
        (0..100_000).map(|i| (i * 7) % 10),
    ));
    let schema = b.schema();
    let mut cols: Vec<(&str, ArrayRef)> = vec![("k", k)];
    for (f, c) in schema.fields().iter().zip(b.columns()) {
        cols.push((f.name().as_str(), Arc::clone(c)));
    }
    let b = RecordBatch::try_from_iter(cols).unwrap();
    write(&nested, &[b], props());
    for device in devices() {
        // utf8 is s0..s49: 's1%' keeps s1 and s10..s19, about a fifth of the non-null rows
        let like = |all: &RecordBatch| {
            arrow::compute::kernels::comparison::like(
                col(all, "utf8"),
                &StringArray::new_scalar("s1%"),
            )
            .unwrap()
        };
        let k3 = |all: &RecordBatch| {
            arrow::compute::kernels::cmp::eq(
                col(all, "k"),
                &arrow::array::Int32Array::new_scalar(3),
            )
            .unwrap()
        };
        type Oracle<'a> = &'a dyn Fn(&RecordBatch) -> BooleanArray;
        let cases: [(&Path, &str, Oracle<'_>, (usize, usize)); 2] = [
            (&path, "utf8 LIKE 's1%'", &like, (15_000, 25_000)),
            (&nested, "k = 3", &k3, (9_000, 11_000)),
        ];
        for (file, expr, oracle, (lo, hi)) in cases {
            let what = format!("{device}, {expr}");
            // a device reads the file in waves of one row group each (the stream's first
            // wave smaller still): batches are joined over the waves
            let reader = Scan::builder(file)
                .with_device(device)
                .with_batch_rows(4096)
                .with_row_filter(expr)
                .with_tuning(cuparquet::config::Tuning {
                    wave_bytes: Some(1),
                    ..Default::default()
                })
                .build()
                .unwrap();
            let loaded = reader
                .load()
                .unwrap_or_else(|e| panic!("{what}: the load failed: {e}"));
            let sizes: Vec<usize> = loaded.batches.iter().map(|b| b.num_rows()).collect();
            let kept: usize = sizes.iter().sum();
            eprintln!("{what}: loaded batches of {sizes:?}");
            assert!(kept > lo && kept < hi, "{what}: {kept}");
            assert!(
                sizes.iter().all(|&n| n > 0 && n <= 4096),
                "{what}: {sizes:?}"
            );
            // about a fifth (a tenth) of 4096 read per batch: gathered, the batches average
            // well above that
            assert!(
                kept / sizes.len() > 3_000,
                "{what}: {} batches: {sizes:?}",
                sizes.len()
            );
            eprintln!("{what}: batches of {sizes:?}");
            // at most one batch short of 3/4 of the rows asked: gathered across waves too
            assert!(
                sizes.iter().filter(|&&n| n < 3072).count() <= 1,
                "{what}: {sizes:?}"
            );
            // the stream's batches are the load's (gathered across waves as well)
            let streamed: Vec<usize> = reader.batches().map(|b| b.unwrap().num_rows()).collect();
            assert_eq!(streamed, sizes, "{what}: the stream");
            // each batch's rows add up to its spans
            for b in &loaded.batches {
                let spans: u64 = b.rows().iter().map(|r| r.rows.end - r.rows.start).sum();
                assert!(spans >= b.num_rows() as u64, "{what}");
            }
            // and they are the rows arrow-rs keeps
            let (all, _) = read_all(file, None);
            let want = filter_record_batch(&all, &oracle(&all)).unwrap();
            let got = concat(reader.schema(), &to_host(&loaded.batches));
            assert_eq!(got.columns(), want.columns(), "{what}");
        }
    }
}

#[test]
fn row_filters_equal_arrow_rs_compute_filters() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("row_filter.parquet");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(6000))
        .set_data_page_row_count_limit(500)
        .set_write_batch_size(100)
        .build();
    write(&path, &[flat_batch(20_000, 5)], props);
    let (mut some, mut total) = (0, 0);
    for device in devices() {
        for (expr, oracle) in row_filter_cases() {
            for page_index in [false, true] {
                let n = check_row_filter(&path, device, expr, oracle, None, page_index);
                some += (n > 0 && n < 20_000) as usize;
                total += 1;
            }
            // the filter's columns left out of the output
            check_row_filter(&path, device, expr, oracle, Some(&["utf8", "f64"]), false);
        }
    }
    // the cases are not trivial: most keep some rows and drop others
    assert!(
        some * 10 >= total * 8,
        "{some} of {total} cases kept some rows"
    );
}

/// Field `i` of struct column `s`, null where `s` is (SQL: a field of a null struct is null).
fn s_field(b: &RecordBatch, i: usize) -> (ArrayRef, BooleanArray) {
    let s = col(b, "s")
        .as_any()
        .downcast_ref::<arrow::array::StructArray>()
        .unwrap();
    (Arc::clone(s.column(i)), is_not_null(s).unwrap())
}

fn struct_oracle(b: &RecordBatch) -> BooleanArray {
    let (a, valid) = s_field(b, 0);
    let (sb, _) = s_field(b, 1);
    and(
        and(
            gt(&a, &Int32Array::new_scalar(100)).unwrap(),
            neq(&sb, &StringArray::new_scalar("b5")).unwrap(),
        ),
        valid,
    )
}

fn null_oracle(b: &RecordBatch) -> BooleanArray {
    let (sb, valid) = s_field(b, 1);
    or(is_null(&sb).unwrap(), not(&valid).unwrap())
}

#[test]
fn row_filters_on_struct_fields_and_beside_nested_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("row_filter_nested.parquet");
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(700))
        .build();
    write(&path, &[nested_batch(3000)], props);
    for device in devices() {
        for columns in [None, Some(&["s.b", "list_i32"][..]), Some(&["id", "m"][..])] {
            let expr = "s.a > 100 AND s.b != 'b5'";
            let n = check_row_filter(&path, device, expr, struct_oracle, columns, false);
            assert!(n > 0 && n < 3000, "{expr}: {n}");
            let n = check_row_filter(&path, device, "s.b IS NULL", null_oracle, columns, false);
            assert!(n > 0 && n < 3000, "s.b IS NULL: {n}");
        }
    }
}

#[test]
fn typed_row_predicates_equal_their_text_and_bad_filters_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = file(dir.path(), 5000, 1000);
    let typed = Predicate::And(
        Box::new(Predicate::Cmp {
            column: vec!["i32".into()],
            op: CmpOp::Ge,
            value: Literal::Int(500),
        }),
        Box::new(Predicate::Not(Box::new(Predicate::IsNull {
            column: vec!["utf8".into()],
            negated: false,
        }))),
    );
    for device in devices() {
        let load = |b: cuparquet::ScanBuilder| {
            let r = b.with_device(device).build().unwrap();
            concat(r.schema(), &to_host(&r.load().unwrap().batches))
        };
        let a = load(Scan::builder(&path).with_row_predicate(typed.clone()));
        let b = load(Scan::builder(&path).with_row_filter("i32 >= 500 AND utf8 IS NOT NULL"));
        assert!(a.num_rows() > 0 && a.num_rows() < 5000);
        assert_eq!(a, b);
    }
    for (expr, says) in [
        ("nope > 1", "unknown column 'nope'"),
        ("i32 > 'x'", "cannot compare column 'i32'"),
        ("i32 >", "expected"),
    ] {
        let e = Scan::builder(&path)
            .with_device(Device::Host)
            .with_row_filter(expr)
            .build()
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{expr}: {e}");
    }
}

/// A column against a column of the same type (dates, doubles with NaN, decimals of one scale,
/// unsigned integers; nulls on both sides): on the GPU by its kernel for device loads, equal to
/// arrow-rs's comparison (NaN as IEEE 754: only `!=` holds).
#[test]
fn same_type_column_comparisons_equal_arrow_rs() {
    use arrow::array::{Date32Array, Decimal128Array, Float64Array, UInt16Array};
    use arrow::compute::kernels::cmp::{gt_eq, lt, neq};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("columns.parquet");
    let n = 20_000usize;
    let r = |i: usize, k: u64| {
        ((i as u64).wrapping_add(k.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
            .wrapping_mul(6364136223846793005)
            >> 33
    };
    let null = |i: usize, k: u64| r(i, k) % 11 == 0;
    let dates = |k: u64| {
        Arc::new(Date32Array::from_iter((0..n).map(|i| {
            (!null(i, k)).then(|| 9000 + (r(i, k + 1) % 60) as i32)
        }))) as ArrayRef
    };
    let doubles = |k: u64| {
        Arc::new(Float64Array::from_iter((0..n).map(|i| {
            (!null(i, k)).then(|| match r(i, k + 1) % 20 {
                0 => f64::NAN,
                x => x as f64 / 4.0,
            })
        }))) as ArrayRef
    };
    let decimals = |k: u64, p: u8| {
        Arc::new(
            Decimal128Array::from_iter(
                (0..n).map(|i| (!null(i, k)).then(|| (r(i, k + 1) % 40) as i128 - 20)),
            )
            .with_precision_and_scale(p, 2)
            .unwrap(),
        ) as ArrayRef
    };
    let unsigned = |k: u64| {
        Arc::new(UInt16Array::from_iter((0..n).map(|i| {
            (!null(i, k)).then(|| 65_000 + (r(i, k + 1) % 30) as u16)
        }))) as ArrayRef
    };
    let batch = RecordBatch::try_from_iter([
        ("d1", dates(1)),
        ("d2", dates(7)),
        ("f1", doubles(3)),
        ("f2", doubles(5)),
        ("x1", decimals(11, 15)),
        ("x2", decimals(13, 12)),
        ("u1", unsigned(17)),
        ("u2", unsigned(19)),
    ])
    .unwrap();
    write(
        &path,
        &[batch],
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(6000))
            .build(),
    );
    /// f1 op f2 as IEEE 754 compares, false on a null row.
    fn ieee(b: &RecordBatch, op: fn(f64, f64) -> bool) -> BooleanArray {
        let (x, y) = (col(b, "f1"), col(b, "f2"));
        let (x, y) = (
            x.as_any().downcast_ref::<Float64Array>().unwrap(),
            y.as_any().downcast_ref::<Float64Array>().unwrap(),
        );
        BooleanArray::from_iter(
            (0..b.num_rows())
                .map(|i| Some(x.is_valid(i) && y.is_valid(i) && op(x.value(i), y.value(i)))),
        )
    }
    let cases: Vec<(&str, Oracle)> = vec![
        ("d1 < d2", |b| lt(col(b, "d1"), col(b, "d2")).unwrap()),
        ("x1 >= x2", |b| {
            let t = arrow::datatypes::DataType::Decimal128(38, 2);
            let c = |n: &str| arrow::compute::cast(col(b, n), &t).unwrap();
            gt_eq(&c("x1"), &c("x2")).unwrap()
        }),
        ("u1 != u2", |b| neq(col(b, "u1"), col(b, "u2")).unwrap()),
        ("f1 <= f2", |b| ieee(b, |x, y| x <= y)),
        ("f1 != f2 AND d1 > d2", |b| {
            let d = arrow::compute::kernels::cmp::gt(col(b, "d1"), col(b, "d2")).unwrap();
            arrow::compute::and(&ieee(b, |x, y| x != y), &d).unwrap()
        }),
    ];
    for device in devices() {
        for (expr, oracle) in &cases {
            let kept = check_row_filter(&path, device, expr, *oracle, None, false);
            assert!(kept > 0 && kept < n, "{expr}: {kept}");
        }
    }
}
