//! GPU range reader tests. Each test skips with a printed reason where there is no CUDA device
//! and fails under `CUPARQUET_REQUIRE_GPU=1` (set on the GPU machine by its run script).
//!
//! Run on the H200 machine twice: with the udev record of the block device (cuFile can
//! register files there) and without it (`UDEV=none`: registration fails). Tests that depend
//! on registration ask cuFile which case they are in and assert that case's behaviour.

mod common;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use common::*;
use cuparquet::config::{CompatMode, IoSettings};
use cuparquet::device::{gpu, DeviceBuffer};
use cuparquet::io::cufile;
use cuparquet::io::gpu::GpuReader;
use cuparquet::io::policy::{Fact, MachineFacts};
use cuparquet::io::staged::StagedReader;
use cuparquet::io::{Dest, IoPath, RangeReader};
use cuparquet::plan::IoRequest;
use cuparquet::source::ParquetFile;
use cuparquet::{Device, Scan};

const MIB: u64 = 1 << 20;

/// Held by every test of this file (shared), and alone by the leak test: it measures the
/// device's free memory, which the others' loads would move.
static DEVICE_MEMORY: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn shared_device() -> std::sync::RwLockReadGuard<'static, ()> {
    DEVICE_MEMORY.read().unwrap_or_else(|p| p.into_inner())
}

/// A file of `len` pseudo-random bytes (not on tmpfs, so O_DIRECT and cuFile can open it).
fn data_file(len: u64, seed: u64) -> (tempfile::NamedTempFile, Arc<Vec<u8>>) {
    let mut f = tempfile::NamedTempFile::new_in(scratch_parent()).unwrap();
    let mut r = Rng(seed | 1);
    let mut data = vec![0u8; len as usize];
    for c in data.chunks_mut(8) {
        let v = r.next().to_le_bytes();
        c.copy_from_slice(&v[..c.len()]);
    }
    f.write_all(&data).unwrap();
    f.flush().unwrap();
    (f, Arc::new(data))
}

/// Random requests (1 B to `max` bytes, unaligned) laid out with random gaps in the
/// destination; returns them and the destination size.
fn random_requests(r: &mut Rng, file_len: u64, n: usize, max: u64) -> (Vec<IoRequest>, u64) {
    let mut out = Vec::new();
    let mut dest = 0;
    for _ in 0..n {
        let len = r.size(max.min(file_len));
        let start = r.below(file_len - len + 1);
        dest += r.below(3) * r.below(5000); // sometimes a hole
        out.push(IoRequest {
            range: start..start + len,
            dest_offset: dest,
            chunks: vec![],
        });
        dest += len;
    }
    (out, dest)
}

/// Reads `requests` with `reader` into a device buffer pre-filled with 0xAB and checks every
/// request's bytes, and that no byte outside them changed.
fn check_read(
    reader: &dyn RangeReader,
    file: &Path,
    data: &[u8],
    requests: &[IoRequest],
    dest_len: u64,
) -> cuparquet::io::IoReport {
    let g = gpu(0).unwrap();
    let pf = ParquetFile::open(file).unwrap();
    let mut buf = g.alloc(dest_len as usize).unwrap();
    buf.fill(0xAB).unwrap();
    let report = reader
        .read(&pf, requests, Dest::Device(&mut buf))
        .unwrap_or_else(|e| panic!("{}: {e}", reader.name()));
    let host = buf.copy_to_host(0..dest_len as usize).unwrap();
    let mut covered = vec![false; dest_len as usize];
    for (i, q) in requests.iter().enumerate() {
        let d = q.dest_offset as usize;
        let n = q.len() as usize;
        let got = &host[d..d + n];
        let want = &data[q.range.start as usize..q.range.end as usize];
        if got != want {
            let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap();
            panic!(
                "{}: request {i} ({:?} → {d}) differs at byte {at}",
                reader.name(),
                q.range
            );
        }
        covered[d..d + n].iter_mut().for_each(|c| *c = true);
    }
    for (i, (&c, &b)) in covered.iter().zip(&host).enumerate() {
        assert!(
            c || b == 0xAB,
            "{}: byte {i} outside the requests was written",
            reader.name()
        );
    }
    assert_eq!(report.requests.len(), requests.len());
    report
}

fn settings(threads: usize) -> IoSettings {
    IoSettings {
        nthreads: threads,
        ..IoSettings::default()
    }
}

