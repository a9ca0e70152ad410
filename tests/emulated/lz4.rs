//! The LZ4 block check (`lz4_check` in `src/decode/gpu/kernels/snappy.cu`), which decides
//! whether a page goes to nvCOMP, run on the host through the CUDA emulation of `tests/emulated/emu`
//! (see `tests/emulated/kernels.rs`), under AddressSanitizer and UBSan where the compiler has them.
//! The oracle is lz4_flex, arrow-rs's LZ4 decoder: every block it refuses (or that comes out
//! other than the size the page claims) must fail the check, and every block it compresses
//! must pass; damaged blocks come from seeded byte changes, truncations and wrong sizes.

use crate::common;
use crate::emu;

use common::{flip_bytes, Rng};
use emu::*;

/// The emulator's input for (stream, claimed size) pairs.
fn emulator_input(jobs: &[(Vec<u8>, usize)]) -> Vec<u8> {
    streams_input(jobs.iter().map(|(s, n)| (s.as_slice(), *n)))
}

/// Runs `lz4_check` over (block, claimed size) pairs: per block its error bits.
fn check(emu: &std::path::Path, jobs: &[(Vec<u8>, usize)]) -> Vec<u32> {
    run_emulator_with(emu, &emulator_input(jobs), "lz4_check", &["lz4"])
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

/// A page's LZ4 blocks as (source range, output range), or `None` where the page is left to
/// the host.
type Blocks = Option<Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>>;

/// Runs `lz4_hadoop_blocks` over (page, claimed size) pairs: per page its blocks.
fn hadoop(emu: &std::path::Path, jobs: &[(Vec<u8>, usize)]) -> Vec<Blocks> {
    let out = run_emulator_with(emu, &emulator_input(jobs), "lz4_hadoop_blocks", &["hadoop"]);
    let mut at = 0;
    let word = |at: &mut usize, n: usize| {
        let v = u64::from_le_bytes({
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&out[*at..*at + n]);
            b
        });
        *at += n;
        v
    };
    let mut pages = Vec::new();
    for _ in jobs {
        let count = word(&mut at, 4) as u32 as i32;
        pages.push((count >= 0).then(|| {
            (0..count)
                .map(|_| {
                    let (s, sl, d, dl) = (
                        word(&mut at, 8) as usize,
                        word(&mut at, 8) as usize,
                        word(&mut at, 8) as usize,
                        word(&mut at, 8) as usize,
                    );
                    (s..s + sl, d..d + dl)
                })
                .collect()
        }));
    }
    assert_eq!(at, out.len(), "the emulator's whole output read");
    pages
}

/// What arrow-rs reads from an LZ4 (Hadoop) page claiming `dst_len` bytes: its codec, with the
/// framings it falls back to.
fn arrow_rs_reads(src: &[u8], dst_len: usize) -> Option<Vec<u8>> {
    use parquet::compression::{create_codec, CodecOptionsBuilder};
    let options = CodecOptionsBuilder::default().build();
    let mut c = create_codec(parquet::basic::Compression::LZ4, &options).ok()??;
    let mut v = Vec::new();
    let n = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        c.decompress(src, &mut v, Some(dst_len))
    }))
    .ok()?
    .ok()?;
    (n == dst_len && v.len() == dst_len).then_some(v)
}

/// Hadoop frames of `raw` cut into `parts` (their sizes): (decompressed size, compressed size,
/// an LZ4 block) each, big-endian.
fn hadoop_frames(raw: &[u8], parts: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    for &n in parts {
        let block = lz4_flex::block::compress(&raw[at..at + n]);
        out.extend((n as u32).to_be_bytes());
        out.extend((block.len() as u32).to_be_bytes());
        out.extend(&block);
        at += n;
    }
    assert_eq!(at, raw.len());
    out
}

