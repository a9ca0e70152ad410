//! Repetition and definition levels checked against the column's maxima before arrow-rs
//! decodes them: a level above the maximum is a corrupt page (pyarrow: "Malformed levels"),
//! which arrow-rs would read as values (at a maximum of 1, any non-zero RLE value as present),
//! silently misaligning the column.
//!
//! A bit-packed level has the bit width of its maximum, so it can exceed the maximum only
//! where the maximum does not fill that width (2, 4, 5, 6, …). An RLE run's value is stored in
//! whole bytes, so it can exceed any maximum (a run of 160s in a flat optional column). Runs
//! are checked one by one: an RLE run's one value, a bit-packed run's every value where its
//! width is not full. A v1 page's levels lie at the start of its decompressed data, which is
//! decompressed only as far as the levels reach ([`page_prefix`]).

use bytes::Bytes;
use parquet::basic::Compression;

use super::claims::check_page_nulls;
use super::decompress::page_prefix;
use super::page_header::PageEntry;

/// Whether bit-packed levels of maximum `max` can hold out-of-range values (bit width not
/// filled); RLE runs can at every maximum.
pub(crate) fn can_exceed(max: i16) -> bool {
    max > 0 && (max as u32 + 1) & max as u32 != 0
}

fn bit_width(max: i16) -> u32 {
    16 - (max as u16).leading_zeros()
}

fn varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let x = *b.get(*pos)?;
        *pos += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Checks the first `count` levels of an RLE/bit-packed hybrid run sequence against `max`,
/// and that the runs hold `count` levels (pyarrow: "Number of decoded rep / def levels do not
/// match num_values in page header"; arrow-rs reads the levels there are).
pub(crate) fn check_hybrid(data: &[u8], count: usize, max: i16) -> Result<(), String> {
    let w = bit_width(max);
    let packed_can_exceed = can_exceed(max);
    let bytes_per_rle = w.div_ceil(8) as usize;
    let (mut pos, mut seen) = (0usize, 0usize);
    let bad = |v: u64, at: usize| {
        Err(format!(
            "level {v} at level {at} is above the column's maximum {max}"
        ))
    };
    let short = |seen: usize| {
        Err(format!(
            "levels end after {seen} of the page's {count} levels"
        ))
    };
    while seen < count {
        let Some(h) = varint(data, &mut pos) else {
            return short(seen);
        };
        if h & 1 == 0 {
            let Some(b) = data.get(pos..pos + bytes_per_rle) else {
                return short(seen);
            };
            pos += bytes_per_rle;
            let v = b
                .iter()
                .rev()
                .fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
            let n = (h >> 1) as usize;
            if v > max as u64 && n > 0 {
                return bad(v, seen);
            }
            seen = seen.saturating_add(n);
        } else {
            let groups = (h >> 1) as usize;
            let len = groups.saturating_mul(w as usize);
            let Some(b) = data.get(pos..pos.saturating_add(len)) else {
                return short(seen);
            };
            pos += len;
            if packed_can_exceed {
                let n = (groups * 8).min(count - seen);
                for i in 0..n {
                    let bit = i * w as usize;
                    let mut v = 0u64;
                    for k in 0..w as usize {
                        let at = bit + k;
                        v |= u64::from((b[at / 8] >> (at % 8)) & 1) << k;
                    }
                    if v > max as u64 {
                        return bad(v, seen + i);
                    }
                }
            }
            seen = seen.saturating_add(groups * 8);
        }
    }
    Ok(())
}

/// Bytes of a v1 page decompressed at first for its levels; more only where they reach further.
const FIRST_PREFIX: usize = 16 << 10;