fn registration_works(file: &Path) -> Result<(), String> {
    cufile::register(&ParquetFile::open(file).unwrap())
        .map(|_| ())
        .map_err(|f| f.detail)
}

#[test]
fn gpu_staged_paths_are_byte_exact() {
    let _shared = shared_device();
    if !gpu_available("staged range tests") {
        return;
    }
    let len = 300 * MIB;
    let (f, data) = data_file(len, 7);
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    // a 256 MiB range, then random ranges of 1 B .. 64 MiB
    let mut cases = vec![(
        vec![IoRequest {
            range: 12_345..12_345 + 256 * MIB,
            dest_offset: 3,
            chunks: vec![],
        }],
        256 * MIB + 10,
    )];
    for _ in 0..4 {
        cases.push(random_requests(&mut r, len, 40, 64 * MIB));
    }
    for direct in [false, true] {
        for threads in [1, 16] {
            let s = IoSettings {
                direct_io: direct,
                ..settings(threads)
            };
            let reader = StagedReader::new(s, 0).unwrap();
            for (reqs, dest_len) in &cases {
                let rep = check_read(&reader, f.path(), &data, reqs, *dest_len);
                assert!(rep.requests.iter().all(|q| q.path == IoPath::Staged));
            }
        }
        eprintln!("staging bounce, O_DIRECT {direct}: byte-exact");
    }
    // small bounce buffers: ranges span many buffers and the ring wraps many times
    let s = IoSettings {
        bounce_buffer_size: 64 << 10,
        bounce_buffer_count: 1,
        ..settings(4)
    };
    let reader = StagedReader::new(s, 0).unwrap();
    for (reqs, dest_len) in cases.iter().skip(1) {
        check_read(&reader, f.path(), &data, reqs, *dest_len);
    }
}

#[test]
fn gpu_small_ranges_are_gathered() {
    let _shared = shared_device();
    if !gpu_available("small-range test") {
        return;
    }
    let len = 64 * MIB;
    let (f, data) = data_file(len, 11);
    let mut r = Rng(42);
    // 3000 ranges of 4..64 KiB laid end to end: few copies, every byte right
    let mut reqs = Vec::new();
    let mut dest = 0;
    for _ in 0..3000 {
        let n = (4 + r.below(61)) << 10;
        let start = r.below(len - n) / 4096 * 4096;
        reqs.push(IoRequest {
            range: start..start + n,
            dest_offset: dest,
            chunks: vec![],
        });
        dest += n;
    }
    let reader = GpuReader::new(settings(16), 0).unwrap();
    let rep = check_read(&reader, f.path(), &data, &reqs, dest);
    assert!(rep.requests.iter().all(|q| q.path == IoPath::Staged));
}

#[test]
fn gpu_auto_registration_failure_stages_with_the_reason() {
    let _shared = shared_device();
    if !gpu_available("registration fallback test") {
        return;
    }
    let (f, data) = data_file(40 * MIB, 3);
    // say nvidia-fs is loaded, so that auto tries cuFile on this machine
    let mut facts = cufile::machine_facts();
    facts.nvidia_fs = Fact::yes("nvidia-fs loaded (injected by the test)");
    let reader = GpuReader::new(settings(8), 0).unwrap().with_facts(facts);
    let reqs = vec![
        IoRequest {
            range: 100..100 + 8 * MIB,
            dest_offset: 0,
            chunks: vec![],
        },
        IoRequest {
            range: 20 * MIB..20 * MIB + 1000,
            dest_offset: 8 * MIB,
            chunks: vec![],
        },
    ];
    let rep = check_read(&reader, f.path(), &data, &reqs, 8 * MIB + 1000);
    // the small range is staged whatever happens
    assert_eq!(rep.requests[1].path, IoPath::Staged);
    match registration_works(f.path()) {
        Err(why) => {
            eprintln!("registration fails here ({why}): expecting staging with the reason");
            assert_eq!(rep.requests[0].path, IoPath::Staged);
            let d = rep
                .decisions
                .iter()
                .find(|d| d.reason.contains("cuFileHandleRegister failed"))
                .unwrap_or_else(|| panic!("no registration reason in {:?}", rep.decisions));
            assert!(d.reason.contains("staging instead"), "{}", d.reason);
            assert!(rep.cufile.is_none());
        }
        Ok(()) => {
            eprintln!("registration works here: expecting cuFile");
            assert!(
                matches!(rep.requests[0].path, IoPath::CufilePosix | IoPath::Gds),
                "{:?}",
                rep.requests[0]
            );
        }
    }
}

