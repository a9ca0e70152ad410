//! Conformance: what cuparquet loads equals what arrow-rs reads, for the parquet-testing corpus
//! and the project's generated files — full reads, projections by name, row-group selections.
//!
//! One suite for every backend: `backends()` lists the targets this build can load into; the
//! GPU issues add theirs, and the same cases run against them.

use crate::common;

use std::path::{Path, PathBuf};

use arrow::array::RecordBatchReader;
use common::*;
use cuparquet::config::Tuning;
use cuparquet::internals::gpu::SnappyPlacement;
use cuparquet::{Device, Scan};

/// Files both readers refuse, with the reason asserted in `documented_failures`.
const BOTH_FAIL: &[&str] = &[
    "dict-page-offset-zero.parquet",
    "nation.dict-malformed.parquet",
];

/// A target and how the plan is cut into units.
#[derive(Debug, Clone, Copy)]
struct Backend {
    device: Device,
    /// Every cell (row group × field) its own unit, so that fields decoded apart are joined.
    tiny_units: bool,
    /// Where SNAPPY pages are decompressed (device loads).
    snappy: SnappyPlacement,
    /// Device loads read and decoded in waves of one row group each (the pipelined path).
    pipelined: bool,
    /// Read through the stream (`batches()`) instead of `load()`, in batches of this many
    /// rows (else 1000 through `load()`).
    stream: Option<usize>,
    /// The percent of nvCOMP's codecs' bytes the host takes beside it (where nvCOMP is
    /// installed; `None`: the default share).
    host_share: Option<u32>,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let units = if self.tiny_units {
            " (one unit per field)"
        } else {
            ""
        };
        let snappy = match (self.device, self.snappy) {
            (Device::Host, _) | (_, SnappyPlacement::Auto) => "",
            (_, SnappyPlacement::Device) => " (SNAPPY on the device)",
        };
        let waves = if self.pipelined {
            " (pipelined, a wave per row group)"
        } else {
            ""
        };
        let stream = match self.stream {
            Some(n) => format!(" (streamed in batches of {n} rows)"),
            None => String::new(),
        };
        let share = match self.host_share {
            Some(n) => format!(" (host share {n}%)"),
            None => String::new(),
        };
        write!(f, "{}{units}{snappy}{waves}{stream}{share}", self.device)
    }
}

fn backends() -> Vec<Backend> {
    let mut v = vec![
        Backend {
            device: Device::Host,
            tiny_units: false,
            snappy: SnappyPlacement::Auto,
            pipelined: false,
            stream: None,
            host_share: None,
        },
        Backend {
            device: Device::Host,
            tiny_units: true,
            snappy: SnappyPlacement::Auto,
            pipelined: false,
            stream: None,
            host_share: None,
        },
        Backend {
            device: Device::Host,
            tiny_units: false,
            snappy: SnappyPlacement::Auto,
            pipelined: false,
            stream: Some(333),
            host_share: None,
        },
    ];
    // The device path: chunks moved to cuda:0 by the range reader and decoded there (fields
    // the GPU does not decode yet on the host, then uploaded); compared after `to_host`.
    // Twice: SNAPPY placed by the model (small corpus files: mostly the host), and always on
    // the device kernel.
    if gpu_available("conformance on cuda:0") {
        for (snappy, host_share) in [
            (SnappyPlacement::Auto, None),
            (SnappyPlacement::Device, Some(0)),
        ] {
            v.push(Backend {
                device: Device::Cuda(0),
                tiny_units: false,
                snappy,
                pipelined: false,
                stream: None,
                host_share,
            });
        }
        v.push(Backend {
            device: Device::Cuda(0),
            tiny_units: true,
            snappy: SnappyPlacement::Device,
            pipelined: true,
            stream: None,
            host_share: Some(100),
        });
        v.push(Backend {
            device: Device::Cuda(0),
            tiny_units: false,
            snappy: SnappyPlacement::Device,
            pipelined: false,
            stream: Some(333),
            host_share: Some(40),
        });
        // (where nvCOMP is installed, every device backend has it decompress ZSTD, GZIP and
        // LZ4_RAW pages, the host taking the default share of them beside it, none, all, or 40 %)
    }
    v
}

