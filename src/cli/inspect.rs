//! `cuparquet inspect`: the file's footer — schema, row groups, column chunks — as text or JSON.
//! Types are named as the Parquet format names them (`DECIMAL(15,2)`, `TIMESTAMP(MICROS,
//! UTC)`), and statistics are shown as the values they stand for: strings as text, decimals
//! scaled, dates and timestamps in ISO form, unsigned integers unsigned, other bytes in hex.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use cuparquet::metadata::read_metadata;
use cuparquet::plan::human_bytes;
use cuparquet::plan::predicate::{
    format_date as date, format_decimal as decimal, format_time_of_day as time_of_day,
    format_timestamp as timestamp,
};
use cuparquet::source::ParquetFile;
use cuparquet::Error;
use parquet::basic::{ConvertedType, LogicalType, TimeUnit};
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::statistics::Statistics;
use parquet::schema::types::ColumnDescriptor;

use crate::output::out_err;

/// `inspect` of `sources` (files, directories, globs, URLs): each file's footer in turn; as
/// JSON, one object for one file, `{"files": [...]}` for several.
pub(crate) fn inspect(
    sources: &[std::path::PathBuf],
    remote: &cuparquet::config::RemoteSettings,
    brief: bool,
    json: bool,
) -> Result<(), Error> {
    let paths = cuparquet::source::expand_sources(sources, remote)?;
    let single = sources.len() == 1 && paths.len() == 1 && paths[0] == sources[0];
    let mut objects = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        if i > 0 && !json {
            out!("\n");
        }
        if let Some(v) = inspect_one(path, remote, brief, json)? {
            objects.push(v);
        }
    }
    if json {
        let v = match (single, objects.len()) {
            (true, 1) => objects.pop().unwrap_or_default(),
            _ => serde_json::json!({ "files": objects }),
        };
        let text = serde_json::to_string_pretty(&v).map_err(|e| out_err(&paths[0], e))?;
        out!("{text}\n");
    }
    Ok(())
}

/// One file: printed as text, or returned as JSON.
fn inspect_one(
    path: &Path,
    remote: &cuparquet::config::RemoteSettings,
    brief: bool,
    json: bool,
) -> Result<Option<serde_json::Value>, Error> {
    let f = ParquetFile::open_with(path, remote)?;
    let meta = read_metadata(&f, false)?;
    let md = &meta.metadata;
    let fm = md.file_metadata();
    let mut schema = Vec::new();
    parquet::schema::printer::print_schema(&mut schema, fm.schema());
    let schema = String::from_utf8_lossy(&schema).trim_end().to_string();
    if json {
        let groups: Vec<serde_json::Value> = md
            .row_groups()
            .iter()
            .enumerate()
            .map(|(i, rg)| {
                let mut g = serde_json::json!({
                    "index": i,
                    "rows": rg.num_rows(),
                    "compressed_bytes": rg.compressed_size(),
                    "uncompressed_bytes": rg.total_byte_size(),
                });
                if !brief {
                    g["columns"] = rg.columns().iter().map(chunk_json).collect();
                }
                g
            })
            .collect();
        let v = serde_json::json!({
            "file": path.display().to_string(),
            "bytes": meta.file_len,
            "format_version": fm.version(),
            "created_by": fm.created_by(),
            "rows": fm.num_rows(),
            "footer_bytes": meta.footer_len,
            "schema": schema_json(&fm.schema_descr().root_schema_ptr()),
            "row_groups": groups,
        });
        return Ok(Some(v));
    }
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
    let _ = writeln!(s, "schema:\n{schema}");
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
            let enc: Vec<String> = cc.encodings().map(|e| e.to_string()).collect();
            let _ = writeln!(
                s,
                "  {}: {}{} | {} | {} | {} → {} bytes | offset {}{}",
                cc.column_path().string(),
                cc.column_type(),
                type_name(d).map(|t| format!(" {t}")).unwrap_or_default(),
                enc.join(","),
                cuparquet::plan::codec_name(cc.compression()),
                cc.compressed_size(),
                cc.uncompressed_size(),
                cc.data_page_offset(),
                cc.dictionary_page_offset()
                    .map(|o| format!(" (dictionary {o})"))
                    .unwrap_or_default(),
            );
            let _ = writeln!(
                s,
                "      values {}, statistics {}, page index {}, bloom filter {}",
                cc.num_values(),
                stats_text(cc),
                page_index(cc),
                if cc.bloom_filter_offset().is_some() {
                    "yes"
                } else {
                    "no"
                }
            );
        }
    }
    out!("{s}");
    Ok(None)
}

