//! nvCOMP on the device: pages of the codecs it takes decompressed by it, equal to arrow-rs,
//! and damaged pages refused clearly. Each test skips with a printed reason where there is no
//! CUDA device or no nvCOMP, and fails under `CUPARQUET_REQUIRE_GPU=1` /
//! `CUPARQUET_REQUIRE_NVCOMP=1` (set on the GPU machine when the nvCOMP wheel was carried
//! there; `CUPARQUET_NVCOMP` points at it).

use crate::common;

use std::io::Write as _;

use common::*;
use cuparquet::{Device, Scan};

/// Whether nvCOMP is installed for the nvCOMP tests; without it, prints why `what` is skipped
/// — or panics when `CUPARQUET_REQUIRE_NVCOMP=1` (set on the GPU machine when the wheel was
/// carried there).
fn nvcomp_available(what: &str) -> bool {
    match cuparquet::device::nvcomp::nvcomp() {
        Ok(Some(_)) => true,
        found => {
            let why = match found {
                Err(e) => e.to_string(),
                _ => "nvCOMP not found (CUPARQUET_NVCOMP, the loader's path, the wheel)".into(),
            };
            if std::env::var("CUPARQUET_REQUIRE_NVCOMP").as_deref() == Ok("1") {
                panic!("CUPARQUET_REQUIRE_NVCOMP=1 but {what} cannot run: {why}");
            }
            let _ = writeln!(std::io::stderr().lock(), "skipping {what}: {why}");
            false
        }
    }
}

