//! Bad input: every malformed corpus file, every encrypted file, generated truncations and
//! corruptions, and randomly corrupted files give a clear error naming the file — never a
//! panic, and never data arrow-rs would not return.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use cuparquet::{Device, Scan};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataWriter};

fn load(path: &Path) -> cuparquet::Result<arrow::record_batch::RecordBatch> {
    load_on(path, Device::Host)
}

fn load_on(path: &Path, device: Device) -> cuparquet::Result<arrow::record_batch::RecordBatch> {
    let reader = Scan::builder(path).with_device(device).build()?;
    let loaded = reader.load()?;
    Ok(concat(&loaded.schema, &loaded.to_host()?))
}

fn assert_clear(path: &Path, e: &cuparquet::Error) {
    let msg = e.to_string();
    assert!(
        msg.contains(&path.display().to_string()),
        "error does not name the file: {msg}"
    );
    assert!(!msg.contains('\n'), "error is not one line: {msg}");
    assert!(msg.len() < 600, "error is too long: {msg}");
}

#[test]
fn bad_data_files_fail_clearly_or_match_arrow_rs() {
    let files = corpus_files("bad_data", &[".parquet"]);
    assert!(files.len() >= 8);
    let mut devices = vec![Device::Host];
    if gpu_available("bad data decoded on the GPU") {
        devices.push(Device::Cuda(0));
    }
    for device in devices {
        for f in &files {
            match (load_on(f, device), oracle(f, &Projection::All, None)) {
                (Err(e), _) => {
                    assert_clear(f, &e);
                    eprintln!("{device}: {}: {e}", f.display());
                }
                (Ok(got), Ok(want)) => assert_same(&f.display().to_string(), &got, &want),
                (Ok(_), Err(o)) => {
                    panic!(
                        "{device}: {}: loaded what arrow-rs refuses ({o})",
                        f.display()
                    )
                }
            }
        }
    }
    // ARROW-GH-43605 is readable by arrow-rs; cuparquet loads the same data.
    let p = corpus_dir().join("bad_data/ARROW-GH-43605.parquet");
    let got = load(&p).unwrap();
    assert_same(
        "ARROW-GH-43605",
        &got,
        &oracle(&p, &Projection::All, None).unwrap(),
    );
}

#[test]
fn encrypted_files_are_refused() {
    let files = corpus_files("data", &[".encrypted"]);
    assert!(files.len() >= 5);
    for f in &files {
        let e = load(f).unwrap_err();
        assert_clear(f, &e);
        let msg = e.to_string();
        assert!(msg.contains("encrypted"), "{msg}");
    }
}

fn sample() -> (tempfile::TempDir, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ok.parquet");
    write(&p, &[flat_batch(500, 1)], Default::default());
    let bytes = std::fs::read(&p).unwrap();
    (dir, p, bytes)
}

fn error_for(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    let e = load(&p).unwrap_err();
    assert_clear(&p, &e);
    e.to_string()
}

#[test]
fn truncated_and_broken_footers() {
    let (dir, _, bytes) = sample();
    let d = dir.path();
    let n = bytes.len();
    assert!(error_for(d, "empty.parquet", &[]).contains("0 bytes: too small"));
    assert!(error_for(d, "tiny.parquet", &bytes[..11]).contains("too small"));
    for cut in [12, 100, n / 2, n - 1] {
        let e = error_for(d, "cut.parquet", &bytes[..cut]);
        assert!(
            e.contains(&format!(
                "the file looks truncated: it starts as a Parquet file (PAR1) but does not end as one; its {cut} bytes should end with the footer"
            )),
            "cut at {cut}: {e}"
        );
    }
    let mut m = bytes.clone();
    m[n - 1] = b'X';
    assert!(error_for(d, "magic.parquet", &m).contains("looks truncated"));
    // no Parquet magic at either end: the tail's bytes
    let mut m = bytes.clone();
    m[..4].copy_from_slice(b"HEAD");
    m[n - 1] = b'X';
    assert!(error_for(d, "neither.parquet", &m)
        .contains("not a Parquet file: the last 4 bytes are \"PARX\""));
    let mut m = bytes.clone();
    m[n - 8..n - 4].copy_from_slice(&(n as u32).to_le_bytes());
    assert!(error_for(d, "len.parquet", &m).contains(&format!(
        "footer length {n} reaches past the start of the file"
    )));
    let mut m = bytes.clone();
    let footer_len = u32::from_le_bytes(m[n - 8..n - 4].try_into().unwrap()) as usize;
    for b in &mut m[n - 8 - footer_len..n - 8] {
        *b = 0xEE;
    }
    assert!(error_for(d, "thrift.parquet", &m).contains("invalid Parquet footer"));
}

