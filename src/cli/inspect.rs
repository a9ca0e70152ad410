//! `cuparquet inspect`: the file's footer as text — schema, row groups, column chunks.

use std::fmt::Write as _;
use std::path::Path;

use cuparquet::metadata::read_metadata;
use cuparquet::plan::human_bytes;
use cuparquet::source::ParquetFile;
use cuparquet::Error;

pub(crate) fn inspect(path: &Path, brief: bool) -> Result<(), Error> {
    let f = ParquetFile::open(path)?;
    let meta = read_metadata(&f, false)?;
    let md = &meta.metadata;
    let fm = md.file_metadata();
    let mut s = String::new();
    let _ = writeln!(s, "file: {} ({} bytes)", path.display(), meta.file_len);
    let _ = writeln!(
        s,
        "format version {}, created by {}, {} rows, {} row groups, footer {} bytes",
        fm.version(),
        fm.created_by().unwrap_or("(unknown)"),
        fm.num_rows(),
        md.num_row_groups(),
        meta.footer_len
    );
    let mut schema = Vec::new();
    parquet::schema::printer::print_schema(&mut schema, fm.schema());
    let _ = writeln!(
        s,
        "schema:\n{}",
        String::from_utf8_lossy(&schema).trim_end()
    );
    for (i, rg) in md.row_groups().iter().enumerate() {
        let _ = writeln!(
            s,
            "row group {i}: {} rows, {} compressed, {} uncompressed",
            rg.num_rows(),
            human_bytes(rg.compressed_size().max(0) as u64),
            human_bytes(rg.total_byte_size().max(0) as u64)
        );
        if brief {
            continue;
        }
        for cc in rg.columns() {
            let d = cc.column_descr();
            let logical = d
                .logical_type_ref()
                .map(|l| format!(" / {l:?}"))
                .unwrap_or_default();
            let enc: Vec<String> = cc.encodings().map(|e| e.to_string()).collect();
            let _ = writeln!(
                s,
                "  {}: {}{} | {} | {} | {} → {} | offset {}{}",
                cc.column_path().string(),
                cc.column_type(),
                logical,
                enc.join(","),
                cuparquet::plan::codec_name(cc.compression()),
                cc.compressed_size(),
                cc.uncompressed_size(),
                cc.data_page_offset(),
                cc.dictionary_page_offset()
                    .map(|o| format!(" (dictionary {o})"))
                    .unwrap_or_default(),
            );
            let stats = match cc.statistics() {
                Some(st) => format!("{st}"),
                None => "none".into(),
            };
            let _ = writeln!(
                s,
                "      values {}, statistics {}, page index {}, bloom filter {}",
                cc.num_values(),
                stats,
                match (cc.column_index_offset(), cc.offset_index_offset()) {
                    (Some(_), Some(_)) => "column+offset",
                    (None, Some(_)) => "offset only",
                    (Some(_), None) => "column only",
                    (None, None) => "no",
                },
                if cc.bloom_filter_offset().is_some() {
                    "yes"
                } else {
                    "no"
                }
            );
        }
    }
    print!("{s}");
    Ok(())
}
