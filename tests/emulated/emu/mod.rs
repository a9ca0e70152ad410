//! What the emulated kernel tests share: building an emulator (`tests/emulated/emu/*_main.cpp` with the
//! kernel sources), running it on a serialised input, the page-job layout the kernels read,
//! and the flat column chunks of the corpus with the reference decoder's result for each.
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use crate::reference_decoder;

/// The emulator `tests/emulated/emu/{name}_main.cpp`, built with the kernel sources on the
/// include path; `None` (and a printed reason) when no C++ compiler works here.
///
/// The emulators are one harness build: the first test to ask builds them all, side by side
/// (one compiler per core), and a build is kept in the target directory under the hash of
/// every source, flag and the compiler it was made from, so a test run after an unchanged one
/// compiles nothing.
pub(crate) fn emulator(name: &str) -> Option<PathBuf> {
    static BUILT: std::sync::OnceLock<Vec<(String, Option<PathBuf>)>> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(build_emulators);
    match built.iter().find(|(n, _)| n == name) {
        Some((_, p)) => p.clone(),
        None => {
            // a test binary run away from its source tree (e.g. on the GPU machine)
            eprintln!("skipping the emulated {name} kernel: tests/emulated/emu/{name}_main.cpp is not here");
            None
        }
    }
}

/// Every `*_main.cpp` built (or found built), by name.
fn build_emulators() -> Vec<(String, Option<PathBuf>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let emu = root.join("tests/emulated/emu");
    let kernels = root.join("src/decode/gpu/kernels");
    let compute = root.join("src/compute/kernels");
    let mut names: Vec<String> = std::fs::read_dir(&emu)
        .map(|d| {
            d.filter_map(|e| {
                let n = e.ok()?.file_name().into_string().ok()?;
                Some(n.strip_suffix("_main.cpp")?.to_string())
            })
            .collect()
        })
        .unwrap_or_default();
    names.sort();
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".into());
    // CUPARQUET_EMU_DEFINES: extra -D options, to check the kernels' tunables (e.g.
    // "-DSNAPPY_THREADS=256 -DLOG2_WIN=10")
    let defines = std::env::var("CUPARQUET_EMU_DEFINES").unwrap_or_default();
    // AddressSanitizer and UBSan on by default: every buffer a kernel touches is allocated to
    // its exact size, so a read or write past one stops the run (CUPARQUET_EMU_SANITIZE=0: off)
    let sanitize = std::env::var_os("CUPARQUET_EMU_SANITIZE").is_none_or(|v| v != "0");
    let key = build_key(
        &[&emu, &kernels, &compute],
        &[&cxx, &defines, &sanitize.to_string()],
    );
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out = std::sync::Mutex::new(Vec::new());
    let width = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| {
        for _ in 0..width.min(names.len()) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(name) = names.get(k) else { return };
                let built = build_emulator(name, &key, &cxx, &defines, sanitize);
                let mut out = out.lock().unwrap_or_else(|p| p.into_inner());
                out.push((name.clone(), built));
            });
        }
    });
    out.into_inner().unwrap_or_else(|p| p.into_inner())
}

/// A hash of every file under `dirs` (names and bytes) and of `words`, as hex.
fn build_key(dirs: &[&Path], words: &[&str]) -> String {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same sources give the same key in every process
    let mut h = std::hash::DefaultHasher::new();
    for dir in dirs {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| Some(e.ok()?.path())).collect())
            .unwrap_or_default();
        files.sort();
        for f in files {
            f.file_name().hash(&mut h);
            std::fs::read(&f).unwrap_or_default().hash(&mut h);
        }
    }
    words.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// Builds `tests/emulated/emu/{name}_main.cpp` into the target directory as
