//! nvCOMP, loaded at run time where it is installed: batched page decompression on the device
//! (ZSTD, GZIP and LZ4; the decoder gives it ZSTD pages and LZ4 blocks — LZ4_RAW pages and
//! the frames of Hadoop-framed LZ4 pages — only).
//!
//! Never required and never shipped: without it, pages of those codecs are decompressed on the
//! host. The library is found, in order:
//! - `CUPARQUET_NVCOMP` ([`ENV_NVCOMP`]): `off` never loads it; a path (the library file, or the
//!   directory holding it) loads exactly that one, and a failure is an error naming the
//!   variable; `auto` (or unset) searches;
//! - the dynamic loader's search (`LD_LIBRARY_PATH`, the system's library directories):
//!   `libnvcomp.so.5`, `libnvcomp.so.6`, `libnvcomp.so`;
//! - a CUDA install (`$CUDA_HOME/lib64`, `$CUDA_PATH/lib64`, `/usr/local/cuda/lib64`) and the
//!   `nvidia-libnvcomp-cu12/13` wheel (`nvidia/libnvcomp/lib64` under `PYTHONPATH`'s entries,
//!   `$VIRTUAL_ENV`, `$CONDA_PREFIX` and the user's and the system's site-packages).
//!
//! The declarations below are our own, written from nvCOMP's C headers. Both API generations are
//! supported: 5.x (`nvcompBatched*DecompressGetTempSizeAsync`, no stream) and 6.x
//! (`nvcompBatched*DecompressGetTempSize`, which takes a stream); the decompression call and
//! its options (a 64-byte struct whose zeroed value is the default) are the same in both. The
//! library links the CUDA runtime statically and works in the primary context, which is the
//! context cuparquet's driver-API code uses.

use std::ffi::{c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys;

use super::Gpu;
use crate::error::{Error, Result};

/// Environment variable: where nvCOMP is (`auto`, `off`, or a path to the library or its
/// directory).
pub use crate::config::ENV_NVCOMP;

/// A codec nvCOMP decompresses for cuparquet. (SNAPPY measured slower through nvCOMP than
/// through our SNAPPY kernel: benches/RESULTS.md.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum NvcompCodec {
    /// Parquet ZSTD (one or more ZSTD frames).
    Zstd,
    /// Parquet GZIP (a gzip member). Bound, but the decoder does not give it GZIP pages (5.3
    /// wrote past a page's output where the page inflated past its claim): our own kernel
    /// inflates them.
    Gzip,
    /// Parquet LZ4_RAW (one LZ4 block).
    Lz4,
}

impl NvcompCodec {
    const ALL: [NvcompCodec; 3] = [Self::Zstd, Self::Gzip, Self::Lz4];

    fn symbol_part(self) -> &'static str {
        match self {
            Self::Zstd => "Zstd",
            Self::Gzip => "Gzip",
            Self::Lz4 => "LZ4",
        }
    }

    fn index(self) -> usize {
        match self {
            Self::Zstd => 0,
            Self::Gzip => 1,
            Self::Lz4 => 2,
        }
    }
}

/// nvCOMP's decompression options: 64 bytes whose zeroed value is the default of every codec
/// (the backend nvCOMP picks; LZ4 as bytes without bit shuffling; GZIP's plain algorithm).
#[repr(C)]
#[derive(Clone, Copy)]
struct Options {
    words: [u32; 16],
}

const DEFAULT_OPTIONS: Options = Options { words: [0; 16] };

type GetProperties = unsafe extern "C" fn(*mut u32) -> i32;
/// 5.x: (chunks, largest chunk, options, &temp, total) → status.
type TempSize5 = unsafe extern "C" fn(usize, usize, Options, *mut usize, usize) -> i32;
/// 6.x: as 5.x, then a stream.
type TempSize6 =
    unsafe extern "C" fn(usize, usize, Options, *mut usize, usize, sys::CUstream) -> i32;
/// (compressed ptrs, compressed bytes, output buffer bytes, actual output bytes, chunks,
/// temp, temp bytes, output ptrs, options, statuses, stream) → status.
type DecompressAsync = unsafe extern "C" fn(
    *const *const c_void,
    *const usize,
    *const usize,
    *mut usize,
    usize,
    *mut c_void,
    usize,
    *const *mut c_void,
    Options,
    *mut i32,
    sys::CUstream,
) -> i32;