#[test]
fn gpu_forced_cufile_reports_its_real_path() {
    let _shared = shared_device();
    if !gpu_available("forced cuFile test") {
        return;
    }
    let len = 100 * MIB;
    let (f, data) = data_file(len, 5);
    let s = IoSettings {
        compat_mode: CompatMode::Off,
        ..settings(16)
    };
    let reader = GpuReader::new(s, 0).unwrap();
    let mut r = Rng(77);
    let (mut reqs, mut dest_len) = random_requests(&mut r, len, 30, 16 * MIB);
    reqs.push(IoRequest {
        range: 5..5 + 64 * MIB,
        dest_offset: dest_len + 1,
        chunks: vec![],
    });
    dest_len += 64 * MIB + 1;
    match registration_works(f.path()) {
        Ok(()) => {
            let rep = check_read(&reader, f.path(), &data, &reqs, dest_len);
            let c = rep.cufile.clone().expect("cuFile counters");
            eprintln!("cuFile counters over the read: {c:?}");
            let cufile_reqs: Vec<_> = rep
                .requests
                .iter()
                .filter(|q| q.path != IoPath::Staged)
                .collect();
            assert!(!cufile_reqs.is_empty());
            // below the threshold: staged even when cuFile is forced
            for q in &rep.requests {
                if q.range.end - q.range.start < 16 << 10 {
                    assert_eq!(q.path, IoPath::Staged, "{q:?}");
                }
            }
            assert!(c.reads > 0, "{c:?}");
            if !cuparquet::io::policy::nvidia_fs_fact().ok {
                assert!(c.posix > 0 && c.nvfs == 0, "{c:?}");
                assert!(cufile_reqs.iter().all(|q| q.path == IoPath::CufilePosix));
            }
        }
        Err(why) => {
            eprintln!("registration fails here ({why}): compat_mode=off must be an error");
            let pf = ParquetFile::open(f.path()).unwrap();
            let g = gpu(0).unwrap();
            let mut buf = g.alloc(dest_len as usize).unwrap();
            let e = reader
                .read(&pf, &reqs, Dest::Device(&mut buf))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("compat_mode=off requires cuFile") && e.contains("cuFileHandleRegister"),
                "{e}"
            );
        }
    }
}

#[test]
fn gpu_compat_off_without_cufile_is_an_error() {
    let _shared = shared_device();
    if !gpu_available("compat off test") {
        return;
    }
    let (f, _) = data_file(4 * MIB, 9);
    let facts = MachineFacts::without_cufile("libcufile.so not found (injected by the test)");
    let s = IoSettings {
        compat_mode: CompatMode::Off,
        ..settings(2)
    };
    let reader = GpuReader::new(s, 0).unwrap().with_facts(facts);
    let pf = ParquetFile::open(f.path()).unwrap();
    let mut buf = gpu(0).unwrap().alloc(MIB as usize).unwrap();
    let reqs = vec![IoRequest {
        range: 0..MIB,
        dest_offset: 0,
        chunks: vec![],
    }];
    let e = reader
        .read(&pf, &reqs, Dest::Device(&mut buf))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&f.path().display().to_string()), "{e}");
    assert!(e.contains("bytes 0..1048576"), "{e}");
    assert!(
        e.contains("compat_mode=off requires cuFile, but libcufile.so not found"),
        "{e}"
    );
    // compat on: never cuFile, even with cuFile available
    let s = IoSettings {
        compat_mode: CompatMode::On,
        ..settings(2)
    };
    let reader = GpuReader::new(s, 0).unwrap();
    let rep = reader.read(&pf, &reqs, Dest::Device(&mut buf)).unwrap();
    assert_eq!(rep.requests[0].path, IoPath::Staged);
    assert!(rep.decisions[0].reason.contains("compat_mode=on"));
}

