//! Partial aggregation on the device (`src/compute/kernels/aggregate.cu`) run on the host
//! through the CUDA emulation of `tests/emulated/emu`, as `compute::Aggregator` drives it, each
//! batch's groups checked against a GROUP BY computed here: integer, boolean, string (i32 and
//! i64 offsets, views) keys with nulls as a group of their own; COUNT(*), COUNT, exact 128-bit
//! SUMs of signed, unsigned and Decimal128 values, float SUMs with NaN and infinities, MIN/MAX
//! of integers and of floats by total order (-0 < +0, NaN largest), arithmetic programs; one
//! group, no row, an argument null in every row, and a table grown from 16 slots to hold
//! 20,000 groups.

use std::collections::HashMap;

use crate::common;
use crate::emu::*;

// aggregate.cu's codes
const KEY_INT: i32 = 0;
const KEY_BOOL: i32 = 1;
const KEY_STR32: i32 = 2;
const KEY_STR64: i32 = 3;
const KEY_VIEW: i32 = 4;
const AGG_COUNT_ALL: i32 = 0;
const AGG_COUNT: i32 = 1;
const AGG_SUM_INT: i32 = 2;
const AGG_SUM_FLOAT: i32 = 3;
const AGG_MIN_INT: i32 = 4;
const AGG_MAX_INT: i32 = 5;
const AGG_MIN_FLOAT: i32 = 6;
const AGG_MAX_FLOAT: i32 = 7;
const OP_COL: i32 = 0;
const OP_LIT: i32 = 1;
const OP_SUB: i32 = 3;
const OP_MUL: i32 = 4;
const OP_DIV: i32 = 5;
const OP_ADD: i32 = 2;
const OP_NEG: i32 = 6;
const IOP_COL: i32 = 16;
const IOP_LIT: i32 = 17;
const IOP_SCALE: i32 = 18;
const IOP_ADD: i32 = 19;
const IOP_SUB: i32 = 20;
const IOP_MUL: i32 = 21;
const IOP_NEG: i32 = 22;

enum Key {
    Int {
        width: i32,
        vals: Vec<Option<i128>>,
    },
    Bool(Vec<Option<bool>>),
    Str {
        kind: i32,
        vals: Vec<Option<Vec<u8>>>,
    },
}

#[derive(Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

struct Input {
    width: i32,
    is_float: bool,
    sgn: bool,
    vals: Vec<Option<Num>>,
}

/// An aggregate: its operation, its input (or -1) and its program (ops of `Case::ops`).
struct Agg {
    op: i32,
    input: i32,
    expr: Option<(usize, usize)>,
}

struct Case {
    name: &'static str,
    rows: usize,
    cap: u64,
    keys: Vec<Key>,
    inputs: Vec<Input>,
    ops: Vec<(i32, i32, f64)>,
    aggs: Vec<Agg>,
}

fn bitmap(valid: impl Iterator<Item = bool>, rows: usize) -> Vec<u8> {
    let mut b = vec![0u8; rows.div_ceil(8)];
    for (i, v) in valid.enumerate() {
        if v {
            b[i / 8] |= 1 << (i % 8);
        }
    }
    b
}

fn put_valid(out: &mut Vec<u8>, valid: Vec<bool>) {
    if valid.iter().all(|&v| v) {
        out.push(0);
    } else {
        out.push(1);
        let n = valid.len();
        out.extend(bitmap(valid.into_iter(), n));
    }
}

