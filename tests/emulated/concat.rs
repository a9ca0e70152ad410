//! Batches joined end to end on the device (`concat_bits` and `concat_offsets` in
//! `src/decode/gpu/kernels/filter.cu`, what gathers a row filter's small batches) run on the
//! host through the CUDA emulation of `tests/emulated/emu`: bitmaps of random lengths (parts
//! without a bitmap set every bit) joined at unaligned bit positions, 32- and 64-bit offsets
//! shifted to follow the parts before them and dictionary keys shifted past the dictionaries
//! before them, against the same joins computed here.

use crate::common;
use crate::emu::*;

#[test]
fn emulated_concat_joins_bits_and_offsets() {
    let Some(emu) = emulator("concat") else {
        return;
    };
    let mut r = common::Rng(0x00c0_ca7e_0000_b175);
    let mut input = Vec::new();
    let mut expect: Vec<Vec<u8>> = Vec::new();
    let cases = 60u32;
    input.extend(cases.to_le_bytes());
    for c in 0..cases {
        let bits = c % 3 == 0;
        let keys = c % 3 == 2;
        let large = c % 4 == 1;
        let parts = 1 + r.below(6) as usize;
        let lens: Vec<u64> = (0..parts)
            .map(|_| {
                if r.below(5) == 0 {
                    0
                } else {
                    r.below(if c % 10 == 0 { 700 } else { 70 })
                }
            })
            .collect();
        let total: u64 = lens.iter().sum();
        input.extend(
            (if bits {
                0u32
            } else if keys {
                2
            } else {
                1
            })
            .to_le_bytes(),
        );
        input.extend((large as u32).to_le_bytes());
        input.extend((parts as u32).to_le_bytes());
        input.extend(total.to_le_bytes());
        if bits {
            let mut want = vec![false; total as usize];
            let mut at = 0usize;
            for &n in &lens {
                let present = r.below(3) != 0;
                input.extend(n.to_le_bytes());
                input.extend((present as u32).to_le_bytes());
                if present {
                    let mut bytes = vec![0u8; (n as usize).div_ceil(8)];
                    for i in 0..n as usize {
                        let b = r.below(2) == 1;
                        if b {
                            bytes[i / 8] |= 1 << (i % 8);
                        }
                        want[at + i] = b;
                    }
                    // bits past the part's end are not copied
                    if n % 8 != 0 {
                        let last = bytes.len() - 1;
                        bytes[last] |= 0xffu8 << (n % 8);
                    }
                    input.extend(bytes);
                } else {
                    want[at..at + n as usize].fill(true);
                }
                input.extend(0i64.to_le_bytes());
                at += n as usize;
            }
            let mut words = vec![0u8; (total as usize).div_ceil(32) * 4];
            for (i, &b) in want.iter().enumerate() {
                if b {
                    words[i / 8] |= 1 << (i % 8);
                }
            }
            expect.push(words);
        } else if keys {
            // each part's keys index its own dictionary of `size` values; joined, they follow
            // the dictionaries before them
            let mut want: Vec<i64> = Vec::new();
            let mut base = 0i64;
            for &n in &lens {
                let size = 1 + r.below(50) as i64;
                let part: Vec<i64> = (0..n).map(|_| r.below(size as u64) as i64).collect();
                input.extend(n.to_le_bytes());
                input.extend(1u32.to_le_bytes());
                for k in &part {
                    match large {
                        true => input.extend(k.to_le_bytes()),
                        false => input.extend((*k as i32).to_le_bytes()),
                    }
                }
                input.extend(base.to_le_bytes());
                want.extend(part.iter().map(|k| k + base));
                base += size;
            }
            let mut bytes = Vec::new();
            for k in want {
                match large {
                    true => bytes.extend(k.to_le_bytes()),
                    false => bytes.extend((k as i32).to_le_bytes()),
                }
            }
            expect.push(bytes);
        } else {
            // each part's offsets start anywhere; the joined ones follow on from the part
            // before (its first offset shifted to the sum of the sizes before it)
            let mut want: Vec<i64> = vec![0];
            let mut base = 0i64;
            for &n in &lens {
                let first = r.below(1000) as i64;
                let mut offs = vec![first];
                for _ in 0..n {
                    let next = offs.last().unwrap() + r.below(20) as i64;
                    offs.push(next);
                }
                input.extend(n.to_le_bytes());
                input.extend(1u32.to_le_bytes());
                for o in &offs {
                    match large {
                        true => input.extend(o.to_le_bytes()),
                        false => input.extend((*o as i32).to_le_bytes()),
                    }
                }
                input.extend((base - first).to_le_bytes());
                want.extend(offs[1..].iter().map(|o| o - first + base));
                base += offs[n as usize] - first;
            }
            let mut bytes = Vec::new();
            for o in want {
                match large {
                    true => bytes.extend(o.to_le_bytes()),
                    false => bytes.extend((o as i32).to_le_bytes()),
                }
            }
            expect.push(bytes);
        }
    }
    let out = run_emulator(&emu, &input, "concat");
    let mut at = 0;
    for (c, want) in expect.iter().enumerate() {
        assert_eq!(&out[at..at + want.len()], &want[..], "case {c}");
        at += want.len();
    }
    assert_eq!(at, out.len());
    eprintln!("concat_bits, concat_offsets: {cases} joins as computed on the host");
}
