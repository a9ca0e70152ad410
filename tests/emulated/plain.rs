//! The two walks that find PLAIN byte arrays' values in a page (`plain_walk.cuh`): thread 0
//! hopping from prefix to prefix (`walk_plain`), and the whole block by pointer doubling over
//! windows (`walk_plain_doubling`, which the kernels take for short values), run on the host
//! through the CUDA emulation of `tests/emulated/emu` (see `tests/emulated/kernels.rs`), under AddressSanitizer
//! and UBSan where the compiler has them. They must agree on every stream: the same error, and
//! without one the same positions and end — on streams of short, long (past a window), empty
//! and mixed values, with fewer or more values asked for than stored, cut short, and damaged.

use crate::common;
use crate::emu;

use common::{flip_bytes, Rng};
use emu::*;

/// PLAIN values of the given lengths, each with its 4-byte little-endian length prefix.
fn plain(lengths: &[u32], r: &mut Rng) -> Vec<u8> {
    let mut b = Vec::new();
    for &n in lengths {
        b.extend(n.to_le_bytes());
        b.extend((0..n).map(|_| b'a' + (r.below(26) as u8)));
    }
    b
}

/// One walk's answer: error bits, end, positions.
type Walk = (u32, u32, Vec<u32>);

/// Runs both walks over (count, bytes) cases.
fn walks(emu: &std::path::Path, cases: &[(u32, Vec<u8>)]) -> Vec<(Walk, Walk)> {
    let mut input = (cases.len() as u32).to_le_bytes().to_vec();
    for (count, bytes) in cases {
        input.extend(count.to_le_bytes());
        input.extend((bytes.len() as u32).to_le_bytes());
        input.extend(bytes);
    }
    let out = run_emulator(emu, &input, "plain walks");
    let mut words = out
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()));
    let mut one = |count: u32| -> Walk {
        let err = words.next().unwrap();
        let end = words.next().unwrap();
        (
            err,
            end,
            (0..count).map(|_| words.next().unwrap()).collect(),
        )
    };
    cases
        .iter()
        .map(|(count, _)| (one(*count), one(*count)))
        .collect()
}

#[test]
fn emulated_plain_walks_agree() {
    let Some(emu) = emulator("plain_walk") else {
        return;
    };
    let mut r = Rng(0x5eed_cafe_f00d_1234);
    let mut cases: Vec<(u32, Vec<u8>)> = vec![(0, Vec::new()), (1, Vec::new()), (0, vec![7; 9])];
    // value lengths: empty, short, medium, long (past a window), mixed, about a window
    let shapes: [fn(&mut Rng) -> u32; 6] = [
        |_| 0,
        |r| r.below(9) as u32,
        |r| r.below(41) as u32,
        |r| 1000 + r.below(2500) as u32,
        |r| {
            if r.below(50) == 0 {
                3000 + r.below(6000) as u32
            } else {
                r.below(12) as u32
            }
        },
        |r| 1016 + r.below(16) as u32,
    ];
    let mut valid = 0;
    for len in shapes {
        for _ in 0..6 {
            let n = 1 + r.below(3000) as usize;
            let lengths: Vec<u32> = (0..n).map(|_| len(&mut r)).collect();
            let b = plain(&lengths, &mut r);
            let n = n as u32;
            // all of them; fewer asked for; more asked for than stored (runs past the end)
            cases.push((n, b.clone()));
            valid += 1;
            cases.push((1 + r.below(n as u64) as u32, b.clone()));
            cases.push((n + 1, b.clone()));
            // cut short
            let cut = r.below(b.len() as u64) as usize;
            cases.push((n, b[..cut].to_vec()));
            // damaged: bytes changed, lengths among them
            let mut d = b.clone();
            if !d.is_empty() {
                flip_bytes(&mut r, &mut d);
            }
            cases.push((n, d));
        }
    }
    let out = walks(&emu, &cases);
    let (mut errors, mut agreed) = (0, 0);
    for (i, ((count, bytes), (hop, dbl))) in cases.iter().zip(&out).enumerate() {
        assert_eq!(
            hop.0,
            dbl.0,
            "case {i} ({count} values, {} bytes): error bits differ",
            bytes.len()
        );
        if hop.0 != 0 {
            errors += 1;
            continue;
        }
        assert_eq!(hop.1, dbl.1, "case {i}: ends differ");
        assert_eq!(hop.2, dbl.2, "case {i}: positions differ");
        agreed += 1;
    }
    eprintln!(
        "plain walks: {} cases ({valid} whole streams), {agreed} walked alike, {errors} refused alike",
        cases.len()
    );
    assert!(agreed > valid && errors > valid);
}