impl Case {
    fn input(&self) -> Vec<u8> {
        let rows = self.rows;
        let mut out = Vec::new();
        out.extend((rows as u64).to_le_bytes());
        out.extend(self.cap.to_le_bytes());
        out.extend((self.keys.len() as u32).to_le_bytes());
        for k in &self.keys {
            let (kind, width, values, chars, valid): (i32, i32, Vec<u8>, Vec<u8>, Vec<bool>) =
                match k {
                    Key::Int { width, vals } => (
                        KEY_INT,
                        *width,
                        vals.iter()
                            .flat_map(|v| v.unwrap_or(0).to_le_bytes()[..*width as usize].to_vec())
                            .collect(),
                        vec![],
                        vals.iter().map(Option::is_some).collect(),
                    ),
                    Key::Bool(vals) => (
                        KEY_BOOL,
                        0,
                        bitmap(vals.iter().map(|v| v.unwrap_or(false)), rows),
                        vec![],
                        vals.iter().map(Option::is_some).collect(),
                    ),
                    Key::Str { kind, vals } => {
                        let mut chars = Vec::new();
                        let mut values = Vec::new();
                        if *kind == KEY_VIEW {
                            for v in vals {
                                let s = v.as_deref().unwrap_or(&[]);
                                let mut view = [0u8; 16];
                                view[..4].copy_from_slice(&(s.len() as u32).to_le_bytes());
                                if s.len() <= 12 {
                                    view[4..4 + s.len()].copy_from_slice(s);
                                } else {
                                    view[4..8].copy_from_slice(&s[..4]);
                                    view[12..].copy_from_slice(&(chars.len() as u32).to_le_bytes());
                                    chars.extend_from_slice(s);
                                }
                                values.extend(view);
                            }
                        } else {
                            let mut offsets = vec![0i64];
                            for v in vals {
                                chars.extend_from_slice(v.as_deref().unwrap_or(&[]));
                                offsets.push(chars.len() as i64);
                            }
                            for o in offsets {
                                if *kind == KEY_STR32 {
                                    values.extend((o as i32).to_le_bytes());
                                } else {
                                    values.extend(o.to_le_bytes());
                                }
                            }
                        }
                        (
                            *kind,
                            0,
                            values,
                            chars,
                            vals.iter().map(Option::is_some).collect(),
                        )
                    }
                };
            out.extend(kind.to_le_bytes());
            out.extend(width.to_le_bytes());
            out.extend((values.len() as u64).to_le_bytes());
            out.extend((chars.len() as u64).to_le_bytes());
            out.extend(values);
            out.extend(chars);
            put_valid(&mut out, valid);
        }
        out.extend((self.inputs.len() as u32).to_le_bytes());
        for i in &self.inputs {
            out.extend(i.width.to_le_bytes());
            out.extend(i32::from(i.is_float).to_le_bytes());
            out.extend(i32::from(i.sgn).to_le_bytes());
            let valid: Vec<bool> = i.vals.iter().map(Option::is_some).collect();
            let all = valid.iter().all(|&v| v);
            out.push(u8::from(!all));
            for v in &i.vals {
                let bytes: Vec<u8> = match (v, i.is_float, i.width) {
                    (Some(Num::Float(f)), true, 4) => (*f as f32).to_le_bytes().to_vec(),
                    (Some(Num::Float(f)), true, _) => f.to_le_bytes().to_vec(),
                    (Some(Num::Int(x)), false, w) => x.to_le_bytes()[..w as usize].to_vec(),
                    _ => vec![0; i.width as usize],
                };
                out.extend(bytes);
            }
            if !all {
                out.extend(bitmap(valid.into_iter(), self.rows));
            }
        }
        out.extend((self.ops.len() as u32).to_le_bytes());
        for &(op, arg, lit) in &self.ops {
            out.extend(op.to_le_bytes());
            out.extend(arg.to_le_bytes());
            out.extend(lit.to_bits().to_le_bytes());
        }
        out.extend((self.aggs.len() as u32).to_le_bytes());
        for a in &self.aggs {
            let (start, len) = a.expr.unwrap_or((0, 0));
            out.extend(a.op.to_le_bytes());
            out.extend(a.input.to_le_bytes());
            out.extend((start as i32).to_le_bytes());
            out.extend((len as i32).to_le_bytes());
        }
        out
    }

