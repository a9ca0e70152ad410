//! Several GPUs (`ScanBuilder::with_devices`): a load's passes spread over CUDA devices, the
//! batches equal to arrow-rs, in order, each on the device that decoded it. The one-device
//! case runs wherever there is a GPU (skipped with a printed reason where there is none,
//! failing under `CUPARQUET_REQUIRE_GPU=1`); the two-device case where there are two (skipped
//! with a printed reason otherwise).

use crate::common;

use std::io::Write as _;

use common::*;
use cuparquet::array::Location;
use cuparquet::Scan;

/// A file of 8 row groups of 25,000 rows (SNAPPY, dictionaries).
fn file(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("spread.parquet");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .set_max_row_group_row_count(Some(25_000))
        // pages of a few thousand rows, so that a small budget reads row groups in pieces
        .set_data_page_row_count_limit(2_000)
        .build();
    write(&p, &[flat_batch(200_000, 7)], props);
    p
}

/// Loads `p` spread over `ordinals` under `budget` a device: every batch in order, equal to
/// arrow-rs, on the device of its pass; each device did its passes.
fn check(p: &std::path::Path, ordinals: &[usize], budget: u64) {
    let want = oracle(p, &Projection::All, None).unwrap();
    let s = Scan::builder(p)
        .with_memory_budget(budget)
        .with_devices(ordinals.iter().copied())
        .build()
        .unwrap();
    let spread = s.spread().unwrap().clone();
    assert!(spread.passes.len() >= 2 * ordinals.len(), "{spread}");
    let got = s.load().unwrap();
    // each batch on the device its pass went to, in row-group order
    let mut k = 0;
    let mut last_rg = 0;
    for b in &got.batches {
        let rg = b.rows()[0].row_group;
        assert!(
            rg >= last_rg,
            "out of order: row group {rg} after {last_rg}"
        );
        last_rg = rg;
        while !spread.passes[k].row_groups.contains(&rg) {
            k += 1;
        }
        let device = spread.shares[spread.passes[k].device].device.ordinal;
        assert_eq!(b.location(), Location::Cuda(device), "row group {rg}");
    }
    let host: Vec<arrow::record_batch::RecordBatch> =
        got.batches.iter().map(|b| b.to_host().unwrap()).collect();
    let all = concat(&want.schema(), &host);
    assert_eq!(all.columns(), want.columns());
    for (w, share) in got.report.devices.iter().zip(&spread.shares) {
        assert_eq!(w.passes, share.passes.len(), "{w:?}");
        assert_eq!(w.rows, share.rows, "{w:?}");
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "spread over {ordinals:?}: {} passes in {:.1} ms; {:?}",
        spread.passes.len(),
        got.report.wall.as_secs_f64() * 1e3,
        got.report.devices
    );
}

#[test]
fn gpu_spread_over_one_device_equals_arrow_rs() {
    if !gpu_available("spread over one device") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = file(dir.path());
    check(&p, &[0], 1 << 30);
    // two files as one load: batches in file order, on the device
    std::fs::copy(&p, dir.path().join("spread-2.parquet")).unwrap();
    let s = Scan::builder([dir.path()])
        .with_memory_budget(1 << 30)
        .with_devices([0])
        .build()
        .unwrap();
    let got = s.load().unwrap();
    let files: Vec<String> = got
        .batches
        .iter()
        .map(|b| b.file().file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let mut sorted = files.clone();
    sorted.sort();
    assert_eq!(files, sorted);
    assert_eq!(
        got.batches.iter().map(|b| b.num_rows()).sum::<usize>(),
        400_000
    );
    assert!(got
        .batches
        .iter()
        .all(|b| b.location() == Location::Cuda(0)));
    // a row selection, under a budget small enough that row groups are read in pieces (by
    // their pages: a row group of this file needs ~30 MiB, a piece of one page ~14 MiB, and
    // the spread plans passes within half the budget): equal to the host's load of the same
    // selection
    use cuparquet::plan::{RowSelection, RowSelector};
    let sel = || {
        RowSelection::from(vec![
            RowSelector::skip(30_001),
            RowSelector::select(100_000),
            RowSelector::skip(7),
            RowSelector::select(3),
        ])
    };
    let want = Scan::builder(&p)
        .with_device(cuparquet::Device::Host)
        .with_row_selection(sel())
        .build()
        .unwrap()
        .load()
        .unwrap();
    let want = concat(
        &want.schema,
        &want
            .batches
            .iter()
            .map(|b| b.to_host().unwrap())
            .collect::<Vec<_>>(),
    );
    for budget in [1 << 30, 32 << 20] {
        let s = Scan::builder(&p)
            .with_row_selection(sel())
            .with_memory_budget(budget)
            .with_devices([0])
            .build()
            .unwrap();
        let got = s.load().unwrap();
        let host: Vec<_> = got.batches.iter().map(|b| b.to_host().unwrap()).collect();
        assert_eq!(concat(&want.schema(), &host), want, "budget {budget}");
        let pieces = (s.spread().unwrap().passes.windows(2))
            .filter(|w| w[0].row_groups == w[1].row_groups)
            .count();
        assert_eq!(
            pieces > 0,
            budget < 1 << 30,
            "budget {budget}: {}",
            s.spread().unwrap()
        );
        let _ = writeln!(
            std::io::stderr().lock(),
            "a row selection spread over cuda:0 under {budget} bytes: {} passes, {pieces} of \
             them pieces of a row group",
            s.spread().unwrap().passes.len(),
        );
    }
}

#[test]
fn gpu_spread_over_two_devices_equals_arrow_rs() {
    if !gpu_available("spread over two devices") {
        return;
    }
    let n = cuparquet::device::probe_cuda().devices;
    if n < 2 {
        let _ = writeln!(
            std::io::stderr().lock(),
            "skipping spread over two devices: this machine has {n} CUDA device(s)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    check(&file(dir.path()), &[0, 1], 1 << 30);
    check(&file(dir.path()), &[1, 0], 1 << 30);
}