/// `{name}_emu-{key}`, unless it is there.
fn build_emulator(
    name: &str,
    key: &str,
    cxx: &str,
    defines: &str,
    sanitize: bool,
) -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let out = dir.join(format!("{name}_emu-{key}"));
    if out.exists() {
        return Some(out);
    }
    let src = root.join(format!("tests/emulated/emu/{name}_main.cpp"));
    // the build directory may not exist where the test binary runs (copied to another
    // machine, or a cleaned target/)
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!(
            "skipping the emulated {name} kernel: cannot create {}: {e}",
            dir.display()
        );
        return None;
    }
    // built under a name of this process's, then renamed: another test process building the
    // same emulator never runs a half-written one
    let partial = dir.join(format!("{name}_emu-{key}.{}", std::process::id()));
    let build = |flags: &[&str]| {
        Command::new(cxx)
            .args(["-std=c++20", "-O2", "-pthread", "-Wall"])
            .args([
                "-Wno-unused-function",
                "-Wno-sign-compare",
                "-Wno-unknown-pragmas",
            ])
            .args(defines.split_whitespace())
            .args(flags)
            .arg("-I")
            .arg(root.join("tests/emulated/emu"))
            .arg("-I")
            .arg(root.join("src/decode/gpu/kernels"))
            .arg("-I")
            .arg(root.join("src/compute/kernels"))
            .arg(&src)
            .arg("-o")
            .arg(&partial)
            .output()
    };
    let sanitizers = [
        "-fsanitize=address,undefined",
        "-fno-sanitize-recover=all",
        "-g",
    ];
    let built =
        match build(if sanitize { &sanitizers[..] } else { &[] }) {
            Ok(o) if !o.status.success() && sanitize => {
                eprintln!(
                "the {name} emulator does not build with sanitizers here ({}); building without",
                String::from_utf8_lossy(&o.stderr).lines().next().unwrap_or("")
            );
                build(&[])
            }
            other => other,
        };
    match built {
        Ok(o) if o.status.success() => match std::fs::rename(&partial, &out) {
            Ok(()) => Some(out),
            Err(e) => panic!("renaming {} to {}: {e}", partial.display(), out.display()),
        },
        Ok(o) => panic!(
            "{cxx} failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            // past libtest's capture (see common::gpu_available)
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr().lock(),
                "skipping the emulated {name} kernel: no C++ compiler ({cxx}: {e})"
            );
            None
        }
    }
}

/// Appends little-endian values.
pub(crate) trait Put {
    fn put_i32(&mut self, v: i32);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
}
impl Put for Vec<u8> {
    fn put_i32(&mut self, v: i32) {
        self.extend(v.to_le_bytes());
    }
    fn put_u32(&mut self, v: u32) {
        self.extend(v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend(v.to_le_bytes());
    }
}

/// Appends the data pages of one chunk (decompressed) as page jobs of column `column` for the
/// emulated kernels, the way the GPU path cuts a chunk between batches: with `cut` = Some(h),
/// rows [0, h) and [h, rows) are two windows written one after the other (a page across h
/// becomes two jobs, each decoding the page and writing its part); returns the dictionary
/// (entries, bytes), if any, and the jobs appended. `levels`: the column's maximum definition
/// and repetition levels (a nested leaf's rows are then its level entries).
pub(crate) fn serialize_pages(
    table: &[cuparquet::internals::page_header::PageEntry],
    data: &[cuparquet::internals::decompress::PageData],
    column: u32,
    levels: (i16, i16),
    cut: Option<u64>,
    out: &mut Vec<u8>,
) -> (Option<(i32, Vec<u8>)>, u32) {
    let (max_def, max_rep) = levels;
    use cuparquet::internals::page_header::PageKind;
    let mut dict = None;
    let mut row = 0u64;
    let mut n = 0;
    for d in data {
        let h = &table[d.page].header;
        let (num_values, encoding, v2, def_len, rep_len) =
            match (&h.kind, h.dictionary, h.data_v1, h.data_v2) {
                (PageKind::Dictionary, Some(dp), _, _) => {
                    dict = Some((dp.num_values, d.bytes.to_vec()));
                    continue;
                }
                (PageKind::DataV1, _, Some(v1), _) => (v1.num_values, v1.encoding, 0, 0, 0),
                (PageKind::DataV2, _, _, Some(v2)) => (
                    v2.num_values,
                    v2.encoding,
                    1,
                    v2.def_levels_byte_length,
                    v2.rep_levels_byte_length,
                ),
                _ => continue,
            };
        let nv = num_values.max(0) as u64;
        // the page's windows: its rows, split at the cut when it falls inside
        let mut windows = vec![(0u64, nv)];
        if let Some(h) = cut {
            if h > row && h < row + nv {
                windows = vec![(0, h - row), (h - row, nv)];
            }
        }
        for (lo, hi) in windows {
            out.put_u32(column);
            for v in [
                num_values,
                encoding,
                i32::from(max_def),
                v2,
                def_len,
                rep_len,
                lo as i32,
                (hi - lo) as i32,
                i32::from(max_rep),
            ] {
                out.put_i32(v);
            }
            out.put_u64(row + lo);
            out.put_u64(d.bytes.len() as u64);
            out.extend(&d.bytes);
            n += 1;
        }
        row += nv;
    }
    (dict, n)
}

/// Runs an emulator on `input`; its output.
pub(crate) fn run_emulator(emu: &Path, input: &[u8], what: &str) -> Vec<u8> {
    run_emulator_with(emu, input, what, &[])
}

/// The SNAPPY emulator's input (`tests/emulated/emu/snappy_main.cpp`) for (stream, claimed output
/// size) pairs: their count, then each one's lengths and bytes.
pub(crate) fn streams_input<'a>(jobs: impl ExactSizeIterator<Item = (&'a [u8], usize)>) -> Vec<u8> {
    let mut input = (jobs.len() as u32).to_le_bytes().to_vec();
    for (src, dst_len) in jobs {
        input.extend((src.len() as u64).to_le_bytes());
        input.extend((dst_len as u64).to_le_bytes());
        input.extend(src);
    }
    input
}