    /// Row r's key tuple, each key as bytes (None: null).
    fn key_of(&self, r: usize) -> Vec<Option<Vec<u8>>> {
        self.keys
            .iter()
            .map(|k| match k {
                Key::Int { width, vals } => {
                    vals[r].map(|v| v.to_le_bytes()[..*width as usize].to_vec())
                }
                Key::Bool(vals) => vals[r].map(|b| vec![u8::from(b)]),
                Key::Str { vals, .. } => vals[r].clone(),
            })
            .collect()
    }

    /// An integer program's value at row r: None when an operand is null; Some(None) past
    /// 128 bits.
    fn int_program(&self, start: usize, len: usize, r: usize) -> Option<Option<i128>> {
        let mut st: Vec<i128> = Vec::new();
        for &(op, arg, lit) in &self.ops[start..start + len] {
            let lit = lit.to_bits() as i64;
            match op {
                IOP_COL => st.push(match self.inputs[arg as usize].vals[r]? {
                    Num::Int(i) => i,
                    Num::Float(_) => panic!("a float in an integer program"),
                }),
                IOP_LIT => st.push(lit as i128),
                IOP_NEG => {
                    let x = st.pop()?;
                    st.push(-x);
                }
                IOP_SCALE => {
                    let x = st.pop()?;
                    match x.checked_mul(lit as u64 as i128) {
                        Some(v) => st.push(v),
                        None => return Some(None),
                    }
                }
                _ => {
                    let b = st.pop()?;
                    let a = st.pop()?;
                    let v = match op {
                        IOP_ADD => a.checked_add(b),
                        IOP_SUB => a.checked_sub(b),
                        _ => a.checked_mul(b),
                    };
                    match v {
                        Some(v) => st.push(v),
                        None => return Some(None),
                    }
                }
            }
        }
        st.pop().map(Some)
    }

    /// An aggregate's argument at row r: None when null.
    fn arg(&self, a: &Agg, r: usize) -> Option<Num> {
        if let Some((start, len)) = a.expr.filter(|&(s, _)| self.ops[s].0 >= IOP_COL) {
            // (an overflow is checked by the caller through `overflows`)
            return self.int_program(start, len, r)?.map(Num::Int);
        }
        if let Some((start, len)) = a.expr {
            let mut st: Vec<f64> = Vec::new();
            for &(op, arg, lit) in &self.ops[start..start + len] {
                match op {
                    OP_COL => st.push(match self.inputs[arg as usize].vals[r]? {
                        Num::Float(f) => f,
                        Num::Int(i) => i as f64,
                    }),
                    OP_LIT => st.push(lit),
                    OP_NEG => {
                        let x = st.pop()?;
                        st.push(-x);
                    }
                    _ => {
                        let b = st.pop()?;
                        let a = st.pop()?;
                        st.push(match op {
                            OP_ADD => a + b,
                            OP_SUB => a - b,
                            OP_MUL => a * b,
                            _ => a / b,
                        });
                    }
                }
            }
            return st.pop().map(Num::Float);
        }
        if a.input < 0 {
            return Some(Num::Int(1));
        }
        let i = &self.inputs[a.input as usize];
        i.vals[r].map(|v| match v {
            // floats stored as f32 are read back as f32
            Num::Float(f) if i.width == 4 => Num::Float(f as f32 as f64),
            v => v,
        })
    }
}

/// An expected or found accumulator.
#[derive(Debug, Clone, PartialEq)]
enum Acc {
    Count(u64),
    Int(Option<i128>),
    Float(Option<f64>),
}