/// The schema as a tree: each field's name, repetition and types, a group's fields.
fn schema_json(t: &parquet::schema::types::TypePtr) -> serde_json::Value {
    use parquet::schema::types::{ColumnDescriptor, ColumnPath, Type};
    let info = t.get_basic_info();
    let mut v = serde_json::json!({ "name": info.name() });
    if info.has_repetition() {
        v["repetition"] = info.repetition().to_string().into();
    }
    match t.as_ref() {
        Type::PrimitiveType {
            physical_type,
            type_length,
            ..
        } => {
            v["physical_type"] = physical_type.to_string().into();
            if *type_length > 0 {
                v["type_length"] = (*type_length).into();
            }
            let d = ColumnDescriptor::new(Arc::clone(t), 0, 0, ColumnPath::new(Vec::new()));
            if let Some(name) = type_name(&d) {
                v["logical_type"] = name.into();
            }
        }
        Type::GroupType { fields, .. } => {
            if let Some(l) = info.logical_type_ref() {
                v["logical_type"] = format!("{l:?}").to_uppercase().into();
            } else if info.converted_type() != ConvertedType::NONE {
                v["logical_type"] = info.converted_type().to_string().into();
            }
            v["fields"] = fields.iter().map(schema_json).collect();
        }
    }
    v
}

/// A chunk's min and max as typed JSON: numbers as numbers, booleans as booleans, strings as
/// they are; dates, times, timestamps, decimals and UUIDs as their text; other bytes in hex.
fn min_max_json(cc: &ColumnChunkMetaData) -> (serde_json::Value, serde_json::Value) {
    use serde_json::Value as J;
    let Some(st) = cc.statistics() else {
        return (J::Null, J::Null);
    };
    let k = kind(cc.column_descr());
    let (tmin, tmax) = min_max(cc);
    let text = |t: Option<String>| t.map_or(J::Null, J::String);
    let float =
        |f: f64| serde_json::Number::from_f64(f).map_or(J::String(f.to_string()), J::Number);
    let raw = |b: Option<&[u8]>| match b.map(std::str::from_utf8) {
        None => J::Null,
        Some(Ok(t)) => J::String(t.to_string()),
        Some(Err(_)) => J::String(hex(b.unwrap_or_default())),
    };
    let plain = matches!(k, Kind::Plain | Kind::Unsigned);
    match st {
        Statistics::Boolean(s) => (
            s.min_opt().map_or(J::Null, |&b| J::Bool(b)),
            s.max_opt().map_or(J::Null, |&b| J::Bool(b)),
        ),
        Statistics::Int32(s) if plain => {
            let n = |v: &i32| match k {
                Kind::Unsigned => J::from(*v as u32),
                _ => J::from(*v),
            };
            (
                s.min_opt().map_or(J::Null, n),
                s.max_opt().map_or(J::Null, n),
            )
        }
        Statistics::Int64(s) if plain => {
            let n = |v: &i64| match k {
                Kind::Unsigned => J::from(*v as u64),
                _ => J::from(*v),
            };
            (
                s.min_opt().map_or(J::Null, n),
                s.max_opt().map_or(J::Null, n),
            )
        }
        Statistics::Float(s) => (
            s.min_opt().map_or(J::Null, |&f| float(f64::from(f))),
            s.max_opt().map_or(J::Null, |&f| float(f64::from(f))),
        ),
        Statistics::Double(s) => (
            s.min_opt().map_or(J::Null, |&f| float(f)),
            s.max_opt().map_or(J::Null, |&f| float(f)),
        ),
        Statistics::ByteArray(s) if k == Kind::Text => (
            raw(s.min_opt().map(|v| v.data())),
            raw(s.max_opt().map(|v| v.data())),
        ),
        _ => {
            // the text form, without the quotes strings carry there
            let unq = |t: Option<String>| {
                t.map(
                    |t| match t.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
                        Some(inner) => inner.to_string(),
                        None => t,
                    },
                )
            };
            (text(unq(tmin)), text(unq(tmax)))
        }
    }
}

