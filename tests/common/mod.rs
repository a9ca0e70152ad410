//! Shared by the integration tests: where the data is, the arrow-rs oracle, generated files.
#![allow(dead_code, unreachable_pub)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::*;
use arrow::compute::concat_batches;
use arrow::datatypes::*;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{BrotliLevel, Compression, Encoding, GzipLevel, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};

mod deep;
pub use deep::deep_nested_batch;

/// The parquet-testing corpus: `PARQUET_TESTING_DIR`, else `../shared/parquet-testing`
/// relative to the working directory (the package root under cargo).
pub fn corpus_dir() -> PathBuf {
    std::env::var_os("PARQUET_TESTING_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/parquet-testing"))
}

/// Files in a corpus subdirectory whose names end with one of `exts`, sorted.
/// Corpus files the tests that walk the corpus leave out: `large_string_map.brotli.parquet`
/// holds one page of 1 GiB + 4 bytes of strings, which arrow-rs inflates (and builds strings
/// from) before refusing it, 4.2 GB of memory per attempt, and every corpus walk made one.
/// cuparquet refuses it before inflating it (its page cap): `conformance::documented_failures`
/// checks that.
pub const CORPUS_LEFT_OUT: &[&str] = &["large_string_map.brotli.parquet"];

pub fn corpus_files(sub: &str, exts: &[&str]) -> Vec<PathBuf> {
    let dir = corpus_dir().join(sub);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| {
            panic!(
                "corpus directory {} unreadable: {e} (set PARQUET_TESTING_DIR)",
                dir.display()
            )
        })
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            exts.iter().any(|x| n.ends_with(x)) && !CORPUS_LEFT_OUT.contains(&n)
        })
        .collect();
    v.sort();
    v
}

/// What the oracle reads.
pub enum Projection {
    All,
    /// Top-level columns by index.
    Roots(Vec<usize>),
}

/// arrow-rs's own read of `path`: all batches concatenated, or its error.
pub fn oracle(
    path: &Path,
    proj: &Projection,
    row_groups: Option<&[usize]>,
) -> Result<RecordBatch, String> {
    let run = |batch_size: Option<usize>| -> Result<RecordBatch, String> {
        let f = File::open(path).map_err(|e| e.to_string())?;
        let mut b = ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| e.to_string())?;
        if let Some(n) = batch_size {
            b = b.with_batch_size(n);
        }
        if let Projection::Roots(r) = proj {
            let mask = ProjectionMask::roots(b.parquet_schema(), r.iter().copied());
            b = b.with_projection(mask);
        }
        if let Some(rg) = row_groups {
            b = b.with_row_groups(rg.to_vec());
        }
        let reader = b.build().map_err(|e| e.to_string())?;
        let schema = reader.schema();
        let batches: Vec<RecordBatch> = reader
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        concat_batches(&schema, &batches).map_err(|e| e.to_string())
    };
    // arrow-rs panics on some corrupt files: that counts as its error. Some of its panics
    // depend on where its batches end (a mutated map's levels, found by the mutants: pyarrow
    // reads the file, and so does arrow-rs in batches of a million rows, as the host decoder
    // reads it): a panic is tried again in such batches before it counts.
    // (quietly: only this thread's panics go unprinted, not those of tests beside it)
    use cuparquet::error::catch_quietly;
    let r = catch_quietly(|| run(None)).or_else(|_| catch_quietly(|| run(Some(1 << 20))));
    r.unwrap_or_else(|_| Err("arrow-rs panicked".into()))
}

/// Concatenates loaded batches (host copies) with the given schema.
pub fn concat(schema: &SchemaRef, batches: &[RecordBatch]) -> RecordBatch {
    concat_batches(schema, batches).expect("concat")
}

