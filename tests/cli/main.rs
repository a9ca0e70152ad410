//! The `cuparquet` binary: inspect, plan, load --output, exit codes; `looking` holds the
//! commands for looking at data (head, output formats, hive directories and globs).

#[path = "../common/mod.rs"]
mod common;
mod looking;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;

fn bin() -> PathBuf {
    cuparquet_bin()
}

fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env_remove("CUPARQUET_NTHREADS")
        .output()
        .expect("run cuparquet")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn data(name: &str) -> String {
    corpus_dir().join("data").join(name).display().to_string()
}

#[test]
fn inspect_shows_schema_row_groups_and_columns() {
    let o = run(&["inspect", &data("alltypes_tiny_pages_plain.parquet")]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    for want in [
        "schema:",
        "OPTIONAL INT32 id;",
        "row group 0: 7300 rows",
        "string_col: BYTE_ARRAY STRING | ",
        "UNCOMPRESSED",
        "statistics",
        "page index column+offset",
        "bloom filter no",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    // statistics as the values they stand for: dates, strings, scaled decimals
    let o = run(&["inspect", "testdata/lineitem-sample.parquet"]);
    let (out, _) = text(&o);
    for want in [
        "l_shipdate: INT32 DATE | ",
        "statistics min 1992-01-03, max 1998-11-05, nulls 0",
        "min 'A', max 'R'",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    let o = run(&["inspect", &data("fixed_length_decimal.parquet")]);
    let (out, _) = text(&o);
    assert!(
        out.contains("DECIMAL(25,2)") && out.contains("min 2.00, max 24.00"),
        "{out}"
    );
    // --json: the same, structured
    let o = run(&["inspect", "testdata/lineitem-sample.parquet", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("inspect --json is JSON");
    assert_eq!(v["rows"], 20_000);
    let c = &v["row_groups"][0]["columns"][3];
    assert_eq!(c["path"], "l_shipdate");
    assert_eq!(c["logical_type"], "DATE");
    assert_eq!(c["statistics"]["min"], "1992-01-03");
    assert_eq!(c["statistics"]["null_count"], 0);
    // typed: numbers as numbers, strings unquoted, the page index as booleans, the schema a tree
    let k = &v["row_groups"][0]["columns"][0];
    assert_eq!(k["path"], "l_orderkey");
    assert_eq!(k["statistics"]["min"], 2);
    assert!(k["statistics"]["max"].is_u64(), "{k}");
    let flag = &v["row_groups"][0]["columns"][4];
    assert_eq!(flag["statistics"]["min"], "A", "{flag}");
    assert_eq!(flag["page_index"]["offset_index"], true, "{flag}");
    assert_eq!(flag["bloom_filter"], false);
    assert_eq!(v["schema"]["fields"][3]["name"], "l_shipdate");
    assert_eq!(v["schema"]["fields"][3]["physical_type"], "INT32");
    assert_eq!(v["schema"]["fields"][3]["logical_type"], "DATE");
    // several files (a directory, a glob): one object each
    let dir = tempfile::tempdir().unwrap();
    for n in ["a", "b"] {
        std::fs::copy(
            "testdata/lineitem-sample.parquet",
            dir.path().join(format!("{n}.parquet")),
        )
        .unwrap();
    }
    let o = run(&["inspect", dir.path().to_str().unwrap(), "--json", "--brief"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["files"].as_array().map(Vec::len), Some(2), "{v}");
    let o = run(&[
        "inspect",
        &format!("{}/*.parquet", dir.path().display()),
        "--brief",
    ]);
    let (out, _) = text(&o);
    assert_eq!(out.matches("file: ").count(), 2, "{out}");
}

#[test]
fn plan_text_and_json() {
    let f = data("alltypes_plain.parquet");
    let o = run(&[
        "plan",
        &f,
        "--columns",
        "id,string_col",
        "--filter",
        "id > 3",
    ]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("plan: 1 row group (8 rows), 2 columns"),
        "{out}"
    );
    assert!(
        out.contains("filter: id > 3 (prunes row groups by statistics; rows are not filtered)"),
        "{out}"
    );
    let o = run(&["plan", &f, "--json", "--row-groups", "0"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("plan --json is JSON");
    assert_eq!(v["row_groups"], serde_json::json!([0]));
    assert_eq!(v["chunks"].as_array().unwrap().len(), 11);
    assert!(v["requests"][0]["range"]["end"].as_u64().unwrap() > 0);
}

#[test]
fn plan_cuts_passes_under_a_memory_budget() {
    let f = "testdata/lineitem-sample.parquet";
    let o = run(&["plan", f, "--memory-budget", "2MiB", "--batch-rows", "7000"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.contains("passes under a budget of 2.0 MiB: 4 passes, 4 batches of at most 7000 rows"),
        "{out}"
    );
    assert!(out.contains("  pass 0: row group 0, "), "{out}");
    let o = run(&["plan", f, "--memory-budget", "1GiB", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("plan --json is JSON");
    let batch = &v["passes"]["passes"][0]["batches"][0]["parts"];
    assert_eq!(batch.as_array().unwrap().len(), 4, "{batch}");
    assert_eq!(batch[3]["rows"]["end"], 5000);
    // a budget no row group fits: exit 1, one line naming the row group and the budget
    let o = run(&["plan", f, "--memory-budget", "64KiB"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("row group 0 needs about") && err.contains("budget of 0.1 MiB"),
        "{err}"
    );
}

/// A row group larger than the budget in a file without a page index: cut into pieces by its
/// page headers, as a load cuts it.
#[test]
fn plan_cuts_a_row_group_without_a_page_index_by_its_page_headers() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("no-index.parquet");
    let props = without_page_index(
        parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(1 << 20))
            .set_dictionary_enabled(false)
            .set_data_page_row_count_limit(700)
            .set_write_batch_size(100),
    )
    .build();
    write(&f, &[flat_batch(60_000, 5)], props);
    let f = f.to_str().unwrap();
    let o = run(&["plan", f, "--memory-budget", "8MiB"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("(a piece: only its pages read)"), "{out}");
    let o = run(&["plan", f, "--memory-budget", "8MiB", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("plan --json is JSON");
    let passes = v["passes"]["passes"].as_array().unwrap();
    assert!(passes.len() >= 4, "{}", passes.len());
    // the pieces hold every row once, in order
    let mut next = 0;
    for p in passes {
        for b in p["batches"].as_array().unwrap() {
            let rows = &b["parts"][0]["rows"];
            assert_eq!(rows["start"], next, "{p}");
            next = rows["end"].as_u64().unwrap();
        }
    }
    assert_eq!(next, 60_000);
}

#[test]
fn plan_spreads_passes_over_devices() {
    let f = "testdata/lineitem-sample.parquet";
    let args = ["plan", f, "--memory-budget", "2MiB", "--batch-rows", "1000"];
    let o = run(&[&args[..], &["--devices", "cuda:0,gpu:1"]].concat());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(out.contains("spread over 2 devices"), "{out}");
    assert!(
        out.contains("cuda:0 (budget 2.0 MiB): 2 passes (0, 2), 10000 rows"),
        "{out}"
    );
    assert!(
        out.contains("cuda:1 (budget 2.0 MiB): 2 passes (1, 3), 10000 rows"),
        "{out}"
    );
    let o = run(&[&args[..], &["--devices", "cuda:1,cuda:0,cuda:2", "--json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("plan --json is JSON");
    let shares = v["devices"]["shares"].as_array().unwrap();
    let ordinals: Vec<u64> = shares
        .iter()
        .map(|s| s["device"]["ordinal"].as_u64().unwrap())
        .collect();
    assert_eq!(ordinals, [1, 0, 2]);
    let device_of: Vec<u64> = v["devices"]["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["device"].as_u64().unwrap())
        .collect();
    assert_eq!(device_of, [0, 1, 2, 0]);
    // a device twice, the host in the list, no budget: usage errors naming the fault
    for (list, want) in [
        ("cuda:0,gpu:0", "cuda:0 is named twice"),
        ("cuda:0,host", "a device list names CUDA devices"),
    ] {
        let o = run(&[&args[..], &["--devices", list]].concat());
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "{err}");
    }
    let o = run(&["plan", f, "--devices", "cuda:0"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--memory-budget"), "{err}");
}

#[test]
fn load_spreads_over_devices_or_says_why_not() {
    let f = "testdata/lineitem-sample.parquet";
    let o = run(&["load", f, "--devices", "cuda:0", "--memory-budget", "4MiB"]);
    let (out, err) = text(&o);
    if cuparquet::device::probe_cuda().devices > 0 {
        assert!(o.status.success(), "{err}");
        assert!(
            out.contains("loaded 20000 rows") && out.contains("  cuda:0: "),
            "{out}"
        );
    } else {
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("device cuda:0"), "{err}");
    }
    // a directory: its files' passes spread as one load
    let dir = tempfile::tempdir().unwrap();
    for i in 0..2 {
        std::fs::copy(f, dir.path().join(format!("part-{i}.parquet"))).unwrap();
    }
    let d = dir.path().to_str().unwrap();
    let o = run(&["load", d, "--devices", "cuda:0", "--memory-budget", "4MiB"]);
    let (out, err) = text(&o);
    if cuparquet::device::probe_cuda().devices > 0 {
        assert!(o.status.success(), "{err}");
        assert!(out.contains("loaded 40000 rows of 2 files"), "{out}");
    } else {
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("device cuda:0"), "{err}");
    }
    // every device here, with a row selection's worth of rows: the filter's
    let o = run(&[
        "load",
        f,
        "--devices",
        "all",
        "--memory-budget",
        "4MiB",
        "--filter",
        "l_orderkey < 20000",
    ]);
    let (out, err) = text(&o);
    let n = cuparquet::device::probe_cuda().devices;
    if n > 0 {
        assert!(o.status.success(), "{err}");
        assert!(out.contains(&format!("over {n} device")), "{out}");
    } else {
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains("--devices") && err.contains("device cuda"),
            "{err}"
        );
    }
}

#[test]
fn plan_reads_a_directory_of_files_with_one_schema() {
    let dir = tempfile::tempdir().unwrap();
    let sample = std::fs::read("testdata/lineitem-sample.parquet").unwrap();
    for name in ["b.parquet", "a.parquet", ".hidden.parquet", "_tmp.parquet"] {
        std::fs::write(dir.path().join(name), &sample).unwrap();
    }
    std::fs::write(dir.path().join("_SUCCESS"), b"").unwrap();
    let d = dir.path().to_str().unwrap();
    let o = run(&["plan", d, "--columns", "l_orderkey"]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        out.starts_with("2 files, one schema (6 fields), 40000 rows selected"),
        "{out}"
    );
    let a = out.find("a.parquet").unwrap();
    let b = out.find("b.parquet").unwrap();
    assert!(a < b, "files in name order: {out}");
    assert!(!out.contains("hidden") && !out.contains("_tmp"), "{out}");
    // a directory plus a file; JSON lists every file
    let o = run(&["plan", d, "testdata/lineitem-sample.parquet", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("plan --json is JSON");
    assert_eq!(v["files"].as_array().unwrap().len(), 3);
    assert!(v["files"][2]["file"]
        .as_str()
        .unwrap()
        .ends_with("lineitem-sample.parquet"));
    // a file of another schema: one line naming both files and the field
    let other = data("alltypes_plain.parquet");
    let o = run(&["plan", d, &other]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("a.parquet and ") && err.contains("alltypes_plain.parquet: different schemas"),
        "{err}"
    );
    // an empty directory is an error naming it
    let empty = tempfile::tempdir().unwrap();
    let o = run(&["plan", empty.path().to_str().unwrap()]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("holds no *.parquet file"), "{err}");
}

#[test]
fn tuning_switches_come_from_one_flag_or_variable() {
    let f = "testdata/lineitem-sample.parquet";
    let o = run(&[
        "load",
        f,
        "--device",
        "host",
        "--quiet",
        "--tuning",
        "bounce_buffer_count=3,wave_bytes=0",
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    // a key retired once measured no faster is an error saying so, not a setting ignored
    let o = run(&["load", f, "--device", "host", "--tuning", "snappy=host"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "a usage error: {err}");
    assert!(err.contains("snappy") && err.contains("removed"), "{err}");
    let o = run(&["load", f, "--device", "host", "--tuning", "fast=1"]);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "a usage error: {err}");
    assert!(
        err.contains("--tuning") && err.contains("unknown key \"fast\""),
        "{err}"
    );
    // a variable the tuning replaced is an error naming its key, not a setting ignored
    let o = Command::new(bin())
        .args(["load", f, "--device", "host"])
        .env("CUPARQUET_DEVICE_WAVE_BYTES", "0")
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "a usage error: {err}");
    assert!(err.contains("CUPARQUET_TUNING=wave_bytes="), "{err}");
}

#[test]
fn load_output_equals_arrow_rs() {
    let dir = tempfile::tempdir().unwrap();
    for (file, cols, rgs) in [
        ("alltypes_plain.parquet", None, None),
        ("nested_lists.snappy.parquet", None, None),
        (
            "alltypes_tiny_pages_plain.parquet",
            Some("id,string_col"),
            None,
        ),
        ("nulls.snappy.parquet", None, Some("0")),
    ] {
        let out = dir.path().join("out.arrow");
        let f = data(file);
        let mut args = vec![
            "load",
            f.as_str(),
            "--device",
            "host",
            "--output",
            out.to_str().unwrap(),
            "--report",
        ];
        if let Some(c) = cols {
            args.extend(["--columns", c]);
        }
        if let Some(r) = rgs {
            args.extend(["--row-groups", r]);
        }
        let o = run(&args);
        let (stdout, err) = text(&o);
        assert!(o.status.success(), "{file}: {err}");
        assert!(stdout.contains("bytes per path: host"), "{stdout}");
        assert!(stdout.contains("requests:"), "{stdout}");
        let got = read_ipc(&out);
        let proj = match cols {
            None => Projection::All,
            Some(_) => Projection::Roots(vec![0, 9]),
        };
        let want = oracle(Path::new(&f), &proj, None).unwrap();
        assert_same(file, &got, &want);
    }
}

fn read_ipc(p: &Path) -> arrow::record_batch::RecordBatch {
    let f = std::fs::File::open(p).unwrap();
    let r = arrow::ipc::reader::FileReader::try_new(f, None).expect("an Arrow IPC file");
    let schema = r.schema();
    let batches: Vec<_> = r.map(|b| b.unwrap()).collect();
    concat(&schema, &batches)
}

#[test]
fn kept_dictionaries_are_written_to_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d.arrow");
    let sample = "testdata/lineitem-sample.parquet";
    let o = run(&[
        "load",
        sample,
        "--device",
        "host",
        "--keep-dictionaries",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let got = read_ipc(&out);
    let flag = got
        .schema()
        .field_with_name("l_returnflag")
        .unwrap()
        .clone();
    assert!(
        matches!(flag.data_type(), arrow::datatypes::DataType::Dictionary(..)),
        "{flag:?}"
    );
    // the same values as a plain load
    let plain = oracle(Path::new(sample), &Projection::All, None).unwrap();
    for (i, f) in plain.schema().fields().iter().enumerate() {
        let g = arrow::compute::cast(got.column(i), f.data_type()).unwrap();
        assert_eq!(g.as_ref(), plain.column(i).as_ref(), "{}", f.name());
    }
}

#[test]
fn load_json_report() {
    let o = run(&[
        "load",
        &data("alltypes_plain.parquet"),
        "--device",
        "host",
        "--json",
        "--threads",
        "2",
        "--task-size",
        "64KiB",
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["rows"], 8);
    assert_eq!(v["device"]["location"], "host");
    assert_eq!(v["settings"]["nthreads"], 2);
    assert_eq!(v["settings"]["task_size"], 65536);
    assert_eq!(v["io"]["requests"][0]["path"], "host");
}

#[test]
fn auto_says_what_it_chose() {
    let o = run(&["load", &data("alltypes_plain.parquet")]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let auto = cuparquet::device::resolve(cuparquet::Device::Auto).unwrap();
    if auto.location != cuparquet::array::Location::Host {
        assert!(out.contains("→ cuda:0 ("), "{out}");
        assert!(out.contains("using cuda:0"), "{out}");
        assert!(out.contains("decoded on cuda:0"), "{out}");
    } else {
        assert!(out.contains("→ host ("), "{out}");
        assert!(out.contains("using host memory"), "{out}");
    }
}

#[test]
fn exit_codes() {
    // usage errors: 2
    for args in [
        vec!["load"],
        vec!["frobnicate"],
        vec!["load", "x.parquet", "--row-groups", "3-1"],
        vec!["load", "x.parquet", "--device", "tpu"],
        vec!["load", "x.parquet", "--task-size", "lots"],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o).1);
    }
    // other errors: 1, one line naming the file and the cause
    let missing = "/nonexistent/file.parquet";
    let bad = corpus_dir()
        .join("bad_data/PARQUET-1481.parquet")
        .display()
        .to_string();
    let enc = data("uniform_encryption.parquet.encrypted");
    let ok = data("alltypes_plain.parquet");
    // (a selection or setting that cannot be used is a usage error too: 2, with the same line)
    for (args, want, code) in [
        (vec!["load", missing], "No such file", 1),
        (vec!["inspect", missing], "No such file", 1),
        (vec!["load", bad.as_str()], "invalid Parquet footer", 1),
        (vec!["plan", bad.as_str()], "invalid Parquet footer", 1),
        (vec!["load", enc.as_str()], "encrypted", 1),
        (
            vec!["load", ok.as_str(), "--columns", "nope"],
            "unknown column 'nope'",
            2,
        ),
        (
            vec!["load", ok.as_str(), "--columns", " , "],
            "--columns",
            2,
        ),
        (
            vec!["load", ok.as_str(), "--row-groups", "5"],
            "row group 5 does not exist",
            2,
        ),
        (
            vec!["load", ok.as_str(), "--filter", "id >"],
            "expected a literal",
            2,
        ),
        (
            vec!["plan", ok.as_str(), "--filter", "id >"],
            "expected a literal",
            2,
        ),
        (
            vec!["load", ok.as_str(), "--batch-rows", "0"],
            "batch_rows",
            2,
        ),
        (
            // no such device here or on a GPU machine
            vec!["load", ok.as_str(), "--device", "cuda:99"],
            "device cuda:99: ",
            1,
        ),
    ] {
        let o = run(&args);
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: not one line: {err}");
        assert!(err.starts_with("cuparquet: error: "), "{err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(
            err.contains(args[1]),
            "{args:?}: does not name the file: {err}"
        );
    }
}

#[test]
fn every_corpus_file_loads_or_exits_1() {
    // The acceptance run: `load --device host --output` on every data file either writes what
    // arrow-rs reads or exits 1 with one clear line; on a GPU machine `--device cuda:0` too
    // (chunks through device memory, decoded on the host from a device→host copy).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.arrow");
    let mut files = corpus_files("data", &[".parquet", ".encrypted"]);
    files.extend(corpus_files("bad_data", &[".parquet"]));
    let mut devices = vec!["host"];
    if gpu_available("the CLI corpus run on cuda:0") {
        devices.push("cuda:0");
    }
    for device in devices {
        for f in &files {
            let fs = f.display().to_string();
            let _ = std::fs::remove_file(&out);
            let o = run(&[
                "load",
                &fs,
                "--device",
                device,
                "-q",
                "--output",
                out.to_str().unwrap(),
            ]);
            let (_, err) = text(&o);
            match o.status.code() {
                Some(0) => assert_same(
                    &format!("{fs} on {device}"),
                    &read_ipc(&out),
                    &oracle(f, &Projection::All, None).unwrap(),
                ),
                Some(1) => {
                    assert_eq!(err.lines().count(), 1, "{fs}: {err}");
                    assert!(err.contains(&fs), "{err}");
                }
                c => panic!("{fs} on {device}: exit {c:?}: {err}"),
            }
        }
    }
}

#[test]
fn gpu_load_reports_paths_and_round_trips() {
    if !gpu_available("the CLI device load") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.arrow");
    let f = data("alltypes_tiny_pages_plain.parquet");
    let o = run(&[
        "load",
        &f,
        "--device",
        "cuda:0",
        "--report",
        "--output",
        out.to_str().unwrap(),
    ]);
    let (stdout, err) = text(&o);
    assert!(o.status.success(), "{err}");
    for want in [
        "→ cuda:0 (cuda:0 was requested)",
        "decoded on cuda:0: 13 of 13 fields by the GPU kernels",
        "--output wrote a device→host copy",
        "field 'timestamp_col' decoded on the GPU: INT96 → Timestamp(ns) (Int96ToNanos)",
        "bytes per path: staged",
        "cuFile: n=",
        "staged bytes=",
        "path staged:",
        "compat mode auto",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in:\n{stdout}");
    }
    assert_same(
        &f,
        &read_ipc(&out),
        &oracle(Path::new(&f), &Projection::All, None).unwrap(),
    );
    let o = run(&["load", &f, "--device", "cuda:0", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["device"]["location"]["cuda"], 0);
    assert_eq!(v["io"]["requests"][0]["path"], "staged");
    assert!(v["io"]["decisions"][0]["reason"].is_string());
    assert_eq!(v["gpu_decode"]["fields"][0]["name"], "id");
    assert_eq!(v["gpu_decode"]["fields"][0]["on_gpu"], true);
}

#[test]
fn doctor_reports_and_exits_0_without_a_gpu() {
    let o = run(&["doctor", "--no-bench", "--path", "."]);
    let (out, err) = text(&o);
    // without a GPU: one line says what loads do and what a GPU adds, and none of the GPU
    // stack's checks (their warnings and sudo advice) follow
    let no_gpu = out
        .lines()
        .any(|l| l.starts_with("ok    GPU") && l.contains("none here"));
    let gpu_stack = [
        "CUDA driver",
        "libcufile",
        "cuFileDriverOpen",
        "nvidia-fs",
        "udev record",
        "cufile.json",
    ];
    for want in ["settings", "--device auto", "path for a 1 MiB range"]
        .into_iter()
        .chain(gpu_stack.into_iter().filter(|_| !no_gpu))
    {
        assert!(out.contains(want), "missing {want:?}:\n{out}");
    }
    if no_gpu {
        // no line of a GPU-stack check (the name follows the 4-letter status and 2 spaces)
        let named = |g: &str| {
            out.lines()
                .any(|l| l.get(6..).is_some_and(|r| r.starts_with(g)))
        };
        assert!(gpu_stack.iter().all(|g| !named(g)), "{out}");
        assert!(!out.contains("sudo"), "{out}");
        assert!(
            out.contains("loads decode on this machine's cores into host memory"),
            "{out}"
        );
    }
    // every fix is something a user can do: a command or a setting, never a script of ours
    for l in out.lines().filter(|l| l.contains("fix:")) {
        assert!(!l.contains("shared/") && !l.contains(".sh"), "{l}");
    }
    if let Some(l) = out
        .lines()
        .find(|l| l.contains("udev record") && l.contains("fix:"))
    {
        assert!(
            l.contains("run: sudo sh -c 'mkdir -p /run/udev/data"),
            "{l}"
        );
    }
    // exit 0 unless a check failed; no GPU is a warning, not a failure
    let failed = out.lines().any(|l| l.starts_with("FAIL"));
    assert_eq!(
        o.status.code(),
        Some(if failed { 1 } else { 0 }),
        "{out}{err}"
    );
    if no_gpu {
        assert!(!failed, "{out}");
    }
    let o = Command::new(bin())
        .args(["doctor", "--no-bench", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("doctor --json is JSON");
    assert!(v
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["status"].is_string()));
    // an invalid setting is a failed check and exit 1
    let o = Command::new(bin())
        .args(["doctor", "--no-bench"])
        .env("CUPARQUET_GDS_THRESHOLD", "lots")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stdout).contains("FAIL  settings"));
}

#[test]
fn a_failing_load_leaves_no_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.arrow");
    let out_s = out.display().to_string();
    // a file whose data is cut short after its footer was read: the load fails
    let good = dir.path().join("good.parquet");
    let cut = dir.path().join("cut.parquet");
    std::fs::copy(data("alltypes_plain.parquet"), &good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    // keep the footer, zero the data: the pages cannot be read
    let mut bad = bytes.clone();
    let footer = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap());
    let data_end = bytes.len() - 8 - footer as usize;
    for b in &mut bad[4..data_end] {
        *b = 0xff;
    }
    std::fs::write(&cut, &bad).unwrap();
    let o = run(&[
        "load",
        "--device",
        "host",
        "--quiet",
        "--output",
        &out_s,
        &cut.display().to_string(),
    ]);
    let (_, err) = text(&o);
    assert!(!o.status.success(), "the load of a corrupted file fails");
    assert!(err.contains("cut.parquet"), "{err}");
    // the output and its temporary files in the directory
    let outputs = || -> Vec<String> {
        std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n.contains("out"))
            .collect()
    };
    let left = outputs();
    assert!(left.is_empty(), "left behind: {left:?}");
    // a missing directory: an error naming the output, before anything is read
    let missing = dir
        .path()
        .join("no/such/dir/out.arrow")
        .display()
        .to_string();
    let o = run(&[
        "load",
        "--device",
        "host",
        "--quiet",
        "--output",
        &missing,
        &good.display().to_string(),
    ]);
    let (_, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("no/such/dir/out.arrow"), "{err}");
    // a load that works: the file, and nothing else
    let o = run(&[
        "load",
        "--device",
        "host",
        "--quiet",
        "--output",
        &out_s,
        &good.display().to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(outputs(), vec!["out.arrow".to_string()]);
}

/// A batch of `rows` rows of int64 columns named `names` (column k holds i × (k + 1)).
fn int_columns(names: &[&str], rows: i64) -> arrow::record_batch::RecordBatch {
    let cols = names.iter().enumerate().map(|(k, n)| {
        let a: arrow::array::ArrayRef = std::sync::Arc::new(
            arrow::array::Int64Array::from_iter_values((0..rows).map(|i| i * (k as i64 + 1))),
        );
        (*n, a)
    });
    arrow::record_batch::RecordBatch::try_from_iter(cols).unwrap()
}

/// A setting out of range in the environment: a usage error naming the variable.
#[test]
fn a_bad_variable_is_named() {
    let o = Command::new(bin())
        .args([
            "load",
            "testdata/lineitem-sample.parquet",
            "--device",
            "host",
        ])
        .env("CUPARQUET_TASK_SIZE", "1")
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("CUPARQUET_TASK_SIZE"), "{err}");
    for (var, value) in [
        ("CUPARQUET_TUNING", "wave_bytes=lots"),
        // a key retired once measured (its default is now a constant)
        ("CUPARQUET_TUNING", "decode_threads=4"),
        ("CUPARQUET_MEMORY_BUDGET", "lots"),
        ("CUPARQUET_FAULTS", "pread:sometimes"),
        ("CUPARQUET_PROFILE", "maybe"),
    ] {
        let o = Command::new(bin())
            .args([
                "load",
                "testdata/lineitem-sample.parquet",
                "--device",
                "host",
            ])
            .env(var, value)
            .output()
            .unwrap();
        let (_, err) = text(&o);
        assert_eq!(o.status.code(), Some(2), "{var}: {err}");
        assert!(err.contains(var), "{err}");
    }
}

/// `cuparquet inspect big.parquet | head`: the reader goes away after a few lines; the process
/// ends quietly with exit code 0 (no panic, no "Broken pipe").
#[test]
fn a_closed_stdout_ends_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("many.parquet");
    // 2,000 row groups of 3 columns: far more text than a pipe holds
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(5))
        .build();
    let b = int_columns(&["a", "b", "c"], 10_000);
    // one row group per write (a batch of many row groups recurses deeply in the writer)
    let parts: Vec<_> = (0..2000).map(|k| b.slice(k * 5, 5)).collect();
    write(&f, &parts, props);
    let f = f.to_str().unwrap();
    for args in [vec!["inspect", f], vec!["plan", f]] {
        let mut child = Command::new(bin())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut head = [0u8; 100];
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut head)
            .unwrap();
        drop(child.stdout.take()); // like `head` exiting
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?}: {err}");
    }
}

/// `--help`'s syntax for a name with dots works: `` `a.b` `` is the field named `a.b`.
#[test]
fn a_name_with_dots_in_backquotes() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("dots.parquet");
    let b = int_columns(&["a.b", "c"], 10);
    write(
        &f,
        &[b],
        parquet::file::properties::WriterProperties::default(),
    );
    let out = dir.path().join("out.arrow");
    let o = run(&[
        "load",
        f.to_str().unwrap(),
        "--device",
        "host",
        "--quiet",
        "--columns",
        "`a.b`",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let got = read_ipc(&out);
    assert_eq!(got.schema().fields().len(), 1);
    assert_eq!(got.schema().field(0).name(), "a.b");
    let help = run(&["load", "--help"]);
    assert!(text(&help).0.contains("(`a.b`)"), "{}", text(&help).0);
}

/// `load --where` returns only the matching rows, without the columns read for the filter
/// only; a bad predicate is a usage error.
#[test]
fn load_where_keeps_only_matching_rows() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("where.parquet");
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(1000))
        .build();
    write(&f, &[int_columns(&["a", "b", "c"], 5000)], props);
    let out = dir.path().join("out.arrow");
    let o = run(&[
        "load",
        f.to_str().unwrap(),
        "--device",
        "host",
        "--quiet",
        "--columns",
        "c",
        "--where",
        "a >= 1200 AND b < 5000 OR a = 4999",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o).1);
    let got = read_ipc(&out);
    assert_eq!(got.schema().fields().len(), 1);
    assert_eq!(got.schema().field(0).name(), "c");
    // a = i, b = 2i, c = 3i: rows 1200..2500 and 4999
    let want: Vec<i64> = (1200..2500).chain([4999]).map(|i| 3 * i).collect();
    let c = got
        .column(0)
        .as_any()
        .downcast_ref::<arrow::array::Int64Array>()
        .unwrap();
    assert_eq!(c.values().to_vec(), want);
    let o = run(&[
        "load",
        f.to_str().unwrap(),
        "--device",
        "host",
        "--where",
        "zz > 1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o).1);
    assert!(text(&o).1.contains("unknown column 'zz'"), "{}", text(&o).1);
}