#[test]
fn gpu_sixteen_threads_load_concurrently() {
    let _shared = shared_device();
    if !gpu_available("concurrency test") {
        return;
    }
    let dir = scratch_dir();
    let files: Vec<_> = generate_corpus(dir.path())
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    let want: Vec<_> = files
        .iter()
        .map(|p| oracle(p, &Projection::All, None).unwrap())
        .collect();
    let (raw, data) = data_file(50 * MIB, 21);
    std::thread::scope(|s| {
        for t in 0..16 {
            let (files, want, raw, data) = (&files, &want, raw.path(), &data);
            s.spawn(move || {
                for k in 0..files.len() {
                    let i = (k + t) % files.len();
                    let reader = Scan::builder(&files[i])
                        .with_device(Device::Cuda(0))
                        .with_nthreads(4)
                        .build()
                        .unwrap();
                    let loaded = reader.load().unwrap();
                    let host = loaded.to_host().unwrap();
                    let got = concat(&loaded.schema, &host);
                    assert_same(
                        &format!("thread {t}: {}", files[i].display()),
                        &got,
                        &want[i],
                    );
                }
                let mut r = Rng(1000 + t as u64);
                let (reqs, dest_len) = random_requests(&mut r, 50 * MIB, 20, 8 * MIB);
                let reader = GpuReader::new(settings(4), 0).unwrap();
                check_read(&reader, raw, data, &reqs, dest_len);
            });
        }
    });
}

#[test]
fn gpu_device_chunks_match_the_file() {
    let _shared = shared_device();
    if !gpu_available("device chunk test") {
        return;
    }
    let path = corpus_dir().join("data/alltypes_plain.parquet");
    let bytes = std::fs::read(&path).unwrap();
    let reader = Scan::builder(&path)
        .with_device(Device::Cuda(0))
        .build()
        .unwrap();
    let (chunks, io) = reader.files()[0].load_chunks().unwrap();
    assert_eq!(chunks.chunks().len(), reader.files()[0].plan().chunks.len());
    for (i, c) in chunks.chunks().iter().enumerate() {
        let got = chunks.chunk_to_host(i).unwrap();
        assert_eq!(
            got,
            &bytes[c.range.start as usize..c.range.end as usize],
            "{}",
            c.path
        );
        let (ptr, len) = chunks.chunk_ptr(i).unwrap();
        assert_eq!(ptr, chunks.buffer().device_ptr() + c.dest_offset);
        assert_eq!(len, c.len());
    }
    assert!(io.requests.iter().all(|q| q.path == IoPath::Staged));
    assert!(!io.decisions.is_empty());
    assert!(chunks.chunk_to_host(10_000).is_err());
    // the same chunks decoded on the host equal a host load
    let on_host: Vec<_> = reader.files()[0]
        .decode_on_host(&chunks)
        .unwrap()
        .iter()
        .map(|b| b.to_host().unwrap())
        .collect();
    let want = oracle(&path, &Projection::All, None).unwrap();
    assert_same(
        "decode_on_host",
        &concat(&reader.schema().clone(), &on_host),
        &want,
    );
    // a device load: batches on the device, report says so
    let loaded = reader.load().unwrap();
    assert_eq!(
        loaded.report.loads[0].device.location,
        cuparquet::array::Location::Cuda(0)
    );
    assert!(loaded
        .batches
        .iter()
        .all(|b| b.location() == cuparquet::array::Location::Cuda(0) && b.as_device().is_some()));
    // each device batch says which rows of which row group it holds: here, whole row groups
    let spans: Vec<(usize, std::ops::Range<u64>)> = loaded
        .batches
        .iter()
        .flat_map(|b| b.rows().iter().map(|r| (r.row_group, r.rows.clone())))
        .collect();
    let want_spans: Vec<(usize, std::ops::Range<u64>)> = reader.files()[0]
        .plan()
        .row_groups
        .iter()
        .map(|&rg| {
            (
                rg,
                0..reader.files()[0]
                    .metadata()
                    .metadata
                    .row_group(rg)
                    .num_rows() as u64,
            )
        })
        .collect();
    assert_eq!(spans, want_spans);
    assert!(loaded.batches.iter().all(|b| b.file() == path.as_path()));
    assert_same(
        "device load",
        &concat(&loaded.schema, &loaded.to_host().unwrap()),
        &want,
    );
    let g = loaded.report.loads[0].gpu_decode.as_ref().unwrap();
    assert_eq!(g.fields.len(), want.num_columns());
    assert!(g.fields.iter().all(|f| f.on_gpu), "{g:?}");
}