fn expect(case: &Case) -> HashMap<Vec<Option<Vec<u8>>>, Vec<Acc>> {
    let mut groups: HashMap<Vec<Option<Vec<u8>>>, Vec<Acc>> = HashMap::new();
    for r in 0..case.rows {
        let accs = groups.entry(case.key_of(r)).or_insert_with(|| {
            case.aggs
                .iter()
                .map(|a| match a.op {
                    AGG_COUNT_ALL | AGG_COUNT => Acc::Count(0),
                    AGG_SUM_FLOAT | AGG_MIN_FLOAT | AGG_MAX_FLOAT => Acc::Float(None),
                    _ => Acc::Int(None),
                })
                .collect()
        });
        for (a, acc) in case.aggs.iter().zip(accs.iter_mut()) {
            let Some(v) = case.arg(a, r) else { continue };
            match (acc, v) {
                (Acc::Count(c), _) => *c += 1,
                (Acc::Int(s), Num::Int(x)) => {
                    let x = if a.op == AGG_SUM_INT {
                        x
                    } else {
                        x as i64 as i128
                    };
                    *s = Some(match (*s, a.op) {
                        (None, _) => x,
                        (Some(s), AGG_SUM_INT) => s.wrapping_add(x),
                        (Some(s), AGG_MIN_INT) => s.min(x),
                        (Some(s), _) => s.max(x),
                    })
                }
                (Acc::Float(s), Num::Float(x)) => {
                    *s = Some(match (*s, a.op) {
                        (None, _) => x,
                        (Some(s), AGG_SUM_FLOAT) => s + x,
                        (Some(s), AGG_MIN_FLOAT) => {
                            if x.total_cmp(&s).is_lt() {
                                x
                            } else {
                                s
                            }
                        }
                        (Some(s), _) => {
                            if x.total_cmp(&s).is_gt() {
                                x
                            } else {
                                s
                            }
                        }
                    })
                }
                (acc, v) => panic!("{}: {acc:?} with {:?}", case.name, matches!(v, Num::Int(_))),
            }
        }
    }
    groups
}

/// A little-endian reader of the emulator's output.
struct Out<'a>(&'a [u8]);

impl Out<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }
}

/// Runs `case` and checks its groups; returns the final capacity.
fn run(emu: &std::path::Path, case: &Case) -> u64 {
    let out = run_emulator(emu, &case.input(), case.name);
    let mut o = Out(&out);
    let groups = o.u64() as usize;
    let cap = o.u64();
    let flags = o.u64();
    let overflows = (0..case.rows).any(|r| {
        case.aggs.iter().any(|a| {
            a.expr.is_some_and(|(s, l)| {
                case.ops[s].0 >= IOP_COL && case.int_program(s, l, r) == Some(None)
            })
        })
    });
    assert_eq!(
        flags & 2 != 0,
        overflows,
        "{}: the overflow flag",
        case.name
    );
    if overflows {
        return cap;
    }
    let mut accs: Vec<Vec<Acc>> = vec![Vec::new(); groups];
    for a in &case.aggs {
        let width = if a.op == AGG_SUM_INT { 16 } else { 8 };
        let bytes = o.take(groups * width).to_vec();
        let seen = o.take(groups).to_vec();
        for g in 0..groups {
            let w = &bytes[g * width..(g + 1) * width];
            let lo = u64::from_le_bytes(w[..8].try_into().unwrap());
            let seen = seen[g] != 0;
            accs[g].push(match a.op {
                AGG_COUNT_ALL | AGG_COUNT => Acc::Count(lo),
                AGG_SUM_INT => Acc::Int(seen.then(|| {
                    let hi = u64::from_le_bytes(w[8..].try_into().unwrap());
                    (lo as u128 | (hi as u128) << 64) as i128
                })),
                AGG_SUM_FLOAT => Acc::Float(seen.then(|| f64::from_bits(lo))),
                AGG_MIN_FLOAT | AGG_MAX_FLOAT => Acc::Float(seen.then(|| {
                    let w = lo as i64;
                    f64::from_bits((if w < 0 { w ^ i64::MAX } else { w }) as u64)
                })),
                _ => Acc::Int(seen.then_some(lo as i64 as i128)),
            });
        }
    }
    let mut keys: Vec<Vec<Option<Vec<u8>>>> = vec![Vec::new(); groups];
    for k in &case.keys {
        let valid = o.take(groups).to_vec();
        match k {
            Key::Int { width, .. } => {
                let w = *width as usize;
                let vals = o.take(groups * w).to_vec();
                for g in 0..groups {
                    keys[g].push((valid[g] != 0).then(|| vals[g * w..(g + 1) * w].to_vec()));
                }
            }
            Key::Bool(_) => {
                let vals = o.take(groups).to_vec();
                for g in 0..groups {
                    keys[g].push((valid[g] != 0).then(|| vec![vals[g]]));
                }
            }
            Key::Str { .. } => {
                let lens: Vec<usize> = o
                    .take(groups * 8)
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as usize)
                    .collect();
                let total = o.u64() as usize;
                let chars = o.take(total).to_vec();
                let mut at = 0;
                for g in 0..groups {
                    keys[g].push((valid[g] != 0).then(|| chars[at..at + lens[g]].to_vec()));
                    at += lens[g];
                }
            }
        }
    }
    assert!(
        o.0.is_empty(),
        "{}: {} bytes left over",
        case.name,
        o.0.len()
    );
    let want = expect(case);
    assert_eq!(groups, want.len(), "{}: groups", case.name);
    for (key, got) in keys.iter().zip(&accs) {
        let Some(exp) = want.get(key) else {
            panic!("{}: a group {key:?} that is not in the rows", case.name)
        };
        for (a, (g, e)) in got.iter().zip(exp).enumerate() {
            let same = match (g, e) {
                (Acc::Float(Some(g)), Acc::Float(Some(e))) => {
                    let op = case.aggs[a].op;
                    if op == AGG_SUM_FLOAT {
                        (g.is_nan() && e.is_nan())
                            || g == e
                            || (g - e).abs() <= 1e-9 * e.abs().max(1.0)
                    } else {
                        g.to_bits() == e.to_bits()
                    }
                }
                (g, e) => g == e,
            };
            assert!(
                same,
                "{}: group {key:?}, aggregate {a}: {g:?} against {e:?}",
                case.name
            );
        }
    }
    cap
}