enum TempSize {
    V5(TempSize5),
    V6(TempSize6),
}

struct CodecFns {
    temp_size: TempSize,
    temp_sync: Option<TempSync>,
    decompress: DecompressAsync,
}

/// (compressed ptrs, compressed bytes, chunks, largest, &temp, total, options, statuses,
/// stream) → status: the temporary bytes these very chunks need (5.x and 6.x).
type TempSync = unsafe extern "C" fn(
    *const *const c_void,
    *const usize,
    usize,
    usize,
    *mut usize,
    usize,
    Options,
    *mut i32,
    sys::CUstream,
) -> i32;

/// A loaded nvCOMP.
pub struct Nvcomp {
    path: String,
    version: u32,
    codecs: [Option<CodecFns>; 3],
}

impl std::fmt::Debug for Nvcomp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nvcomp")
            .field("path", &self.path)
            .field("version", &self.version_string())
            .finish()
    }
}

// SAFETY: the struct holds plain function pointers into a library that is never unloaded,
// and nvCOMP's batched calls may be made from any thread.
unsafe impl Send for Nvcomp {}
// SAFETY: as above; nothing in it is mutated after loading.
unsafe impl Sync for Nvcomp {}

/// Above this, a call's temporary memory is what its pages need exactly, found by nvCOMP on the
/// device (a synchronisation), rather than its estimate from the sizes alone (for ZSTD about
/// three times the output).
pub const TEMP_ESTIMATE_MAX: usize = 64 << 20;

/// What the search found: the library, or why none was loaded.
pub type Found = std::result::Result<Option<Arc<Nvcomp>>, String>;

/// The process's nvCOMP, found once ([`ENV_NVCOMP`]): `Ok(None)` when it is not installed or
/// switched off, an error when `CUPARQUET_NVCOMP` names a library that does not load.
pub fn nvcomp() -> Result<Option<Arc<Nvcomp>>> {
    static FOUND: OnceLock<Found> = OnceLock::new();
    FOUND
        .get_or_init(|| find(crate::config::env::nvcomp().as_deref()))
        .clone()
        .map_err(|reason| {
            Error::setting(
                ENV_NVCOMP,
                crate::config::env::nvcomp().unwrap_or_default(),
                reason,
            )
        })
}

/// Finds nvCOMP as [`nvcomp`] does, for the setting `setting` (the variable's value).
pub fn find(setting: Option<&str>) -> Found {
    match setting.map(str::trim) {
        Some(s) if s.eq_ignore_ascii_case("off") || s == "0" || s.eq_ignore_ascii_case("none") => {
            Ok(None)
        }
        Some(s) if !s.is_empty() && !s.eq_ignore_ascii_case("auto") => {
            let p = Path::new(s);
            let candidates: Vec<PathBuf> = if p.is_dir() {
                LIBRARY_NAMES.iter().map(|n| p.join(n)).collect()
            } else {
                vec![p.to_path_buf()]
            };
            let mut why = Vec::new();
            for c in &candidates {
                if p.is_dir() && !c.exists() {
                    continue;
                }
                match Nvcomp::open(&c.to_string_lossy()) {
                    Ok(n) => return Ok(Some(Arc::new(n))),
                    Err(e) => why.push(e),
                }
            }
            if why.is_empty() {
                why.push(format!("no {} in {s}", LIBRARY_NAMES.join(" or ")));
            }
            Err(why.join("; "))
        }
        _ => Ok(search().map(Arc::new)),
    }
}

const LIBRARY_NAMES: [&str; 3] = ["libnvcomp.so.5", "libnvcomp.so.6", "libnvcomp.so"];

/// The first library of the search that loads (see the module docs).
fn search() -> Option<Nvcomp> {
    for name in LIBRARY_NAMES {
        if let Ok(n) = Nvcomp::open(name) {
            return Some(n);
        }
    }
    for dir in search_dirs() {
        for name in LIBRARY_NAMES {
            let p = dir.join(name);
            if p.exists() {
                if let Ok(n) = Nvcomp::open(&p.to_string_lossy()) {
                    return Some(n);
                }
            }
        }
    }
    None
}

