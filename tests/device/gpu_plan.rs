//! Which columns the GPU decoder takes (`decode::gpu_plan`), over the corpus and the generated
//! files: every field placed once; nested fields on the GPU but for an Arrow Null leaf; DELTA_* and
//! BYTE_STREAM_SPLIT columns and the flat types of the generated files on the GPU.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use cuparquet::internals::gpu_plan::{place_columns, Placement};
use cuparquet::{Device, Scan};

fn placements(path: &Path) -> Option<Vec<Placement>> {
    let r = Scan::builder(path).with_device(Device::Host).build().ok()?;
    let fields = r.schema().fields().to_vec();
    let p = place_columns(
        &r.files()[0].metadata().metadata,
        &fields,
        &r.files()[0].plan().leaves,
        &r.files()[0].plan().row_groups,
    );
    assert_eq!(p.len(), fields.len(), "{}", path.display());
    for (i, x) in p.iter().enumerate() {
        let f = match x {
            Placement::Gpu(c) => c.field,
            Placement::Nested(n) => n.field,
            Placement::Host { field, .. } => *field,
        };
        assert_eq!(f, i, "{}: placements in field order", path.display());
    }
    Some(p)
}

#[test]
fn corpus_placements() {
    let data = corpus_dir().join("data");
    let p = placements(&data.join("alltypes_plain.parquet")).unwrap();
    assert!(
        p.iter().all(|x| matches!(x, Placement::Gpu(_))),
        "alltypes_plain: {p:#?}"
    );
    let p = placements(&data.join("nested_lists.snappy.parquet")).unwrap();
    assert!(matches!(&p[0], Placement::Nested(_)), "{p:#?}");
    for f in [
        "delta_binary_packed.parquet",
        "delta_byte_array.parquet",
        "delta_length_byte_array.parquet",
        "delta_encoding_optional_column.parquet",
        "byte_stream_split.zstd.parquet",
        "byte_stream_split_extended.gzip.parquet",
    ] {
        let p = placements(&data.join(f)).unwrap();
        assert!(
            p.iter().all(|x| matches!(x, Placement::Gpu(_))),
            "{f}: {p:#?}"
        );
    }

    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let (mut gpu, mut nested, mut hostn) = (0, 0, 0);
    for f in corpus_files("data", &[".parquet"]) {
        let Some(p) = placements(&f) else { continue };
        for x in p {
            match x {
                Placement::Gpu(_) => gpu += 1,
                Placement::Nested(_) => nested += 1,
                Placement::Host { reason, .. } => {
                    hostn += 1;
                    // the reason without the field's name and its type in parentheses
                    let key = reason
                        .strip_prefix('\'')
                        .and_then(|r| r.split_once('\''))
                        .map_or(reason.as_str(), |x| x.1);
                    let key = match (key.find(" ("), key.find("): ")) {
                        (Some(a), Some(b)) if a < b => format!("{}{}", &key[..a], &key[b + 1..]),
                        _ => key.to_string(),
                    };
                    *reasons.entry(key).or_default() += 1;
                }
            }
        }
    }
    eprintln!(
        "corpus fields: {gpu} flat and {nested} nested on the GPU, {hostn} on the host: \
         {reasons:#?}"
    );
    assert!(gpu >= 250 && nested >= 40, "{gpu} / {nested} / {hostn}");
    // every flat column of the corpus is decoded on the GPU, and every nested one but a list
    // of Arrow Null (arrow-rs's reading of a column with no values)
    for r in reasons.keys() {
        assert!(r.contains("Arrow Null from INT32"), "{r}");
    }
}

#[test]
fn generated_flat_and_nested_files_go_to_the_gpu() {
    let dir = tempfile::tempdir().unwrap();
    for (name, path) in generate_corpus(dir.path()) {
        let p = placements(&path).unwrap();
        if name.starts_with("nested_") {
            // lists, structs and maps of every depth the generator writes: all on the GPU
            for x in &p {
                assert!(!matches!(x, Placement::Host { .. }), "{name}: {x:?}");
            }
        }
        if !name.starts_with("flat_") {
            continue;
        }
        for x in &p {
            // the flat batch has no nested fields, and the GPU decodes every encoding arrow-rs
            // writes, and keeps its Dictionary(Int32, Utf8) column's dictionaries; only where
            // that column is written in DELTA_BYTE_ARRAY (v2 pages without a dictionary, the
            // DELTA files) does it go to the host (a pass whose pages are PLAIN does too, at
            // decode time)
            if let Placement::Host { reason, .. } = x {
                assert!(
                    reason.contains("keeps its dictionary") && reason.contains("DELTA"),
                    "{name}: {reason}"
                );
            }
        }
    }
}
