//! The views of string and binary columns (`make_views` in
//! `src/decode/gpu/kernels/decode_bytes.cu`, what `with_string_views` builds on a device) run on
//! the host through the CUDA emulation of `tests/emulated/emu` (see `tests/emulated/kernels.rs`), under
//! AddressSanitizer and UBSan where the compiler has them: 32- and 64-bit offsets, values of 0
//! to 40 bytes (inline up to 12), nulls, offsets that do not start at 0, more than one block.
//! Every view is the one Arrow's layout defines, and arrow-rs takes the views with the values
//! as their data buffer (validating them) as the same strings.

use crate::common;
use crate::emu;

use arrow::array::{Array, BinaryViewArray, StringViewArray};
use arrow::buffer::{Buffer, NullBuffer, ScalarBuffer};
use emu::*;

/// One column for the kernel.
struct Case {
    wide: bool,
    offsets: Vec<i64>,
    chars: Vec<u8>,
    valid: Option<Vec<bool>>,
}

impl Case {
    fn rows(&self) -> usize {
        self.offsets.len() - 1
    }

    fn valid(&self, i: usize) -> bool {
        self.valid.as_ref().is_none_or(|v| v[i])
    }

    /// Arrow's view of row `i`: zeros for a null row.
    fn view(&self, i: usize) -> u128 {
        if !self.valid(i) {
            return 0;
        }
        let (a, b) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
        let s = &self.chars[a..b];
        let mut v = [0u8; 16];
        v[..4].copy_from_slice(&(s.len() as u32).to_le_bytes());
        if s.len() <= 12 {
            v[4..4 + s.len()].copy_from_slice(s);
        } else {
            v[4..8].copy_from_slice(&s[..4]);
            v[12..].copy_from_slice(&(a as u32).to_le_bytes());
        }
        u128::from_le_bytes(v)
    }

    fn input(&self, out: &mut Vec<u8>) {
        out.extend((self.wide as u32).to_le_bytes());
        out.extend((self.rows() as u64).to_le_bytes());
        out.extend((self.valid.is_some() as u32).to_le_bytes());
        for &o in &self.offsets {
            match self.wide {
                true => out.extend(o.to_le_bytes()),
                false => out.extend((o as i32).to_le_bytes()),
            }
        }
        out.extend((self.chars.len() as u64).to_le_bytes());
        out.extend(&self.chars);
        if let Some(v) = &self.valid {
            let mut bits = vec![0u8; v.len().div_ceil(8)];
            for (i, _) in v.iter().enumerate().filter(|(_, k)| **k) {
                bits[i / 8] |= 1 << (i % 8);
            }
            out.extend(bits);
        }
    }
}

/// `rows` values of 0 to 40 bytes (a null every `null_every` rows, when given), after `lead`
/// bytes that no row holds.
fn case(
    wide: bool,
    rows: usize,
    lead: usize,
    null_every: Option<usize>,
    r: &mut common::Rng,
) -> Case {
    let mut chars: Vec<u8> = (0..lead).map(|_| b'#').collect();
    let mut offsets = vec![lead as i64];
    let valid: Option<Vec<bool>> = null_every.map(|k| (0..rows).map(|i| i % k != 1).collect());
    for i in 0..rows {
        if valid.as_ref().is_none_or(|v| v[i]) {
            let n = r.below(41) as usize;
            chars.extend((0..n).map(|_| b'a' + r.below(26) as u8));
        }
        offsets.push(chars.len() as i64);
    }
    Case {
        wide,
        offsets,
        chars,
        valid,
    }
}

#[test]
fn emulated_views_are_arrows() {
    let Some(emu) = emulator("views") else {
        return;
    };
    let mut r = common::Rng(0x7e57_1e55_0bad_f00d);
    let cases = vec![
        case(false, 1, 0, None, &mut r),
        case(false, 700, 0, Some(5), &mut r),
        case(true, 700, 0, Some(3), &mut r),
        case(false, 1000, 17, None, &mut r),
        case(true, 300, 5, Some(2), &mut r),
        Case {
            wide: false,
            offsets: vec![0, 0, 12, 13, 25],
            chars: b"abcdefghijklmnopqrstuvwxy".to_vec(),
            valid: None,
        },
    ];
    let mut input = (cases.len() as u32).to_le_bytes().to_vec();
    for c in &cases {
        c.input(&mut input);
    }
    let out = run_emulator(&emu, &input, "views");
    let mut at = 0;
    for (k, c) in cases.iter().enumerate() {
        let n = c.rows();
        let bytes = &out[at..at + 16 * n];
        at += 16 * n;
        let views: Vec<u128> = bytes
            .chunks_exact(16)
            .map(|b| u128::from_le_bytes(b.try_into().unwrap()))
            .collect();
        for (i, &v) in views.iter().enumerate() {
            assert_eq!(v, c.view(i), "case {k}, row {i}");
        }
        // arrow-rs takes them (validating each view against the data buffer)
        let nulls = c.valid.clone().map(NullBuffer::from);
        let data = Buffer::from_vec(c.chars.clone());
        let sv = StringViewArray::try_new(
            ScalarBuffer::from(views.clone()),
            vec![data.clone()],
            nulls.clone(),
        )
        .unwrap();
        let bv = BinaryViewArray::try_new(ScalarBuffer::from(views), vec![data], nulls).unwrap();
        for i in 0..n {
            assert_eq!(sv.is_valid(i), c.valid(i));
            if c.valid(i) {
                let (a, b) = (c.offsets[i] as usize, c.offsets[i + 1] as usize);
                assert_eq!(sv.value(i).as_bytes(), &c.chars[a..b], "case {k}, row {i}");
                assert_eq!(bv.value(i), &c.chars[a..b], "case {k}, row {i}");
            }
        }
    }
    assert_eq!(at, out.len());
}
