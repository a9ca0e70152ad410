//! The reference decoder (`tests/reference_decoder`, the CPU twin of the GPU kernels) equals arrow-rs
//! for every column the GPU plan takes, every row group, over the corpus and the generated
//! files: page table → decompression → levels → PLAIN / dictionary values → conversion.

use crate::common;
use crate::reference_decoder;

use std::path::Path;

use common::*;
use cuparquet::internals::gpu_plan::{place_columns, Placement};
use cuparquet::{Device, Scan};
use reference_decoder::decode_chunk;

/// Checks every GPU-placed column chunk of `path`; returns the chunks compared.
fn check(path: &Path) -> usize {
    let name = path.display().to_string();
    let Ok(r) = Scan::builder(path).with_device(Device::Host).build() else {
        return 0;
    };
    let md = &r.files()[0].metadata().metadata;
    let fields = r.schema().fields().to_vec();
    let placements = place_columns(
        md,
        &fields,
        &r.files()[0].plan().leaves,
        &r.files()[0].plan().row_groups,
    );
    let bytes = std::fs::read(path).unwrap();
    let mut n = 0;
    for p in placements {
        let Placement::Gpu(col) = p else { continue };
        // the reference decodes PLAIN, dictionary and RLE values; DELTA_*, BYTE_STREAM_SPLIT
        // and the fixed-width columns found as strings (`via_bytes`) are checked against
        // arrow-rs by the emulated and device tests instead
        if col.via_bytes {
            continue;
        }
        for c in r.files()[0]
            .plan()
            .chunks
            .iter()
            .filter(|c| c.column == col.leaf)
        {
            use parquet::basic::Encoding as E;
            let mut encodings = md.row_group(c.row_group).column(c.column).encodings();
            if encodings.any(|e| {
                matches!(
                    e,
                    E::DELTA_BINARY_PACKED
                        | E::DELTA_LENGTH_BYTE_ARRAY
                        | E::DELTA_BYTE_ARRAY
                        | E::BYTE_STREAM_SPLIT
                )
            }) {
                continue;
            }
            let want = match oracle(
                path,
                &Projection::Roots(vec![col.field]),
                Some(&[c.row_group]),
            ) {
                Ok(b) => b.column(0).clone(),
                Err(_) => continue, // files arrow-rs refuses are covered elsewhere
            };
            let chunk =
                bytes::Bytes::copy_from_slice(&bytes[c.range.start as usize..c.range.end as usize]);
            let codec = md.row_group(c.row_group).column(c.column).compression();
            let got = decode_chunk(&col, &fields[col.field], chunk, codec)
                .unwrap_or_else(|e| panic!("{name} rg {} '{}': {e}", c.row_group, c.path));
            if name.ends_with("repeated_no_annotation.parquet") {
                // the footer says 0 rows, so arrow-rs (and the reader) return none; the chunk
                // itself holds 6 (asserted in conformance.rs)
                assert_eq!(want.len(), 0);
                continue;
            }
            assert_eq!(
                got.data_type(),
                want.data_type(),
                "{name} rg {} '{}'",
                c.row_group,
                c.path
            );
            assert!(
                got.as_ref() == want.as_ref(),
                "{name} rg {} '{}' ({:?}): values differ\n got {:?}\nwant {:?}",
                c.row_group,
                c.path,
                col.conversion,
                got.slice(0, got.len().min(8)),
                want.slice(0, want.len().min(8))
            );
            n += 1;
        }
    }
    n
}

#[test]
fn reference_decoder_equals_arrow_rs() {
    let mut files = corpus_files("data", &[".parquet"]);
    let dir = tempfile::tempdir().unwrap();
    files.extend(generate_corpus(dir.path()).into_iter().map(|(_, p)| p));
    let mut chunks = 0;
    for f in &files {
        chunks += check(f);
    }
    eprintln!(
        "{} files, {chunks} column chunks equal to arrow-rs",
        files.len()
    );
    assert!(chunks > 500, "{chunks}");
}

#[test]
fn corrupted_chunks_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let generated = generate_corpus(dir.path());
    let mut files: Vec<std::path::PathBuf> =
        ["alltypes_plain.parquet", "datapage_v2.snappy.parquet"]
            .iter()
            .map(|f| corpus_dir().join("data").join(f))
            .collect();
    files.extend(
        generated
            .into_iter()
            .filter(|(n, _)| n.starts_with("flat_snappy"))
            .map(|(_, p)| p),
    );
    let mut s = Rng(0x2545_f491_4f6c_dd1d);
    let mut errors = 0;
    for path in &files {
        let r = Scan::builder(path)
            .with_device(Device::Host)
            .build()
            .unwrap();
        let md = &r.files()[0].metadata().metadata;
        let fields = r.schema().fields().to_vec();
        let bytes = std::fs::read(path).unwrap();
        for p in place_columns(
            md,
            &fields,
            &r.files()[0].plan().leaves,
            &r.files()[0].plan().row_groups,
        ) {
            let Placement::Gpu(col) = p else { continue };
            let c = r.files()[0]
                .plan()
                .chunks
                .iter()
                .find(|c| c.column == col.leaf)
                .unwrap();
            let codec = md.row_group(c.row_group).column(c.column).compression();
            let chunk = &bytes[c.range.start as usize..c.range.end as usize];
            for _ in 0..40 {
                let mut m = chunk.to_vec();
                flip_bytes(&mut s, &mut m);
                if decode_chunk(&col, &fields[col.field], bytes::Bytes::from(m), codec).is_err() {
                    errors += 1;
                }
            }
        }
    }
    assert!(errors > 0);
}

#[test]
fn rle_hybrid_runs() {
    // RLE run of 5 × 3 (bit width 2), then a bit-packed group of 8 values 0..8 (width 3)
    let v = reference_decoder::rle_hybrid(&[5 << 1, 3], 2, 5).unwrap();
    assert_eq!(v, vec![3; 5]);
    // bit-packed: header (1 group << 1) | 1, values 0..7 in 3 bits each, LSB first
    let mut bits = 0u32;
    for i in 0..8u32 {
        bits |= i << (3 * i);
    }
    let b = bits.to_le_bytes();
    let v = reference_decoder::rle_hybrid(&[3, b[0], b[1], b[2]], 3, 8).unwrap();
    assert_eq!(v, (0..8).collect::<Vec<u32>>());
    // fewer values wanted than the group holds
    assert_eq!(
        reference_decoder::rle_hybrid(&[3, b[0], b[1], b[2]], 3, 5)
            .unwrap()
            .len(),
        5
    );
    // errors: cut short, value too wide, empty run, width over 32
    assert!(reference_decoder::rle_hybrid(&[5 << 1], 2, 5)
        .unwrap_err()
        .contains("runs past"));
    assert!(reference_decoder::rle_hybrid(&[5 << 1, 9], 2, 5)
        .unwrap_err()
        .contains("does not fit"));
    assert!(reference_decoder::rle_hybrid(&[0, 1], 1, 1)
        .unwrap_err()
        .contains("empty RLE run"));
    assert!(reference_decoder::rle_hybrid(&[], 33, 1)
        .unwrap_err()
        .contains("over 32"));
    assert!(reference_decoder::rle_hybrid(&[], 1, 1)
        .unwrap_err()
        .contains("cut short"));
}