/// With nvCOMP installed, ZSTD, LZ4_RAW and Hadoop-framed LZ4 pages are decompressed by it, v1
/// and v2 pages, with and without dictionaries, and the loads equal arrow-rs; the host's cores
/// take the largest of them beside it (none at share 0, all at 100, some at 50); SNAPPY stays
/// with our kernel, and GZIP with the host (nvCOMP's GZIP wrote out of bounds on a page
/// inflating past its claim). The corpus's LZ4 files (Hadoop's framing from parquet-mr, and
/// plain LZ4 blocks from an older parquet-cpp, which arrow-rs reads under the same codec) go
/// to nvCOMP whole at share 0. Damaged pages (bytes flipped inside compressed
/// values, under compute-sanitizer on the GPU machine) never crash or write out of bounds: a
/// page nvCOMP or the host beside it refuses goes to the host path, whose error names the page,
/// and the load either fails with an error naming the file and row group or returns the file's
/// shape. (Damage inside a ZSTD frame that its format cannot detect — arrow-rs writes no
/// content checksum — decodes to whatever each decoder makes of it: nvCOMP's bytes and the
/// zstd crate's differ there, as measured on a flipped dictionary page; neither reader can
/// tell.)
#[test]
fn gpu_nvcomp_decompresses_its_codecs() {
    if !gpu_available("nvCOMP test") || !nvcomp_available("nvCOMP test") {
        return;
    }
    use parquet::basic::{Compression, GzipLevel, ZstdLevel};
    use parquet::file::properties::{WriterProperties, WriterVersion};
    let batch = flat_batch(60_000, 3);
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (cname, codec) in [
        ("snappy", Compression::SNAPPY),
        ("zstd", Compression::ZSTD(ZstdLevel::default())),
        ("lz4_raw", Compression::LZ4_RAW),
        ("gzip", Compression::GZIP(GzipLevel::default())),
        ("lz4", Compression::LZ4),
    ] {
        for (v2, dict) in [(false, true), (true, false), (true, true)] {
            let p = dir.path().join(format!("{cname}-{v2}-{dict}.parquet"));
            let props = WriterProperties::builder()
                .set_compression(codec)
                .set_writer_version(if v2 {
                    WriterVersion::PARQUET_2_0
                } else {
                    WriterVersion::PARQUET_1_0
                })
                .set_dictionary_enabled(dict)
                .set_max_row_group_row_count(Some(25_000))
                .set_data_page_row_count_limit(5_000)
                .build();
            write(&p, std::slice::from_ref(&batch), props);
            let want = oracle(&p, &Projection::All, None).unwrap();
            for share in [0, 50, 100] {
                let what = format!("{cname} v2={v2} dict={dict} host_share={share}");
                let Some(decompressed) = load_checked(&p, share, &want, &what, &mut failures)
                else {
                    continue;
                };
                let (mut host, mut nv) = (0, 0);
                for d in &decompressed {
                    let p = d.pages;
                    host += p.host;
                    // the device's side: nvCOMP, or for GZIP our kernel
                    nv += p.nvcomp + p.kernel * usize::from(matches!(codec, Compression::GZIP(_)));
                    let ok = match codec {
                        Compression::SNAPPY => p.kernel > 0 && p.host + p.nvcomp == 0,
                        Compression::GZIP(_) => p.nvcomp == 0 && p.host + p.kernel > 0,
                        _ => p.kernel == 0 && p.host + p.nvcomp > 0,
                    };
                    if !ok {
                        failures.push(format!("{what}: {d:?}"));
                    }
                }
                // the split: nvCOMP alone, both, the host alone
                let split_ok = match (codec, share) {
                    (Compression::SNAPPY, _) => true,
                    (_, 0) => host == 0 && nv > 0,
                    (_, 100) => nv == 0 && host > 0,
                    _ => nv > 0 && host > 0,
                };
                if !split_ok {
                    failures.push(format!("{what}: {host} pages on the host, {nv} by nvCOMP"));
                }
            }
        }
    }
    for name in [
        "hadoop_lz4_compressed.parquet",
        "hadoop_lz4_compressed_larger.parquet",
        "non_hadoop_lz4_compressed.parquet",
    ] {
        let p = corpus_dir().join("data").join(name);
        let want = oracle(&p, &Projection::All, None).unwrap();
        for d in load_checked(&p, 0, &want, name, &mut failures).unwrap_or_default() {
            if d.pages.host + d.pages.kernel > 0 || d.pages.nvcomp == 0 {
                failures.push(format!("{name}: {d:?}"));
            }
        }
    }
    // damaged pages: bytes flipped inside the compressed values of some chunks' pages
    let p = dir.path().join("zstd-true-true.parquet");
    let clean = std::fs::read(&p).unwrap();
    let md = {
        use parquet::file::reader::FileReader;
        parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&p).unwrap())
            .unwrap()
            .metadata()
            .clone()
    };
    let mut r = Rng(99);
    let t = std::time::Instant::now();
    let mut loads = 0;
    for rg in 0..md.num_row_groups().min(2) {
        for c in (rg..md.row_group(rg).num_columns()).step_by(3) {
            let col = md.row_group(rg).column(c);
            let (start, len) = col.byte_range();
            let mut bytes = clean.clone();
            // past the dictionary page and the first page header, inside the chunk
            let at = start as usize + (len as usize * 3 / 4);
            flip_bytes(&mut r, &mut bytes[at..at + 16]);
            loads += 1;
            let bad = dir.path().join("damaged.parquet");
            std::fs::write(&bad, &bytes).unwrap();
            let got = Scan::builder(&bad)
                .with_device(Device::Cuda(0))
                .build()
                .and_then(|r| r.load())
                .and_then(|l| l.to_host().map(|b| concat(&l.schema, &b)));
            let want = oracle(&bad, &Projection::All, None);
            match (got, want) {
                (Ok(g), Ok(w)) if g == w => {}
                (Ok(g), Ok(w)) if g.schema() == w.schema() && g.num_rows() == w.num_rows() => {}
                (Err(e), Err(_)) => {
                    let msg = e.to_string();
                    if !msg.contains("damaged.parquet") || !msg.contains("row group") {
                        failures.push(format!("damaged rg {rg} col {c}: unclear error: {msg}"));
                    }
                }
                (Err(e), Ok(_)) => {
                    // we may refuse what arrow-rs reads only with an error naming the page
                    let msg = e.to_string();
                    if !msg.contains("row group") {
                        failures.push(format!("damaged rg {rg} col {c}: {msg}"));
                    }
                }
                (Ok(_), Err(e)) => {
                    failures.push(format!("damaged rg {rg} col {c}: loaded, arrow-rs: {e}"))
                }
                (Ok(_), Ok(_)) => failures.push(format!("damaged rg {rg} col {c}: shape differs")),
            }
        }
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "{loads} loads of damaged files in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Loads `p` on cuda:0 (SNAPPY on our kernel, a `share` percent of the other codecs' bytes on
/// the host beside nvCOMP) and checks it equals `want`, with pages reported decompressed: where
/// each field's pages were decompressed, or `None` where the load failed. Failures are pushed
/// to `failures`, named by `what`.
fn load_checked(
    p: &std::path::Path,
    share: u32,
    want: &arrow::record_batch::RecordBatch,
    what: &str,
    failures: &mut Vec<String>,
) -> Option<Vec<cuparquet::scan::Decompressed>> {
    let got = cuda_with_host_share(p, share)
        .build()
        .and_then(|r| r.load());
    let l = match got {
        Ok(l) => l,
        Err(e) => {
            failures.push(format!("{what}: {e}"));
            return None;
        }
    };
    let g = l.report.loads[0].gpu_decode.clone().unwrap();
    if g.decompressed.is_empty() {
        failures.push(format!("{what}: no pages reported decompressed"));
    }
    let b = l.to_host().map(|b| concat(&l.schema, &b)).unwrap();
    // fields and values (the file's key-value metadata, which arrow-rs's batches leave out,
    // comes with ours)
    if b.schema().fields() != want.schema().fields() || b.columns() != want.columns() {
        failures.push(format!("{what}: values differ"));
    }
    Some(g.decompressed)
}
