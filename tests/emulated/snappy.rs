//! The SNAPPY kernels' own sources run on the host through the CUDA emulation of
//! `tests/emulated/emu/cuda_host.h` (see tests/emulated/kernels.rs): whole pages, large pages split by segments
//! into fragments, corpus pages and damaged streams, against the snap crate.

use crate::common;
use crate::emu;

use std::path::Path;

use common::*;
use emu::*;

/// One SNAPPY job: compressed bytes and the size the page header promises.
struct Job {
    src: Vec<u8>,
    dst_len: usize,
}

/// Runs the SNAPPY kernel over `jobs`: per job, its error bits, its output, and whether the
/// byte after the output was left alone.
fn run_snappy(emu: &Path, jobs: &[Job]) -> Vec<(u32, Vec<u8>, bool)> {
    run_snappy_mode(emu, jobs, "pages")
}

fn snappy_input(jobs: &[Job]) -> Vec<u8> {
    streams_input(jobs.iter().map(|j| (j.src.as_slice(), j.dst_len)))
}

/// Runs `snappy_pages` (mode "pages") or `snappy_fragments` ("fragments") over `jobs`.
fn run_snappy_mode(emu: &Path, jobs: &[Job], mode: &str) -> Vec<(u32, Vec<u8>, bool)> {
    let o = run_emulator_with(emu, &snappy_input(jobs), "snappy", &[mode]);
    let mut at = 0;
    jobs.iter()
        .map(|j| {
            let err = u32::from_le_bytes(o[at..at + 4].try_into().unwrap());
            let data = o[at + 4..at + 4 + j.dst_len].to_vec();
            let guard = u32::from_le_bytes(
                o[at + 4 + j.dst_len..at + 8 + j.dst_len]
                    .try_into()
                    .unwrap(),
            );
            at += 8 + j.dst_len;
            (err, data, guard == 0xEE)
        })
        .collect()
}

/// Data of every shape SNAPPY meets in Parquet pages: incompressible bytes (long literals),
/// runs (overlapping copies, offset 1), short repeats (copies of 4..11 bytes with 1-byte
/// offsets), sorted integers, dictionary-like text, and sizes around 64 KiB blocks.
fn samples() -> Vec<Vec<u8>> {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut v: Vec<Vec<u8>> = vec![Vec::new(), vec![7], vec![0; 100_000]];
    v.push((0..70_000).map(|_| r.next() as u8).collect());
    v.push(
        (0..200_000u64)
            .flat_map(|i| (i as i64).to_le_bytes())
            .collect(),
    );
    v.push(
        (0..30_000)
            .flat_map(|i| format!("furiously regular pinto {:05}|", (i * 7919) % 5000).into_bytes())
            .collect(),
    );
    v.push((0..65_536 + 17).map(|i| (i % 251) as u8).collect());
    v.push(
        (0..50_000)
            .map(|_| ["A", "N", "R"][(r.next() % 3) as usize].as_bytes()[0])
            .collect(),
    );
    for n in [
        1usize, 31, 32, 33, 60, 61, 255, 256, 4096, 65_535, 65_536, 65_537,
    ] {
        v.push(
            (0..n)
                .map(|i| (r.next() % 4) as u8 + (i % 3) as u8)
                .collect(),
        );
    }
    v
}

#[test]
fn emulated_snappy_kernel_equals_the_snap_crate() {
    let Some(emu) = emulator("snappy") else {
        return;
    };
    let inputs = samples();
    let jobs = compressed(&inputs);
    for (k, ((err, got, guard), want)) in
        run_snappy(&emu, &jobs).into_iter().zip(&inputs).enumerate()
    {
        assert_eq!(err, 0, "sample {k} ({} bytes): error bits", want.len());
        assert!(guard, "sample {k}: wrote past its output");
        assert!(
            got == *want,
            "sample {k} ({} bytes): output differs",
            want.len()
        );
    }
}

/// A job per input: the input compressed by the snap crate (the reference compressor).
fn compressed(inputs: &[Vec<u8>]) -> Vec<Job> {
    inputs
        .iter()
        .map(|d| Job {
            src: snap::raw::Encoder::new().compress_vec(d).unwrap(),
            dst_len: d.len(),
        })
        .collect()
}