/// Asserts two batches hold the same columns (names, types, values), saying where they differ.
pub fn assert_same(what: &str, got: &RecordBatch, want: &RecordBatch) {
    assert_eq!(got.num_rows(), want.num_rows(), "{what}: row count");
    assert_eq!(
        got.num_columns(),
        want.num_columns(),
        "{what}: column count"
    );
    for i in 0..want.num_columns() {
        let (gf, wf) = (
            got.schema().field(i).clone(),
            want.schema().field(i).clone(),
        );
        assert_eq!(gf.name(), wf.name(), "{what}: column {i} name");
        assert_eq!(
            gf.data_type(),
            wf.data_type(),
            "{what}: column {} type",
            wf.name()
        );
        assert_eq!(
            got.column(i).to_data(),
            want.column(i).to_data(),
            "{what}: column {} values",
            wf.name()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Generated files

/// A batch with every flat type arrow-rs writes, nulls in every nullable column.
pub fn flat_batch(rows: usize, seed: u64) -> RecordBatch {
    let n = rows;
    let r = |i: usize| {
        (i as u64)
            .wrapping_mul(6364136223846793005)
            .wrapping_add(seed)
            >> 17
    };
    let null = |i: usize| r(i) % 7 == 0;
    let cols: Vec<(&str, ArrayRef)> = vec![
        (
            "bool",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) % 2 == 0))
                    .collect::<BooleanArray>(),
            ),
        ),
        (
            "i8",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) as i8))
                    .collect::<Int8Array>(),
            ),
        ),
        (
            "i16",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) as i16))
                    .collect::<Int16Array>(),
            ),
        ),
        (
            "i32",
            Arc::new(
                (0..n)
                    .map(|i| Some(i as i32 * 3 - 100))
                    .collect::<Int32Array>(),
            ),
        ),
        (
            "i64",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) as i64 - (1 << 40)))
                    .collect::<Int64Array>(),
            ),
        ),
        (
            "u8",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) as u8))
                    .collect::<UInt8Array>(),
            ),
        ),
        (
            "u16",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) as u16))
                    .collect::<UInt16Array>(),
            ),
        ),
        (
            "u32",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) as u32))
                    .collect::<UInt32Array>(),
            ),
        ),
        (
            "u64",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i).wrapping_mul(977)))
                    .collect::<UInt64Array>(),
            ),
        ),
        (
            "f16",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(half::f16::from_f32((r(i) % 1000) as f32 / 8.0)))
                    .collect::<Float16Array>(),
            ),
        ),
        (
            "f32",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some((r(i) % 100_000) as f32 / 7.0))
                    .collect::<Float32Array>(),
            ),
        ),
        (
            "f64",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some((r(i) % 1_000_000) as f64 / 3.0))
                    .collect::<Float64Array>(),
            ),
        ),
        (
            "utf8",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then(|| format!("s{}", r(i) % 50)))
                    .collect::<StringArray>(),
            ),
        ),
        (
            "large_utf8",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then(|| "ü".repeat((r(i) % 5) as usize)))
                    .collect::<LargeStringArray>(),
            ),
        ),
        (
            "binary",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then(|| vec![r(i) as u8; (r(i) % 9) as usize]))
                    .collect::<BinaryArray>(),
            ),
        ),
        (
            "large_binary",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then(|| vec![1u8, i as u8]))
                    .collect::<LargeBinaryArray>(),
            ),
        ),
        (
            "fixed",
            Arc::new(
                FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                    (0..n).map(|i| (!null(i)).then(|| (r(i) as u32).to_le_bytes())),
                    4,
                )
                .unwrap(),
            ),
        ),
        (
            "date32",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(18_000 + i as i32))
                    .collect::<Date32Array>(),
            ),
        ),
        (
            "date64",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(86_400_000 * (i as i64)))
                    .collect::<Date64Array>(),
            ),
        ),
        (
            "time32s",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some((i % 86_400) as i32))
                    .collect::<Time32SecondArray>(),
            ),
        ),
        (
            "time32ms",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some((r(i) % 86_400_000) as i32))
                    .collect::<Time32MillisecondArray>(),
            ),
        ),
        (
            "time64us",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some((r(i) % 86_400_000_000) as i64))
                    .collect::<Time64MicrosecondArray>(),
            ),
        ),
        (
            "time64ns",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some((r(i) % 86_400_000_000_000) as i64))
                    .collect::<Time64NanosecondArray>(),
            ),
        ),
        (
            "ts_s",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) as i64 % 4_000_000_000))
                    .collect::<TimestampSecondArray>(),
            ),
        ),
        (
            "ts_ms_utc",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) as i64))
                    .collect::<TimestampMillisecondArray>()
                    .with_timezone("UTC"),
            ),
        ),
        (
            "ts_us",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) as i64))
                    .collect::<TimestampMicrosecondArray>()
                    .with_timezone("+02:00"),
            ),
        ),
        (
            "ts_ns",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) as i64))
                    .collect::<TimestampNanosecondArray>(),
            ),
        ),
        (
            "dec32",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some((r(i) % 99_999) as i32 - 50_000))
                    .collect::<Decimal32Array>()
                    .with_precision_and_scale(7, 2)
                    .unwrap(),
            ),
        ),
        (
            "dec64",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) as i64 % 10_000_000_000))
                    .collect::<Decimal64Array>()
                    .with_precision_and_scale(15, 3)
                    .unwrap(),
            ),
        ),
        (
            "dec128_small",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some((r(i) % 99_999) as i128))
                    .collect::<Decimal128Array>()
                    .with_precision_and_scale(9, 2)
                    .unwrap(),
            ),
        ),
        (
            "dec128",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(r(i) as i128 * 1_000_000_007 - (1 << 60)))
                    .collect::<Decimal128Array>()
                    .with_precision_and_scale(38, 10)
                    .unwrap(),
            ),
        ),
        (
            "dec256",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then_some(i256::from_i128(r(i) as i128 * -77)))
                    .collect::<Decimal256Array>()
                    .with_precision_and_scale(50, 5)
                    .unwrap(),
            ),
        ),
        (
            "dict_utf8",
            Arc::new(
                (0..n)
                    .map(|i| (!null(i)).then(|| ["red", "green", "blue"][i % 3]))
                    .collect::<DictionaryArray<Int32Type>>(),
            ),
        ),
    ];
    RecordBatch::try_from_iter(cols).unwrap()
}

