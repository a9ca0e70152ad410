//! Reading the footer: one speculative read of the file's tail, parsed by the parquet crate.
//!
//! The last [`FOOTER_SPECULATIVE_READ`] bytes are read at once. A second read happens only when
//! the footer (or the page index, when asked for) starts before that tail.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use bytes::Bytes;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataPushDecoder};
use parquet::DecodeResult;

use crate::error::{Error, Result};
use crate::source::ParquetFile;
pub(crate) mod thrift;
pub mod page_header;

use thrift::{ty, Reader, ThriftError};

/// Size of the speculative tail read: 64 KiB.
pub const FOOTER_SPECULATIVE_READ: u64 = 64 << 10;

const MAGIC: &[u8; 4] = b"PAR1";
const MAGIC_ENCRYPTED: &[u8; 4] = b"PARE";

/// Parsed footer of a file, with what it took to read it.
#[derive(Debug, Clone)]
pub struct FileMetadata {
    /// The parquet crate's metadata (with the page index when it was asked for and present).
    pub metadata: Arc<ParquetMetaData>,
    /// Length of the file.
    pub file_len: u64,
    /// Length of the Thrift footer (without the trailing 8 bytes).
    pub footer_len: u64,
    /// Byte ranges read to get here, in order.
    pub reads: Vec<Range<u64>>,
    /// Whether the page index was asked for and loaded.
    pub page_index_loaded: bool,
}

impl FileMetadata {
    /// Offset where the footer starts: no column chunk may reach past it.
    pub fn footer_start(&self) -> u64 {
        self.file_len - 8 - self.footer_len
    }
}

/// Reads and parses the footer of `file`; with `page_index`, loads the column and offset
/// indexes too when the file has them.
pub fn read_metadata(file: &ParquetFile, page_index: bool) -> Result<FileMetadata> {
    let path = file.path();
    let len = file.len();
    if len < 12 {
        return Err(Error::footer(
            path,
            format!("file is {len} bytes: too small to be a Parquet file (at least 12 bytes: magic, footer, length, magic)"),
        ));
    }
    let tail_start = len.saturating_sub(FOOTER_SPECULATIVE_READ);
    let tail = file.read_range(tail_start..len, "footer")?;
    let mut reads = Vec::with_capacity(3);
    reads.push(tail_start..len);

    let magic = &tail[tail.len() - 4..];
    if magic == MAGIC_ENCRYPTED {
        return Err(Error::footer(
            path,
            "the footer is encrypted (magic PARE): encrypted Parquet files are not supported",
        ));
    }
    if magic != MAGIC {
        let head = file.read_range(0..4, "header")?;
        if head == MAGIC {
            return Err(Error::footer(
                path,
                format!(
                    "the file looks truncated: it starts as a Parquet file (PAR1) but does not end as one; its {len} bytes should end with the footer, the footer's length and PAR1 (bytes {}..{len})",
                    len - 8
                ),
            ));
        }
        return Err(Error::footer(
            path,
            format!(
                "not a Parquet file: the last 4 bytes are {:?}, expected \"PAR1\"",
                String::from_utf8_lossy(magic)
            ),
        ));
    }
    let n = tail.len();
    let footer_len =
        u32::from_le_bytes([tail[n - 8], tail[n - 7], tail[n - 6], tail[n - 5]]) as u64;
    if footer_len + 12 > len {
        return Err(Error::footer(
            path,
            format!("footer length {footer_len} reaches past the start of the file ({len} bytes)"),
        ));
    }

    let policy = if page_index {
        PageIndexPolicy::Optional
    } else {
        PageIndexPolicy::Skip
    };
    let mut decoder = ParquetMetaDataPushDecoder::try_new(len)
        .map_err(|e| Error::footer(path, e.to_string()))?
        .with_page_index_policy(policy);
    let tail = Bytes::from(tail);
    // the Thrift footer's bytes, for the checks the parquet crate does not make
    let footer_range = len - 8 - footer_len..len - 8;
    let mut footer_bytes = (footer_range.start >= tail_start).then(|| {
        tail.slice((footer_range.start - tail_start) as usize..(footer_range.end - tail_start) as usize)
    });
    decoder
        .push_range(tail_start..len, tail)
        .map_err(|e| Error::footer(path, e.to_string()))?;

    // The decoder asks for at most two more ranges (footer, then page index); bound the loop
    // so that a decoder bug cannot spin forever.
    for _ in 0..4 {
        match decoder.try_decode() {
            Ok(DecodeResult::Data(metadata)) => {
                let footer = match footer_bytes {
                    Some(b) => b,
                    None => Bytes::from(file.read_range(footer_range, "footer")?),
                };
                check_footer(path, &metadata, &footer)?;
                return Ok(FileMetadata {
                    metadata: Arc::new(metadata),
                    file_len: len,
                    footer_len,
                    reads,
                    page_index_loaded: page_index,
                });
            }
            Ok(DecodeResult::NeedsData(ranges)) => {
                for r in ranges {
                    let what = if r.start >= len - 8 - footer_len {
                        "footer"
                    } else {
                        "page index"
                    };
                    let buf = Bytes::from(file.read_range(r.clone(), what)?);
                    reads.push(r.clone());
                    if footer_bytes.is_none()
                        && r.start <= footer_range.start
                        && r.end >= footer_range.end
                    {
                        let at = (footer_range.start - r.start) as usize;
                        footer_bytes = Some(buf.slice(at..at + footer_len as usize));
                    }
                    decoder
                        .push_range(r, buf)
                        .map_err(|e| Error::footer(path, e.to_string()))?;
                }
            }
            Ok(DecodeResult::Finished) => break,
            Err(e) => return Err(Error::footer(path, clean_parquet_error(&e))),
        }
    }
    Err(Error::footer(
        path,
        "the metadata decoder did not finish after reading footer and page index",
    ))
}