/// [`run_emulator`] with extra arguments after the two files.
pub(crate) fn run_emulator_with(emu: &Path, input: &[u8], what: &str, args: &[&str]) -> Vec<u8> {
    let tmp = tempfile::tempdir().unwrap();
    let (inp, out) = (tmp.path().join("in"), tmp.path().join("out"));
    std::fs::write(&inp, input).unwrap();
    let st = Command::new(emu)
        .arg(&inp)
        .arg(&out)
        .args(args)
        .status()
        .unwrap();
    assert!(st.success(), "{what}: emulator exited with {st}");
    std::fs::read(&out).unwrap()
}

/// One flat column chunk the GPU decodes, ready for an emulated kernel: its page table, its
/// pages decompressed on the host, and the reference decoder's result.
pub(crate) struct FlatChunk {
    pub(crate) col: cuparquet::internals::gpu_plan::GpuColumn,
    pub(crate) data_type: arrow::datatypes::DataType,
    pub(crate) rows: usize,
    pub(crate) table: Vec<cuparquet::internals::page_header::PageEntry>,
    pub(crate) data: Vec<cuparquet::internals::decompress::PageData>,
    pub(crate) want: arrow::array::ArrayRef,
    pub(crate) name: String,
    /// It uses DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY or
    /// BYTE_STREAM_SPLIT (arrow-rs is then its oracle).
    pub(crate) delta_or_split: bool,
}

/// Per file of the corpus and the generated set: the flat chunks whose GPU column `keep`
/// accepts and the reference decodes, at most `max_pages` pages per file (the emulation is
/// slow), chunks of at most `max_rows` rows.
pub(crate) fn flat_chunks(
    keep: impl Fn(&cuparquet::internals::gpu_plan::GpuColumn) -> bool,
    max_pages: usize,
    max_rows: usize,
) -> Vec<(PathBuf, Vec<FlatChunk>)> {
    use cuparquet::internals::decompress::decompress_pages;
    use cuparquet::internals::gpu_plan::{place_columns, Placement};
    use cuparquet::internals::page_header::page_table;
    use cuparquet::{Device, Scan};
    let dir = tempfile::tempdir().unwrap();
    let mut files = corpus_files("data", &[".parquet"]);
    files.extend(generate_corpus(dir.path()).into_iter().map(|(_, p)| p));
    let mut out = Vec::new();
    for f in files {
        let Ok(r) = Scan::builder(&f).with_device(Device::Host).build() else {
            continue;
        };
        let md = r.files()[0].metadata().metadata.clone();
        let fields = r.schema().fields().to_vec();
        let bytes = std::fs::read(&f).unwrap();
        let placed = place_columns(
            &md,
            &fields,
            &r.files()[0].plan().leaves,
            &r.files()[0].plan().row_groups,
        );
        let mut chunks = Vec::new();
        let mut pages = 0;
        for c in &r.files()[0].plan().chunks {
            let Some(col) = placed.iter().find_map(|p| match p {
                Placement::Gpu(g) if g.leaf == c.column && keep(g) => Some(g.clone()),
                _ => None,
            }) else {
                continue;
            };
            let chunk =
                bytes::Bytes::copy_from_slice(&bytes[c.range.start as usize..c.range.end as usize]);
            let codec = md.row_group(c.row_group).column(c.column).compression();
            let rows = md.row_group(c.row_group).num_rows() as usize;
            let Ok(table) = page_table(&chunk) else {
                continue;
            };
            if table.len() > 64 || rows > max_rows || pages + table.len() > max_pages {
                continue;
            }
            let Ok(data) = decompress_pages(&chunk, &table, codec) else {
                continue;
            };
            let field = &fields[col.field];
            let split = md
                .row_group(c.row_group)
                .column(c.column)
                .encodings()
                .any(delta_or_split);
            let want = match reference_decoder::decode_chunk(&col, field, chunk, codec) {
                Ok(w) => w,
                // the encodings the reference does not decode: arrow-rs is the oracle
                Err(_) if split => match arrow_rs_chunk(&f, c.row_group, c.column) {
                    Some(w) => w,
                    None => continue,
                },
                Err(_) => continue, // the reference rejects it: covered by the GPU error tests
            };
            pages += table.len();
            chunks.push(FlatChunk {
                data_type: field.data_type().clone(),
                col,
                rows,
                table,
                data,
                want,
                name: format!("{} rg {} {}", f.display(), c.row_group, c.path),
                delta_or_split: split,
            });
        }
        if !chunks.is_empty() {
            out.push((f, chunks));
        }
    }
    out
}

/// DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY, BYTE_STREAM_SPLIT.
fn delta_or_split(e: parquet::basic::Encoding) -> bool {
    use parquet::basic::Encoding as E;
    matches!(
        e,
        E::DELTA_BINARY_PACKED
            | E::DELTA_LENGTH_BYTE_ARRAY
            | E::DELTA_BYTE_ARRAY
            | E::BYTE_STREAM_SPLIT
    )
}

/// An Arrow array from a kernel's output buffers; the validity words only when there are
/// nulls (as the reader builds device arrays).
pub(crate) fn array_from(
    data_type: &arrow::datatypes::DataType,
    rows: usize,
    nulls: usize,
    validity: Option<Vec<u8>>,
    buffers: &[&[u8]],
    what: &str,
) -> arrow::array::ArrayRef {
    use arrow::array::{make_array, ArrayData};
    use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer};
    let null_buffer = validity
        .filter(|_| nulls > 0)
        .map(|v| NullBuffer::new(BooleanBuffer::new(Buffer::from_slice_ref(&v), 0, rows)));
    let mut b = ArrayData::builder(data_type.clone())
        .len(rows)
        .nulls(null_buffer);
    for buf in buffers {
        b = b.add_buffer(Buffer::from_slice_ref(buf));
    }
    make_array(
        b.build()
            .unwrap_or_else(|e| panic!("{what}: not valid Arrow: {e}")),
    )
}

/// A decode pass's input: the column count and columns, then the page count and pages.
pub(crate) fn pass_input(n_cols: usize, cols: Vec<u8>, n_pages: u32, pages: Vec<u8>) -> Vec<u8> {
    let mut inp = Vec::with_capacity(8 + cols.len() + pages.len());
    inp.put_u32(n_cols as u32);
    inp.extend(cols);
    inp.put_u32(n_pages);
    inp.extend(pages);
    inp
}

/// Reads little-endian values from an emulator's output.
pub(crate) struct Cursor<'a>(pub(crate) &'a [u8], pub(crate) usize);
impl Cursor<'_> {
    pub(crate) fn bytes(&mut self, n: usize) -> Vec<u8> {
        let v = self.0[self.1..self.1 + n].to_vec();
        self.1 += n;
        v
    }
    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes(4).try_into().unwrap())
    }
    pub(crate) fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.bytes(8).try_into().unwrap())
    }
}

/// The compressed pages of the chunks of `path` (a Parquet file) whose codec `codec` picks:
/// each page's compressed values and the size they claim (data page v2 levels left out, as
/// the decoder stores them; pages stored uncompressed, index pages and empty values skipped).
pub(crate) fn compressed_pages_of(
    path: &Path,
    codec: impl Fn(parquet::basic::Compression) -> bool,
) -> Vec<(Vec<u8>, usize)> {
    use cuparquet::internals::page_header::{page_table, PageKind};
    use parquet::file::reader::FileReader;
    let Ok(reader) =
        parquet::file::reader::SerializedFileReader::new(std::fs::File::open(path).unwrap())
    else {
        return Vec::new();
    };
    let bytes = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    for rg in reader.metadata().row_groups() {
        for c in rg.columns() {
            if !codec(c.compression()) {
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
                let Some(src) = chunk[p.data()].get(levels..) else {
                    continue;
                };
                if src.is_empty() {
                    continue;
                }
                let claim = (p.header.uncompressed_size as usize).saturating_sub(levels);
                out.push((src.to_vec(), claim));
            }
        }
    }
    out
}