#[test]
fn gpu_errors_are_clear() {
    let _shared = shared_device();
    if !gpu_available("device error test") {
        return;
    }
    let g = gpu(0).unwrap();
    let e = gpu(999).unwrap_err().to_string();
    assert!(e.starts_with("device cuda:999: no such device"), "{e}");
    let e = g.alloc(1 << 52).unwrap_err().to_string();
    assert!(
        e.contains("allocating 4096.0 TiB of device memory failed"),
        "{e}"
    );
    let buf: DeviceBuffer = g.alloc(100).unwrap();
    let e = buf.copy_to_host(50..101).unwrap_err().to_string();
    assert!(
        e.contains("bytes 50..101 are outside the 100-byte device buffer"),
        "{e}"
    );
    // a request past the end of the file
    let (f, _) = data_file(10_000, 1);
    let pf = ParquetFile::open(f.path()).unwrap();
    let reader = GpuReader::new(settings(2), 0).unwrap();
    let mut buf = g.alloc(1000).unwrap();
    let e = reader
        .read(
            &pf,
            &[IoRequest {
                range: 9500..10_500,
                dest_offset: 0,
                chunks: vec![],
            }],
            Dest::Device(&mut buf),
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("9500..10500"), "{e}");
    // a host destination is refused by the device reader
    let mut host = vec![0u8; 10];
    let e = reader
        .read(&pf, &[], Dest::Host(&mut host))
        .unwrap_err()
        .to_string();
    assert!(e.contains("writes device memory"), "{e}");
}

#[test]
fn gpu_nvrtc_module_cache() {
    let _shared = shared_device();
    if !gpu_available("NVRTC test") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // SAFETY of the env change: this test binary's other tests do not read the variable.
    std::env::set_var(cuparquet::device::nvrtc::ENV_KERNEL_CACHE, dir.path());
    let g = gpu(0).unwrap();
    let src = r#"
extern "C" __global__ void iota(unsigned int* out, unsigned int n, unsigned int add) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i * 3u + add;
}
"#;
    let m = g.load_module("test_iota", src, &[]).unwrap();
    assert_eq!(m.origin(), cuparquet::device::nvrtc::ModuleOrigin::Compiled);
    assert!(
        m.cubin_path().starts_with(dir.path()),
        "{:?}",
        m.cubin_path()
    );
    assert!(m.cubin_path().exists());
    let again = g.load_module("test_iota", src, &[]).unwrap();
    assert!(Arc::ptr_eq(&m, &again));
    let f = m.function("iota").unwrap();
    assert!(m.function("nope").is_err());
    let n: u32 = 10_000;
    let buf = g.alloc(n as usize * 4).unwrap();
    let mut ptr = buf.device_ptr();
    let (mut nn, mut add) = (n, 7u32);
    let mut params: Vec<*mut std::ffi::c_void> = vec![
        (&mut ptr as *mut u64).cast(),
        (&mut nn as *mut u32).cast(),
        (&mut add as *mut u32).cast(),
    ];
    let stream = &g.streams()[0];
    // SAFETY: the parameters match `iota(unsigned int*, unsigned int, unsigned int)` and the
    // buffer holds n u32 values; the stream is synchronized before the buffer is read.
    unsafe {
        m.launch(
            f,
            (n.div_ceil(256), 1, 1),
            (256, 1, 1),
            0,
            stream,
            &mut params,
        )
        .unwrap();
    }
    g.synchronize().unwrap();
    let host = buf.copy_to_host(0..n as usize * 4).unwrap();
    for (i, c) in host.chunks_exact(4).enumerate() {
        assert_eq!(u32::from_le_bytes(c.try_into().unwrap()), i as u32 * 3 + 7);
    }
    // a compile error carries NVRTC's log
    let e = g
        .load_module(
            "test_bad",
            "extern \"C\" __global__ void k() { nope; }",
            &[],
        )
        .unwrap_err()
        .to_string();
    assert!(e.contains("test_bad") && e.contains("nope"), "{e}");
}