/// A batch with lists, structs, maps and their nulls.
pub fn nested_batch(rows: usize) -> RecordBatch {
    let n = rows;
    let list = ListArray::from_iter_primitive::<Int32Type, _, _>((0..n).map(|i| {
        match i % 5 {
            0 => None,
            1 => Some(vec![]),
            _ => Some(
                (0..i % 4)
                    .map(|j| if j == 2 { None } else { Some((i * j) as i32) })
                    .collect(),
            ),
        }
    }));
    let mut lsb = ListBuilder::new(StringBuilder::new());
    for i in 0..n {
        if i % 6 == 0 {
            lsb.append_null();
        } else {
            for j in 0..(i % 3) {
                lsb.values().append_value(format!("t{i}-{j}"));
            }
            lsb.append(true);
        }
    }
    let large_list = LargeListArray::from_iter_primitive::<Int64Type, _, _>(
        (0..n).map(|i| (i % 4 != 0).then(|| vec![Some(i as i64), None])),
    );
    let s_a: ArrayRef = Arc::new(
        (0..n)
            .map(|i| (i % 3 != 0).then_some(i as i32))
            .collect::<Int32Array>(),
    );
    let s_b: ArrayRef = Arc::new(
        (0..n)
            .map(|i| Some(format!("b{i}")))
            .collect::<StringArray>(),
    );
    let strukt = StructArray::try_new(
        vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Utf8, true),
        ]
        .into(),
        vec![s_a, s_b],
        Some((0..n).map(|i| i % 7 != 0).collect()),
    )
    .unwrap();
    let mut mb = MapBuilder::new(None, StringBuilder::new(), Int64Builder::new());
    for i in 0..n {
        if i % 8 == 0 {
            mb.append(false).unwrap();
            continue;
        }
        for j in 0..(i % 3) {
            mb.keys().append_value(format!("k{j}"));
            if j == 1 {
                mb.values().append_null();
            } else {
                mb.values().append_value((i * 10 + j) as i64);
            }
        }
        mb.append(true).unwrap();
    }
    // list of structs
    let mut lstb = ListBuilder::new(StructBuilder::from_fields(
        vec![
            Field::new("x", DataType::Int32, true),
            Field::new("y", DataType::Utf8, true),
        ],
        4,
    ));
    for i in 0..n {
        if i % 9 == 0 {
            lstb.append_null();
            continue;
        }
        for j in 0..(i % 3) {
            let sb = lstb.values();
            sb.field_builder::<Int32Builder>(0)
                .unwrap()
                .append_value((i + j) as i32);
            sb.field_builder::<StringBuilder>(1)
                .unwrap()
                .append_option((j % 2 == 0).then(|| format!("y{j}")));
            sb.append(true);
        }
        lstb.append(true);
    }
    RecordBatch::try_from_iter(vec![
        (
            "id",
            Arc::new(Int64Array::from_iter_values(0..n as i64)) as ArrayRef,
        ),
        ("list_i32", Arc::new(list)),
        ("list_str", Arc::new(lsb.finish())),
        ("large_list", Arc::new(large_list)),
        ("s", Arc::new(strukt)),
        ("m", Arc::new(mb.finish())),
        ("list_struct", Arc::new(lstb.finish())),
    ])
    .unwrap()
}