#[test]
fn emulated_hadoop_frames_read_as_arrow_rs_reads_them() {
    let Some(emu) = emulator("snappy") else {
        return;
    };
    let mut r = Rng(0x0bad_cafe_f00d_1234);
    let mut jobs: Vec<(Vec<u8>, usize)> = Vec::new();
    // (kind, page): pages the device must take: Hadoop frames arrow-rs reads, plain blocks
    let mut must_take: Vec<(usize, &str)> = Vec::new();
    for len in [1usize, 100, 4096, 70_000, 300_000, 1 << 20] {
        for shape in 0..4 {
            let raw = data(&mut r, len, shape);
            // one frame, as arrow-rs and parquet-mr write a page
            let one = hadoop_frames(&raw, &[len]);
            must_take.push((jobs.len(), "one frame"));
            jobs.push((one.clone(), len));
            // several frames of 64 KiB and the rest, as Hadoop's block stream cuts a page
            let mut parts = vec![65_536; len / 65_536];
            if len % 65_536 != 0 {
                parts.push(len % 65_536);
            }
            let several = hadoop_frames(&raw, &parts);
            if arrow_rs_reads(&several, len).is_some() && parts.len() > 1 {
                must_take.push((jobs.len(), "several frames"));
            }
            jobs.push((several.clone(), len));
            // a plain LZ4 block (older parquet-cpp), and the LZ4 frame format
            let block = lz4_flex::block::compress(&raw);
            if block.len() >= 8 {
                must_take.push((jobs.len(), "a plain block"));
            }
            jobs.push((block, len));
            let mut framed = lz4_flex::frame::FrameEncoder::new(Vec::new());
            std::io::Write::write_all(&mut framed, &raw).unwrap();
            jobs.push((framed.finish().unwrap(), len));
            // damaged copies: bytes changed (the frames' sizes among them), cut short, wrong
            // claimed sizes, frames swapped for smaller ones
            for page in [one, several] {
                for m in 0..(if len > 100_000 { 6 } else { 20 }) {
                    let mut b = page.clone();
                    let mut claim = len;
                    match m % 5 {
                        0 => flip_bytes(&mut r, &mut b),
                        1 => {
                            let k = r.below(8.min(b.len() as u64)) as usize;
                            b[k] ^= 1 << r.below(8);
                        }
                        2 => b.truncate(r.below(b.len() as u64) as usize),
                        3 => claim = if m & 1 == 0 { len + 1 } else { len - 1 },
                        _ => b.extend_from_slice(&b.clone()[..8.min(b.len())]),
                    }
                    jobs.push((b, claim));
                }
            }
        }
    }
    // hand-made: a frame of an empty block, a frame of no output, fewer than 8 bytes
    jobs.push((vec![0, 0, 0, 5, 0, 0, 0, 0], 5));
    jobs.push((vec![0, 0, 0, 0, 0, 0, 0, 1, 0], 0));
    jobs.push((vec![0x10, b'a', 1, 0, 0x00], 5));
    let pages = hadoop(&emu, &jobs);
    assert_eq!(pages.len(), jobs.len());
    let (mut taken, mut to_host) = (0, 0);
    for (k, ((src, dst_len), blocks)) in jobs.iter().zip(&pages).enumerate() {
        let Some(blocks) = blocks else {
            to_host += 1;
            assert!(
                !must_take.iter().any(|&(j, _)| j == k),
                "page {k} ({} bytes → {dst_len}): left to the host",
                src.len()
            );
            continue;
        };
        // the blocks tile the output in order and lie within the page
        let mut at = 0;
        for (s, d) in blocks {
            assert!(s.end <= src.len(), "page {k}: a block past the page");
            assert_eq!(d.start, at, "page {k}: blocks out of order");
            at = d.end;
        }
        assert_eq!(
            at, *dst_len,
            "page {k}: the blocks fill other than its size"
        );
        // what the device makes of it: each block as lz4_check and nvCOMP read it (exactly its
        // size, or the chunk goes to the host)
        let mut out = vec![0u8; *dst_len];
        let device_reads = blocks.iter().all(|(s, d)| {
            matches!(
                lz4_flex::block::decompress_into(&src[s.clone()], &mut out[d.clone()]),
                Ok(n) if n == d.len()
            )
        });
        if !device_reads {
            assert!(
                !must_take.iter().any(|&(j, _)| j == k),
                "page {k}: a block of a good page does not read"
            );
            continue;
        }
        taken += 1;
        let want = arrow_rs_reads(src, *dst_len);
        assert_eq!(
            want.as_deref(),
            Some(&out[..]),
            "page {k} ({} bytes → {dst_len}, blocks {blocks:?}): the device's reading is not \
             arrow-rs's",
            src.len()
        );
    }
    eprintln!(
        "lz4_hadoop_blocks: {} pages, {} of them well formed; {taken} read on the device as \
         arrow-rs reads them, {to_host} left to the host",
        jobs.len(),
        must_take.len()
    );
    assert!(taken >= must_take.len());
}