/// Directories that may hold nvCOMP: CUDA installs, then the wheel's directory under Python's
/// package directories.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(v) = std::env::var_os(var) {
            dirs.push(PathBuf::from(v).join("lib64"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    let mut sites: Vec<PathBuf> = Vec::new();
    if let Some(pp) = std::env::var_os("PYTHONPATH") {
        sites.extend(std::env::split_paths(&pp));
    }
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var) {
            let v = PathBuf::from(v);
            if var == "CONDA_PREFIX" {
                dirs.push(v.join("lib"));
            }
            sites.extend(python_site_dirs(&v.join("lib")));
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        sites.extend(python_site_dirs(&PathBuf::from(home).join(".local/lib")));
    }
    for prefix in ["/usr/local/lib", "/usr/lib", "/usr/lib64"] {
        sites.extend(python_site_dirs(Path::new(prefix)));
    }
    sites.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    dirs.extend(sites.into_iter().map(|s| s.join("nvidia/libnvcomp/lib64")));
    dirs
}

/// `lib/python3.*/{site,dist}-packages` under `lib`.
fn python_site_dirs(lib: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(lib) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .flat_map(|e| {
            let p = e.path();
            [p.join("site-packages"), p.join("dist-packages")]
        })
        .collect();
    out.sort();
    out
}

