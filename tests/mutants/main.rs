//! The structured-mutation harness (issue 18): seeded, deterministic mutants of files written
//! by arrow-rs (and, in the full run, by pyarrow, DuckDB and Polars), each loaded through the
//! host backend (and `cuda:0` where asked), whole and one column at a time, with arrow-rs as
//! the oracle. A load must equal arrow-rs's read of the same bytes, or fail with a clear error;
//! a file arrow-rs refuses must not load; no panic, no hang, no invalid Arrow array.
//!
//! `cargo test --test mutants` runs a quick slice. Settings (environment):
//! - `CUPARQUET_MUTANTS=N`: mutants per class and file (default 1; from 2 on, the real
//!   decompression bombs inflate to 64 MiB instead of 4 MiB);
//! - `CUPARQUET_MUTANTS_FILES=DIR`: mutate the `*.parquet` files of DIR as well
//!   (`scripts/py/writers.py` writes pyarrow, DuckDB and Polars files);
//! - `CUPARQUET_MUTANTS_DEVICE=cuda:0`: load through that device too (skipped, saying so,
//!   without one);
//! - `CUPARQUET_MUTANTS_KEEP=DIR`: keep every mutant there, with `mutants.tsv` (name, class,
//!   change, outcome per path), for compute-sanitizer and pyarrow (`scripts/mutants.sh`);
//! - `CUPARQUET_MUTANTS_SEED=S`: another seed;
//! - `CUPARQUET_MUTANTS_CLASSES=a,b`: only those classes (a leading `-`: all but those), e.g.
//!   `-bomb-claim,bomb-real` for a large run without the slow bomb classes.

#[path = "../common/mod.rs"]
mod common;

mod bombs;
mod classes;
mod model;
mod thrift;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use classes::{Mutant, Rng, CLASSES};
use common::{concat, generate_corpus, oracle, scratch_dir, Projection};
use cuparquet::{Device, Scan};

/// What one load of one mutant came to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    /// Loaded, equal to arrow-rs's read.
    Equal,
    /// Refused by both, ours with a clear error.
    BothRefuse,
    /// Refused by us with a clear error, read by arrow-rs.
    Stricter,
    /// Refused by us with a clear error, arrow-rs not asked.
    Refused,
    // defects
    Differs(String),
    LoadedRefused(String),
    Unclear(String),
    Invalid(String),
    Panicked(String),
    Hung,
}

impl Outcome {
    fn defect(&self) -> bool {
        !matches!(
            self,
            Outcome::Equal | Outcome::BothRefuse | Outcome::Stricter | Outcome::Refused
        )
    }
    fn label(&self) -> &'static str {
        match self {
            Outcome::Equal => "equal",
            Outcome::BothRefuse => "both refuse",
            Outcome::Stricter => "stricter",
            Outcome::Refused => "refused",
            Outcome::Differs(_) => "DIFFERS",
            Outcome::LoadedRefused(_) => "LOADED-REFUSED",
            Outcome::Unclear(_) => "UNCLEAR",
            Outcome::Invalid(_) => "INVALID",
            Outcome::Panicked(_) => "PANIC",
            Outcome::Hung => "HANG",
        }
    }
}

/// The files the quick slice mutates: small, every shape the reader handles.
fn own_files(dir: &Path) -> Vec<PathBuf> {
    // a subset of the conformance set: flat and nested, v1 and v2, the codecs, DELTA, BSS,
    // dictionaries, the page index, long PLAIN strings
    const KEEP: &[&str] = &[
        "flat_snappy_v1_dict",
        "flat_zstd_v2_dict",
        "flat_gzip_v1_plain",
        "flat_lz4_raw_v2_plain",
        "flat_uncompressed_v1_plain",
        "nested_snappy",
        "nested_v2_plain",
        "flat_delta_v2_snappy",
        "flat_delta_length_v1",
        "page_index",
        "long_strings_snappy",
    ];
    let keep = |name: &str| KEEP.contains(&name);
    let mut v: Vec<PathBuf> = generate_corpus(dir)
        .into_iter()
        .filter(|(n, _)| keep(n))
        .map(|(_, p)| p)
        .collect();
    v.sort();
    v
}