/// `props` writing no page index (statistics per chunk only, no offset index), as pyarrow
/// writes by default.
pub fn without_page_index(
    props: parquet::file::properties::WriterPropertiesBuilder,
) -> parquet::file::properties::WriterPropertiesBuilder {
    props
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_offset_index_disabled(true)
}

/// Writes `batches` to `path` with `props`.
pub fn write(path: &Path, batches: &[RecordBatch], props: WriterProperties) {
    let f = File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(f, batches[0].schema(), Some(props)).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
}

/// The project's generated conformance set, written into `dir`: (name, path).
pub fn generate_corpus(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let flat = flat_batch(3000, 7);
    let nested = nested_batch(2000);
    let codecs = [
        ("uncompressed", Compression::UNCOMPRESSED),
        ("snappy", Compression::SNAPPY),
        ("gzip", Compression::GZIP(GzipLevel::default())),
        ("lz4", Compression::LZ4),
        ("lz4_raw", Compression::LZ4_RAW),
        ("zstd", Compression::ZSTD(ZstdLevel::default())),
        ("brotli", Compression::BROTLI(BrotliLevel::default())),
    ];
    let base = || {
        WriterProperties::builder()
            .set_max_row_group_row_count(Some(1000))
            .set_data_page_row_count_limit(300)
            .set_write_batch_size(100)
    };
    let mut add = |name: String, batches: Vec<RecordBatch>, props: WriterProperties| {
        let p = dir.join(format!("{name}.parquet"));
        write(&p, &batches, props);
        out.push((name, p));
    };
    for (cname, codec) in codecs {
        for v2 in [false, true] {
            for dict in [true, false] {
                let name = format!(
                    "flat_{cname}_{}_{}",
                    if v2 { "v2" } else { "v1" },
                    if dict { "dict" } else { "plain" }
                );
                let props = base()
                    .set_compression(codec)
                    .set_writer_version(if v2 {
                        WriterVersion::PARQUET_2_0
                    } else {
                        WriterVersion::PARQUET_1_0
                    })
                    .set_dictionary_enabled(dict)
                    .build();
                add(name, vec![flat.clone()], props);
            }
        }
        add(
            format!("nested_{cname}"),
            vec![nested.clone()],
            base().set_compression(codec).build(),
        );
    }
    // DELTA_BINARY_PACKED integers, BYTE_STREAM_SPLIT floats and fixed-size binaries, and
    // DELTA_BYTE_ARRAY or DELTA_LENGTH_BYTE_ARRAY strings; v1 and v2 pages, SNAPPY and
    // uncompressed, small pages and pages of thousands of values (many miniblocks)
    for (name, strings, split_ints, v2, codec, page_rows) in [
        (
            "delta_v1",
            Encoding::DELTA_BYTE_ARRAY,
            false,
            false,
            Compression::UNCOMPRESSED,
            300,
        ),
        (
            "delta_v2_snappy",
            Encoding::DELTA_BYTE_ARRAY,
            false,
            true,
            Compression::SNAPPY,
            300,
        ),
        (
            "delta_length_v1",
            Encoding::DELTA_LENGTH_BYTE_ARRAY,
            true,
            false,
            Compression::SNAPPY,
            300,
        ),
        (
            "delta_big_pages",
            Encoding::DELTA_BYTE_ARRAY,
            false,
            false,
            Compression::UNCOMPRESSED,
            5000,
        ),
    ] {
        let mut props = base()
            .set_compression(codec)
            .set_dictionary_enabled(false)
            .set_data_page_row_count_limit(page_rows)
            .set_writer_version(if v2 {
                WriterVersion::PARQUET_2_0
            } else {
                WriterVersion::PARQUET_1_0
            });
        if page_rows > 1000 {
            props = props.set_max_row_group_row_count(Some(3000));
        }
        let descr = parquet::arrow::ArrowSchemaConverter::new()
            .convert(&flat.schema())
            .unwrap();
        for col in descr.columns() {
            use parquet::basic::Type as T;
            let enc = match col.physical_type() {
                T::INT32 | T::INT64 if split_ints => Encoding::BYTE_STREAM_SPLIT,
                T::INT32 | T::INT64 => Encoding::DELTA_BINARY_PACKED,
                T::FLOAT | T::DOUBLE | T::FIXED_LEN_BYTE_ARRAY => Encoding::BYTE_STREAM_SPLIT,
                T::BYTE_ARRAY => strings,
                _ => continue,
            };
            props = props.set_column_encoding(col.path().clone(), enc);
        }
        add(format!("flat_{name}"), vec![flat.clone()], props.build());
    }
    add(
        "nested_v2_plain".into(),
        vec![nested.clone()],
        base()
            .set_writer_version(WriterVersion::PARQUET_2_0)
            .set_dictionary_enabled(false)
            .build(),
    );
    // nested three and four deep, v1 pages with dictionaries and v2 pages without
    let deep = deep_nested_batch(2000);
    add(
        "nested_deep_snappy".into(),
        vec![deep.clone()],
        base().set_compression(Compression::SNAPPY).build(),
    );
    add(
        "nested_deep_v2_zstd".into(),
        vec![deep],
        base()
            .set_writer_version(WriterVersion::PARQUET_2_0)
            .set_dictionary_enabled(false)
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .build(),
    );
    add(
        "many_small_row_groups".into(),
        vec![flat.slice(0, 1500)],
        base().set_max_row_group_row_count(Some(37)).build(),
    );
    add(
        "page_index".into(),
        vec![flat.clone()],
        base()
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_data_page_row_count_limit(64)
            .build(),
    );
    add(
        "no_statistics".into(),
        vec![flat.slice(0, 500)],
        base()
            .set_statistics_enabled(EnabledStatistics::None)
            .build(),
    );
    add(
        "bloom_filters".into(),
        vec![flat.slice(0, 800)],
        base().set_bloom_filter_enabled(true).build(),
    );
    // PLAIN strings of every size around the GPU walk's 1 KiB window: empty, tiny, just
    // under, at and over it, and several KiB; with nulls; SNAPPY and uncompressed
    let long = {
        let mut r = Rng(99);
        let lens = [0usize, 1, 3, 1019, 1020, 1021, 1024, 1025, 2047, 5000];
        let strings: StringArray = (0..1200)
            .map(|i| {
                let v = r.next();
                (!v.is_multiple_of(11)).then(|| {
                    let n = lens[(v >> 8) as usize % lens.len()];
                    (0..n)
                        .map(|j| (b'a' + ((i + j) % 26) as u8) as char)
                        .collect::<String>()
                })
            })
            .collect();
        let ids: Int32Array = (0..1200).collect();
        RecordBatch::try_from_iter([
            ("id", Arc::new(ids) as ArrayRef),
            ("s", Arc::new(strings) as ArrayRef),
        ])
        .unwrap()
    };
    for (cname, codec) in [
        ("uncompressed", Compression::UNCOMPRESSED),
        ("snappy", Compression::SNAPPY),
    ] {
        add(
            format!("long_strings_{cname}"),
            vec![long.clone()],
            base()
                .set_compression(codec)
                .set_dictionary_enabled(false)
                .build(),
        );
    }
    out
}

