//! The LZ4 block check (`lz4_check` in `src/decode/gpu/kernels/snappy.cu`), which decides
//! whether a page goes to nvCOMP, run on the host through the CUDA emulation of `tests/emu`
//! (see `tests/emulated.rs`), under AddressSanitizer and UBSan where the compiler has them.
//! The oracle is lz4_flex, arrow-rs's LZ4 decoder: every block it refuses (or that comes out
//! other than the size the page claims) must fail the check, and every block it compresses
//! must pass; damaged blocks come from seeded byte changes, truncations and wrong sizes.

mod common;
mod emu;
mod reference_decoder;

use common::{flip_bytes, Rng};
use emu::*;

/// Runs `lz4_check` over (block, claimed size) pairs: per block its error bits.
fn check(emu: &std::path::Path, jobs: &[(Vec<u8>, usize)]) -> Vec<u32> {
    let mut input = (jobs.len() as u32).to_le_bytes().to_vec();
    for (src, dst_len) in jobs {
        input.extend((src.len() as u64).to_le_bytes());
        input.extend((*dst_len as u64).to_le_bytes());
        input.extend(src);
    }
    run_emulator_with(emu, &input, "lz4_check", &["lz4"])
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// Whether lz4_flex decompresses `src` into exactly `dst_len` bytes.
fn lz4_flex_reads(src: &[u8], dst_len: usize) -> bool {
    let mut out = vec![0u8; dst_len];
    matches!(lz4_flex::block::decompress_into(src, &mut out), Ok(n) if n == dst_len)
}

/// Data of several shapes: runs, a small alphabet, text-like repeats, random bytes.
fn data(r: &mut Rng, len: usize, shape: u64) -> Vec<u8> {
    (0..len)
        .map(|i| match shape {
            0 => (i / 300) as u8,
            1 => b"abcd"[r.below(4) as usize],
            2 => b"the quick brown fox jumps over the lazy dog "[i % 44],
            _ => r.next() as u8,
        })
        .collect()
}

#[test]
fn emulated_lz4_check_refuses_what_lz4_flex_refuses() {
    let Some(emu) = emulator("snappy") else {
        return;
    };
    let mut r = Rng(0x1234_5678_9abc_def1);
    // hand-made blocks: one literal then a copy from 5 bytes back (before the start), and the
    // same with offset 1 (valid: 1 + 4 bytes); offset 0; a literal run cut short
    let mut jobs: Vec<(Vec<u8>, usize)> = vec![
        (vec![0x10, b'a', 5, 0], 5),
        (vec![0x10, b'a', 1, 0, 0x00], 5),
        (vec![0x10, b'a', 0, 0, 0x00], 5),
        (vec![0x30, b'a', b'b'], 3),
    ];
    let mut valid = Vec::new();
    for (k, len) in [1usize, 15, 16, 300, 4096, 70_000, 300_000]
        .into_iter()
        .enumerate()
    {
        for shape in 0..4 {
            let raw = data(&mut r, len, shape);
            let block = lz4_flex::block::compress(&raw);
            valid.push(jobs.len());
            jobs.push((block.clone(), raw.len()));
            // damaged copies: bytes changed, cut short, wrong claimed sizes
            let mutants = if len > 100_000 { 6 } else { 24 + 4 * k };
            for m in 0..mutants {
                let mut b = block.clone();
                let mut claim = raw.len();
                match m % 4 {
                    0 | 1 => flip_bytes(&mut r, &mut b),
                    2 => b.truncate(r.below(b.len() as u64) as usize),
                    _ => {
                        claim = if r.next() & 1 == 0 {
                            claim + 1
                        } else {
                            claim - 1
                        }
                    }
                }
                jobs.push((b, claim));
            }
        }
    }
    let errs = check(&emu, &jobs);
    assert_eq!(errs.len(), jobs.len());
    let (mut refused, mut stricter) = (0, 0);
    for (k, ((src, dst_len), &e)) in jobs.iter().zip(&errs).enumerate() {
        let reads = lz4_flex_reads(src, *dst_len);
        if valid.contains(&k) {
            assert!(reads, "block {k}: lz4_flex reads its own output");
            assert_eq!(
                e,
                0,
                "block {k} of {} bytes → {dst_len}: refused",
                src.len()
            );
        }
        if !reads {
            assert_ne!(
                e, 0,
                "block {k} ({src:?}, claims {dst_len}): lz4_flex refuses it"
            );
            refused += 1;
        } else if e != 0 {
            stricter += 1;
        }
    }
    assert_eq!(&errs[..4], &[0x4, 0, 0x4, 0x1], "the hand-made blocks");
    // the damaged blocks are mostly refused by both; a few pass both (a changed literal)
    assert!(
        refused > jobs.len() / 3,
        "{refused} refused of {}",
        jobs.len()
    );
    eprintln!(
        "lz4_check: {} blocks, {} valid, {refused} refused by lz4_flex and the check, \
         {stricter} refused by the check alone",
        jobs.len(),
        valid.len()
    );
}
