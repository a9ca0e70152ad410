//! Which projected columns the GPU decoder takes, how, and why the others decode on the host.
//!
//! Pure: from the footer (physical types, levels, the encodings each chunk lists) and the Arrow
//! schema arrow-rs derives for the projection, decide per top-level field. The conversions are
//! exactly arrow-rs's (`parquet::arrow::array_reader::primitive_array`): truncating casts to
//! 8/16-bit integers, reinterpretation for unsigned, dates, times, durations and timestamps,
//! sign extension to 64/128/256-bit decimals, days × 86,400,000 for Date64 from INT32 —
//! so the device result can equal arrow-rs's read bit for bit.

use arrow::datatypes::{DataType, Field, TimeUnit};
use parquet::basic::{Encoding, Type as PhysicalType};
use parquet::file::metadata::ParquetMetaData;

mod nested;
pub use nested::{NestedColumn, Shape};

/// How stored values become Arrow values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Conversion {
    /// Bytes copied as stored (same width): INT32→32-bit types, INT64→64-bit types, FLOAT,
    /// DOUBLE.
    Copy,
    /// INT32 truncated to 8 bits (`as i8` / `as u8`).
    Truncate8,
    /// INT32 truncated to 16 bits.
    Truncate16,
    /// INT32 sign-extended to 64 bits (timestamps and Decimal64 from INT32).
    Widen64,
    /// INT32 days × 86,400,000 as 64-bit milliseconds (Date64 from INT32).
    DaysToMillis,
    /// INT32/INT64 sign-extended to 128 bits (Decimal128).
    Widen128,
    /// INT32/INT64 sign-extended to 256 bits (Decimal256).
    Widen256,
    /// Bit-packed (PLAIN) or RLE booleans to an Arrow bitmap.
    Boolean,
    /// INT96 (nanoseconds of day + Julian day) to Timestamp(ns).
    Int96ToNanos,
    /// FIXED_LEN_BYTE_ARRAY copied (FixedSizeBinary, Float16).
    FixedBytes,
    /// Big-endian two's-complement bytes (FLBA or BYTE_ARRAY) to a little-endian decimal of
    /// the output width.
    BigEndianDecimal,
    /// BYTE_ARRAY to offsets (32- or 64-bit) and characters; Utf8 is validated.
    Bytes,
}

/// A column the GPU decodes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GpuColumn {
    /// Index of the top-level field in the projected schema.
    pub field: usize,
    /// Leaf column index in the file schema.
    pub leaf: usize,
    /// Stored type.
    pub physical: String,
    /// Stored type, as the parquet crate names it.
    #[serde(skip)]
    pub physical_type: PhysicalType,
    /// Bytes per stored value (FLBA: its length; BYTE_ARRAY: 0).
    pub physical_width: usize,
    /// Arrow output type.
    pub arrow: String,
    /// Bytes per output value (0 for variable-length and boolean outputs).
    pub output_width: usize,
    /// The conversion.
    pub conversion: Conversion,
    /// 64-bit offsets (LargeUtf8 / LargeBinary).
    pub large_offsets: bool,
    /// Utf8 output: the bytes are validated as UTF-8, as arrow-rs does.
    pub utf8: bool,
    /// Maximum definition level (0: required, no validity bitmap).
    pub max_def_level: i16,
    /// Maximum repetition level (0 unless inside a list or map).
    pub max_rep_level: i16,
    /// A leaf of a nested field ([`NestedColumn`]): decoded one value slot per level entry
    /// (its pages' `num_values`), not per row, then gathered into the nested arrays.
    pub nested: bool,
    /// The Arrow type of the decoded values (the field's, or the leaf's in a nested field).
    #[serde(skip)]
    pub data_type: DataType,
    /// Decoded by the byte-array kernels (each value's bytes found as a string's are), then
    /// written at `output_width`: decimals stored as BYTE_ARRAY, and FIXED_LEN_BYTE_ARRAY
    /// columns with DELTA_BYTE_ARRAY pages.
    pub via_bytes: bool,
    /// A kept dictionary (`data_type` is `Dictionary(K, Utf8 | LargeUtf8 | Binary |
    /// LargeBinary)`, K an integer type): each row's key and its chunks' dictionaries are
    /// built on the device instead of its value. Every data page must be dictionary-encoded,
    /// and a batch's dictionaries must fit its keys; a wave where they do not leaves the field
    /// to the host.
    pub keys: bool,
}

