//! cuFile (GPUDirect Storage), loaded at run time.
//!
//! [`probe`] finds what cuFile offers — the library, `cuFileDriverOpen`, the driver's nvidia-fs
//! properties, the version — once per process, for the path policy and `cuparquet doctor`.
//! cudarc's loader panics when the library is missing, so presence is checked first; it looks
//! for `libcufile.so`, which some installs ship only as `libcufile.so.0` (then link
//! `libcufile.so` to it on the loader path).
//!
//! The driver stays open for the life of the process once opened (cuFile reads need it; closing
//! and reopening costs more than it saves). Files are registered once ([`register`]) and the
//! handle reused while the file is unchanged. `CufileReader` splits requests into `task_size`
//! pieces read in parallel with `cuFileRead` straight into the destination; a short read is
//! continued, an error names the file, the range and cuFile's code. [`counters`] reads cuFile's
//! Level-3 per-GPU statistics, which say whether nvidia-fs or cuFile's POSIX path served reads.

use std::fs::{File, OpenOptions};
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use cudarc::cufile::sys;
use rayon::prelude::*;

use crate::config::{CompatMode, IoSettings};
use crate::device::{gpu, DeviceBuffer, Gpu};
use crate::error::{Error, Result};
use crate::io::host::shared_pool;
use crate::io::policy::{nvidia_fs_fact, Fact, MachineFacts};
use crate::io::{records_from_spans, task_pieces, CufileCounters, IoPath, RequestRecord, Span};
use crate::plan::IoRequest;
use crate::source::ParquetFile;

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CufileProbe {
    /// libcufile could be loaded.
    pub library: Fact,
    /// `cuFileDriverOpen` succeeded.
    pub driver_open: Fact,
    /// `cuFileGetVersion`, when the library answers it.
    pub version: Option<String>,
    /// nvidia-fs as the driver reports it (`cuFileDriverGetProperties`), when open.
    pub driver_nvfs: Option<String>,
}

/// Directories where a `libcufile.so.0` without `libcufile.so` is looked for, to say so.
fn library_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var("LD_LIBRARY_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect();
    for d in [
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
    ] {
        dirs.push(PathBuf::from(d));
    }
    dirs
}

fn missing_library_detail() -> String {
    for d in library_dirs() {
        let so0 = d.join("libcufile.so.0");
        if so0.exists() && !d.join("libcufile.so").exists() {
            return format!(
                "libcufile.so not found, but {} is: link libcufile.so to it on the loader path",
                so0.display()
            );
        }
    }
    "libcufile.so not found on the loader path (install the GPUDirect Storage libraries; staged reads need none)".into()
}

/// "loaded from PATH" for the libcufile mapped into this process, from /proc/self/maps.
fn loaded_library() -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("libcufile.so"))
        .map_or_else(
            || "libcufile.so loaded".to_string(),
            |p| format!("libcufile loaded from {p}"),
        )
}

/// Probes cuFile once per process; never panics.
pub fn probe() -> &'static CufileProbe {
    static PROBE: OnceLock<CufileProbe> = OnceLock::new();
    PROBE.get_or_init(|| {
        // SAFETY: only tries to dlopen the library by name and reports whether that worked; no
        // cuFile function is called.
        let present = unsafe { cudarc::cufile::sys::is_culib_present() };
        if !present {
            let d = missing_library_detail();
            return CufileProbe {
                library: Fact::no(d.clone()),
                driver_open: Fact::no(format!("not tried: {d}")),
                version: None,
                driver_nvfs: None,
            };
        }
        let mut v: std::ffi::c_int = 0;
        // SAFETY: the library is loaded (checked above); `v` is a valid, writable c_int that
        // outlives the call.
        let version = unsafe { cudarc::cufile::sys::cuFileGetVersion(&mut v) }
            .result()
            .ok()
            .map(|()| format!("{}.{} ({v})", v / 1000, (v % 1000) / 10));
        // cuFile needs the CUDA driver initialised in the process.
        let cuda = crate::device::probe_cuda();
        if cuda.devices == 0 {
            return CufileProbe {
                library: Fact::yes(loaded_library()),
                driver_open: Fact::no(format!("not tried: {}", cuda.detail)),
                version,
                driver_nvfs: None,
            };
        }
        let (driver_open, driver_nvfs) = match cudarc::cufile::result::driver_open() {
            Ok(()) => {
                // SAFETY: registers a plain `extern "C"` function; atexit handlers run in
                // reverse order of registration, so this one runs before the destructors
                // libcufile registered when it was loaded (earlier, above).
                unsafe { libc::atexit(close_at_exit) };
                let nvfs = cudarc::cufile::result::driver_get_properties()
                    .ok()
                    .map(|p| {
                        format!(
                            "nvfs {}.{}, max direct I/O {} KiB",
                            p.nvfs.major_version, p.nvfs.minor_version, p.nvfs.max_direct_io_size
                        )
                    });
                (Fact::yes("cuFileDriverOpen succeeded"), nvfs)
            }
            Err(e) => (Fact::no(format!("cuFileDriverOpen failed: {e:?}")), None),
        };
        CufileProbe {
            library: Fact::yes(loaded_library()),
            driver_open,
            version,
            driver_nvfs,
        }
    })
}

