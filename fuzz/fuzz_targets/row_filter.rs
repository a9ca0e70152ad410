//! The row filter: a filter built from the input (its text and its tree) over a random batch
//! (integers, floats with NaN and -0, strings, booleans, dates; nulls in each) keeps exactly
//! the rows the tree keeps when evaluated with arrow-rs's compute kernels (SQL's three-valued
//! logic: `and_kleene`, `or_kleene`, `not`, `filter_record_batch`; comparisons as the filter
//! language defines them: numbers as numbers, floats as IEEE 754, strings by their bytes).
//! The file is loaded on the host, and on `CUPARQUET_FUZZ_DEVICE` (e.g. `cuda:0`) where set.
//! Input bytes that do not make a tree are given as filter text: a clear error or a load,
//! never a panic.
#![no_main]
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Float64Array, Int64Array, RecordBatch, StringArray,
};
use arrow::compute::kernels::boolean::{and_kleene, not, or_kleene};
use arrow::compute::{concat_batches, filter_record_batch};
use cuparquet::{Device, Scan};
use libfuzzer_sys::fuzz_target;

/// Reads the input a byte at a time (zeros once it is used up).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn below(&mut self, n: u8) -> u8 {
        self.byte() % n
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "=",
            Op::Ne => "<>",
        }
    }
    /// `lit op col` is `col flipped(op) lit`.
    fn flipped(self) -> Op {
        match self {
            Op::Lt => Op::Gt,
            Op::Le => Op::Ge,
            Op::Gt => Op::Lt,
            Op::Ge => Op::Le,
            o => o,
        }
    }
    fn holds(self, o: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            Op::Lt => o == Less,
            Op::Le => o != Greater,
            Op::Gt => o == Greater,
            Op::Ge => o != Less,
            Op::Eq => o == Equal,
            Op::Ne => o != Equal,
        }
    }
}

#[derive(Debug, Clone)]
enum Lit {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    Date(i32),
}

impl Lit {
    fn text(&self) -> String {
        match self {
            Lit::Int(v) => v.to_string(),
            Lit::Float(v) => format!("{v:?}"),
            Lit::Str(s) => format!("'{}'", s.replace('\'', "''")),
            Lit::Bool(b) => b.to_string(),
            Lit::Date(d) => format!("'1970-01-{:02}'", d + 1),
        }
    }
}

