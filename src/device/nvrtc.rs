//! Kernels compiled at run time by NVRTC, cached in memory and on disk.
//!
//! A kernel source is compiled once per (source, options, device architecture, NVRTC version)
//! to a CUBIN for the device's exact architecture (`sm_XY`), so loading never JIT-compiles. The
//! CUBIN is kept under the cache directory — `CUPARQUET_KERNEL_CACHE`, else
//! `$XDG_CACHE_HOME/cuparquet/kernels`, else `~/.cache/cuparquet/kernels` — named by a hash of
//! that key, written atomically (temporary file, then rename), and re-compiled when missing or
//! unloadable. A cache directory that cannot be written only costs a compile per process.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use cudarc::driver::result as cu;
use cudarc::driver::sys;
use cudarc::nvrtc::result as rtc;

use crate::device::gpu::{driver_error, Gpu, Stream};
use crate::error::{Error, Result};

pub use crate::config::ENV_KERNEL_CACHE;

/// The kernel cache directory in use ([`crate::config::env::kernel_cache_dir`]).
pub fn cache_dir() -> PathBuf {
    crate::config::env::kernel_cache_dir()
}

/// 64-bit FNV-1a over the parts, with a separator between them.
fn key_hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in p.iter().chain(std::iter::once(&0xffu8)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// NVRTC's version, or why it cannot be used. Probed once per process (probing loads the
/// library, which takes milliseconds).
pub fn nvrtc_version() -> Result<(i32, i32)> {
    static PROBE: std::sync::OnceLock<std::result::Result<(i32, i32), String>> =
        std::sync::OnceLock::new();
    PROBE
        .get_or_init(|| {
            probe_nvrtc().map_err(|e| match e {
                Error::Device { reason, .. } => reason,
                other => other.to_string(),
            })
        })
        .clone()
        .map_err(|reason| Error::Device {
            device: "nvrtc".into(),
            reason,
        })
}

fn probe_nvrtc() -> Result<(i32, i32)> {
    // SAFETY: only tries to dlopen the library by its known names.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Error::Device {
            device: "nvrtc".into(),
            reason: "libnvrtc.so not found on the loader path (install the CUDA runtime \
                     compiler, e.g. the cuda-nvrtc package, to decode on the GPU)"
                .into(),
        });
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present; both pointers are valid for writes.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| Error::Device {
            device: "nvrtc".into(),
            reason: format!("nvrtcVersion failed: {e:?}"),
        })?;
    Ok((major, minor))
}

/// Where a module came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModuleOrigin {
    /// Compiled by NVRTC in this process.
    Compiled,
    /// Loaded from the on-disk cache.
    DiskCache,
}

/// A loaded kernel module.
pub struct Module {
    gpu: Arc<Gpu>,
    raw: sys::CUmodule,
    name: String,
    origin: ModuleOrigin,
    cubin_path: PathBuf,
}

// SAFETY: a CUmodule is an opaque driver handle usable from any thread once loaded.
unsafe impl Send for Module {}
// SAFETY: function lookup and launches through the handle are thread-safe driver calls.
unsafe impl Sync for Module {}

impl fmt::Debug for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Module")
            .field("name", &self.name)
            .field("origin", &self.origin)
            .field("cubin", &self.cubin_path)
            .finish_non_exhaustive()
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        if self.gpu.bind().is_ok() {
            // SAFETY: the module is live and unloaded once, here.
            let _ = unsafe { cu::module::unload(self.raw) };
        }
    }
}

/// A kernel of a loaded [`Module`].
#[derive(Debug, Clone, Copy)]
pub struct Function {
    raw: sys::CUfunction,
}

// SAFETY: a CUfunction is an opaque handle, valid while its module is loaded (the Module is
// kept alive by whoever launches it).
unsafe impl Send for Function {}
// SAFETY: as above.
unsafe impl Sync for Function {}

impl Module {
    /// How the module was obtained when first loaded in this process (later loads of the same
    /// source return the same module).
    pub fn origin(&self) -> ModuleOrigin {
        self.origin
    }

    /// The cached CUBIN's path.
    pub fn cubin_path(&self) -> &Path {
        &self.cubin_path
    }

