//! Row selections: what a load with arrow-rs's `RowSelection` (or an access plan of skip / scan
//! / select per row group, DataFusion's shape) returns equals arrow-rs reading with the same
//! selection; row groups with no selected row are not read; bad selections are clear errors.
//! On the host and, where there is one, on the GPU.

mod common;

use std::path::Path;

use arrow::record_batch::{RecordBatch, RecordBatchReader};
use common::*;
use cuparquet::plan::{RowGroupAccess, RowSelection, RowSelector};
use cuparquet::{Device, LoadedBatch, ParquetGpuReader};
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
            let md = ParquetGpuReader::builder(f)
                .with_device(Device::Host)
                .build()
                .unwrap()
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
                        let mut b = ParquetGpuReader::builder(f)
                            .with_device(device)
                            .with_batch_rows(batch_rows)
                            .with_page_index(page_index);
                        if let Some(g) = &rgs {
                            b = b.with_row_groups(g.iter().copied());
                        }
                        b
                    };
                    let reader = builder().with_row_selection(sel.clone()).build().unwrap();
                    assert_eq!(reader.plan().num_rows, sel.row_count() as u64, "{what}");
                    let whole = builder().build().unwrap().plan().request_bytes();
                    let read = reader.plan().request_bytes();
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
                    assert_eq!(loaded.report.bytes_read, read, "{what}");
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
    let whole = ParquetGpuReader::builder(&f)
        .with_device(Device::Host)
        .build()
        .unwrap()
        .plan()
        .request_bytes();
    for device in devices() {
        let reader = ParquetGpuReader::builder(&f)
            .with_device(device)
            .with_access_plan(access.clone())
            .build()
            .unwrap();
        // skipped row groups are not read
        assert_eq!(reader.plan().row_groups, vec![0, 2, 4], "{device}");
        assert!(reader.plan().request_bytes() < whole);
        let got: Vec<LoadedBatch> = reader.batches().collect::<cuparquet::Result<_>>().unwrap();
        assert_same(
            &format!("{device} access plan"),
            &concat(reader.schema(), &to_host(&got)),
            &want,
        );
    }
    // errors: an access plan of the wrong length, a selection longer than the rows
    let e = ParquetGpuReader::builder(&f)
        .with_device(Device::Host)
        .with_access_plan(vec![RowGroupAccess::Scan])
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 entries") && e.contains("5 row groups"), "{e}");
    let e = ParquetGpuReader::builder(&f)
        .with_device(Device::Host)
        .with_row_selection(vec![RowSelector::select(10_001)].into())
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("10001 rows") && e.contains(&f.display().to_string()),
        "{e}"
    );
    let e = ParquetGpuReader::builder(&f)
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