/// The machine facts the path policy needs under `settings`: cuFile is probed (its library
/// loaded, `cuFileDriverOpen` called) only where the policy may use it — `compat_mode=off`, or
/// `auto` with nvidia-fs loaded. Elsewhere the facts say it was not probed: opening the driver
/// costs time at every start, and a process that also runs another cuFile user (KvikIO, cuDF)
/// is better off without a second opener that will never read through it.
pub fn machine_facts_for(settings: &IoSettings) -> MachineFacts {
    let nvidia_fs = nvidia_fs_fact();
    let why = match settings.compat_mode {
        CompatMode::Off => None,
        CompatMode::Auto if nvidia_fs.ok => None,
        CompatMode::Auto => {
            Some("not probed: compat_mode=auto uses cuFile only where nvidia-fs is loaded")
        }
        CompatMode::On => Some("not probed: compat_mode=on never uses cuFile"),
    };
    match why {
        None => machine_facts(),
        Some(why) => MachineFacts {
            libcufile: Fact::no(why),
            driver_open: Fact::no(why),
            nvidia_fs,
            registration: None,
        },
    }
}

/// The machine facts the path policy needs (registration not yet tried), cuFile probed.
pub fn machine_facts() -> MachineFacts {
    let p = probe();
    MachineFacts {
        libcufile: p.library.clone(),
        driver_open: p.driver_open.clone(),
        nvidia_fs: nvidia_fs_fact(),
        registration: None,
    }
}

/// A file registered with cuFile; deregistered when the last user drops it.
#[derive(Debug)]
pub struct CufileHandle {
    raw: sys::CUfileHandle_t,
    direct: bool,
    // Kept open for the life of the handle (cuFile reads through its descriptor).
    _file: File,
}

// SAFETY: a CUfileHandle_t is an opaque handle that cuFile allows to be used from many threads
// at once (its reads are thread-safe).
unsafe impl Send for CufileHandle {}
// SAFETY: as above.
unsafe impl Sync for CufileHandle {}

impl CufileHandle {
    /// Whether the descriptor was opened `O_DIRECT` (required for the nvidia-fs path).
    pub fn direct(&self) -> bool {
        self.direct
    }
}

impl Drop for CufileHandle {
    fn drop(&mut self) {
        // SAFETY: the handle was registered once and is deregistered once, here; no read uses
        // it any more (readers hold an Arc to it).
        unsafe { sys::cuFileHandleDeregister(self.raw) };
    }
}

/// Registered files kept for reuse, at most this many.
const MAX_HANDLES: usize = 64;

type HandleKey = (u64, u64, u64, i64, i64);

static HANDLES: Mutex<Vec<(HandleKey, Arc<CufileHandle>)>> = Mutex::new(Vec::new());

/// cuFile calls (registrations and reads) in progress, and whether the process is exiting.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
static CLOSING: AtomicBool = AtomicBool::new(false);

/// Counts a cuFile call in progress; refused once the process is exiting.
struct InFlight;

impl InFlight {
    fn enter() -> Option<Self> {
        IN_FLIGHT.fetch_add(1, SeqCst);
        if CLOSING.load(SeqCst) {
            IN_FLIGHT.fetch_sub(1, SeqCst);
            return None;
        }
        Some(InFlight)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, SeqCst);
    }
}

/// Runs at process exit, before libcufile's and the CUDA driver's own teardown: deregisters the
/// cached file handles and closes the driver, so that cuFile never tears down state that
/// refers to a CUDA context already destroyed. When another thread is still inside a cuFile
/// call (a program that exits without joining its readers), nothing is closed: leaking is
/// safer than closing under a running read.
extern "C" fn close_at_exit() {
    CLOSING.store(true, SeqCst);
    if IN_FLIGHT.load(SeqCst) != 0 {
        return;
    }
    let Ok(mut h) = HANDLES.try_lock() else {
        return;
    };
    let handles = std::mem::take(&mut *h);
    drop(h);
    drop(handles);
    // SAFETY: the driver was opened by `probe` (this handler is registered only then); no
    // cuFile call is in progress and none can start (CLOSING is set before IN_FLIGHT is read,
    // and callers check CLOSING after counting themselves in).
    unsafe { sys::cuFileDriverClose_v2() };
}