#[test]
fn gpu_page_headers_match_the_host_twin() {
    let _shared = shared_device();
    if !gpu_available("device page-header test") {
        return;
    }
    use cuparquet::internals::page_header::page_table;
    let (files, _dir) = all_files(true);
    let (mut files_ok, mut pages_ok, mut both_fail) = (0, 0, 0);
    for f in &files {
        let Ok(r) = Scan::builder(f).with_device(Device::Cuda(0)).build() else {
            continue;
        };
        let Ok((chunks, _)) = r.files()[0].load_chunks() else {
            continue;
        };
        let chunks = &chunks;
        let bytes = std::fs::read(f).unwrap();
        let host: Vec<_> = chunks
            .chunks()
            .iter()
            .map(|c| page_table(&bytes[c.range.start as usize..c.range.end as usize]))
            .collect();
        match cuparquet::internals::gpu::page_tables(chunks, f) {
            Ok(dev) => {
                for (k, (d, h)) in dev.iter().zip(&host).enumerate() {
                    let h = h.as_ref().unwrap_or_else(|e| {
                        panic!(
                            "{}: chunk {k}: the host twin fails ({e}), the GPU does not",
                            f.display()
                        )
                    });
                    assert_eq!(d.len(), h.len(), "{} chunk {k}: page count", f.display());
                    for (p, q) in d.iter().zip(h) {
                        let hh = &q.header;
                        assert_eq!(p.header_offset as usize, q.offset, "{}", f.display());
                        assert_eq!(p.data_offset as usize, q.offset + hh.header_len);
                        assert_eq!(p.compressed_size, hh.compressed_size);
                        assert_eq!(p.uncompressed_size, hh.uncompressed_size);
                        assert_eq!(p.num_values, hh.num_values(), "{}", f.display());
                        if let Some(v2) = hh.data_v2 {
                            assert_eq!(p.encoding, v2.encoding);
                            assert_eq!(p.def_levels_len, v2.def_levels_byte_length);
                            assert_eq!(p.is_compressed == 1, v2.is_compressed);
                        }
                        if let Some(v1) = hh.data_v1 {
                            assert_eq!(p.encoding, v1.encoding);
                            assert_eq!(p.def_level_encoding, v1.def_level_encoding);
                        }
                        pages_ok += 1;
                    }
                }
                files_ok += 1;
            }
            Err(e) => {
                assert!(
                    host.iter().any(|h| h.is_err()),
                    "{}: the GPU fails ({e}), the host twin does not",
                    f.display()
                );
                both_fail += 1;
            }
        }
    }
    eprintln!("page headers on the GPU: {files_ok} files, {pages_ok} pages equal; {both_fail} files fail on both");
    assert!(files_ok > 80 && pages_ok > 1000);
}

#[test]
fn gpu_device_batches_round_trip_every_type() {
    let _shared = shared_device();
    if !gpu_available("device batch round trip") {
        return;
    }
    use cuparquet::array::DeviceRecordBatch;
    let g = gpu(0).unwrap();
    let (files, _dir) = all_files(false);
    let mut n = 0;
    for f in &files {
        let Ok(b) = oracle(f, &Projection::All, None) else {
            continue;
        };
        let d =
            DeviceRecordBatch::upload(&g, &b).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let back = d
            .to_host()
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert_same(&f.display().to_string(), &back, &b);
        // a slice (non-zero offsets everywhere)
        if b.num_rows() > 3 {
            let s = b.slice(1, b.num_rows() - 2);
            let back = DeviceRecordBatch::upload(&g, &s)
                .unwrap()
                .to_host()
                .unwrap();
            assert_same(&format!("{} sliced", f.display()), &back, &s);
        }
        n += 1;
    }
    eprintln!("device batches round-tripped: {n} files");
    assert!(n > 80);
}