/// Rewrites the footer of `bytes` after changing the first column chunk of row group 0.
fn with_chunk(
    bytes: &[u8],
    f: impl Fn(
        parquet::file::metadata::ColumnChunkMetaDataBuilder,
    ) -> parquet::file::metadata::ColumnChunkMetaDataBuilder,
) -> Vec<u8> {
    let n = bytes.len();
    let footer_len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let footer_start = n - 8 - footer_len;
    let md: ParquetMetaData = parquet::file::metadata::ParquetMetaDataReader::decode_metadata(
        &bytes[footer_start..n - 8],
    )
    .unwrap();
    let mut b = md.into_builder();
    let mut groups = b.take_row_groups();
    let cols = groups[0].columns_mut();
    cols[0] = f(cols[0].clone().into_builder()).build().unwrap();
    let md = b.set_row_groups(groups).build();
    let mut out = bytes[..footer_start].to_vec();
    ParquetMetaDataWriter::new(&mut out, &md).finish().unwrap();
    out
}

#[test]
fn impossible_chunk_offsets() {
    let (dir, _, bytes) = sample();
    let d = dir.path();
    let n = bytes.len() as i64;
    let e = error_for(
        d,
        "past.parquet",
        &with_chunk(&bytes, |c| {
            c.set_data_page_offset(n + 100)
                .set_dictionary_page_offset(None)
        }),
    );
    assert!(
        e.contains("row group 0, column 'bool'")
            && e.contains("reaches past the start of the footer"),
        "{e}"
    );
    let e = error_for(
        d,
        "neg.parquet",
        &with_chunk(&bytes, |c| {
            c.set_data_page_offset(-5).set_dictionary_page_offset(None)
        }),
    );
    assert!(
        e.contains("row group 0, column 'bool'") && e.contains("chunk offset -5 lies before"),
        "{e}"
    );
    let e = error_for(
        d,
        "size.parquet",
        &with_chunk(&bytes, |c| c.set_total_compressed_size(-1)),
    );
    assert!(e.contains("negative compressed size -1"), "{e}");
    let e = error_for(
        d,
        "huge.parquet",
        &with_chunk(&bytes, |c| c.set_total_compressed_size(1 << 40)),
    );
    assert!(e.contains("reaches past the start of the footer"), "{e}");
    // A wrong size inside the file: the decoder finds pages that do not parse.
    let e = error_for(
        d,
        "short.parquet",
        &with_chunk(&bytes, |c| c.set_total_compressed_size(10)),
    );
    assert!(e.contains("decoding row group 0, column 'bool'"), "{e}");
}

#[test]
fn dictionary_offset_zero_is_ignored() {
    // Some writers store 0 for "no dictionary page"; arrow-rs would then read from byte 0.
    // cuparquet plans from the data page offset, and the load equals the original file's.
    let (dir, p, bytes) = sample();
    let want = load(&p).unwrap();
    let q = dir.path().join("dict0.parquet");
    let plain = {
        // write without dictionary so the first page is the data page
        let p2 = dir.path().join("plain.parquet");
        write(
            &p2,
            &[flat_batch(500, 1)],
            parquet::file::properties::WriterProperties::builder()
                .set_dictionary_enabled(false)
                .build(),
        );
        std::fs::read(&p2).unwrap()
    };
    let _ = bytes;
    std::fs::write(
        &q,
        with_chunk(&plain, |c| c.set_dictionary_page_offset(Some(0))),
    )
    .unwrap();
    let r = Scan::builder(&q).with_device(Device::Host).build().unwrap();
    assert_eq!(
        r.files()[0].plan().chunks[0].ignored_dictionary_offset,
        Some(0)
    );
    assert!(r.files()[0].plan().chunks[0].range.start >= 4);
    let loaded = r.load().unwrap();
    assert_same(
        "dict0",
        &concat(&loaded.schema, &loaded.to_host().unwrap()),
        &want,
    );
}

