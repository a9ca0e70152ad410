//! `LIKE` on the device (`pred_like` in `src/decode/gpu/kernels/filter.cu`) run on the host
//! through the CUDA emulation of `tests/emulated/emu`, under AddressSanitizer and UBSan where
//! the compiler has them: random patterns (`%`, `_`, escapes, multi-byte characters) over
//! random strings with nulls, 32- and 64-bit offsets, more than one block, `LIKE` and
//! `NOT LIKE`. Every row's answer is arrow-rs's `like` kernel's, and cuparquet's host matcher
//! agrees with both.

use crate::common;
use crate::emu::*;

use arrow::array::{Array, BooleanArray, StringArray};
use cuparquet::plan::predicate::LikePattern;

const ALPHABET: [&str; 7] = ["a", "b", "é", "日", "%", "_", "ab"];
const PATTERN: [&str; 9] = ["a", "b", "é", "日", "%", "_", "\\%", "\\_", "ab"];

fn pick(r: &mut common::Rng, from: &[&str], max: u64) -> String {
    (0..r.below(max + 1))
        .map(|_| from[r.below(from.len() as u64) as usize])
        .collect()
}

#[test]
fn emulated_like_is_arrows() {
    let Some(emu) = emulator("like") else {
        return;
    };
    let mut r = common::Rng(0x0011_ce5e_ed0f_1ced);
    let mut input = Vec::new();
    let mut expect: Vec<Vec<Option<bool>>> = Vec::new();
    let cases = 120u32;
    input.extend(cases.to_le_bytes());
    for c in 0..cases {
        let wide = c % 2 == 1;
        let negated = c % 3 == 2;
        let text = pick(&mut r, &PATTERN, 6);
        let pattern = LikePattern::new(&text).unwrap();
        let rows = if c % 10 == 0 { 700 } else { 40 };
        let values: Vec<Option<String>> = (0..rows)
            .map(|i| (i % 7 != 3).then(|| pick(&mut r, &ALPHABET, 8)))
            .collect();
        // the oracle: arrow-rs's like kernel
        let array = StringArray::from(values.clone());
        let arrow = arrow::compute::kernels::comparison::like(
            &array,
            &StringArray::new_scalar(text.as_str()),
        )
        .unwrap();
        let want: Vec<Option<bool>> = (0..rows)
            .map(|i| arrow.is_valid(i).then(|| arrow.value(i) != negated))
            .collect();
        for (i, v) in values.iter().enumerate() {
            if let Some(v) = v {
                assert_eq!(
                    pattern.matches(v.as_bytes()) != negated,
                    want[i].unwrap(),
                    "host matcher: {v:?} LIKE {text:?}"
                );
            }
        }
        let (kinds, bytes) = pattern.kernel_form();
        input.extend((wide as u32).to_le_bytes());
        input.extend((negated as u32).to_le_bytes());
        input.extend((kinds.len() as u64).to_le_bytes());
        input.extend(&kinds);
        input.extend(&bytes);
        input.extend((rows as u64).to_le_bytes());
        let mut chars = Vec::new();
        let mut offsets = vec![0i64];
        for v in values.iter().flatten() {
            chars.extend(v.as_bytes());
            offsets.push(chars.len() as i64);
        }
        // null rows: empty
        let mut it = offsets.iter().skip(1);
        let mut all = vec![0i64];
        let mut last = 0;
        for v in &values {
            if v.is_some() {
                last = *it.next().unwrap();
            }
            all.push(last);
        }
        for o in all {
            match wide {
                true => input.extend(o.to_le_bytes()),
                false => input.extend((o as i32).to_le_bytes()),
            }
        }
        input.extend((chars.len() as u64).to_le_bytes());
        input.extend(&chars);
        let mut bits = vec![0u8; rows.div_ceil(8)];
        for (i, v) in values.iter().enumerate() {
            if v.is_some() {
                bits[i / 8] |= 1 << (i % 8);
            }
        }
        input.extend(bits);
        expect.push(want);
    }
    let out = run_emulator(&emu, &input, "like");
    let mut at = 0;
    let mut checked = 0;
    for (c, want) in expect.iter().enumerate() {
        for (i, w) in want.iter().enumerate() {
            let got = out[at + i];
            assert_eq!(got, w.unwrap_or(false) as u8, "case {c}, row {i}");
            checked += 1;
        }
        at += want.len();
    }
    assert_eq!(at, out.len());
    let kept = BooleanArray::from(out.iter().map(|&b| b == 1).collect::<Vec<_>>());
    assert!(kept.true_count() > 0 && kept.false_count() > 0);
    eprintln!("pred_like: {checked} rows of 120 patterns, as arrow-rs's like");
}