fn opt<T>(r: &mut common::Rng, nulls: u64, v: T) -> Option<T> {
    (r.below(100) >= nulls).then_some(v)
}

fn floats(r: &mut common::Rng, rows: usize, nulls: u64) -> Vec<Option<Num>> {
    let special = [
        f64::NAN,
        -0.0,
        0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -f64::NAN,
    ];
    (0..rows)
        .map(|_| {
            let x = if r.below(40) == 0 {
                special[r.below(special.len() as u64) as usize]
            } else {
                (r.below(2_000_001) as f64 - 1e6) / 128.0
            };
            opt(r, nulls, Num::Float(x))
        })
        .collect()
}

#[test]
fn emulated_partial_aggregation_groups_as_a_host_group_by() {
    let Some(emu) = emulator("aggregate") else {
        return;
    };
    let mut r = common::Rng(0xa66e_6a7e_0000_0001);
    let rows = 3000;
    let pool: Vec<Vec<u8>> = (0..15)
        .map(|i| match i {
            0 => vec![],
            1..=5 => format!("s{i}").into_bytes(),
            _ => format!("a longer string than twelve bytes #{i}").into_bytes(),
        })
        .collect();
    let strings = |r: &mut common::Rng, kind: i32| Key::Str {
        kind,
        vals: (0..rows)
            .map(|_| {
                let s = pool[r.below(pool.len() as u64) as usize].clone();
                opt(r, 7, s)
            })
            .collect(),
    };
    let ints: Vec<Option<Num>> = (0..rows)
        .map(|_| {
            let v = r.below(1 << 40) as i128 - (1 << 39);
            opt(&mut r, 10, Num::Int(v))
        })
        .collect();
    let unsigned: Vec<Option<Num>> = (0..rows)
        .map(|_| {
            let v = r.below(1 << 32) as i128;
            opt(&mut r, 5, Num::Int(v))
        })
        .collect();
    let decimals: Vec<Option<Num>> = (0..rows)
        .map(|_| {
            let v = (r.next() as i128 * 1_000_003) - (1i128 << 80);
            opt(&mut r, 5, Num::Int(v))
        })
        .collect();
    let small: Vec<Option<Num>> = (0..rows)
        .map(|_| {
            let v = r.below(200) as i128 - 100;
            opt(&mut r, 5, Num::Int(v))
        })
        .collect();
    let f64s = floats(&mut r, rows, 8);
    let f32s = floats(&mut r, rows, 8);
    let inputs = || {
        vec![
            Input {
                width: 8,
                is_float: false,
                sgn: true,
                vals: ints.clone(),
            },
            Input {
                width: 4,
                is_float: false,
                sgn: false,
                vals: unsigned.clone(),
            },
            Input {
                width: 16,
                is_float: false,
                sgn: true,
                vals: decimals.clone(),
            },
            Input {
                width: 8,
                is_float: true,
                sgn: true,
                vals: f64s.clone(),
            },
            Input {
                width: 4,
                is_float: true,
                sgn: true,
                vals: f32s.clone(),
            },
            Input {
                width: 1,
                is_float: false,
                sgn: true,
                vals: small.clone(),
            },
        ]
    };
    // -(in3 * (1 - in4) + in5 / 2)
    let ops = vec![
        (OP_COL, 3, 0.0),
        (OP_LIT, 0, 1.0),
        (OP_COL, 4, 0.0),
        (OP_SUB, 0, 0.0),
        (OP_MUL, 0, 0.0),
        (OP_COL, 5, 0.0),
        (OP_LIT, 0, 2.0),
        (OP_DIV, 0, 0.0),
        (OP_ADD, 0, 0.0),
        (OP_NEG, 0, 0.0),
        // -((in0 * 100 - in5 * in1) + -7), exact
        (IOP_COL, 0, 0.0),
        (IOP_SCALE, 0, f64::from_bits(100)),
        (IOP_COL, 5, 0.0),
        (IOP_COL, 1, 0.0),
        (IOP_MUL, 0, 0.0),
        (IOP_SUB, 0, 0.0),
        (IOP_LIT, 0, f64::from_bits(-7i64 as u64)),
        (IOP_ADD, 0, 0.0),
        (IOP_NEG, 0, 0.0),
    ];
    let agg = |op, input| Agg {
        op,
        input,
        expr: None,
    };
    let aggs = || {
        vec![
            agg(AGG_COUNT_ALL, -1),
            agg(AGG_COUNT, 0),
            agg(AGG_SUM_INT, 0),
            agg(AGG_SUM_INT, 1),
            agg(AGG_SUM_INT, 2),
            agg(AGG_SUM_FLOAT, 3),
            agg(AGG_SUM_FLOAT, 4),
            agg(AGG_MIN_INT, 0),
            agg(AGG_MAX_INT, 0),
            agg(AGG_MIN_INT, 5),
            agg(AGG_MAX_INT, 1),
            agg(AGG_MIN_FLOAT, 3),
            agg(AGG_MAX_FLOAT, 3),
            agg(AGG_MIN_FLOAT, 4),
            agg(AGG_MAX_FLOAT, 4),
            Agg {
                op: AGG_SUM_FLOAT,
                input: -1,
                expr: Some((0, 10)),
            },
            Agg {
                op: AGG_COUNT,
                input: -1,
                expr: Some((0, 10)),
            },
        ]
    };
    let int_key = |r: &mut common::Rng, width: i32, distinct: u64| Key::Int {
        width,
        vals: (0..rows)
            .map(|_| {
                let v = r.below(distinct) as i128 - (distinct / 2) as i128;
                opt(r, 10, v)
            })
            .collect(),
    };
    let bools = Key::Bool(
        (0..rows)
            .map(|_| {
                let b = r.below(2) == 1;
                opt(&mut r, 20, b)
            })
            .collect(),
    );
    let cases = vec![
        Case {
            name: "int, string and boolean keys",
            rows,
            cap: 64,
            keys: vec![int_key(&mut r, 4, 20), strings(&mut r, KEY_STR32), bools],
            inputs: inputs(),
            ops: ops.clone(),
            aggs: aggs(),
        },
        Case {
            name: "views, i64 offsets and 16-byte keys",
            rows,
            cap: 4096,
            keys: vec![
                strings(&mut r, KEY_VIEW),
                strings(&mut r, KEY_STR64),
                int_key(&mut r, 16, 3),
                int_key(&mut r, 1, 4),
            ],
            inputs: inputs(),
            ops: ops.clone(),
            aggs: aggs(),
        },
        Case {
            name: "no key: one group",
            rows,
            cap: 16,
            keys: vec![],
            inputs: inputs(),
            ops: ops.clone(),
            aggs: aggs(),
        },
    ];
    for case in &cases {
        run(&emu, case);
    }
    // no row: no group
    let empty = Case {
        name: "no row",
        rows: 0,
        cap: 16,
        keys: vec![Key::Int {
            width: 8,
            vals: vec![],
        }],
        inputs: vec![Input {
            width: 8,
            is_float: false,
            sgn: true,
            vals: vec![],
        }],
        ops: vec![],
        aggs: vec![agg(AGG_COUNT_ALL, -1), agg(AGG_SUM_INT, 0)],
    };
    assert_eq!(run(&emu, &empty), 16);
    // an argument null in every row: its SUM, MIN and MAX unseen, COUNT 0
    let all_null = Case {
        name: "an argument null in every row",
        rows: 500,
        cap: 16,
        keys: vec![Key::Int {
            width: 2,
            vals: (0..500).map(|i| Some(i % 3)).collect(),
        }],
        inputs: vec![Input {
            width: 8,
            is_float: true,
            sgn: true,
            vals: vec![None; 500],
        }],
        ops: vec![],
        aggs: vec![
            agg(AGG_COUNT, 0),
            agg(AGG_SUM_FLOAT, 0),
            agg(AGG_MIN_FLOAT, 0),
            agg(AGG_MAX_FLOAT, 0),
        ],
    };
    run(&emu, &all_null);
    // exact arithmetic past 128 bits: the overflow flag
    let big = Case {
        name: "a product past 128 bits",
        rows: 64,
        cap: 16,
        keys: vec![],
        inputs: vec![Input {
            width: 16,
            is_float: false,
            sgn: true,
            vals: (0..64).map(|i| Some(Num::Int((1i128 << 70) + i))).collect(),
        }],
        ops: vec![(IOP_COL, 0, 0.0), (IOP_COL, 0, 0.0), (IOP_MUL, 0, 0.0)],
        aggs: vec![Agg {
            op: AGG_SUM_INT,
            input: -1,
            expr: Some((0, 3)),
        }],
    };
    run(&emu, &big);
    // 20,000 distinct keys from a table of 16 slots: grown until every row has its slot
    let n = 20_000;
    let many = Case {
        name: "20,000 groups",
        rows: n,
        cap: 16,
        keys: vec![Key::Int {
            width: 8,
            vals: (0..n)
                .map(|i| Some((i as i128 * 7919) % 1_000_003))
                .collect(),
        }],
        inputs: vec![Input {
            width: 8,
            is_float: false,
            sgn: true,
            vals: (0..n).map(|i| Some(Num::Int(i as i128))).collect(),
        }],
        ops: vec![],
        aggs: vec![
            agg(AGG_COUNT_ALL, -1),
            agg(AGG_SUM_INT, 0),
            agg(AGG_MAX_INT, 0),
        ],
    };
    let cap = run(&emu, &many);
    assert!(cap >= n as u64, "the table grew to {cap} slots");
    eprintln!("aggregate: {} cases as a host GROUP BY", cases.len() + 3);
}
