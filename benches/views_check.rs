//! The validation of string views that a device batch's copy back to the host runs
//! (`cuparquet::array::validate_views`) against arrow's (`ArrayData::validate_data`), on
//! columns shaped like TPC-H's: one-letter flags, ship modes, comments, and a non-ASCII mix
//! (where arrow's check runs). Each round times every contender once, in turn; reports the
//! median and the minimum of the rounds.
//!
//! `cargo bench --bench views_check`; `CUPARQUET_BENCH_ROWS` (default 3,000,000),
//! `CUPARQUET_BENCH_ROUNDS` (default 15).

use std::time::{Duration, Instant};

use arrow::array::{Array, ArrayData, StringViewArray};

fn column(rows: usize, words: &[&str]) -> ArrayData {
    StringViewArray::from_iter_values((0..rows).map(|i| words[(i * 7 + i / 3) % words.len()]))
        .to_data()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(d)
    };
    let rows = env("CUPARQUET_BENCH_ROWS", 3_000_000);
    let rounds = env("CUPARQUET_BENCH_ROUNDS", 15).max(1);
    let columns = [
        ("flags (1 byte)", column(rows, &["A", "N", "R", "F", "O"])),
        (
            "ship modes (3-7 bytes)",
            column(
                rows,
                &["AIR", "FOB", "MAIL", "RAIL", "REG AIR", "SHIP", "TRUCK"],
            ),
        ),
        (
            "comments (10-43 bytes)",
            column(
                rows,
                &[
                    "carefully final deposits",
                    "quickly ironic",
                    "blithely regular packages sleep furiously",
                    "slyly express requests nag",
                ],
            ),
        ),
        ("non-ASCII mix", column(rows, &["été", "A", "naïve", "N"])),
    ];
    println!("| column ({rows} rows) | arrow's validation | cuparquet's | × |");
    println!("|---|---|---|---|");
    for (name, data) in &columns {
        let (mut arrow, mut ours) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let t = Instant::now();
            data.validate_data().unwrap();
            arrow.push(t.elapsed());
            let t = Instant::now();
            cuparquet::array::validate_views(data).unwrap();
            ours.push(t.elapsed());
        }
        arrow.sort();
        ours.sort();
        let (a, o) = (arrow[rounds / 2], ours[rounds / 2]);
        println!(
            "| {name} | {:.2} ms (min {:.2}) | {:.2} ms (min {:.2}) | {:.2}× |",
            ms(a),
            ms(arrow[0]),
            ms(o),
            ms(ours[0]),
            ms(a) / ms(o)
        );
    }
}
