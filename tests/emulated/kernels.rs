//! The CUDA kernels' own sources run on the host, through a small emulation of the CUDA
//! features they use (`tests/emulated/emu/cuda_host.h`: one host thread per CUDA thread, barriers for
//! `__syncthreads` / `__syncwarp` / warp intrinsics). This checks kernel logic on every machine
//! — CI has no GPU — against the same oracles the GPU tests use; speed is measured on the GPU.
//!
//! Needs a C++20 compiler (`g++`, or `CXX`); without one each test prints why it is skipped.
//! The emulators are built with AddressSanitizer and UBSan where the compiler has them
//! (`CUPARQUET_EMU_SANITIZE=0` turns them off), and every buffer a kernel may touch is
//! allocated to its exact size: a kernel reading or writing past one fails the test, as
//! compute-sanitizer's memcheck would on the device.

use crate::common;
use crate::emu;

use common::*;
use emu::*;

/// The fixed-width decode kernel over the flat fixed-width columns of corpus and generated
/// files (pages decompressed on the host, as the GPU path does for codecs other than SNAPPY),
/// equal to the reference decoder (itself checked against arrow-rs in tests/read/reference.rs).
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
/// (`tests/emulated/emu/decode_bytes_segments_main.cpp`), so that every DELTA_BYTE_ARRAY page of more
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
    use cuparquet::{Device, Scan};
    let dir = tempfile::tempdir().unwrap();
    let mut files = corpus_files("data", &[".parquet"]);
    files.extend(generate_corpus(dir.path()).into_iter().map(|(_, p)| p));
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    for f in &files {
        let Ok(r) = Scan::builder(f).with_device(Device::Host).build() else {
            continue;
        };
        let bytes = std::fs::read(f).unwrap();
        for c in &r.files()[0].plan().chunks {
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