/// Pages of the sizes real writers produce (20,000-row pages, 100,000-row row groups): every
/// codec the GPU path handles differently (SNAPPY on the device, ZSTD on the host, none), with
/// and without dictionaries, with and without nulls, equal to arrow-rs.
#[test]
fn gpu_large_pages_equal_arrow_rs() {
    let _shared = shared_device();
    if !gpu_available("large-page GPU decode test") {
        return;
    }
    use arrow::array::{ArrayRef, Float64Array, Int32Array, Int64Array, StringArray};
    use parquet::basic::{Compression, ZstdLevel};
    use parquet::file::properties::WriterProperties;
    let n = 300_000usize;
    let mut s = 11u64;
    let mut rand = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s >> 33
    };
    let comments: Vec<String> = (0..5000)
        .map(|i| format!("furiously regular pinto {i:05}"))
        .collect();
    let cols: Vec<(&str, ArrayRef)> = vec![
        ("key", Arc::new(Int64Array::from_iter_values(0..n as i64))),
        (
            "qty",
            Arc::new(Int32Array::from_iter_values(
                (0..n).map(|_| 1 + (rand() % 50) as i32),
            )),
        ),
        (
            "price",
            Arc::new(Float64Array::from_iter((0..n).map(|_| {
                let r = rand();
                (r % 7 != 0).then_some(r as f64 / 3.0)
            }))),
        ),
        (
            "flag",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|_| ["A", "N", "R"][(rand() % 3) as usize]),
            )),
        ),
        (
            "flag_nulls",
            Arc::new(StringArray::from_iter((0..n).map(|_| {
                let r = rand();
                (r % 5 != 0).then_some(["A", "N", "R"][(r % 3) as usize])
            }))),
        ),
        (
            "comment",
            Arc::new(StringArray::from_iter_values(
                (0..n).map(|_| comments[(rand() % 5000) as usize].as_str()),
            )),
        ),
    ];
    let batch = arrow::record_batch::RecordBatch::try_from_iter(cols).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (cname, codec) in [
        ("snappy", Compression::SNAPPY),
        ("zstd", Compression::ZSTD(ZstdLevel::default())),
        ("gzip", Compression::GZIP(Default::default())),
        ("none", Compression::UNCOMPRESSED),
    ] {
        for dict in [true, false] {
            let p = dir.path().join(format!("{cname}-{dict}.parquet"));
            let props = WriterProperties::builder()
                .set_compression(codec)
                .set_dictionary_enabled(dict)
                .set_max_row_group_row_count(Some(100_000))
                .build();
            write(&p, std::slice::from_ref(&batch), props);
            let want = oracle(&p, &Projection::All, None).unwrap();
            // all columns with SNAPPY on the device kernel (the per-column loads below let the
            // model place it: these loads are small, so mostly the host); the host's share beside
            // nvCOMP none, then half of the bytes (the largest pages)
            for share in [0, 50] {
                let all = cuda_with_host_share(&p, share)
                    .build()
                    .and_then(|r| r.load())
                    .and_then(|l| {
                        // the report says where each field's pages were decompressed: SNAPPY
                        // by our kernel, GZIP by our kernel and ZSTD by nvCOMP where it is
                        // installed (with a share, the host beside them), else on the host
                        let g = l.report.loads[0].gpu_decode.clone().unwrap();
                        let nv = cuparquet::device::nvcomp::nvcomp().unwrap().is_some();
                        let compressed = codec != Compression::UNCOMPRESSED;
                        assert_eq!(g.decompressed.len(), 6 * compressed as usize, "{g:?}");
                        let device = |p: &cuparquet::scan::PageCounts| match codec {
                            Compression::SNAPPY | Compression::GZIP(_) => p.kernel,
                            _ if nv => p.nvcomp,
                            _ => 0,
                        };
                        let side = match codec {
                            Compression::SNAPPY => 0,
                            Compression::GZIP(_) => share,
                            _ if nv => share,
                            _ => 100,
                        };
                        let (mut on_device, mut on_host) = (0, 0);
                        for d in &g.decompressed {
                            let p = d.pages;
                            assert_eq!(device(&p) + p.host, p.total(), "{cname}: {d:?}");
                            on_device += device(&p);
                            on_host += p.host;
                        }
                        if compressed {
                            assert_eq!(on_device > 0, side < 100, "{cname} {share}: {g:?}");
                            assert_eq!(on_host > 0, side > 0, "{cname} {share}: {g:?}");
                        }
                        l.to_host().map(|b| concat(&l.schema, &b))
                    });
                match all {
                    Ok(b) if b == want => {}
                    Ok(_) => failures.push(format!("{cname} dict={dict} share {share}: differ")),
                    Err(e) => failures.push(format!("{cname} dict={dict} share {share}: {e}")),
                }
            }
            for c in 0..want.num_columns() {
                let name = want.schema().field(c).name().clone();
                let got = Scan::builder(&p)
                    .with_device(Device::Cuda(0))
                    .with_columns([name.as_str()])
                    .build()
                    .and_then(|r| r.load())
                    .and_then(|l| l.to_host().map(|b| concat(&l.schema, &b)));
                match got {
                    Ok(b) if b.column(0).as_ref() == want.column(c).as_ref() => {}
                    Ok(_) => failures.push(format!("{cname} dict={dict} {name}: values differ")),
                    Err(e) => failures.push(format!("{cname} dict={dict} {name}: {e}")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Thousands of device loads (GPU-decoded and host-decoded fields, batches dropped) leave
/// device memory where it was: nothing leaks per load.
#[test]
fn gpu_loads_do_not_leak_device_memory() {
    let _alone = DEVICE_MEMORY.write().unwrap_or_else(|p| p.into_inner());
    if !gpu_available("device memory leak test") {
        return;
    }
    let g = gpu(0).unwrap();
    let files = [
        corpus_dir().join("data/alltypes_plain.snappy.parquet"),
        corpus_dir().join("data/nested_lists.snappy.parquet"),
        corpus_dir().join("data/delta_byte_array.parquet"),
    ];
    let load = |f: &Path| {
        let l = Scan::builder(f)
            .with_device(Device::Cuda(0))
            .build()
            .unwrap()
            .load()
            .unwrap();
        assert!(l.batches.iter().all(|b| b.as_device().is_some()));
    };
    for f in &files {
        load(f); // kernels compiled, pools filled
    }
    // the pool keeps freed memory for reuse: return it before each measure
    g.trim_pool().unwrap();
    let (before, _) = g.memory_info().unwrap();
    for _ in 0..1000 {
        for f in &files {
            load(f);
        }
    }
    g.trim_pool().unwrap();
    let (after, _) = g.memory_info().unwrap();
    eprintln!("device memory free before {before}, after 3000 loads {after}");
    // the driver's own bookkeeping (2 MiB allocation granules) may move by a few MiB; a leak of
    // 4 KiB per load would show as 12 MB
    assert!(
        after + (8 << 20) >= before,
        "{} bytes less free after 3000 loads",
        before - after
    );
}

/// Nested fields (lists, maps, structs, three and four deep) in batches that cut row groups
/// and under a row selection, with and without the page index (which prunes the pages the
/// selection skips): built on the GPU from the level entries of the rows each batch takes,
/// equal to arrow-rs; every field reported on the GPU.
#[test]
fn gpu_nested_fields_in_batches_that_cut_row_groups() {
    let _shared = shared_device();
    if !gpu_available("nested batches that cut row groups") {
        return;
    }
    use arrow::array::RecordBatchReader;
    use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection};
    use parquet::file::properties::{WriterProperties, WriterVersion};
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("nested_v1", nested_batch(3000), WriterVersion::PARQUET_1_0),
        (
            "deep_v2",
            deep_nested_batch(3000),
            WriterVersion::PARQUET_2_0,
        ),
    ];
    for (name, batch, version) in cases {
        let path = dir.path().join(format!("{name}.parquet"));
        let props = WriterProperties::builder()
            .set_writer_version(version)
            .set_max_row_group_row_count(Some(1000))
            .set_data_page_row_count_limit(300)
            .set_write_batch_size(100)
            .build();
        write(&path, &[batch], props);
        let selection = RowSelection::from_consecutive_ranges(
            [100..450usize, 999..1001, 1700..2900].into_iter(),
            3000,
        );
        let oracle_with = |sel: Option<&RowSelection>| {
            let f = std::fs::File::open(&path).unwrap();
            let mut b = ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
            if let Some(s) = sel {
                b = b.with_row_selection(s.clone());
            }
            let r = b.build().unwrap();
            let schema = r.schema();
            let batches: Vec<_> = r.map(|b| b.unwrap()).collect();
            arrow::compute::concat_batches(&schema, &batches).unwrap()
        };
        // with the page index, a selection reads only the pages holding its rows
        for (batch_rows, sel, page_index) in [
            (333, None, false),
            (1000, None, false),
            (2500, None, false),
            (1 << 20, Some(&selection), false),
            (400, Some(&selection), false),
            (1 << 20, Some(&selection), true),
            (250, Some(&selection), true),
        ] {
            let what = format!(
                "{name}, batches of {batch_rows}, selection {}, page index {page_index}",
                sel.is_some()
            );
            let mut b = Scan::builder(&path)
                .with_device(Device::Cuda(0))
                .with_page_index(page_index)
                .with_batch_rows(batch_rows);
            if let Some(s) = sel {
                b = b.with_row_selection(s.clone());
            }
            let loaded = b
                .build()
                .unwrap()
                .load()
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let got = concat(&loaded.schema, &loaded.to_host().unwrap());
            assert_same(&what, &got, &oracle_with(sel));
            let g = loaded.report.loads[0].gpu_decode.as_ref().unwrap();
            for f in &g.fields {
                assert!(f.on_gpu, "{what}: {f:?}");
            }
        }
    }
}
