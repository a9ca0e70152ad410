//! The CUDA kernels' own sources run on the host, through a small emulation of the CUDA
//! features they use (`tests/emu/cuda_host.h`: one host thread per CUDA thread, barriers for
//! `__syncthreads` / `__syncwarp` / warp intrinsics). This checks kernel logic on every machine
//! — CI has no GPU — against the same oracles the GPU tests use; speed is measured on the GPU.
//!
//! Needs a C++20 compiler (`g++`, or `CXX`); without one each test prints why it is skipped.
//! The emulators are built with AddressSanitizer and UBSan where the compiler has them
//! (`CUPARQUET_EMU_SANITIZE=0` turns them off), and every buffer a kernel may touch is
//! allocated to its exact size: a kernel reading or writing past one fails the test, as
//! compute-sanitizer's memcheck would on the device.

mod common;
mod emu;
mod reference_decoder;

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
    let mut b = (jobs.len() as u32).to_le_bytes().to_vec();
    for j in jobs {
        b.extend((j.src.len() as u64).to_le_bytes());
        b.extend((j.dst_len as u64).to_le_bytes());
        b.extend(&j.src);
    }
    b
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
    use cuparquet::internals::page_header::{page_table, PageKind};
    let mut jobs = Vec::new();
    let mut want = Vec::new();
    for f in corpus_files("data", &[".parquet"]) {
        use parquet::file::reader::FileReader;
        let Ok(reader) =
            parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&f).unwrap())
        else {
            continue;
        };
        let bytes = std::fs::read(&f).unwrap();
        for rg in reader.metadata().row_groups() {
            for c in rg.columns() {
                if c.compression() != parquet::basic::Compression::SNAPPY {
                    continue;
                }
                let (start, len) = c.byte_range();
                let Some(chunk) = bytes.get(start as usize..(start + len) as usize) else {
                    continue;
                };
                let Ok(pages) = page_table(chunk) else {
                    continue;
                };
                for p in pages {
                    let levels = match (&p.header.kind, &p.header.data_v2) {
                        (PageKind::DataV2, Some(v2)) if !v2.is_compressed => continue,
                        (PageKind::DataV2, Some(v2)) => {
                            (v2.def_levels_byte_length + v2.rep_levels_byte_length) as usize
                        }
                        (PageKind::Index, _) => continue,
                        _ => 0,
                    };
                    let data = &chunk[p.data()];
                    let Some(src) = data.get(levels..) else {
                        continue;
                    };
                    let Ok(out) = snap::raw::Decoder::new().decompress_vec(src) else {
                        continue;
                    };
                    jobs.push(Job {
                        src: src.to_vec(),
                        dst_len: p.header.uncompressed_size as usize - levels,
                    });
                    want.push(out);
                }
            }
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

/// The fixed-width decode kernel over the flat fixed-width columns of corpus and generated
/// files (pages decompressed on the host, as the GPU path does for codecs other than SNAPPY),
/// equal to the reference decoder (itself checked against arrow-rs in tests/reference.rs).
#[test]
fn emulated_fixed_width_kernel_equals_the_reference_decoder() {
    let Some(emu) = emulator("decode_fixed") else {
        return;
    };
    use cuparquet::internals::gpu::conversion_code;
    use cuparquet::internals::gpu_plan::Conversion;
    let keep = |g: &cuparquet::internals::gpu_plan::GpuColumn| {
        conversion_code(g.conversion).is_some() && !g.via_bytes
    };
    let (mut cols_ok, mut pages_run, mut delta) = (0usize, 0usize, 0usize);
    for (f, chunks) in flat_chunks(keep, 150, 200_000) {
        let (inp, n_pages) = fixed_width_input(&chunks);
        let out = run_emulator(&emu, &inp, &f.display().to_string());
        let mut cur = Cursor(&out, 0);
        for c in &chunks {
            let col = &c.col;
            let nulls = cur.u64() as usize;
            let (alloc, arrow_len) = if col.conversion == Conversion::Boolean {
                (c.rows.div_ceil(32) * 4, c.rows.div_ceil(8))
            } else {
                (c.rows * col.output_width, c.rows * col.output_width)
            };
            let values = cur.bytes(alloc);
            let validity = (col.max_def_level > 0).then(|| cur.bytes(c.rows.div_ceil(32) * 4));
            let got = array_from(
                &c.data_type,
                c.rows,
                nulls,
                validity,
                &[&values[..arrow_len]],
                &c.name,
            );
            assert_eq!(nulls, c.want.null_count(), "{}: null count", c.name);
            assert!(
                got.as_ref() == c.want.as_ref(),
                "{} ({:?}): values differ from the reference",
                c.name,
                col.conversion
            );
            cols_ok += 1;
            delta += usize::from(c.delta_or_split);
        }
        let errors: Vec<u32> = (0..n_pages).map(|_| cur.u32()).collect();
        assert!(
            errors.iter().all(|&e| e == 0),
            "{}: pages the reference decodes set error bits {errors:?}",
            f.display()
        );
        pages_run += n_pages as usize;
    }
    eprintln!(
        "emulated fixed-width kernel: {cols_ok} column chunks ({delta} DELTA_BINARY_PACKED or \
         BYTE_STREAM_SPLIT), {pages_run} pages equal to the reference"
    );
    assert!(cols_ok > 100, "{cols_ok}");
    assert!(delta > 20, "{delta} DELTA or BYTE_STREAM_SPLIT chunks");
}

/// The fixed-width kernel's input for `chunks` (one column each, every other one cut in two
/// windows): (input, page jobs).
fn fixed_width_input(chunks: &[FlatChunk]) -> (Vec<u8>, u32) {
    use cuparquet::internals::gpu::conversion_code;
    use cuparquet::internals::gpu_plan::Conversion;
    let (mut cols, mut pages) = (Vec::new(), Vec::new());
    let mut n_pages = 0;
    for (k, c) in chunks.iter().enumerate() {
        let col = &c.col;
        // every other chunk cut in two windows at an odd row, as batches cut row groups
        let cut = (k % 2 == 1).then_some(c.rows as u64 / 2 + 7);
        let (dict, n) = serialize_pages(
            &c.table,
            &c.data,
            k as u32,
            (col.max_def_level, col.max_rep_level),
            cut,
            &mut pages,
        );
        n_pages += n;
        let alloc = if col.conversion == Conversion::Boolean {
            c.rows.div_ceil(32) * 4
        } else {
            c.rows * col.output_width
        };
        let conv = conversion_code(col.conversion).unwrap();
        let physical = cuparquet::internals::gpu::physical_code(&col.physical);
        for v in [
            conv,
            col.physical_width as i32,
            col.output_width as i32,
            physical,
        ] {
            cols.put_i32(v);
        }
        cols.put_u64(c.rows as u64);
        cols.put_u32(u32::from(col.max_def_level > 0));
        cols.put_u32(u32::from(dict.is_some()));
        let (entries, dict_bytes) = dict.unwrap_or_default();
        cols.put_i32(entries);
        cols.put_u64(dict_bytes.len() as u64);
        cols.extend(&dict_bytes);
        cols.put_u64(alloc as u64);
    }
    (pass_input(chunks.len(), cols, n_pages, pages), n_pages)
}

/// The fixed-width kernel on corrupted DELTA_BINARY_PACKED and BYTE_STREAM_SPLIT pages (bytes
/// of every page changed at random: block headers, bit widths, miniblock counts, first values):
/// under the sanitizers the emulator never reads or writes out of bounds nor hangs (it exits
/// cleanly), and pages are reported bad.
#[test]
fn emulated_fixed_width_kernel_survives_corrupted_delta_pages() {
    let Some(emu) = emulator("decode_fixed") else {
        return;
    };
    use cuparquet::internals::gpu::conversion_code;
    let keep = |g: &cuparquet::internals::gpu_plan::GpuColumn| {
        conversion_code(g.conversion).is_some() && !g.via_bytes
    };
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let (mut runs, mut reported, mut pages_run) = (0usize, 0usize, 0usize);
    for (f, chunks) in flat_chunks(keep, 40, 20_000) {
        let mut chunks: Vec<FlatChunk> = chunks.into_iter().filter(|c| c.delta_or_split).collect();
        if chunks.is_empty() {
            continue;
        }
        for c in &mut chunks {
            for d in &mut c.data {
                let mut b = d.bytes.to_vec();
                // the first bytes (levels, the DELTA header) more often than the rest
                for k in 0..b.len().div_ceil(48) {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let span = if k % 2 == 0 { 24.min(b.len()) } else { b.len() };
                    let at = (state >> 33) as usize % span.max(1);
                    if let Some(x) = b.get_mut(at) {
                        *x ^= (state >> 13) as u8 | 1;
                    }
                }
                d.bytes = b.into();
            }
        }
        let (inp, n_pages) = fixed_width_input(&chunks);
        let out = run_emulator(&emu, &inp, &format!("{} (corrupted)", f.display()));
        // the page errors are the output's last 4 * n_pages bytes
        let errors = &out[out.len() - 4 * n_pages as usize..];
        runs += 1;
        pages_run += n_pages as usize;
        reported += errors
            .chunks(4)
            .filter(|e| u32::from_le_bytes([e[0], e[1], e[2], e[3]]) != 0)
            .count();
    }
    eprintln!(
        "emulated fixed-width kernel on corrupted DELTA / BYTE_STREAM_SPLIT pages: {runs} files, \
         {pages_run} pages, {reported} reported bad"
    );
    assert!(
        runs >= 4 && reported > 0,
        "{runs} runs, {reported} with errors"
    );
}

/// The BYTE_ARRAY kernels (dictionary entries, sizes, offsets, characters, UTF-8 check),
/// orchestrated as the GPU path does, over the flat string/binary columns of corpus and
/// generated files, equal to the reference decoder.
#[test]
fn emulated_byte_array_kernels_equal_the_reference_decoder() {
    let Some(emu) = emulator("decode_bytes") else {
        return;
    };
    let (cols_ok, pages_run, delta, kept) = byte_array_kernels_on(&emu, false);
    eprintln!(
        "emulated byte-array kernels: {cols_ok} column chunks ({delta} DELTA_LENGTH_BYTE_ARRAY \
         or DELTA_BYTE_ARRAY, {kept} kept dictionaries), {pages_run} pages equal to the reference"
    );
    assert!(cols_ok > 50, "{cols_ok}");
    assert!(delta > 5, "{delta} DELTA byte-array chunks");
    assert!(kept > 5, "{kept} kept dictionaries");
}

/// The DELTA byte-array chunks again, through the kernels built with segments of 3 values
/// (`tests/emu/decode_bytes_segments_main.cpp`), so that every DELTA_BYTE_ARRAY page of more
/// than a few values spreads over many blocks and its prefixes reach across segments (the GPU's
/// segments of 2,048 values are longer than most test pages).
#[test]
fn emulated_delta_byte_arrays_across_segments_equal_the_reference_decoder() {
    let Some(emu) = emulator("decode_bytes_segments") else {
        return;
    };
    let (cols_ok, pages_run, delta, _) = byte_array_kernels_on(&emu, true);
    eprintln!(
        "emulated DELTA byte-array kernels, segments of 3 values: {cols_ok} column chunks, \
         {pages_run} pages equal to the reference"
    );
    assert!(delta > 5, "{delta} DELTA byte-array chunks");
}

/// Runs the byte-array emulator `emu` over the flat string/binary chunks of corpus and
/// generated files (only DELTA ones when `delta_only`), checking each against the reference
/// decoder: (chunks equal, pages run, DELTA chunks, kept dictionaries).
fn byte_array_kernels_on(emu: &std::path::Path, delta_only: bool) -> (usize, usize, usize, usize) {
    use cuparquet::internals::gpu_plan::Conversion;
    let keep = |g: &cuparquet::internals::gpu_plan::GpuColumn| g.conversion == Conversion::Bytes;
    let (mut cols_ok, mut pages_run, mut delta, mut kept) = (0usize, 0usize, 0usize, 0usize);
    for (f, mut chunks) in flat_chunks(keep, 100, 100_000) {
        // kept dictionaries whose pages are not all dictionary-encoded go to the host
        chunks.retain(|c| !c.col.keys || dictionary_pages_only(&c.table));
        chunks.retain(|c| !delta_only || c.delta_or_split);
        if chunks.is_empty() {
            continue;
        }
        let (inp, n_dicts, n_pages) = byte_array_input(&chunks);
        let out = run_emulator(emu, &inp, &f.display().to_string());
        let mut cur = Cursor(&out, 0);
        let stage = cur.u32();
        let errors: Vec<u32> = (0..n_dicts + n_pages as usize).map(|_| cur.u32()).collect();
        assert_eq!(
            stage,
            0,
            "{}: kernels report errors {errors:?} on pages the reference decodes",
            f.display()
        );
        for c in &chunks {
            let col = &c.col;
            let nulls = cur.u64() as usize;
            let bad = cur.u64();
            let n = cur.u64() as usize;
            let strings = cur.u64() as usize;
            let offsets = cur.bytes((strings + 1) * if col.large_offsets { 8 } else { 4 });
            let chars = cur.bytes(n);
            let validity = (col.max_def_level > 0).then(|| cur.bytes(c.rows.div_ceil(32) * 4));
            assert_eq!(
                bad,
                u64::MAX,
                "{}: valid UTF-8 reported bad at row {bad}",
                c.name
            );
            let got = if col.keys {
                // the keys, and the dictionary's entries as its values
                let keys = if c.rows > 0 {
                    cur.bytes(c.rows * 4)
                } else {
                    Vec::new()
                };
                let arrow::datatypes::DataType::Dictionary(_, value_type) = &c.data_type else {
                    panic!("{}: a kept dictionary of {}", c.name, c.data_type);
                };
                let values = array_from(value_type, strings, 0, None, &[&offsets, &chars], &c.name);
                let keys = array_from(
                    &arrow::datatypes::DataType::Int32,
                    c.rows,
                    nulls,
                    validity,
                    &[&keys],
                    &c.name,
                );
                let int32_keys = arrow::datatypes::DataType::Dictionary(
                    Box::new(arrow::datatypes::DataType::Int32),
                    value_type.clone(),
                );
                let data = keys
                    .to_data()
                    .into_builder()
                    .data_type(int32_keys)
                    .child_data(vec![values.to_data()])
                    .build()
                    .unwrap_or_else(|e| panic!("{}: not a valid dictionary: {e}", c.name));
                kept += 1;
                // the harness's keys are 4 bytes: as the column's key type for the comparison
                arrow::compute::cast(&arrow::array::make_array(data), &c.data_type).unwrap()
            } else {
                array_from(
                    &c.data_type,
                    c.rows,
                    nulls,
                    validity,
                    &[&offsets, &chars],
                    &c.name,
                )
            };
            assert_eq!(nulls, c.want.null_count(), "{}: null count", c.name);
            assert!(
                got.as_ref() == c.want.as_ref(),
                "{}: values differ from the reference",
                c.name
            );
            cols_ok += 1;
            delta += usize::from(c.delta_or_split);
        }
        pages_run += n_pages as usize;
    }
    (cols_ok, pages_run, delta, kept)
}

/// Whether every data page of a chunk's page table is dictionary-encoded.
fn dictionary_pages_only(table: &[cuparquet::internals::page_header::PageEntry]) -> bool {
    use cuparquet::internals::page_header::PageKind;
    // PLAIN_DICTIONARY (2) and RLE_DICTIONARY (8)
    table.iter().all(|p| match p.header.kind {
        PageKind::DataV1 => p
            .header
            .data_v1
            .is_some_and(|h| matches!(h.encoding, 2 | 8)),
        PageKind::DataV2 => p
            .header
            .data_v2
            .is_some_and(|h| matches!(h.encoding, 2 | 8)),
        _ => true,
    })
}

/// The byte-array kernels' input for `chunks` (one column each): (input, dictionaries, pages).
fn byte_array_input(chunks: &[FlatChunk]) -> (Vec<u8>, usize, u32) {
    let (mut cols, mut pages) = (Vec::new(), Vec::new());
    let (mut n_pages, mut n_dicts) = (0, 0);
    for (k, c) in chunks.iter().enumerate() {
        let col = &c.col;
        // every other chunk cut in two windows at an odd row, as batches cut row groups
        let cut = (k % 2 == 1).then_some(c.rows as u64 / 2 + 7);
        let (dict, n) = serialize_pages(
            &c.table,
            &c.data,
            k as u32,
            (col.max_def_level, col.max_rep_level),
            cut,
            &mut pages,
        );
        n_pages += n;
        cols.put_u64(c.rows as u64);
        for v in [
            col.max_def_level > 0,
            col.large_offsets,
            col.utf8,
            dict.is_some(),
            col.keys,
        ] {
            cols.put_u32(u32::from(v));
        }
        n_dicts += usize::from(dict.is_some());
        let (entries, dict_bytes) = dict.unwrap_or_default();
        cols.put_i32(entries);
        cols.put_u64(dict_bytes.len() as u64);
        cols.extend(&dict_bytes);
    }
    (
        pass_input(chunks.len(), cols, n_pages, pages),
        n_dicts,
        n_pages,
    )
}

/// The byte-array kernels on corrupted pages (bytes of every page and dictionary changed at
/// random, lengths included): under the sanitizers, the emulator never reads or writes out of
/// bounds (it exits cleanly), and some pages are reported bad.
#[test]
fn emulated_byte_array_kernels_survive_corrupted_pages() {
    let Some(emu) = emulator("decode_bytes") else {
        return;
    };
    use cuparquet::internals::gpu_plan::Conversion;
    let keep = |g: &cuparquet::internals::gpu_plan::GpuColumn| g.conversion == Conversion::Bytes;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let (mut runs, mut reported) = (0usize, 0usize);
    for (f, mut chunks) in flat_chunks(keep, 20, 20_000).into_iter().take(40) {
        for c in &mut chunks {
            for d in &mut c.data {
                let mut b = d.bytes.to_vec();
                for _ in 0..b.len().div_ceil(64) {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let at = (state >> 33) as usize % b.len().max(1);
                    if let Some(x) = b.get_mut(at) {
                        *x ^= (state >> 13) as u8 | 1;
                    }
                }
                d.bytes = b.into();
            }
        }
        let (inp, _, _) = byte_array_input(&chunks);
        let out = run_emulator(&emu, &inp, &format!("{} (corrupted)", f.display()));
        runs += 1;
        reported += usize::from(out.first_chunk::<4>().is_some_and(|s| *s != [0; 4]));
    }
    eprintln!(
        "emulated byte-array kernels on corrupted pages: {runs} files, {reported} reported errors"
    );
    assert!(
        runs > 10 && reported > 0,
        "{runs} runs, {reported} with errors"
    );
}

/// The page-header kernel (count pass, fill pass) against its host twin: on every column chunk
/// of the corpus and the generated files, and on thousands of corrupted copies of them (bytes
/// changed, chunks cut short) — the same pages where the twin succeeds, an error where it fails.
#[test]
fn emulated_page_header_kernel_agrees_with_the_host_twin() {
    let Some(emu) = emulator("page_headers") else {
        return;
    };
    use cuparquet::internals::page_header::page_table;
    use cuparquet::{Device, ParquetGpuReader};
    let dir = tempfile::tempdir().unwrap();
    let mut files = corpus_files("data", &[".parquet"]);
    files.extend(generate_corpus(dir.path()).into_iter().map(|(_, p)| p));
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    for f in &files {
        let Ok(r) = ParquetGpuReader::builder(f)
            .with_device(Device::Host)
            .build()
        else {
            continue;
        };
        let bytes = std::fs::read(f).unwrap();
        for c in &r.plan().chunks {
            if c.len() <= 4 << 20 {
                chunks.push(bytes[c.range.start as usize..c.range.end as usize].to_vec());
            }
        }
    }
    let good = chunks.len();
    let mut rng = Rng(0x5eed);
    for k in 0..3000 {
        let mut c = chunks[(rng.next() as usize) % good].clone();
        if c.is_empty() {
            continue;
        }
        if k % 4 == 0 {
            let cut = (rng.next() as usize) % c.len();
            c.truncate(cut);
        } else {
            // corrupt bytes near the start, where the first header is
            for _ in 0..1 + rng.next() % 4 {
                let span = c.len().min(64);
                let at = (rng.next() as usize) % span;
                c[at] = rng.next() as u8;
            }
        }
        chunks.push(c);
    }
    let mut inp = Vec::new();
    inp.put_u32(chunks.len() as u32);
    for c in &chunks {
        inp.put_u64(c.len() as u64);
        inp.extend(c);
    }
    let out = run_emulator(&emu, &inp, "page headers");
    let i32_at = |at: usize| i32::from_le_bytes(out[at..at + 4].try_into().unwrap());
    let i64_at = |at: usize| i64::from_le_bytes(out[at..at + 8].try_into().unwrap());
    let mut at = 8 * chunks.len();
    let (mut agree_ok, mut agree_err) = (0, 0);
    for (k, c) in chunks.iter().enumerate() {
        let (err, count) = (i32_at(8 * k) as u32, i32_at(8 * k + 4));
        let host = page_table(c);
        match (&host, err) {
            (Ok(pages), 0) => {
                assert_eq!(count as usize, pages.len(), "chunk {k}: page count");
                for q in pages {
                    let h = &q.header;
                    let p = |o: usize| i32_at(at + o);
                    assert_eq!(i64_at(at) as usize, q.offset, "chunk {k}: header offset");
                    assert_eq!(
                        i64_at(at + 8) as usize,
                        q.offset + h.header_len,
                        "chunk {k}"
                    );
                    assert_eq!(p(20), h.uncompressed_size, "chunk {k}");
                    assert_eq!(p(24), h.compressed_size, "chunk {k}");
                    if p(16) != 1 {
                        // (index pages are skipped by both decoders: their value count is moot)
                        assert_eq!(p(28), h.num_values(), "chunk {k}: kind {} {h:?}", p(16));
                    }
                    if let Some(v2) = h.data_v2 {
                        assert_eq!(p(32), v2.encoding, "chunk {k}");
                        assert_eq!(p(52), v2.def_levels_byte_length, "chunk {k}");
                        assert_eq!(p(56), v2.rep_levels_byte_length, "chunk {k}");
                        assert_eq!(p(60) == 1, v2.is_compressed, "chunk {k}");
                    }
                    if let Some(v1) = h.data_v1 {
                        assert_eq!(p(32), v1.encoding, "chunk {k}");
                    }
                    at += 64;
                }
                agree_ok += 1;
            }
            (Err(_), e) if e != 0 => agree_err += 1,
            (Ok(_), e) => panic!(
                "chunk {k} ({} bytes{}): the kernel reports {e:#x}, the host twin parses it",
                c.len(),
                if k < good { ", uncorrupted" } else { "" }
            ),
            (Err(h), _) => panic!(
                "chunk {k} ({} bytes): the host twin fails ({h}), the kernel does not",
                c.len()
            ),
        }
    }
    eprintln!(
        "emulated page headers: {agree_ok} chunks parsed alike, {agree_err} rejected by both \
         ({good} uncorrupted)"
    );
    assert!(
        agree_ok > 500 && agree_err > 500,
        "{agree_ok} / {agree_err}"
    );
}