/// xorshift, so a failing case reproduces from its seed.
fn rng(mut s: u64) -> impl FnMut() -> u64 {
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

#[test]
fn random_corruption_never_panics() {
    let mut files: Vec<PathBuf> = corpus_files("data", &[".parquet"])
        .into_iter()
        .filter(|p| {
            std::fs::metadata(p)
                .map(|m| m.len() < 64 << 10)
                .unwrap_or(false)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (_d, p, _) = sample();
    files.push(p);
    let mut next = rng(0x5EED_CAFE);
    let mut outcomes = (0, 0);
    for case in 0..600 {
        let f = &files[case % files.len()];
        let mut bytes = std::fs::read(f).unwrap();
        let flips = 1 + next() % 8;
        for _ in 0..flips {
            let i = (next() % bytes.len() as u64) as usize;
            bytes[i] = next() as u8;
        }
        let q = dir.path().join(format!("fuzz-{case}.parquet"));
        std::fs::write(&q, &bytes).unwrap();
        match load(&q) {
            Ok(got) => {
                // whatever loads is what arrow-rs reads from the same bytes
                match oracle(&q, &Projection::All, None) {
                    Ok(want) => assert_same(&format!("case {case} ({})", f.display()), &got, &want),
                    Err(o) => panic!(
                        "case {case} ({}): loaded what arrow-rs refuses: {o}",
                        f.display()
                    ),
                }
                outcomes.0 += 1
            }
            Err(e) => {
                assert_clear(&q, &e);
                outcomes.1 += 1;
            }
        }
        let _ = std::fs::remove_file(&q);
    }
    eprintln!(
        "600 corrupted files: {} loaded, {} clear errors",
        outcomes.0, outcomes.1
    );
    assert!(outcomes.1 > 100);
}

/// The offset of `pattern` inside `bytes[from..to]`.
fn find(bytes: &[u8], from: usize, to: usize, pattern: &[u8]) -> Option<usize> {
    bytes[from..to]
        .windows(pattern.len())
        .position(|w| w == pattern)
        .map(|i| from + i)
}

/// One row group of one column, written by arrow-rs; the file's bytes and its footer.
fn one_column(
    dir: &Path,
    name: &str,
    array: arrow::array::ArrayRef,
    props: parquet::file::properties::WriterProperties,
) -> (PathBuf, Vec<u8>, ParquetMetaData) {
    let path = dir.join(name);
    let batch = arrow::record_batch::RecordBatch::try_from_iter([("x", array)]).unwrap();
    write(&path, &[batch], props);
    let bytes = std::fs::read(&path).unwrap();
    let meta = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&bytes::Bytes::from(bytes.clone()))
        .unwrap();
    (path, bytes, meta)
}

#[test]
fn a_dictionary_claiming_more_entries_than_its_bytes_hold_is_refused() {
    use parquet::file::properties::WriterProperties;
    let dir = scratch_dir();
    // 100 distinct int64 values: a PLAIN dictionary of 800 bytes, num_values 100 (zigzag 200,
    // the varint C8 01)
    let values = arrow::array::Int64Array::from_iter_values((0..5_000).map(|i| i % 100));
    let props = WriterProperties::builder()
        .set_compression(parquet::basic::Compression::UNCOMPRESSED)
        .build();
    let (path, mut bytes, meta) = one_column(
        dir.path(),
        "dict.parquet",
        std::sync::Arc::new(values),
        props,
    );
    let col = meta.row_group(0).column(0);
    let start = col.dictionary_page_offset().expect("a dictionary page") as usize;
    let header = cuparquet::internals::page_header::parse_page_header(&bytes[start..]).unwrap();
    assert_eq!(header.num_values(), 100);
    // field 1 (i32) of the dictionary header: 15 C8 01 → 8,191 entries (FE 7F), same length
    let at = find(
        &bytes,
        start,
        start + header.header_len,
        &[0x15, 0xC8, 0x01],
    )
    .expect("num_values");
    bytes[at + 1..at + 3].copy_from_slice(&[0xFE, 0x7F]);
    std::fs::write(&path, &bytes).unwrap();
    // the host path (arrow-rs, and the GPU path's host-decoded fields); the device's own page
    // walk is not checked this way yet (issue 18)
    let e = load(&path).expect_err("the dictionary cannot hold 8,191 entries");
    assert_clear(&path, &e);
    let msg = e.to_string();
    assert!(
        msg.contains("8191 entries") && msg.contains("row group 0"),
        "{msg}"
    );
}

#[test]
fn a_snappy_page_shorter_than_its_claim_is_refused() {
    use parquet::file::properties::WriterProperties;
    let dir = scratch_dir();
    // BYTE_STREAM_SPLIT doubles, SNAPPY, no dictionary
    let values = arrow::array::Float64Array::from_iter_values((0..2_000).map(|i| i as f64 * 0.5));
    let props = WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .set_dictionary_enabled(false)
        .set_encoding(parquet::basic::Encoding::BYTE_STREAM_SPLIT)
        .build();
    let (path, mut bytes, meta) = one_column(
        dir.path(),
        "bss.parquet",
        std::sync::Arc::new(values),
        props,
    );
    let start = meta.row_group(0).column(0).data_page_offset() as usize;
    let header = cuparquet::internals::page_header::parse_page_header(&bytes[start..]).unwrap();
    let size = header.uncompressed_size;
    assert_eq!(size, 16_000);
    // PageHeader: 15 00 (type 0), then 15 + zigzag varint of the uncompressed size
    let zz = |v: i32| -> Vec<u8> {
        let mut z = ((v << 1) ^ (v >> 31)) as u32;
        let mut out = vec![];
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
        out
    };
    let old = [vec![0x15, 0x00, 0x15], zz(size)].concat();
    let new = [vec![0x15, 0x00, 0x15], zz(size + 8)].concat();
    assert_eq!(old.len(), new.len());
    let at = find(&bytes, start, start + header.header_len, &old).expect("the size field");
    bytes[at..at + new.len()].copy_from_slice(&new);
    std::fs::write(&path, &bytes).unwrap();
    let e = load(&path).expect_err("the page decompresses to 8 bytes fewer than claimed");
    assert_clear(&path, &e);
    let msg = e.to_string();
    assert!(
        msg.contains("decompresses to 16000 bytes; the header claims 16008"),
        "{msg}"
    );
    assert!(msg.contains("row group 0, column 'x'"), "{msg}");
}

/// A SNAPPY page whose first element copies from before the start of its output: refused with
/// an error naming the page, on the host and by the device kernel.
#[test]
fn a_snappy_copy_before_the_start_is_refused_on_every_path() {
    use parquet::file::properties::WriterProperties;
    let dir = scratch_dir();
    let values = arrow::array::Float64Array::from_iter_values((0..2_000).map(|i| i as f64 * 0.5));
    let props = WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .set_dictionary_enabled(false)
        .build();
    let (path, mut bytes, meta) = one_column(
        dir.path(),
        "copy.parquet",
        std::sync::Arc::new(values),
        props,
    );
    let start = meta.row_group(0).column(0).data_page_offset() as usize;
    let header = cuparquet::internals::page_header::parse_page_header(&bytes[start..]).unwrap();
    assert_eq!(header.uncompressed_size, 16_000);
    // the stream: the varint 16000 (80 7d), then its first element, which becomes a copy of
    // 4 bytes from 5 bytes back (tag 01, offset 05) while nothing has been written
    let data = start + header.header_len;
    assert_eq!(&bytes[data..data + 2], &[0x80, 0x7d]);
    bytes[data + 2..data + 4].copy_from_slice(&[0x01, 0x05]);
    std::fs::write(&path, &bytes).unwrap();
    let mut tries: Vec<(String, cuparquet::Result<()>)> =
        vec![("host".into(), load(&path).map(|_| ()))];
    if gpu_available("SNAPPY copy test on the device") {
        let got = Scan::builder(&path)
            .with_device(Device::Cuda(0))
            .with_snappy_placement(cuparquet::internals::gpu::SnappyPlacement::Device)
            .build()
            .and_then(|r| r.load())
            .map(|_| ());
        tries.push(("the device kernel".into(), got));
    }
    for (on, got) in tries {
        let e = got.expect_err(&on);
        assert_clear(&path, &e);
        let msg = e.to_string();
        assert!(msg.contains("row group 0, column 'x'"), "{on}: {msg}");
        assert!(
            msg.contains("before the start") || msg.contains("offset"),
            "{on}: {msg}"
        );
        // the page, and where it is in the file
        assert!(
            msg.contains("page 0") && msg.contains("byte"),
            "{on}: {msg}"
        );
    }
}

/// The load's page cap holds on the device path as on the host: a page claiming more
/// uncompressed bytes than `with_max_page_size` is refused before the decoder allocates by the
/// claim, with an error naming the file, the row group, the column and the page, for every
/// codec (SNAPPY on the kernel, ZSTD through nvCOMP where it is installed, uncompressed).
#[test]
fn gpu_load_refuses_pages_over_the_page_cap() {
    if !gpu_available("page cap test") {
        return;
    }
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::WriterProperties;
    let batch = flat_batch(20_000, 5);
    let dir = tempfile::tempdir().unwrap();
    for (name, codec) in [
        ("snappy", Compression::SNAPPY),
        ("zstd", Compression::ZSTD(ZstdLevel::default())),
        ("none", Compression::UNCOMPRESSED),
    ] {
        let p = dir.path().join(format!("{name}.parquet"));
        let props = WriterProperties::builder().set_compression(codec).build();
        write(&p, std::slice::from_ref(&batch), props);
        for device in [Device::Cuda(0), Device::Host] {
            let e = Scan::builder(&p)
                .with_device(device)
                .with_max_page_size(4096)
                .build()
                .and_then(|r| r.load())
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("pages of more than 4096 are refused")
                    && e.contains(&p.display().to_string())
                    && e.contains("row group 0")
                    && e.contains("page "),
                "{name} on {device}: {e}"
            );
        }
        // the default cap reads it
        let l = Scan::builder(&p)
            .with_device(Device::Cuda(0))
            .build()
            .and_then(|r| r.load())
            .unwrap();
        let want = oracle(&p, &Projection::All, None).unwrap();
        assert!(
            l.to_host().map(|b| concat(&l.schema, &b)).unwrap() == want,
            "{name}"
        );
    }
}

/// A decimal stored past its declared precision (the schema contradicting the data) is refused
/// on the host and on the device, for every decimal width, naming the column; the values in
/// precision around it, and a null, are not.
#[test]
fn decimals_past_their_precision_are_refused_on_every_path() {
    use arrow::array::{
        ArrayRef, Decimal128Array, Decimal256Array, Decimal32Array, Decimal64Array,
    };
    use arrow::datatypes::i256;
    let dir = scratch_dir();
    let n = 3000usize;
    let bad_at = 2223usize; // (not a multiple of 11: not a null)
    let mut devices = vec![Device::Host];
    if gpu_available("decimal precision test on the device") {
        devices.push(Device::Cuda(0));
    }
    // (name, the column with one value past its precision: 10^p, or -10^p)
    let cases: Vec<(&str, ArrayRef)> = vec![
        (
            "d32",
            std::sync::Arc::new(
                Decimal32Array::from_iter((0..n).map(|i| {
                    (i % 11 != 0).then_some(if i == bad_at {
                        10_000
                    } else {
                        (i % 9999) as i32
                    })
                }))
                .with_precision_and_scale(4, 1)
                .unwrap(),
            ),
        ),
        (
            "d64",
            std::sync::Arc::new(
                Decimal64Array::from_iter_values((0..n).map(|i| {
                    if i == bad_at {
                        -10_000_000_000
                    } else {
                        -(i as i64) * 1_000_003
                    }
                }))
                .with_precision_and_scale(10, 2)
                .unwrap(),
            ),
        ),
        (
            "d128",
            std::sync::Arc::new(
                Decimal128Array::from_iter_values((0..n).map(|i| {
                    if i == bad_at {
                        10i128.pow(20)
                    } else {
                        (i as i128) * 9_999_999_999_999_999
                    }
                }))
                .with_precision_and_scale(20, 2)
                .unwrap(),
            ),
        ),
        (
            "d256",
            std::sync::Arc::new(
                Decimal256Array::from_iter_values((0..n).map(|i| {
                    if i == bad_at {
                        i256::from_i128(-(10i128.pow(20)))
                            .wrapping_mul(i256::from_i128(10i128.pow(20)))
                    } else {
                        i256::from_i128(i as i128 * 7)
                    }
                }))
                .with_precision_and_scale(40, 2)
                .unwrap(),
            ),
        ),
    ];
    for (name, col) in cases {
        let (path, _, _) = one_column(
            dir.path(),
            &format!("{name}.parquet"),
            col.clone(),
            parquet::file::properties::WriterProperties::builder().build(),
        );
        for &device in &devices {
            let e = load_on(&path, device).expect_err(&format!("{name} on {device}"));
            assert_clear(&path, &e);
            let msg = e.to_string();
            assert!(
                msg.contains("outside its declared precision") && msg.contains("column 'x'"),
                "{name} on {device}: {msg}"
            );
        }
        // the same column without the bad value loads, equal to arrow-rs, on every path
        let good = col.slice(0, bad_at);
        let (path, _, _) = one_column(
            dir.path(),
            &format!("{name}-good.parquet"),
            good,
            parquet::file::properties::WriterProperties::builder().build(),
        );
        let want = oracle(&path, &Projection::All, None).unwrap();
        for &device in &devices {
            let got = load_on(&path, device).unwrap();
            assert!(got == want, "{name} on {device}");
        }
    }
}

/// The fuzzer's files (cargo-fuzz `host_load`, 2026-12-04). A row group of 0 rows whose column
/// chunks give a negative dictionary page offset: arrow-rs's `ColumnChunkMetaData::byte_range`
/// asserts on it, and the host decoder's error path called it, so the load panicked in a
/// worker thread. A boolean page on which arrow-rs's decoder fails an `assert_ne!`: the
/// contained panic's message came back over three lines. Each must load (nothing to read) or
/// fail with a clear one-line error, on every device this machine has.
/// A chunk whose first page header is 104 bytes of junk claiming lists of 179M elements:
/// arrow-rs's Thrift reader spent 2.7 s skipping them (a timeout under cargo-fuzz), the
/// host decoder now refuses it from its own header walk, naming the page.
#[test]
fn junk_page_headers_are_refused_by_the_header_walk() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/fuzz-slow-page-header.parquet");
    let e = load(&path).unwrap_err();
    assert_clear(&path, &e);
    let msg = e.to_string();
    assert!(
        msg.contains("column 'c_birth_day': page 0 (header at byte 1701 of the file): the page header does not parse"),
        "{msg}"
    );
}