/// Registers `file` with cuFile (once per unchanged file per process). The error is the fact
/// the policy records: the cuFile code and what usually causes it.
pub fn register(file: &ParquetFile) -> std::result::Result<Arc<CufileHandle>, Fact> {
    let Some(_guard) = InFlight::enter() else {
        return Err(Fact::no("the process is exiting: cuFile is closed"));
    };
    let p = probe();
    if !p.library.ok || !p.driver_open.ok {
        return Err(Fact::no(format!(
            "cuFile unusable: {}",
            if p.library.ok {
                &p.driver_open.detail
            } else {
                &p.library.detail
            }
        )));
    }
    let md = file
        .file()
        .ok_or_else(|| Fact::no("a remote object is read by GETs, not cuFile"))?
        .metadata()
        .map_err(|e| Fact::no(format!("stat {}: {e}", file.path().display())))?;
    let key = (md.dev(), md.ino(), md.len(), md.mtime(), md.mtime_nsec());
    let mut handles = HANDLES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, h)) = handles.iter().find(|(k, _)| *k == key) {
        return Ok(Arc::clone(h));
    }
    let (f, direct) = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(file.path())
    {
        Ok(f) => (f, true),
        Err(_) => match File::open(file.path()) {
            Ok(f) => (f, false),
            Err(e) => return Err(Fact::no(format!("open {}: {e}", file.path().display()))),
        },
    };
    // The handle reads through its own descriptor: it must be the file that was planned.
    match f.metadata() {
        Ok(m) if (m.dev(), m.ino()) == (md.dev(), md.ino()) => {}
        _ => {
            return Err(Fact::no(format!(
                "{} was replaced since it was opened; not registering the new file",
                file.path().display()
            )))
        }
    }
    let descr = sys::CUfileDescr_t {
        type_: sys::CUfileFileHandleType::CU_FILE_HANDLE_TYPE_OPAQUE_FD,
        handle: sys::CUfileDescr_t__bindgen_ty_1 { fd: f.as_raw_fd() },
        fs_ops: std::ptr::null(),
    };
    let mut raw: sys::CUfileHandle_t = std::ptr::null_mut();
    // SAFETY: the library is loaded and the driver open (checked above); `descr` describes an
    // open descriptor that the handle keeps open; `raw` is valid for writes.
    let r = unsafe { sys::cuFileHandleRegister(&mut raw, &descr as *const _ as *mut _) };
    if r.err != sys::CUfileOpError::CU_FILE_SUCCESS {
        let hint = " (see cufile.log; on VMs the usual cause is a block device without a udev \
                    record: cufile.log says \"udev property not found: ID_FS_USAGE\")";
        return Err(Fact::no(format!(
            "cuFileHandleRegister failed for {}: {:?}{hint}",
            file.path().display(),
            r.err
        )));
    }
    let h = Arc::new(CufileHandle {
        raw,
        direct,
        _file: f,
    });
    if handles.len() >= MAX_HANDLES {
        handles.remove(0);
    }
    handles.push((key, Arc::clone(&h)));
    Ok(h)
}

/// Turns on cuFile's Level-3 statistics once per process; false when cuFile refuses.
fn stats_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        if !probe().driver_open.ok {
            return false;
        }
        // SAFETY: the library is loaded and the driver open; both calls take no pointers.
        unsafe {
            sys::cuFileSetStatsLevel(3).err == sys::CUfileOpError::CU_FILE_SUCCESS
                && sys::cuFileStatsStart().err == sys::CUfileOpError::CU_FILE_SUCCESS
        }
    })
}