impl GpuColumn {
    /// A kept dictionary's key and value types.
    pub fn dictionary(&self) -> Option<(&DataType, &DataType)> {
        match &self.data_type {
            DataType::Dictionary(k, v) if self.keys => Some((k.as_ref(), v.as_ref())),
            _ => None,
        }
    }
}

/// Where a projected field is decoded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Placement {
    /// On the GPU.
    Gpu(GpuColumn),
    /// A nested field (struct, list, map) whose leaves all decode on the GPU, its offsets and
    /// validity built there from the leaves' levels.
    Nested(NestedColumn),
    /// On the host (arrow-rs), then uploaded; the reason is reported.
    Host {
        /// Index of the top-level field.
        field: usize,
        /// Why.
        reason: String,
    },
}

/// Encodings the GPU decodes (values and levels) for a stored type: PLAIN, dictionaries and
/// RLE for every type; DELTA_BINARY_PACKED for INT32/INT64; BYTE_STREAM_SPLIT for INT32, INT64,
/// FLOAT, DOUBLE and FIXED_LEN_BYTE_ARRAY; DELTA_LENGTH_BYTE_ARRAY for BYTE_ARRAY;
/// DELTA_BYTE_ARRAY for BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY (the pairs arrow-rs decodes; it refuses the others, and so does the host path
/// they are left to). BIT_PACKED is listed by many writers for level streams that do not exist
/// (maximum level 0); a page that really stores BIT_PACKED levels is caught by the page-header
/// check at decode time.
fn gpu_encoding(e: Encoding, physical: PhysicalType) -> bool {
    use PhysicalType as T;
    #[allow(deprecated)]
    let bit_packed = e == Encoding::BIT_PACKED;
    bit_packed
        || match e {
            Encoding::PLAIN
            | Encoding::PLAIN_DICTIONARY
            | Encoding::RLE_DICTIONARY
            | Encoding::RLE => true,
            Encoding::DELTA_BINARY_PACKED => matches!(physical, T::INT32 | T::INT64),
            Encoding::BYTE_STREAM_SPLIT => matches!(
                physical,
                T::INT32 | T::INT64 | T::FLOAT | T::DOUBLE | T::FIXED_LEN_BYTE_ARRAY
            ),
            Encoding::DELTA_LENGTH_BYTE_ARRAY => physical == T::BYTE_ARRAY,
            Encoding::DELTA_BYTE_ARRAY => {
                matches!(physical, T::BYTE_ARRAY | T::FIXED_LEN_BYTE_ARRAY)
            }
            _ => false,
        }
}

fn host(field: usize, reason: impl Into<String>) -> Placement {
    Placement::Host {
        field,
        reason: reason.into(),
    }
}

/// The leaves (of `leaves`, the projection's leaf columns in order) of each field of `fields`.
pub fn field_leaves(
    metadata: &ParquetMetaData,
    fields: &[std::sync::Arc<Field>],
    leaves: &[usize],
) -> Vec<Vec<usize>> {
    let schema = metadata.file_metadata().schema_descr();
    let mut next = 0usize;
    fields
        .iter()
        .map(|field| {
            let mine: Vec<usize> = leaves[next..]
                .iter()
                .copied()
                .take_while(|&l| {
                    schema
                        .column(l)
                        .path()
                        .parts()
                        .first()
                        .is_some_and(|r| r == field.name())
                })
                .collect();
            next += mine.len();
            mine
        })
        .collect()
}