/// Which page-index structures a chunk has.
fn page_index(cc: &ColumnChunkMetaData) -> &'static str {
    match (cc.column_index_offset(), cc.offset_index_offset()) {
        (Some(_), Some(_)) => "column+offset",
        (None, Some(_)) => "offset only",
        (Some(_), None) => "column only",
        (None, None) => "no",
    }
}

/// One column chunk as JSON.
fn chunk_json(cc: &ColumnChunkMetaData) -> serde_json::Value {
    let d = cc.column_descr();
    let (min, max) = min_max_json(cc);
    let st = cc.statistics();
    serde_json::json!({
        "path": cc.column_path().string(),
        "physical_type": cc.column_type().to_string(),
        "logical_type": type_name(d),
        "encodings": cc.encodings().map(|e| e.to_string()).collect::<Vec<_>>(),
        "codec": cuparquet::plan::codec_name(cc.compression()),
        "compressed_bytes": cc.compressed_size(),
        "uncompressed_bytes": cc.uncompressed_size(),
        "data_page_offset": cc.data_page_offset(),
        "dictionary_page_offset": cc.dictionary_page_offset(),
        "values": cc.num_values(),
        "statistics": st.map(|st| serde_json::json!({
            "min": min,
            "max": max,
            "null_count": st.null_count_opt(),
            "distinct_count": st.distinct_count_opt(),
        })),
        "page_index": {
            "column_index": cc.column_index_offset().is_some(),
            "offset_index": cc.offset_index_offset().is_some(),
        },
        "bloom_filter": cc.bloom_filter_offset().is_some(),
    })
}

/// `min …, max …, nulls …` of a chunk's statistics, or `none`.
fn stats_text(cc: &ColumnChunkMetaData) -> String {
    let Some(st) = cc.statistics() else {
        return "none".into();
    };
    let (min, max) = min_max(cc);
    let mut parts = Vec::new();
    if let Some(v) = min {
        parts.push(format!("min {v}"));
    }
    if let Some(v) = max {
        parts.push(format!("max {v}"));
    }
    if let Some(n) = st.null_count_opt() {
        parts.push(format!("nulls {n}"));
    }
    if let Some(n) = st.distinct_count_opt() {
        parts.push(format!("distinct {n}"));
    }
    if parts.is_empty() {
        "empty".into()
    } else {
        parts.join(", ")
    }
}