/// Runs `snappy_walk` and `snappy_split` over `jobs`, cut as the decoder cuts them
/// (`segments_of`) or into segments of `seg` bytes: per job, its error bits and its split table.
fn run_snappy_split_with(emu: &Path, jobs: &[Job], seg: Option<u64>) -> Vec<(u32, Vec<u64>)> {
    let mut input = snappy_input(jobs);
    for j in jobs {
        let n = j.src.len() as u64;
        let (size, count) = match seg {
            None => cuparquet::internals::gpu::segments_of(n),
            Some(size) => {
                // at most MAX_SEGMENTS (256) segments a page
                let size = size.max(n.div_ceil(256)).min(n.max(1));
                (size, (n / size).max(1))
            }
        };
        input.extend(size.to_le_bytes());
        input.extend(count.to_le_bytes());
    }
    let o = run_emulator_with(emu, &input, "snappy split", &["split"]);
    let mut at = 0;
    jobs.iter()
        .map(|j| {
            let err = u32::from_le_bytes(o[at..at + 4].try_into().unwrap());
            at += 4;
            let n = j.dst_len.div_ceil(65536);
            let v = (0..n)
                .map(|k| u64::from_le_bytes(o[at + 8 * k..at + 8 * k + 8].try_into().unwrap()))
                .collect();
            at += 8 * n;
            (err, v)
        })
        .collect()
}

/// Runs the split as the decoder does.
fn run_snappy_split(emu: &Path, jobs: &[Job]) -> Vec<(u32, Vec<u64>)> {
    run_snappy_split_with(emu, jobs, None)
}

/// `snappy_split`'s bit for a page parsed whole, by one block (no error).
const WHOLE: u32 = 0x100;

/// A large page parsed by a block per segment (walks from guessed starts, joined where they
/// meet) gives the split table one block gives for the whole page, for segments of any size;
/// where walks do not meet (a long literal across a segment's start) the page is parsed whole
/// (the WHOLE bit) with the same result. Damaged streams fail either way.
#[test]
fn emulated_snappy_segments_find_the_whole_page_split() {
    let Some(emu) = emulator("snappy") else {
        return;
    };
    let mut r = Rng(11);
    let mut inputs: Vec<Vec<u8>> = samples()
        .into_iter()
        .filter(|d| d.len() >= 2 * 65536)
        .collect();
    // dictionary-like text (lineitem's comments), int64s, random doubles, random bytes (a
    // literal of 64 KiB per block: no walks meet)
    let words = [
        "carefully",
        "final",
        "deposits",
        "sleep",
        "quickly",
        "ironic",
        "ideas",
    ];
    inputs.push(
        (0..40_000)
            .flat_map(|_| {
                let n = 2 + r.next() % 6;
                let w: Vec<&str> = (0..n).map(|_| words[(r.next() % 7) as usize]).collect();
                format!("{}|", w.join(" ")).into_bytes()
            })
            .collect(),
    );
    inputs.push(
        (0..100_000i64)
            .flat_map(|i| (i * 37).to_le_bytes())
            .collect(),
    );
    inputs.push(
        (0..40_000)
            .flat_map(|_| (r.next() as f64 / 7.0).to_le_bytes())
            .collect(),
    );
    inputs.push((0..200_000).map(|_| r.next() as u8).collect());
    let jobs = compressed(&inputs);
    let whole = run_snappy_split_with(&emu, &jobs, Some(u64::MAX / 4));
    for (k, (err, table)) in whole.iter().enumerate() {
        assert_eq!(*err, 0, "input {k}: one block's error bits");
        assert!(
            table.iter().filter(|&&s| s != u64::MAX).count() > 1,
            "input {k}: no fragments from one block"
        );
    }
    let mut met = 0;
    for seg in [None, Some(512), Some(1000), Some(4096)] {
        let got = run_snappy_split_with(&emu, &jobs, seg);
        for (k, ((err, table), (_, want))) in got.iter().zip(&whole).enumerate() {
            assert_eq!(err & !WHOLE, 0, "input {k}, segments {seg:?}: error bits");
            assert_eq!(table, want, "input {k}, segments {seg:?}: split table");
            if err & WHOLE == 0 && jobs[k].src.len() as u64 >= 2 * seg.unwrap_or(16384) {
                met += 1;
            }
            eprintln!(
                "input {k} ({} bytes compressed), segments {seg:?}: {}",
                jobs[k].src.len(),
                if err & WHOLE == 0 { "joined" } else { "whole" }
            );
        }
        // random bytes: literals of 64 KiB across every segment start
        let last = got.last().unwrap();
        if jobs.last().unwrap().src.len() as u64 >= 2 * seg.unwrap_or(16384) {
            assert_eq!(
                last.0, WHOLE,
                "random bytes, segments {seg:?}: parsed whole"
            );
        }
    }
    assert!(
        met >= 12,
        "walks met on only {met} pages of several segments"
    );

    // damaged streams: a byte changed at several places fails the page as one block fails it
    let mut bad = Vec::new();
    for (k, j) in jobs.iter().enumerate().take(jobs.len() - 1) {
        for at in [j.src.len() / 3, j.src.len() / 2, j.src.len() - 7] {
            let mut src = j.src.clone();
            src[at] ^= 0x5a;
            bad.push((
                k,
                Job {
                    src,
                    dst_len: j.dst_len,
                },
            ));
        }
    }
    let bad_jobs: Vec<Job> = bad.into_iter().map(|(_, j)| j).collect();
    let one = run_snappy_split_with(&emu, &bad_jobs, Some(u64::MAX / 4));
    for seg in [None, Some(1000)] {
        let got = run_snappy_split_with(&emu, &bad_jobs, seg);
        for (k, ((e1, t1), (e2, t2))) in one.iter().zip(&got).enumerate() {
            assert_eq!(
                *e1 != 0,
                e2 & !WHOLE != 0,
                "damaged {k}, segments {seg:?}: {e1:#x} against {e2:#x}"
            );
            if *e1 == 0 {
                assert_eq!(t1, t2, "damaged {k}, segments {seg:?}: split table");
            }
        }
    }
}

