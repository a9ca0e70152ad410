//! The last stage of a wave's decoding: every decimal array the GPU decoded (at any depth of a nested
//! field) checked within its declared precision, as the host path checks its arrays, in one
//! launch (`decimal_check`). A stored value past the precision (a corrupt page, or a file
//! whose schema contradicts its data) is an error naming the field, never an invalid Arrow
//! array. Likewise a map with null keys ([`check_map_keys`]).

use std::path::Path;
use std::sync::Arc;

use arrow::datatypes::{DataType, FieldRef};

use super::kernels::{DecimalCheck, DECIMAL_CHECK, DECODE_FIXED_MODULE};
use super::launch::{u64s, u64s_from_device, upload, upload_table, Const, Mut};
use super::DeviceColumn;
use crate::array::DeviceArray;
use crate::device::Gpu;
use crate::error::{Error, Result};

/// 10^`precision` - 1 as four little-endian 64-bit limbs (precision up to 76, Decimal256's).
pub(crate) fn max_of_precision(precision: u8) -> [u64; 4] {
    let mut v = [1u64, 0, 0, 0];
    for _ in 0..precision.min(77) {
        let mut carry = 0u128;
        for limb in &mut v {
            let x = u128::from(*limb) * 10 + carry;
            *limb = x as u64;
            carry = x >> 64;
        }
    }
    // minus one (v >= 1)
    for limb in &mut v {
        let (x, borrow) = limb.overflowing_sub(1);
        *limb = x;
        if !borrow {
            break;
        }
    }
    v
}

/// The decimal arrays in `a` and its children: (the array, its precision, its value width).
fn decimals<'a>(a: &'a DeviceArray, out: &mut Vec<(&'a DeviceArray, u8, u64)>) {
    let width = match a.data_type {
        DataType::Decimal32(p, _) => Some((p, 4)),
        DataType::Decimal64(p, _) => Some((p, 8)),
        DataType::Decimal128(p, _) => Some((p, 16)),
        DataType::Decimal256(p, _) => Some((p, 32)),
        _ => None,
    };
    if let Some((p, w)) = width {
        out.push((a, p, w));
    }
    for c in &a.children {
        decimals(c, out);
    }
}

/// Checks every decimal array of `cols` (fields named from `fields`) within its precision.
pub(super) fn check_decimals(
    gpu: &Arc<Gpu>,
    path: &Path,
    cols: &[DeviceColumn],
    fields: &[FieldRef],
) -> Result<()> {
    // (field, array, precision, width, values) of every non-empty decimal array
    let mut found = Vec::new();
    for c in cols {
        let mut arrays = Vec::new();
        decimals(&c.array, &mut arrays);
        found.extend(arrays.into_iter().filter_map(|(a, p, w)| {
            let (values, _) = a.buffers.first().filter(|_| a.len > 0)?;
            Some((c.field, a, p, w, values))
        }));
    }
    if found.is_empty() {
        return Ok(());
    }
    let checks: Vec<DecimalCheck> = found
        .iter()
        .map(|&(_, a, p, w, values)| {
            let m = max_of_precision(p);
            DecimalCheck {
                values: values.device_ptr(),
                validity: a.validity.as_ref().map_or(0, |v| v.device_ptr()),
                len: a.len as u64,
                width: w,
                max0: m[0],
                max1: m[1],
                max2: m[2],
                max3: m[3],
            }
        })
        .collect();
    let longest = checks.iter().map(|c| c.len).max().unwrap_or(0);
    let per = longest.div_ceil(256 * 16).clamp(1, 256) as u32;
    let module = DECODE_FIXED_MODULE.load(gpu)?;
    let table = upload_table(gpu, &checks)?;
    let bad = upload(gpu, &u64s(std::iter::repeat_n(u64::MAX, checks.len())))?;
    // SAFETY: `per` blocks per entry of `table`, each reading only its entry's `len` values of
    // `width` bytes (the array's values buffer holds them) and its validity bits (`len` bits,
    // when present), and writing only its entry of `bad`; all live until the waited launch ends.
    unsafe {
        DECIMAL_CHECK.launch(
            gpu,
            &module,
            per * checks.len() as u32,
            256,
            (
                Const::at(table.device_ptr()),
                checks.len() as i32,
                per as i32,
                Mut::at(bad.device_ptr()),
            ),
        )?
    };
    let bad = u64s_from_device(&bad, checks.len())?;
    match bad.iter().position(|&b| b != u64::MAX) {
        None => Ok(()),
        Some(k) => {
            let (field, a, p, _, _) = found[k];
            Err(Error::Decode {
                path: path.to_path_buf(),
                row_group: None,
                column: Some(fields[field].name().clone()),
                reason: format!(
                    "a decimal outside its declared precision: value {} of a batch's {} has \
                     more than {p} digits",
                    bad[k], a.data_type
                ),
            })
        }
    }
}

/// Maps whose keys came out with nulls (a legacy schema's OPTIONAL key field, which arrow-rs
/// reads and pyarrow refuses): an error naming the field, as the host path's, never a map with
/// null keys (invalid Arrow).
pub(super) fn check_map_keys(path: &Path, cols: &[DeviceColumn], fields: &[FieldRef]) -> Result<()> {
    fn null_keys(a: &DeviceArray) -> usize {
        let own = match a.data_type {
            DataType::Map(..) => a
                .children
                .first()
                .and_then(|entries| entries.children.first())
                .map_or(0, |keys| keys.null_count),
            _ => 0,
        };
        own + a.children.iter().map(null_keys).sum::<usize>()
    }
    for c in cols {
        let n = null_keys(&c.array);
        if n > 0 {
            return Err(Error::Decode {
                path: path.to_path_buf(),
                row_group: None,
                column: Some(fields[c.field].name().clone()),
                reason: format!(
                    "{n} null map keys (the schema makes the key field OPTIONAL; map keys must \
                     be present)"
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_value_of_a_precision() {
        assert_eq!(max_of_precision(0), [0, 0, 0, 0]);
        assert_eq!(max_of_precision(1), [9, 0, 0, 0]);
        assert_eq!(max_of_precision(18), [999_999_999_999_999_999, 0, 0, 0]);
        let m38 = 10u128.pow(38) - 1;
        assert_eq!(
            max_of_precision(38),
            [m38 as u64, (m38 >> 64) as u64, 0, 0]
        );
        // 10^76 - 1 fits 253 bits: below 2^255, so a negated i256::MIN stays above it
        let m76 = max_of_precision(76);
        assert!(m76[3] > 0 && m76[3] < 1 << 61, "{m76:?}");
        // agrees with arrow-rs's bound for Decimal256
        let want = arrow::datatypes::i256::from_string(&"9".repeat(76)).unwrap();
        let got = arrow::datatypes::i256::from_le_bytes(
            m76.iter()
                .flat_map(|l| l.to_le_bytes())
                .collect::<Vec<u8>>()
                .try_into()
                .unwrap(),
        );
        assert_eq!(got, want);
    }
}
