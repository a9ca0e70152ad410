//! The host page-header parser (`decode::page_header`) against the parquet crate's page reader:
//! for every column chunk of the corpus and the generated files, the page walk reaches the
//! chunk's end exactly and finds the same pages, kinds, value counts and encodings.

use crate::common;

use std::fs::File;
use std::path::Path;

use common::*;
use cuparquet::internals::decompress::decompress_pages;
use cuparquet::internals::page_header::{page_table, PageKind};
use parquet::column::page::Page;
use parquet::file::reader::{FileReader, SerializedFileReader};

fn encoding_number(e: parquet::basic::Encoding) -> i32 {
    use parquet::basic::Encoding::*;
    #[allow(deprecated)]
    match e {
        PLAIN => 0,
        PLAIN_DICTIONARY => 2,
        RLE => 3,
        BIT_PACKED => 4,
        DELTA_BINARY_PACKED => 5,
        DELTA_LENGTH_BYTE_ARRAY => 6,
        DELTA_BYTE_ARRAY => 7,
        RLE_DICTIONARY => 8,
        BYTE_STREAM_SPLIT => 9,
    }
}

/// Compares every chunk of `path`; returns the pages checked, or why the file was skipped.
fn check(path: &Path) -> Result<usize, String> {
    let name = path.display().to_string();
    let reader = SerializedFileReader::new(File::open(path).unwrap()).map_err(|e| e.to_string())?;
    let bytes = std::fs::read(path).unwrap();
    let md = reader.metadata();
    let mut pages_checked = 0;
    for rg in 0..md.num_row_groups() {
        let rgr = reader.get_row_group(rg).map_err(|e| e.to_string())?;
        for c in 0..md.row_group(rg).num_columns() {
            let col = md.row_group(rg).column(c);
            if col.dictionary_page_offset() == Some(0) {
                // writers that wrote 0 for "no dictionary": the range below would be wrong
                continue;
            }
            let (start, len) = col.byte_range();
            let Some(chunk) = bytes.get(start as usize..(start + len) as usize) else {
                return Err(format!("rg {rg} col {c}: chunk outside the file"));
            };
            // the parquet crate's view; a file it cannot page through is skipped
            let mut theirs: Vec<Page> = Vec::new();
            let mut pr = rgr.get_column_page_reader(c).map_err(|e| e.to_string())?;
            loop {
                match pr.get_next_page() {
                    Ok(Some(p)) => theirs.push(p),
                    Ok(None) => break,
                    Err(e) => return Err(format!("parquet: {e}")),
                }
            }
            let ours = page_table(chunk).unwrap_or_else(|e| panic!("{name} rg {rg} col {c}: {e}"));
            let ours: Vec<_> = ours
                .iter()
                .filter(|p| p.header.kind != PageKind::Index)
                .collect();
            assert_eq!(
                ours.len(),
                theirs.len(),
                "{name} rg {rg} col {c}: page count"
            );
            for (k, (o, t)) in ours.iter().zip(&theirs).enumerate() {
                let what = format!("{name} rg {rg} col {c} page {k}");
                let h = &o.header;
                assert_eq!(h.num_values() as u32, t.num_values(), "{what}: values");
                match t {
                    Page::DataPage {
                        encoding,
                        def_level_encoding,
                        rep_level_encoding,
                        ..
                    } => {
                        let d = h.data_v1.unwrap_or_else(|| panic!("{what}: not v1"));
                        assert_eq!(d.encoding, encoding_number(*encoding), "{what}");
                        assert_eq!(
                            d.def_level_encoding,
                            encoding_number(*def_level_encoding),
                            "{what}"
                        );
                        assert_eq!(
                            d.rep_level_encoding,
                            encoding_number(*rep_level_encoding),
                            "{what}"
                        );
                    }
                    Page::DataPageV2 {
                        encoding,
                        num_nulls,
                        num_rows,
                        def_levels_byte_len,
                        rep_levels_byte_len,
                        is_compressed,
                        ..
                    } => {
                        let d = h.data_v2.unwrap_or_else(|| panic!("{what}: not v2"));
                        assert_eq!(d.encoding, encoding_number(*encoding), "{what}");
                        assert_eq!(d.num_nulls as u32, *num_nulls, "{what}");
                        assert_eq!(d.num_rows as u32, *num_rows, "{what}");
                        assert_eq!(d.def_levels_byte_length as u32, *def_levels_byte_len);
                        assert_eq!(d.rep_levels_byte_length as u32, *rep_levels_byte_len);
                        assert_eq!(d.is_compressed, *is_compressed, "{what}");
                    }
                    Page::DictionaryPage { encoding, .. } => {
                        let d = h.dictionary.unwrap_or_else(|| panic!("{what}: not dict"));
                        assert_eq!(d.encoding, encoding_number(*encoding), "{what}");
                    }
                }
                pages_checked += 1;
            }
        }
    }
    Ok(pages_checked)
}