fn load(
    path: &Path,
    backend: impl Into<Backend>,
    columns: Option<Vec<String>>,
    rgs: Option<&[usize]>,
) -> cuparquet::Result<arrow::record_batch::RecordBatch> {
    let backend = backend.into();
    let batch_rows = backend.stream.unwrap_or(1000);
    let mut b = Scan::builder(path)
        .with_device(backend.device)
        .with_batch_rows(batch_rows);
    b = b.with_snappy_placement(backend.snappy);
    let mut tuning = Tuning {
        host_share: backend.host_share,
        ..Tuning::default()
    };
    if backend.tiny_units {
        let cfg = cuparquet::plan::CoalesceConfig {
            unit_target_bytes: 1,
            ..Default::default()
        };
        b = b.with_coalescing(cfg);
    }
    if backend.pipelined {
        tuning.wave_bytes = Some(1);
    }
    b = b.with_tuning(tuning);
    if let Some(c) = columns {
        b = b.with_columns(c);
    }
    if let Some(r) = rgs {
        b = b.with_row_groups(r.iter().copied());
    }
    let reader = b.build()?;
    let batches = match backend.stream {
        Some(_) => reader.batches().collect::<cuparquet::Result<Vec<_>>>()?,
        None => reader.load()?.batches,
    };
    // every batch within the size asked for, holding the rows it says, in order
    let mut next = std::collections::HashMap::new();
    for b in &batches {
        assert!(b.num_rows() <= batch_rows, "{} rows", b.num_rows());
        let n: u64 = b.rows().iter().map(|r| r.rows.end - r.rows.start).sum();
        assert_eq!(n, b.num_rows() as u64, "{:?}", b.rows());
        for r in b.rows() {
            let at = next.entry(r.row_group).or_insert(0u64);
            assert_eq!(
                r.rows.start, *at,
                "rows of row group {} out of order",
                r.row_group
            );
            *at = r.rows.end;
        }
    }
    let host: Vec<_> = batches
        .iter()
        .map(|b| b.to_host())
        .collect::<cuparquet::Result<_>>()?;
    Ok(concat(reader.schema(), &host))
}

/// Runs full / projection / row-group cases for one file and returns how it went.
impl From<Device> for Backend {
    fn from(device: Device) -> Self {
        Backend {
            device,
            tiny_units: false,
            snappy: SnappyPlacement::Auto,
            pipelined: false,
            stream: None,
            host_share: None,
        }
    }
}

fn check_file(path: &Path, device: Backend) -> Result<usize, String> {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let full_oracle = oracle(path, &Projection::All, None);
    let full = load(path, device, None, None);
    match (&full, &full_oracle) {
        (Ok(got), Ok(want)) => assert_same(&format!("{name} full"), got, want),
        (Err(e), Err(_)) => return Err(format!("both fail: {e}")),
        (Err(e), Ok(_)) => panic!("{name}: cuparquet fails where arrow-rs reads: {e}"),
        (Ok(_), Err(o)) => panic!("{name}: cuparquet reads what arrow-rs refuses ({o})"),
    }
    let mut cases = 1;

    // Projection: every other top-level column, by name (the oracle selects by index).
    let f = std::fs::File::open(path).unwrap();
    let md = parquet::file::reader::SerializedFileReader::new(f)
        .map(|r| parquet::file::reader::FileReader::metadata(&r).clone())
        .unwrap();
    let roots = md
        .file_metadata()
        .schema_descr()
        .root_schema()
        .get_fields()
        .to_vec();
    let names: Vec<String> = roots.iter().map(|f| f.name().to_string()).collect();
    let unique = {
        let mut n = names.clone();
        n.sort();
        n.dedup();
        n.len() == names.len()
    };
    if roots.len() > 1 && unique {
        let pick: Vec<usize> = (0..roots.len()).filter(|i| i % 2 == 1).collect();
        let cols: Vec<String> = pick
            .iter()
            .map(|&i| {
                let n = &names[i];
                if n.contains('.') || n.contains('`') {
                    format!("`{n}`")
                } else {
                    n.clone()
                }
            })
            .collect();
        let want = oracle(path, &Projection::Roots(pick.clone()), None).expect("oracle projection");
        let got = load(path, device, Some(cols), None)
            .unwrap_or_else(|e| panic!("{name} projection: {e}"));
        assert_same(&format!("{name} projection {pick:?}"), &got, &want);
        cases += 1;
    }

    // Row groups: the last one and the first, in that order (the result is in file order).
    let n = md.num_row_groups();
    if n > 0 {
        let sel = if n > 1 { vec![n - 1, 0] } else { vec![0] };
        let mut sorted = sel.clone();
        sorted.sort();
        let want = oracle(path, &Projection::All, Some(&sorted)).expect("oracle row groups");
        let got = load(path, device, None, Some(&sel))
            .unwrap_or_else(|e| panic!("{name} row groups: {e}"));
        assert_same(&format!("{name} row groups {sel:?}"), &got, &want);
        cases += 1;
    }
    Ok(cases)
}

