//! The GZIP kernel (`gzip_pages` in `src/decode/gpu/kernels/inflate.cu`) run on the host through
//! the CUDA emulation of `tests/emulated/emu` (see `tests/emulated/kernels.rs`), under AddressSanitizer and UBSan
//! where the compiler has them. The oracle is flate2's `MultiGzDecoder`, the parquet crate's
//! GZIP reader: every page the kernel inflates must be exactly what flate2 reads (and exactly
//! the size the page claims), and every well-formed page — stored, fixed and dynamic blocks,
//! every level, several members, names, comments and extra fields in the header — must be
//! inflated by the kernel. Damaged pages come from seeded byte changes, truncations, wrong
//! sizes and trailing bytes; the kernel may refuse more than flate2 (the host then reads those),
//! never less, and never writes past a page's output.

use crate::common;
use crate::emu;

use std::io::{Read, Write};

use common::{flip_bytes, Rng};
use emu::*;

/// What flate2 reads of `src` as the parquet crate does (every member), if it reads it.
fn flate2_reads(src: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(src)
        .read_to_end(&mut out)
        .ok()
        .map(|_| out)
}

/// Runs `gzip_pages` over (page, claimed size) pairs: per page its error bits and output.
fn inflate(emu: &std::path::Path, jobs: &[(Vec<u8>, usize)]) -> Vec<(u32, Vec<u8>)> {
    let input = streams_input(jobs.iter().map(|(s, n)| (s.as_slice(), *n)));
    let out = run_emulator(emu, &input, "gzip_pages");
    let mut at = 0;
    let mut res = Vec::new();
    for (_, n) in jobs {
        let e = u32::from_le_bytes(out[at..at + 4].try_into().unwrap());
        let bytes = out[at + 4..at + 4 + n].to_vec();
        let guard = u32::from_le_bytes(out[at + 4 + n..at + 8 + n].try_into().unwrap());
        assert_eq!(guard, 0xEE, "the byte after a page's output was written");
        res.push((e, bytes));
        at += 8 + n;
    }
    assert_eq!(at, out.len());
    res
}

/// Data of several shapes: runs, a small alphabet, text-like repeats, random bytes, and
/// little-endian integers counting up (a column of ids).
fn data(r: &mut Rng, len: usize, shape: u64) -> Vec<u8> {
    match shape {
        4 => (0..len.div_ceil(8) as u64)
            .flat_map(|i| (1_000_000 + i * 3).to_le_bytes())
            .take(len)
            .collect(),
        _ => (0..len)
            .map(|i| match shape {
                0 => (i / 300) as u8,
                1 => b"abcd"[r.below(4) as usize],
                2 => b"the quick brown fox jumps over the lazy dog "[i % 44],
                _ => r.next() as u8,
            })
            .collect(),
    }
}

fn gzip(raw: &[u8], level: u32) -> Vec<u8> {
    let mut w = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
    w.write_all(raw).unwrap();
    w.finish().unwrap()
}

