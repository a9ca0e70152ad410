//! Bad files under SQL: errors naming the file, and the Apache corpus read as DataFusion reads it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_corrupt_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let t = &data().snappy;
    let good = t.orders.join("part-0.parquet");
    std::fs::copy(&good, dir.path().join("a.parquet")).unwrap();
    // the same file with its column data overwritten: the footer still reads
    let mut bytes = std::fs::read(&good).unwrap();
    for b in bytes[4..4000].iter_mut() {
        *b = 0xA5;
    }
    let bad: PathBuf = dir.path().join("b.parquet");
    std::fs::write(&bad, &bytes).unwrap();
    let ctx = SessionContext::new_with_config(config());
    register_gpu_parquet(&ctx, "orders", &s(dir.path()), GpuScanOptions::default())
        .await
        .unwrap();
    let e = ctx
        .sql("SELECT sum(o_orderkey), count(o_comment) FROM orders")
        .await
        .unwrap()
        .collect()
        .await
        .expect_err("a corrupt file must fail the query")
        .to_string();
    assert!(e.contains("b.parquet"), "{e}");
}

/// `bytes` (a file of one row group of `rows` rows) with that row group claiming `claim` rows:
/// the Thrift footer's row-group `num_rows` (field 3, after `total_byte_size`: a compact
/// header byte 0x16 and a zigzag varint; the last such bytes, after the file's count and the
/// column chunk's values), those two kept.
fn claiming(bytes: &[u8], rows: i64, claim: i64) -> Vec<u8> {
    fn varint(v: i64) -> Vec<u8> {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = vec![];
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }
    let n = bytes.len();
    let len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let footer = &bytes[n - 8 - len..n - 8];
    let mut from = vec![0x16];
    from.extend(varint(rows));
    let at: Vec<usize> = (0..footer.len() - from.len())
        .filter(|&i| footer[i..].starts_with(&from))
        .collect();
    assert_eq!(
        at.len(),
        3,
        "the file's rows, the chunk's values, the row group's rows"
    );
    let mut to = vec![0x16];
    to.extend(varint(claim));
    let mut f = footer[..at[2]].to_vec();
    f.extend(&to);
    f.extend(&footer[at[2] + from.len()..]);
    let mut out = bytes[..n - 8 - len].to_vec();
    out.extend(&f);
    out.extend((f.len() as u32).to_le_bytes());
    out.extend(b"PAR1");
    out
}