#[test]
fn corpus_files_equal_arrow_rs() {
    let files = corpus_files("data", &[".parquet"]);
    assert!(
        files.len() > 50,
        "corpus not found at {}",
        corpus_dir().display()
    );
    for device in backends() {
        let mut ok = 0;
        let mut failed = Vec::new();
        for f in &files {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            match check_file(f, device) {
                Ok(n) => ok += n,
                Err(e) => failed.push(format!("{name}: {e}")),
            }
        }
        let failed_names: Vec<&str> = failed
            .iter()
            .map(|s| s.split(':').next().unwrap())
            .collect();
        assert_eq!(
            failed_names,
            BOTH_FAIL,
            "files both readers refuse changed:\n{}",
            failed.join("\n")
        );
        eprintln!(
            "{device}: {ok} cases equal over {} files; both refuse: {failed:#?}",
            files.len()
        );
    }
}

#[test]
fn generated_files_equal_arrow_rs() {
    let dir = tempfile::tempdir().unwrap();
    let files = generate_corpus(dir.path());
    assert!(files.len() >= 30);
    // CUPARQUET_CONFORMANCE_FILES=a,b: only the files whose names contain one of these (a
    // slice to run under compute-sanitizer)
    let only = std::env::var("CUPARQUET_CONFORMANCE_FILES").unwrap_or_default();
    let keep = |name: &str| only.is_empty() || only.split(',').any(|s| name.contains(s));
    for device in backends() {
        for (name, path) in files.iter().filter(|(n, _)| keep(n)) {
            let n = check_file(path, device).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(n, 3, "{name}: all three cases ran");
        }
    }
}

#[test]
fn nested_paths_select_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nested.parquet");
    write(&p, &[nested_batch(300)], Default::default());
    // Arrow-style paths (list/map wrappers left out) and the file's own paths select the same.
    for (cols, want_leaves) in [
        (vec!["s.b"], vec!["s.b"]),
        (vec!["list_i32.item"], vec!["list_i32.list.item"]),
        (vec!["list_i32.list.item"], vec!["list_i32.list.item"]),
        // a path into a map takes the whole map (Arrow reads keys and values together)
        (vec!["m.keys"], vec!["m.entries.keys", "m.entries.values"]),
        (
            vec!["m.entries.values", "id"],
            vec!["id", "m.entries.keys", "m.entries.values"],
        ),
        (vec!["list_struct.item.y"], vec!["list_struct.list.item.y"]),
        (vec!["s"], vec!["s.a", "s.b"]),
    ] {
        let r = Scan::builder(&p)
            .with_device(Device::Host)
            .with_columns(cols.clone())
            .build()
            .unwrap();
        let got: Vec<String> = r.files()[0]
            .plan()
            .leaves
            .iter()
            .map(|&l| {
                r.files()[0]
                    .metadata()
                    .metadata
                    .file_metadata()
                    .schema_descr()
                    .column(l)
                    .path()
                    .string()
            })
            .collect();
        assert_eq!(got, want_leaves, "{cols:?}");
        // and the load equals arrow-rs with the same leaves
        let loaded = r.load().unwrap();
        let got = concat(&loaded.schema, &loaded.to_host().unwrap());
        let f = std::fs::File::open(&p).unwrap();
        let b = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
        let mask = parquet::arrow::ProjectionMask::leaves(
            b.parquet_schema(),
            r.files()[0].plan().leaves.iter().copied(),
        );
        let rd = b.with_projection(mask).build().unwrap();
        let schema = rd.schema();
        let want: Vec<_> = rd.map(|b| b.unwrap()).collect();
        assert_same(&format!("{cols:?}"), &got, &concat(&schema, &want));
    }
    let e = Scan::builder(&p)
        .with_device(Device::Host)
        .with_columns(["s.zzz"])
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("unknown column 's.zzz'")
            && e.contains("available columns: id, list_i32 (list_i32.list.item)")
            && e.contains("s (s.a, s.b)"),
        "{e}"
    );
}