/// Decides, for every field of the projected Arrow schema `fields` (whose leaves, in order,
/// are `leaves`), where it is decoded, looking at the chunks of `row_groups`.
pub fn place_columns(
    metadata: &ParquetMetaData,
    fields: &[std::sync::Arc<Field>],
    leaves: &[usize],
    row_groups: &[usize],
) -> Vec<Placement> {
    let schema = metadata.file_metadata().schema_descr();
    let mut out = Vec::with_capacity(fields.len());
    for ((fi, field), mine) in fields
        .iter()
        .enumerate()
        .zip(field_leaves(metadata, fields, leaves))
    {
        let flat = mine.len() == 1
            && schema.column(mine[0]).path().parts().len() == 1
            && schema.column(mine[0]).max_rep_level() == 0;
        if !flat {
            out.push(
                match nested::place_nested(metadata, row_groups, fi, field, &mine) {
                    Ok(n) => Placement::Nested(n),
                    Err(reason) => host(fi, reason),
                },
            );
            continue;
        }
        out.push(
            match gpu_leaf(metadata, row_groups, fi, field.name(), field.data_type(), mine[0]) {
                Ok(c) => Placement::Gpu(c),
                Err(reason) => host(fi, reason),
            },
        );
    }
    out
}

/// How the GPU decodes leaf column `leaf` as `data_type` (field `fi`, named `name` in
/// reasons), or why it does not.
fn gpu_leaf(
    metadata: &ParquetMetaData,
    row_groups: &[usize],
    fi: usize,
    name: &str,
    data_type: &DataType,
    leaf: usize,
) -> Result<GpuColumn, String> {
    let schema = metadata.file_metadata().schema_descr();
    let col = schema.column(leaf);
    let mut bad: Vec<String> = Vec::new();
    for &rg in row_groups {
        if let Some(c) = metadata.row_groups().get(rg).map(|r| r.column(leaf)) {
            for e in c.encodings() {
                if !gpu_encoding(e, col.physical_type()) && !bad.contains(&format!("{e}")) {
                    bad.push(format!("{e}"));
                }
            }
        }
    }
    if !bad.is_empty() {
        return Err(format!(
            "'{name}' uses {}: decoded on the host until the GPU decodes it",
            bad.join(", ")
        ));
    }
    let physical = col.physical_type();
    let width = match physical {
        PhysicalType::FIXED_LEN_BYTE_ARRAY => col.type_length().max(0) as usize,
        _ => 0,
    };
    // FIXED_LEN_BYTE_ARRAY pages in DELTA_BYTE_ARRAY are put together as strings are;
    // a column that mixes them with PLAIN or dictionary pages is left to the host
    let listed = |want: &dyn Fn(Encoding) -> bool| {
        row_groups.iter().any(|&rg| {
            metadata
                .row_groups()
                .get(rg)
                .is_some_and(|r| r.column(leaf).encodings().any(want))
        })
    };
    let delta_flba = physical == PhysicalType::FIXED_LEN_BYTE_ARRAY
        && listed(&|e| e == Encoding::DELTA_BYTE_ARRAY);
    #[allow(deprecated)]
    let levels_only = |e: Encoding| matches!(e, Encoding::RLE | Encoding::BIT_PACKED);
    if delta_flba && listed(&|e| e != Encoding::DELTA_BYTE_ARRAY && !levels_only(e)) {
        return Err(format!(
            "'{name}': FIXED_LEN_BYTE_ARRAY in DELTA_BYTE_ARRAY and other encodings decodes on \
             the host"
        ));
    }
    // kept dictionaries: integer keys and the chunks' dictionaries, for flat string and binary
    // columns (a wave's decoding checks that every page is dictionary-encoded)
    let keys = matches!(data_type, DataType::Dictionary(..));
    let value_type = match data_type {
        DataType::Dictionary(key, value) => {
            let flat = col.path().parts().len() == 1 && col.max_rep_level() == 0;
            let bytes = matches!(
                value.as_ref(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary
            );
            if key_width(key).is_none() || !bytes || physical != PhysicalType::BYTE_ARRAY || !flat
            {
                return Err(format!(
                    "'{name}': Arrow {data_type} from {physical} keeps its dictionary: decoded \
                     on the host (the GPU keeps integer-keyed dictionaries of flat string and \
                     binary columns)"
                ));
            }
            if listed(&|e| {
                matches!(
                    e,
                    Encoding::DELTA_LENGTH_BYTE_ARRAY | Encoding::DELTA_BYTE_ARRAY
                )
            }) {
                return Err(format!(
                    "'{name}' keeps its dictionary, but some of its pages are DELTA-encoded: \
                     decoded on the host, as arrow-rs reads it"
                ));
            }
            value.as_ref()
        }
        other => other,
    };
    match conversion(physical, width, value_type) {
        // arrow-rs reads BYTE_ARRAY decimals as Decimal128 and Decimal256 only
        Some((Conversion::BigEndianDecimal, w)) if physical == PhysicalType::BYTE_ARRAY && w < 16 => {
            Err(format!(
                "'{name}': Arrow {data_type} from BYTE_ARRAY decimals decodes on the host"
            ))
        }
        Some((conversion, output_width)) => Ok(GpuColumn {
            field: fi,
            leaf,
            physical: physical.to_string(),
            physical_type: physical,
            physical_width: match physical {
                PhysicalType::INT32 | PhysicalType::FLOAT => 4,
                PhysicalType::INT64 | PhysicalType::DOUBLE => 8,
                PhysicalType::INT96 => 12,
                _ => width,
            },
            arrow: data_type.to_string(),
            data_type: data_type.clone(),
            output_width,
            conversion,
            large_offsets: matches!(value_type, DataType::LargeUtf8 | DataType::LargeBinary),
            utf8: matches!(value_type, DataType::Utf8 | DataType::LargeUtf8),
            max_def_level: col.max_def_level(),
            max_rep_level: col.max_rep_level(),
            nested: col.path().parts().len() > 1 || col.max_rep_level() > 0,
            via_bytes: (conversion == Conversion::BigEndianDecimal
                && physical == PhysicalType::BYTE_ARRAY)
                || delta_flba,
            keys,
        }),
        None => Err(format!(
            "'{name}': Arrow {data_type} from {physical} decodes on the host"
        )),
    }
}

/// The bytes per key of a kept dictionary's key type (`Dictionary(key, _)`), `None` for a type
/// that is not an integer.
pub fn key_width(key: &DataType) -> Option<usize> {
    match key {
        DataType::Int8 | DataType::UInt8 => Some(1),
        DataType::Int16 | DataType::UInt16 => Some(2),
        DataType::Int32 | DataType::UInt32 => Some(4),
        DataType::Int64 | DataType::UInt64 => Some(8),
        _ => None,
    }
}

/// The most entries a kept dictionary whose keys are `key` can index (the GPU's keys stay
/// below 2^31).
pub fn key_capacity(key: &DataType) -> u64 {
    let max = match key {
        DataType::Int8 => i8::MAX as u64,
        DataType::UInt8 => u8::MAX as u64,
        DataType::Int16 => i16::MAX as u64,
        DataType::UInt16 => u16::MAX as u64,
        _ => i32::MAX as u64,
    };
    max + 1
}

/// The conversion from a stored type to an Arrow type, and the output's bytes per value;
/// `None` where the GPU does not produce that pair (yet).
pub fn conversion(
    physical: PhysicalType,
    flba_width: usize,
    arrow: &DataType,
) -> Option<(Conversion, usize)> {
    use Conversion as C;
    use DataType as D;
    Some(match (physical, arrow) {
        (PhysicalType::BOOLEAN, D::Boolean) => (C::Boolean, 0),
        (PhysicalType::INT32, D::Int8 | D::UInt8) => (C::Truncate8, 1),
        (PhysicalType::INT32, D::Int16 | D::UInt16) => (C::Truncate16, 2),
        (
            PhysicalType::INT32,
            D::Int32
            | D::UInt32
            | D::Date32
            | D::Time32(TimeUnit::Second | TimeUnit::Millisecond)
            | D::Decimal32(..),
        ) => (C::Copy, 4),
        (PhysicalType::INT32, D::Timestamp(..) | D::Decimal64(..)) => (C::Widen64, 8),
        (PhysicalType::INT32, D::Date64) => (C::DaysToMillis, 8),
        (PhysicalType::INT32 | PhysicalType::INT64, D::Decimal128(..)) => (C::Widen128, 16),
        (PhysicalType::INT32 | PhysicalType::INT64, D::Decimal256(..)) => (C::Widen256, 32),
        (
            PhysicalType::INT64,
            D::Int64
            | D::UInt64
            | D::Date64
            | D::Time64(TimeUnit::Microsecond | TimeUnit::Nanosecond)
            | D::Duration(_)
            | D::Timestamp(..)
            | D::Decimal64(..),
        ) => (C::Copy, 8),
        (PhysicalType::FLOAT, D::Float32) => (C::Copy, 4),
        (PhysicalType::DOUBLE, D::Float64) => (C::Copy, 8),
        (PhysicalType::INT96, D::Timestamp(TimeUnit::Nanosecond, _)) => (C::Int96ToNanos, 8),
        (PhysicalType::FIXED_LEN_BYTE_ARRAY, D::FixedSizeBinary(n))
            if *n >= 0 && *n as usize == flba_width =>
        {
            (C::FixedBytes, flba_width)
        }
        (PhysicalType::FIXED_LEN_BYTE_ARRAY, D::Float16) if flba_width == 2 => (C::FixedBytes, 2),
        (PhysicalType::FIXED_LEN_BYTE_ARRAY | PhysicalType::BYTE_ARRAY, d) => match d {
            D::Decimal32(..) => (C::BigEndianDecimal, 4),
            D::Decimal64(..) => (C::BigEndianDecimal, 8),
            D::Decimal128(..) => (C::BigEndianDecimal, 16),
            D::Decimal256(..) => (C::BigEndianDecimal, 32),
            D::Utf8 | D::Binary | D::LargeUtf8 | D::LargeBinary
                if physical == PhysicalType::BYTE_ARRAY =>
            {
                (C::Bytes, 0)
            }
            _ => return None,
        },
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_follow_arrow_rs() {
        use DataType as D;
        let c = |p, w, d: D| conversion(p, w, &d);
        assert_eq!(
            c(PhysicalType::INT32, 0, D::Int8),
            Some((Conversion::Truncate8, 1))
        );
        assert_eq!(
            c(PhysicalType::INT32, 0, D::UInt32),
            Some((Conversion::Copy, 4))
        );
        assert_eq!(
            c(PhysicalType::INT32, 0, D::Date64),
            Some((Conversion::DaysToMillis, 8))
        );
        assert_eq!(
            c(PhysicalType::INT32, 0, D::Decimal128(9, 2)),
            Some((Conversion::Widen128, 16))
        );
        assert_eq!(
            c(
                PhysicalType::INT64,
                0,
                D::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
            ),
            Some((Conversion::Copy, 8))
        );
        assert_eq!(
            c(
                PhysicalType::INT96,
                0,
                D::Timestamp(TimeUnit::Nanosecond, None)
            ),
            Some((Conversion::Int96ToNanos, 8))
        );
        assert_eq!(
            c(
                PhysicalType::INT96,
                0,
                D::Timestamp(TimeUnit::Millisecond, None)
            ),
            None
        );
        assert_eq!(
            c(PhysicalType::FIXED_LEN_BYTE_ARRAY, 16, D::Decimal128(38, 0)),
            Some((Conversion::BigEndianDecimal, 16))
        );
        assert_eq!(
            c(PhysicalType::FIXED_LEN_BYTE_ARRAY, 2, D::Float16),
            Some((Conversion::FixedBytes, 2))
        );
        assert_eq!(
            c(PhysicalType::FIXED_LEN_BYTE_ARRAY, 3, D::FixedSizeBinary(4)),
            None
        );
        assert_eq!(
            c(PhysicalType::BYTE_ARRAY, 0, D::LargeUtf8),
            Some((Conversion::Bytes, 0))
        );
        assert_eq!(c(PhysicalType::BYTE_ARRAY, 0, D::Utf8View), None);
        assert_eq!(
            c(
                PhysicalType::BYTE_ARRAY,
                0,
                D::Dictionary(Box::new(D::Int32), Box::new(D::Utf8))
            ),
            None
        );
    }
}