/// `Some(why)` when `a` is not valid Arrow: offsets, UTF-8, decimals past their precision,
/// map keys with nulls.
fn invalid(a: &dyn Array) -> Option<String> {
    if let Err(e) = a.to_data().validate_full() {
        return Some(e.to_string());
    }
    fn walk(a: &ArrayRef) -> Option<String> {
        match a.data_type() {
            DataType::Decimal128(p, _) => {
                let d = a.as_any().downcast_ref::<arrow::array::Decimal128Array>()?;
                if let Err(e) = d.validate_decimal_precision(*p) {
                    return Some(e.to_string());
                }
            }
            DataType::Decimal256(p, _) => {
                let d = a.as_any().downcast_ref::<arrow::array::Decimal256Array>()?;
                if let Err(e) = d.validate_decimal_precision(*p) {
                    return Some(e.to_string());
                }
            }
            DataType::Map(..) => {
                let m = a.as_any().downcast_ref::<arrow::array::MapArray>()?;
                if m.keys().null_count() > 0 {
                    return Some("map keys with nulls".into());
                }
                return walk(m.keys()).or_else(|| walk(m.values()));
            }
            DataType::Struct(_) => {
                let s = a.as_any().downcast_ref::<arrow::array::StructArray>()?;
                return s.columns().iter().find_map(walk);
            }
            DataType::List(_) => {
                let l = a.as_any().downcast_ref::<arrow::array::ListArray>()?;
                return walk(l.values());
            }
            DataType::LargeList(_) => {
                let l = a.as_any().downcast_ref::<arrow::array::LargeListArray>()?;
                return walk(l.values());
            }
            _ => {}
        }
        None
    }
    walk(&arrow::array::make_array(a.to_data()))
}

/// Where `got` and `want` differ, if they do.
fn differs(got: &RecordBatch, want: &RecordBatch) -> Option<String> {
    if got.num_rows() != want.num_rows() {
        return Some(format!(
            "{} rows, arrow-rs {}",
            got.num_rows(),
            want.num_rows()
        ));
    }
    if got.num_columns() != want.num_columns() {
        return Some(format!(
            "{} columns, arrow-rs {}",
            got.num_columns(),
            want.num_columns()
        ));
    }
    for i in 0..want.num_columns() {
        let (g, w) = (
            got.schema_ref().field(i).clone(),
            want.schema_ref().field(i).clone(),
        );
        if g.name() != w.name() || g.data_type() != w.data_type() {
            return Some(format!(
                "column {i}: {} {} vs arrow-rs {} {}",
                g.name(),
                g.data_type(),
                w.name(),
                w.data_type()
            ));
        }
        if got.column(i).to_data() != want.column(i).to_data() {
            return Some(format!("column {} values", w.name()));
        }
    }
    None
}

/// The backends to load through: the host, and `CUPARQUET_MUTANTS_DEVICE` where it is set and
/// a GPU is there (`what` names the loads in the message of a skip).
fn devices(what: &str) -> Vec<Device> {
    let mut devices = vec![Device::Host];
    if let Some(d) = std::env::var("CUPARQUET_MUTANTS_DEVICE")
        .ok()
        .filter(|d| !d.is_empty())
    {
        let d: Device = d.parse().unwrap();
        if common::gpu_available(what) {
            devices.push(d);
        }
    }
    devices
}

/// Our load of `path` on `device`, whole or one column; a panic as its message. Run on its
/// own thread under a deadline.
fn ours(
    path: &Path,
    device: Device,
    column: Option<String>,
) -> Option<Result<RecordBatch, String>> {
    let (tx, rx) = mpsc::channel();
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(move || -> Result<RecordBatch, cuparquet::Error> {
            let mut b = Scan::builder(&p).with_device(device);
            if let Some(c) = column {
                b = b.with_columns([c]);
            }
            let loaded = b.build()?.load()?;
            Ok(concat(&loaded.schema, &loaded.to_host()?))
        });
        let r = match r {
            Ok(Ok(b)) => Ok(Ok(b)),
            Ok(Err(e)) => Ok(Err(e.to_string())),
            Err(p) => Err(p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()),
        };
        let _ = tx.send(r);
    });
    match rx.recv_timeout(Duration::from_secs(120)) {
        Ok(Ok(r)) => Some(r),
        Ok(Err(panic)) => Some(Err(format!("PANIC {panic}"))),
        Err(_) => None,
    }
}