#[test]
fn footer_row_count_is_trusted_like_arrow_rs() {
    // repeated_no_annotation.parquet (written by parquet-rs 0.3) says num_rows = 0 in its file
    // metadata while its one row group says 6 rows. arrow-rs returns 0 rows; cuparquet decodes
    // through arrow-rs from the same metadata and returns the same 0 rows — it never returns
    // rows arrow-rs would not. (`cuparquet plan` shows the row group's 6 rows.)
    let p = corpus_dir().join("data/repeated_no_annotation.parquet");
    let got = load(&p, Device::Host, None, None).unwrap();
    let want = oracle(&p, &Projection::All, None).unwrap();
    assert_eq!(want.num_rows(), 0);
    assert_same("repeated_no_annotation", &got, &want);
}

#[test]
fn documented_failures() {
    let dir = corpus_dir().join("data");
    let expect = [
        // arrow-rs 59's footer parser rejects it (a list element type mismatch in the Thrift);
        // both readers stop at the footer.
        ("dict-page-offset-zero.parquet", "invalid Parquet footer"),
        // The dictionary page header is malformed.
        ("nation.dict-malformed.parquet", "Invalid page header"),
    ];
    // A map of strings in one page of 1 GiB + 4 bytes (which would overflow arrow-rs's i32
    // string offsets): past cuparquet's 1 GiB page cap, refused before it is inflated, at once
    // and in little memory. (arrow-rs refuses it too, with "index overflow decoding byte
    // array", after inflating it: 4.2 GB, more than the test run may take; the corpus walks
    // leave it out, `common::CORPUS_LEFT_OUT`.)
    let big = dir.join("large_string_map.brotli.parquet");
    let e = load(&big, Device::Host, None, None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("large_string_map.brotli.parquet")
            && e.contains("pages of more than 1073741824 are refused"),
        "{e}"
    );
    for (name, want) in expect {
        let p: PathBuf = dir.join(name);
        let e = load(&p, Device::Host, None, None).unwrap_err().to_string();
        assert!(e.contains(name) && e.contains(want), "{name}: {e}");
        assert!(
            oracle(&p, &Projection::All, None).is_err(),
            "{name}: arrow-rs now reads it"
        );
    }
}

/// What arrow-rs reads from `path` asked for the types of `schema`, in one batch.
fn read_as(path: &Path, schema: &arrow::datatypes::SchemaRef) -> arrow::record_batch::RecordBatch {
    use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
    let r = ParquetRecordBatchReaderBuilder::try_new_with_options(
        std::fs::File::open(path).unwrap(),
        ArrowReaderOptions::new().with_schema(std::sync::Arc::clone(schema)),
    )
    .unwrap()
    .build()
    .unwrap();
    let batches: Vec<_> = r.map(|b| b.unwrap()).collect();
    arrow::compute::concat_batches(schema, &batches).unwrap()
}

