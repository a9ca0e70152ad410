//! Looking at data from the command line: `plan --where`'s truth, `head`, `--output` formats,
//! hive-partitioned directories and globs.

use std::path::Path;

use crate::common::*;
use crate::{read_ipc, run, text};

/// `plan --where` says that the row filter filters rows and reads the columns it tests;
/// pruned row groups are counted with their ranges (`--verbose`: each with its reason).
#[test]
fn plan_tells_the_truth_about_row_filters() {
    let f = "testdata/lineitem-sample.parquet";
    let o = run(&[
        "plan",
        f,
        "--columns",
        "l_quantity",
        "--where",
        "l_orderkey < 3000 AND l_returnflag LIKE 'R%'",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("plan: 1 row group (5000 rows), 3 columns"),
        "{out}"
    );
    assert!(
        out.contains(
            "row filter: l_orderkey < 3000 AND l_returnflag LIKE 'R%' (prunes row groups by \
             statistics, then keeps only the rows where it is true"
        ),
        "{out}"
    );
    assert!(!out.contains("rows are not filtered"), "{out}");
    assert!(
        out.contains("pruned 3 row groups (1-3): row group 1: l_orderkey < 3000: min 20001"),
        "{out}"
    );
    assert_eq!(out.matches("pruned row group").count(), 0, "{out}");
    let o = run(&["plan", f, "--where", "l_orderkey < 3000", "--verbose"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out.matches("  pruned row group ").count(), 3, "{out}");
    // --filter alone still says it does not filter rows
    let o = run(&["plan", f, "--filter", "l_orderkey < 3000"]);
    let (out, _) = text(&o);
    assert!(
        out.contains(
            "filter: l_orderkey < 3000 (prunes row groups by statistics; rows are not filtered)"
        ),
        "{out}"
    );
}

/// `load` of a hive-partitioned directory: the partition columns after the file's, a filter on
/// them reading only the directories it keeps; a glob; a directory of subdirectories.
#[test]
fn load_reads_hive_partitions_and_globs() {
    let dir = tempfile::tempdir().unwrap();
    for y in ["2023", "2024"] {
        let sub = dir.path().join(format!("year={y}"));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::copy(
            "testdata/lineitem-sample.parquet",
            sub.join("part-0.parquet"),
        )
        .unwrap();
    }
    let d = dir.path().to_str().unwrap();
    let out = dir.path().join("out.arrow");
    let o = run(&[
        "load",
        d,
        "--device",
        "host",
        "--where",
        "year = 2024 AND l_orderkey < 100",
        "--output",
        out.to_str().unwrap(),
    ]);
    let (stdout, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(stdout.matches("wrote ").count(), 1, "{stdout}");
    let got = read_ipc(&out);
    let schema = got.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names.last(), Some(&"year"), "{names:?}");
    let years = got.column_by_name("year").unwrap();
    let years = years
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .unwrap();
    assert!(got.num_rows() > 0 && years.iter().all(|y| y == Some(2024)));
    // the same rows as the one file with the same filter
    let one = dir.path().join("one.arrow");
    let o = run(&[
        "load",
        "testdata/lineitem-sample.parquet",
        "--device",
        "host",
        "--where",
        "l_orderkey < 100",
        "--output",
        one.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(read_ipc(&one).num_rows(), got.num_rows());
    // a glob over the partitions
    let pattern = format!("{d}/year=*/*.parquet");
    let o = run(&["load", &pattern, "--device", "host"]);
    let (stdout, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(stdout.contains("40000 rows"), "{stdout}");
}

/// `head` prints the first rows as a table; `--output` writes Parquet, CSV, an IPC stream or
/// an IPC file, by extension or `--format`, each reading back as the same rows.
#[test]
fn head_and_output_formats() {
    let f = "testdata/lineitem-sample.parquet";
    let o = run(&[
        "head",
        f,
        "-n",
        "3",
        "--columns",
        "l_orderkey,l_returnflag",
        "--where",
        "l_returnflag LIKE 'R%' AND l_orderkey BETWEEN 100 AND 200",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("| l_orderkey | l_returnflag |"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("| 1")).count(),
        3,
        "{out}"
    );
    assert!(out.contains("| 108        | R            |"), "{out}");
    let o = run(&["head", f, "--where", "l_orderkey < 0"]);
    let (out, _) = text(&o);
    assert!(
        out.contains("(no rows) columns: l_orderkey, l_quantity"),
        "{out}"
    );

    let dir = tempfile::tempdir().unwrap();
    let want = read_ipc_of(f, dir.path());
    for (name, format) in [
        ("x.parquet", None),
        ("x.csv", None),
        ("x.arrows", None),
        ("x.data", Some("parquet")),
    ] {
        let out = dir.path().join(name);
        let mut args = vec![
            "load",
            f,
            "--device",
            "host",
            "-q",
            "--columns",
            "l_orderkey,l_comment",
        ];
        let o_str = out.to_str().unwrap().to_string();
        args.extend(["--output", &o_str]);
        if let Some(fmt) = format {
            args.extend(["--format", fmt]);
        }
        let o = run(&args);
        let (_, err) = text(&o);
        assert!(o.status.success(), "{name}: {err}");
        let rows = match (name, format) {
            ("x.csv", _) => std::fs::read_to_string(&out).unwrap().lines().count() - 1,
            ("x.arrows", _) => {
                let r = arrow::ipc::reader::StreamReader::try_new(
                    std::fs::File::open(&out).unwrap(),
                    None,
                )
                .unwrap();
                r.map(|b| b.unwrap().num_rows()).sum()
            }
            _ => {
                let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                    std::fs::File::open(&out).unwrap(),
                )
                .unwrap()
                .build()
                .unwrap();
                let batches: Vec<_> = r.map(|b| b.unwrap()).collect();
                let got = concat(&batches[0].schema(), &batches);
                assert_eq!(got.columns(), want.columns(), "{name}");
                got.num_rows()
            }
        };
        assert_eq!(rows, 20_000, "{name}");
    }
    let o = run(&["load", f, "--device", "host", "--output", "x.txt"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("the extension does not say the format"),
        "{err}"
    );
    assert!(!Path::new("x.txt").exists());
}

/// `f`'s l_orderkey and l_comment, loaded to an Arrow IPC file in `dir` and read back.
fn read_ipc_of(f: &str, dir: &Path) -> arrow::record_batch::RecordBatch {
    let out = dir.join("want.arrow");
    let o = run(&[
        "load",
        f,
        "--device",
        "host",
        "-q",
        "--columns",
        "l_orderkey,l_comment",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    read_ipc(&out)
}

/// `plan` and `load` prune row groups by bloom filters on equalities.
#[test]
fn plan_and_load_prune_by_bloom_filters() {
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bloom.parquet");
    let n = 40_000i64;
    let k = arrow::array::Int64Array::from_iter_values((0..n).map(|i| i * 7_919 % n));
    let batch = arrow::record_batch::RecordBatch::try_from_iter([(
        "k",
        Arc::new(k) as arrow::array::ArrayRef,
    )])
    .unwrap();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(5_000))
        .set_bloom_filter_enabled(true)
        .build();
    write(&f, &[batch], props);
    let f = f.to_str().unwrap();
    let o = run(&["plan", f, "--where", "k = 4242"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.starts_with("plan: 1 row group (5000 rows)"), "{out}");
    assert!(out.contains("not in the column's bloom filter"), "{out}");
    let o = run(&["load", f, "--device", "host", "--where", "k = 4242"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("rows 1, columns 1 (1 leaf), row groups 1"),
        "{out}"
    );
}

/// `cuparquet sql` runs `cuparquet-sql` beside it (built with cuparquet-datafusion), or says how
/// to build it.
#[test]
fn sql_runs_the_providers_binary_or_says_how_to_build_it() {
    let f = "testdata/lineitem-sample.parquet";
    let o = run(&[
        "sql",
        "--csv",
        "SELECT count(*) AS n FROM t WHERE l_returnflag = 'R'",
        f,
    ]);
    let (out, err) = text(&o);
    if o.status.success() {
        assert_eq!(out, "n\n6682\n", "{err}");
        let o = run(&["sql", "SELEC 1"]);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(1));
        assert!(err.contains("cuparquet sql: error: SQL error"), "{err}");
    } else {
        assert!(err.contains("cargo build -p cuparquet-datafusion"), "{err}");
    }
}