    /// The kernel `name` (an `extern "C"` function of the source).
    pub fn function(&self, name: &str) -> Result<Function> {
        let c = CString::new(name).map_err(|_| Error::Device {
            device: format!("cuda:{}", self.gpu.ordinal()),
            reason: format!("kernel name {name:?} contains a NUL byte"),
        })?;
        self.gpu.bind()?;
        // SAFETY: the module is loaded; the name is a valid C string.
        unsafe { cu::module::get_function(self.raw, c) }
            .map(|raw| Function { raw })
            .map_err(|e| driver_error(self.gpu.ordinal(), &format!("kernel {name}"), e))
    }

    /// Launches `f` on `stream`.
    ///
    /// # Safety
    /// `params` must point to values whose types and count match the kernel's parameters, and
    /// every device pointer among them must stay valid, with the sizes the kernel assumes,
    /// until the launch completes.
    pub unsafe fn launch(
        &self,
        f: Function,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_bytes: u32,
        stream: &Stream,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        self.gpu.bind()?;
        // SAFETY: forwarded to the caller's contract above; `f` belongs to this live module.
        unsafe { cu::launch_kernel(f.raw, grid, block, shared_bytes, stream.raw(), params) }
            .map_err(|e| driver_error(self.gpu.ordinal(), "cuLaunchKernel", e))
    }
}

type ModuleKey = (usize, u64);

/// Nanoseconds this process spent making kernel modules ready (read from the disk cache or
/// compiled, then loaded into a context): [`module_load_time`].
static MODULE_LOAD_NANOS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The time this process has spent so far making kernel modules ready: reading them from the
/// disk cache or compiling them with NVRTC, and loading them into the device's context. Each
/// module is made ready once per process and device; a load's report shows its share.
pub fn module_load_time() -> std::time::Duration {
    std::time::Duration::from_nanos(MODULE_LOAD_NANOS.load(std::sync::atomic::Ordering::Relaxed))
}

/// Adds the time since its start to [`MODULE_LOAD_NANOS`] when dropped (on every return).
struct Elapsed(std::time::Instant);