/// cuFile's Level-3 counters now, summed over its GPUs; `None` when statistics are off.
pub fn counters() -> Option<CufileCounters> {
    if !stats_enabled() {
        return None;
    }
    let mut st = std::mem::MaybeUninit::<sys::CUfileStatsLevel3_t>::zeroed();
    // SAFETY: `st` is a zeroed, writable struct of the layout the bindings were generated for
    // (the cargo CUDA-version feature picks it).
    let r = unsafe { sys::cuFileGetStatsL3(st.as_mut_ptr()) };
    if r.err != sys::CUfileOpError::CU_FILE_SUCCESS {
        return None;
    }
    // SAFETY: zero-initialised and then filled by cuFile; all fields are plain integers.
    let st = unsafe { st.assume_init() };
    let n = (st.num_gpus as usize).min(st.per_gpu_stats.len());
    let mut c = CufileCounters::default();
    for g in &st.per_gpu_stats[..n] {
        c.reads += g.n_total_reads;
        c.nvfs += g.n_nvfs_reads;
        c.posix += g.n_posix_reads;
        c.bytes += g.read_bytes;
        c.errors += g.n_reads_err;
    }
    Some(c)
}

/// The difference of two counter snapshots.
pub(crate) fn counters_delta(before: &CufileCounters, after: &CufileCounters) -> CufileCounters {
    CufileCounters {
        reads: after.reads.saturating_sub(before.reads),
        nvfs: after.nvfs.saturating_sub(before.nvfs),
        posix: after.posix.saturating_sub(before.posix),
        bytes: after.bytes.saturating_sub(before.bytes),
        errors: after.errors.saturating_sub(before.errors),
    }
}

/// The path cuFile's reads took, from its counters (and, without counters, from whether
/// nvidia-fs exists at all), with the evidence in words.
pub(crate) fn attribute(counters: Option<&CufileCounters>, nvidia_fs: bool) -> (IoPath, String) {
    match counters {
        Some(c) if c.nvfs > 0 && c.posix == 0 => (
            IoPath::Gds,
            format!("cuFile counters: {} nvfs reads, 0 posix", c.nvfs),
        ),
        Some(c) if c.posix > 0 => (
            IoPath::CufilePosix,
            format!(
                "cuFile counters: {} posix reads, {} nvfs: cuFile served reads through its POSIX compat path",
                c.posix, c.nvfs
            ),
        ),
        _ if !nvidia_fs => (
            IoPath::CufilePosix,
            "nvidia-fs is not loaded, so cuFile can only have used its POSIX compat path".into(),
        ),
        _ => (
            IoPath::Gds,
            "cuFile statistics unavailable; nvidia-fs is loaded (path not verified)".into(),
        ),
    }
}

/// Reads requests straight into device memory with `cuFileRead`.
#[derive(Debug, Clone)]
pub(crate) struct CufileReader {
    settings: IoSettings,
    gpu: Arc<Gpu>,
    pool: Arc<rayon::ThreadPool>,
}

impl CufileReader {
    /// A reader for device `ordinal` on the process-wide pool of `settings.nthreads` threads.
    pub(crate) fn new(settings: IoSettings, ordinal: usize) -> Result<Self> {
        settings.validate()?;
        let pool = shared_pool(settings.nthreads)?;
        Ok(CufileReader {
            gpu: gpu(ordinal)?,
            settings,
            pool,
        })
    }

    /// Reads the `selected` requests into `dest` through `handle`; records carry `path`.
    /// Destinations are assumed checked by the caller.
    pub(crate) fn read_selected(
        &self,
        file: &ParquetFile,
        handle: &CufileHandle,
        requests: &[IoRequest],
        selected: &[usize],
        dest: &DeviceBuffer,
        path: IoPath,
    ) -> Result<Vec<RequestRecord>> {
        let pieces = task_pieces(requests, selected, self.settings.task_size);
        let spans: Vec<Result<Span>> = self.pool.install(|| {
            pieces
                .par_iter()
                .map(|(i, range, dest_off)| {
                    let t = Instant::now();
                    self.gpu.bind()?;
                    read_piece(file, handle, range.clone(), dest, *dest_off)?;
                    Ok((*i, t, Instant::now(), 1))
                })
                .collect()
        });
        let spans = spans.into_iter().collect::<Result<Vec<Span>>>()?;
        Ok(records_from_spans(
            requests,
            selected.iter().copied(),
            spans,
            path,
        ))
    }
}