/// The Parquet type annotation of a leaf as the format names it (`STRING`, `DECIMAL(15,2)`,
/// `TIMESTAMP(MICROS, UTC)`, `INT(8, unsigned)`), from its logical type or, in older files,
/// its converted type.
fn type_name(d: &ColumnDescriptor) -> Option<String> {
    let unit = |u: &TimeUnit| match u {
        TimeUnit::MILLIS => "MILLIS",
        TimeUnit::MICROS => "MICROS",
        TimeUnit::NANOS => "NANOS",
    };
    let zone = |utc: bool| if utc { "UTC" } else { "local" };
    if let Some(l) = d.logical_type_ref() {
        return Some(match l {
            LogicalType::String => "STRING".into(),
            LogicalType::Map => "MAP".into(),
            LogicalType::List => "LIST".into(),
            LogicalType::Enum => "ENUM".into(),
            LogicalType::Decimal(t) => format!("DECIMAL({},{})", t.precision, t.scale),
            LogicalType::Date => "DATE".into(),
            LogicalType::Time(t) => {
                format!("TIME({}, {})", unit(&t.unit), zone(t.is_adjusted_to_u_t_c))
            }
            LogicalType::Timestamp(t) => {
                format!(
                    "TIMESTAMP({}, {})",
                    unit(&t.unit),
                    zone(t.is_adjusted_to_u_t_c)
                )
            }
            LogicalType::Integer(i) => format!(
                "INT({}, {})",
                i.bit_width,
                if i.is_signed { "signed" } else { "unsigned" }
            ),
            LogicalType::Json => "JSON".into(),
            LogicalType::Bson => "BSON".into(),
            LogicalType::Uuid => "UUID".into(),
            LogicalType::Float16 => "FLOAT16".into(),
            LogicalType::Unknown => "UNKNOWN".into(),
            other => format!("{other:?}").to_uppercase(),
        });
    }
    match d.converted_type() {
        ConvertedType::NONE => None,
        ConvertedType::DECIMAL => Some(format!(
            "DECIMAL({},{})",
            d.type_precision(),
            d.type_scale()
        )),
        ConvertedType::UTF8 => Some("STRING".into()),
        c => Some(c.to_string()),
    }
}

/// How a leaf's statistics read as values.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Text,
    Decimal(i32),
    Date,
    /// Time of day; digits of the fraction (3, 6, 9).
    Time(u32),
    /// Digits of the fraction, UTC.
    Timestamp(u32, bool),
    Unsigned,
    Uuid,
    Float16,
    Plain,
}

fn kind(d: &ColumnDescriptor) -> Kind {
    let digits = |u: &TimeUnit| match u {
        TimeUnit::MILLIS => 3,
        TimeUnit::MICROS => 6,
        TimeUnit::NANOS => 9,
    };
    match d.logical_type_ref() {
        Some(LogicalType::String | LogicalType::Enum | LogicalType::Json) => Kind::Text,
        Some(LogicalType::Decimal(t)) => Kind::Decimal(t.scale),
        Some(LogicalType::Date) => Kind::Date,
        Some(LogicalType::Time(t)) => Kind::Time(digits(&t.unit)),
        Some(LogicalType::Timestamp(t)) => Kind::Timestamp(digits(&t.unit), t.is_adjusted_to_u_t_c),
        Some(LogicalType::Integer(i)) if !i.is_signed => Kind::Unsigned,
        Some(LogicalType::Uuid) => Kind::Uuid,
        Some(LogicalType::Float16) => Kind::Float16,
        Some(_) => Kind::Plain,
        None => match d.converted_type() {
            ConvertedType::UTF8 | ConvertedType::ENUM | ConvertedType::JSON => Kind::Text,
            ConvertedType::DECIMAL => Kind::Decimal(d.type_scale()),
            ConvertedType::DATE => Kind::Date,
            ConvertedType::TIME_MILLIS => Kind::Time(3),
            ConvertedType::TIME_MICROS => Kind::Time(6),
            ConvertedType::TIMESTAMP_MILLIS => Kind::Timestamp(3, true),
            ConvertedType::TIMESTAMP_MICROS => Kind::Timestamp(6, true),
            ConvertedType::UINT_8
            | ConvertedType::UINT_16
            | ConvertedType::UINT_32
            | ConvertedType::UINT_64 => Kind::Unsigned,
            _ => Kind::Plain,
        },
    }
}