#[derive(Debug, Clone)]
enum Expr {
    Cmp {
        col: usize,
        op: Op,
        lit: Lit,
        lit_first: bool,
    },
    IsNull {
        col: usize,
        not: bool,
    },
    In {
        col: usize,
        lits: Vec<Lit>,
        not: bool,
    },
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

const COLUMNS: [&str; 5] = ["i", "f", "s", "b", "d"];

fn literal(r: &mut Bytes<'_>, col: usize) -> Lit {
    match col {
        0 => match r.below(4) {
            0 => Lit::Float(f64::from(r.below(9)) - 4.5),
            _ => Lit::Int(i64::from(r.below(9)) - 4),
        },
        1 => match r.below(6) {
            0 => Lit::Int(i64::from(r.below(9)) - 4),
            1 => Lit::Float(-0.0),
            2 => Lit::Float(1e300),
            _ => Lit::Float(f64::from(r.below(9)) / 2.0 - 2.0),
        },
        2 => Lit::Str(["", "a", "ab", "b", "a'b", "ba"][r.below(6) as usize].to_string()),
        3 => Lit::Bool(r.below(2) == 1),
        _ => Lit::Date(i32::from(r.below(8))),
    }
}

fn expr(r: &mut Bytes<'_>, depth: u32) -> Expr {
    let pick = if depth >= 4 { r.below(3) } else { r.below(6) };
    let col = r.below(5) as usize;
    match pick {
        0 => {
            let op = [Op::Lt, Op::Le, Op::Gt, Op::Ge, Op::Eq, Op::Ne][r.below(6) as usize];
            let lit = literal(r, col);
            Expr::Cmp {
                col,
                op,
                lit,
                lit_first: r.below(4) == 0,
            }
        }
        1 => Expr::IsNull {
            col,
            not: r.below(2) == 1,
        },
        2 => {
            let n = 1 + r.below(3) as usize;
            let lits = (0..n).map(|_| literal(r, col)).collect();
            Expr::In {
                col,
                lits,
                not: r.below(2) == 1,
            }
        }
        3 => Expr::Not(Box::new(expr(r, depth + 1))),
        4 => Expr::And(Box::new(expr(r, depth + 1)), Box::new(expr(r, depth + 1))),
        _ => Expr::Or(Box::new(expr(r, depth + 1)), Box::new(expr(r, depth + 1))),
    }
}

fn text(e: &Expr) -> String {
    match e {
        Expr::Cmp {
            col,
            op,
            lit,
            lit_first: false,
        } => format!("{} {} {}", COLUMNS[*col], op.text(), lit.text()),
        Expr::Cmp { col, op, lit, .. } => {
            format!("{} {} {}", lit.text(), op.flipped().text(), COLUMNS[*col])
        }
        Expr::IsNull { col, not } => {
            format!(
                "{} IS {}NULL",
                COLUMNS[*col],
                if *not { "NOT " } else { "" }
            )
        }
        Expr::In { col, lits, not } => format!(
            "{} {}IN ({})",
            COLUMNS[*col],
            if *not { "NOT " } else { "" },
            lits.iter().map(Lit::text).collect::<Vec<_>>().join(", ")
        ),
        Expr::Not(e) => format!("NOT ({})", text(e)),
        Expr::And(a, b) => format!("({}) AND ({})", text(a), text(b)),
        Expr::Or(a, b) => format!("({}) OR ({})", text(a), text(b)),
    }
}

/// `col op lit` for one row: `None` where the value is null.
fn compare(batch: &RecordBatch, col: usize, row: usize, op: Op, lit: &Lit) -> Option<bool> {
    let a = batch.column(col);
    if a.is_null(row) {
        return None;
    }
    let num = |l: &Lit| match l {
        Lit::Int(v) => *v as f64,
        Lit::Float(v) => *v,
        _ => f64::NAN,
    };
    Some(match col {
        0 => {
            let v = a.as_any().downcast_ref::<Int64Array>().unwrap().value(row);
            match lit {
                Lit::Int(l) => op.holds(v.cmp(l)),
                // (the values are small: exact as floats)
                l => op.holds((v as f64).partial_cmp(&num(l)).unwrap()),
            }
        }
        1 => {
            let v = a
                .as_any()
                .downcast_ref::<Float64Array>()
                .unwrap()
                .value(row);
            // IEEE 754: NaN satisfies no comparison but `!=`; -0 = 0
            match v.partial_cmp(&num(lit)) {
                Some(o) => op.holds(o),
                None => matches!(op, Op::Ne),
            }
        }
        2 => {
            let v = a.as_any().downcast_ref::<StringArray>().unwrap().value(row);
            let Lit::Str(l) = lit else { unreachable!() };
            op.holds(v.as_bytes().cmp(l.as_bytes()))
        }
        3 => {
            let v = a
                .as_any()
                .downcast_ref::<BooleanArray>()
                .unwrap()
                .value(row);
            let Lit::Bool(l) = lit else { unreachable!() };
            op.holds(v.cmp(l))
        }
        _ => {
            let v = a.as_any().downcast_ref::<Date32Array>().unwrap().value(row);
            let Lit::Date(l) = lit else { unreachable!() };
            op.holds(v.cmp(l))
        }
    })
}

/// The tree over the batch: a nullable boolean per row (null: unknown).
fn eval(e: &Expr, batch: &RecordBatch) -> BooleanArray {
    let rows = 0..batch.num_rows();
    match e {
        Expr::Cmp { col, op, lit, .. } => rows.map(|i| compare(batch, *col, i, *op, lit)).collect(),
        Expr::IsNull { col, not } => rows
            .map(|i| Some(batch.column(*col).is_null(i) != *not))
            .collect(),
        Expr::In { col, lits, not } => {
            // `x IN (a, b)` is `x = a OR x = b`; `x NOT IN (a, b)` is `x != a AND x != b`
            let each = lits.iter().map(|l| {
                let op = if *not { Op::Ne } else { Op::Eq };
                eval(
                    &Expr::Cmp {
                        col: *col,
                        op,
                        lit: l.clone(),
                        lit_first: false,
                    },
                    batch,
                )
            });
            each.reduce(|a, b| {
                if *not {
                    and_kleene(&a, &b).unwrap()
                } else {
                    or_kleene(&a, &b).unwrap()
                }
            })
            .unwrap()
        }
        Expr::Not(e) => not(&eval(e, batch)).unwrap(),
        Expr::And(a, b) => and_kleene(&eval(a, batch), &eval(b, batch)).unwrap(),
        Expr::Or(a, b) => or_kleene(&eval(a, batch), &eval(b, batch)).unwrap(),
    }
}

fn batch(r: &mut Bytes<'_>) -> RecordBatch {
    let n = 1 + r.below(40) as usize;
    let null = |r: &mut Bytes<'_>| r.below(5) == 0;
    let i: Int64Array = (0..n)
        .map(|_| (!null(r)).then(|| i64::from(r.below(11)) - 5))
        .collect();
    let f: Float64Array = (0..n)
        .map(|_| {
            (!null(r)).then(|| match r.below(12) {
                0 => f64::NAN,
                1 => -0.0,
                2 => f64::INFINITY,
                3 => f64::NEG_INFINITY,
                k => f64::from(k) / 2.0 - 4.0,
            })
        })
        .collect();
    let s: StringArray = (0..n)
        .map(|_| (!null(r)).then(|| ["", "a", "ab", "b", "a'b", "ba", "abc"][r.below(7) as usize]))
        .collect();
    let b: BooleanArray = (0..n)
        .map(|_| (!null(r)).then(|| r.below(2) == 1))
        .collect();
    let d: Date32Array = (0..n)
        .map(|_| (!null(r)).then(|| i32::from(r.below(8))))
        .collect();
    RecordBatch::try_from_iter([
        ("i", Arc::new(i) as ArrayRef),
        ("f", Arc::new(f) as ArrayRef),
        ("s", Arc::new(s) as ArrayRef),
        ("b", Arc::new(b) as ArrayRef),
        ("d", Arc::new(d) as ArrayRef),
    ])
    .unwrap()
}

/// Loads `path` on `device` keeping the rows where `filter` holds.
fn load(path: &std::path::Path, device: Device, filter: &str) -> cuparquet::Result<RecordBatch> {
    let loaded = Scan::builder(path)
        .with_device(device)
        .with_row_filter(filter)
        .build()?
        .load()?;
    let host = loaded.to_host()?;
    Ok(concat_batches(&loaded.schema, &host).unwrap())
}

fuzz_target!(|data: &[u8]| {
    let mut r = Bytes(data);
    let as_text = r.below(8) == 0;
    let b = batch(&mut r);
    let path = std::env::temp_dir().join(format!(
        "cuparquet-fuzz-row-filter-{}.parquet",
        std::process::id()
    ));
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        b.schema(),
        None,
    )
    .unwrap();
    w.write(&b).unwrap();
    w.close().unwrap();
    let mut devices = vec![Device::Host];
    if let Ok(d) = std::env::var("CUPARQUET_FUZZ_DEVICE") {
        devices.push(d.parse().unwrap());
    }
    if as_text {
        // the rest as filter text: a load or a clear error, on every device alike
        let t = String::from_utf8_lossy(r.0).to_string();
        let got: Vec<_> = devices.iter().map(|&d| load(&path, d, &t)).collect();
        for g in &got {
            if let Err(e) = g {
                let e = e.to_string();
                assert!(!e.contains('\n') && !e.is_empty(), "{t:?}: {e}");
            }
        }
        if let [Ok(a), Ok(b)] = &got[..] {
            assert_eq!(a, b, "{t:?}: host and device differ");
        }
        return;
    }
    let e = expr(&mut r, 0);
    let t = text(&e);
    // a row is kept where the whole test is true (not where it is unknown)
    let mask: BooleanArray = eval(&e, &b).iter().map(|v| Some(v == Some(true))).collect();
    let want = filter_record_batch(&b, &mask).unwrap();
    for &d in &devices {
        let got = load(&path, d, &t).unwrap_or_else(|e| panic!("{t}: {e}"));
        assert_eq!(got.num_rows(), want.num_rows(), "{d} {t}\n{b:?}");
        for c in 0..b.num_columns() {
            assert_eq!(
                got.column(c).to_data(),
                want.column(c).to_data(),
                "{d} {t}: column {}",
                COLUMNS[c]
            );
        }
    }
});