#[test]
fn page_walk_matches_the_parquet_crate() {
    let mut files = corpus_files("data", &[".parquet"]);
    let dir = tempfile::tempdir().unwrap();
    files.extend(generate_corpus(dir.path()).into_iter().map(|(_, p)| p));
    let (mut checked, mut pages, mut skipped) = (0, 0, Vec::new());
    for f in &files {
        match check(f) {
            Ok(n) => {
                checked += 1;
                pages += n;
            }
            Err(e) => skipped.push(format!("{}: {e}", f.display())),
        }
    }
    eprintln!(
        "{checked} files, {pages} pages agree; skipped {}:\n{}",
        skipped.len(),
        skipped.join("\n")
    );
    assert!(checked >= 80, "only {checked} files checked");
    assert!(pages > 1000, "only {pages} pages checked");
    // the files the parquet crate cannot page through are the known-bad ones
    for s in &skipped {
        assert!(
            s.contains("dict-page-offset-zero") || s.contains("nation.dict-malformed"),
            "unexpected skip: {s}"
        );
    }
}

#[test]
fn corrupted_chunks_are_errors_not_panics() {
    let mut files: Vec<std::path::PathBuf> = [
        "alltypes_plain.parquet",
        "alltypes_tiny_pages.parquet",
        "datapage_v2.snappy.parquet",
        "hadoop_lz4_compressed.parquet",
    ]
    .iter()
    .map(|f| corpus_dir().join("data").join(f))
    .collect();
    // one small generated file per codec (the corpus's only brotli file is large)
    let dir = tempfile::tempdir().unwrap();
    let mut seen = std::collections::HashSet::new();
    for (name, p) in generate_corpus(dir.path()) {
        if let Some(codec) = name.strip_prefix("flat_").and_then(|n| n.split('_').next()) {
            if seen.insert(codec.to_string()) {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 10, "{files:?}");
    for f in &files {
        corrupt(f);
    }
}

fn corrupt(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    let reader = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
    let col = reader.metadata().row_group(0).column(0);
    let (start, len) = col.byte_range();
    let chunk = &bytes[start as usize..(start + len) as usize];
    let mut s = Rng(0x1234_5678_9abc_def1);
    let mut errors = 0;
    for _ in 0..2000 {
        let mut c = chunk.to_vec();
        flip_bytes(&mut s, &mut c);
        match page_table(&c) {
            Err(e) => {
                errors += 1;
                assert!(e.to_string().starts_with("page "), "{e}");
            }
            Ok(t) => {
                // the walk held: decompression must fail cleanly or produce the sizes said
                let b = bytes::Bytes::from(c.clone());
                if let Ok(pages) = decompress_pages(&b, &t, col.compression()) {
                    for p in pages {
                        assert_eq!(p.bytes.len(), t[p.page].header.uncompressed_size as usize);
                    }
                }
            }
        }
        // truncations
        let cut = (s.0 >> 20) as usize % c.len();
        let _ = page_table(&c[..cut]);
    }
    assert!(errors > 0);
}