/// Large pages decode as 64 KiB fragments found by `snappy_split`, exactly as gpu.rs builds
/// them (`snappy_fragments_of`): equal to the whole stream, nothing written past a fragment;
/// a stream whose copy reaches into the fragment before (which the reference compressor never
/// writes, but the format allows) fails its fragment, so the page is decoded whole instead.
#[test]
fn emulated_snappy_fragments_equal_the_whole_page() {
    let Some(emu) = emulator("snappy") else {
        return;
    };
    let mut inputs: Vec<Vec<u8>> = samples()
        .into_iter()
        .filter(|d| d.len() >= 2 * 65536)
        .collect();
    assert!(inputs.len() >= 2);
    let mut r = Rng(7);
    // a dictionary page of sorted int64 (the latency file's) and random doubles
    inputs.push((0..100_000i64).flat_map(|i| i.to_le_bytes()).collect());
    inputs.push(
        (0..40_000)
            .flat_map(|_| (r.next() as f64 / 7.0).to_le_bytes())
            .collect(),
    );
    let jobs = compressed(&inputs);
    let splits = run_snappy_split(&emu, &jobs);
    let mut frags = Vec::new();
    let mut owner = Vec::new();
    for (k, ((err, table), j)) in splits.iter().zip(&jobs).enumerate() {
        assert_eq!(err & !WHOLE, 0, "input {k}: split error bits");
        let f = cuparquet::internals::gpu::snappy_fragments_of(
            table,
            j.src.len() as u64,
            j.dst_len as u64,
        )
        .unwrap_or_else(|| panic!("input {k}: no fragments from {table:?}"));
        assert!(f.len() > 1, "input {k}: one fragment");
        for (s, sl, d, dl) in f {
            frags.push(Job {
                src: j.src[s as usize..(s + sl) as usize].to_vec(),
                dst_len: dl as usize,
            });
            owner.push((k, d as usize));
        }
    }
    let mut got: Vec<Vec<u8>> = inputs.iter().map(|d| vec![0xEE; d.len()]).collect();
    for ((err, data, guard), &(k, d)) in run_snappy_mode(&emu, &frags, "fragments")
        .into_iter()
        .zip(&owner)
    {
        assert_eq!(err, 0, "input {k}: fragment at {d}: error bits");
        assert!(guard, "input {k}: fragment at {d} wrote past its end");
        got[k][d..d + data.len()].copy_from_slice(&data);
    }
    for (k, (g, want)) in got.iter().zip(&inputs).enumerate() {
        assert!(g == want, "input {k}: fragments differ from the data");
    }

    // a literal of 64 KiB, then copies from 64 KiB back: fragment 1 reaches into fragment 0
    let lit: Vec<u8> = (0..65536).map(|_| r.next() as u8).collect();
    let copies = 1030usize;
    let n = 65536 + 64 * copies;
    let mut src = Vec::new();
    let mut v = n as u64;
    while v >= 0x80 {
        src.push((v as u8) | 0x80);
        v >>= 7;
    }
    src.push(v as u8);
    src.extend([61 << 2, 0xff, 0xff]); // literal of 65536 bytes (length - 1 in 2 bytes)
    src.extend(&lit);
    for _ in 0..copies {
        src.extend([(63 << 2) | 3, 0, 0, 1, 0]); // copy 64 bytes from 65536 back
    }
    let want = snap::raw::Decoder::new().decompress_vec(&src).unwrap();
    assert_eq!(want.len(), n);
    let job = Job { src, dst_len: n };
    let (err, table) = run_snappy_split(&emu, std::slice::from_ref(&job)).remove(0);
    assert_eq!(err & !WHOLE, 0);
    let f = cuparquet::internals::gpu::snappy_fragments_of(&table, job.src.len() as u64, n as u64)
        .unwrap();
    assert!(f.len() > 1);
    let frag_jobs: Vec<Job> = f
        .iter()
        .map(|&(s, sl, _, dl)| Job {
            src: job.src[s as usize..(s + sl) as usize].to_vec(),
            dst_len: dl as usize,
        })
        .collect();
    let out = run_snappy_mode(&emu, &frag_jobs, "fragments");
    assert_eq!(out[0].0, 0, "the first fragment stands alone");
    assert!(
        out[1..].iter().all(|o| o.0 != 0),
        "later fragments must fail"
    );
    let whole = run_snappy(&emu, std::slice::from_ref(&job)).remove(0);
    assert_eq!(whole.0, 0);
    assert!(whole.1 == want, "the whole page decodes");
}