/// What the parquet crate reads from a footer without checking it, checked ([`check_claims`]),
/// and each column chunk's metadata names the physical type the schema gives its column (the
/// parquet crate takes the schema's and ignores the chunk's; a file where they differ is
/// contradictory, and was decoded as the schema's type).
fn check_footer(path: &Path, md: &ParquetMetaData, footer: &[u8]) -> Result<()> {
    check_claims(path, md)?;
    let types = column_types(footer).map_err(|e| {
        Error::footer(path, format!("the footer's column metadata: {e}"))
    })?;
    for (i, g) in md.row_groups().iter().enumerate() {
        for (c, col) in g.columns().iter().enumerate() {
            let Some(Some(t)) = types.get(i).and_then(|cs| cs.get(c)) else {
                continue;
            };
            let schema = col.column_descr().physical_type();
            if *t != physical_code(schema) {
                return Err(Error::footer(
                    path,
                    format!(
                        "row group {i}, column '{}': the column metadata says physical type {}, the schema {schema}",
                        col.column_descr().path().string(),
                        physical_name(*t)
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The counts and claims of a footer the parquet crate parsed (`md`, read from `path`; by
/// [`read_metadata`], or by another reader such as DataFusion's), checked before anything is
/// sized by them: row counts are not negative, the file's is not above its row groups' sum, a
/// row group's rows agree with its column chunks' values, the schema's claims with the chunks'
/// statistics, and the embedded Arrow schema with the physical types. Each failure is one line
/// naming `path`, the row group, the column and the numbers.
pub fn check_claims(path: &Path, md: &ParquetMetaData) -> Result<()> {
    let file_rows = md.file_metadata().num_rows();
    if file_rows < 0 {
        return Err(Error::footer(path, format!("the file claims {file_rows} rows")));
    }
    let groups_rows: i64 = md.row_groups().iter().map(|g| g.num_rows().max(0)).sum();
    if file_rows > groups_rows {
        // (fewer is read as arrow-rs reads it: capped by the file's count)
        return Err(Error::footer(
            path,
            format!("the file claims {file_rows} rows; its row groups hold {groups_rows}"),
        ));
    }
    for (i, g) in md.row_groups().iter().enumerate() {
        if g.num_rows() < 0 {
            return Err(Error::footer(
                path,
                format!("row group {i} claims {} rows", g.num_rows()),
            ));
        }
        check_row_group_counts(path, i, g)?;
    }
    check_schema_claims(path, md)?;
    check_arrow_hints(path, md)
}

/// A row group's row count against its column chunks' value counts (levels, nulls included),
/// before anything is sized by either: each row has at least one value in every column, and
/// exactly one in a column that is not repeated. A count claimed past what the chunks hold
/// (2^62 rows over a few pages) would otherwise size batches and buffers by the claim.
fn check_row_group_counts(
    path: &Path,
    i: usize,
    g: &parquet::file::metadata::RowGroupMetaData,
) -> Result<()> {
    let rows = g.num_rows();
    for col in g.columns() {
        let d = col.column_descr();
        let values = col.num_values();
        let name = || d.path().string();
        let wrong = if values < 0 {
            Some(format!("column '{}' claims {values} values", name()))
        } else if rows > values {
            Some(format!(
                "it claims {rows} rows, but column '{}' holds {values} values (at least one per row)",
                name()
            ))
        } else if d.max_rep_level() == 0 && values > rows {
            Some(format!(
                "column '{}' claims {values} values for its {rows} rows (a column that is not repeated holds one value per row)",
                name()
            ))
        } else if rows == 0 && values > 0 {
            Some(format!(
                "it claims 0 rows, but column '{}' holds {values} values",
                name()
            ))
        } else {
            None
        };
        if let Some(what) = wrong {
            return Err(Error::footer(path, format!("row group {i}: {what}")));
        }
    }
    Ok(())
}

/// What the schema and each chunk's statistics claim about a column, checked against each
/// other: a FIXED_LEN_BYTE_ARRAY has a length of at least 1; level histograms (size
/// statistics) have one entry per level of the column, and a column without definition levels
/// (its leaf and every ancestor REQUIRED) counts no nulls. A schema that marks an OPTIONAL
/// leaf REQUIRED (or the reverse) otherwise has the levels read as values, or values as levels.
fn check_schema_claims(path: &Path, md: &ParquetMetaData) -> Result<()> {
    let schema = md.file_metadata().schema_descr();
    for col in schema.columns() {
        if col.physical_type() == parquet::basic::Type::FIXED_LEN_BYTE_ARRAY
            && col.type_length() < 1
        {
            return Err(Error::footer(
                path,
                format!(
                    "column '{}': a FIXED_LEN_BYTE_ARRAY of length {} (the schema must give its values' length, at least 1 byte)",
                    col.path().string(),
                    col.type_length()
                ),
            ));
        }
    }
    for (i, g) in md.row_groups().iter().enumerate() {
        for col in g.columns() {
            let d = col.column_descr();
            let bad = |what: String| {
                Error::footer(
                    path,
                    format!(
                        "row group {i}, column '{}': {what}; the schema makes it {}",
                        d.path().string(),
                        levels_in_words(d.max_rep_level(), d.max_def_level())
                    ),
                )
            };
            for (histogram, max, which) in [
                (col.definition_level_histogram(), d.max_def_level(), "definition"),
                (col.repetition_level_histogram(), d.max_rep_level(), "repetition"),
            ] {
                let n = histogram.map_or(0, |h| h.len());
                if n != 0 && n != max as usize + 1 {
                    return Err(bad(format!(
                        "its size statistics count {which} levels 0 to {}",
                        n - 1
                    )));
                }
            }
            let nulls = col.statistics().and_then(|s| s.null_count_opt());
            if let (0, Some(n @ 1..)) = (d.max_def_level(), nulls) {
                return Err(bad(format!("its statistics count {n} nulls")));
            }
        }
    }
    Ok(())
}

/// The embedded Arrow schema (`ARROW:schema`, which arrow-rs lets decide types such as
/// timestamps' units) against the physical types: arrow-rs takes a timestamp there for an
/// INT32 column, which no writer stores (Arrow writers store timestamps as INT64 or INT96), and
/// would label 32-bit integers as timestamps. Such a file is contradictory (pyarrow ignores the
/// hint); it is an error naming the column.
fn check_arrow_hints(path: &Path, md: &ParquetMetaData) -> Result<()> {
    let meta = md.file_metadata();
    let hinted = meta
        .key_value_metadata()
        .is_some_and(|kv| kv.iter().any(|e| e.key == "ARROW:schema"));
    if !hinted {
        return Ok(());
    }
    let schema = meta.schema_descr();
    // (arrow-rs panics on some malformed schemas: contained, and reported where the schema is
    // read for the load)
    let Ok((Ok(plain), Ok(with_hints))) = crate::error::panic_guard::contain(|| {
        (
            parquet::arrow::parquet_to_arrow_schema(schema, None),
            parquet::arrow::parquet_to_arrow_schema(schema, meta.key_value_metadata()),
        )
    }) else {
        return Ok(()); // an unreadable schema is reported where it is read
    };
    for (p, h) in plain.fields().iter().zip(with_hints.fields()) {
        if let Some((name, hint)) = contradicted_hint(p, h) {
            return Err(Error::footer(
                path,
                format!(
                    "column '{name}': the embedded Arrow schema (ARROW:schema) says {hint}, but the column is stored as INT32"
                ),
            ));
        }
    }
    Ok(())
}

/// The first leaf (its dotted name) where `hinted` puts a timestamp on what `plain` (the same
/// field without the embedded schema) reads as a 32-bit integer, with the hinted type.
fn contradicted_hint(plain: &Field, hinted: &Field) -> Option<(String, DataType)> {
    fn children(t: &DataType) -> Vec<&Field> {
        match t {
            DataType::Struct(fs) => fs.iter().map(|f| f.as_ref()).collect(),
            DataType::List(f)
            | DataType::LargeList(f)
            | DataType::ListView(f)
            | DataType::LargeListView(f)
            | DataType::FixedSizeList(f, _)
            | DataType::Map(f, _) => vec![f.as_ref()],
            _ => Vec::new(),
        }
    }
    let value = |t: &DataType| match t {
        DataType::Dictionary(_, v) => v.as_ref().clone(),
        t => t.clone(),
    };
    let (p, h) = (plain.data_type(), value(hinted.data_type()));
    if *p == DataType::Int32 && matches!(h, DataType::Timestamp(..)) {
        return Some((plain.name().clone(), h));
    }
    children(p)
        .into_iter()
        .zip(children(hinted.data_type()))
        .find_map(|(pc, hc)| contradicted_hint(pc, hc))
        .map(|(name, t)| (format!("{}.{name}", plain.name()), t))
}

/// A column's maximum levels in the schema's words.
fn levels_in_words(max_rep: i16, max_def: i16) -> String {
    match (max_rep, max_def) {
        (0, 0) => "REQUIRED with no optional ancestor (no levels)".into(),
        (0, d) => format!("not repeated, with definition levels up to {d}"),
        (r, d) => format!("repeated, with repetition levels up to {r} and definition levels up to {d}"),
    }
}

/// The Thrift code of a physical type.
fn physical_code(t: parquet::basic::Type) -> i32 {
    use parquet::basic::Type as T;
    match t {
        T::BOOLEAN => 0,
        T::INT32 => 1,
        T::INT64 => 2,
        T::INT96 => 3,
        T::FLOAT => 4,
        T::DOUBLE => 5,
        T::BYTE_ARRAY => 6,
        T::FIXED_LEN_BYTE_ARRAY => 7,
    }
}

fn physical_name(code: i32) -> String {
    const NAMES: [&str; 8] = [
        "BOOLEAN",
        "INT32",
        "INT64",
        "INT96",
        "FLOAT",
        "DOUBLE",
        "BYTE_ARRAY",
        "FIXED_LEN_BYTE_ARRAY",
    ];
    usize::try_from(code)
        .ok()
        .and_then(|i| NAMES.get(i))
        .map_or_else(|| format!("{code} (unknown)"), |n| n.to_string())
}

/// The physical type (Thrift code) in each column chunk's metadata, per row group: `None`
/// where a chunk has no plaintext metadata (encrypted columns).
fn column_types(footer: &[u8]) -> std::result::Result<Vec<Vec<Option<i32>>>, ThriftError> {
    let mut r = Reader::new(footer, "the footer");
    let mut groups = Vec::new();
    let mut last = 0i16;
    while let Some((id, t)) = r.field(&mut last)? {
        if id != 4 || t != ty::LIST {
            r.skip(t, 0)?;
            continue;
        }
        for _ in 0..r.list_len(ty::STRUCT)? {
            let mut columns = Vec::new();
            let mut last = 0i16;
            while let Some((id, t)) = r.field(&mut last)? {
                if id != 1 || t != ty::LIST {
                    r.skip(t, 1)?;
                    continue;
                }
                for _ in 0..r.list_len(ty::STRUCT)? {
                    let mut physical = None;
                    let mut last = 0i16;
                    while let Some((id, t)) = r.field(&mut last)? {
                        if id != 3 || t != ty::STRUCT {
                            r.skip(t, 2)?;
                            continue;
                        }
                        let mut last = 0i16;
                        while let Some((id, t)) = r.field(&mut last)? {
                            if id == 1 && t == ty::I32 {
                                physical = Some(r.i32()?);
                            } else {
                                r.skip(t, 3)?;
                            }
                        }
                    }
                    columns.push(physical);
                }
            }
            groups.push(columns);
        }
    }
    Ok(groups)
}

/// The Arrow schema of a file's footer, as arrow-rs reads it (the embedded Arrow schema, when
/// the writer stored one, decides types such as timestamps' units and large strings).
pub fn arrow_schema(path: &Path, meta: &FileMetadata) -> Result<SchemaRef> {
    let md = meta.metadata.file_metadata();
    parquet::arrow::parquet_to_arrow_schema(md.schema_descr(), md.key_value_metadata())
        .map(Arc::new)
        .map_err(|e| {
            Error::footer(
                path,
                format!("no Arrow schema for it: {}", clean_parquet_error(&e)),
            )
        })
}

/// The one schema several files are read as: `files[0]`'s, with each field nullable where it is
/// nullable in any file. Every file must have the same fields, by name and Arrow type, in the
/// same order; the first that differs is an error naming both files and the field.
pub fn merge_schemas(files: &[(PathBuf, SchemaRef)]) -> Result<SchemaRef> {
    let Some((first_path, first)) = files.first() else {
        return Err(Error::NoFiles {
            sources: Vec::new(),
        });
    };
    let mut fields: Vec<Field> = first.fields().iter().map(|f| f.as_ref().clone()).collect();
    for (path, schema) in &files[1..] {
        let mismatch = |reason: String| Error::SchemaMismatch {
            first: first_path.clone(),
            second: path.clone(),
            reason,
        };
        if schema.fields().len() != fields.len() {
            let names = |s: &Schema| -> Vec<String> {
                s.fields().iter().map(|f| f.name().clone()).collect()
            };
            return Err(mismatch(format!(
                "{} fields ({}) against {} ({})",
                fields.len(),
                names(first).join(", "),
                schema.fields().len(),
                names(schema).join(", ")
            )));
        }
        for (mine, theirs) in fields.iter_mut().zip(schema.fields()) {
            if mine.name() != theirs.name() {
                return Err(mismatch(format!(
                    "field '{}' against '{}' at the same position",
                    mine.name(),
                    theirs.name()
                )));
            }
            if !types_agree(mine.data_type(), theirs.data_type()) {
                return Err(mismatch(format!(
                    "field '{}' is {} in one and {} in the other",
                    mine.name(),
                    mine.data_type(),
                    theirs.data_type()
                )));
            }
            if theirs.is_nullable() && !mine.is_nullable() {
                *mine = mine.clone().with_nullable(true);
            }
        }
    }
    Ok(Arc::new(Schema::new_with_metadata(
        fields,
        first.metadata().clone(),
    )))
}

/// Whether two Arrow types are the same type, nested fields' nullability aside (merged files
/// may differ there, as in top-level fields).
fn types_agree(a: &DataType, b: &DataType) -> bool {
    fn strip(t: &DataType) -> DataType {
        match t {
            DataType::List(f) => DataType::List(Arc::new(strip_field(f))),
            DataType::LargeList(f) => DataType::LargeList(Arc::new(strip_field(f))),
            DataType::FixedSizeList(f, n) => DataType::FixedSizeList(Arc::new(strip_field(f)), *n),
            DataType::Struct(fs) => DataType::Struct(fs.iter().map(|f| strip_field(f)).collect()),
            DataType::Map(f, sorted) => DataType::Map(Arc::new(strip_field(f)), *sorted),
            other => other.clone(),
        }
    }
    fn strip_field(f: &Field) -> Field {
        Field::new(f.name(), strip(f.data_type()), true)
    }
    strip(a) == strip(b)
}

/// The parquet crate's error text without its "Parquet error: " prefix.
pub(crate) fn clean_parquet_error(e: &parquet::errors::ParquetError) -> String {
    let mut s = e.to_string();
    // Errors wrapped through arrow come out as "Arrow: Parquet argument error: Parquet
    // error: ..."; keep the message, not the wrapping.
    loop {
        let before = s.len();
        for prefix in [
            "Arrow: ",
            "Parquet argument error: ",
            "Parquet error: ",
            "External: ",
        ] {
            if let Some(rest) = s.strip_prefix(prefix) {
                s = rest.to_string();
            }
        }
        if let Some(rest) = s.strip_prefix("EOF: ") {
            s = format!("unexpected end of data: {rest}");
        }
        if s.len() == before {
            return rephrase(s);
        }
    }
}

/// arrow-rs messages that leak its internals, in terms of the file: a footer schema that
/// refers past its end, an unformatted message template, a struct reader out of step with
/// its children. A trailing `{}` (a template left unfilled) goes.
pub(crate) fn rephrase(s: String) -> String {
    if let Some(rest) = s.strip_prefix("Index out of bound, index = ") {
        let mut nums = rest.split(", len = ");
        if let (Some(i), Some(n)) = (nums.next(), nums.next()) {
            return format!(
                "the footer's schema is malformed: element {i} is referenced, the schema has {n} (a group claims more children than follow it)"
            );
        }
    }
    if s.contains("{levels_to_read}") || s.starts_with("insufficient definition levels read") {
        return "a page holds fewer definition levels than its header's value count (its levels are corrupt)".into();
    }
    if s.starts_with("insufficient repetition levels read") {
        return "a page holds fewer repetition levels than its header's value count (its levels are corrupt)".into();
    }
    if let Some(rest) = s.strip_prefix("StructArrayReader out of sync") {
        let counts = rest
            .trim_start_matches(" in read_records")
            .trim_start_matches(", ");
        return format!(
            "the columns of a struct disagree on their number of rows ({counts}): the file's levels or value counts are corrupt"
        );
    }
    match s.strip_suffix("{}") {
        Some(t) => t.trim_end_matches([' ', ':']).to_string(),
        None => s,
    }
}

/// `md` without the dictionary page offsets of the chunks `fixes` names (row group, column):
/// arrow-rs reads a chunk from its dictionary page offset whenever one is given; where the plan
/// ignored an impossible one (e.g. 0), dropping it makes arrow-rs read what the plan read.
pub(crate) fn without_dictionary_offsets(
    path: &Path,
    md: &Arc<ParquetMetaData>,
    fixes: &[(usize, usize)],
) -> Result<Arc<ParquetMetaData>> {
    if fixes.is_empty() {
        return Ok(Arc::clone(md));
    }
    let mut builder = md.as_ref().clone().into_builder();
    let mut groups = builder.take_row_groups();
    for &(rg, col) in fixes {
        let cols = groups[rg].columns_mut();
        let fixed = cols[col]
            .clone()
            .into_builder()
            .set_dictionary_page_offset(None)
            .build()
            .map_err(|e| Error::BadColumnChunk {
                path: path.to_path_buf(),
                row_group: rg,
                column: cols[col].column_path().string(),
                range: None,
                reason: e.to_string(),
            })?;
        cols[col] = fixed;
    }
    Ok(Arc::new(builder.set_row_groups(groups).build()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::TimeUnit;

    fn schema(fields: Vec<Field>) -> SchemaRef {
        Arc::new(Schema::new(fields))
    }

    #[test]
    fn arrow_rs_internals_are_rephrased() {
        let r = rephrase("Index out of bound, index = 13, len = 13".into());
        assert!(r.contains("element 13") && r.contains("has 13"), "{r}");
        let r = rephrase(
            "insufficient definition levels read from column - expected {levels_to_read}, got {levels_read}".into(),
        );
        assert!(!r.contains('{') && r.contains("definition levels"), "{r}");
        let r = rephrase(
            "StructArrayReader out of sync in read_records, expected 10 read, got 7".into(),
        );
        assert!(
            r.contains("expected 10 read, got 7") && r.contains("struct"),
            "{r}"
        );
        assert_eq!(
            rephrase("index out of bounds: {}".into()),
            "index out of bounds"
        );
        assert_eq!(rephrase("plain message".into()), "plain message");
    }

    #[test]
    fn schemas_merge_nullability_and_name_the_first_difference() {
        let a = schema(vec![
            Field::new("id", DataType::Int64, false),
            Field::new(
                "l",
                DataType::List(Arc::new(Field::new("item", DataType::Utf8, false))),
                true,
            ),
        ]);
        let b = schema(vec![
            Field::new("id", DataType::Int64, true),
            Field::new(
                "l",
                DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
                false,
            ),
        ]);
        let files = |s: &[&SchemaRef]| -> Vec<(PathBuf, SchemaRef)> {
            s.iter()
                .enumerate()
                .map(|(i, s)| (PathBuf::from(format!("f{i}.parquet")), Arc::clone(s)))
                .collect()
        };
        let m = merge_schemas(&files(&[&a, &b])).unwrap();
        assert!(m.field(0).is_nullable(), "nullable in any file: nullable");
        assert!(m.field(1).is_nullable());
        let ts = |u| schema(vec![Field::new("id", DataType::Timestamp(u, None), false)]);
        let e = merge_schemas(&files(&[
            &ts(TimeUnit::Millisecond),
            &ts(TimeUnit::Microsecond),
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("f0.parquet and f1.parquet: different schemas: field 'id' is Timestamp(ms) in one and Timestamp(µs) in the other"),
            "{e}"
        );
        let c = schema(vec![Field::new("key", DataType::Int64, false)]);
        let e = merge_schemas(&files(&[&a, &c])).unwrap_err().to_string();
        assert!(e.contains("2 fields (id, l) against 1 (key)"), "{e}");
        let d = schema(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("m", DataType::Utf8, true),
        ]);
        let e = merge_schemas(&files(&[&a, &d])).unwrap_err().to_string();
        assert!(e.contains("field 'l' against 'm'"), "{e}");
    }
}