/// A chunk's min and max as the values they stand for.
fn min_max(cc: &ColumnChunkMetaData) -> (Option<String>, Option<String>) {
    let Some(st) = cc.statistics() else {
        return (None, None);
    };
    let k = kind(cc.column_descr());
    let int = |v: i64, unsigned_bits: u32| match k {
        Kind::Decimal(s) => decimal(v as i128, s),
        Kind::Date => date(v),
        Kind::Time(digits) => time_of_day(v, digits),
        Kind::Timestamp(digits, utc) => timestamp(v, digits, utc),
        Kind::Unsigned if unsigned_bits == 32 => (v as u32).to_string(),
        Kind::Unsigned => (v as u64).to_string(),
        _ => v.to_string(),
    };
    let bytes = |b: &[u8]| match k {
        Kind::Decimal(s) if !b.is_empty() && b.len() <= 16 => decimal(be_i128(b), s),
        Kind::Uuid if b.len() == 16 => uuid(b),
        Kind::Float16 if b.len() == 2 => f16_to_f32(u16::from_le_bytes([b[0], b[1]])).to_string(),
        _ => match std::str::from_utf8(b) {
            Ok(t) if k == Kind::Text || !t.chars().any(char::is_control) => quoted(t),
            _ => hex(b),
        },
    };
    match st {
        Statistics::Boolean(s) => (
            s.min_opt().map(bool::to_string),
            s.max_opt().map(bool::to_string),
        ),
        Statistics::Int32(s) => (
            s.min_opt().map(|&v| int(i64::from(v), 32)),
            s.max_opt().map(|&v| int(i64::from(v), 32)),
        ),
        Statistics::Int64(s) => (
            s.min_opt().map(|&v| int(v, 64)),
            s.max_opt().map(|&v| int(v, 64)),
        ),
        Statistics::Int96(s) => {
            let ts = |v: &parquet::data_type::Int96| timestamp(v.to_nanos(), 9, false);
            (s.min_opt().map(ts), s.max_opt().map(ts))
        }
        Statistics::Float(s) => (
            s.min_opt().map(f32::to_string),
            s.max_opt().map(f32::to_string),
        ),
        Statistics::Double(s) => (
            s.min_opt().map(f64::to_string),
            s.max_opt().map(f64::to_string),
        ),
        Statistics::ByteArray(s) => (
            s.min_opt().map(|v| bytes(v.data())),
            s.max_opt().map(|v| bytes(v.data())),
        ),
        Statistics::FixedLenByteArray(s) => (
            s.min_opt().map(|v| bytes(v.data())),
            s.max_opt().map(|v| bytes(v.data())),
        ),
    }
}

/// A big-endian two's-complement integer of at most 16 bytes.
fn be_i128(b: &[u8]) -> i128 {
    let fill = if b[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut buf = [fill; 16];
    buf[16 - b.len()..].copy_from_slice(b);
    i128::from_be_bytes(buf)
}

fn uuid(b: &[u8]) -> String {
    let h = hex(b);
    let h = &h[2..];
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 + 2 * b.len());
    s.push_str("0x");
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// `'t'`, cut after 64 characters.
fn quoted(t: &str) -> String {
    let mut cut: String = t.chars().take(64).collect();
    if cut.len() < t.len() {
        cut.push('…');
    }
    format!("'{cut}'")
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f32::from(h & 0x3ff);
    match exp {
        0 => sign * frac * 2f32.powi(-24),
        31 if frac == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        e => sign * (1.0 + frac / 1024.0) * 2f32.powi(e - 15),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_what_they_stand_for() {
        assert_eq!(decimal(12345, 2), "123.45");
        assert_eq!(decimal(-5, 3), "-0.005");
        assert_eq!(decimal(7, 0), "7");
        assert_eq!(decimal(7, -2), "700");
        assert_eq!(be_i128(&[0xff, 0x85]), -123);
        assert_eq!(be_i128(&[0x00, 0x7b]), 123);
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(10_957), "2000-01-01");
        assert_eq!(date(-1), "1969-12-31");
        assert_eq!(date(19_723), "2024-01-01");
        assert_eq!(time_of_day(3_723_004, 3), "01:02:03.004");
        assert_eq!(
            timestamp(1_700_000_000_123_456, 6, true),
            "2023-11-14T22:13:20.123456Z"
        );
        assert_eq!(timestamp(-1, 3, false), "1969-12-31T23:59:59.999");
        assert_eq!(hex(&[0, 0xab]), "0x00ab");
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(uuid(&[0x12; 16]), "12121212-1212-1212-1212-121212121212");
        assert_eq!(quoted("abc"), "'abc'");
    }
}
