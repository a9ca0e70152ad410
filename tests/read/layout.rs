//! The layout DESIGN.md describes, checked on the sources: every stage imports only the stages
//! before it (the pipeline reads top-down: metadata → plan → io → decode → array → scan),
//! there is no circle of imports, and no file (sources, tests, benchmarks, scripts) is past
//! 1,000 lines.
//!
//! A module's stage is the first path segment under `src/` (`src/decode/gpu/wave.rs` is
//! `decode`); its imports are the `crate::<stage>` paths it names outside comments, and the
//! `crate::<stage>` targets of its doc links.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Which stages each stage may use. Anything not listed is a back-import (or a new stage that
/// DESIGN.md and this table must first agree on).
const ALLOWED: &[(&str, &[&str])] = &[
    ("error", &[]),
    ("config", &["error"]),
    // a file or (feature object-store) a remote object, opened with its settings
    ("source", &["error", "config"]),
    ("metadata", &["error", "config", "source"]),
    ("plan", &["error", "config", "source", "metadata"]),
    // the only place that creates CUDA contexts: knows nothing of Parquet, Arrow or plans
    ("device", &["error", "config"]),
    ("io", &["error", "config", "source", "plan", "device"]),
    // a leaf of data-layout types that decode fills and reader hands out
    ("array", &["error", "config", "device"]),
    // device kernels over decoded batches (partial aggregation): no Parquet, no plans
    ("compute", &["error", "config", "device", "array"]),
    (
        "decode",
        &[
            "error", "config", "source", "metadata", "plan", "device", "array",
        ],
    ),
    (
        "scan",
        &[
            "error", "config", "source", "metadata", "plan", "device", "io", "array", "decode",
        ],
    ),
    // the checks behind `cuparquet doctor` and Python's `doctor()`
    (
        "doctor",
        &["error", "config", "source", "plan", "device", "io"],
    ),
    // the C API: the scan's public face, in C
    (
        "capi",
        &["error", "config", "plan", "device", "array", "scan"],
    ),
    // the crate root declares and re-exports every stage
    (
        "lib",
        &[
            "error", "config", "source", "metadata", "plan", "device", "io", "array", "decode",
            "scan", "capi", "doctor", "compute",
        ],
    ),
];

const MAX_LINES: usize = 1_000;

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run from the package root)", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The stage of a library source file, or None for the CLI binary (which sees only the public
/// API, like any user).
fn stage(path: &Path) -> Option<String> {
    let rel = path.strip_prefix("src").ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    if first == "cli" {
        return None;
    }
    Some(first.trim_end_matches(".rs").to_string())
}

/// The stages `src` names as `crate::<stage>` (also inside `crate::{a, b::c}`), outside
/// comments.
fn imports(src: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in src.lines() {
        // code, and in comments the targets of doc links (`[x](crate::stage::x)`): a doc that
        // links a later stage climbs back up the pipeline as much as an import does
        let trimmed = line.trim_start();
        let links: String;
        let code = if trimmed.starts_with("//") {
            links = trimmed
                .match_indices("](crate::")
                .map(|(i, _)| {
                    let target = &trimmed[i + 2..];
                    &target[..target.find(')').unwrap_or(target.len())]
                })
                .collect::<Vec<_>>()
                .join(" ");
            links.as_str()
        } else {
            line.split("//").next().unwrap_or("")
        };
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + "crate::".len()..];
            if let Some(group) = after.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or("");
                for part in inner.split(',') {
                    let name: String = part
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        out.insert(name);
                    }
                }
            } else {
                let name: String = after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                // `crate::Error` and other root re-exports start with a capital letter
                if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                    out.insert(name);
                }
            }
            rest = after;
        }
    }
    out
}

#[test]
fn no_stage_imports_a_later_one_and_no_file_is_too_long() {
    let mut all = Vec::new();
    files(Path::new("src"), &mut all);
    assert!(all.len() > 20, "found only {} files under src/", all.len());
    // tests, benchmarks and scripts are rooms too: only their length is checked
    let mut others = Vec::new();
    for dir in [
        "tests",
        "benches",
        "scripts",
        "examples",
        "cuparquet-datafusion",
        "cuparquet-distributed",
    ] {
        files(Path::new(dir), &mut others);
    }
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut problems = Vec::new();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in &all {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines = text.lines().count();
        if lines > MAX_LINES {
            problems.push(format!(
                "{}: {lines} lines (at most {MAX_LINES})",
                path.display()
            ));
        }
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let Some(stage) = stage(path) else { continue };
        let Some(ok) = allowed.get(stage.as_str()) else {
            problems.push(format!(
                "{}: stage {stage:?} is not in this test's table (DESIGN.md's layout)",
                path.display()
            ));
            continue;
        };
        for used in imports(&text) {
            if used == stage {
                continue;
            }
            graph.entry(stage.clone()).or_default().insert(used.clone());
            if !ok.contains(&used.as_str()) {
                problems.push(format!(
                    "{}: stage {stage} imports crate::{used}, which it must not",
                    path.display()
                ));
            }
        }
    }
    for path in &others {
        let lines = std::fs::read_to_string(path).map_or(0, |t| t.lines().count());
        if lines > MAX_LINES {
            problems.push(format!(
                "{}: {lines} lines (at most {MAX_LINES})",
                path.display()
            ));
        }
    }
    // the table itself has no circle, so neither has the code it admits; check anyway
    for (from, tos) in &graph {
        for to in tos {
            if graph.get(to).is_some_and(|back| back.contains(from)) {
                problems.push(format!("{from} and {to} import each other"));
            }
        }
    }
    assert!(problems.is_empty(), "layout:\n{}", problems.join("\n"));
}

#[test]
fn the_import_scanner_sees_grouped_and_plain_paths() {
    let src = "use crate::plan::X;\n// use crate::reader::Y;\nuse crate::{device, io::Dest};\nlet e = crate::Error::x();\n";
    let got: Vec<String> = imports(src).into_iter().collect();
    assert_eq!(got, ["device", "io", "plan"]);
    let doc = "//! see [`reader`](crate::reader) and `crate::doctor` in words\n";
    assert_eq!(imports(doc).into_iter().collect::<Vec<_>>(), ["reader"]);
    assert_eq!(
        stage(Path::new("src/decode/gpu/wave.rs")).as_deref(),
        Some("decode")
    );
    assert_eq!(stage(Path::new("src/lib.rs")).as_deref(), Some("lib"));
    assert_eq!(stage(Path::new("src/cli/main.rs")), None);
}

/// DESIGN.md: the DataFusion crates use cuparquet's reader and never touch CUDA themselves (no
/// cudarc, no device memory or streams of their own).
#[test]
fn the_datafusion_crates_do_not_touch_cuda() {
    let mut src = Vec::new();
    files(Path::new("cuparquet-datafusion/src"), &mut src);
    let n = src.len();
    files(Path::new("cuparquet-distributed/src"), &mut src);
    assert!(
        n >= 5 && src.len() >= n + 3,
        "found only {} files",
        src.len()
    );
    let mut problems = Vec::new();
    for path in &src {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for bad in [
                "cudarc",
                "cuparquet::device::",
                "DeviceBuffer",
                "unsafe {",
                "unsafe fn",
                "unsafe impl",
            ] {
                if code.contains(bad) {
                    problems.push(format!("{}:{}: {bad}", path.display(), i + 1));
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "CUDA touched directly:\n{}",
        problems.join("\n")
    );
}