#[test]
fn emulated_snappy_kernel_decompresses_corpus_pages() {
    let Some(emu) = emulator("snappy") else {
        return;
    };
    let mut jobs = Vec::new();
    let mut want = Vec::new();
    for f in corpus_files("data", &[".parquet"]) {
        let pages = compressed_pages_of(&f, |c| c == parquet::basic::Compression::SNAPPY);
        for (src, dst_len) in pages {
            let Ok(out) = snap::raw::Decoder::new().decompress_vec(&src) else {
                continue;
            };
            jobs.push(Job { src, dst_len });
            want.push(out);
        }
    }
    assert!(jobs.len() > 50, "{} SNAPPY pages", jobs.len());
    let got = run_snappy(&emu, &jobs);
    for (k, ((err, out, guard), w)) in got.into_iter().zip(&want).enumerate() {
        assert!(guard, "page {k}: wrote past its output");
        if out.len() == w.len() {
            assert_eq!(err, 0, "page {k}");
            assert!(out == *w, "page {k}: output differs");
        } else {
            assert_ne!(err, 0, "page {k}: size mismatch not reported");
        }
    }
    eprintln!(
        "{} corpus SNAPPY pages decompressed by the emulated kernel",
        want.len()
    );
}

#[test]
fn emulated_snappy_kernel_rejects_bad_streams_without_writing_out_of_bounds() {
    let Some(emu) = emulator("snappy") else {
        return;
    };
    let good = snap::raw::Encoder::new()
        .compress_vec(
            &(0..20_000u32)
                .flat_map(|i| (i % 97).to_le_bytes())
                .collect::<Vec<u8>>(),
        )
        .unwrap();
    let n = 80_000;
    let mut r = Rng(42);
    let mut jobs = vec![
        // truncated at every kind of place
        Job {
            src: good[..good.len() / 2].to_vec(),
            dst_len: n,
        },
        Job {
            src: good[..3].to_vec(),
            dst_len: n,
        },
        // promised size smaller / larger than the stream's
        Job {
            src: good.clone(),
            dst_len: n - 1,
        },
        Job {
            src: good.clone(),
            dst_len: n + 1,
        },
        // a copy before the start of the output: tag 0b01 (1-byte offset) first
        Job {
            src: vec![4, 0b0000_0001, 9],
            dst_len: 4,
        },
        // offset 0
        Job {
            src: vec![4, 0b0000_0010, 0, 0],
            dst_len: 4,
        },
        // a literal longer than the input
        Job {
            src: vec![10, 9 << 2, 1, 2],
            dst_len: 10,
        },
        // an unterminated length
        Job {
            src: vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
            dst_len: 0,
        },
    ];
    for _ in 0..200 {
        // random corruption of a good stream
        let mut s = good.clone();
        for _ in 0..1 + r.next() % 8 {
            let at = (r.next() as usize) % s.len();
            s[at] = r.next() as u8;
        }
        jobs.push(Job { src: s, dst_len: n });
    }
    let got = run_snappy(&emu, &jobs);
    for (k, (err, _, guard)) in got.iter().enumerate() {
        assert!(guard, "job {k}: wrote past its output");
        if k < 8 {
            assert_ne!(*err, 0, "job {k}: a malformed stream passed");
        }
    }
}