/// A symbol of `handle`, as a function pointer of type `T`.
///
/// # Safety
/// `T` must be the function pointer type the symbol really has.
unsafe fn symbol<T: Copy>(handle: *mut c_void, name: &str) -> Option<T> {
    let c = CString::new(name).ok()?;
    // SAFETY: `handle` is a live dlopen handle and `c` a NUL-terminated name.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    if p.is_null() {
        return None;
    }
    debug_assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: a non-null symbol address reinterpreted as the function pointer type the caller
    // vouches for (same size as a pointer).
    Some(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a NUL-terminated string owned by libc, read at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

impl Nvcomp {
    /// Loads the library `name` (a file name for the loader's search, or a path) and its
    /// decompression entry points. The handle is never closed.
    fn open(name: &str) -> std::result::Result<Nvcomp, String> {
        let c = CString::new(name).map_err(|_| format!("{name}: not a library name"))?;
        // SAFETY: dlopen with a NUL-terminated name; loading runs the library's initialisers,
        // which is what loading nvCOMP means.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(format!("{name}: {}", dl_error()));
        }
        // SAFETY: nvcompGetProperties(nvcompProperties_t*) fills two uint32_t fields.
        let props: Option<GetProperties> = unsafe { symbol(handle, "nvcompGetProperties") };
        let Some(props) = props else {
            return Err(format!("{name}: no nvcompGetProperties (not nvCOMP?)"));
        };
        let mut p = [0u32; 2];
        // SAFETY: `p` is the two-u32 properties struct nvCOMP writes.
        let status = unsafe { props(p.as_mut_ptr()) };
        if status != 0 {
            return Err(format!("{name}: nvcompGetProperties returned {status}"));
        }
        let version = p[0];
        let major = version / 1000;
        if !(5..=6).contains(&major) {
            return Err(format!(
                "{name}: nvCOMP {} (cuparquet uses the 5.x and 6.x APIs)",
                version_string(version)
            ));
        }
        let mut codecs: [Option<CodecFns>; 3] = [None, None, None];
        for codec in NvcompCodec::ALL {
            let part = codec.symbol_part();
            let temp_size = if major >= 6 {
                let name = format!("nvcompBatched{part}DecompressGetTempSize");
                // SAFETY: the 6.x declaration (TempSize6).
                unsafe { symbol::<TempSize6>(handle, &name) }.map(TempSize::V6)
            } else {
                let name = format!("nvcompBatched{part}DecompressGetTempSizeAsync");
                // SAFETY: the 5.x declaration (TempSize5).
                unsafe { symbol::<TempSize5>(handle, &name) }.map(TempSize::V5)
            };
            let sync_name = format!("nvcompBatched{part}DecompressGetTempSizeSync");
            // SAFETY: the declaration shared by 5.x and 6.x (TempSync).
            let temp_sync = unsafe { symbol::<TempSync>(handle, &sync_name) };
            let name = format!("nvcompBatched{part}DecompressAsync");
            // SAFETY: the declaration shared by 5.x and 6.x (DecompressAsync).
            let decompress = unsafe { symbol::<DecompressAsync>(handle, &name) };
            if let (Some(temp_size), Some(decompress)) = (temp_size, decompress) {
                codecs[codec.index()] = Some(CodecFns {
                    temp_size,
                    temp_sync,
                    decompress,
                });
            }
        }
        if codecs.iter().all(Option::is_none) {
            return Err(format!(
                "{name}: nvCOMP {} without the batched decompressors",
                version_string(version)
            ));
        }
        Ok(Nvcomp {
            path: name.to_string(),
            version,
            codecs,
        })
    }

    /// The library as it was loaded (a name the loader resolved, or a path).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// `major.minor.patch`.
    pub fn version_string(&self) -> String {
        version_string(self.version)
    }

    /// The API generation: 5 or 6.
    pub fn api(&self) -> u32 {
        self.version / 1000
    }

    /// Whether this library decompresses `codec`.
    pub fn supports(&self, codec: NvcompCodec) -> bool {
        self.codecs[codec.index()].is_some()
    }

    /// The temporary bytes one call over `chunks` chunks needs, the largest `largest` and all
    /// `total` bytes of output.
    fn temp_bytes(
        &self,
        codec: NvcompCodec,
        chunks: usize,
        largest: usize,
        total: usize,
        stream: sys::CUstream,
    ) -> std::result::Result<usize, String> {
        let f = self.codecs[codec.index()]
            .as_ref()
            .ok_or_else(|| format!("nvCOMP {} has no {codec:?}", self.version_string()))?;
        let mut temp = 0usize;
        let status = match f.temp_size {
            // SAFETY: plain values and a place for the answer (5.x signature).
            TempSize::V5(g) => unsafe { g(chunks, largest, DEFAULT_OPTIONS, &mut temp, total) },
            // SAFETY: as above, with the stream the call will run on (6.x signature).
            TempSize::V6(g) => unsafe {
                g(chunks, largest, DEFAULT_OPTIONS, &mut temp, total, stream)
            },
        };
        if status != 0 {
            return Err(format!(
                "nvcompBatched{}DecompressGetTempSize: {}",
                codec.symbol_part(),
                status_name(status)
            ));
        }
        Ok(temp)
    }

    /// Decompresses every job `(source address, source bytes, destination address,
    /// destination bytes)` on the calling thread's decode stream in one call, and waits for
    /// it. Per job: nvCOMP's status (0: success) and the bytes it wrote.
    ///
    /// One call over all pages, not several smaller ones: a call lasts about as long as its
    /// slowest page (a page is one unit of nvCOMP's work), so calls in a row add up (measured on
    /// the H200, benches/RESULTS.md: the ZSTD lineitem file 144.5 ms in calls of 256 MiB, 87.8
    /// ms in one). The temporary memory is nvCOMP's estimate from the sizes where that is at
    /// most [`TEMP_ESTIMATE_MAX`]; above it, the exact need of these pages, which nvCOMP
    /// finds on the device (ZSTD: 0.41 of the estimate on that file).
    ///
    /// # Safety
    /// Every source span must be readable device memory of `gpu` and every destination span
    /// writable device memory of `gpu`, the destinations disjoint from each other and from the
    /// sources, all live until this returns.
    pub unsafe fn decompress(
        &self,
        gpu: &Arc<Gpu>,
        codec: NvcompCodec,
        jobs: &[(u64, u64, u64, u64)],
    ) -> Result<Vec<(i32, u64)>> {
        let f = self.codecs[codec.index()].as_ref().ok_or_else(|| Error::Device {
            device: format!("cuda:{}", gpu.ordinal()),
            reason: format!("nvCOMP {} has no {codec:?}", self.version_string()),
        })?;
        let fail = |what: String| Error::Device {
            device: format!("cuda:{}", gpu.ordinal()),
            reason: format!("nvCOMP {} ({}): {what}", self.version_string(), self.path),
        };
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let stream = gpu.decode_stream().raw();
        let n = jobs.len();
        let largest = jobs.iter().map(|j| j.3).max().unwrap_or(0).max(1) as usize;
        let total = jobs.iter().map(|j| j.3).sum::<u64>().max(1) as usize;
        // one table: source pointers, source sizes, output sizes, output pointers (8 bytes
        // each, per job), then the bytes written (8) and the statuses (4)
        let mut table = Vec::with_capacity(n * 44);
        for field in 0..4 {
            for j in jobs {
                let v = match field {
                    0 => j.0,
                    1 => j.1,
                    2 => j.3,
                    _ => j.2,
                };
                table.extend_from_slice(&v.to_le_bytes());
            }
        }
        table.resize(n * 44, 0);
        let mut dev_table = gpu.alloc(n * 44)?;
        dev_table.copy_from_host(0, &table)?;
        let base = dev_table.device_ptr();
        let at = |field: u64| base + field * 8 * n as u64;
        gpu.bind()?;
        let mut temp_len = self
            .temp_bytes(codec, n, largest, total, stream)
            .map_err(fail)?;
        if let (Some(exact), true) = (f.temp_sync, temp_len > TEMP_ESTIMATE_MAX) {
            // SAFETY: device arrays of the jobs' source pointers and sizes (`dev_table`, live
            // and written: its copy waited for itself); nvCOMP waits for its own work
            // on `stream` before it returns; no statuses asked for.
            let status = unsafe {
                exact(
                    at(0) as usize as *const *const c_void,
                    at(1) as usize as *const usize,
                    n,
                    largest,
                    &mut temp_len,
                    total,
                    DEFAULT_OPTIONS,
                    std::ptr::null_mut(),
                    stream,
                )
            };
            if status != 0 {
                return Err(fail(format!(
                    "nvcompBatched{}DecompressGetTempSizeSync: {}",
                    codec.symbol_part(),
                    status_name(status)
                )));
            }
        }
        let temp = gpu.alloc(temp_len.max(1))?;
        // SAFETY: the four arrays, the sizes written and the statuses are slices of
        // `dev_table`, `n` entries each; `temp` is at least the size nvCOMP asked for; the
        // spans behind the pointers are the caller's contract; every buffer outlives the wait
        // below.
        let status = unsafe {
            (f.decompress)(
                at(0) as usize as *const *const c_void,
                at(1) as usize as *const usize,
                at(2) as usize as *const usize,
                (base + 32 * n as u64) as usize as *mut usize,
                n,
                temp.device_ptr() as usize as *mut c_void,
                temp_len,
                at(3) as usize as *const *mut c_void,
                DEFAULT_OPTIONS,
                (base + 40 * n as u64) as usize as *mut i32,
                stream,
            )
        };
        gpu.synchronize_decode()?;
        if status != 0 {
            return Err(fail(format!(
                "nvcompBatched{}DecompressAsync: {}",
                codec.symbol_part(),
                status_name(status)
            )));
        }
        let back = dev_table.copy_to_host(n * 32..n * 44)?;
        let (sizes, statuses) = back.split_at(n * 8);
        Ok(statuses
            .chunks_exact(4)
            .zip(sizes.chunks_exact(8))
            .map(|(s, w)| {
                (
                    i32::from_le_bytes([s[0], s[1], s[2], s[3]]),
                    u64::from_le_bytes(w.try_into().unwrap_or([0; 8])),
                )
            })
            .collect())
    }
}