/// `cuFileRead` of `range` to `dest[dest_off..]`, continuing after short reads.
fn read_piece(
    file: &ParquetFile,
    handle: &CufileHandle,
    range: Range<u64>,
    dest: &DeviceBuffer,
    dest_off: u64,
) -> Result<()> {
    let len = range.end - range.start;
    if dest_off + len > dest.len() as u64 {
        return Err(Error::CuFile {
            path: file.path().to_path_buf(),
            range: Some(range),
            reason: format!(
                "destination {dest_off}..{} is outside the {}-byte device buffer",
                dest_off + len,
                dest.len()
            ),
        });
    }
    let Some(_guard) = InFlight::enter() else {
        return Err(Error::CuFile {
            path: file.path().to_path_buf(),
            range: Some(range),
            reason: "the process is exiting: cuFile is closed".into(),
        });
    };
    let mut done = 0u64;
    while done < len {
        let want = (len - done) as usize;
        let n = if crate::error::fault::hit(crate::error::fault::Site::CufileRead) {
            // a fault injected for tests (crate::error::fault): CU_FILE_IO_ERROR
            -5011
        } else {
            // SAFETY: the handle is registered and live; the destination `dest_off + done ..
            // + want` lies inside the live device allocation (checked above); the calling
            // thread has the device's context bound; cuFileRead is synchronous.
            unsafe {
                sys::cuFileRead(
                    handle.raw,
                    dest.device_ptr() as *mut std::ffi::c_void,
                    want,
                    (range.start + done) as sys::off_t,
                    (dest_off + done) as sys::off_t,
                )
            }
        };
        let at = range.start + done..range.end;
        if n > 0 {
            done += n as u64;
        } else if n == 0 {
            return Err(Error::CuFile {
                path: file.path().to_path_buf(),
                range: Some(at),
                reason: format!(
                    "cuFileRead returned 0 bytes: the file ({} bytes) ended before the range did",
                    file.len()
                ),
            });
        } else if n == -1 {
            return Err(Error::CuFile {
                path: file.path().to_path_buf(),
                range: Some(at),
                reason: format!("cuFileRead failed: {}", std::io::Error::last_os_error()),
            });
        } else {
            return Err(Error::CuFile {
                path: file.path().to_path_buf(),
                range: Some(at),
                reason: format!("cuFileRead failed with cuFile error {}", -n),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cufile_is_probed_only_where_the_policy_may_use_it() {
        let with = |compat_mode| IoSettings {
            compat_mode,
            ..IoSettings::default()
        };
        let f = machine_facts_for(&with(CompatMode::On));
        assert!(!f.libcufile.ok && !f.driver_open.ok);
        assert!(
            f.driver_open.detail.contains("never uses cuFile"),
            "{:?}",
            f
        );
        let f = machine_facts_for(&with(CompatMode::Auto));
        if nvidia_fs_fact().ok {
            assert!(!f.driver_open.detail.starts_with("not probed"), "{:?}", f);
        } else {
            // this machine has no nvidia-fs: auto stages, and says why, without cuFile
            assert!(f.driver_open.detail.starts_with("not probed"), "{:?}", f);
            let d = crate::io::policy::decide(
                &with(CompatMode::Auto),
                &f,
                crate::io::policy::Target::Device,
                std::path::Path::new("f.parquet"),
                0..1 << 20,
            )
            .unwrap();
            assert_eq!(d.path, crate::io::policy::PlannedPath::Staged);
            assert!(d.reason.contains("nvidia-fs not loaded"), "{}", d.reason);
        }
        // off always probes: its errors name what cuFile lacks
        let f = machine_facts_for(&with(CompatMode::Off));
        assert!(!f.driver_open.detail.starts_with("not probed"), "{:?}", f);
    }

    #[test]
    fn attribution_follows_the_counters() {
        let c = |nvfs, posix| CufileCounters {
            reads: nvfs + posix,
            nvfs,
            posix,
            ..CufileCounters::default()
        };
        assert_eq!(attribute(Some(&c(10, 0)), true).0, IoPath::Gds);
        let (p, why) = attribute(Some(&c(0, 7)), false);
        assert_eq!(p, IoPath::CufilePosix);
        assert!(why.contains("7 posix reads"), "{why}");
        // mixed: never claimed as GDS
        assert_eq!(attribute(Some(&c(3, 1)), true).0, IoPath::CufilePosix);
        assert_eq!(attribute(None, false).0, IoPath::CufilePosix);
        let (p, why) = attribute(None, true);
        assert_eq!(p, IoPath::Gds);
        assert!(why.contains("not verified"), "{why}");
        let d = counters_delta(&c(1, 2), &c(4, 2));
        assert_eq!((d.nvfs, d.posix, d.reads), (3, 0, 3));
    }

    #[test]
    fn probe_never_panics_and_explains() {
        let p = probe();
        assert!(!p.library.detail.is_empty());
        if !p.library.ok {
            assert!(!p.driver_open.ok);
            assert!(
                p.library.detail.contains("libcufile.so"),
                "{}",
                p.library.detail
            );
        }
        let f = machine_facts();
        assert_eq!(f.libcufile, p.library);
        assert!(f.registration.is_none());
    }
}