/// Whether GPU tests can run: true with a CUDA device; without one, prints why `what` is
/// skipped — or panics when `CUPARQUET_REQUIRE_GPU=1` (on the GPU machine a skip is a failure).
#[allow(dead_code)]
pub fn gpu_available(what: &str) -> bool {
    let p = cuparquet::device::probe_cuda();
    if p.devices > 0 {
        return true;
    }
    if std::env::var("CUPARQUET_REQUIRE_GPU").as_deref() == Ok("1") {
        panic!(
            "CUPARQUET_REQUIRE_GPU=1 but {what} cannot run: {}",
            p.detail
        );
    }
    // straight to the process's stderr: libtest captures `eprintln!`, and a skip must show in
    // the test run's output, not pass as a bare "ok"
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "skipping {what}: {}", p.detail);
    false
}

/// A small deterministic xorshift generator for test data.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in 0..n.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// Log-uniform in 1..=max.
    pub fn size(&mut self, max: u64) -> u64 {
        let bits = 64 - max.leading_zeros() as u64;
        let b = self.below(bits + 1);
        (1 + self.below(1u64 << b)).min(max)
    }
}

/// Overwrites 1 to 3 random bytes of `bytes` (not empty) with random values.
pub fn flip_bytes(r: &mut Rng, bytes: &mut [u8]) {
    for _ in 0..1 + r.0 % 3 {
        let v = r.next();
        let i = (v % bytes.len() as u64) as usize;
        bytes[i] = (v >> 40) as u8;
    }
}