/// A footer's failures name the file on every path of a table: schema inference
/// (`register_gpu_parquet`, `CREATE EXTERNAL TABLE`), statistics and scans. A truncated file
/// says so; a row group claiming 2^62 rows over a thousand is refused from its footer (never
/// a count answered from statistics).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn footer_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let batch = RecordBatch::try_from_iter([(
        "x",
        Arc::new(datafusion::arrow::array::Int64Array::from_iter_values(
            0..1000,
        )) as datafusion::arrow::array::ArrayRef,
    )])
    .unwrap();
    let mut bytes = Vec::new();
    let mut w =
        datafusion::parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let good = dir.path().join("good");
    std::fs::create_dir(&good).unwrap();
    std::fs::write(good.join("a.parquet"), &bytes).unwrap();

    // truncated: inference names the file and says what it looks like
    let cut = dir.path().join("cut");
    std::fs::create_dir(&cut).unwrap();
    std::fs::write(cut.join("a.parquet"), &bytes).unwrap();
    std::fs::write(cut.join("b.parquet"), &bytes[..bytes.len() / 2]).unwrap();
    let ctx = SessionContext::new_with_config(config());
    let e = register_gpu_parquet(&ctx, "t", &s(&cut), GpuScanOptions::default())
        .await
        .expect_err("a truncated file")
        .to_string();
    let b = cut.join("b.parquet").display().to_string();
    assert!(e.contains(&b) && e.contains("looks truncated"), "{e}");
    register_gpu_parquet_format(&ctx).unwrap();
    let e = ctx
        .sql(&format!(
            "CREATE EXTERNAL TABLE t2 STORED AS GPUPARQUET LOCATION '{}'",
            s(&cut)
        ))
        .await
        .expect_err("a truncated file")
        .to_string();
    assert!(e.contains(&b) && e.contains("looks truncated"), "{e}");

    // a row group's claim: refused by inference, by statistics and by the scan
    let claims = dir.path().join("claims");
    std::fs::create_dir(&claims).unwrap();
    std::fs::write(claims.join("c.parquet"), claiming(&bytes, 1000, 1 << 62)).unwrap();
    let c = claims.join("c.parquet").display().to_string();
    let want = "row group 0: it claims 4611686018427387904 rows, but column 'x' holds 1000 values";
    let e = register_gpu_parquet(&ctx, "t3", &s(&claims), GpuScanOptions::default())
        .await
        .expect_err("a claim")
        .to_string();
    assert!(e.contains(&c) && e.contains(want), "{e}");
    // a schema given, nothing inferred: statistics (which would answer the count) see it
    ctx.sql(&format!(
        "CREATE EXTERNAL TABLE t4 (x BIGINT) STORED AS GPUPARQUET LOCATION '{}'",
        s(&claims)
    ))
    .await
    .unwrap();
    let a = c.clone();
    let e = ctx
        .sql("SELECT count(*) FROM t4")
        .await
        .unwrap()
        .collect()
        .await
        .expect_err("a claim")
        .to_string();
    assert!(e.contains(&a) && e.contains(want), "{e}");
}

/// The parquet-testing corpus: `PARQUET_TESTING_DIR`, else `../shared/parquet-testing` from
/// the workspace root (where the GPU machine runs the tests) or from this crate's folder
/// (where cargo does).
fn corpus() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("PARQUET_TESTING_DIR") {
        return Some(PathBuf::from(d).join("data"));
    }
    [
        "../shared/parquet-testing/data",
        "../../shared/parquet-testing/data",
    ]
    .iter()
    .map(PathBuf::from)
    .find(|p| p.is_dir())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn corpus_files_read_as_datafusion_reads_them() {
    let Some(dir) = corpus() else {
        panic!("the parquet-testing corpus is not found (set PARQUET_TESTING_DIR)");
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        // one page of 1 GiB of strings: 4.2 GB for DataFusion to refuse, more than the test
        // run may take (cuparquet's refusal is checked in the core crate's conformance tests)
        .filter(|p| !p.ends_with("large_string_map.brotli.parquet"))
        .collect();
    files.sort();
    let (mut same, mut theirs_failed) = (0, Vec::new());
    let mut differ = Vec::new();
    for f in &files {
        let path = f.display().to_string();
        let df = SessionContext::new_with_config(config());
        let theirs = match df
            .register_parquet("t", &path, ParquetReadOptions::default())
            .await
        {
            Ok(()) => match df.sql("SELECT * FROM t").await {
                Ok(d) => d.collect().await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let Ok(theirs) = theirs else {
            theirs_failed.push(f.file_name().unwrap().to_string_lossy().to_string());
            continue;
        };
        let ours = async {
            let ctx = SessionContext::new_with_config(config());
            register_gpu_parquet(&ctx, "t", &path, GpuScanOptions::default()).await?;
            ctx.sql("SELECT * FROM t").await?.collect().await
        }
        .await;
        match ours {
            Ok(ours) if text(&ours) == text(&theirs) => same += 1,
            Ok(_) => differ.push(format!("{}: different values", f.display())),
            Err(e) => differ.push(format!("{}: {e}", f.display())),
        }
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "{same} corpus files read the same; DataFusion itself fails on {}: {theirs_failed:?}",
        theirs_failed.len()
    );
    assert!(
        differ.is_empty(),
        "{} files differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
    assert!(same > 30, "{same}");
}