/// One load judged against arrow-rs's read of the same bytes.
fn judge(
    path: &Path,
    got: Option<Result<RecordBatch, String>>,
    want: &Result<RecordBatch, String>,
) -> Outcome {
    let Some(got) = got else {
        return Outcome::Hung;
    };
    match (got, want) {
        (Err(e), _) if e.starts_with("PANIC") => Outcome::Panicked(e),
        (Err(e), _) if !e.contains(&path.display().to_string()) || e.contains('\n') => {
            Outcome::Unclear(e)
        }
        (Err(_), Err(_)) => Outcome::BothRefuse,
        (Err(_), Ok(_)) => Outcome::Stricter,
        (Ok(g), Ok(w)) => {
            if let Some(why) = g.columns().iter().find_map(|c| invalid(c.as_ref())) {
                return Outcome::Invalid(why);
            }
            match differs(&g, w) {
                Some(d) => Outcome::Differs(d),
                None => Outcome::Equal,
            }
        }
        (Ok(g), Err(e)) => {
            if let Some(why) = g.columns().iter().find_map(|c| invalid(c.as_ref())) {
                return Outcome::Invalid(why);
            }
            Outcome::LoadedRefused(e.clone())
        }
    }
}

/// A refusal judged without arrow-rs's read.
fn judge_refusal(path: &Path, got: Option<Result<RecordBatch, String>>) -> Outcome {
    match judge(path, got, &Err(String::new())) {
        Outcome::BothRefuse => Outcome::Refused,
        o => o,
    }
}

/// A column name as `with_columns` takes it.
fn quoted(name: &str) -> String {
    if name.contains('.') {
        format!("`{name}`")
    } else {
        name.to_string()
    }
}

struct Run {
    devices: Vec<Device>,
    /// What a real decompression bomb inflates to.
    bomb: usize,
    per_class: usize,
    seed: u64,
    keep: Option<PathBuf>,
    /// Whether to run a class.
    classes: Vec<bool>,
}

