//! The CUDA kernels' own sources run on the host, through a small emulation of the CUDA
//! features they use (`tests/emu/cuda_host.h`: one host thread per CUDA thread, barriers for
//! `__syncthreads` / `__syncwarp` / warp intrinsics). This checks kernel logic on every machine
//! — CI has no GPU — against the same oracles the GPU tests use; speed is measured on the GPU.
//!
//! Needs a C++20 compiler (`g++`, or `CXX`); without one each test prints why it is skipped.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

/// Builds `tests/emu/{name}_main.cpp` with the kernel sources on the include path; `None` (and
/// a printed reason) when no C++ compiler works here.
fn emulator(name: &str) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}_emu"));
    let src = root.join(format!("tests/emu/{name}_main.cpp"));
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    let built = Command::new(&cxx)
        .args([
            "-std=c++20",
            "-O2",
            "-pthread",
            "-Wall",
            "-Wno-unused-function",
        ])
        .arg("-I")
        .arg(root.join("tests/emu"))
        .arg("-I")
        .arg(root.join("src/decode/kernels"))
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .output();
    match built {
        Ok(o) if o.status.success() => Some(out),
        Ok(o) => panic!(
            "{cxx} failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            eprintln!("skipping the emulated {name} kernel: no C++ compiler ({cxx}: {e})");
            None
        }
    }
}

/// One SNAPPY job: compressed bytes and the size the page header promises.
struct Job {
    src: Vec<u8>,
    dst_len: usize,
}

/// Runs the SNAPPY kernel over `jobs`: per job, its error bits, its output, and whether the
/// byte after the output was left alone.
fn run_snappy(emu: &Path, jobs: &[Job]) -> Vec<(u32, Vec<u8>, bool)> {
    let dir = tempfile::tempdir().unwrap();
    let (inp, outp) = (dir.path().join("in"), dir.path().join("out"));
    let mut b = (jobs.len() as u32).to_le_bytes().to_vec();
    for j in jobs {
        b.extend((j.src.len() as u64).to_le_bytes());
        b.extend((j.dst_len as u64).to_le_bytes());
        b.extend(&j.src);
    }
    std::fs::write(&inp, b).unwrap();
    let st = Command::new(emu).arg(&inp).arg(&outp).status().unwrap();
    assert!(st.success(), "emulator exited with {st}");
    let o = std::fs::read(&outp).unwrap();
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

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
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
    let jobs: Vec<Job> = inputs
        .iter()
        .map(|d| Job {
            src: snap::raw::Encoder::new().compress_vec(d).unwrap(),
            dst_len: d.len(),
        })
        .collect();
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

#[test]
fn emulated_snappy_kernel_decompresses_corpus_pages() {
    let Some(emu) = emulator("snappy") else {
        return;
    };
    use cuparquet::decode::page_header::{page_table, PageKind};
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