fn version_string(v: u32) -> String {
    format!("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100)
}

/// nvCOMP's name for a status.
pub fn status_name(status: i32) -> String {
    match status {
        0 => "success".into(),
        10 => "invalid value".into(),
        11 => "not supported".into(),
        12 => "cannot decompress (corrupt or truncated data)".into(),
        13 => "bad checksum".into(),
        14 => "cannot verify checksums".into(),
        15 => "output buffer too small".into(),
        16 => "wrong header length".into(),
        17 => "misaligned buffer".into(),
        18 => "chunk too large".into(),
        20 => "wrong input length".into(),
        21 => "batch too large".into(),
        1000 => "CUDA error".into(),
        10000 => "internal error".into(),
        s => format!("status {s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_and_missing_paths() {
        assert!(matches!(find(Some("off")), Ok(None)));
        assert!(matches!(find(Some("OFF")), Ok(None)));
        let e = find(Some("/nonexistent/libnvcomp.so.5")).unwrap_err();
        assert!(e.contains("/nonexistent/libnvcomp.so.5"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = find(Some(&dir.path().to_string_lossy())).unwrap_err();
        assert!(e.contains("no libnvcomp.so.5"), "{e}");
        // a library that is not nvCOMP
        let e = find(Some("libc.so.6")).unwrap_err();
        assert!(e.contains("not nvCOMP"), "{e}");
    }

    #[test]
    fn versions_and_statuses() {
        assert_eq!(version_string(5300), "5.3.0");
        assert_eq!(version_string(6000), "6.0.0");
        assert!(status_name(12).contains("corrupt"));
        assert_eq!(status_name(77), "status 77");
        assert_eq!(std::mem::size_of::<Options>(), 64);
    }
}