/// `with_keep_dictionaries`: string and binary columns stored with a dictionary load as
/// Dictionary(Int32, _) arrays, equal to what arrow-rs reads when asked for those types;
/// columns without one, and every other type, are unchanged. On every backend.
#[test]
fn kept_dictionaries_equal_arrow_rs_dictionary_reads() {
    use arrow::array::{ArrayRef, BinaryArray, Int64Array, StringArray};
    use arrow::datatypes::DataType;
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("dict.parquet");
    let n = 5000;
    let cols: Vec<(&str, ArrayRef)> = vec![
        (
            "city",
            Arc::new(StringArray::from_iter((0..n).map(|i| {
                (i % 11 != 0).then(|| ["Oslo", "Lima", "Pune", "Kyiv"][i % 4])
            }))),
        ),
        (
            "blob",
            Arc::new(BinaryArray::from_iter_values(
                (0..n).map(|i| [i as u8 % 3, 7]),
            )),
        ),
        (
            "note",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|i| format!("n{}", i % 9)),
            )),
        ),
        ("k", Arc::new(Int64Array::from_iter_values(0..n as i64))),
    ];
    let batch = arrow::record_batch::RecordBatch::try_from_iter(cols).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(2000))
        .set_column_dictionary_enabled("note".into(), false)
        .build();
    write(&p, std::slice::from_ref(&batch), props);
    let dict = |t: DataType| DataType::Dictionary(Box::new(DataType::Int32), Box::new(t));
    // arrow-rs asked for the same types
    let want_schema = Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("city", dict(DataType::Utf8), true),
        arrow::datatypes::Field::new("blob", dict(DataType::Binary), false),
        arrow::datatypes::Field::new("note", DataType::Utf8, false),
        arrow::datatypes::Field::new("k", DataType::Int64, false),
    ]));
    let want = read_as(&p, &want_schema);
    for backend in backends() {
        let reader = Scan::builder(&p)
            .with_device(backend.device)
            .with_keep_dictionaries(true)
            .build()
            .unwrap();
        let types: Vec<DataType> = reader
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        assert_eq!(
            types,
            [
                dict(DataType::Utf8),
                dict(DataType::Binary),
                DataType::Utf8,
                DataType::Int64
            ],
            "{}",
            backend.device
        );
        let loaded = reader.load().unwrap();
        let got = concat(&loaded.schema, &loaded.to_host().unwrap());
        assert_same(
            &format!("{} kept dictionaries", backend.device),
            &got,
            &want,
        );
        if let Some(g) = &loaded.report.loads[0].gpu_decode {
            // keys and dictionaries built on the device, a dictionary per row group
            for name in ["city", "blob"] {
                let f = g.fields.iter().find(|f| f.name == name).unwrap();
                assert!(f.on_gpu && f.reason.contains("dictionaries kept"), "{f:?}");
            }
        }
        // a projection keeps the dictionary too (columns in the file's order)
        let proj = Scan::builder(&p)
            .with_device(backend.device)
            .with_columns(["k", "city"])
            .with_keep_dictionaries(true)
            .build()
            .unwrap();
        assert_eq!(proj.schema().field(0).data_type(), &dict(DataType::Utf8));
        let got = proj.load().unwrap();
        let got = concat(&got.schema, &got.to_host().unwrap());
        assert_eq!(got.column(0).as_ref(), want.column(0).as_ref());
        assert_eq!(got.column(1).as_ref(), want.column(3).as_ref());
    }
    // off (the default): decoded values
    let plain = Scan::builder(&p).with_device(Device::Host).build().unwrap();
    assert_eq!(plain.schema().field(0).data_type(), &DataType::Utf8);

    // a dictionary that outgrows the writer's page limit: the rest of the chunk is PLAIN
    // (the fallback), which the device leaves to the host; batches of 700 rows cut the row
    // groups of 2,000 and span two of them
    let p = dir.path().join("fallback.parquet");
    let wide = StringArray::from_iter((0..n).map(|i| (i % 13 != 0).then(|| format!("w{i:05}"))));
    let narrow = StringArray::from_iter_values((0..n).map(|i| format!("n{}", i % 5)));
    let batch = arrow::record_batch::RecordBatch::try_from_iter([
        ("wide", Arc::new(wide) as ArrayRef),
        ("narrow", Arc::new(narrow) as ArrayRef),
    ])
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(2000))
        .set_dictionary_page_size_limit(2048)
        .set_data_page_row_count_limit(250)
        .set_write_batch_size(250)
        .build();
    write(&p, std::slice::from_ref(&batch), props);
    let want_schema = Arc::new(arrow::datatypes::Schema::new(vec![
        arrow::datatypes::Field::new("wide", dict(DataType::Utf8), true),
        arrow::datatypes::Field::new("narrow", dict(DataType::Utf8), false),
    ]));
    let want = read_as(&p, &want_schema);
    for backend in backends() {
        for batch_rows in [1 << 20, 700] {
            let loaded = Scan::builder(&p)
                .with_device(backend.device)
                .with_keep_dictionaries(true)
                .with_batch_rows(batch_rows)
                .build()
                .unwrap()
                .load()
                .unwrap();
            let got = concat(&loaded.schema, &loaded.to_host().unwrap());
            let what = format!("{} fallback, batches of {batch_rows}", backend.device);
            assert_same(&what, &got, &want);
            if let Some(g) = &loaded.report.loads[0].gpu_decode {
                let wide = g.fields.iter().find(|f| f.name == "wide").unwrap();
                assert!(
                    !wide.on_gpu && wide.reason.contains("fallback"),
                    "{what}: {wide:?}"
                );
                let narrow = g.fields.iter().find(|f| f.name == "narrow").unwrap();
                assert!(narrow.on_gpu, "{what}: {narrow:?}");
            }
        }
    }
}