#[test]
fn emulated_gzip_pages_inflate_as_flate2_reads_them() {
    let Some(emu) = emulator("inflate") else {
        return;
    };
    let mut r = Rng(0x0bad_cafe_1234_5678);
    let mut jobs: Vec<(Vec<u8>, usize)> = Vec::new();
    let mut valid = Vec::new();
    let sizes = [0usize, 1, 3, 100, 1000, 5000, 40_000, 70_000, 300_000];
    for (k, &len) in sizes.iter().enumerate() {
        for shape in 0..5 {
            let raw = data(&mut r, len, shape);
            let levels: &[u32] = if len >= 70_000 {
                &[1, 6]
            } else {
                &[0, 1, 6, 9]
            };
            for &level in levels {
                let page = gzip(&raw, level);
                valid.push(jobs.len());
                jobs.push((page.clone(), raw.len()));
                if len == 0 {
                    continue;
                }
                // damaged copies: bytes changed, cut short, wrong claims, bytes after
                let mutants = if len >= 70_000 { 3 } else { 4 + k };
                for m in 0..mutants {
                    let mut b = page.clone();
                    let mut claim = raw.len();
                    match m % 5 {
                        0 | 1 => flip_bytes(&mut r, &mut b),
                        2 => b.truncate(r.below(b.len() as u64) as usize),
                        3 => {
                            claim = if r.next() & 1 == 0 {
                                claim + 1
                            } else {
                                claim - 1
                            }
                        }
                        _ => b.extend_from_slice(&[0, 0, 0, 0][..1 + r.below(4) as usize]),
                    }
                    jobs.push((b, claim));
                }
            }
        }
    }
    // several members; a header with a name, a comment and an extra field; one with FHCRC
    // (left to the host); an empty member between two
    let (a, b) = (data(&mut r, 3000, 2), data(&mut r, 7000, 3));
    let two = [gzip(&a, 6), gzip(&b, 1)].concat();
    valid.push(jobs.len());
    jobs.push((two.clone(), a.len() + b.len()));
    let three = [gzip(&a, 6), gzip(&[], 6), gzip(&b, 9)].concat();
    valid.push(jobs.len());
    jobs.push((three, a.len() + b.len()));
    jobs.push((two.clone(), a.len())); // claims only the first member
    let mut named = Vec::new();
    let mut w = flate2::GzBuilder::new()
        .filename("part-0.parquet")
        .comment("written by a test")
        .extra(vec![1, 2, 3, 4, 5])
        .write(&mut named, flate2::Compression::default());
    w.write_all(&a).unwrap();
    w.finish().unwrap();
    valid.push(jobs.len());
    jobs.push((named, a.len()));
    let mut hcrc = gzip(&a, 6);
    hcrc[3] |= 2;
    let mut crc = flate2::Crc::new();
    crc.update(&hcrc[..10]);
    let crc16 = (crc.sum() & 0xffff) as u16;
    hcrc.splice(10..10, crc16.to_le_bytes());
    let hcrc_job = jobs.len();
    jobs.push((hcrc, a.len()));

    let got = inflate(&emu, &jobs);
    let (mut refused, mut stricter) = (0, 0);
    for (k, ((src, claim), (e, out))) in jobs.iter().zip(&got).enumerate() {
        let reads = flate2_reads(src).filter(|o| o.len() == *claim);
        match (&reads, e) {
            (Some(want), 0) => assert!(out == want, "page {k}: inflated other than flate2"),
            (None, 0) => panic!(
                "page {k} ({} bytes, claims {claim}): flate2 refuses it, the kernel does not",
                src.len()
            ),
            (None, _) => refused += 1,
            (Some(_), _) => {
                assert!(
                    !valid.contains(&k),
                    "page {k}: well-formed, refused ({e:#x})"
                );
                stricter += 1;
            }
        }
    }
    assert_ne!(got[hcrc_job].0, 0, "FHCRC is left to the host");
    assert!(
        refused > jobs.len() / 4,
        "{refused} refused of {}",
        jobs.len()
    );
    // a changed byte the stream does not notice and the CRC does is refused by both; the
    // kernel is stricter only on what it leaves to the host (FHCRC)
    assert!(stricter <= 1, "{stricter} pages flate2 reads were refused");
}

/// The GZIP pages of the Apache corpus (parquet-mr's and parquet-cpp's writers, one file of
/// concatenated members) and of the generated files (arrow-rs's, data page v1 and v2): every
/// page flate2 reads to its claimed size, the kernel inflates to the same bytes.
fn is_gzip(c: parquet::basic::Compression) -> bool {
    matches!(c, parquet::basic::Compression::GZIP(_))
}

#[test]
fn emulated_gzip_kernel_inflates_corpus_pages() {
    let Some(emu) = emulator("inflate") else {
        return;
    };
    let mut jobs = Vec::new();
    let mut files = 0;
    for f in common::corpus_files("data", &[".parquet"]) {
        let pages = compressed_pages_of(&f, is_gzip);
        files += usize::from(!pages.is_empty());
        jobs.extend(pages);
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, p) in common::generate_corpus(dir.path()) {
        if name.contains("gzip") {
            jobs.extend(compressed_pages_of(&p, is_gzip));
        }
    }
    assert!(
        jobs.len() > 50 && files >= 2,
        "{} GZIP pages, {files} corpus files",
        jobs.len()
    );
    let got = inflate(&emu, &jobs);
    let mut read = 0;
    for (k, ((src, claim), (e, out))) in jobs.iter().zip(&got).enumerate() {
        match flate2_reads(src).filter(|o| o.len() == *claim) {
            Some(want) => {
                assert_eq!(*e, 0, "page {k} ({} bytes): flate2 reads it", src.len());
                assert!(*out == want, "page {k}: inflated other than flate2");
                read += 1;
            }
            None => assert_ne!(*e, 0, "page {k}: flate2 refuses it, the kernel does not"),
        }
    }
    eprintln!(
        "{read} of {} GZIP pages ({files} corpus files and the generated ones) inflated by the \
         emulated kernel as flate2 reads them",
        jobs.len()
    );
}
