//! The reference decoder: flat columns from column-chunk bytes to Arrow, on the CPU, the way the
//! GPU kernels do it — page table ([`page_header`](cuparquet::internals::page_header)), decompression
//! ([`decompress`](cuparquet::internals::decompress)), definition levels (RLE/bit-packed hybrid) to a validity
//! bitmap, PLAIN and dictionary values, byte arrays sizes-first, then the conversion
//! [`gpu_plan`](cuparquet::internals::gpu_plan) chose. It is the executable specification the kernels are
//! tested against (equal outputs page by page) and it is itself tested against arrow-rs.
//! Slow by design: clarity over speed. A test oracle, not part of the crate: the tests that use
//! it include it (`mod reference_decoder;`).
#![allow(dead_code, unreachable_pub)]

use arrow::array::{make_array, ArrayData, ArrayRef};
use arrow::buffer::{Buffer, NullBuffer};
use arrow::datatypes::Field;
use bytes::Bytes;
use parquet::basic::Compression;

use cuparquet::internals::decompress::decompress_pages;
use cuparquet::internals::gpu_plan::{Conversion, GpuColumn};
use cuparquet::internals::page_header::{page_table, PageKind};

type R<T> = std::result::Result<T, String>;

/// Reads the RLE/bit-packed hybrid stream `buf` of `bit_width`-bit values until `n` values.
pub fn rle_hybrid(buf: &[u8], bit_width: u32, n: usize) -> R<Vec<u32>> {
    if bit_width > 32 {
        return Err(format!("bit width {bit_width} is over 32"));
    }
    let mut out = Vec::with_capacity(n.min(1 << 20));
    let mut pos = 0usize;
    let byte_width = bit_width.div_ceil(8) as usize;
    while out.len() < n {
        let (header, used) = varint(&buf[pos.min(buf.len())..])
            .ok_or_else(|| format!("a run header is cut short at byte {pos}"))?;
        pos += used;
        if header & 1 == 1 {
            // bit-packed: (header >> 1) groups of 8 values
            let groups = (header >> 1) as usize;
            let bytes = groups
                .checked_mul(bit_width as usize)
                .ok_or("bit-packed run too long")?;
            let run = buf.get(pos..pos + bytes).ok_or_else(|| {
                format!("a {bytes}-byte bit-packed run at byte {pos} runs past the stream")
            })?;
            for k in 0..groups * 8 {
                if out.len() == n {
                    break;
                }
                let bit = k * bit_width as usize;
                let mut v: u64 = 0;
                for b in 0..bit_width as usize {
                    let at = bit + b;
                    v |= u64::from((run[at / 8] >> (at % 8)) & 1) << b;
                }
                out.push(v as u32);
            }
            pos += bytes;
        } else {
            let count = (header >> 1) as usize;
            let raw = buf
                .get(pos..pos + byte_width)
                .ok_or_else(|| format!("an RLE run value at byte {pos} runs past the stream"))?;
            let mut v: u32 = 0;
            for (i, &b) in raw.iter().enumerate() {
                v |= u32::from(b) << (8 * i);
            }
            if bit_width < 32 && v >> bit_width != 0 {
                return Err(format!("RLE value {v} does not fit {bit_width} bits"));
            }
            if count == 0 {
                return Err(format!("an empty RLE run at byte {pos}"));
            }
            let take = count.min(n - out.len());
            out.extend(std::iter::repeat_n(v, take));
            pos += byte_width;
        }
    }
    Ok(out)
}

fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &x) in b.iter().enumerate().take(10) {
        v |= u64::from(x & 0x7f) << (7 * i);
        if x & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

fn bits_for(max: i16) -> u32 {
    16 - (max as u16).leading_zeros()
}

/// Values of a page before conversion: fixed-width bytes or byte strings.
enum Values {
    Fixed(Vec<u8>, usize),
    Bytes(Vec<Vec<u8>>),
    Bools(Vec<bool>),
}

fn plain(col: &GpuColumn, data: &[u8], n: usize) -> R<Values> {
    if col.conversion == Conversion::Boolean {
        if data.len() * 8 < n {
            return Err(format!("{n} PLAIN booleans in {} bytes", data.len()));
        }
        return Ok(Values::Bools(
            (0..n).map(|i| data[i / 8] >> (i % 8) & 1 == 1).collect(),
        ));
    }
    if col.physical == "BYTE_ARRAY" {
        let mut v = Vec::with_capacity(n.min(1 << 20));
        let mut pos = 0usize;
        for i in 0..n {
            let len = data
                .get(pos..pos + 4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                .ok_or_else(|| format!("value {i}: length prefix past the page end"))?;
            pos += 4;
            let s = data
                .get(pos..pos + len)
                .ok_or_else(|| format!("value {i}: {len} bytes past the page end"))?;
            v.push(s.to_vec());
            pos += len;
        }
        return Ok(Values::Bytes(v));
    }
    let w = col.physical_width;
    let need = n * w;
    let bytes = data
        .get(..need)
        .ok_or_else(|| format!("{n} values of {w} bytes in {} bytes", data.len()))?;
    Ok(Values::Fixed(bytes.to_vec(), w))
}

fn gather(dict: &Values, idx: &[u32]) -> R<Values> {
    let bad = |i: u32, len: usize| format!("dictionary index {i} out of {len} entries");
    Ok(match dict {
        Values::Fixed(b, w) => {
            let len = b.len() / w;
            let mut out = Vec::with_capacity(idx.len() * w);
            for &i in idx {
                let i_us = i as usize;
                if i_us >= len {
                    return Err(bad(i, len));
                }
                out.extend_from_slice(&b[i_us * w..(i_us + 1) * w]);
            }
            Values::Fixed(out, *w)
        }
        Values::Bytes(v) => Values::Bytes(
            idx.iter()
                .map(|&i| v.get(i as usize).cloned().ok_or_else(|| bad(i, v.len())))
                .collect::<R<_>>()?,
        ),
        Values::Bools(v) => Values::Bools(
            idx.iter()
                .map(|&i| v.get(i as usize).copied().ok_or_else(|| bad(i, v.len())))
                .collect::<R<_>>()?,
        ),
    })
}

fn append(all: &mut Option<Values>, v: Values) -> R<()> {
    match (all.as_mut(), v) {
        (None, v) => *all = Some(v),
        (Some(Values::Fixed(a, _)), Values::Fixed(b, _)) => a.extend(b),
        (Some(Values::Bytes(a)), Values::Bytes(b)) => a.extend(b),
        (Some(Values::Bools(a)), Values::Bools(b)) => a.extend(b),
        _ => return Err("pages disagree on the value kind".into()),
    }
    Ok(())
}

/// Decodes one flat column chunk to the Arrow `field` type, as the GPU will.
pub fn decode_chunk(
    col: &GpuColumn,
    field: &Field,
    chunk: Bytes,
    codec: Compression,
) -> R<ArrayRef> {
    let table = page_table(&chunk).map_err(|e| e.to_string())?;
    let pages = decompress_pages(&chunk, &table, codec).map_err(|e| e.to_string())?;
    let mut dict: Option<Values> = None;
    let mut valid: Vec<bool> = Vec::new();
    let mut values: Option<Values> = None;
    for p in &pages {
        let h = &table[p.page].header;
        let what = |e: String| format!("page {}: {e}", p.page);
        let data = &p.bytes[..];
        match h.kind {
            PageKind::Dictionary => {
                let d = h.dictionary.ok_or("dictionary page without header")?;
                dict = Some(plain(col, data, d.num_values as usize).map_err(what)?);
            }
            PageKind::DataV1 | PageKind::DataV2 => {
                let (n, encoding, levels_end, def) = if let Some(v1) = h.data_v1 {
                    let n = v1.num_values as usize;
                    if col.max_def_level > 0 {
                        let len = data
                            .get(..4)
                            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                            .ok_or_else(|| what("no level length".into()))?;
                        let lv = data
                            .get(4..4 + len)
                            .ok_or_else(|| what("levels past the page end".into()))?;
                        let def = rle_hybrid(lv, bits_for(col.max_def_level), n).map_err(what)?;
                        (n, v1.encoding, 4 + len, Some(def))
                    } else {
                        (n, v1.encoding, 0, None)
                    }
                } else {
                    let v2 = h.data_v2.ok_or("v2 page without header")?;
                    let n = v2.num_values as usize;
                    let r = v2.rep_levels_byte_length as usize;
                    let d = v2.def_levels_byte_length as usize;
                    let def = if col.max_def_level > 0 {
                        let lv = data
                            .get(r..r + d)
                            .ok_or_else(|| what("levels past the page end".into()))?;
                        Some(rle_hybrid(lv, bits_for(col.max_def_level), n).map_err(what)?)
                    } else {
                        None
                    };
                    (n, v2.encoding, r + d, def)
                };
                let page_valid: Vec<bool> = match def {
                    Some(d) => d.iter().map(|&l| l == col.max_def_level as u32).collect(),
                    None => vec![true; n],
                };
                let present = page_valid.iter().filter(|v| **v).count();
                let vals = data.get(levels_end..).unwrap_or(&[]);
                let v = match encoding {
                    0 => plain(col, vals, present).map_err(what)?,
                    2 | 8 => {
                        let dict = dict
                            .as_ref()
                            .ok_or_else(|| what("no dictionary page".into()))?;
                        let bw =
                            u32::from(*vals.first().ok_or_else(|| what("no bit width".into()))?);
                        let idx = if present == 0 {
                            Vec::new()
                        } else {
                            rle_hybrid(&vals[1..], bw, present).map_err(what)?
                        };
                        gather(dict, &idx).map_err(what)?
                    }
                    3 if col.conversion == Conversion::Boolean => {
                        let len = vals
                            .get(..4)
                            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                            .ok_or_else(|| what("no RLE length".into()))?;
                        let s = vals
                            .get(4..4 + len)
                            .ok_or_else(|| what("RLE past the end".into()))?;
                        Values::Bools(
                            rle_hybrid(s, 1, present)
                                .map_err(what)?
                                .into_iter()
                                .map(|b| b == 1)
                                .collect(),
                        )
                    }
                    e => return Err(what(format!("encoding {e} is not decoded here"))),
                };
                append(&mut values, v)?;
                valid.extend(page_valid);
            }
            PageKind::Index => {}
        }
    }
    if let arrow::datatypes::DataType::Dictionary(_, value) = field.data_type() {
        // a kept dictionary: the values, then dictionary-encoded as arrow-rs types them
        let plain = Field::new(field.name(), value.as_ref().clone(), field.is_nullable());
        let values = build(col, &plain, &valid, values)?;
        return arrow::compute::cast(&values, field.data_type()).map_err(|e| e.to_string());
    }
    build(col, field, &valid, values)
}

/// Spreads `present` values over the rows of `valid` (null slots zero) and converts them.
fn build(col: &GpuColumn, field: &Field, valid: &[bool], values: Option<Values>) -> R<ArrayRef> {
    let rows = valid.len();
    let nulls = (col.max_def_level > 0).then(|| NullBuffer::from(valid.to_vec()));
    let nulls = nulls.filter(|n| n.null_count() > 0);
    let dt = field.data_type().clone();
    let values = values.unwrap_or(match col.conversion {
        Conversion::Boolean => Values::Bools(Vec::new()),
        Conversion::Bytes | Conversion::BigEndianDecimal if col.physical == "BYTE_ARRAY" => {
            Values::Bytes(Vec::new())
        }
        _ => Values::Fixed(Vec::new(), col.physical_width),
    });
    let data = match (col.conversion, values) {
        (Conversion::Boolean, Values::Bools(v)) => {
            let mut it = v.into_iter();
            let bits: Vec<bool> = valid
                .iter()
                .map(|&ok| ok && it.next().unwrap_or(false))
                .collect();
            let buf = arrow::buffer::BooleanBuffer::from(bits);
            ArrayData::builder(dt)
                .len(rows)
                .add_buffer(buf.into_inner())
                .nulls(nulls)
                .build()
        }
        (Conversion::Bytes, Values::Bytes(v)) => {
            let mut it = v.into_iter();
            let mut chars: Vec<u8> = Vec::new();
            let mut offs: Vec<i64> = vec![0];
            for &ok in valid {
                if ok {
                    chars.extend(it.next().ok_or("fewer values than rows")?);
                }
                offs.push(chars.len() as i64);
            }
            let offsets = if col.large_offsets {
                Buffer::from_vec(offs)
            } else {
                let o: Vec<i32> = offs
                    .iter()
                    .map(|&x| {
                        i32::try_from(x).map_err(|_| {
                            "over 2 GiB of characters in a 32-bit offset column".to_string()
                        })
                    })
                    .collect::<R<_>>()?;
                Buffer::from_vec(o)
            };
            if col.utf8 {
                std::str::from_utf8(&chars).map_err(|e| format!("invalid UTF-8: {e}"))?;
            }
            ArrayData::builder(dt)
                .len(rows)
                .add_buffer(offsets)
                .add_buffer(Buffer::from_vec(chars))
                .nulls(nulls)
                .build()
        }
        (conv, vals) => {
            let out_w = col.output_width;
            let mut out = vec![0u8; rows * out_w];
            let mut next = 0usize;
            let mut convert_one = |slot: usize, src: &[u8]| -> R<()> {
                let dst = &mut out[slot * out_w..(slot + 1) * out_w];
                match conv {
                    Conversion::Copy | Conversion::FixedBytes => dst.copy_from_slice(&src[..out_w]),
                    Conversion::Truncate8 | Conversion::Truncate16 => {
                        dst.copy_from_slice(&src[..out_w])
                    }
                    Conversion::Widen64 | Conversion::Widen128 | Conversion::Widen256 => {
                        let neg = src[src.len() - 1] & 0x80 != 0;
                        dst.fill(if neg { 0xff } else { 0 });
                        dst[..src.len()].copy_from_slice(src);
                    }
                    Conversion::DaysToMillis => {
                        let d = i32::from_le_bytes([src[0], src[1], src[2], src[3]]) as i64;
                        dst.copy_from_slice(&(d * 86_400_000).to_le_bytes());
                    }
                    Conversion::Int96ToNanos => {
                        let nanos = i64::from_le_bytes(src[..8].try_into().map_err(|_| "int96")?);
                        let day = i32::from_le_bytes(src[8..12].try_into().map_err(|_| "int96")?);
                        let v = (i64::from(day) - 2_440_588)
                            .wrapping_mul(86_400_000_000_000)
                            .wrapping_add(nanos);
                        dst.copy_from_slice(&v.to_le_bytes());
                    }
                    Conversion::BigEndianDecimal => {
                        if src.len() > out_w {
                            return Err(format!(
                                "a {}-byte decimal does not fit {out_w} bytes",
                                src.len()
                            ));
                        }
                        if src.is_empty() {
                            dst.fill(0);
                        } else {
                            let neg = src[0] & 0x80 != 0;
                            dst.fill(if neg { 0xff } else { 0 });
                            for (k, &b) in src.iter().rev().enumerate() {
                                dst[k] = b;
                            }
                        }
                    }
                    Conversion::Boolean | Conversion::Bytes => {
                        return Err("unexpected conversion".into())
                    }
                }
                Ok(())
            };
            match vals {
                Values::Fixed(b, w) => {
                    for (slot, &ok) in valid.iter().enumerate() {
                        if ok {
                            let src = b
                                .get(next * w..(next + 1) * w)
                                .ok_or("fewer values than rows")?;
                            convert_one(slot, src)?;
                            next += 1;
                        }
                    }
                }
                Values::Bytes(v) => {
                    for (slot, &ok) in valid.iter().enumerate() {
                        if ok {
                            let src = v.get(next).ok_or("fewer values than rows")?;
                            convert_one(slot, src)?;
                            next += 1;
                        }
                    }
                }
                Values::Bools(_) => return Err("booleans for a fixed-width column".into()),
            }
            ArrayData::builder(dt)
                .len(rows)
                .nulls(nulls)
                .add_buffer(Buffer::from_slice_ref(&out))
                .build()
        }
    };
    data.map(make_array).map_err(|e| e.to_string())
}