#[test]
fn fuzzed_files_never_panic() {
    let mut devices = vec![Device::Host];
    if gpu_available("the fuzzer's files on the GPU") {
        devices.push(Device::Cuda(0));
    }
    for name in [
        "fuzz-negative-dictionary-offset.parquet",
        "fuzz-assertion-over-lines.parquet",
        "fuzz-slow-page-header.parquet",
        "fuzz-control-characters-in-name.parquet",
    ] {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("testdata")
            .join(name);
        for &device in &devices {
            match load_on(&path, device) {
                Ok(b) => assert_eq!(b.num_rows(), 0, "{name} on {device}"),
                Err(e) => assert_clear(&path, &e),
            }
        }
    }
}

/// `bytes` (a whole file) with the first occurrence of `from` in its footer replaced by `to`,
/// of the same length.
fn patch_footer(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let n = bytes.len();
    let footer_len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let start = n - 8 - footer_len;
    let at = bytes[start..]
        .windows(from.len())
        .position(|w| w == from)
        .expect("the pattern is in the footer")
        + start;
    let mut out = bytes.to_vec();
    out[at..at + to.len()].copy_from_slice(to);
    out
}

/// A schema that contradicts what its chunks hold (issue 18): an OPTIONAL leaf marked REQUIRED
/// (seen through the chunk's level histograms, through its statistics' null count and through
/// a v2 page's null count), a FIXED_LEN_BYTE_ARRAY of length 0, an embedded Arrow schema
/// that puts a timestamp on an INT32 column. arrow-rs reads each as garbage or mislabelled
/// values; the load refuses each with an error naming the column and the contradiction, on
/// every device this machine has.
#[test]
fn schema_contradictions_are_refused() {
    use arrow::array::{ArrayRef, FixedSizeBinaryArray, Int64Array};
    use arrow::record_batch::RecordBatch;
    use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = |name: &str, batch: RecordBatch, props: WriterProperties| -> Vec<u8> {
        let p = d.join(name);
        write(&p, &[batch], props);
        std::fs::read(&p).unwrap()
    };
    let ints = Int64Array::from_iter((0..1000).map(|i| (i % 7 != 0).then_some(i)));
    let batch = RecordBatch::try_from_iter([("a", Arc::new(ints) as ArrayRef)]).unwrap();
    // compact Thrift of the leaf's schema element: type INT64, repetition OPTIONAL, name "a";
    // the same with REQUIRED
    let optional = [0x15, 0x04, 0x25, 0x02, 0x18, 0x01, b'a'];
    let required = [0x15, 0x04, 0x25, 0x00, 0x18, 0x01, b'a'];
    let v1 = file(
        "v1.parquet",
        batch.clone(),
        WriterProperties::builder().build(),
    );
    let v2 = file(
        "v2.parquet",
        batch,
        WriterProperties::builder()
            .set_writer_version(WriterVersion::PARQUET_2_0)
            .set_dictionary_enabled(false)
            .set_statistics_enabled(EnabledStatistics::None)
            .build(),
    );
    let plain = |f: parquet::file::metadata::ColumnChunkMetaDataBuilder| {
        f.set_definition_level_histogram(None)
            .set_repetition_level_histogram(None)
    };
    let flba = FixedSizeBinaryArray::try_from_iter((0..100u32).map(|i| i.to_le_bytes())).unwrap();
    let flba = RecordBatch::try_from_iter([("f", Arc::new(flba) as ArrayRef)]).unwrap();
    let flba = file("flba.parquet", flba, WriterProperties::builder().build());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "histogram.parquet",
            patch_footer(&v1, &optional, &required),
            "column 'a': its size statistics count definition levels 0 to 1; the schema makes it REQUIRED",
        ),
        (
            "nulls.parquet",
            with_chunk(&patch_footer(&v1, &optional, &required), plain),
            "column 'a': its statistics count 143 nulls; the schema makes it REQUIRED",
        ),
        (
            "v2.parquet",
            with_chunk(&patch_footer(&v2, &optional, &required), |c| {
                plain(c).clear_statistics()
            }),
            "page 0 (header at byte 4 of the file): 143 nulls in a column the schema makes REQUIRED",
        ),
        (
            "flba.parquet",
            // type FIXED_LEN_BYTE_ARRAY, type_length 4 -> 0
            patch_footer(&flba, &[0x15, 0x0e, 0x15, 0x08], &[0x15, 0x0e, 0x15, 0x00]),
            "column 'f': a FIXED_LEN_BYTE_ARRAY of length 0",
        ),
        (
            "arrow-hint.parquet",
            // pyarrow's INT96 timestamps, the physical type changed to INT32
            // (scripts/py/contradictions.py)
            std::fs::read(
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("testdata/contradiction-arrow-hint.parquet"),
            )
            .unwrap(),
            "column 'ts': the embedded Arrow schema (ARROW:schema) says Timestamp(ns), but the column is stored as INT32",
        ),
    ];
    let mut devices = vec![Device::Host];
    if gpu_available("schema contradictions on the GPU") {
        devices.push(Device::Cuda(0));
    }
    for (name, bytes, want) in cases {
        let p = d.join(name);
        std::fs::write(&p, &bytes).unwrap();
        for &device in &devices {
            let e = load_on(&p, device).expect_err(name);
            assert_clear(&p, &e);
            assert!(e.to_string().contains(want), "{name} on {device}: {e}");
        }
    }
}