/// Dictionary fields with keys of every integer type (arrow-rs writes their Arrow type, and
/// reads them back so): the GPU keeps them with keys of that width; a batch whose row groups'
/// dictionaries together outgrow its keys (Int8 here) is decoded on the host, as arrow-rs
/// reads it. On every backend, equal to arrow-rs.
#[test]
fn kept_dictionaries_of_every_key_type() {
    use arrow::array::{ArrayRef, DictionaryArray};
    use arrow::datatypes::{
        DataType, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type,
        UInt8Type,
    };
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("keys.parquet");
    let n = 6000;
    let names: Vec<String> = (0..300).map(|i| format!("s{i}")).collect();
    let small = |k: usize| {
        let names = &names;
        (0..n).map(move |i| (i % 17 != 0).then(|| names[i % k].as_str()))
    };
    let cols: Vec<(&str, ArrayRef)> = vec![
        (
            "i8",
            Arc::new(small(5).collect::<DictionaryArray<Int8Type>>()),
        ),
        (
            "u8",
            Arc::new(small(7).collect::<DictionaryArray<UInt8Type>>()),
        ),
        (
            "i16",
            Arc::new(small(300).collect::<DictionaryArray<Int16Type>>()),
        ),
        (
            "u16",
            Arc::new(small(9).collect::<DictionaryArray<UInt16Type>>()),
        ),
        (
            "i32",
            Arc::new(small(11).collect::<DictionaryArray<Int32Type>>()),
        ),
        (
            "u32",
            Arc::new(small(13).collect::<DictionaryArray<UInt32Type>>()),
        ),
        (
            "i64",
            Arc::new(small(15).collect::<DictionaryArray<Int64Type>>()),
        ),
        (
            "u64",
            Arc::new(small(19).collect::<DictionaryArray<UInt64Type>>()),
        ),
        // 100 values in every row group: three row groups in one batch hold 300 entries
        (
            "spill",
            Arc::new(small(100).collect::<DictionaryArray<Int8Type>>()),
        ),
    ];
    let batch = arrow::record_batch::RecordBatch::try_from_iter(cols).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(2000))
        .set_data_page_row_count_limit(500)
        .set_write_batch_size(500)
        .build();
    write(&p, std::slice::from_ref(&batch), props);
    // the dictionaries decoded to their values, for comparing
    let as_values = |batches: &[arrow::record_batch::RecordBatch]| {
        batches
            .iter()
            .map(|b| {
                let cols = b
                    .columns()
                    .iter()
                    .map(|c| match c.data_type() {
                        DataType::Dictionary(_, v) => arrow::compute::cast(c, v).unwrap(),
                        _ => Arc::clone(c),
                    })
                    .collect::<Vec<_>>();
                let fields: Vec<_> = cols
                    .iter()
                    .zip(b.schema().fields())
                    .map(|(c, f)| f.as_ref().clone().with_data_type(c.data_type().clone()))
                    .collect();
                let schema = Arc::new(arrow::datatypes::Schema::new(fields));
                arrow::record_batch::RecordBatch::try_new(schema, cols).unwrap()
            })
            .collect::<Vec<_>>()
    };
    let want = as_values(std::slice::from_ref(&read_as(&p, &batch.schema())))
        .pop()
        .unwrap();
    let values_schema = want.schema();
    for backend in backends() {
        for batch_rows in [1 << 20, 2000, 1500] {
            let loaded = Scan::builder(&p)
                .with_device(backend.device)
                .with_batch_rows(batch_rows)
                .build()
                .unwrap()
                .load()
                .unwrap();
            let what = format!("{} keys, batches of {batch_rows}", backend.device);
            let types = |s: &arrow::datatypes::Schema| -> Vec<DataType> {
                s.fields().iter().map(|f| f.data_type().clone()).collect()
            };
            assert_eq!(types(&loaded.schema), types(&batch.schema()), "{what}");
            // compared as values: the batches' dictionaries together may outgrow Int8 keys
            let got = concat(&values_schema, &as_values(&loaded.to_host().unwrap()));
            assert_same(&what, &got, &want);
            if let Some(g) = &loaded.report.loads[0].gpu_decode {
                for f in &g.fields {
                    // only the batch of three row groups outgrows the spill column's Int8 keys
                    let spills = f.name == "spill" && batch_rows > 2000;
                    assert_eq!(f.on_gpu, !spills, "{what}: {f:?}");
                    if spills {
                        assert!(
                            f.reason.contains("more than its Int8 keys"),
                            "{what}: {f:?}"
                        );
                    }
                }
            }
        }
    }
}