/// Counts per (class, path, outcome label), the defects with what caused them.
#[derive(Default)]
struct Tally {
    counts: BTreeMap<(String, String, &'static str), usize>,
    defects: Vec<String>,
    tsv: Vec<String>,
    mutants: usize,
    /// Seconds spent per class.
    time: BTreeMap<String, f64>,
}

fn run(files: &[PathBuf], cfg: &Run, scratch: &Path) -> Tally {
    let mut t = Tally::default();
    for (fi, file) in files.iter().enumerate() {
        let bytes = std::fs::read(file).unwrap();
        let model = model::parse(&bytes);
        let fname = file.file_stem().unwrap().to_string_lossy().to_string();
        // the top-level column names, from the original file
        let names: Vec<String> = oracle(file, &Projection::All, None)
            .map(|b| {
                b.schema()
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect()
            })
            .unwrap_or_default();
        for (ci, class) in CLASSES.iter().enumerate() {
            if !cfg.classes[ci] {
                continue;
            }
            for k in 0..cfg.per_class {
                let mut r = Rng::seeded(cfg.seed, &[fi as u64, ci as u64, k as u64]);
                let Some(Mutant { class, what, bytes }) =
                    classes::mutate(class, &mut r, &bytes, model.as_ref(), cfg.bomb)
                else {
                    continue;
                };
                t.mutants += 1;
                let t0 = std::time::Instant::now();
                let name = format!("{fname}-{class}-{k}.parquet");
                let path = match &cfg.keep {
                    Some(d) => d.join(&name),
                    None => scratch.join(&name),
                };
                std::fs::write(&path, &bytes).unwrap();
                let column = (!names.is_empty()).then(|| r.below(names.len()));
                // arrow-rs's reads, made when a load needs them: where ours refuses a claimed
                // bomb, the quick slice skips arrow-rs's (it allocates the claim: seconds each);
                // where ours refuses a count claim, arrow-rs is not asked (it may size by it)
                let lazy =
                    (cfg.bomb < 64 << 20 && class == "bomb-claim") || class == "count-claims";
                let mut want_all = None;
                let mut want_col = None;
                let mut row = vec![name.clone(), class.to_string(), what.clone()];
                for &device in &cfg.devices {
                    let mut outcomes = Vec::new();
                    let got = ours(&path, device, None);
                    let o = if lazy && matches!(got, Some(Err(_))) {
                        judge_refusal(&path, got)
                    } else {
                        let w =
                            want_all.get_or_insert_with(|| oracle(&path, &Projection::All, None));
                        judge(&path, got, w)
                    };
                    outcomes.push(("whole", o));
                    if let Some(c) = column {
                        let got = ours(&path, device, Some(quoted(&names[c])));
                        let o = if lazy && matches!(got, Some(Err(_))) {
                            judge_refusal(&path, got)
                        } else {
                            let w = want_col.get_or_insert_with(|| {
                                oracle(&path, &Projection::Roots(vec![c]), None)
                            });
                            judge(&path, got, w)
                        };
                        outcomes.push(("column", o));
                    }
                    for (how, o) in outcomes {
                        let key = (class.to_string(), format!("{device}"), o.label());
                        *t.counts.entry(key).or_default() += 1;
                        row.push(format!("{device}/{how}:{}", o.label()));
                        if o.defect() {
                            t.defects
                                .push(format!("{name} ({what}) {device} {how}: {o:?}"));
                        }
                        if o == Outcome::Hung {
                            // the load's thread is still running: stop here
                            return t;
                        }
                    }
                }
                *t.time.entry(class.to_string()).or_default() += t0.elapsed().as_secs_f64();
                t.tsv.push(row.join("\t"));
                if cfg.keep.is_none() {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
    }
    t
}

fn print_table(t: &Tally) {
    use std::io::Write;
    let mut e = std::io::stderr().lock();
    let _ = writeln!(e, "{} mutants", t.mutants);
    let mut by: BTreeMap<(String, String), Vec<(&'static str, usize)>> = BTreeMap::new();
    for ((class, dev, label), n) in &t.counts {
        by.entry((class.clone(), dev.clone()))
            .or_default()
            .push((label, *n));
    }
    for ((class, dev), v) in by {
        let cells: Vec<String> = v.iter().map(|(l, n)| format!("{l} {n}")).collect();
        let secs = t.time.get(&class).copied().unwrap_or(0.0);
        let _ = writeln!(
            e,
            "  {class:<15} {dev:<7} {secs:>6.1} s  {}",
            cells.join(", ")
        );
    }
    for d in t.defects.iter().take(40) {
        let _ = writeln!(e, "DEFECT {d}");
    }
}

#[test]
fn mutants_load_as_arrow_rs_reads_them_or_fail_clearly() {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let per_class = env("CUPARQUET_MUTANTS").map_or(1, |v| v.parse().unwrap());
    let seed = env("CUPARQUET_MUTANTS_SEED").map_or(0x18_5EED, |v| v.parse().unwrap());
    let scratch = scratch_dir();
    let mut files = own_files(scratch.path());
    if let Some(d) = env("CUPARQUET_MUTANTS_FILES") {
        let mut more: Vec<PathBuf> = std::fs::read_dir(&d)
            .unwrap_or_else(|e| panic!("CUPARQUET_MUTANTS_FILES={d}: {e}"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
            .collect();
        more.sort();
        files.extend(more);
    }
    let devices = devices("the mutants' device loads");
    let keep = env("CUPARQUET_MUTANTS_KEEP").map(PathBuf::from);
    if let Some(k) = &keep {
        std::fs::create_dir_all(k).unwrap();
    }
    let classes: Vec<bool> = match env("CUPARQUET_MUTANTS_CLASSES") {
        None => vec![true; CLASSES.len()],
        Some(v) => {
            let (but, list) = v
                .strip_prefix('-')
                .map_or((false, v.as_str()), |l| (true, l));
            let named: Vec<&str> = list.split(',').map(str::trim).collect();
            for n in &named {
                assert!(
                    CLASSES.contains(n),
                    "CUPARQUET_MUTANTS_CLASSES: no class {n}"
                );
            }
            CLASSES.iter().map(|c| named.contains(c) != but).collect()
        }
    };
    let n_classes = classes.iter().filter(|&&c| c).count();
    let cfg = Run {
        devices,
        bomb: if per_class > 1 { 64 << 20 } else { 4 << 20 },
        per_class,
        seed,
        keep,
        classes,
    };
    let t = run(&files, &cfg, scratch.path());
    print_table(&t);
    if let Some(k) = &cfg.keep {
        std::fs::write(k.join("mutants.tsv"), t.tsv.join("\n") + "\n").unwrap();
    }
    // (some classes find nothing to change in some files: no DELTA pages, no PLAIN strings)
    assert!(
        t.mutants >= n_classes * files.len() / 2,
        "too few mutants: {}",
        t.mutants
    );
    assert!(
        t.defects.is_empty(),
        "{} defects (listed above)",
        t.defects.len()
    );
}

/// The model writes files back as arrow-rs reads them: the harness's own check.
#[test]
fn unmutated_files_survive_the_model() {
    let scratch = scratch_dir();
    for f in own_files(scratch.path()) {
        let bytes = std::fs::read(&f).unwrap();
        let m = model::parse(&bytes).unwrap_or_else(|| panic!("{} parses", f.display()));
        let again = model::write(&m);
        let p = scratch.path().join("again.parquet");
        std::fs::write(&p, &again).unwrap();
        let (a, b) = (
            oracle(&f, &Projection::All, None).unwrap(),
            oracle(&p, &Projection::All, None).unwrap(),
        );
        assert_eq!(differs(&a, &b), None, "{}", f.display());
        // the footer alone round-trips byte for byte
        let n = bytes.len();
        let flen = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
        let footer = &bytes[n - 8 - flen..n - 8];
        assert_eq!(thrift::write(&thrift::read(footer).unwrap().0), footer);
    }
}

/// One file per contradiction the footer or a page can hold, each named by the error.
#[test]
fn contradictions_are_named() {
    use arrow::array::{Int64Array, ListArray};
    use arrow::datatypes::{Field, Int64Type};
    use parquet::file::properties::{WriterProperties, WriterVersion};
    use std::sync::Arc;
    let dir = scratch_dir();
    let ids = Int64Array::from_iter_values(0..1000);
    let lists = ListArray::from_iter_primitive::<Int64Type, _, _>(
        (0..1000).map(|i| (i % 7 != 0).then(|| vec![Some(i), Some(i + 1)])),
    );
    // the list's items are not nullable: levels 0 (null list), 1 (empty), 2 (an item)
    let field = Arc::new(Field::new("item", DataType::Int64, false));
    let lists = ListArray::new(
        field,
        lists.offsets().clone(),
        lists.values().clone(),
        lists.nulls().cloned(),
    );
    let batch = RecordBatch::try_from_iter([
        ("x", Arc::new(ids) as ArrayRef),
        ("l", Arc::new(lists) as ArrayRef),
    ])
    .unwrap();
    let src = dir.path().join("src.parquet");
    common::write(
        &src,
        &[batch],
        WriterProperties::builder()
            .set_writer_version(WriterVersion::PARQUET_2_0)
            .set_dictionary_enabled(false)
            .set_compression(parquet::basic::Compression::UNCOMPRESSED)
            .build(),
    );
    let f = model::parse(&std::fs::read(&src).unwrap()).unwrap();
    let refused = |name: &str, g: &model::File| -> String {
        let p = dir.path().join(name);
        std::fs::write(&p, model::write(g)).unwrap();
        let e = ours(&p, Device::Host, None)
            .expect("no hang")
            .expect_err(name);
        assert!(e.contains(&p.display().to_string()), "{e}");
        e
    };
    fn meta(g: &mut model::File, col: usize) -> &mut thrift::Struct {
        let Some(thrift::Value::Struct(rg)) =
            thrift::list_mut(&mut g.footer, 4).unwrap().get_mut(0)
        else {
            unreachable!()
        };
        let Some(thrift::Value::Struct(cc)) = thrift::list_mut(rg, 1).unwrap().get_mut(col) else {
            unreachable!()
        };
        thrift::child_mut(cc, 3).unwrap()
    }
    use thrift::Value;

    // the column metadata's physical type against the schema's
    let mut g = f.clone();
    thrift::set_int(meta(&mut g, 0), 1, 1);
    let e = refused("type.parquet", &g);
    assert!(
        e.contains("row group 0, column 'x': the column metadata says physical type INT32, the schema INT64"),
        "{e}"
    );

    // a negative row count
    let mut g = f.clone();
    if let Some(Value::Struct(rg)) = thrift::list_mut(&mut g.footer, 4).unwrap().get_mut(0) {
        thrift::set_int(rg, 3, -5);
    }
    thrift::set_int(&mut g.footer, 3, -5);
    let e = refused("negative.parquet", &g);
    assert!(e.contains("claims -5 rows"), "{e}");

    // a row group's rows against its column chunks' values, refused from the footer: far more
    // rows than the chunks hold, fewer than a column that is not repeated holds, a negative
    // value count
    let rows_claimed = |g: &mut model::File, n: i64| {
        if let Some(Value::Struct(rg)) = thrift::list_mut(&mut g.footer, 4).unwrap().get_mut(0) {
            thrift::set_int(rg, 3, n);
        }
    };
    let mut g = f.clone();
    rows_claimed(&mut g, 1 << 62);
    let e = refused("claims.parquet", &g);
    assert!(
        e.contains(
            "row group 0: it claims 4611686018427387904 rows, but column 'x' holds 1000 values (at least one per row)"
        ),
        "{e}"
    );
    let mut g = f.clone();
    rows_claimed(&mut g, 999);
    thrift::set_int(&mut g.footer, 3, 999);
    let e = refused("fewer.parquet", &g);
    assert!(
        e.contains("row group 0: column 'x' claims 1000 values for its 999 rows"),
        "{e}"
    );
    let mut g = f.clone();
    thrift::set_int(meta(&mut g, 1), 5, -3);
    let e = refused("values.parquet", &g);
    assert!(
        e.contains("row group 0: column 'l.list.item' claims -3 values"),
        "{e}"
    );

    // a row group claiming fewer rows than its pages hold, the column chunk agreeing
    let mut g = f.clone();
    rows_claimed(&mut g, 999);
    thrift::set_int(&mut g.footer, 3, 999);
    thrift::set_int(meta(&mut g, 0), 5, 999);
    let e = refused("rows.parquet", &g);
    assert!(
        e.contains("the pages hold 1000 values, the row group 999 rows"),
        "{e}"
    );
    // the same for the list column alone: its v2 pages' row counts
    let p = dir.path().join("rows.parquet");
    let e = ours(&p, Device::Host, Some("l".into()))
        .unwrap()
        .expect_err("l alone");
    assert!(
        e.contains("the pages hold 1000 rows, the row group 999 rows"),
        "{e}"
    );

    // a definition level above the list's maximum (2): the first run's value set to 3
    let mut g = f.clone();
    let ci = g.chunks.iter().position(|c| c.col == 1).unwrap();
    let c = g.chunks[ci].clone();
    let pi = c.pages.iter().position(|p| p.is_data()).unwrap();
    let mut u = model::unpack(&g, &c, &c.pages[pi]).unwrap();
    // the first run's header (a varint), then its first byte: an RLE run's value, or a
    // bit-packed run's first values from the low bits; either way the first level becomes 3
    let mut at = u.def.start;
    while u.levels[at] & 0x80 != 0 {
        at += 1;
    }
    assert_eq!(u.levels[at + 1] & 3, 0, "the first list is null");
    u.levels[at + 1] |= 3;
    let mut page = c.pages[pi].clone();
    model::repack(&g, &c, &mut page, &u).unwrap();
    g.chunks[ci].pages[pi] = page;
    let e = refused("levels.parquet", &g);
    assert!(
        e.contains("column 'l.list.item'")
            && e.contains("definition level 3")
            && e.contains("maximum 2"),
        "{e}"
    );
}

/// An RLE run of definition levels whose value byte passes a maximum that fills its bit width
/// (1: a flat optional column): pyarrow refuses such a page ("Malformed levels"), arrow-rs
/// reads it (its decoder for a maximum of 1 takes any non-zero run value as 1); we refuse it
/// on every path, whatever the codec (the host decompresses such a v1 page's levels only as
/// far as they reach).
#[test]
fn rle_levels_past_a_full_width_maximum_are_refused() {
    use arrow::array::Int64Array;
    use parquet::basic::{Compression, GzipLevel, ZstdLevel};
    use parquet::file::properties::WriterProperties;
    use std::sync::Arc;
    let dir = scratch_dir();
    let devices = devices("RLE levels past the maximum on the device");
    let batch = RecordBatch::try_from_iter_with_nullable([(
        "x",
        Arc::new(Int64Array::from_iter((0..5000).map(Some))) as ArrayRef,
        true,
    )])
    .unwrap();
    for codec in [
        Compression::UNCOMPRESSED,
        Compression::SNAPPY,
        Compression::ZSTD(ZstdLevel::default()),
        Compression::LZ4_RAW,
        Compression::GZIP(GzipLevel::default()),
    ] {
        let src = dir.path().join(format!("{codec:?}-src.parquet"));
        common::write(
            &src,
            std::slice::from_ref(&batch),
            WriterProperties::builder()
                .set_dictionary_enabled(false)
                .set_compression(codec)
                .build(),
        );
        let mut g = model::parse(&std::fs::read(&src).unwrap()).unwrap();
        let c = g.chunks[0].clone();
        let pi = c.pages.iter().position(|p| p.is_data()).unwrap();
        let mut u = model::unpack(&g, &c, &c.pages[pi]).unwrap();
        // one RLE run of 1s (every value present): its header, then its value byte
        let mut at = u.def.start;
        while u.levels[at] & 0x80 != 0 {
            at += 1;
        }
        assert_eq!(u.levels[at] & 1, 0, "{codec:?}: an RLE run");
        assert_eq!(u.levels[at + 1], 1, "{codec:?}: of 1s");
        u.levels[at + 1] = 160;
        let mut page = c.pages[pi].clone();
        model::repack(&g, &c, &mut page, &u).unwrap();
        g.chunks[0].pages[pi] = page;
        let p = dir.path().join(format!("{codec:?}.parquet"));
        std::fs::write(&p, model::write(&g)).unwrap();
        // arrow-rs reads it
        let read = parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(
            std::fs::File::open(&p).unwrap(),
            8192,
        )
        .unwrap()
        .collect::<Result<Vec<_>, _>>();
        match read {
            Ok(b) => assert_eq!(b[0].num_rows(), 5000, "{codec:?}"),
            Err(e) => panic!("{codec:?}: arrow-rs: {e}"),
        }
        for &d in &devices {
            let e = ours(&p, d, None)
                .expect("no hang")
                .expect_err(&format!("{codec:?} on {d:?}"));
            assert!(
                e.contains(&p.display().to_string())
                    && e.contains("column 'x'")
                    && ((e.contains("definition level 160") && e.contains("maximum 1"))
                        // the device's kernels: the run's value is wider than the levels' width
                        || (d != Device::Host && e.contains("run is cut short or malformed"))),
                "{codec:?} on {d:?}: {e}"
            );
        }
    }
}

/// A map whose key field the schema makes OPTIONAL (legacy files; arrow-rs reads such a
/// schema, pyarrow refuses it): keys that come out null are an error on every path, never a
/// map array with null keys.
#[test]
fn null_keys_of_an_optional_map_key_are_refused() {
    use arrow::array::{MapBuilder, StringBuilder};
    use parquet::arrow::arrow_writer::{ArrowWriter, ArrowWriterOptions};
    use std::sync::Arc;
    let dir = scratch_dir();
    let devices = devices("null map keys on the device");
    let mut b = MapBuilder::new(
        None,
        StringBuilder::new(),
        arrow::array::Int64Builder::new(),
    );
    for i in 0..2000i64 {
        for k in 0..i % 3 {
            b.keys().append_value(format!("k{k}"));
            b.values().append_value(i * k);
        }
        b.append(i % 5 != 0).unwrap();
    }
    let batch = RecordBatch::try_from_iter([("m", Arc::new(b.finish()) as ArrayRef)]).unwrap();
    let src = dir.path().join("map-src.parquet");
    let mut w = ArrowWriter::try_new_with_options(
        std::fs::File::create(&src).unwrap(),
        batch.schema(),
        // no statistics: the level histograms would tell the key's levels from the schema's
        // (a footer contradiction, refused before any key is decoded)
        ArrowWriterOptions::new()
            .with_skip_arrow_metadata(true)
            .with_properties(
                parquet::file::properties::WriterProperties::builder()
                    .set_statistics_enabled(parquet::file::properties::EnabledStatistics::None)
                    .build(),
            ),
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    // schema elements: the root, m, key_value, key, value; the key made OPTIONAL (1)
    let mut g = model::parse(&std::fs::read(&src).unwrap()).unwrap();
    let Some(thrift::Value::Struct(key)) = thrift::list_mut(&mut g.footer, 2).unwrap().get_mut(3)
    else {
        unreachable!()
    };
    assert_eq!(thrift::int(key, 3), Some(0), "the key was REQUIRED");
    thrift::set_int(key, 3, 1);
    let p = dir.path().join("map.parquet");
    std::fs::write(&p, model::write(&g)).unwrap();
    for &d in &devices {
        let e = ours(&p, d, None)
            .expect("no hang")
            .expect_err(&format!("{d:?}"));
        assert!(
            e.contains(&p.display().to_string())
                && e.contains("column 'm'")
                && e.contains("null map keys"),
            "{d:?}: {e}"
        );
    }
}