/// Checks a data page's levels (v1: length-prefixed RLE runs in front of the values, in the
/// decompressed page; v2: the uncompressed level sections) against the column's maxima.
pub(crate) fn check_page_levels(
    chunk: &Bytes,
    index: usize,
    page: &PageEntry,
    codec: Compression,
    max_rep: i16,
    max_def: i16,
) -> Result<(), String> {
    let h = &page.header;
    if let Some(v2) = &h.data_v2 {
        check_page_nulls(max_def, v2.num_nulls)?;
    }
    if max_rep == 0 && max_def == 0 {
        return Ok(());
    }
    if let Some(v2) = &h.data_v2 {
        let data = chunk.get(page.data()).unwrap_or(&[]);
        let (r, d) = (
            v2.rep_levels_byte_length.max(0) as usize,
            v2.def_levels_byte_length.max(0) as usize,
        );
        let count = v2.num_values.max(0) as usize;
        if max_rep > 0 {
            if let Some(rep) = data.get(..r) {
                check_hybrid(rep, count, max_rep).map_err(|e| format!("repetition {e}"))?;
            }
        }
        if max_def > 0 {
            if let Some(def) = data.get(r..r + d) {
                check_hybrid(def, count, max_def).map_err(|e| format!("definition {e}"))?;
            }
        }
        return Ok(());
    }
    let Some(v1) = &h.data_v1 else {
        return Ok(());
    };
    // RLE (3) levels only: the legacy BIT_PACKED encoding is left to the decoder
    if (max_rep > 0 && v1.rep_level_encoding != 3) || (max_def > 0 && v1.def_level_encoding != 3)
    {
        return Ok(());
    }
    let count = v1.num_values.max(0) as usize;
    // the page's first bytes, decompressed further only where the levels reach past them
    // (`need`: whether `data` holds `end` bytes); a page that does not decompress is the
    // decoder's to report
    let mut data = match page_prefix(chunk, index, page, codec, FIRST_PREFIX) {
        Ok(d) => d,
        Err(_) => return Ok(()),
    };
    let need = |data: &mut Bytes, end: usize| -> bool {
        if data.len() < end && data.len() >= FIRST_PREFIX {
            match page_prefix(chunk, index, page, codec, end) {
                Ok(d) => *data = d,
                Err(_) => return false,
            }
        }
        data.len() >= end
    };
    let mut pos = 0usize;
    for (max, what) in [(max_rep, "repetition"), (max_def, "definition")] {
        if max == 0 {
            continue;
        }
        if !need(&mut data, pos + 4) {
            return Ok(());
        }
        let len = u32::from_le_bytes([data[pos], data[pos + 1], data[pos + 2], data[pos + 3]]) as usize;
        let end = (pos + 4).saturating_add(len);
        if !need(&mut data, end) {
            return Ok(());
        }
        check_hybrid(&data[pos + 4..end], count, max).map_err(|e| format!("{what} {e}"))?;
        pos = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_maxima_short_of_their_width_can_be_exceeded() {
        let can: Vec<i16> = (0..10).filter(|&m| can_exceed(m)).collect();
        assert_eq!(can, vec![2, 4, 5, 6, 8, 9]);
    }

    #[test]
    fn rle_and_bit_packed_runs_are_checked() {
        // RLE: 5 × 2, then 3 × 3 (max 2, width 2)
        assert_eq!(check_hybrid(&[10, 2], 5, 2), Ok(()));
        let e = check_hybrid(&[10, 2, 6, 3], 8, 2).unwrap_err();
        assert!(e.contains("level 3 at level 5"), "{e}");
        // bit-packed: one group of 8 two-bit values 0,1,2,0,1,2,0,1 → 0b10_01_00 ...
        let vals = [0u8, 1, 2, 0, 1, 2, 0, 1];
        let mut packed = [0u8; 2];
        for (i, v) in vals.iter().enumerate() {
            packed[i * 2 / 8] |= v << (i * 2 % 8);
        }
        assert_eq!(check_hybrid(&[3, packed[0], packed[1]], 8, 2), Ok(()));
        packed[1] |= 3 << 6; // the last value becomes 3
        let e = check_hybrid(&[3, packed[0], packed[1]], 8, 2).unwrap_err();
        assert!(e.contains("level 3 at level 7"), "{e}");
        // values past the count (padding of the last group) are not checked
        assert_eq!(check_hybrid(&[3, packed[0], packed[1]], 7, 2), Ok(()));
        // an RLE run's byte passes a full-width maximum (1, 3, 7); bit-packed runs cannot
        let e = check_hybrid(&[8, 1, 20, 160], 14, 1).unwrap_err();
        assert!(e.contains("level 160 at level 4"), "{e}");
        assert_eq!(check_hybrid(&[8, 1, 3, 0xff], 12, 1), Ok(()));
        let e = check_hybrid(&[2, 4], 1, 3).unwrap_err();
        assert!(e.contains("level 4 at level 0"), "{e}");
        assert_eq!(check_hybrid(&[2, 7], 1, 7), Ok(()));
        // runs that end before the page's count of levels
        let e = check_hybrid(&[8, 1], 5, 1).unwrap_err();
        assert!(e.contains("after 4 of the page's 5"), "{e}");
        assert!(check_hybrid(&[3], 8, 1).is_err());
    }
}