impl Drop for Elapsed {
    fn drop(&mut self) {
        MODULE_LOAD_NANOS.fetch_add(
            self.0.elapsed().as_nanos() as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

fn loaded() -> &'static Mutex<HashMap<ModuleKey, Arc<Module>>> {
    static LOADED: std::sync::OnceLock<Mutex<HashMap<ModuleKey, Arc<Module>>>> =
        std::sync::OnceLock::new();
    LOADED.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Gpu {
    /// The module built from `source` (CUDA C++, kernels `extern "C"`) for this device: from
    /// this process's modules, else the disk cache, else compiled by NVRTC with `options`
    /// (the architecture option is added). Compile errors carry NVRTC's log.
    pub fn load_module(
        self: &Arc<Self>,
        name: &str,
        source: &str,
        options: &[&str],
    ) -> Result<Arc<Module>> {
        let (major, minor) = self.compute_capability();
        let arch = format!("sm_{major}{minor}");
        // the key leaves NVRTC's version out: opening NVRTC costs a fresh process tens of
        // milliseconds, and a cached CUBIN the driver cannot load is compiled again below
        let mut parts: Vec<&[u8]> = vec![source.as_bytes(), arch.as_bytes()];
        parts.extend(options.iter().map(|o| o.as_bytes()));
        let hash = key_hash(&parts);
        let key = (self.ordinal(), hash);
        let mut cache = loaded().lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = cache.get(&key) {
            return Ok(Arc::clone(m));
        }
        let t = std::time::Instant::now();
        let _counted = Elapsed(t);
        let path = cache_dir().join(format!("{name}-{hash:016x}-{arch}.cubin"));
        self.bind()?;
        let from_disk = std::fs::read(&path)
            .ok()
            .and_then(|cubin| load_image(&cubin).ok());
        let (raw, origin) = match from_disk {
            Some(raw) => (raw, ModuleOrigin::DiskCache),
            None => {
                nvrtc_version()?;
                let cubin = compile(name, source, &arch, options)?;
                store(&path, &cubin);
                let raw = load_image(&cubin).map_err(|e| {
                    driver_error(self.ordinal(), &format!("loading kernel module {name}"), e)
                })?;
                (raw, ModuleOrigin::Compiled)
            }
        };
        let m = Arc::new(Module {
            gpu: Arc::clone(self),
            raw,
            name: name.to_string(),
            origin,
            cubin_path: path,
        });
        cache.insert(key, Arc::clone(&m));
        Ok(m)
    }
}

/// Compiles `source` to a CUBIN for `arch` (e.g. `sm_90`) without loading it: needs NVRTC,
/// not a GPU (used to check kernel sources on machines without one).
pub fn compile_cubin(name: &str, source: &str, arch: &str, options: &[&str]) -> Result<Vec<u8>> {
    nvrtc_version()?;
    compile(name, source, arch, options)
}

fn load_image(image: &[u8]) -> std::result::Result<sys::CUmodule, cudarc::driver::DriverError> {
    // cuModuleLoadData reads an ELF image; a copy with a trailing NUL keeps any PTX fallback
    // terminated too.
    let mut owned = image.to_vec();
    owned.push(0);
    // SAFETY: the context is bound by the caller; `owned` is a complete image that outlives the
    // call (the driver copies what it needs).
    unsafe { cu::module::load_data(owned.as_ptr().cast()) }
}

fn store(path: &Path, cubin: &[u8]) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("module"),
        std::process::id()
    ));
    if std::fs::write(&tmp, cubin).is_ok() && std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

fn compile(name: &str, source: &str, arch: &str, options: &[&str]) -> Result<Vec<u8>> {
    let fail = |what: String| Error::Device {
        device: "nvrtc".into(),
        reason: format!("compiling kernel module {name}: {what}"),
    };
    let src = CString::new(source).map_err(|_| fail("the source contains a NUL byte".into()))?;
    let cname = CString::new(format!("{name}.cu")).map_err(|_| fail("bad name".into()))?;
    let prog = rtc::create_program(&src, Some(&cname)).map_err(|e| fail(format!("{e:?}")))?;
    let mut opts: Vec<String> = vec![format!("--gpu-architecture={arch}")];
    opts.extend(options.iter().map(|o| o.to_string()));
    if opts.iter().any(|o| o.contains('\0')) {
        return Err(fail("an option contains a NUL byte".into()));
    }
    // SAFETY: `prog` was created above and is destroyed once at the end; options are NUL-free
    // (checked above, so cudarc's CString conversion cannot fail).
    let result = unsafe { rtc::compile_program(prog, &opts) };
    let out = match result {
        Err(e) => {
            // SAFETY: `prog` is live.
            let log = unsafe { rtc::get_program_log(prog) }
                .map(|l| {
                    let bytes: Vec<u8> =
                        l.iter().map(|&c| c as u8).take_while(|&c| c != 0).collect();
                    String::from_utf8_lossy(&bytes).into_owned()
                })
                .unwrap_or_default();
            Err(fail(format!("{e:?}\n{log}")))
        }
        Ok(()) => {
            let mut size = 0usize;
            // SAFETY: `prog` compiled successfully; `size` is valid for writes.
            unsafe { cudarc::nvrtc::sys::nvrtcGetCUBINSize(prog, &mut size) }
                .result()
                .map_err(|e| fail(format!("nvrtcGetCUBINSize: {e:?}")))?;
            let mut cubin = vec![0u8; size];
            // SAFETY: `cubin` holds exactly the size NVRTC reported.
            unsafe { cudarc::nvrtc::sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()) }
                .result()
                .map_err(|e| fail(format!("nvrtcGetCUBIN: {e:?}")))?;
            Ok(cubin)
        }
    };
    // SAFETY: `prog` is live and destroyed once, here.
    let _ = unsafe { rtc::destroy_program(prog) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_depends_on_every_part() {
        let a = key_hash(&[b"src", b"sm_90"]);
        assert_ne!(a, key_hash(&[b"src", b"sm_80"]));
        assert_ne!(a, key_hash(&[b"sr", b"csm_90"]));
        assert_eq!(a, key_hash(&[b"src", b"sm_90"]));
    }

    #[test]
    fn cache_dir_honours_the_variable() {
        // The variable is read at call time; this only checks the fallback chain is non-empty.
        assert!(!cache_dir().as_os_str().is_empty());
    }
}
