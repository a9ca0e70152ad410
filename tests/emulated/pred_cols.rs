//! A column against a column of the same type on the device (`pred_cols` in
//! `src/decode/gpu/kernels/filter.cu`, `l_commitdate < l_receiptdate`) run on the host through
//! the CUDA emulation of `tests/emulated/emu`: signed and unsigned integers of 1 to 8 bytes,
//! Decimal128, floats with NaN (with and without NaN holding), nulls on either side, every
//! operator, against arrow-rs's comparison kernels.

use std::sync::Arc;

use crate::common;
use crate::emu::*;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Decimal128Array, Float32Array, Float64Array, Int16Array,
    Int32Array, Int64Array, Int8Array, UInt64Array, UInt8Array,
};
use arrow::compute::kernels::cmp;

const OPS: [&str; 6] = ["<", "<=", ">", ">=", "=", "!="];

fn oracle(a: &ArrayRef, b: &ArrayRef, op: usize) -> BooleanArray {
    match op {
        0 => cmp::lt(a, b),
        1 => cmp::lt_eq(a, b),
        2 => cmp::gt(a, b),
        3 => cmp::gt_eq(a, b),
        4 => cmp::eq(a, b),
        _ => cmp::neq(a, b),
    }
    .unwrap()
}

#[test]
fn emulated_column_comparisons_are_arrows() {
    let Some(emu) = emulator("pred_cols") else {
        return;
    };
    let mut r = common::Rng(0x00c0_1c01_5eed_0001);
    let mut input = Vec::new();
    let mut expect: Vec<Vec<bool>> = Vec::new();
    let kinds = 9u32;
    let cases = kinds * 6 * 2;
    input.extend(cases.to_le_bytes());
    for kind in 0..kinds {
        for op in 0..6 {
            for nan_too in [false, true] {
                let rows = if op == 0 { 700 } else { 50 };
                // small ranges, so that equal values are common
                let v = |r: &mut common::Rng| r.below(7) as i64 - 3;
                let null = |r: &mut common::Rng| r.below(9) == 0;
                let side = |r: &mut common::Rng| -> (ArrayRef, Vec<u8>, u32, bool, bool) {
                    let nulls: Vec<bool> = (0..rows).map(|_| null(r)).collect();
                    let vals: Vec<i64> = (0..rows).map(|_| v(r)).collect();
                    let opt = |i: usize| (!nulls[i]).then_some(vals[i]);
                    let (a, bytes, width, sgn, float): (ArrayRef, Vec<u8>, u32, bool, bool) =
                        match kind {
                            0 => (
                                Arc::new(Int8Array::from_iter(
                                    (0..rows).map(|i| opt(i).map(|x| x as i8)),
                                )),
                                vals.iter().map(|&x| x as i8 as u8).collect(),
                                1,
                                true,
                                false,
                            ),
                            1 => (
                                Arc::new(UInt8Array::from_iter(
                                    (0..rows).map(|i| opt(i).map(|x| (x + 250) as u8)),
                                )),
                                vals.iter().map(|&x| (x + 250) as u8).collect(),
                                1,
                                false,
                                false,
                            ),
                            2 => (
                                Arc::new(Int16Array::from_iter(
                                    (0..rows).map(|i| opt(i).map(|x| x as i16 * 1000)),
                                )),
                                vals.iter()
                                    .flat_map(|&x| (x as i16 * 1000).to_le_bytes())
                                    .collect(),
                                2,
                                true,
                                false,
                            ),
                            3 => (
                                Arc::new(Int32Array::from_iter(
                                    (0..rows).map(|i| opt(i).map(|x| x as i32 * 100_000)),
                                )),
                                vals.iter()
                                    .flat_map(|&x| (x as i32 * 100_000).to_le_bytes())
                                    .collect(),
                                4,
                                true,
                                false,
                            ),
                            4 => (
                                Arc::new(Int64Array::from_iter(
                                    (0..rows).map(|i| opt(i).map(|x| x << 40)),
                                )),
                                vals.iter().flat_map(|&x| (x << 40).to_le_bytes()).collect(),
                                8,
                                true,
                                false,
                            ),
                            5 => (
                                Arc::new(UInt64Array::from_iter(
                                    (0..rows)
                                        .map(|i| opt(i).map(|x| (x as u64).wrapping_add(1 << 63))),
                                )),
                                vals.iter()
                                    .flat_map(|&x| (x as u64).wrapping_add(1 << 63).to_le_bytes())
                                    .collect(),
                                8,
                                false,
                                false,
                            ),
                            6 => {
                                let d = |x: i64| (x as i128) << 70 | (x.unsigned_abs() as i128);
                                (
                                    Arc::new(
                                        Decimal128Array::from_iter(
                                            (0..rows).map(|i| opt(i).map(d)),
                                        )
                                        .with_precision_and_scale(38, 2)
                                        .unwrap(),
                                    ),
                                    vals.iter().flat_map(|&x| d(x).to_le_bytes()).collect(),
                                    16,
                                    true,
                                    false,
                                )
                            }
                            7 => {
                                let f = |x: i64| if x == 3 { f32::NAN } else { x as f32 / 2.0 };
                                (
                                    Arc::new(Float32Array::from_iter(
                                        (0..rows).map(|i| opt(i).map(f)),
                                    )),
                                    vals.iter().flat_map(|&x| f(x).to_le_bytes()).collect(),
                                    4,
                                    true,
                                    true,
                                )
                            }
                            _ => {
                                let f = |x: i64| if x == 3 { f64::NAN } else { x as f64 / 2.0 };
                                (
                                    Arc::new(Float64Array::from_iter(
                                        (0..rows).map(|i| opt(i).map(f)),
                                    )),
                                    vals.iter().flat_map(|&x| f(x).to_le_bytes()).collect(),
                                    8,
                                    true,
                                    true,
                                )
                            }
                        };
                    (a, bytes, width, sgn, float)
                };
                let (a, ab, width, sgn, float) = side(&mut r);
                let (b, bb, ..) = side(&mut r);
                // arrow-rs orders NaN above every number (total order); the kernel, as the host
                // filter, compares as IEEE 754 does, NaN holding only with nan_too: the oracle
                // for floats is IEEE here
                let want: Vec<bool> = if float {
                    let x = arrow::compute::cast(&a, &arrow::datatypes::DataType::Float64).unwrap();
                    let y = arrow::compute::cast(&b, &arrow::datatypes::DataType::Float64).unwrap();
                    let (x, y) = (
                        x.as_any().downcast_ref::<Float64Array>().unwrap(),
                        y.as_any().downcast_ref::<Float64Array>().unwrap(),
                    );
                    (0..rows)
                        .map(|i| {
                            if x.is_null(i) || y.is_null(i) {
                                return false;
                            }
                            let (p, q) = (x.value(i), y.value(i));
                            let h = match op {
                                0 => p < q,
                                1 => p <= q,
                                2 => p > q,
                                3 => p >= q,
                                4 => p == q,
                                _ => p != q,
                            };
                            h || (nan_too && (p.is_nan() || q.is_nan()))
                        })
                        .collect()
                } else {
                    let o = oracle(&a, &b, op);
                    (0..rows).map(|i| o.is_valid(i) && o.value(i)).collect()
                };
                let mode = op as u32
                    | width << 4
                    | (sgn as u32) << 12
                    | (float as u32) << 13
                    | (nan_too as u32) << 14;
                input.extend(mode.to_le_bytes());
                input.extend(width.to_le_bytes());
                input.extend((rows as u64).to_le_bytes());
                input.extend(&ab);
                input.extend(&bb);
                for x in [&a, &b] {
                    let mut bits = vec![0u8; rows.div_ceil(8)];
                    for i in 0..rows {
                        if x.is_valid(i) {
                            bits[i / 8] |= 1 << (i % 8);
                        }
                    }
                    input.extend(bits);
                }
                expect.push(want);
            }
        }
    }
    let out = run_emulator(&emu, &input, "pred_cols");
    let mut at = 0;
    let (mut held, mut total) = (0, 0);
    for (c, want) in expect.iter().enumerate() {
        for (i, &w) in want.iter().enumerate() {
            assert_eq!(
                out[at + i],
                w as u8,
                "case {c} ({}), row {i}",
                OPS[(c / 2) % 6]
            );
            held += w as usize;
            total += 1;
        }
        at += want.len();
    }
    assert_eq!(at, out.len());
    assert!(
        held > total / 5 && held < total * 4 / 5,
        "{held} of {total}"
    );
    eprintln!("pred_cols: {total} rows of {cases} cases, as arrow-rs compares");
}