/// Where test files go: `CUPARQUET_TEST_DIR`, else `target/` (not tmpfs: O_DIRECT and cuFile
/// need a real disk).
pub fn scratch_parent() -> std::path::PathBuf {
    let dir = std::env::var_os("CUPARQUET_TEST_DIR").map_or_else(
        || std::env::current_dir().unwrap().join("target"),
        std::path::PathBuf::from,
    );
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A scratch directory under [`scratch_parent`].
pub fn scratch_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(scratch_parent()).unwrap()
}

/// The corpus's data files (and, with `bad`, its bad_data files) plus the generated files,
/// which live as long as the returned directory.
pub fn all_files(bad: bool) -> (Vec<std::path::PathBuf>, tempfile::TempDir) {
    let mut files = corpus_files("data", &[".parquet"]);
    if bad {
        files.extend(corpus_files("bad_data", &[".parquet"]));
    }
    let dir = scratch_dir();
    files.extend(generate_corpus(dir.path()).into_iter().map(|(_, p)| p));
    (files, dir)
}

/// The CLI binary: `CUPARQUET_BIN` (the packed binary on the GPU machine), else cargo's build.
pub fn cuparquet_bin() -> std::path::PathBuf {
    std::env::var_os("CUPARQUET_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_cuparquet")))
}

/// arrow-rs's read of leaf `leaf` (a top-level column) of row group `rg`; `None` when arrow-rs
/// refuses it.
pub fn arrow_rs_chunk(path: &Path, rg: usize, leaf: usize) -> Option<arrow::array::ArrayRef> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ProjectionMask;
    let b = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).ok()?).ok()?;
    let mask = ProjectionMask::leaves(b.parquet_schema(), [leaf]);
    let rows = b.metadata().row_group(rg).num_rows().max(1) as usize;
    let batches: Vec<_> = b
        .with_projection(mask)
        .with_row_groups(vec![rg])
        .with_batch_size(rows)
        .build()
        .ok()?
        .collect::<Result<_, _>>()
        .ok()?;
    let arrays: Vec<&dyn arrow::array::Array> =
        batches.iter().map(|b| b.column(0).as_ref()).collect();
    arrow::compute::concat(&arrays).ok()
}

/// A cuda:0 load of `p` with SNAPPY on our kernel and a `share` percent of nvCOMP's codecs'
/// bytes (the largest pages) on the host's cores beside it.
pub fn cuda_with_host_share(p: &Path, share: u32) -> cuparquet::ScanBuilder {
    cuparquet::Scan::builder(p)
        .with_device(cuparquet::Device::Cuda(0))
        .with_snappy_placement(cuparquet::internals::gpu::SnappyPlacement::Device)
        .with_tuning(cuparquet::config::Tuning {
            host_share: Some(share),
            ..cuparquet::config::Tuning::default()
        })
}
