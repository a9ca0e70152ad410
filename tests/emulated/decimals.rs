//! The decimal precision check (`decimal_check` in `src/decode/gpu/kernels/decode_fixed.cu`) run
//! on the host through the CUDA emulation of `tests/emulated/emu` (see `tests/emulated/kernels.rs`), under
//! AddressSanitizer and UBSan where the compiler has them: every width, negative values, the
//! least Decimal256, null slots holding values past the maximum, several blocks per array.

use crate::emu;

use arrow::datatypes::i256;
use emu::*;

/// One array for the kernel: its values as i256 (stored at `width` bytes each, little-endian
/// two's complement), its precision and its validity.
struct Case {
    width: usize,
    precision: u8,
    values: Vec<i256>,
    valid: Option<Vec<bool>>,
}

impl Case {
    /// The first valid value past the precision: what the kernel must find.
    fn want(&self) -> u64 {
        let max = i256::from_string(&"9".repeat(self.precision as usize)).unwrap();
        let min = max.wrapping_neg();
        self.values
            .iter()
            .enumerate()
            .find(|(i, v)| self.valid.as_ref().is_none_or(|m| m[*i]) && (**v > max || **v < min))
            .map_or(u64::MAX, |(i, _)| i as u64)
    }
}

fn run(emu: &std::path::Path, cases: &[Case], per: i32) -> Vec<u64> {
    let mut input = Vec::new();
    input.extend((cases.len() as u32).to_le_bytes());
    input.extend(per.to_le_bytes());
    for c in cases {
        input.extend((c.values.len() as u64).to_le_bytes());
        input.extend((c.width as u64).to_le_bytes());
        let max = i256::from_string(&"9".repeat(c.precision as usize)).unwrap();
        input.extend(max.to_le_bytes());
        input.extend(u32::from(c.valid.is_some()).to_le_bytes());
        for v in &c.values {
            input.extend(&v.to_le_bytes()[..c.width]);
        }
        if let Some(m) = &c.valid {
            let mut bits = vec![0u8; m.len().div_ceil(8)];
            for (i, &b) in m.iter().enumerate() {
                bits[i / 8] |= u8::from(b) << (i % 8);
            }
            input.extend(bits);
        }
    }
    run_emulator(emu, &input, "decimal_check")
        .chunks_exact(8)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

#[test]
fn emulated_decimal_check_finds_the_first_valid_value_past_the_precision() {
    let Some(emu) = emulator("decimal_check") else {
        return;
    };
    let n = 3000usize;
    let small = |i: usize| i256::from_i128((i as i128 % 9999) - 5000);
    let pow = |p: u32| i256::from_i128(10).wrapping_pow(p);
    let mut cases = Vec::new();
    for (width, precision) in [(4, 4u8), (8, 12), (16, 20), (32, 40), (32, 76)] {
        // all in range, with and without nulls
        cases.push(Case {
            width,
            precision,
            values: (0..n).map(small).collect(),
            valid: None,
        });
        // one value past the maximum in a null slot (ignored), then 10^p and -10^p valid
        let mut values: Vec<i256> = (0..n).map(small).collect();
        let mut valid = vec![true; n];
        let over = if precision < 76 {
            pow(u32::from(precision))
        } else {
            i256::MAX
        };
        values[700] = over;
        valid[700] = false;
        values[1901] = over.wrapping_neg();
        values[2500] = over;
        cases.push(Case {
            width,
            precision,
            values,
            valid: Some(valid),
        });
        // exactly the maximum and the minimum: in range
        let max = pow(u32::from(precision)).wrapping_sub(i256::ONE);
        cases.push(Case {
            width,
            precision,
            values: vec![max, max.wrapping_neg(), i256::ZERO],
            valid: None,
        });
    }
    // the least Decimal256 (its negation overflows back to itself): past any precision
    cases.push(Case {
        width: 32,
        precision: 76,
        values: vec![i256::ZERO, i256::MIN],
        valid: None,
    });
    for per in [1, 3] {
        let got = run(&emu, &cases, per);
        let want: Vec<u64> = cases.iter().map(Case::want).collect();
        assert_eq!(got, want, "{per} blocks per array");
    }
    // the cases the kernel must flag are there
    let want: Vec<u64> = cases.iter().map(Case::want).collect();
    assert!(want.contains(&1901) && want.contains(&1) && want.contains(&u64::MAX));
}
